"""Tuned forecasts: choose the transform, window, σ and model on the start of a series.

:func:`tune_forecast` searches, on the first part of a series only, the settings the
``sklearn-orfit forecast`` command (and :mod:`sklearn_orfit.cli._experiments`) takes: the
transform (none, first differences, log returns), the window length ``N``, the random
features' frequency scale σ and the model, with scikit-learn's
:class:`~sklearn.model_selection.GridSearchCV` driven by the prequential folds of
:class:`~sklearn_orfit.model_selection.PrequentialSplit` and the prequential scorer of
:func:`~sklearn_orfit.model_selection.make_prequential_scorer` (warm up on the rows before
a fold, then predict-then-update over it; the user guide's prequential protocol). The
rest of the series is left for reporting: the chosen settings are judged on values the
search never saw.
"""

import contextlib
import math
import numbers

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.model_selection import GridSearchCV
from sklearn.utils import Bunch

from .cli import _experiments as ex
from ._forecaster import StreamForecaster
from ._streaming._prequential import prequential_predict
from .metrics import _beyond_scored_range
from .model_selection import PrequentialSplit, make_prequential_scorer

__all__ = ["StreamForecaster", "tune_forecast"]

# the models whose state is a sliding window of the last ``window_size`` rows
_WINDOWED = ("abo", "ensemble", "sw-krls", "qrd-rls")
# the settings each model uses (the others are not searched for it)
_USES_WINDOW = {"abo", "ensemble", "sw-krls", "qrd-rls"}
_USES_SIGMA = {"abo", "ensemble", "orfit", "ewrls", "sw-krls"}
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
                 random_state=0, model_params=None):
        self.model = model
        self.window_size = window_size
        self.sigma = sigma
        self.n_components = n_components
        self.random_state = random_state
        self.model_params = model_params

    def _make(self):
        d = (default_n_components(self.model) if self.n_components is None
             else self.n_components)
        return ex.make_forecast_model(
            self.model, n_components=d, sigma=self.sigma, window_size=self.window_size,
            random_state=self.random_state, **(self.model_params or {}))

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


def _positive_float(name):
    def check(v):
        if (not isinstance(v, numbers.Real) or isinstance(v, bool) or not math.isfinite(v)
                or v <= 0):
            raise ValueError(f"{name} must hold finite numbers > 0, got {v!r}.")
    return check


def _one_of(name, choices):
    def check(v):
        if v not in choices:
            raise ValueError(f"{name} must hold values among {choices}, got {v!r}.")
    return check


def _param_grid(models, window_sizes, sigmas):
    """One grid per model, with only the settings that model uses."""
    grid = []
    for m in models:
        g = {"model": [m]}
        if m in _USES_WINDOW:
            g["window_size"] = list(window_sizes)
        if m in _USES_SIGMA:
            g["sigma"] = list(sigmas)
        grid.append(g)
    return grid


def _fold_errors(estimator, problem, cv, params, delay):
    """Replay the search's folds for ``params``: forecasts in the series' units.

    Returns ``(actual, forecast, standardised errors)`` over the scored rows of every
    fold, in time order: each fold's model is warmed up on the fold's warm-up rows, then
    predicts-then-updates the fold with labels ``delay`` rows late (as the scorer does);
    the predictions are mapped back with the statistics known at each row's origin.
    """
    X, y = problem.X, problem.y
    actual, forecast, err_std = [], [], []
    for train, test in cv.split(X):
        est = clone(estimator).set_params(**params).fit(X[train], y[train])
        p = prequential_predict(est, X[test], y[test], delay=delay)[delay:]
        rows = test[delay:]
        actual.append(problem.actual[rows])
        forecast.append(problem.to_units(p, rows))
        err_std.append(y[rows] - p)
    return np.concatenate(actual), np.concatenate(forecast), err_std


def _search(v, ex_tune, *, transforms, models, grid, base, cv, scorer, n_lags, horizon,
            n_jobs):
    """One ``GridSearchCV`` per transform, then each transform's best in series units."""
    delay = horizon - 1
    table, best_rows = [], []
    last_value_rmse = None
    positions = None
    for t in transforms:
        if t == "logdiff" and np.any(v <= 0):
            table.append({"transform": t, "model": None, "window_size": None,
                          "sigma": None, "std_rmse": None, "rank": None, "rmse": None,
                          "mae": None, "chosen": False,
                          "note": "skipped: the tuning part is not strictly positive"})
            continue
        problem = ex.make_forecast_problem(v, n_lags=n_lags, transform=t,
                                           horizon=horizon, exog=ex_tune)
        search = GridSearchCV(base, grid, scoring=scorer, cv=cv, n_jobs=n_jobs,
                              refit=False, error_score="raise")
        search.fit(problem.X, problem.y)
        cvr = search.cv_results_
        rows = []
        for k, params in enumerate(cvr["params"]):
            score = -float(cvr["mean_test_score"][k])
            rows.append({"transform": t, "model": params["model"],
                         "window_size": params.get("window_size"),
                         "sigma": params.get("sigma"),
                         "std_rmse": score if math.isfinite(score) else None,
                         "rank": int(cvr["rank_test_score"][k]), "rmse": None,
                         "mae": None, "chosen": False, "note": ""})
        best = rows[int(search.best_index_)]
        actual, forecast, _ = _fold_errors(base, problem, cv,
                                           cvr["params"][search.best_index_], delay)
        err = actual - forecast
        with np.errstate(over="ignore", invalid="ignore"):
            rmse = float(np.sqrt(np.mean(err * err)))
            mae = float(np.mean(np.abs(err)))
        best["rmse"] = rmse if math.isfinite(rmse) else None
        best["mae"] = mae if math.isfinite(mae) else None
        best["note"] = "best of its transform (scored in the series' units)"
        best_rows.append(best)
        table.extend(rows)
        if last_value_rmse is None:
            scored = problem.index[np.concatenate([test[delay:] for _, test in
                                                   cv.split(problem.X)])]
            positions = (int(scored[0]), int(scored[-1]) + 1)
            lv = v[scored] - v[scored - horizon]
            last_value_rmse = float(np.sqrt(np.mean(lv * lv)))
    return table, best_rows, last_value_rmse, positions


def tune_forecast(
    series,
    *,
    horizon=1,
    n_lags=20,
    exog=None,
    transforms=("none", "diff", "logdiff"),
    window_sizes=(20, 50, 100),
    sigmas=(0.25, 0.5, 1.0),
    models=("abo",),
    n_components=None,
    model_params=None,
    tune_fraction=0.3,
    n_splits=3,
    warmup_size="auto",
    n_jobs=None,
    threads=1,
    random_state=0,
):
    """Choose the transform, window, σ and model of a forecast on the series' first part.

    The first ``n_tune = floor(tune_fraction · len(series))`` values are turned into
    prequential rows for each transform (:func:`make_forecast_problem`: optional
    differencing, standardisation with past-only statistics, ``n_lags`` lags,
    ``horizon`` steps ahead); per transform, ``GridSearchCV`` searches the models and
    their window and σ over ``n_splits`` :class:`PrequentialSplit` folds at the end of
    those rows (labels ``horizon − 1`` rows late), scored by
    :func:`make_prequential_scorer` (RMSE of the standardised targets). Each transform's
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
        Window lengths ``N`` searched (for the models with a window).
    sigmas : sequence of float, default=(0.25, 0.5, 1.0)
        Frequency scales σ of the random features searched (``sw-krls``: the kernel's
        length scale ``1/σ``).
    models : sequence of str, default=("abo",)
        Models searched, among ``"abo"``, ``"orfit"``, ``"ensemble"``, ``"sw-krls"``,
        ``"qrd-rls"`` and ``"ewrls"`` (see the command line's ``--model``).
    n_components : int or None, default=None
        Random features ``D`` (``None``: 2048, 256 for ``ewrls``).
    model_params : dict or None, default=None
        Further fixed settings of :func:`make_forecast_model` (``forgetting_factor``,
        ``alpha``, ``memory_size``, ...).
    tune_fraction : float in (0, 1], default=0.3
        Fraction of the series, from its start, that the search may see.
    n_splits : int, default=3
        Validation folds, consecutive, ending with the tuning part.
    warmup_size : int, None or "auto", default="auto"
        Rows each fold's model learns before the fold. ``None``: every earlier row of
        the tuning part (the state a stream would have). ``"auto"``: the largest window
        when every searched model is a sliding window (its state is then the same as
        after every earlier row, at a fraction of the cost), else ``None``.
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
        ``transform``, ``model``, ``window_size``, ``sigma`` (``None`` for a setting the
        chosen model does not use): the choice; ``model_kwargs``: the keywords of
        :func:`make_forecast_model` giving the chosen model; ``table``: one dict per
        candidate (``transform``, ``model``, ``window_size``, ``sigma``,
        ``std_rmse``: mean over the folds of the standardised RMSE the search ranks by,
        ``rank``: within its transform, ``rmse`` and ``mae``: in the series' units, over
        the validation folds, for the best candidate of each transform, ``chosen``,
        ``note``); ``last_value_rmse``: the RMSE of the last-value forecast over the same
        positions; ``n_tune``: values the search saw (the report should start at
        position ``n_tune``); ``validation_positions``: ``(first, stop)`` of the
        positions whose forecasts were scored; ``n_values``, ``horizon``, ``n_lags``,
        ``n_splits``, ``fold_size``, ``warmup_size``.

    See Also
    --------
    sklearn_orfit.model_selection.PrequentialSplit : The folds.
    sklearn_orfit.model_selection.make_prequential_scorer : The scorer.

    Notes
    -----
    "First part" means the values at positions ``< n_tune``: the search reads nothing
    after them (changing any later value leaves the choice and the table bit for bit as
    they were), and a forecast reported from position ``n_tune`` on is judged on values
    the search never saw. The rows of each transform end with the same target, the
    value at ``n_tune − 1``, and the folds are the last ``n_splits · fold_size`` rows
    of each, so every transform is scored on the same target positions.

    Within a transform the candidates are ranked in standardised units (the errors the
    model learns); across transforms those units differ (past-only statistics of the
    values, of their changes or of their log changes), so each transform's best is
    replayed on the same folds with its forecasts mapped back to the series' units with
    the statistics known at each origin, where the errors compare.

    Cost: about ``n_candidates × n_splits × (warm-up + fold_size)`` predict-and-update
    steps per transform, each ``O(N·D)`` for ``abo`` (``O(D²)`` for ``ewrls``), plus the
    replay of one candidate per transform; the memory of one model per job.

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
    transforms = _check_grid("transforms", transforms, _one_of("transforms", ex.TRANSFORMS))
    models = _check_grid("models", models, _one_of("models", ex.MODELS))
    window_sizes = _check_grid("window_sizes", window_sizes, _positive_int("window_sizes"))
    sigmas = _check_grid("sigmas", sigmas, _positive_float("sigmas"))
    if n_components is not None:
        _positive_int("n_components")(n_components)
    if warmup_size == "auto":
        warmup = max(window_sizes) if all(m in _WINDOWED for m in models) else None
    elif warmup_size is None:
        warmup = None
    else:
        _positive_int("warmup_size")(warmup_size)
        warmup = int(warmup_size)
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
    n_rows = {t: n_tune - ex.first_origin(n_lags=n_lags, transform=t) - horizon
              for t in transforms}
    fewest = min(n_rows.values())
    # before the first fold: the warm-up (and the delayed labels), and at least one
    # (n_splits + 1)-th of the rows, as TimeSeriesSplit
    need_first = delay + (warmup or 1)
    fold_size = (fewest - max(need_first, fewest // (n_splits + 1))) // n_splits
    if fold_size < 2:
        min_rows = max(2 * (n_splits + 1), n_splits * 2 + need_first)
        min_tune = min_rows + max(ex.first_origin(n_lags=n_lags, transform=t)
                                  for t in transforms) + horizon
        raise ValueError(
            f"the tuning part (the first {n_tune} of {n_values} values, tune_fraction="
            f"{tune_fraction}) is too short for {n_splits} validation folds of at least 2 "
            f"rows after a warm-up of {warmup or 1} row(s) with n_lags={n_lags}, "
            f"horizon={horizon}: it needs at least {min_tune} values; give a longer "
            "series, a larger tune_fraction or fewer folds, lags or window sizes.")
    cv = PrequentialSplit(n_splits, test_size=fold_size, warmup_size=warmup, delay=delay)
    scorer = make_prequential_scorer("rmse", delay=delay)
    base = _ForecastModel(n_components=n_components, random_state=random_state,
                          model_params=dict(model_params or {}))
    grid = _param_grid(models, window_sizes, sigmas)

    if threads is not None:
        _positive_int("threads")(threads)
        limit, _ = ex.blas_threads(int(threads))
    else:
        limit = contextlib.nullcontext()
    with limit:
        table, best_rows, last_value_rmse, positions = _search(
            v, ex_tune, transforms=transforms, models=models, grid=grid, base=base,
            cv=cv, scorer=scorer, n_lags=n_lags, horizon=horizon, n_jobs=n_jobs)
    finite = [r for r in best_rows if r["rmse"] is not None]
    if not finite:
        raise ValueError("no candidate gave finite forecasts on the validation folds "
                         "(every transform was skipped, or every model diverged).")
    chosen = min(finite, key=lambda r: r["rmse"])  # ties: the first transform given
    chosen["chosen"] = True
    d = default_n_components(chosen["model"]) if n_components is None else n_components
    model_kwargs = {"name": chosen["model"], "n_components": d,
                    "random_state": random_state, **dict(model_params or {})}
    if chosen["window_size"] is not None:
        model_kwargs["window_size"] = chosen["window_size"]
    if chosen["sigma"] is not None:
        model_kwargs["sigma"] = chosen["sigma"]
    return Bunch(
        transform=chosen["transform"], model=chosen["model"],
        window_size=chosen["window_size"], sigma=chosen["sigma"], rmse=chosen["rmse"],
        model_kwargs=model_kwargs, table=table, last_value_rmse=last_value_rmse,
        n_tune=n_tune, n_values=n_values, validation_positions=positions,
        horizon=horizon, n_lags=n_lags, n_splits=n_splits, fold_size=fold_size,
        warmup_size=warmup,
    )
