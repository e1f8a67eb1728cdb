"""Input checks shared by the streaming estimators.

Every public entry point validates its whole input once, before any state is touched,
so a rejected call leaves the estimator exactly as it was.
"""

import math
import numbers

import numpy as np
from sklearn.exceptions import NotFittedError

__all__ = ["check_fitted_fast", "check_one_row", "check_one_target"]


def check_one_row(x, *, n_features, dtype=np.float64):
    """Cheap checks for the single-observation path.

    Parameters
    ----------
    x : array-like of shape (n_features,) or (1, n_features)
        One row.
    n_features : int
        The number of features seen by the first call.
    dtype : numpy dtype, default=np.float64
        The dtype the row is converted to.

    Returns
    -------
    x : ndarray of shape (n_features,)
        A contiguous row of ``dtype``.

    Raises
    ------
    ValueError
        If the row has the wrong shape, is not numeric or is not finite.
    """
    try:
        x = np.asarray(x, dtype=dtype)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"x must be a numeric row; got {exc}") from None
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 1 or x.shape[0] != n_features:
        raise ValueError(
            f"x has shape {x.shape} but this estimator expects one row of "
            f"{n_features} features."
        )
    if not math.isfinite(x.sum()):  # NaN and ±inf propagate into the sum
        raise ValueError("x contains NaN or infinity.")
    return x


def check_one_target(y, *, n_targets):
    """Cheap checks for the target of one observation.

    Parameters
    ----------
    y : float or array-like of shape (n_targets,)
        The target(s) of one row.
    n_targets : int or None
        The number of targets seen before (``None`` for a 1-D target).

    Returns
    -------
    y : ndarray of shape (n_targets or 1,)
        The target as a float64 vector.
    """
    if isinstance(y, numbers.Real) and n_targets is None:
        yv = float(y)
        if not math.isfinite(yv):
            raise ValueError("y contains NaN or infinity.")
        return np.array([yv])
    try:
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must be numeric; got {exc}") from None
    expected = 1 if n_targets is None else n_targets
    if y.shape[0] != expected:
        raise ValueError(f"y has {y.shape[0]} values but {expected} target(s) expected.")
    if not math.isfinite(y.sum()):
        raise ValueError("y contains NaN or infinity.")
    return y


def check_fitted_fast(estimator):
    """``check_is_fitted`` for the single-observation path: one attribute lookup."""
    if "coef_" not in estimator.__dict__:
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' or "
            "'partial_fit' with appropriate arguments before using this estimator."
        )
