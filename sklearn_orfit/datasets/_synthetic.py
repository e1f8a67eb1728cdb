"""The ABO paper's synthetic non-linear autoregressive series, and a lag builder."""

from numbers import Integral

import numpy as np
from sklearn.utils import check_random_state

from .._compat import Interval, validate_params
from .._streaming._validation import as_float64, check_int

__all__ = ["make_abo_series", "make_lagged"]


def make_abo_series(n_samples=10500, *, random_state=None):
    """Generate the ABO paper's non-linear autoregressive series (ABO paper §3.1).

    ``x_t = 2 x_{t-1} / (1 + 0.8 x_{t-1}²) + ε_t`` with ``ε_t ~ U(-1, 1)`` and
    ``x_0 ~ U(-1, 1)``.

    Parameters
    ----------
    n_samples : int, default=10500
        Length of the series (including ``x_0``).
    random_state : int, RandomState instance or None, default=None
        Seed of the noise.

    Returns
    -------
    series : ndarray of shape (n_samples,)
        The series.

    Examples
    --------
    >>> from sklearn_orfit.datasets import make_abo_series, make_lagged
    >>> x = make_abo_series(100, random_state=0)
    >>> X, y = make_lagged(x, n_lags=7)
    >>> X.shape, y.shape
    ((93, 7), (93,))
    """
    n_samples = int(n_samples)
    if n_samples < 1:
        raise ValueError(f"n_samples must be >= 1, got {n_samples}.")
    rng = check_random_state(random_state)
    eps = rng.uniform(-1.0, 1.0, size=n_samples)
    x = np.empty(n_samples)
    x[0] = eps[0]  # x_0 ~ U(-1, 1)
    for t in range(1, n_samples):
        prev = x[t - 1]
        x[t] = 2.0 * prev / (1.0 + 0.8 * prev * prev) + eps[t]
    return x


@validate_params(
    {"n_lags": [Interval(Integral, 1, None, closed="left")]},
    prefer_skip_nested_validation=True,
)
def make_lagged(series, n_lags, *, horizon=1, exog=None):
    """Turn a series into ``(X, y)``: ``n_lags`` lags, ``horizon`` steps ahead, optional exog.

    Row ``i`` is built at time ``t = i + n_lags - 1``, the time of its most recent lag:
    ``X[i] = [series[t], series[t-1], ..., series[t-n_lags+1]]`` (most recent first),
    followed, when ``exog`` is given, by the same lags of each exogenous column, and its
    target is ``y[i] = series[t + horizon]``. With ``horizon=1`` row ``i`` predicts
    ``series[i + n_lags]`` from the ``n_lags`` values before it.

    Parameters
    ----------
    series : array-like of shape (n_samples,)
        The series, in time order.
    n_lags : int
        Number of lagged values per row (>= 1), for the series and for every exogenous
        column.
    horizon : int, default=1
        How many steps after its most recent lag a row's target lies (>= 1; ``1`` is
        one-step-ahead forecasting).
    exog : array-like of shape (n_samples,) or (n_samples, n_exog), default=None
        Exogenous inputs aligned with ``series`` (``exog[t]`` is known at time ``t``).
        Row ``i`` gets ``exog[t, k], exog[t-1, k], ..., exog[t-n_lags+1, k]`` for every
        column ``k``, after the lags of the series: all lags of column 0, then of
        column 1, and so on. Must be finite.

    Returns
    -------
    X : ndarray of shape (n_samples - n_lags - horizon + 1, n_lags * (1 + n_exog))
        Lagged predictors: column ``j < n_lags`` is ``series`` at lag ``j``
        (``series[t - j]``), column ``n_lags * (1 + k) + j`` is exogenous column ``k``
        at lag ``j`` (``n_exog = 0`` without ``exog``, 1 for a 1-D ``exog``).
    y : ndarray of shape (n_samples - n_lags - horizon + 1,)
        The value to predict, ``series[t + horizon]``.

    Raises
    ------
    ValueError
        If ``series`` is not 1-D, ``n_lags`` or ``horizon`` is not an integer >= 1,
        ``series`` has fewer than ``n_lags + horizon`` values, or ``exog`` is not 1-D or
        2-D, has another length than ``series``, or holds NaN or infinite values.

    See Also
    --------
    sklearn_orfit.LagTransformer : The same lags as a streaming pre-step.

    Notes
    -----
    **Delayed labels.** Row ``i``'s features are known at time ``t`` but its label
    ``series[t + horizon]`` arrives ``horizon`` steps later, when rows
    ``i + 1, ..., i + horizon - 1`` have already been built. A model evaluated
    prequentially may therefore learn row ``i`` only after predicting row
    ``i + horizon - 1``: use ``prequential_predict(model, X, y, delay=horizon - 1)``
    (``ŷ[i]`` is predicted by the model that has learned rows ``0 .. i - 1 - delay``).
    Plain prequential evaluation (``delay=0``) with ``horizon > 1`` learns labels from
    the future of the rows it predicts (see the user guide's chapter on prequential
    evaluation, ``docs/user_guide/prequential.rst``).

    Cost ``O(n_samples · n_lags · (1 + n_exog))`` time and memory (the output); the
    lags are strided views of the input, copied once.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.datasets import make_lagged
    >>> series = np.arange(6.0)
    >>> exog = 10.0 * np.arange(6.0)
    >>> X, y = make_lagged(series, 2, horizon=2, exog=exog)
    >>> X  # [series[t], series[t-1], exog[t], exog[t-1]] for t = 1, 2, 3
    array([[ 1.,  0., 10.,  0.],
           [ 2.,  1., 20., 10.],
           [ 3.,  2., 30., 20.]])
    >>> y  # series[t + 2]
    array([3., 4., 5.])
    """
    series = as_float64(series, "series must be numeric")
    if series.ndim != 1:
        raise ValueError(f"series must be 1-D, got shape {series.shape}.")
    n_lags = int(n_lags)
    horizon = check_int(horizon, "horizon", minimum=1)
    n = series.shape[0]
    if n < n_lags + horizon:
        raise ValueError(
            f"series has {n} values; at least n_lags + horizon = {n_lags + horizon} "
            f"are needed (n_lags={n_lags}, horizon={horizon})."
        )
    if exog is not None:
        exog = _check_exog(exog, n)
    # rows: t = n_lags - 1, ..., n - 1 - horizon; the last horizon values are targets only
    windows = np.lib.stride_tricks.sliding_window_view(series[: n - horizon], n_lags)
    X = np.ascontiguousarray(windows[:, ::-1])
    y = series[n_lags - 1 + horizon :].copy()
    if exog is not None and exog.shape[1] > 0:
        # (rows, n_exog, n_lags), most recent first; flattened column by column
        ex = np.lib.stride_tricks.sliding_window_view(exog[: n - horizon], n_lags, axis=0)
        X = np.concatenate([X, ex[:, :, ::-1].reshape(X.shape[0], -1)], axis=1)
    return X, y


def _check_exog(exog, n_samples):
    """``exog`` as a finite float64 array of shape ``(n_samples, n_exog)``."""
    exog = as_float64(exog, "exog must be numeric")
    if exog.ndim == 1:
        exog = exog[:, None]
    elif exog.ndim != 2:
        raise ValueError(
            f"exog must be 1-D or 2-D (n_samples[, n_exog]), got shape {exog.shape}."
        )
    if exog.shape[0] != n_samples:
        raise ValueError(
            f"exog has {exog.shape[0]} rows but series has {n_samples} values; they must "
            "be aligned in time (same length)."
        )
    if not np.isfinite(exog).all():
        raise ValueError("exog contains NaN or infinite values.")
    return exog
