"""Input checks shared by the streaming estimators.

Every public entry point validates its whole input once, before any state is touched,
so a rejected call leaves the estimator exactly as it was.
"""

import math
import numbers

import numpy as np
from scipy.linalg.blas import ddot, dnrm2
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

__all__ = [
    "as_float64", "check_fitted_fast", "check_int", "check_numeric", "check_one_row",
    "check_one_target", "check_rows",
]


def check_int(value, name, *, minimum, maximum=None, allow_none=False, note=""):
    """``value`` as an ``int`` in ``[minimum, maximum]`` (``None`` passes when
    ``allow_none``), else ``ValueError``. Booleans are refused: scikit-learn's
    ``Interval(Integral, ...)`` would take ``True`` as 1."""
    if value is None and allow_none:
        return None
    if (isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral)
            or value < minimum or (maximum is not None and value > maximum)):
        expected = f"an int >= {minimum}" if maximum is None else f"an int in [{minimum}, {maximum}]"
        raise ValueError(f"{name} must be {expected}{' or None' if allow_none else ''}{note}, "
                         f"got {value!r}.")
    return int(value)


def as_float64(a, what):
    """``a`` as a float64 array; when numpy cannot convert it, ``ValueError`` with the
    message ``"<what>: <numpy's reason>"`` (and no chained traceback)."""
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def check_rows(estimator, X, *, dtype=np.float64):
    """The rows of a call that reads a fitted estimator without learning.

    ``NotFittedError`` before the first learning call; then ``X`` is checked against
    the features the estimator was fitted on and converted (``validate_data`` with
    ``reset=False``).
    """
    check_is_fitted(estimator)
    return validate_data(estimator, X, reset=False, dtype=dtype)


def check_one_row(x, *, n_features, dtype=np.float64, return_norm=False):
    """Cheap checks for the single-observation path.

    Parameters
    ----------
    x : array-like of shape (n_features,) or (1, n_features)
        One row.
    n_features : int
        The number of features seen by the first call.
    dtype : numpy dtype, default=np.float64
        The dtype the row is converted to.
    return_norm : bool, default=False
        Also return the row's Euclidean norm (the finiteness check computes it).

    Returns
    -------
    x : ndarray of shape (n_features,)
        A contiguous row of ``dtype``.
    norm : float
        ``‖x‖`` (from BLAS ``ddot`` where its square is in range, else ``nrm2``; ``inf``
        when the norm of finite entries overflows).
        Only with ``return_norm=True``.

    Raises
    ------
    ValueError
        If the row has the wrong shape, is not numeric or is not finite.
    """
    if not isinstance(x, np.ndarray):
        try:
            x = np.asarray(x)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"x must be a numeric row; got {exc}") from None
    if x.dtype.kind not in "biuf":
        check_numeric(x, "x")
    try:
        x = x.astype(dtype, copy=False)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"x must be a numeric row; got {exc}") from None
    if x.ndim == 2 and x.shape[0] == 1:
        x = x[0]
    if x.ndim != 1 or x.shape[0] != n_features:
        raise ValueError(
            f"x has shape {x.shape} but this estimator expects one row of "
            f"{n_features} features."
        )
    # NaN and ±inf make the norm non-finite. ‖x‖² by BLAS ddot where it neither overflows
    # nor loses more than D·1e-58 of itself to underflowing squares; otherwise BLAS nrm2,
    # which scales (it overflows only when the norm itself exceeds the float64 range: then
    # the entries are checked one by one)
    ss = ddot(x, x) if x.shape[0] else 0.0
    if 1e-250 < ss < 1e290:
        norm = math.sqrt(ss)
    else:
        norm = dnrm2(x)
        if not math.isfinite(norm) and not np.isfinite(x).all():
            raise ValueError("x contains NaN or infinity.")
    return (x, norm) if return_norm else x


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
    if n_targets is None and (isinstance(y, float) or isinstance(y, numbers.Real)):
        yv = float(y)
        if not math.isfinite(yv):
            raise ValueError("y contains NaN or infinity.")
        return np.array([yv])
    if isinstance(y, (str, bytes, complex, np.str_, np.bytes_, np.complexfloating)):
        raise ValueError(f"y must be a real number; got {y!r}.")
    if not isinstance(y, np.ndarray) or y.dtype.kind not in "biuf":
        check_numeric(y, "y")
    try:
        y = np.asarray(y, dtype=np.float64).reshape(-1)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"y must be numeric; got {exc}") from None
    expected = 1 if n_targets is None else n_targets
    if y.shape[0] != expected:
        raise ValueError(f"y has {y.shape[0]} values but {expected} target(s) expected.")
    if not math.isfinite(dnrm2(y)) and not np.isfinite(y).all():
        raise ValueError("y contains NaN or infinity.")
    return y


def check_fitted_fast(estimator, attribute="coef_"):
    """``check_is_fitted`` for the single-observation path: one attribute lookup."""
    if attribute not in estimator.__dict__:
        raise NotFittedError(
            f"This {type(estimator).__name__} instance is not fitted yet. Call 'fit' or "
            "'partial_fit' with appropriate arguments before using this estimator."
        )


def check_numeric(a, name):
    """Refuse strings, bytes and complex numbers before any conversion to float.

    scikit-learn's validation converts numeric strings (``"1.5"``) to floats when a float
    dtype is asked for, and numpy drops imaginary parts; a stream takes neither silently.

    Parameters
    ----------
    a : array-like, DataFrame or None
        The input (``None`` passes).
    name : str
        ``"X"`` or ``"y"``, for the message.
    """
    if a is None or hasattr(a, "format"):  # sparse matrices are numeric
        return
    dtypes = getattr(a, "dtypes", None)
    if dtypes is not None and not hasattr(dtypes, "kind"):  # a DataFrame: per column
        kinds = {getattr(d, "kind", "O") for d in dtypes}
    else:
        dtype = getattr(a, "dtype", None)
        if dtype is None or not hasattr(dtype, "kind"):
            try:
                dtype = np.asarray(a).dtype
            except (TypeError, ValueError):  # ragged: scikit-learn's validation says so
                return
        kinds = {dtype.kind}
    if kinds & set("USaV"):
        raise ValueError(
            f"{name} contains strings; a stream takes numbers only (convert the "
            "column first, e.g. with pandas.to_numeric)."
        )
    if "c" in kinds:
        raise ValueError(f"Complex data not supported: {name} contains complex numbers.")
    if "O" in kinds:
        values = np.asarray(a, dtype=object).ravel()
        if any(isinstance(v, (str, bytes, complex, np.str_, np.bytes_)) for v in values):
            raise ValueError(
                f"{name} contains strings or complex numbers; a stream takes real "
                "numbers only."
            )


def accepts_keyword(method, name):
    """Whether ``method`` takes the keyword argument ``name`` (or ``**kwargs``); False
    when it has no readable signature."""
    import inspect

    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is p.VAR_KEYWORD for p in params.values())
