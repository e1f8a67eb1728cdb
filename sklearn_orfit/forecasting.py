"""Tuned forecasts: choose the transform, window, σ and model on the start of a series.

:func:`tune_forecast` searches, on the first part of a series only, the settings the
``sklearn-orfit forecast`` command takes (the models of
:mod:`sklearn_orfit._forecast_models` on the rows a :class:`~sklearn_orfit.StreamForecaster`
learns): the transform (none, first differences, log returns), the window length ``N``, the random
features' frequency scale σ and the model, with scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV` driven by the prequential folds of
:class:`~sklearn_orfit.model_selection.PrequentialSplit` and the prequential scorer of
:func:`~sklearn_orfit.model_selection.make_prequential_scorer` (warm up on the rows before
a fold, then predict-then-update over it; the user guide's prequential protocol). The
rest of the series is left for reporting: the chosen settings are judged on values the
search never saw.

:func:`plot_forecast` draws a series with the forecasts of a
:class:`~sklearn_orfit.StreamForecaster` past its end and their prediction intervals.
"""

import contextlib
import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GridSearchCV
from sklearn.utils import Bunch

from ._forecast_models import DEFAULT_ALPHA, MODELS, make_forecast_model
from ._forecaster import StreamForecaster
from ._plotting import draw_bands
from ._streaming._prequential import prequential_predict
from .metrics import _beyond_scored_range
from .model_selection import PrequentialSplit, make_prequential_scorer
from .utils.benchmarking import blas_threads

__all__ = ["StreamForecaster", "plot_forecast", "tune_forecast"]

#: the transforms of the command line and of :func:`tune_forecast` (the names of
#: :class:`StreamForecaster`'s ``transform``: None, "diff", "log_diff")
TRANSFORMS = ("none", "diff", "logdiff")
_STREAM_TRANSFORM = {"none": None, "diff": "diff", "logdiff": "log_diff"}


def first_forecast_position(*, n_lags, transform, horizon=1):
    """Position of the first value the forecaster of :func:`_stream_forecaster`
    forecasts.

    Its first row's origin is the value of its last lag (``n_lags − 1``, one more when
    differenced); that row is learned once its targets, ``horizon`` values later, are
    known, and the first forecast is made from the origin ``horizon`` values after
    the first row's, of the value ``horizon`` steps later.
    """
    return _first_origin(n_lags, transform) + 2 * horizon


def _first_origin(n_lags, transform):
    """Position of the first origin with a full row (its oldest lag the first value
    of the transformed series)."""
    return n_lags - 1 + (transform != "none")


def min_series_length(*, n_lags, window_size, transform, horizon=1):
    """Fewest values a series needs: the first forecast, the window, 2 scored
    forecasts."""
    return first_forecast_position(n_lags=n_lags, transform=transform,
                                   horizon=horizon) + window_size + 2

# the models whose state is a sliding window of the last ``window_size`` rows
_WINDOWED = ("abo", "ensemble", "sw-krls", "qrd-rls")
# the settings each model uses (the others are not searched for it)
_USES_WINDOW = {"abo", "ensemble", "sw-krls", "qrd-rls"}
_USES_SIGMA = {"abo", "ensemble", "orfit", "ewrls", "sw-krls"}
_USES_ALPHA = {"abo", "ensemble", "sw-krls", "qrd-rls"}  # a ridge
_POSITIVE_ALPHA = {"sw-krls", "qrd-rls"}  # a ridge that must be > 0
_USES_D = {"abo", "ensemble", "orfit", "ewrls"}  # random features
# random features per model by default (the command line's defaults)
_DEFAULT_D = {"abo": 2048, "ensemble": 2048, "orfit": 2048, "ewrls": 256}


def default_n_components(model):
    """Random features ``D`` of ``model`` by default (2048; 256 for ewrls, whose
    covariance form costs ``D²`` per step; unused by the baselines on the lags)."""
    return _DEFAULT_D.get(model, 4096)


class _ForecastModel(RegressorMixin, BaseEstimator):
    """One of the command line's models (:func:`make_forecast_model`) as an estimator
    whose settings ``GridSearchCV`` can set: ``fit`` learns the rows in order (the
    warm-up), ``prequential_predict`` continues the stream."""

    def __init__(self, model="abo", window_size=50, sigma=0.5, n_components=None,
                 alpha=None, random_state=0, model_params=None):
        self.model = model
        self.window_size = window_size
        self.sigma = sigma
        self.n_components = n_components
        self.alpha = alpha
        self.random_state = random_state
        self.model_params = model_params

    def _make(self):
        d = (default_n_components(self.model) if self.n_components is None
             else self.n_components)
        params = dict(self.model_params or {})
        if self.alpha is not None:
            params["alpha"] = self.alpha
        return _forecaster_regressor(make_forecast_model(
            self.model, n_components=d, sigma=self.sigma, window_size=self.window_size,
            random_state=self.random_state, **params))

    def fit(self, X, y):
        self.estimator_ = self._make()
        self.estimator_.partial_fit(np.asarray(X, dtype=np.float64),
                                    np.asarray(y, dtype=np.float64))
        return self

    def partial_fit(self, X, y):
        if not hasattr(self, "estimator_"):
            self.estimator_ = self._make()
        self.estimator_.partial_fit(X, y)
        return self

    def predict(self, X):
        return self.estimator_.predict(X)

    def prequential_predict(self, X, y, *, delay=0):
        if not hasattr(self, "estimator_"):
            self.estimator_ = self._make()
        return prequential_predict(self.estimator_, X, y, delay=delay)


def _check_grid(name, values, check):
    values = tuple(values)
    if not values:
        raise ValueError(f"{name} is empty: give at least one value to search.")
    for v in values:
        check(v)
    if len(set(values)) != len(values):
        raise ValueError(f"{name} has repeated values: {values!r}.")
    return values


def _positive_int(name):
    def check(v):
        if not isinstance(v, numbers.Integral) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must hold ints >= 1, got {v!r}.")
    return check


def _finite_float(name, *, zero):
    """A check of finite real numbers ``> 0`` (``>= 0`` with ``zero=True``)."""
    def check(v):
        if (not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v)
                or v < 0 or (v == 0 and not zero)):
            raise ValueError(f"{name} must hold finite numbers {'>=' if zero else '>'} 0, "
                             f"got {v!r}.")
    return check


def _one_of(name, choices):
    def check(v):
        if v not in choices:
            raise ValueError(f"{name} must hold values among {choices}, got {v!r}.")
    return check


def _alphas_for(model, alphas):
    """The ridges of ``alphas`` that ``model`` takes (the baselines need ``α > 0``)."""
    if model not in _USES_ALPHA:
        return []
    return [a for a in alphas if a > 0 or model not in _POSITIVE_ALPHA]


def _param_grid(models, window_sizes, sigmas, alphas=None, dims=None, first=False):
    """One grid per model, with only the settings that model uses (``alphas`` and
    ``dims``: ``None`` when not searched; ``first``: only the first ridge the model
    takes and the first ``D``, a staged search's first stage)."""
    grid = []
    for m in models:
        g = {"model": [m]}
        if m in _USES_WINDOW:
            g["window_size"] = list(window_sizes)
        if m in _USES_SIGMA:
            g["sigma"] = list(sigmas)
        if alphas is not None and m in _USES_ALPHA:
            taken = _alphas_for(m, alphas)
            if not taken:
                raise ValueError(f"alphas holds no ridge that {m} takes (it needs "
                                 f"alpha > 0): {list(alphas)}.")
            g["alpha"] = taken[:1] if first else taken
        if dims is not None and m in _USES_D:
            g["n_components"] = list(dims)[:1] if first else list(dims)
        grid.append(g)
    return grid


def _used(base, params):
    """The ridge and random features a candidate uses (``None``: not used), as the
    table reports them."""
    m = params["model"]
    alpha = params.get("alpha", base.alpha)
    if alpha is None:
        alpha = (base.model_params or {}).get("alpha")
    if alpha is None and m in _USES_ALPHA:
        alpha = DEFAULT_ALPHA[m]
    d = params.get("n_components", base.n_components)
    if d is None:
        d = default_n_components(m)
    return (float(alpha) if m in _USES_ALPHA else None,
            int(d) if m in _USES_D else None)


#: rows a validation fold should hold at least for a window to be searched (else the
#: longest window's warm-up would leave every candidate a few rows to be judged on)
_MIN_FOLD = 10


def _feasible_fold_size(fewest, need_first, n_splits):
    """Rows per fold when the first fold starts after ``need_first`` rows."""
    return (fewest - max(need_first, fewest // (n_splits + 1))) // n_splits


class _Problem:
    """The rows a forecaster learns from a series (:func:`_stream_forecaster`'s, with
    ``transform``, ``n_lags``, ``horizon`` and the exogenous columns ``exog``, all
    past-only), as a regression problem for the search.

    ``X`` holds one row per origin; ``y`` its target ``horizon`` steps ahead (relative
    to a base known at the origin: the value's running mean, the last value, or its
    log); ``index``, the position of that target; ``actual``, its value.
    :meth:`to_units` maps predictions of ``y`` to forecasts in the series' units.
    """

    def __init__(self, values, exog, *, transform, n_lags, horizon):
        n_past = 0 if exog is None else (1 if exog.ndim == 1 else exog.shape[1])
        fc = _stream_forecaster(None, transform=transform, n_lags=n_lags,
                                horizon=horizon, n_past=n_past)
        fc._start(values, exog)
        yv, Xv, _ = fc._check_chunk(values, exog, first=True)
        X, Y, origins, bases = fc._learning_problem(yv, Xv)
        self._forecaster = fc
        self.X, self.y = X, Y[:, -1]
        self.index = origins + horizon
        self.actual = yv[self.index]
        self._base = bases[:, -1]

    def to_units(self, y_pred, rows=slice(None)):
        """Forecasts of ``actual[rows]`` from predictions ``y_pred`` of ``y[rows]``."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self._forecaster._from_target(np.asarray(y_pred, dtype=np.float64),
                                                 self._base[rows])


def _fold_errors(estimator, problem, cv, params, delay):
    """Replay the search's folds for ``params``: ``(actual, forecast)`` in the series'
    units over the scored rows of every fold, in time order.

    Each fold's model is warmed up on the fold's warm-up rows, then predicts-then-updates
    the fold with labels ``delay`` rows late (as the scorer does); the predictions are
    mapped back with the base known at each row's origin.
    """
    X, y = problem.X, problem.y
    actual, forecast = [], []
    for train, test in cv.split(X):
        est = clone(estimator).set_params(**params).fit(X[train], y[train])
        p = prequential_predict(est, X[test], y[test], delay=delay)[delay:]
        rows = test[delay:]
        actual.append(problem.actual[rows])
        forecast.append(problem.to_units(p, rows))
    return np.concatenate(actual), np.concatenate(forecast)


def _row(stage, transform, params=None, base=None, note=""):
    """One row of the table (``params=None``: a row that only carries a note)."""
    alpha, d = _used(base, params) if params is not None else (None, None)
    params = params or {}
    return {"stage": stage, "transform": transform, "model": params.get("model"),
            "window_size": params.get("window_size"), "sigma": params.get("sigma"),
            "alpha": alpha, "n_components": d, "target_rmse": None, "rank": None,
            "rmse": None, "mae": None, "chosen": False, "note": note}


def _search(v, ex_tune, *, transforms, grid, base, cv, scorer, n_lags, horizon, n_jobs,
            stage=1):
    """One ``GridSearchCV`` per transform, then each transform's best in series units."""
    delay = horizon - 1
    table, best_rows = [], []
    last_value_rmse = None
    positions = None
    for t in transforms:
        if t == "logdiff" and np.any(v <= 0):
            table.append(_row(stage, t, note="skipped: the tuning part is not strictly "
                                             "positive"))
            continue
        problem = _Problem(v, ex_tune, transform=t, n_lags=n_lags, horizon=horizon)
        search = GridSearchCV(base, grid, scoring=scorer, cv=cv, n_jobs=n_jobs,
                              refit=False, error_score="raise")
        search.fit(problem.X, problem.y)
        cvr = search.cv_results_
        rows = []
        for k, params in enumerate(cvr["params"]):
            score = -float(cvr["mean_test_score"][k])
            row = _row(stage, t, params, base)
            row["target_rmse"] = score if math.isfinite(score) else None
            row["rank"] = int(cvr["rank_test_score"][k])
            rows.append(row)
        best = rows[int(search.best_index_)]
        actual, forecast = _fold_errors(base, problem, cv,
                                           cvr["params"][search.best_index_], delay)
        err = actual - forecast
        with np.errstate(over="ignore", invalid="ignore"):
            rmse = float(np.sqrt(np.mean(err * err)))
            mae = float(np.mean(np.abs(err)))
        best["rmse"] = rmse if math.isfinite(rmse) else None
        best["mae"] = mae if math.isfinite(mae) else None
        best["note"] = "best of its transform (scored in the series' units)"
        best_rows.append((best, cvr["params"][search.best_index_]))
        table.extend(rows)
        if last_value_rmse is None:
            scored = problem.index[np.concatenate([test[delay:] for _, test in
                                                   cv.split(problem.X)])]
            positions = (int(scored[0]), int(scored[-1]) + 1)
            lv = v[scored] - v[scored - horizon]
            last_value_rmse = float(np.sqrt(np.mean(lv * lv)))
    return table, best_rows, last_value_rmse, positions


def _forecaster_regressor(model):
    """A model of :func:`make_forecast_model` behind a running standardisation of
    its rows (:class:`~sklearn_orfit.RecursiveStandardScaler`): the regressor of
    :func:`_stream_forecaster`."""
    from .compose._pipeline import StreamingPipeline, make_streaming_pipeline
    from .preprocessing import RecursiveStandardScaler

    steps = ([step for _, step in model.steps] if isinstance(model, StreamingPipeline)
             else [model])
    return make_streaming_pipeline(RecursiveStandardScaler(), *steps)


def _stream_forecaster(model, *, transform, n_lags, horizon, n_past=0, n_future=0,
                       coverage=(0.8, 0.95), conformal_window=1000, chunk_size=256):
    """The :class:`StreamForecaster` of a model of :func:`make_forecast_model`
    (:func:`_forecaster_regressor`; ``None``: the forecaster's default), ``n_lags``
    lags of the ``transform``-ed series and of ``n_past`` past-only exogenous columns,
    then ``n_future`` known-future columns; direct (one row, ``horizon`` targets)."""
    return StreamForecaster(
        None if model is None else _forecaster_regressor(model), n_lags=n_lags,
        transform=_STREAM_TRANSFORM[transform],
        future_exog=list(range(n_past, n_past + n_future)) or None,
        exog_lags=n_lags, horizon=horizon, strategy="direct", coverage=coverage,
        conformal_window=conformal_window, chunk_size=chunk_size)


def tune_forecast(
    series,
    *,
    horizon=1,
    n_lags=20,
    exog=None,
    transforms=("none", "diff", "logdiff"),
    window_sizes=(20, 50, 100),
    sigmas=(0.25, 0.5, 1.0),
    alphas=None,
    models=("abo",),
    n_components=None,
    model_params=None,
    search="full",
    tune_fraction=0.3,
    n_splits=3,
    warmup_size="auto",
    refit=True,
    n_jobs=None,
    threads=1,
    random_state=0,
):
    """Choose the transform, window, σ, ridge, D and model of a forecast on the series'
    first part.

    The first ``n_tune = floor(tune_fraction · len(series))`` values are turned into
    prequential rows for each transform: the rows the returned
    :class:`StreamForecaster` learns (``n_lags`` lags of the transformed series and of
    ``exog``, the target ``horizon`` steps ahead relative to a base known at the origin:
    the running mean, the last value or its log), each model behind a running
    standardisation of its rows; per transform, ``GridSearchCV`` searches the models and
    their settings over ``n_splits`` :class:`PrequentialSplit` folds at the end of
    those rows (labels ``horizon − 1`` rows late), scored by
    :func:`make_prequential_scorer` (RMSE of those targets). Each transform's
    best candidate is then replayed on the same folds and scored in the series' units,
    and the transform with the lowest RMSE there is chosen.

    Parameters
    ----------
    series : array-like of shape (n_values,)
        The series, in time order, finite.
    horizon : int, default=1
        Steps ahead of each forecast (the labels arrive ``horizon − 1`` rows late).
    n_lags : int, default=20
        Lagged values per row (of the series and of each exogenous column).
    exog : array-like of shape (n_values,) or (n_values, n_exog), default=None
        Exogenous columns aligned with ``series`` (lagged like it, never differenced).
    transforms : sequence of {"none", "diff", "logdiff"}, default=("none", "diff", "logdiff")
        Transforms to compare. ``"logdiff"`` is skipped (and the table says so) when
        the tuning part is not strictly positive.
    window_sizes : sequence of int, default=(20, 50, 100)
        Window lengths ``N`` searched (for the models with a window). With
        ``warmup_size="auto"``, a window whose warm-up leaves fewer than 10 rows to each
        fold in the tuning part is left out, and the table says so (a row with its
        note), as long as one window remains (when none leaves 10, those that leave 2).
    sigmas : sequence of float, default=(0.25, 0.5, 1.0)
        Frequency scales σ of the random features searched (``sw-krls``: the kernel's
        length scale ``1/σ``).
    alphas : sequence of float or None, default=None
        Ridges ``α ≥ 0`` searched, for the models with one (``abo``, ``ensemble``,
        ``sw-krls``, ``qrd-rls``; the two baselines take only the ridges ``> 0``).
        ``None``: not searched (``model_params["alpha"]`` or the model's default: 0
        for ``abo``, the minimum-norm solution).
    models : sequence of str, default=("abo",)
        Models searched, among ``"abo"``, ``"orfit"``, ``"ensemble"``, ``"sw-krls"``,
        ``"qrd-rls"`` and ``"ewrls"`` (see the command line's ``--model``).
    n_components : int, sequence of int or None, default=None
        Random features ``D``: one value, or the values searched (for the models with
        random features). ``None``: 2048, 256 for ``ewrls``.
    model_params : dict or None, default=None
        Further fixed settings of :func:`make_forecast_model` (``forgetting_factor``,
        ``alpha`` when ``alphas`` is ``None``, ``memory_size``, ...).
    search : {"full", "staged"}, default="full"
        ``"full"``: every combination of the settings (per transform). ``"staged"``:
        first the transforms, models, windows and σ at the first ridge of ``alphas``
        and the first ``D`` of ``n_components``; then, for the chosen transform, model,
        window and σ, every ridge and ``D`` (on the same folds), whose best is chosen.
        It costs ``|windows|·|σ| + |α|·|D|`` candidates instead of their product,
        and may miss a combination the full search would find.
    tune_fraction : float in (0, 1], default=0.3
        Fraction of the series, from its start, that the search may see.
    n_splits : int, default=3
        Validation folds, consecutive, ending with the tuning part.
    warmup_size : int, None or "auto", default="auto"
        Rows each fold's model learns before the fold. ``None``: every earlier row of
        the tuning part (the state a stream would have). ``"auto"``: the largest window
        when every searched model is a sliding window (its state is then the same as
        after every earlier row, at a fraction of the cost), else ``None``.
    refit : bool, default=True
        Also return ``forecaster``: a :class:`StreamForecaster` with the chosen
        settings, fitted on the whole series (as ``GridSearchCV`` refits on all its
        data): ready to ``predict`` the values after it and to ``update``.
    n_jobs : int or None, default=None
        ``GridSearchCV``'s parallel jobs.
    threads : int or None, default=1
        BLAS threads of this process during the search (through threadpoolctl, when
        installed). The updates are small matrix products, which more threads slow
        down, badly so on a busy machine. ``None``: leave BLAS as it is.
    random_state : int, default=0
        Seed of the random features.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``transform``, ``model``, ``window_size``, ``sigma``, ``alpha``,
        ``n_components`` (``None`` for a setting the chosen model does not use): the
        choice; ``model_kwargs``: the keywords of :func:`make_forecast_model` giving the
        chosen model; ``forecaster``: the fitted :class:`StreamForecaster` (``None``
        with ``refit=False``); ``table``: one dict per candidate (``stage``: 1, or 2
        for the second stage of a staged search, ``transform``, ``model``,
        ``window_size``, ``sigma``, ``alpha``, ``n_components``, ``target_rmse``: mean
        over the folds of the RMSE of the targets the search ranks by, ``rank``: within
        its stage and transform, ``rmse`` and ``mae``: in the series' units, over the
        validation folds, for the best candidate of each transform and stage,
        ``chosen``, ``note``); ``last_value_rmse``: the RMSE of the last-value forecast
        over the same positions; ``n_tune``: values the search saw (the report should
        start at position ``n_tune``); ``validation_positions``: ``(first, stop)`` of
        the positions whose forecasts were scored; ``n_values``, ``horizon``,
        ``n_lags``, ``n_splits``, ``fold_size``, ``warmup_size``, ``search``.

    See Also
    --------
    sklearn_orfit.model_selection.PrequentialSplit : The folds.
    sklearn_orfit.model_selection.make_prequential_scorer : The scorer.
    StreamForecaster : The forecaster returned.

    Notes
    -----
    "First part" means the values at positions ``< n_tune``: the search reads nothing
    after them (changing any later value leaves the choice and the table bit for bit as
    they were; only the refitted ``forecaster`` learns them), and a forecast reported
    from position ``n_tune`` on is judged on values the search never saw. The rows of
    each transform end with the same target, the value at ``n_tune − 1``, and the
    folds are the last ``n_splits · fold_size`` rows of each, so every transform is
    scored on the same target positions.

    Within a transform the candidates are ranked by the errors of the targets the
    model learns; across transforms those targets differ (deviations from the running
    mean, changes, log changes), so each transform's best is replayed on the same folds
    with its forecasts mapped back to the series' units with the base known at each
    origin, where the errors compare.

    Cost: about ``n_candidates × n_splits × (warm-up + fold_size)`` predict-and-update
    steps per transform, each ``O(N·D)`` for ``abo`` (``O(D²)`` for ``ewrls``), plus the
    replay of one candidate per transform and stage, plus the refit; the memory of one
    model per job.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.forecasting import tune_forecast
    >>> rng = np.random.default_rng(0)
    >>> walk = 100 + np.cumsum(rng.normal(size=300))
    >>> tuned = tune_forecast(walk, n_lags=4, window_sizes=(10, 20), sigmas=(0.5,),
    ...                       transforms=("none", "diff"), n_components=32,
    ...                       tune_fraction=0.5)
    >>> tuned.n_tune, len(tuned.table)
    (150, 4)
    >>> tuned.transform in ("none", "diff")
    True
    >>> tuned.forecaster.predict().shape  # the next value
    (1,)
    """
    values = np.asarray(series, dtype=np.float64)
    if values.ndim != 1:
        raise ValueError(f"series must be 1-D, got an array of shape {values.shape}.")
    if not np.all(np.isfinite(values)):
        raise ValueError("series has missing, NaN or infinite values; fill or drop them "
                         "before tuning.")
    beyond = _beyond_scored_range(values)
    if beyond is not None:
        first, message = beyond
        raise ValueError("series " + message.format(
            where=f"position {first}", what="series", doing="tuning") + ".")
    for name, v in (("horizon", horizon), ("n_lags", n_lags), ("n_splits", n_splits)):
        _positive_int(name)(v)
    if (not isinstance(tune_fraction, numbers.Real) or isinstance(tune_fraction, bool)
            or not 0 < tune_fraction <= 1):
        raise ValueError(f"tune_fraction must be a number in (0, 1], got {tune_fraction!r}.")
    transforms = _check_grid("transforms", transforms, _one_of("transforms", TRANSFORMS))
    models = _check_grid("models", models, _one_of("models", MODELS))
    window_sizes = _check_grid("window_sizes", window_sizes, _positive_int("window_sizes"))
    sigmas = _check_grid("sigmas", sigmas, _finite_float("sigmas", zero=False))
    model_params = dict(model_params or {})
    if alphas is not None:
        alphas = _check_grid("alphas", alphas, _finite_float("alphas", zero=True))
        if model_params.get("alpha") is not None:
            raise ValueError("alpha is both searched (alphas) and fixed (model_params); "
                             "give one of them.")
        model_params.pop("alpha", None)
    dims = None
    if n_components is not None and not isinstance(n_components, numbers.Integral):
        dims = _check_grid("n_components", n_components, _positive_int("n_components"))
        n_components = None
    elif n_components is not None:
        _positive_int("n_components")(n_components)
    if search not in ("full", "staged"):
        raise ValueError(f"search must be 'full' or 'staged', got {search!r}.")
    n_values = values.shape[0]
    n_tune = int(math.floor(tune_fraction * n_values))
    ex_tune = None
    if exog is not None:
        exog = np.asarray(exog, dtype=np.float64)
        if exog.shape[0] != n_values:
            raise ValueError(f"exog has {exog.shape[0]} rows; the series has {n_values} "
                             "values.")
        ex_tune = exog[:n_tune]
        if not np.all(np.isfinite(ex_tune)):
            raise ValueError("exog has missing, NaN or infinite values in the tuning part.")
    v = values[:n_tune]  # nothing after the tuning part is read from here on
    delay = horizon - 1

    # the same folds (target positions) for every transform: the rows of each end with
    # the target n_tune - 1; differencing costs a row, so size them on the fewest rows
    n_rows = {t: n_tune - _first_origin(n_lags, t) - horizon for t in transforms}
    fewest = min(n_rows.values())
    windowed = all(m in _WINDOWED for m in models)
    notes = []
    if warmup_size == "auto" and windowed:
        # the longest window's warm-up precedes every candidate's folds: windows that
        # leave folds of fewer than _MIN_FOLD rows are left out, with a note (when
        # none leaves that many, those that leave 2 rows; one must stay)
        for need in (_MIN_FOLD, 2):
            fits = [w for w in window_sizes
                    if _feasible_fold_size(fewest, delay + w, n_splits) >= need]
            if fits:
                break
        if fits and len(fits) < len(window_sizes):
            for w in window_sizes:
                if w not in fits:
                    notes.append(_row(1, None, note=(
                        f"skipped: window_size {w} (its warm-up leaves fewer than "
                        f"{need} rows to each of the {n_splits} folds in the {n_tune} "
                        "values of the tuning part; a larger tune_fraction)")))
            window_sizes = tuple(fits)
        warmup = max(window_sizes)
    elif warmup_size in ("auto", None):
        warmup = None
    else:
        _positive_int("warmup_size")(warmup_size)
        warmup = int(warmup_size)
    # before the first fold: the warm-up (and the delayed labels), and at least one
    # (n_splits + 1)-th of the rows, as TimeSeriesSplit
    need_first = delay + (warmup or 1)
    fold_size = _feasible_fold_size(fewest, need_first, n_splits)
    if fold_size < 2:
        min_rows = max(2 * (n_splits + 1), n_splits * 2 + need_first)
        min_tune = min_rows + max(_first_origin(n_lags, t) for t in transforms) + horizon
        raise ValueError(
            f"the tuning part (the first {n_tune} of {n_values} values, tune_fraction="
            f"{tune_fraction}) is too short for {n_splits} validation folds of at least 2 "
            f"rows after a warm-up of {warmup or 1} row(s) with n_lags={n_lags}, "
            f"horizon={horizon}: it needs at least {min_tune} values; give a longer "
            "series, a larger tune_fraction or fewer folds, lags or window sizes.")
    cv = PrequentialSplit(n_splits, test_size=fold_size, warmup_size=warmup, delay=delay)
    scorer = make_prequential_scorer("rmse", delay=delay)
    base = _ForecastModel(n_components=n_components, random_state=random_state,
                          model_params=model_params)
    staged = search == "staged"
    grid = _param_grid(models, window_sizes, sigmas, alphas, dims, first=staged)
    common = dict(base=base, cv=cv, scorer=scorer, n_lags=n_lags, horizon=horizon,
                  n_jobs=n_jobs)

    if threads is not None:
        _positive_int("threads")(threads)

    def limit():
        return (contextlib.nullcontext() if threads is None
                else blas_threads(int(threads))[0])

    with limit():
        table, best_rows, last_value_rmse, positions = _search(
            v, ex_tune, transforms=transforms, grid=grid, **common)
        finite = [(r, p) for r, p in best_rows if r["rmse"] is not None]
        if not finite:
            raise ValueError("no candidate gave finite forecasts on the validation folds "
                             "(every transform was skipped, or every model diverged).")
        # ties: the first transform given
        chosen, params = min(finite, key=lambda rp: rp[0]["rmse"])
        stage2 = {}
        if staged and alphas is not None and len(_alphas_for(chosen["model"], alphas)) > 1:
            stage2["alpha"] = _alphas_for(chosen["model"], alphas)
        if staged and chosen["model"] in _USES_D and dims is not None and len(dims) > 1:
            stage2["n_components"] = list(dims)
        if stage2:
            fixed = {k: [val] for k, val in params.items() if k not in stage2}
            rows2, best2, _, _ = _search(v, ex_tune, transforms=(chosen["transform"],),
                                         grid=[{**fixed, **stage2}], stage=2, **common)
            table.extend(rows2)
            if best2 and best2[0][0]["rmse"] is not None:
                chosen, params = best2[0]
    chosen["chosen"] = True
    table = notes + table
    alpha, d = _used(base, params)
    model_kwargs = {"name": chosen["model"],
                    "n_components": default_n_components(chosen["model"]) if d is None
                    else d,
                    "random_state": random_state, **model_params}
    if alpha is not None:
        model_kwargs["alpha"] = alpha
    if chosen["window_size"] is not None:
        model_kwargs["window_size"] = chosen["window_size"]
    if chosen["sigma"] is not None:
        model_kwargs["sigma"] = chosen["sigma"]
    forecaster = None
    if refit and chosen["transform"] == "logdiff" and np.any(values <= 0):
        raise ValueError(
            "the chosen transform, logdiff, cannot be refitted on the whole series: it "
            f"has values <= 0 after the tuning part (position "
            f"{int(np.flatnonzero(values <= 0)[0])}); give refit=False for the choice "
            "alone, or transforms without logdiff.")
    if refit:
        forecaster = _stream_forecaster(
            make_forecast_model(**model_kwargs), transform=chosen["transform"],
            n_lags=n_lags, horizon=horizon,
            n_past=0 if exog is None else (1 if exog.ndim == 1 else exog.shape[1]))
        with limit():
            forecaster.fit(values, exog)
    return Bunch(
        transform=chosen["transform"], model=chosen["model"],
        window_size=chosen["window_size"], sigma=chosen["sigma"], alpha=alpha,
        n_components=d, rmse=chosen["rmse"], model_kwargs=model_kwargs,
        forecaster=forecaster, table=table, last_value_rmse=last_value_rmse,
        n_tune=n_tune, n_values=n_values, validation_positions=positions,
        horizon=horizon, n_lags=n_lags, n_splits=n_splits, fold_size=fold_size,
        warmup_size=warmup, search=search,
    )


def _levels_of(intervals, coverage):
    """``(bounds of shape (h, n_levels, 2), labels)`` of ``predict_interval``'s output."""
    if hasattr(intervals, "columns"):  # the DataFrame of pandas input
        names = [c[len("lower_"):] for c in intervals.columns if c.startswith("lower_")]
        bounds = np.stack([intervals[[f"lower_{n}", f"upper_{n}"]].to_numpy(float)
                           for n in names], axis=1)
        return bounds, [f"{n} %" for n in names]
    bounds = np.asarray(intervals, dtype=float)
    if bounds.ndim != 3 or bounds.shape[2] != 2:
        raise ValueError("intervals must be predict_interval's output: a DataFrame, or "
                         f"an array of shape (horizon, n_levels, 2); got shape "
                         f"{bounds.shape}.")
    if coverage is None:
        labels = [f"interval {j + 1}" for j in range(bounds.shape[1])]
    else:
        coverage = list(np.atleast_1d(coverage))
        if len(coverage) != bounds.shape[1]:
            raise ValueError(f"coverage has {len(coverage)} levels, intervals "
                             f"{bounds.shape[1]}.")
        labels = [f"{100 * float(c):g} %" for c in coverage]
    return bounds, labels


def plot_forecast(y, forecast, intervals=None, *, coverage=None, backtest=None, last=None,
                  ax=None):
    """Draw a series, its forecast past the end and the forecast's intervals.

    Parameters
    ----------
    y : pandas Series or array-like of shape (n_samples,)
        The observed series (what the forecaster learned, or its end).
    forecast : pandas Series or array-like of shape (horizon,)
        The forecasts of the values after ``y``: :meth:`StreamForecaster.predict`.
        A Series is drawn at its own time stamps; an array after ``y``'s last position.
    intervals : DataFrame or array-like of shape (horizon, n_levels, 2), default=None
        :meth:`StreamForecaster.predict_interval`: one shaded band per level, the
        widest the lightest.
    coverage : sequence of float, default=None
        The levels of an array ``intervals``, for the legend (a DataFrame names its
        own).
    backtest : pandas Series or array-like of shape (n_samples,), default=None
        Prequential forecasts of ``y`` (e.g. the ``h1`` column of
        :meth:`StreamForecaster.backtest`), drawn beside it.
    last : int, default=None
        Draw only the last ``last`` values of ``y`` (``None``: all).
    ax : matplotlib Axes, default=None
        Where to draw (``None``: a new figure).

    Returns
    -------
    ax : matplotlib Axes

    Notes
    -----
    Needs matplotlib (the ``plot`` extra: ``pip install sklearn-orfit[plot]``). Nothing
    is computed: the function draws what the forecaster returned.

    Examples
    --------
    >>> import numpy as np
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> from sklearn_orfit import StreamForecaster
    >>> from sklearn_orfit.forecasting import plot_forecast
    >>> y = np.sin(np.arange(300) / 8.0)
    >>> f = StreamForecaster(n_lags=12, horizon=6).fit(y)
    >>> ax = plot_forecast(y, f.predict(), f.predict_interval(), coverage=f.coverage,
    ...                    last=100)
    >>> [t.get_text() for t in ax.get_legend().get_texts()]
    ['series', 'forecast', '95 % interval', '80 % interval']
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - matplotlib is an extra
        raise ImportError("plot_forecast needs matplotlib: pip install "
                          "'sklearn-orfit[plot]'") from exc
    if ax is None:
        _, ax = plt.subplots(figsize=(10, 4))
    values = np.asarray(y, dtype=float).ravel()
    n = values.shape[0]
    x = y.index if hasattr(y, "index") else np.arange(n)
    lo = 0 if last is None else max(0, n - int(last))
    ax.plot(x[lo:], values[lo:], lw=1.2, color="0.2", label="series")
    if backtest is not None:
        b = np.asarray(backtest, dtype=float).ravel()
        if b.shape[0] != n:
            raise ValueError(f"backtest has {b.shape[0]} values, y {n}.")
        ax.plot(x[lo:], b[lo:], lw=1.0, color="tab:orange", label="backtest")
    f = np.asarray(forecast, dtype=float).ravel()
    fx = forecast.index if hasattr(forecast, "index") else np.arange(n, n + f.shape[0])
    ax.plot(fx, f, lw=1.4, color="tab:green", marker="o", markersize=2.5,
            label="forecast")
    if intervals is not None:
        bounds, labels = _levels_of(intervals, coverage)
        if bounds.shape[0] != f.shape[0]:
            raise ValueError(f"intervals has {bounds.shape[0]} steps, forecast "
                             f"{f.shape[0]}.")
        widths = np.nanmean(bounds[:, :, 1] - bounds[:, :, 0], axis=0)
        draw_bands(ax, fx, bounds,
                   [f"{x} interval" if x.endswith("%") else x for x in labels],
                   order=np.argsort(-np.nan_to_num(widths, nan=np.inf)))
    ax.legend(loc="best", fontsize=8)
    ax.grid(alpha=0.3)
    return ax
