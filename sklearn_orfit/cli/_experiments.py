"""Experiments behind the ``sklearn-orfit`` command: forecast, speed sweep, double descent.

Data flows one way: a 1-D series → (optional differencing) → recursive standardisation
(each value with the mean and standard deviation of the values *before* it) → lags (of
the series and of optional exogenous columns) → model → prequential predictions, mapped
back to the series' units with the statistics known at each forecast's origin. Nothing
here looks ahead: the forecast of value ``t`` made ``h`` steps ahead uses values
``<= t - h`` only, and learns a row only once its target is known (delayed labels; the
prequential protocol, user guide).

The statistics are those of :class:`~sklearn_orfit.RecursiveStandardScaler` (one
standardiser for the package, the command line and the benchmarks; :func:`past_stats`).
A stream can stop and continue: :class:`StreamTail` keeps the bounded past (the last
lags and the scaler's state) and :func:`run_forecast` aligns its chunks on the stream's
row numbers, so a continued stream gives the forecasts of one uninterrupted run, bit for
bit.

The functions are plain and importable, so the command line (:mod:`sklearn_orfit.cli._run`),
the documentation's examples, the benchmark scripts (``benchmarks/``: timing, machine
header, figures, results as JSON, the ABO paper's reference figures) and the tests share
them. Plots need matplotlib and the progress bar needs tqdm; both are optional.
"""

import contextlib
import copy
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..baselines._ewrls import EWRLSRegressor
from ..orfit._orfit import ORFitRegressor
from ..compose._pipeline import make_streaming_pipeline
from .._streaming._prequential import prequential_predict
from ..abo._qr_ewrls import QREWRLSRegressor
from ..baselines._qrd_rls import QRDRLSRegressor
from ..abo._rff import RandomFourierFeatures
from ..baselines._sw_krls import SlidingWindowKRLSRegressor
from ..datasets import make_abo_series, make_lagged
from .._plotting import draw_bands
from ..preprocessing import RecursiveStandardScaler
from ..utils.benchmarking import (  # noqa: F401  (the command line's measurements)
    TABLE5_CPP_MS,
    TABLE5_SETTING,
    best_of,
    blas_description,
    blas_threads,
    header_line,
    machine_header,
    peak_rss_mib,
    pyplot,
    save_figure,
    time_calls,
    timed_chunked,
    timed_one_row,
    write_results,
)

__all__ = [
    "MODELS",
    "TABLE5_CPP_MS",
    "ForecastProblem",
    "ForecastResult",
    "RunningStats",
    "StreamTail",
    "TABLE5_SETTING",
    "best_of",
    "blas_description",
    "blas_threads",
    "machine_header",
    "header_line",
    "peak_rss_mib",
    "pyplot",
    "save_figure",
    "write_results",
    "double_descent_sweep",
    "extend_tail",
    "first_origin",
    "make_forecast_model",
    "make_forecast_problem",
    "past_mean_std",
    "past_stats",
    "plot_double_descent",
    "plot_forecast",
    "problem_from_tail",
    "progress_bar",
    "run_forecast",
    "speed_sweep",
    "time_calls",
]

MODELS = ("abo", "orfit", "ensemble", "sw-krls", "qrd-rls", "ewrls", "aggregate")
# the expert grid of model "aggregate" when none is given (make_expert_grid's
# parameters): chosen by measurement on the bundled series (README, "The command line")
DEFAULT_EXPERTS = {"abo_windows": (50, 200), "sigmas": (0.5, 1.0), "n_components": (1024,),
                   "krls_windows": (50, 200)}
TRANSFORMS = ("none", "diff", "logdiff")
#: the ridge of each model with one when ``alpha=None`` (make_forecast_model): none for
#: ABO (the minimum-norm solution), the baselines' own default otherwise
DEFAULT_ALPHA = {"abo": 0.0, "ensemble": 0.0, "sw-krls": 1e-2, "qrd-rls": 1e-2}

# --------------------------------------------------------------------------- progress
class _NoBar:
    def update(self, n=1):
        pass

    def set_postfix_str(self, s):
        pass

    def close(self):
        pass


@contextlib.contextmanager
def progress_bar(total, *, desc, quiet=False, unit="row"):
    """A tqdm progress bar on stderr, or a silent stand-in (quiet, or no tqdm)."""
    bar = _NoBar()
    if not quiet:
        try:
            from tqdm.auto import tqdm
        except ImportError:
            pass
        else:
            bar = tqdm(total=total, desc=desc, unit=unit, leave=False, dynamic_ncols=True)
    try:
        yield bar
    finally:
        bar.close()


# --------------------------------------------------------------------------- forecast
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


def make_forecast_model(
    name,
    *,
    n_components=4096,
    sigma=0.5,
    window_size=50,
    forgetting_factor=1.0,
    alpha=None,
    length_scale=None,
    memory_size=32,
    memory_policy="pca",
    delta=1e-2,
    n_partitions=4,
    n_jobs=None,
    random_state=0,
    experts=None,
):
    """The streaming model ``name`` (one of :data:`MODELS`) on lagged inputs.

    ``aggregate``: :class:`~sklearn_orfit.AggregatingRegressor` (BOA) over the experts
    of :func:`~sklearn_orfit.make_expert_grid` with the parameters ``experts`` (a dict;
    ``None``: :data:`DEFAULT_EXPERTS`).

    ``abo``: random Fourier features → :class:`QREWRLSRegressor`; ``orfit`` and ``ewrls``:
    random Fourier features → :class:`ORFitRegressor` / :class:`EWRLSRegressor`;
    ``ensemble``: :class:`FeaturePartitionEnsemble` of ``abo`` sub-models;
    ``sw-krls`` and ``qrd-rls``: the baselines on the lags themselves. ``alpha=None``
    is :data:`DEFAULT_ALPHA` (0 for ``abo``: minimum norm; the baselines' ``1e-2``);
    ``length_scale=None`` is ``1/sigma`` (the kernel the features approximate).
    """
    if name not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {name!r}.")

    def features():
        return RandomFourierFeatures(n_components, sigma=sigma, random_state=random_state)

    if alpha is None and name in DEFAULT_ALPHA:
        alpha = DEFAULT_ALPHA[name]
    if name == "aggregate":
        from ..compose._aggregating import AggregatingRegressor, make_expert_grid

        grid = make_expert_grid(**{**(DEFAULT_EXPERTS if experts is None else experts),
                                   "random_state": random_state})
        if not grid:
            raise ValueError("the expert grid is empty: give ABO or SW-KRLS windows.")
        return AggregatingRegressor(grid, history_size=None, n_jobs=n_jobs)
    if name == "abo":
        reg = QREWRLSRegressor(
            window_size, forgetting_factor=forgetting_factor, alpha=alpha
        )
        return make_streaming_pipeline(features(), reg)
    if name == "orfit":
        reg = ORFitRegressor(memory_size=memory_size, memory_policy=memory_policy,
                             random_state=random_state)
        return make_streaming_pipeline(features(), reg)
    if name == "ewrls":
        reg = EWRLSRegressor(forgetting_factor=forgetting_factor, delta=delta)
        return make_streaming_pipeline(features(), reg)
    if name == "sw-krls":
        return SlidingWindowKRLSRegressor(
            window_size,
            length_scale=1.0 / sigma if length_scale is None else length_scale,
            alpha=alpha,
        )
    if name == "qrd-rls":
        return QRDRLSRegressor(window_size, alpha=alpha,
                               forgetting_factor=forgetting_factor)
    # ensemble (imported here: the class is optional in this layer)
    try:
        from ..compose._ensemble import FeaturePartitionEnsemble
    except ImportError:
        raise ValueError(
            "model 'ensemble' needs sklearn_orfit.FeaturePartitionEnsemble, which this "
            "installation does not provide."
        ) from None
    reg = QREWRLSRegressor(window_size, forgetting_factor=forgetting_factor,
                           alpha=alpha)
    return FeaturePartitionEnsemble(features(), reg, n_partitions=n_partitions, n_jobs=n_jobs)


@dataclass
class ForecastResult:
    """Prequential forecasts and their scores (errors on the scored rows only).

    ``scores`` holds :func:`sklearn_orfit.metrics.forecast_scores` of the scored rows
    (RMSE, MAE, MASE, skills against the last-value and seasonal-naive forecasts and a
    one-sentence summary), in the series' units; ``checkpoint`` is ``(model, row)``:
    the model as it was before row ``row`` (a chunk boundary), from which the stream can
    be continued exactly.
    """

    y_pred: np.ndarray  # standardised
    forecast: np.ndarray  # in the series' units
    actual: np.ndarray
    scored: np.ndarray  # boolean mask of the rows entering the scores
    seconds: float
    res_mse: float
    res_var: float
    res_mse_std: float
    res_var_std: float
    persistence_mse: float
    persistence_var: float
    seconds_per_update: float = 0.0
    index: np.ndarray = None
    scores: dict = field(default_factory=dict)
    checkpoint: tuple = None
    future: dict = None  # the forecast of the values after the data (the CLI's)
    experts: dict = None  # model "aggregate": its weights (the CLI's)


def run_forecast(model, problem, *, skip, chunk_size=250, quiet=True, desc="forecast",
                 delay=None, start_row=None, report_from=None, season=None,
                 checkpoint=False):
    """Predict-then-update over ``problem`` in chunks (the progress bar moves per chunk).

    Chunks are aligned on the stream's row numbers (rows ``k·chunk_size ..``), so a run
    continued from a checkpoint makes the same calls as one uninterrupted run, and gives
    the same predictions bit for bit. Rows ``< skip`` (the first window) are predicted and
    learned but not scored.

    With ``delay = d > 0`` (``horizon − 1``: a row's target is known ``d`` rows after the
    row is built), row ``i`` is predicted by the model that has learned rows
    ``< i − d``: each chunk is predicted by
    ``prequential_predict(copy, ..., delay=d)`` on a copy of the model, then the model
    learns the chunk's rows whose targets are known (twice the learning cost).

    ``problem`` holds rows ``problem.first_row ..``; the model has learned the rows
    before ``start_row − delay`` (default: the problem's first row plus the delay);
    predictions are computed from ``start_row`` (a chunk boundary) and reported from
    ``report_from`` (default ``start_row``). ``checkpoint=True`` keeps a copy of the model
    at the last chunk boundary (``result.checkpoint``).
    """
    d = problem.horizon - 1 if delay is None else int(delay)
    X, y = problem.X, problem.y
    r0 = problem.first_row
    start = r0 + (d if r0 > 0 else 0) if start_row is None else int(start_row)
    report = start if report_from is None else int(report_from)
    end = r0 + y.shape[0]
    y_pred = np.full(end - start, np.nan)
    snapshot = None
    t0 = time.perf_counter()
    with progress_bar(end - report, desc=desc, quiet=quiet) as bar:
        g = start
        while g < end:
            g1 = min((g // chunk_size + 1) * chunk_size, end)
            if checkpoint and g1 - g < chunk_size:  # the last, partial chunk
                snapshot = (copy.deepcopy(model), g)
            lo = max(r0, g - d)
            if d == 0:
                p = prequential_predict(model, X[g - r0:g1 - r0], y[g - r0:g1 - r0])
            else:
                p = prequential_predict(copy.deepcopy(model), X[lo - r0:g1 - r0],
                                        y[lo - r0:g1 - r0], delay=d)[g - lo:]
                if g1 - d > lo:  # the targets known by the end of the chunk
                    prequential_predict(model, X[lo - r0:g1 - d - r0],
                                        y[lo - r0:g1 - d - r0])
            y_pred[g - start:g1 - start] = p
            bar.update(max(0, g1 - max(g, report)))
            g = g1
    seconds = time.perf_counter() - t0
    if checkpoint and snapshot is None:
        snapshot = (model, end)
    keep = slice(report - r0, end - r0)
    y_pred = y_pred[report - start:]
    forecast = problem.to_units(y_pred, keep)
    actual = problem.actual[keep]
    n = y_pred.shape[0]
    scored = np.arange(report, end) >= skip
    err2 = (actual - forecast)[scored] ** 2
    err2_std = (y[keep] - y_pred)[scored] ** 2 if n else np.empty(0)
    # persistence: the last value known at the origin (for changes, a zero change)
    pers2 = (actual - problem.persistence[keep])[scored] ** 2
    # np.errstate is thread-local (warnings.catch_warnings is not: series may run in
    # threads); too few scored rows give NaN, not a warning
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scores = _scores(actual[scored], forecast[scored], season=season,
                         horizon=problem.horizon)
        return ForecastResult(
            y_pred=y_pred, forecast=forecast, actual=actual, scored=scored, seconds=seconds,
            res_mse=_mean(err2), res_var=_var(err2),
            res_mse_std=_mean(err2_std), res_var_std=_var(err2_std),
            persistence_mse=_mean(pers2), persistence_var=_var(pers2),
            seconds_per_update=seconds / max(n, 1), index=problem.index[keep],
            scores=scores, checkpoint=snapshot,
        )


def _mean(x):
    return float(np.mean(x)) if x.shape[0] else math.nan


def _var(x):
    return float(np.var(x, ddof=1)) if x.shape[0] > 1 else math.nan


_SCORE_KEYS = ("rmse", "mae", "mase", "res_mse", "res_var", "skill_last_value",
               "skill_seasonal_naive", "beats_last_value", "beats_seasonal_naive",
               "summary")


def _scores(actual, forecast, *, season, horizon):
    """:func:`~sklearn_orfit.metrics.forecast_scores`, or NaNs where it cannot score."""
    try:
        from ..metrics import forecast_scores
    except ImportError:  # pragma: no cover - an installation without the metrics
        return {}
    if actual.shape[0] < 2 or not (np.all(np.isfinite(actual))
                                   and np.all(np.isfinite(forecast))):
        return {"rmse": math.nan, "mae": math.nan, "mase": None, "res_mse": math.nan,
                "res_var": math.nan, "skill_last_value": None,
                "skill_seasonal_naive": None, "beats_last_value": None,
                "beats_seasonal_naive": None,
                "summary": "The forecasts cannot be scored (too few rows, or forecasts "
                           "that are not finite)."}
    try:
        return forecast_scores(actual, forecast, season=season, horizon=horizon)
    except ValueError as exc:
        return {**dict.fromkeys(_SCORE_KEYS), "rmse": math.nan, "mae": math.nan,
                "res_mse": math.nan, "res_var": math.nan,
                "summary": f"The forecasts cannot be scored: {exc}"}


def rolling_mean_abs_error(result, window):
    """Mean ``|actual − forecast|`` over the last ``window`` scored rows (NaN before)."""
    err = np.abs(result.actual - result.forecast)
    err[~result.scored] = np.nan
    n = err.shape[0]
    w = max(1, min(int(window), n))
    kernel = np.ones(w)
    total = np.convolve(np.nan_to_num(err, nan=0.0, posinf=0.0), kernel, mode="full")[:n]
    count = np.convolve(np.isfinite(err).astype(float), kernel, mode="full")[:n]
    with np.errstate(invalid="ignore", divide="ignore"):
        return err, np.where(count >= w - 0.5, total / np.where(count > 0, count, 1.0), np.nan)


def plot_forecast(result, path, *, title, times=None, rolling=48, last=None, units="",
                  horizon=1, future=None):
    """Series vs forecast (top, the last ``last`` values) and the rolling error; PNG.

    The bottom panel shows the rolling mean absolute error over the whole stream, with
    the stretch shown on top shaded. ``future``: the forecast of the values after the
    data, drawn after them with its bands (a dict: ``x``, the future time stamps or
    ``None`` for positions; ``forecast``; ``levels`` in %; ``intervals`` of shape
    ``(horizon, n_levels, 2)``). Returns ``path``, or ``None`` when matplotlib is not
    installed.
    """
    plt = pyplot()
    if plt is None:
        return None
    n = result.actual.shape[0]
    x = np.arange(n) if times is None else np.asarray(times)
    lo = 0 if last is None else max(0, n - int(last))
    err, roll = rolling_mean_abs_error(result, rolling)
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.6), gridspec_kw={"height_ratios": [3, 2]})
    axes[0].plot(x[lo:], result.actual[lo:], lw=1.2, color="0.2", label="series")
    axes[0].plot(x[lo:], result.forecast[lo:], lw=1.0, color="tab:orange",
                 label=("one-step-ahead" if horizon == 1 else f"{horizon}-step-ahead")
                 + " forecast (prequential)")
    if future is not None:
        h = len(future["forecast"])
        fx = np.arange(n, n + h) if future.get("x") is None else np.asarray(future["x"])
        draw_bands(axes[0], fx, np.asarray(future["intervals"]),
                   [f"{level:g} % interval" for level in future["levels"]],
                   order=np.argsort(future["levels"])[::-1])  # the widest band first
        axes[0].plot(fx, future["forecast"], lw=1.4, color="tab:green", marker="o",
                     markersize=2.5, label=("forecast of the next value" if h == 1 else
                                            f"forecast of the next {h} values"))
    axes[0].set_title(title, fontsize=10)
    axes[0].set_ylabel(units)
    axes[0].legend(loc="best", fontsize=8)
    axes[0].grid(alpha=0.3)
    axes[1].plot(x, err, lw=0.4, color="tab:blue", alpha=0.3, label="|error|")
    axes[1].plot(x, roll, lw=1.4, color="tab:red", label=f"rolling mean |error| ({rolling} steps)")
    if lo > 0:
        axes[1].axvspan(x[lo], x[-1], color="0.85", zorder=0, label="shown above")
    axes[1].set_ylabel(f"|error| {units}".strip())
    axes[1].legend(loc="upper left", fontsize=8, ncol=3)
    axes[1].grid(alpha=0.3)
    finite = err[np.isfinite(err)]
    if finite.size:  # a few huge errors should not flatten the rolling curve
        axes[1].set_ylim(0, float(np.quantile(finite, 0.995)) * 1.05 + 1e-300)
    if times is not None:
        for ax in axes:
            for label in ax.get_xticklabels():
                label.set_rotation(20)
                label.set_horizontalalignment("right")
    fig.tight_layout()
    return save_figure(fig, path, dpi=80)


def speed_sweep(dims, *, n_steps=1000, window_size=20, n_lags=7, repeat=3,
                one_row=True, quiet=True):
    """Milliseconds per ``n_steps`` predict+update steps of RFF → QR-EWRLS for each D.

    ABO Table 5 setting (ABO paper §3.8): the synthetic series, ``N = 20``, 7 lags; the window
    is filled before timing. "chunked" is one :func:`prequential_predict` call over the
    steps (features included); "one-row" is ``transform_one`` + ``predict_one`` +
    ``learn_one`` per row. Best of ``repeat``. Returns one dict per ``D``.
    """
    x = make_abo_series(window_size + n_steps + n_lags + 1, random_state=0)
    X, y = make_lagged(x, n_lags)
    Xw, yw = X[:window_size], y[:window_size]
    Xs, ys = X[window_size:window_size + n_steps], y[window_size:window_size + n_steps]
    rows = []
    with progress_bar(len(dims), desc="benchmark", quiet=quiet, unit="D") as bar:
        for D in dims:
            rff = RandomFourierFeatures(D, sigma=1.0, random_state=0).fit(Xw)
            Zw = rff.transform(Xw)
            t_chunk = best_of(
                timed_chunked(rff, [QREWRLSRegressor(window_size).fit(Zw, yw)
                                     for _ in range(repeat)], Xs, ys), repeat)
            t_one = np.nan
            if one_row:
                t_one = best_of(
                    timed_one_row(rff, [QREWRLSRegressor(window_size).fit(Zw, yw)
                                         for _ in range(repeat)], Xs, ys), repeat)
            cpp = TABLE5_CPP_MS.get(D, math.nan)
            rows.append({"D": D, "chunked_ms": 1e3 * t_chunk, "one_row_ms": 1e3 * t_one,
                         "cpp_ms": cpp, "cpp_over_chunked": cpp / (1e3 * t_chunk)})
            bar.update(1)
    return rows


# ------------------------------------------------------------------ double descent
def double_descent_sweep(dims, *, n_updates=10_000, lambdas=(1.0, 0.9), window_size=20,
                         n_lags=7, sigma=1.0, random_state=0, chunk_size=1000,
                         quiet=True):
    """Prequential error of RFF → QR-EWRLS against the number of features D (ABO paper §3.7).

    The ABO synthetic series, recursively standardised, 7 lags; the rows before the
    last ``n_updates`` fill the window, the last ``n_updates`` are predicted then
    learned. Per ``(λ, D)``: mean and sample variance of ``|y_t − ŷ_t|`` ("test"), the
    median of the window's condition number at the end of each chunk, and µs per
    update. Also returns, for ``D > N``, the largest relative difference between the
    predictions of the two forgetting factors (the λ identity: zero up to rounding).
    """
    series = make_abo_series(n_updates + 500, random_state=random_state)
    problem = make_forecast_problem(series, n_lags=n_lags)
    X, y = problem.X, problem.y
    n_warm = X.shape[0] - n_updates
    rows, preds = [], {}
    with progress_bar(len(dims) * len(lambdas), desc="double descent", quiet=quiet,
                      unit="fit") as bar:
        for D in dims:
            rff = RandomFourierFeatures(D, sigma=sigma, random_state=random_state).fit(X[:1])
            Z_warm = rff.transform(X[:n_warm])
            for lam in lambdas:
                reg = QREWRLSRegressor(window_size, forgetting_factor=lam)
                reg.partial_fit(Z_warm, y[:n_warm])
                y_pred, kappa, seconds = [], [], 0.0
                for c0 in range(n_warm, X.shape[0], chunk_size):
                    c1 = min(c0 + chunk_size, X.shape[0])
                    Zc = rff.transform(X[c0:c1])
                    t0 = time.perf_counter()
                    y_pred.append(prequential_predict(reg, Zc, y[c0:c1]))
                    seconds += time.perf_counter() - t0
                    kappa.append(reg.condition_number_)
                y_pred = np.concatenate(y_pred)
                preds[(lam, D)] = y_pred
                r = np.abs(y[n_warm:] - y_pred)
                rows.append({"lambda": lam, "D": D, "test_mean": float(r.mean()),
                             "test_var": float(r.var(ddof=1)),
                             "kappa_median": float(np.median(kappa)),
                             "us_per_update": 1e6 * seconds / n_updates})
                bar.update(1)
    over = [D for D in dims if D > window_size]
    identity = np.nan
    if over and len(lambdas) > 1:
        a, b = lambdas[0], lambdas[1]
        identity = max(
            float(np.max(np.abs(preds[(a, D)] - preds[(b, D)])
                         / np.max(np.abs(preds[(a, D)]))))
            for D in over
        )
    return rows, identity


def plot_double_descent(rows, path, *, window_size=20):
    """Test error against D (log-log), one line per λ, threshold D = N marked; PNG."""
    plt = pyplot()
    if plt is None:
        return None
    fig, ax = plt.subplots(figsize=(7, 4))
    for lam, style in zip(sorted({r["lambda"] for r in rows}, reverse=True),
                          ("o-", "s--", "^:", "v-.")):
        rs = sorted((r for r in rows if r["lambda"] == lam), key=lambda r: r["D"])
        ax.loglog([r["D"] for r in rs], [r["test_mean"] for r in rs], style, label=f"λ = {lam}")
    ax.axvline(window_size, color="k", ls=":", label=f"D = N = {window_size}")
    ax.set_xlabel("number of random features D")
    ax.set_ylabel("mean |y_t − ŷ_t| (prequential)")
    ax.set_title("Double descent of ABO on the synthetic series")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_figure(fig, path, dpi=100)
