"""The ABO paper's synthetic non-linear autoregressive series, and a lag builder."""

import numpy as np
from sklearn.utils import check_random_state

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


def make_lagged(series, n_lags):
    """Turn a univariate series into ``(X, y)`` with ``n_lags`` lagged predictors.

    Row ``i`` predicts ``series[i + n_lags]`` from the ``n_lags`` values before it, most
    recent first: ``X[i] = [series[i+n_lags-1], ..., series[i]]``.

    Parameters
    ----------
    series : array-like of shape (n_samples,)
        The series, in time order.
    n_lags : int
        Number of lagged values per row (>= 1).

    Returns
    -------
    X : ndarray of shape (n_samples - n_lags, n_lags)
        Lagged predictors (column ``j`` is lag ``j + 1``).
    y : ndarray of shape (n_samples - n_lags,)
        The value to predict.
    """
    series = np.asarray(series, dtype=np.float64)
    if series.ndim != 1:
        raise ValueError(f"series must be 1-D, got shape {series.shape}.")
    n_lags = int(n_lags)
    if n_lags < 1:
        raise ValueError(f"n_lags must be >= 1, got {n_lags}.")
    if series.shape[0] <= n_lags:
        raise ValueError(
            f"series has {series.shape[0]} values; at least n_lags + 1 = {n_lags + 1} "
            "are needed."
        )
    windows = np.lib.stride_tricks.sliding_window_view(series[:-1], n_lags)
    X = np.ascontiguousarray(windows[:, ::-1])
    y = series[n_lags:].copy()
    return X, y
