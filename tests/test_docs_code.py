"""Every Python code block of README.md and of the Sphinx sources (docs/) runs.

The blocks of one file run in order in one namespace (a later block may use the names an
earlier one defined, as a reader would), in a temporary working directory:

* Markdown: fenced blocks opened with ```` ```python ```` (or ``py``);
* reStructuredText: ``.. code-block:: python`` (also ``.. code::``, ``.. sourcecode::``,
  language ``python``, ``py``, ``pycon`` or ``ipython``), and doctest paragraphs
  (``>>>`` lines, with their expected output checked by :mod:`doctest`).

Shell blocks (``bash``, ``console`` ...) are not run; the command line has its own tests.

**Skipping a block.** A block that needs the network or a long run can be marked, on the
last non-blank line before it, with a comment that the rendered page does not show:
``<!-- doc-test: skip -->`` in Markdown, ``.. doc-test: skip`` in reStructuredText. The
block is then reported as skipped, and the blocks after it still run.
"""

import contextlib
import doctest
import io
import linecache
import re
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SKIP_MARK = "doc-test: skip"
PYTHON_LANGS = {"python", "py", "python3", "pycon", "ipython"}

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
_RST_DIRECTIVE = re.compile(
    r"^(?P<indent>\s*)\.\.\s+(?:code-block|code|sourcecode)::\s*(?P<lang>[\w+-]*)\s*$"
)


def doc_files():
    """README.md and the hand-written Sphinx sources (generated pages excluded)."""
    files = [ROOT / "README.md"]
    files += sorted((ROOT / "docs").glob("*.rst"))
    files += sorted((ROOT / "docs" / "user_guide").glob("*.rst"))
    return [f for f in files if f.name != "sg_execution_times.rst"]


def _marked_skip(lines, index):
    """Whether the last non-blank line before ``lines[index]`` is the skip mark."""
    for line in reversed(lines[:index]):
        if line.strip():
            return SKIP_MARK in line and line.lstrip().startswith(("<!--", ".."))
    return False


def _markdown_blocks(lines):
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m["fence"], m["lang"].lower(), i
        i += 1
        body = []
        while i < len(lines) and not lines[i].lstrip().startswith(fence):
            body.append(lines[i])
            i += 1
        i += 1  # the closing fence
        if lang in PYTHON_LANGS:
            kind = "doctest" if body and body[0].lstrip().startswith(">>>") else "code"
            yield start + 1, kind, "\n".join(body), _marked_skip(lines, start)


def _rst_blocks(lines):
    i = 0
    while i < len(lines):
        m = _RST_DIRECTIVE.match(lines[i])
        if m:
            lang, start, indent = m["lang"].lower(), i, len(m["indent"])
            i += 1
            while i < len(lines) and (  # the directive's options, then a blank line
                not lines[i].strip() or lines[i].strip().startswith(":")
            ) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
                i += 1
            body = []
            while i < len(lines) and (
                not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent
            ):
                body.append(lines[i])
                i += 1
            text = textwrap.dedent("\n".join(body)).strip("\n")
            if lang in PYTHON_LANGS:
                kind = "doctest" if text.lstrip().startswith(">>>") else "code"
                yield start + 1, kind, text, _marked_skip(lines, start)
            continue
        if lines[i].lstrip().startswith(">>>"):  # a doctest paragraph
            start, body = i, []
            while i < len(lines) and lines[i].strip():
                body.append(lines[i])
                i += 1
            yield start + 1, "doctest", textwrap.dedent("\n".join(body)), _marked_skip(
                lines, start
            )
            continue
        i += 1


def extract_blocks(text, suffix):
    """``[(line, kind, source, skip)]``: the Python blocks of a document, in order.

    ``kind`` is ``"code"`` (run as a script) or ``"doctest"`` (``>>>`` lines, output
    checked); ``line`` is the 1-based line of the block's opening.
    """
    lines = text.splitlines()
    blocks = _markdown_blocks(lines) if suffix == ".md" else _rst_blocks(lines)
    return list(blocks)


def run_blocks(blocks, name, namespace=None):
    """Run the blocks in order in one namespace; return the lines of the skipped ones."""
    namespace = {"__name__": "__main__"} if namespace is None else namespace
    skipped = []
    for line, kind, source, skip in blocks:
        if skip:
            skipped.append(line)
            continue
        where = f"{name}:{line}"
        out = io.StringIO()
        if kind == "code":
            # the block's lines in tracebacks, as for a file
            linecache.cache[where] = (len(source), None, source.splitlines(True), where)
            code = compile(source, where, "exec")
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        else:
            test = doctest.DocTestParser().get_doctest(source, namespace, where, name, line)
            runner = doctest.DocTestRunner(
                optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
            )
            runner.run(test, out=out.write, clear_globs=False)
            if runner.failures:
                raise AssertionError(f"doctest block at {where} failed:\n{out.getvalue()}")
    return skipped


@pytest.fixture
def docs_env(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # blocks that write files write them here
    monkeypatch.setenv("MPLBACKEND", "Agg")


@pytest.mark.parametrize("path", doc_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_code_blocks_run(path, docs_env):
    blocks = extract_blocks(path.read_text(encoding="utf-8"), path.suffix)
    if not blocks:
        pytest.skip("no Python code block")
    skipped = run_blocks(blocks, str(path.relative_to(ROOT)))
    if skipped:
        pytest.skip(f"blocks at lines {skipped} are marked '{SKIP_MARK}'")


def test_readme_and_user_guide_have_blocks_to_run():
    # guards the extraction itself: the documents' known blocks are found
    found = {p.name: extract_blocks(p.read_text(encoding="utf-8"), p.suffix) for p in doc_files()}
    assert [kind for _, kind, _, _ in found["README.md"]] == ["code"]
    assert len(found["quickstart.rst"]) == 1 and len(found["partitions.rst"]) >= 2
    for name, blocks in found.items():
        for line, kind, source, _ in blocks:
            if kind == "code":
                compile(source, f"{name}:{line}", "exec")  # whole, dedented blocks


# ---------------------------------------------------------------------- the extractor
MARKDOWN = """\
Text.

```bash
exit 1
```

```python
x = 1
```

<!-- doc-test: skip -->
```python
raise RuntimeError("network")
```

```py
>>> x + 1
2
```
"""

RST = """\
Text::

   not code

.. code-block:: bash

   exit 1

.. code-block:: python
   :caption: one

   x = 1
   if x:
       x += 1

.. doc-test: skip

.. code-block:: python

   raise RuntimeError("long")

>>> x
2

Text after.
"""


def test_extractor_finds_python_blocks_only_and_honours_the_skip_mark():
    md = extract_blocks(MARKDOWN, ".md")
    assert [(kind, skip) for _, kind, _, skip in md] == [
        ("code", False), ("code", True), ("doctest", False)
    ]
    assert run_blocks(md, "md") == [md[1][0]]
    rst = extract_blocks(RST, ".rst")
    assert [(kind, skip) for _, kind, _, skip in rst] == [
        ("code", False), ("code", True), ("doctest", False)
    ]
    assert rst[0][2] == "x = 1\nif x:\n    x += 1"
    assert run_blocks(rst, "rst") == [rst[1][0]]


def test_a_failing_block_fails_with_its_location():
    with pytest.raises(ZeroDivisionError):
        run_blocks(extract_blocks("```python\n1 / 0\n```\n", ".md"), "bad.md")
    bad_doctest = extract_blocks(">>> 1 + 1\n3\n", ".rst")
    with pytest.raises(AssertionError, match="bad.rst:1"):
        run_blocks(bad_doctest, "bad.rst")
