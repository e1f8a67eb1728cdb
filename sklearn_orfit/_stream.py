"""Plumbing shared by the row-recursive baselines: one validation per call, and rollback.

Every public entry point validates its whole input once, before any state is touched; the
recursions then work on copies of the state and assign them back at the end, so a call
that raises (bad input, or a numerical failure half-way) leaves the estimator exactly as
it was.
"""

from contextlib import contextmanager

import numpy as np
from sklearn.utils.validation import validate_data

__all__ = ["rollback_on_error", "validate_stream"]


def validate_stream(estimator, X, y, *, reset):
    """Validate one chunk of a stream.

    Parameters
    ----------
    estimator : estimator
        The streaming estimator; ``n_features_in_`` is set when ``reset`` and checked
        otherwise, and ``estimator._n_targets`` (``None`` for a 1-D target) is checked.
    X : array-like of shape (n_samples, n_features)
        Rows in stream order.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Targets.
    reset : bool
        Whether this chunk starts a new stream.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        float64 rows.
    Y : ndarray of shape (n_samples, n_targets)
        The targets as a 2-D float64 array (one column for a 1-D ``y``).
    y_ndim : int
        ``y.ndim`` (1 or 2), which fixes the shape of the predictions.
    """
    X, y = validate_data(
        estimator, X, y, reset=reset, dtype=np.float64, multi_output=True, y_numeric=True
    )
    Y = y.reshape(y.shape[0], -1)
    if not reset:
        n_targets = estimator._n_targets
        if (y.ndim == 1) != (n_targets is None) or (
            n_targets is not None and Y.shape[1] != n_targets
        ):
            expected = "a 1-D target" if n_targets is None else f"{n_targets} targets"
            raise ValueError(f"y has shape {y.shape} but this stream has {expected}.")
    return X, Y, y.ndim


@contextmanager
def rollback_on_error(estimator):
    """Restore the estimator's attributes if the body raises.

    The restore is shallow: it is exact because the recursions never modify a state array
    in place before the end of the call (they work on copies and assign them back).
    """
    saved = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise
