"""Experiments behind the ``sklearn-orfit`` command: forecast, speed sweep, double descent.

Data flows one way: a 1-D series → (optional differencing) → recursive standardisation
(each value with the mean and standard deviation of the values *before* it) → lags →
model → prequential predictions, mapped back to the series' units with the same past
statistics. Nothing here looks ahead: the forecast of value ``t`` uses values ``< t``
only (the prequential protocol, user guide).

The functions are plain and importable, so the command line (:mod:`sklearn_orfit._cli`),
the documentation's examples and the tests share them. Plots need matplotlib and the
progress bar needs tqdm; both are optional.
"""

import contextlib
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ._ewrls import EWRLSRegressor
from ._orfit import ORFitRegressor
from ._pipeline import make_streaming_pipeline
from ._prequential import prequential_predict
from ._qr_ewrls import QREWRLSRegressor
from ._qrd_rls import QRDRLSRegressor
from ._rff import RandomFourierFeatures
from ._sw_krls import SlidingWindowKRLSRegressor
from .datasets import make_abo_series, make_lagged

__all__ = [
    "MODELS",
    "TABLE5_CPP_MS",
    "ForecastProblem",
    "ForecastResult",
    "blas_threads",
    "double_descent_sweep",
    "make_forecast_model",
    "make_forecast_problem",
    "plot_double_descent",
    "plot_forecast",
    "progress_bar",
    "run_forecast",
    "speed_sweep",
]

MODELS = ("abo", "orfit", "ensemble", "sw-krls", "qrd-rls", "ewrls")
TRANSFORMS = ("none", "diff", "logdiff")

# ABO paper, Table 5: the authors' C++ (Google Benchmark, i7-1370P, one thread),
# milliseconds per 1000 predict+update steps, N = 20, 7 lags (ABO paper §3.8).
TABLE5_CPP_MS = {
    2: 6.11, 4: 6.25, 8: 7.59, 16: 9.22, 32: 13.25, 64: 19.79, 128: 36.00,
    256: 64.30, 512: 438.02, 1024: 887.13, 2048: 1495.53, 4096: 2699.60,
    8192: 5508.04, 16384: 11971.30,
}  # fmt: skip


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
def past_mean_std(s):
    """Mean and standard deviation of ``s[:t]`` for every ``t`` (``t = 0``: NaN).

    Population statistics (``ddof=0``) from prefix sums of the values shifted by
    ``s[0]``, which keeps the sums small for series far from zero. A zero standard
    deviation is replaced by 1, as :class:`~sklearn_orfit.RecursiveStandardScaler` does.
    """
    s = np.asarray(s, dtype=np.float64)
    d = s - s[0]
    n = np.arange(1, s.size, dtype=np.float64)
    mean_d = np.cumsum(d[:-1]) / n
    var = np.maximum(np.cumsum(d[:-1] * d[:-1]) / n - mean_d * mean_d, 0.0)
    mean = np.full(s.size, np.nan)
    std = np.full(s.size, np.nan)
    mean[1:] = mean_d + s[0]
    sd = np.sqrt(var)
    # a constant stretch: scale 1, as RecursiveStandardScaler
    std[1:] = np.where(sd > np.finfo(np.float64).eps * np.maximum(np.abs(mean[1:]), 1.0), sd, 1.0)
    return mean, std


@dataclass
class ForecastProblem:
    """A series turned into a prequential regression problem.

    Row ``i`` of ``X`` (the ``n_lags`` previous standardised values, most recent first)
    predicts ``y[i]``, the standardised value at position ``index[i]`` of ``values``.
    ``to_units(y_pred)`` maps standardised forecasts back to the units of ``values``.
    """

    values: np.ndarray
    X: np.ndarray
    y: np.ndarray
    index: np.ndarray
    transform: str
    n_lags: int
    _mean: np.ndarray = field(repr=False)
    _std: np.ndarray = field(repr=False)

    @property
    def actual(self):
        """The series values being forecast, in the original units."""
        return self.values[self.index]

    def to_units(self, y_pred):
        """Map standardised forecasts of ``y`` to forecasts of ``values[index]``."""
        k = self.index - (0 if self.transform == "none" else 1)  # position in s
        s_hat = np.asarray(y_pred) * self._std[k] + self._mean[k]
        if self.transform == "none":
            return s_hat
        previous = self.values[self.index - 1]
        if self.transform == "diff":
            return previous + s_hat
        return previous * np.exp(s_hat)  # logdiff


def min_series_length(*, n_lags, window_size, transform):
    """Fewest values a series needs: differencing, 2 for the statistics, lags, window, 2."""
    return (0 if transform == "none" else 1) + 2 + n_lags + window_size + 2


def make_forecast_problem(values, *, n_lags, transform="none"):
    """Difference (optionally), standardise recursively and lag a 1-D series.

    Parameters
    ----------
    values : array-like of shape (n_values,)
        The series, in time order, finite (and positive for ``"logdiff"``).
    n_lags : int
        Lagged values per row.
    transform : {"none", "diff", "logdiff"}, default="none"
        Model the values, their first differences, or their log returns.

    Returns
    -------
    problem : ForecastProblem
        ``X``, ``y`` and the map back to the series' units. The first two values of the
        modelled series only feed the statistics (a standard deviation needs two values),
        so ``y`` starts at the third.
    """
    values = np.asarray(values, dtype=np.float64)
    if transform not in TRANSFORMS:
        raise ValueError(f"transform must be one of {TRANSFORMS}, got {transform!r}.")
    if transform == "none":
        s = values
    elif transform == "diff":
        s = np.diff(values)
    else:
        if np.any(values <= 0):
            raise ValueError("transform 'logdiff' needs strictly positive values.")
        s = np.diff(np.log(values))
    mean, std = past_mean_std(s)
    z = (s - mean) / std  # z_t uses s_<t only
    z = z[2:]  # z_0 is undefined, z_1 has a one-value standard deviation
    X, y = make_lagged(z, n_lags)
    offset = 2 + n_lags + (0 if transform == "none" else 1)
    index = offset + np.arange(y.shape[0])
    return ForecastProblem(values, X, y, index, transform, n_lags, mean, std)


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
):
    """The streaming model ``name`` (one of :data:`MODELS`) on lagged inputs.

    ``abo``: random Fourier features → :class:`QREWRLSRegressor`; ``orfit`` and ``ewrls``:
    random Fourier features → :class:`ORFitRegressor` / :class:`EWRLSRegressor`;
    ``ensemble``: :class:`FeaturePartitionEnsemble` of ``abo`` sub-models;
    ``sw-krls`` and ``qrd-rls``: the baselines on the lags themselves. ``alpha=None``
    is 0 for ``abo`` (minimum norm) and the baselines' default ``1e-2`` otherwise;
    ``length_scale=None`` is ``1/sigma`` (the kernel the features approximate).
    """
    if name not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {name!r}.")

    def features():
        return RandomFourierFeatures(n_components, sigma=sigma, random_state=random_state)

    if name == "abo":
        reg = QREWRLSRegressor(
            window_size, forgetting_factor=forgetting_factor, alpha=alpha or 0.0
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
            alpha=1e-2 if alpha is None else alpha,
        )
    if name == "qrd-rls":
        return QRDRLSRegressor(window_size, alpha=1e-2 if alpha is None else alpha,
                               forgetting_factor=forgetting_factor)
    # ensemble (imported here: the class is optional in this layer)
    try:
        from ._ensemble import FeaturePartitionEnsemble
    except ImportError:
        raise ValueError(
            "model 'ensemble' needs sklearn_orfit.FeaturePartitionEnsemble, which this "
            "installation does not provide."
        ) from None
    reg = QREWRLSRegressor(window_size, forgetting_factor=forgetting_factor,
                           alpha=alpha or 0.0)
    return FeaturePartitionEnsemble(features(), reg, n_partitions=n_partitions, n_jobs=n_jobs)


@dataclass
class ForecastResult:
    """Prequential forecasts and their scores (errors on the scored rows only)."""

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


def run_forecast(model, problem, *, skip, chunk_size=250, quiet=True, desc="forecast"):
    """Predict-then-update over ``problem`` in chunks (the progress bar moves per chunk).

    The model continues its stream from chunk to chunk, so the predictions are those of
    one :func:`~sklearn_orfit.prequential_predict` call over all rows. Rows ``< skip``
    (the first window) are predicted and learned but not scored.
    """
    X, y = problem.X, problem.y
    n = y.shape[0]
    y_pred = np.empty(n)
    t0 = time.perf_counter()
    with progress_bar(n, desc=desc, quiet=quiet) as bar:
        for c0 in range(0, n, chunk_size):
            c1 = min(c0 + chunk_size, n)
            y_pred[c0:c1] = prequential_predict(model, X[c0:c1], y[c0:c1])
            bar.update(c1 - c0)
    seconds = time.perf_counter() - t0
    forecast = problem.to_units(y_pred)
    actual = problem.actual
    scored = np.arange(n) >= skip
    err2 = (actual - forecast)[scored] ** 2
    err2_std = (y - y_pred)[scored] ** 2
    # persistence: the last observed value (for differenced series, a zero change)
    persistence = problem.values[problem.index - 1]
    pers2 = (actual - persistence)[scored] ** 2
    with np.errstate(over="ignore", invalid="ignore"):
        return ForecastResult(
            y_pred=y_pred, forecast=forecast, actual=actual, scored=scored, seconds=seconds,
            res_mse=float(np.mean(err2)), res_var=float(np.var(err2, ddof=1)),
            res_mse_std=float(np.mean(err2_std)), res_var_std=float(np.var(err2_std, ddof=1)),
            persistence_mse=float(np.mean(pers2)),
            persistence_var=float(np.var(pers2, ddof=1)), seconds_per_update=seconds / n,
        )


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


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


def plot_forecast(result, path, *, title, times=None, rolling=48, last=None, units=""):
    """Series vs forecast (top, the last ``last`` values) and the rolling error; PNG.

    The bottom panel shows the rolling mean absolute error over the whole stream, with
    the stretch shown on top shaded. Returns ``path``, or ``None`` when matplotlib is
    not installed.
    """
    plt = _pyplot()
    if plt is None:
        return None
    n = result.actual.shape[0]
    x = np.arange(n) if times is None else np.asarray(times)
    lo = 0 if last is None else max(0, n - int(last))
    err, roll = rolling_mean_abs_error(result, rolling)
    fig, axes = plt.subplots(2, 1, figsize=(10, 5.6), gridspec_kw={"height_ratios": [3, 2]})
    axes[0].plot(x[lo:], result.actual[lo:], lw=1.2, color="0.2", label="series")
    axes[0].plot(x[lo:], result.forecast[lo:], lw=1.0, color="tab:orange",
                 label="one-step-ahead forecast (prequential)")
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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return path


# --------------------------------------------------------------------- speed (Table 5)
def blas_threads(threads):
    """``(context manager limiting BLAS to threads, describe())`` via threadpoolctl."""
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        return contextlib.nullcontext(), lambda: "unknown (threadpoolctl not installed)"
    ctx = threadpool_limits(limits=threads, user_api="blas")

    def describe():
        return ", ".join(
            f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
            for i in threadpool_info() if i["user_api"] == "blas"
        ) or "unknown"

    return ctx, describe


def _best_of(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _timed_chunked(rff, fresh_models, X, y):
    """A callable that streams ``X`` through the next fresh model in one call."""

    def run():
        prequential_predict(fresh_models.pop(), rff.transform(X), y)

    return run


def _timed_one_row(rff, fresh_models, X, y):
    """A callable that streams ``X`` through the next fresh model one row at a time."""

    def run():
        reg = fresh_models.pop()
        for xi, yi in zip(X, y):
            z = rff.transform_one(xi)
            reg.predict_one(z)
            reg.learn_one(z, yi)

    return run


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
            t_chunk = _best_of(
                _timed_chunked(rff, [QREWRLSRegressor(window_size).fit(Zw, yw)
                                     for _ in range(repeat)], Xs, ys), repeat)
            t_one = np.nan
            if one_row:
                t_one = _best_of(
                    _timed_one_row(rff, [QREWRLSRegressor(window_size).fit(Zw, yw)
                                         for _ in range(repeat)], Xs, ys), repeat)
            cpp = TABLE5_CPP_MS.get(D, np.nan)
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
    plt = _pyplot()
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
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
