"""Numpydoc blocks that several docstrings share, written once.

A docstring names a shared block by a line that holds only ``{name}``; :func:`fill_doc`
replaces that line by the block, each of its lines indented as the placeholder was. The
blocks below are those used in several modules; a module passes its own to
:func:`fill_doc` as keyword arguments.
"""

import re

__all__ = ["fill_doc"]

_PLACEHOLDER = re.compile(r"^([ \t]*)\{(\w+)\}[ \t]*$", flags=re.M)

#: the ``X`` entry of a call that reads the current state (no learning)
ROWS = """\
X : array-like of shape (n_samples, n_features)
    Rows."""

#: the ``X`` entry of a call that learns a chunk of a stream
STREAM_X = """\
X : array-like of shape (n_samples, n_features)
    Rows in stream order."""

#: the ``X`` and ``y`` entries of a call that learns a chunk of a stream
STREAM_ROWS = STREAM_X + """
y : array-like of shape (n_samples,) or (n_samples, n_targets)
    Targets."""

#: the ``coef_`` entry of a linear streaming regressor's Attributes
LINEAR_COEF = """\
coef_ : ndarray of shape (n_features,) or (n_features, n_targets)
    ``β`` after the last learned row."""

#: the ``feature_names_in_`` entry of an estimator's Attributes
FEATURE_NAMES_IN = """\
feature_names_in_ : ndarray of shape (n_features_in_,)
    Names of the features, when ``X`` had string column names."""

#: the same, for an estimator whose input features differ from those of its models
INPUT_FEATURE_NAMES_IN = """\
feature_names_in_ : ndarray of shape (n_features_in_,)
    Names of the input features, when ``X`` had string column names."""

#: the ``n_samples_seen_`` entry of a streaming estimator's Attributes
SAMPLES_SEEN = """\
n_samples_seen_ : int
    Rows learned since the last :meth:`fit` (reset by ``fit``)."""

#: the ``window_size`` entry of a sliding-window estimator's Parameters
WINDOW_SIZE = """\
window_size : int, default=20
    ``N``, the number of most recent rows the solution is fitted on."""

#: the ``forgetting_factor`` entry of an estimator whose window is exponentially weighted
WINDOW_FORGETTING_FACTOR = """\
forgetting_factor : float, default=1.0
    ``λ`` in ``(0, 1]``; row ``i`` of the window ending at ``t`` has weight
    ``λ^(t−i)``."""

#: the ``n_window_`` entry of a sliding-window estimator's Attributes
N_WINDOW = """\
n_window_ : int
    Rows in the current window (``min(n_samples_seen_, window_size)``)."""

_SHARED = {
    "rows": ROWS,
    "stream_x": STREAM_X,
    "stream_rows": STREAM_ROWS,
    "linear_coef": LINEAR_COEF,
    "feature_names_in": FEATURE_NAMES_IN,
    "input_feature_names_in": INPUT_FEATURE_NAMES_IN,
    "samples_seen": SAMPLES_SEEN,
    "window_size": WINDOW_SIZE,
    "window_forgetting_factor": WINDOW_FORGETTING_FACTOR,
    "n_window": N_WINDOW,
}


def fill_doc(**blocks):
    """A decorator that fills the placeholders of a docstring (see the module's).

    Parameters
    ----------
    **blocks : str
        Blocks by name, in addition to (or instead of) the shared ones of this module.

    Returns
    -------
    decorate : callable
        Sets ``obj.__doc__`` with every placeholder line replaced, and returns ``obj``.
        An unknown name raises ``KeyError`` at import; a docstring stripped by
        ``python -OO`` stays ``None``.
    """
    table = {**_SHARED, **blocks}

    def expand(match):
        indent, name = match.groups()
        return "\n".join(indent + line if line else line
                         for line in table[name].splitlines())

    def decorate(obj):
        if obj.__doc__ is not None:
            obj.__doc__ = _PLACEHOLDER.sub(expand, obj.__doc__)
        return obj

    return decorate
