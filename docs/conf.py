"""Sphinx configuration of the sklearn-orfit documentation.

Build (warnings are errors)::

    python -m pip install -e ".[docs]"
    python -m sphinx -W --keep-going -b html docs docs/_build/html
"""

import os
import re
import sys
import warnings

import sklearn_orfit

project = "sklearn-orfit"
author = "sklearn-orfit developers"
copyright = "sklearn-orfit developers, BSD-3-Clause"
version = release = sklearn_orfit.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

exclude_patterns = ["_build", "**.ipynb_checkpoints", "examples/README.txt"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext"}
root_doc = "index"

html_theme = "alabaster"
html_static_path = ["_static"]
html_title = f"sklearn-orfit {release}"
html_theme_options = {
    "description": "Streaming overparameterised linear models for scikit-learn",
    "fixed_sidebar": True,
    "page_width": "1100px",
    "sidebar_width": "240px",
}

# -- API reference -----------------------------------------------------------------
autosummary_generate = True
# Every class page documents its public methods, inherited ones included (fit, predict,
# partial_fit, learn_one, prequential_predict, and scikit-learn's get_params, set_params,
# score, the metadata-routing requests): docs/_templates/autosummary/class.rst asks
# autodoc for them.
numpydoc_show_class_members = False  # autosummary lists the members
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

# -- gallery -----------------------------------------------------------------------
# The examples run at build time, on small data; the matplotlib figures become the
# gallery's thumbnails.
sphinx_gallery_conf = {
    "examples_dirs": "examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "download_all_examples": False,
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "doc_module": ("sklearn_orfit",),
    "reference_url": {"sklearn_orfit": None},
    "backreferences_dir": None,
    "matplotlib_animations": False,
    "abort_on_example_error": True,
}

os.environ.setdefault("MPLBACKEND", "Agg")

# In numpydoc "name : type" lines, a type such as "ndarray of shape (n_features_in_,)"
# would make reStructuredText read "n_features_in_" as a link to a target named
# "n_features_in". Escape the trailing underscore of such names in the type part,
# before numpydoc parses the docstring.
_TYPE_LINE = re.compile(r"^(\s*[\w*, ]+ : )(.*)$")
_TRAILING_UNDERSCORE = re.compile(r"(?<=\w)_(?=[,)\s]|$)")


def _escape_shape_names(app, what, name, obj, options, lines):
    for i, line in enumerate(lines):
        m = _TYPE_LINE.match(line)
        if m:
            lines[i] = m.group(1) + _TRAILING_UNDERSCORE.sub(r"\\_", m.group(2))


# The docstrings of methods inherited from scikit-learn (score, get_metadata_routing,
# set_fit_request ...) refer to labels and glossary terms of scikit-learn's own
# documentation, which this one does not have. Point them to scikit-learn's pages instead
# (a label with no known page becomes its plain text).
_SKLEARN_DOCS = "https://scikit-learn.org/stable/"
_SKLEARN_LABELS = {
    "metadata_routing": "metadata_routing.html",
    "r2_score": "modules/model_evaluation.html#r2-score",
}
_ROLE = re.compile(
    r":(?P<role>ref|term):`(?:(?P<text>[^`<]*?)\s*<(?P<target>[^`>]+)>|(?P<bare>[^`]+))`"
)


def _sklearn_role(m):
    target = m.group("target") or m.group("bare")
    text = (m.group("text") or m.group("bare")).strip()
    if m.group("role") == "term":
        url = _SKLEARN_DOCS + "glossary.html#term-" + re.sub(r"\s+", "-", target.strip().lower())
    elif target in _SKLEARN_LABELS:
        url = _SKLEARN_DOCS + _SKLEARN_LABELS[target]
    else:
        return text
    return f"`{text} <{url}>`__"


def _link_sklearn_references(app, what, name, obj, options, lines):
    module = getattr(obj, "__module__", None) or ""
    if module == "sklearn" or module.startswith("sklearn."):
        for i, line in enumerate(lines):
            lines[i] = _ROLE.sub(_sklearn_role, line)


def setup(app):
    app.connect("autodoc-process-docstring", _escape_shape_names, priority=100)
    app.connect("autodoc-process-docstring", _link_sklearn_references, priority=100)
sys.path.insert(0, os.path.abspath("."))
warnings.filterwarnings("ignore", message="Matplotlib is currently using agg")
