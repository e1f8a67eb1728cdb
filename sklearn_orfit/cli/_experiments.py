"""Experiments behind the ``sklearn-orfit`` command: forecast, speed sweep, double descent.

The forecast runs the library's forecasting chain: the rows of
:mod:`sklearn_orfit._forecast_problem` (past-only standardisation, lags, targets ``h``
steps ahead) and a model of :func:`~sklearn_orfit._forecast_models.make_forecast_model`.
:func:`run_forecast` predicts-then-updates over those rows in chunks aligned on the
stream's row numbers, so a stream continued from a checkpoint gives the forecasts of one
uninterrupted run, bit for bit, and scores the forecasts in the series' units.

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

from .._forecast_problem import make_forecast_problem
from .._plotting import draw_bands
from .._streaming._prequential import prequential_predict
from ..abo._qr_ewrls import QREWRLSRegressor
from ..abo._rff import RandomFourierFeatures
from ..datasets import make_abo_series, make_lagged
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
    "run_forecast",
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
