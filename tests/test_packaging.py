"""What a package index and a source distribution show: the README's links and the
manifest.

* The README is the project's page on a package index, where a relative link or image
  has nothing to point to: every link target and image source is an absolute URL.
* The source distribution carries what the test suite reads (MANIFEST.in): every file git
  tracks under ``tests/``, ``docs/``, ``benchmarks/`` and ``tools/`` is matched by the
  manifest, and no build output is. Checked in a git checkout; an unpacked source
  distribution has no git index to compare with.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED_DIRS = ("tests", "docs", "benchmarks", "tools")
_MD_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)")
_HTML_TARGET = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']""")


def readme_targets(text):
    """Targets of the Markdown links and images and of HTML src/href, code excluded."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)  # fenced blocks
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code
    return _MD_LINK.findall(text) + _HTML_TARGET.findall(text)


def test_readme_links_are_absolute():
    targets = readme_targets((ROOT / "README.md").read_text(encoding="utf-8"))
    assert targets, "no link found: the extraction is broken"
    relative = [t for t in targets if not re.match(r"https?://", t) and not t.startswith("#")]
    assert relative == [], f"relative links in README.md (broken on a package index): {relative}"


def test_readme_link_extraction():
    text = ("![a](docs/x.png) [b](https://e.org/b) `[c](not/a/link)`\n"
            "```\n[d](in/code)\n```\n<img src='rel.png'>\n")
    assert readme_targets(text) == ["docs/x.png", "https://e.org/b", "rel.png"]


def tracked_files():
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--", *SHIPPED_DIRS], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        out = ""
    files = [f for f in out.split("\0") if f]
    if not files:
        pytest.skip("not a git checkout (an unpacked source distribution): "
                    "no tracked files to compare MANIFEST.in with")
    return files


def manifest_files(candidates):
    """The candidates MANIFEST.in selects, as setuptools' sdist selects them."""
    filelist = pytest.importorskip("setuptools._distutils.filelist")
    fl = filelist.FileList()
    fl.set_allfiles(list(candidates))
    for line in (ROOT / "MANIFEST.in").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            fl.process_template_line(line)
    return set(fl.files)


def test_manifest_ships_every_tracked_file_the_tests_read():
    tracked = tracked_files()
    missing = sorted(set(tracked) - manifest_files(tracked))
    assert missing == [], f"tracked files MANIFEST.in leaves out of the sdist: {missing}"


def test_manifest_leaves_build_outputs_out():
    outputs = ["docs/_build/html/index.html", "docs/generated/sklearn_orfit.QREWRLSRegressor.rst",
               "docs/auto_examples/plot_orfit_mlp.py", "docs/sg_execution_times.rst",
               "benchmarks/out/bench_local_run.json", "benchmarks/out/figure.png",
               "tests/__pycache__/conftest.cpython-312.pyc"]
    shipped = manifest_files(outputs + ["LICENSE", "README.md", "docs/api.rst"])
    assert shipped == {"LICENSE", "README.md", "docs/api.rst"}
