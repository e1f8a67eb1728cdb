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

#: the Parameters section of a call whose only argument is ``X``, the rows it reads
ROWS_PARAMETERS = """\
Parameters
----------
""" + ROWS

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

#: the Attributes of a sliding-window linear regressor that it shares with the others
WINDOW_ATTRIBUTES = LINEAR_COEF + """
n_features_in_ : int
    Number of features.
""" + "\n".join((FEATURE_NAMES_IN, SAMPLES_SEEN, N_WINDOW))

#: the start of the Examples of a streaming regressor: a stream of 300 rows of 3
#: features, ``y`` linear in them with a little noise
EXAMPLE_STREAM = """\
>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(300, 3))
>>> y = X @ np.array([1.0, -2.0, 0.5]) + 0.01 * rng.normal(size=300)"""

#: the Examples of a linear streaming regressor ``reg``, made just before: it learns
#: :data:`EXAMPLE_STREAM` prequentially and finds its coefficients
LINEAR_EXAMPLE = EXAMPLE_STREAM + """
>>> from sklearn_orfit import prequential_predict
>>> y_pred = prequential_predict(reg, X, y)
>>> float(np.mean((y[50:] - y_pred[50:]) ** 2)) < 1e-3
True
>>> reg.coef_.round(2)
array([ 1. , -2. ,  0.5])"""

#: the sizes of a window solver (or of its buffer), in its Parameters
SOLVER_SIZES = """\
window_size, n_features, n_targets : int
    ``N``, ``D`` and the columns of the targets."""

#: the sizes and the weighting of a window solver, in its Parameters
SOLVER_PARAMETERS = SOLVER_SIZES + """
forgetting_factor, alpha : float
    ``λ`` and the ridge ``α``."""

_SHARED = {
    "rows_parameters": ROWS_PARAMETERS,
    "stream_x": STREAM_X,
    "stream_rows": STREAM_ROWS,
    "linear_coef": LINEAR_COEF,
    "feature_names_in": FEATURE_NAMES_IN,
    "input_feature_names_in": INPUT_FEATURE_NAMES_IN,
    "samples_seen": SAMPLES_SEEN,
    "window_size": WINDOW_SIZE,
    "window_forgetting_factor": WINDOW_FORGETTING_FACTOR,
    "n_window": N_WINDOW,
    "window_attributes": WINDOW_ATTRIBUTES,
    "example_stream": EXAMPLE_STREAM,
    "linear_example": LINEAR_EXAMPLE,
    "solver_sizes": SOLVER_SIZES,
    "solver_parameters": SOLVER_PARAMETERS,
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
