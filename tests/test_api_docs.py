"""The API reference documents every public method, inherited ones included.

``docs/api.rst`` generates one page a class from the template it names. A template name
Sphinx does not find falls back, silently, to autosummary's default, which lists no
methods; inherited methods (``fit``, ``partial_fit``, ``predict`` come from the streaming
mixins, ``score`` and ``get_params`` from scikit-learn) appear only when autodoc is asked
for them. So the tests build the page of ``QREWRLSRegressor`` as ``docs/api.rst`` asks
for it, with the configuration of ``docs/conf.py`` (its templates path, its docstring
hooks; the gallery left out), warnings reported, and read the methods off the HTML: a
few seconds. The full build (``python -m sphinx -W --keep-going -b html docs
docs/_build/html``, gallery included) is the slow test at the end.

Needs Sphinx and numpydoc (the ``docs`` extra); skipped without them.
"""

import io
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
pytestmark = pytest.mark.skipif(not (DOCS / "conf.py").is_file(),
                                reason="no docs/ (not shipped with this copy of the tests)")

# what a reader of a streaming estimator's page must find there
STREAMING_METHODS = {"fit", "partial_fit", "predict", "learn_one", "predict_one",
                     "prequential_predict", "score", "get_params", "set_params"}
_METHOD_ID = re.compile(r'<dl class="py method">\s*<dt[^>]*\bid="([^"]+)"')


def page_methods(html, qualname):
    """Names of the methods documented on a class's HTML page (autodoc entries)."""
    prefix = qualname + "."
    return {i[len(prefix):] for i in _METHOD_ID.findall(html) if i.startswith(prefix)}


def api_template(name):
    """The ``:template:`` of the autosummary block of docs/api.rst that lists ``name``."""
    text = (DOCS / "api.rst").read_text(encoding="utf-8")
    for block in re.split(r"^\.\. autosummary::", text, flags=re.M)[1:]:
        body = block.split("\n\n", 2)
        entries = body[1].split() if len(body) > 1 else []
        if name in entries:
            m = re.search(r"^\s+:template:\s*(\S+)", body[0], flags=re.M)
            return m.group(1) if m else None
    raise AssertionError(f"{name} is not in docs/api.rst")


def test_page_methods_reads_autodoc_entries():
    html = ('<dl class="py method">\n<dt class="sig" id="m.C.fit">'
            '<dl class="py attribute">\n<dt class="sig" id="m.C.coef_">'
            '<dl class="py method">\n<dt class="sig" id="m.D.fit">')
    assert page_methods(html, "m.C") == {"fit"}


def test_api_template_reads_the_block_of_a_name():
    assert api_template("QREWRLSRegressor") == api_template("StreamingPipeline")
    assert api_template("prequential_predict") != api_template("QREWRLSRegressor")


@pytest.fixture(scope="module")
def qrewrls_page(tmp_path_factory):
    """The QREWRLSRegressor page, built as docs/api.rst and docs/conf.py build it."""
    pytest.importorskip("sphinx", reason="Sphinx is in the docs extra")
    pytest.importorskip("numpydoc", reason="numpydoc is in the docs extra")
    from sphinx.application import Sphinx

    src = tmp_path_factory.mktemp("api_docs")
    (src / "conf.py").write_text(textwrap.dedent(f"""\
        import runpy
        globals().update({{k: v for k, v in runpy.run_path({str(DOCS / "conf.py")!r}).items()
                          if not k.startswith("__")}})
        extensions = [e for e in extensions if not e.startswith("sphinx_gallery")]
        templates_path = [{str(DOCS)!r} + "/" + p for p in templates_path]
        html_static_path = []
        """), encoding="utf-8")
    (src / "index.rst").write_text(textwrap.dedent(f"""\
        API
        ===

        .. currentmodule:: sklearn_orfit

        .. autosummary::
           :toctree: generated
           :template: {api_template("QREWRLSRegressor")}

           QREWRLSRegressor
        """), encoding="utf-8")
    warnings = io.StringIO()
    app = Sphinx(str(src), str(src), str(src / "_build"), str(src / "_doctrees"), "html",
                 status=None, warning=warnings, freshenv=True)
    app.build()
    stub = (src / "generated" / "sklearn_orfit.QREWRLSRegressor.rst").read_text(encoding="utf-8")
    html = (src / "_build" / "generated" / "sklearn_orfit.QREWRLSRegressor.html").read_text(
        encoding="utf-8")
    return stub, html, warnings.getvalue()


def test_qrewrls_page_lists_partial_fit_and_learn_one(qrewrls_page):
    stub, html, _ = qrewrls_page
    methods = page_methods(html, "sklearn_orfit.QREWRLSRegressor")
    assert {"partial_fit", "learn_one"} <= methods, methods
    # the template of docs/_templates was used, not autosummary's default
    assert "~QREWRLSRegressor.partial_fit" in stub and "~QREWRLSRegressor.learn_one" in stub


def test_qrewrls_page_lists_inherited_methods(qrewrls_page):
    from sklearn_orfit import QREWRLSRegressor

    _, html, _ = qrewrls_page
    methods = page_methods(html, "sklearn_orfit.QREWRLSRegressor")
    assert STREAMING_METHODS <= methods, STREAMING_METHODS - methods
    inherited = {m for m in STREAMING_METHODS if m not in vars(QREWRLSRegressor)}
    assert {"fit", "partial_fit", "score", "get_params"} <= inherited  # the point of the test
    assert not any(m.startswith("_") for m in methods), methods


def test_qrewrls_page_builds_without_warnings(qrewrls_page):
    # scikit-learn's inherited docstrings refer to its own labels and glossary; conf.py
    # turns them into links to scikit-learn's pages
    _, html, warnings = qrewrls_page
    assert warnings == ""
    assert "https://scikit-learn.org/stable/glossary.html#term-meta-estimator" in html


@pytest.mark.slow
def test_full_build_documents_the_methods_of_every_class(tmp_path):
    pytest.importorskip("sphinx_gallery", reason="sphinx-gallery is in the docs extra")
    out = tmp_path / "html"
    result = subprocess.run([sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q",
                             "-d", str(tmp_path / "doctrees"), "-b", "html", "docs", str(out)],
                            cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    import sklearn_orfit

    pages = {p.stem: p.read_text(encoding="utf-8") for p in (out / "generated").glob("*.html")}
    for qualname, html in pages.items():
        name = qualname.rsplit(".", 1)[-1]
        obj = getattr(sklearn_orfit, name, None)
        if isinstance(obj, type) and hasattr(obj, "get_params"):  # the estimators
            methods = page_methods(html, qualname)
            assert {"fit", "get_params", "set_params"} <= methods, (qualname, methods)
            for extra in ("partial_fit", "predict", "prequential_predict", "learn_one"):
                if hasattr(obj, extra):
                    assert extra in methods, (qualname, extra)
