"""The forecasting chain's rows: a series turned into a prequential regression problem.

Data flows one way: a 1-D series → (optional differencing) → recursive standardisation
(each value with the mean and standard deviation of the values *before* it) → lags (of
the series and of optional exogenous columns, :func:`~sklearn_orfit.datasets.make_lagged`)
→ model → prequential predictions, mapped back to the series' units with the statistics
known at each forecast's origin (:meth:`ForecastProblem.to_units`). Nothing here looks
ahead: the forecast of value ``t`` made ``h`` steps ahead uses values ``<= t - h`` only,
and a row is learned only once its target is known (delayed labels; the prequential
protocol, user guide).

The statistics are those of :class:`~sklearn_orfit.RecursiveStandardScaler` (one
standardiser for the package, the command line and the benchmarks; :func:`past_stats`).
A stream can stop and continue: :class:`StreamTail` keeps the bounded past (the last
lags and the scaler's state), so a continued stream gives the rows of one uninterrupted
run, bit for bit.

:func:`make_forecast_problem` is the one-off form (a whole series), used by
:func:`~sklearn_orfit.forecasting.tune_forecast`; the ``sklearn-orfit forecast`` command
builds its rows chunk by chunk with :func:`extend_tail` and :func:`problem_from_tail`.
"""

import copy
from dataclasses import dataclass, field

import numpy as np

from .datasets import make_lagged
from .preprocessing import RecursiveStandardScaler

__all__ = [
    "STATS_BLOCK",
    "TRANSFORMS",
    "ForecastProblem",
    "RunningStats",
    "StreamTail",
    "extend_tail",
    "first_origin",
    "make_forecast_problem",
    "min_series_length",
    "past_mean_std",
    "past_stats",
    "problem_from_tail",
]

TRANSFORMS = ("none", "diff", "logdiff")

# values per block of the past-only statistics: blocks are aligned on the stream's
# positions, so a continued stream makes the same scaler calls as one uninterrupted run
STATS_BLOCK = 1024


@dataclass
class RunningStats:
    """The state behind :func:`past_stats`: everything needed to continue them.

    ``count`` values seen; ``scaler``, a :class:`~sklearn_orfit.RecursiveStandardScaler`
    that has learned the values before the last block boundary (a multiple of
    :data:`STATS_BLOCK`; ``None`` before the first), and ``pending``, the values seen
    after it. Continuing from a saved state gives the same numbers, bit for bit, as one
    pass over the whole series: the scaler is called on the same blocks from the same
    states.
    """

    count: int = 0
    scaler: object = None
    pending: np.ndarray = field(default_factory=lambda: np.empty(0))


def _block_stats(scaler, block):
    """Mean and standard deviation before each value of ``block``, through the scaler.

    ``scaler`` holds the statistics before the block (``None``: nothing yet; it is not
    changed). Both come from the scaler's own prequential statistics
    (:meth:`~sklearn_orfit.RecursiveStandardScaler.prequential_transform`): centred
    values ``d = x − mean`` (``with_std=False``) give the mean, and the z-scores
    ``z = d / std`` the standard deviation ``d / z``. Where ``d = 0`` (a value equal to
    the mean before it) the scale comes from ``x / std`` (``with_mean=False``), and for
    a zero value equal to a zero mean from the scaler's state before the value.
    """
    X = block[:, None]

    def fresh(**params):
        sc = RecursiveStandardScaler() if scaler is None else copy.deepcopy(scaler)
        return sc.set_params(**{"with_mean": True, "with_std": True, **params})

    d = fresh(with_std=False).prequential_transform(X)[:, 0]
    z = fresh().prequential_transform(X)[:, 0]
    mean = block - d
    with np.errstate(divide="ignore", invalid="ignore"):
        std = d / z
    bad = np.flatnonzero((d == 0) | ~np.isfinite(std))
    if bad.size:
        c = fresh(with_mean=False).prequential_transform(X)[:, 0]
        with np.errstate(divide="ignore", invalid="ignore"):
            std[bad] = block[bad] / c[bad]
        rest = bad[(block[bad] == 0) | ~np.isfinite(std[bad])]
        # only zeros so far: a constant, scale 1 (the scaler's rule), without a probe
        zeros_before = scaler is None or (scaler.mean_[0] == 0 and scaler.var_[0] == 0)
        nonzero_before = np.concatenate(([0], np.cumsum(block != 0)[:-1]))
        if zeros_before:
            std[rest[nonzero_before[rest] == 0]] = 1.0
            rest = rest[nonzero_before[rest] > 0]
        for r in rest:  # a zero at an exactly zero mean of non-zero values: rare
            sc = fresh()
            if r:
                sc.partial_fit(X[:r])
            std[r] = sc.scale_[0] if hasattr(sc, "mean_") else 1.0
    return mean, std


def past_stats(s, state=None):
    """Mean and standard deviation of the values before each element of ``s``.

    Continues ``state`` (a :class:`RunningStats`; ``None``: nothing seen yet) and returns
    ``(mean, std, new_state)``. Population statistics (``ddof=0``) of
    :class:`~sklearn_orfit.RecursiveStandardScaler` (Welford's recursion and Chan et
    al.'s merges, exact at extreme scales), which also sets a zero standard deviation to
    1; the first value overall gets NaN (nothing before it). The scaler is called on
    blocks of :data:`STATS_BLOCK` values aligned on the stream's positions.
    Cost: O(len(s)) time, and O(:data:`STATS_BLOCK`) for the values kept in the state.
    """
    s = np.asarray(s, dtype=np.float64)
    st = RunningStats() if state is None else state
    m = s.shape[0]
    if m == 0:
        return np.full(0, np.nan), np.full(0, np.nan), st
    values = np.concatenate((st.pending, s))
    boundary = st.count - st.pending.shape[0]
    scaler = None if st.scaler is None else copy.deepcopy(st.scaler)
    n = values.shape[0]
    means, stds, pos, kept = [], [], 0, 0
    while pos < n:
        stop = min(n, pos + STATS_BLOCK - (boundary + pos) % STATS_BLOCK)
        block = values[pos:stop]
        block_mean, block_std = _block_stats(scaler, block)
        means.append(block_mean)
        stds.append(block_std)
        if (boundary + stop) % STATS_BLOCK == 0:  # a whole block: the boundary moves on
            scaler = RecursiveStandardScaler() if scaler is None else scaler
            scaler.partial_fit(block[:, None])
            kept = stop
        pos = stop
    mean, std = np.concatenate(means)[n - m:], np.concatenate(stds)[n - m:]
    if st.count == 0:  # nothing before the first value
        mean[0] = std[0] = np.nan
    return mean, std, RunningStats(st.count + m, scaler, values[kept:].copy())


def past_mean_std(s):
    """Mean and standard deviation of ``s[:t]`` for every ``t`` (``t = 0``: NaN).

    One pass of :func:`past_stats` from nothing.
    """
    mean, std, _ = past_stats(s)
    return mean, std


@dataclass
class StreamTail:
    """The bounded past a forecast stream keeps so that it can be continued exactly.

    The kept values (positions ``start ..`` of the stream) with, at each position, the
    modelled value ``s`` (the value, its first difference or its log return; NaN where
    undefined) and the mean and standard deviation of the modelled values before it;
    the same for the exogenous columns (standardised levels); and the scaler states that
    continue those statistics.
    """

    start: int = 0
    v: np.ndarray = field(default_factory=lambda: np.empty(0))
    s: np.ndarray = field(default_factory=lambda: np.empty(0))
    m: np.ndarray = field(default_factory=lambda: np.empty(0))
    sd: np.ndarray = field(default_factory=lambda: np.empty(0))
    e: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    me: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    sde: np.ndarray = field(default_factory=lambda: np.empty((0, 0)))
    stats: RunningStats = field(default_factory=RunningStats)
    exog_stats: list = field(default_factory=list)

    @property
    def end(self):
        """Position of the next value of the stream (values seen so far)."""
        return self.start + self.v.shape[0]

    def cut(self, position):
        """The tail from ``position`` on (at least the last value is kept)."""
        k = min(max(0, position - self.start), max(self.v.shape[0] - 1, 0))
        return StreamTail(self.start + k, self.v[k:].copy(), self.s[k:].copy(),
                          self.m[k:].copy(), self.sd[k:].copy(), self.e[k:].copy(),
                          self.me[k:].copy(), self.sde[k:].copy(), self.stats,
                          list(self.exog_stats))


def _modelled(previous, v_new, transform):
    """The modelled values at the new positions (NaN: undefined, the first difference)."""
    if transform == "none":
        return v_new.copy()
    if transform == "logdiff":
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.diff(np.log(np.concatenate(([previous], v_new))))
    return np.diff(np.concatenate(([previous], v_new)))


def _cols(a, n):
    return a if a.shape[0] else np.empty((0, n))


def extend_tail(tail, values, exog=None, *, transform="none"):
    """The frame of a stream: ``tail`` followed by the new ``values`` (and ``exog``).

    Returns a :class:`StreamTail` holding every position (kept and new) with the
    statistics continued over the new values.
    """
    v_new = np.asarray(values, dtype=np.float64)
    n_exog = tail.e.shape[1] if tail.v.shape[0] else (
        0 if exog is None else np.asarray(exog).reshape(v_new.shape[0], -1).shape[1])
    e_new = (np.empty((v_new.shape[0], 0)) if exog is None
             else np.asarray(exog, dtype=np.float64).reshape(v_new.shape[0], -1))
    if e_new.shape[1] != n_exog:
        raise ValueError(f"the stream has {n_exog} exogenous column(s), got "
                         f"{e_new.shape[1]}.")
    previous = tail.v[-1] if tail.v.shape[0] else np.nan
    s_new = _modelled(previous, v_new, transform)
    m_new, sd_new = np.full(s_new.shape, np.nan), np.full(s_new.shape, np.nan)
    defined = ~np.isnan(s_new)
    m_new[defined], sd_new[defined], stats = past_stats(s_new[defined], tail.stats)
    me_new, sde_new = np.full(e_new.shape, np.nan), np.full(e_new.shape, np.nan)
    exog_stats = list(tail.exog_stats) or [RunningStats() for _ in range(n_exog)]
    for k in range(n_exog):
        me_new[:, k], sde_new[:, k], exog_stats[k] = past_stats(e_new[:, k], exog_stats[k])
    return StreamTail(
        tail.start, np.concatenate((tail.v, v_new)), np.concatenate((tail.s, s_new)),
        np.concatenate((tail.m, m_new)), np.concatenate((tail.sd, sd_new)),
        np.concatenate((_cols(tail.e, n_exog), e_new)),
        np.concatenate((_cols(tail.me, n_exog), me_new)),
        np.concatenate((_cols(tail.sde, n_exog), sde_new)), stats, exog_stats,
    )


def first_origin(*, n_lags, transform):
    """Position of the first value a row can be built at (its most recent lag).

    The modelled series starts one value later when differenced; its first two values
    only feed the statistics (a standard deviation needs two values); then ``n_lags``.
    """
    return (0 if transform == "none" else 1) + 1 + n_lags


@dataclass
class ForecastProblem:
    """A series turned into a prequential regression problem.

    Row ``i`` of ``X`` holds, at its *origin* ``t``, the ``n_lags`` latest standardised
    modelled values (most recent first), then the same lags of each standardised
    exogenous column; ``y[i]`` is the standardised target ``horizon`` steps later, the
    value at position ``index[i] = t + horizon``. The target is

    * ``none``: the value ``v[t+H]``;
    * ``diff``: the change over the horizon, ``v[t+H] − v[t]``;
    * ``logdiff``: ``log v[t+H] − log v[t]``,

    standardised with the statistics known at the origin (mean and standard deviation of
    the modelled values up to ``t``; the mean times ``H`` for the changes), so that
    ``to_units`` maps a prediction back to a forecast of ``v[t+H]``: ``v[t] + change``,
    ``v[t] · exp(log change)`` or the value itself. With ``horizon=1`` this is the
    one-step-ahead problem (the target is the next standardised modelled value).
    Rows are numbered from the start of the stream: the first is row ``first_row``.
    """

    X: np.ndarray
    y: np.ndarray
    index: np.ndarray
    actual: np.ndarray
    origin_value: np.ndarray
    transform: str
    n_lags: int
    horizon: int = 1
    first_row: int = 0
    _mean: np.ndarray = field(default=None, repr=False)
    _std: np.ndarray = field(default=None, repr=False)

    def to_units(self, y_pred, rows=slice(None)):
        """Map standardised predictions of ``y[rows]`` to forecasts of ``actual[rows]``."""
        scale = 1 if self.transform == "none" else self.horizon
        change = np.asarray(y_pred) * self._std[rows] + scale * self._mean[rows]
        if self.transform == "none":
            return change
        if self.transform == "diff":
            return self.origin_value[rows] + change
        with np.errstate(over="ignore"):
            return self.origin_value[rows] * np.exp(change)  # logdiff

    @property
    def persistence(self):
        """The last value known at each row's origin (the last-value forecast)."""
        return self.origin_value


def min_series_length(*, n_lags, window_size, transform, horizon=1):
    """Fewest values a series needs: differencing, 2 for the statistics, lags, the
    horizon, the window, 2 scored rows."""
    return (0 if transform == "none" else 1) + 2 + n_lags + (horizon - 1) + window_size + 2


def problem_from_tail(frame, *, n_lags, transform="none", horizon=1, first_row=0,
                      n_future_exog=0):
    """The rows ``first_row ..`` of the stream held by ``frame`` (a :class:`StreamTail`).

    Rows whose target lies beyond the last value are not built (they will be, when the
    stream continues). The last ``n_future_exog`` exogenous columns are *known in
    advance* (a calendar, a weather forecast): a row holds their standardised value at
    its target time ``t + horizon``, not their lags.
    """
    t0 = first_origin(n_lags=n_lags, transform=transform) + first_row
    n = frame.end
    n_rows = max(0, n - horizon - t0)
    a = t0 - n_lags + 1 - frame.start  # first position the rows read, in the frame
    if a < 0:
        raise ValueError("the kept past does not reach back to the first row's lags.")
    n_exog = frame.e.shape[1]
    n_future = int(n_future_exog)
    n_past = n_exog - n_future
    z = (frame.s - frame.m) / frame.sd
    origins = t0 + np.arange(n_rows)
    k = origins - frame.start  # origins in the frame
    if n_rows:
        ze = (frame.e - frame.me) / frame.sde if n_exog else None
        X, _ = make_lagged(z[a:], n_lags, horizon=horizon,
                           exog=None if not n_past else ze[a:, :n_past])
        if n_future:  # the known-future columns at the target times
            X = np.concatenate([X, ze[k + horizon, n_past:]], axis=1)
    else:
        X = np.empty((0, n_lags * (1 + n_past) + n_future))
    v = frame.v
    origin_value = v[k]
    actual = v[k + horizon]
    mean, std = frame.m[k + 1], frame.sd[k + 1]
    if transform == "none":
        change, scale = actual, 1
    elif transform == "diff":
        change, scale = actual - origin_value, horizon
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            change, scale = np.log(actual) - np.log(origin_value), horizon
    y = (change - scale * mean) / std
    return ForecastProblem(X, y, origins + horizon, actual, origin_value, transform,
                           n_lags, horizon, first_row, mean, std)


def make_forecast_problem(values, *, n_lags, transform="none", horizon=1, exog=None):
    """Difference (optionally), standardise recursively and lag a 1-D series.

    Parameters
    ----------
    values : array-like of shape (n_values,)
        The series, in time order, finite (and positive for ``"logdiff"``).
    n_lags : int
        Lagged values per row (for the series and for each exogenous column).
    transform : {"none", "diff", "logdiff"}, default="none"
        Model the values, their changes, or their log changes.
    horizon : int, default=1
        Steps ahead of each row's origin that its target lies (see
        :class:`ForecastProblem`).
    exog : array-like of shape (n_values,) or (n_values, n_exog), default=None
        Exogenous columns aligned with ``values``, standardised with the statistics of
        their own past values and lagged like the series (no look-ahead).

    Returns
    -------
    problem : ForecastProblem
        ``X``, ``y`` and the map back to the series' units. The first two values of the
        modelled series only feed the statistics (a standard deviation needs two values),
        so the first row's most recent lag is the third.
    """
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}.")
    values = np.asarray(values, dtype=np.float64)
    if transform == "logdiff" and np.any(values <= 0):
        raise ValueError("transform 'logdiff' needs strictly positive values.")
    frame = extend_tail(StreamTail(), values, exog, transform=transform)
    return problem_from_tail(frame, n_lags=n_lags, transform=transform, horizon=horizon)

