"""Experiments behind the ``sklearn-orfit`` command: forecast, speed sweep, double descent.

The forecast runs the library's forecasting chain: a
:class:`~sklearn_orfit.StreamForecaster` (lags, targets ``h`` steps ahead, a model of
:func:`~sklearn_orfit._forecast_models.make_forecast_model` behind a running
standardisation, conformal intervals). :func:`run_stream` feeds it the series in pieces
aligned on the stream's positions, so a stream continued from a checkpoint makes the
calls of one uninterrupted run, and scores the forecasts it made in the series' units.

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

from .._plotting import draw_bands
from .._streaming._prequential import prequential_predict
from ..abo._qr_ewrls import QREWRLSRegressor
from ..abo._rff import RandomFourierFeatures
from ..datasets import make_abo_series, make_lagged
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
    "TABLE5_CPP_MS",
    "ForecastResult",
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
    "plot_double_descent",
    "plot_forecast",
    "progress_bar",
    "run_stream",
    "speed_sweep",
    "time_calls",
]


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
@dataclass
class ForecastResult:
    """The forecasts a :class:`~sklearn_orfit.StreamForecaster` made while it learned a
    stream, and their scores (errors on the scored positions only).

    ``index`` holds the positions (from the start of the stream) of the values whose
    forecasts are reported, ``forecast`` the forecast of each made ``horizon`` steps
    before and ``actual`` its value; ``half_widths`` the half-widths of the intervals
    (adaptive conformal) issued with each forecast, one column per level. ``scores``
    holds :func:`sklearn_orfit.metrics.forecast_scores` of the scored positions (RMSE,
    MAE, MASE, skills against the last-value and seasonal-naive forecasts and a
    one-sentence summary), in the series' units; ``checkpoint`` is
    ``(forecaster, position)``: the forecaster as it was before the value at
    ``position`` (a multiple of the chunk size), from which the stream can be continued
    exactly.
    """

    forecast: np.ndarray
    actual: np.ndarray
    scored: np.ndarray  # boolean mask of the positions entering the scores
    seconds: float
    res_mse: float
    res_var: float
    persistence_mse: float
    persistence_var: float
    seconds_per_update: float = 0.0
    index: np.ndarray = None
    half_widths: np.ndarray = None
    n_updates: int = 0
    scores: dict = field(default_factory=dict)
    checkpoint: tuple = None
    future: dict = None  # the forecast of the values after the data (the CLI's)
    experts: dict = None  # model "aggregate": its weights (the CLI's)


def run_stream(forecaster, y, X=None, *, skip=0, quiet=True,
               desc="forecast", report_from=None, season=None, checkpoint=False):
    """Learn ``y`` (and the exogenous rows ``X``) with ``forecaster``, recording the
    forecast of each value ``horizon`` steps ahead as the stream made it.

    ``forecaster`` is a :class:`~sklearn_orfit.StreamForecaster` that has started its
    stream (``fit`` on earlier values, or its private ``_start``); the values are given
    to it in pieces that end on the stream's multiples of ``chunk_size`` (its own
    ``chunk_size``: the progress bar moves per piece), so the calls do not depend on
    where an earlier run stopped: a stream continued from a checkpoint gives the
    forecasts of one uninterrupted run, bit for bit, for the values of every block both
    complete; in a run's last, unfinished block they differ in the last bits only
    (~1e-15 relative: its prequential call is shorter).

    The forecasts of the positions ``>= report_from`` (from the start of the stream;
    ``None``: the first the forecaster makes, after its first row is learned) are
    reported; those of the positions ``>= skip`` are scored. ``checkpoint=True``
    keeps a copy of the forecaster before the last piece when that piece ends between
    multiples of ``chunk_size`` (``result.checkpoint``).
    """
    fc = forecaster
    h = fc.horizon
    n0 = fc.n_samples_seen_
    past = np.array(fc._y_hist, dtype=np.float64)  # the values before n0 (the last ones)
    n = y.shape[0]
    X = np.empty((n, 0)) if X is None else X
    nl = len(fc._levels)
    F = np.full(n, np.nan)
    Q = np.full((n, nl), np.nan)
    C = int(fc.chunk_size)
    snapshot = None
    seconds = 0.0
    if report_from is None:
        report_from = fc._t0 + fc._reach + h
    first = max(int(report_from), n0)
    with progress_bar(max(0, n0 + n - first), desc=desc, quiet=quiet, unit="value") as bar:
        a = 0
        while a < n:
            b = min(n, a + C - (n0 + a) % C)  # the piece ends on a multiple of C
            if checkpoint and (n0 + b) % C and b == n:  # the last piece, partial
                snapshot = (copy.deepcopy(fc), n0 + a)
            t0 = time.perf_counter()
            Fk, Qk = fc._run(y[a:b], X[a:b], record=True)
            seconds += time.perf_counter() - t0
            F[a:b] = Fk[:, h - 1]
            Q[a:b] = Qk[:, h - 1, 0]  # ACI's half-widths
            bar.update(max(0, n0 + b - max(n0 + a, first)))
            a = b
    if checkpoint and snapshot is None:
        snapshot = (fc, n0 + n)
    keep = slice(first - n0, n)
    index = np.arange(first, n0 + n)
    forecast, actual, half = F[keep], y[keep], Q[keep]
    scored = index >= skip
    values = np.concatenate([past, y])  # positions n0 - len(past) ..
    last_known = values[index - h - (n0 - past.shape[0])]
    err2 = (actual - forecast)[scored] ** 2
    # persistence: the last value known at the origin
    pers2 = (actual - last_known)[scored] ** 2
    # np.errstate is thread-local (warnings.catch_warnings is not: series may run in
    # threads); too few scored values give NaN, not a warning
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        scores = _scores(actual[scored], forecast[scored], season=season, horizon=h)
        return ForecastResult(
            forecast=forecast, actual=actual, scored=scored, seconds=seconds,
            res_mse=_mean(err2), res_var=_var(err2),
            persistence_mse=_mean(pers2), persistence_var=_var(pers2),
            seconds_per_update=seconds / max(n, 1), index=index, half_widths=half,
            n_updates=n, scores=scores, checkpoint=snapshot,
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
    # each value standardised with the mean and deviation of the values before it (the
    # first two only start the statistics), then lagged
    z = RecursiveStandardScaler().prequential_transform(series[:, None])[2:, 0]
    X, y = make_lagged(z, n_lags)
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
