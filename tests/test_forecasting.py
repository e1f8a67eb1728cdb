"""``sklearn_orfit.forecasting.tune_forecast``: the search sees only the first part of the
series, picks the argmin of its table, and picks the transform that fits the series.

Tiny grids and D = 64, so each search takes about a second.
"""

import math
import pickle

import numpy as np
import pytest

from sklearn_orfit import _forecast_models as fm
from sklearn_orfit import forecasting as fp
from sklearn_orfit.forecasting import tune_forecast
from sklearn_orfit.model_selection import PrequentialSplit, make_prequential_scorer

SMALL = dict(n_lags=12, window_sizes=(50, 100), sigmas=(0.1, 0.25), n_components=64,
             tune_fraction=0.5)
N = 600


def noisy_sine(n=N, seed=1):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return 10.0 + np.sin(2 * np.pi * t / 12) + rng.normal(scale=0.5, size=n)


def random_walk(n=N, seed=2):
    rng = np.random.default_rng(seed)
    return 100.0 + np.cumsum(rng.normal(size=n))


def best_of(table, transform):
    (row,) = [r for r in table if r["transform"] == transform and r["rmse"] is not None]
    return row


def test_no_look_ahead():
    """Every value after the tuning part changed: the choice and the table are the same,
    bit for bit."""
    x = random_walk()
    tuned = tune_forecast(x, transforms=("none", "diff"), **SMALL)
    n_tune = tuned.n_tune
    assert n_tune == N // 2
    y = x.copy()
    y[n_tune:] = np.random.default_rng(5).normal(size=N - n_tune) * 1e3 - 5e3
    again = tune_forecast(y, transforms=("none", "diff"), **SMALL)
    assert pickle.dumps(again.table) == pickle.dumps(tuned.table)
    for key in ("transform", "model", "window_size", "sigma", "rmse", "last_value_rmse",
                "validation_positions"):
        assert again[key] == tuned[key]
    # and the last value of the tuning part does matter (the test can fail)
    z = x.copy()
    z[n_tune - 1] += 50.0
    moved = tune_forecast(z, transforms=("none", "diff"), **SMALL)
    assert pickle.dumps(moved.table) != pickle.dumps(tuned.table)
    assert tuned.validation_positions[1] == n_tune


def test_choice_is_the_argmin_of_the_table():
    tuned = tune_forecast(random_walk(), transforms=("none", "diff", "logdiff"), **SMALL)
    scored = [r for r in tuned.table if r["rmse"] is not None]
    assert len(scored) == 3  # one per transform, in the series' units
    winner = min(scored, key=lambda r: r["rmse"])
    assert [r for r in tuned.table if r["chosen"]] == [winner]
    assert (tuned.transform, tuned.model, tuned.window_size, tuned.sigma) == (
        winner["transform"], winner["model"], winner["window_size"], winner["sigma"])
    assert tuned.rmse == winner["rmse"]
    # within each transform, the series-units row is the search's best (rank 1, lowest
    # RMSE of the targets the model learns)
    for t in ("none", "diff", "logdiff"):
        rows = [r for r in tuned.table if r["transform"] == t]
        assert len(rows) == 4
        best = best_of(tuned.table, t)
        assert best["rank"] == 1
        assert best["target_rmse"] == min(r["target_rmse"] for r in rows)
    kw = dict(tuned.model_kwargs)
    assert kw == {"name": "abo", "n_components": 64, "random_state": 0, "alpha": 0.0,
                  "window_size": tuned.window_size, "sigma": tuned.sigma}
    fm.make_forecast_model(**kw)


def test_random_walk_picks_diff_and_noisy_sine_picks_none():
    walk = tune_forecast(random_walk(), transforms=("none", "diff"), **SMALL)
    assert walk.transform == "diff"
    assert best_of(walk.table, "diff")["rmse"] < 0.9 * best_of(walk.table, "none")["rmse"]
    sine = tune_forecast(noisy_sine(), transforms=("none", "diff"), **SMALL)
    assert sine.transform == "none"
    assert best_of(sine.table, "none")["rmse"] < 0.9 * best_of(sine.table, "diff")["rmse"]


def test_series_units_replay_matches_the_search():
    """The replay of a transform's best on the folds gives the search's own score."""
    x = noisy_sine()
    tuned = tune_forecast(x, transforms=("diff",), **SMALL)
    problem = fp._Problem(x[:tuned.n_tune], None, transform="diff", n_lags=12, horizon=1)
    cv = PrequentialSplit(3, test_size=tuned.fold_size, warmup_size=tuned.warmup_size)
    scorer = make_prequential_scorer("rmse")
    scores = []
    for train, test in cv.split(problem.X):
        model = fp._forecaster_regressor(fm.make_forecast_model(
            "abo", n_components=64, sigma=tuned.sigma, window_size=tuned.window_size))
        model.partial_fit(problem.X[train], problem.y[train])
        scores.append(-scorer(model, problem.X[test], problem.y[test]))
    assert math.isclose(np.mean(scores), best_of(tuned.table, "diff")["target_rmse"],
                        rel_tol=1e-12)


def test_logdiff_skipped_for_a_series_that_is_not_positive():
    x = noisy_sine() - 10.0  # crosses zero
    tuned = tune_forecast(x, **SMALL)
    (row,) = [r for r in tuned.table if r["transform"] == "logdiff"]
    assert "skipped" in row["note"] and "positive" in row["note"]
    assert row["rmse"] is None and not row["chosen"]
    assert tuned.transform in ("none", "diff")
    # positive in the tuning part only (negative later): not skipped, nothing later read
    y = noisy_sine()
    y[N // 2:] -= 100.0
    tuned = tune_forecast(y, transforms=("logdiff",), refit=False, **SMALL)
    assert tuned.transform == "logdiff" and tuned.forecaster is None
    # ... and the forecaster cannot learn the whole series: said, not a bare failure
    with pytest.raises(ValueError, match=r"logdiff, cannot be refitted .*position 300"):
        tune_forecast(y, transforms=("logdiff",), **SMALL)


def test_horizon_and_models():
    """horizon 3 (labels 2 rows late) and two models: each model keeps only the settings
    it uses."""
    tuned = tune_forecast(noisy_sine(), horizon=3, transforms=("none",),
                          models=("abo", "qrd-rls"), **SMALL)
    rows = tuned.table
    assert {r["model"] for r in rows} == {"abo", "qrd-rls"}
    assert all(r["sigma"] is None for r in rows if r["model"] == "qrd-rls")
    assert len(rows) == 4 + 2
    assert tuned.horizon == 3
    first, stop = tuned.validation_positions
    assert stop == tuned.n_tune and stop - first == 3 * tuned.fold_size


@pytest.mark.parametrize("kwargs, match", [
    (dict(tune_fraction=0.0), "tune_fraction"),
    (dict(tune_fraction=1.5), "tune_fraction"),
    (dict(tune_fraction="half"), "tune_fraction"),
    (dict(window_sizes=()), "window_sizes is empty"),
    (dict(sigmas=()), "sigmas is empty"),
    (dict(models=()), "models is empty"),
    (dict(transforms=()), "transforms is empty"),
    (dict(transforms=("log",)), "transforms"),
    (dict(models=("abo", "arima")), "models"),
    (dict(sigmas=(0.5, -1.0)), "sigmas"),
    (dict(window_sizes=(10, 10)), "repeated"),
    (dict(tune_fraction=0.05), "too short"),
    (dict(n_splits=0), "n_splits"),
    (dict(horizon=0), "horizon"),
])
def test_clear_errors(kwargs, match):
    args = {**SMALL, **kwargs}
    with pytest.raises(ValueError, match=match):
        tune_forecast(noisy_sine(), **args)


def test_bad_series():
    with pytest.raises(ValueError, match="1-D"):
        tune_forecast(np.ones((10, 2)), **SMALL)
    x = noisy_sine()
    x[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        tune_forecast(x, **SMALL)
    with pytest.raises(ValueError, match="too short"):
        tune_forecast(noisy_sine(60), **SMALL)
    with pytest.raises(ValueError, match="exog has 5 rows"):
        tune_forecast(noisy_sine(), exog=np.ones(5), **SMALL)


def test_values_beyond_the_scores_range_get_the_clear_message():
    # tune_forecast(series * 1e200) said "every model diverged"
    series = 1e200 * (1.0 + np.sin(np.arange(400) / 5.0))
    with pytest.raises(ValueError, match=r"beyond 1e\+75 .*divide the series by a power of ten"):
        tune_forecast(series, n_lags=4, window_sizes=(20,), sigmas=(1.0,))


def test_ridge_and_features_searched_full_and_staged():
    """``alphas`` and a sequence of ``n_components`` enter the grid: every combination
    (full), or the windows and σ first and then the ridge and D of the chosen one
    (staged, whose choice is the best of its second stage)."""
    x = noisy_sine()
    grid = dict(n_lags=12, window_sizes=(50, 100), sigmas=(0.1, 0.25),
                alphas=(0.1, 1e-3), n_components=(32, 64), tune_fraction=0.5,
                transforms=("none",), refit=False)
    full = tune_forecast(x, **grid)
    assert len(full.table) == 2 * 2 * 2 * 2
    assert {(r["alpha"], r["n_components"]) for r in full.table} == {
        (a, d) for a in (0.1, 1e-3) for d in (32, 64)}
    best = min(full.table, key=lambda r: r["target_rmse"])
    assert best["chosen"] and (full.alpha, full.n_components) == (
        best["alpha"], best["n_components"])
    assert full.model_kwargs["alpha"] == full.alpha
    assert full.model_kwargs["n_components"] == full.n_components

    staged = tune_forecast(x, search="staged", **grid)
    one = [r for r in staged.table if r["stage"] == 1]
    two = [r for r in staged.table if r["stage"] == 2]
    assert len(one) == 4 and {(r["alpha"], r["n_components"]) for r in one} == {(0.1, 32)}
    first = min(one, key=lambda r: r["target_rmse"])
    assert len(two) == 4
    assert {(r["window_size"], r["sigma"]) for r in two} == {
        (first["window_size"], first["sigma"])}
    winner = min(two, key=lambda r: r["target_rmse"])
    assert winner["chosen"] and sum(r["chosen"] for r in staged.table) == 1
    assert (staged.window_size, staged.sigma, staged.alpha, staged.n_components) == (
        winner["window_size"], winner["sigma"], winner["alpha"], winner["n_components"])
    # the second stage scores its candidates on the same folds: the candidate both
    # stages hold has the same score in each
    (same,) = [r for r in two if (r["alpha"], r["n_components"]) == (0.1, 32)]
    assert same["target_rmse"] == first["target_rmse"]


def test_windows_too_long_for_the_tuning_part_are_left_out_with_a_note():
    x = noisy_sine()  # 300 values to tune on
    tuned = tune_forecast(x, **{**SMALL, "window_sizes": (50, 100, 400)}, refit=False)
    notes = [r for r in tuned.table if r["transform"] is None]
    assert len(notes) == 1 and "window_size 400" in notes[0]["note"]
    assert {r["window_size"] for r in tuned.table if r["transform"]} == {50, 100}
    assert tuned.warmup_size == 100
    # a single window that does not fit is still an error
    with pytest.raises(ValueError, match="too short"):
        tune_forecast(x, **{**SMALL, "window_sizes": (400,)})


def test_refit_is_the_chosen_forecaster_fitted_on_the_whole_series():
    from sklearn_orfit.forecasting import _stream_forecaster

    x = random_walk()
    tuned = tune_forecast(x, transforms=("none", "diff"), **SMALL)
    f = tuned.forecaster
    assert f.n_samples_seen_ == N
    again = _stream_forecaster(fm.make_forecast_model(**tuned.model_kwargs),
                               transform=tuned.transform, n_lags=12, horizon=1).fit(x)
    np.testing.assert_array_equal(f.predict(), again.predict())
    np.testing.assert_array_equal(f.predict_interval()[0], again.predict_interval()[0])
    # it continues the stream as any forecaster
    f.update(x[-5:] + 1.0)
    assert f.n_samples_seen_ == N + 5


@pytest.mark.parametrize("kwargs, match", [
    (dict(alphas=(0.1, -1.0)), "alphas must hold finite numbers >= 0"),
    (dict(alphas=(0.1,), model_params={"alpha": 0.1}), "both searched"),
    (dict(n_components=(64, 0)), "n_components must hold ints >= 1"),
    (dict(search="random"), "search must be"),
    (dict(alphas=(0.0,), models=("abo", "sw-krls")), "no ridge that sw-krls takes"),
])
def test_clear_errors_of_the_new_grids(kwargs, match):
    with pytest.raises(ValueError, match=match):
        tune_forecast(noisy_sine(), **{**SMALL, **kwargs})


def test_plot_forecast_draws_the_forecaster_output():
    """pandas: the forecast and its bands at the future time stamps; numpy: after the
    last position, the levels named by ``coverage``; one value: bars; shapes checked."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pandas as pd

    from sklearn_orfit import StreamForecaster
    from sklearn_orfit.forecasting import plot_forecast

    y = pd.Series(noisy_sine()[:200],
                  index=pd.date_range("2024-01-01", periods=200, freq="h"))
    f = StreamForecaster(n_lags=8, horizon=4).fit(y)
    forecast, bands = f.predict(), f.predict_interval()
    ax = plot_forecast(y, forecast, bands, backtest=f.backtest(y)["h1"], last=50)
    series, backtest, line = ax.get_lines()
    assert len(series.get_xdata()) == 50 and len(backtest.get_xdata()) == 50
    assert list(pd.DatetimeIndex(line.get_xdata())) == list(forecast.index)
    np.testing.assert_array_equal(line.get_ydata(), forecast.to_numpy())
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        "series", "backtest", "forecast", "95 % interval", "80 % interval"]
    # the 95 % band encloses the 80 % one
    (wide, narrow) = ax.collections
    assert np.ptp(wide.get_paths()[0].vertices[:, 1]) > np.ptp(
        narrow.get_paths()[0].vertices[:, 1])
    plt.close("all")

    v = y.to_numpy()
    g = StreamForecaster(n_lags=8, horizon=1).fit(v)
    ax = plot_forecast(v, g.predict(), g.predict_interval(), coverage=(0.8, 0.95))
    assert ax.get_lines()[-1].get_xdata().tolist() == [200]
    assert len(ax.collections) == 2  # the bars of one value
    with pytest.raises(ValueError, match="coverage has 1 levels"):
        plot_forecast(v, g.predict(), g.predict_interval(), coverage=(0.8,))
    with pytest.raises(ValueError, match="shape"):
        plot_forecast(v, g.predict(), np.zeros((1, 2)))
    with pytest.raises(ValueError, match="backtest has 3 values"):
        plot_forecast(v, g.predict(), backtest=np.zeros(3))
    plt.close("all")


@pytest.mark.parametrize("search", ["full", "staged"])
def test_the_baselines_are_searched_over_the_ridges_they_take(search):
    """QRD-RLS needs α > 0: a grid starting with 0 gives it its positive ridges (in a
    staged search the first one it takes), never its default in their place."""
    tuned = tune_forecast(noisy_sine(), **{**SMALL, "models": ("qrd-rls", "abo"),
                                           "alphas": (0.0, 0.1, 1.0), "search": search,
                                           "refit": False})
    alphas = {(r["model"], r["alpha"]) for r in tuned.table if r["stage"] == 1}
    if search == "full":
        assert alphas == {("qrd-rls", 0.1), ("qrd-rls", 1.0), ("abo", 0.0),
                          ("abo", 0.1), ("abo", 1.0)}
    else:
        assert alphas == {("qrd-rls", 0.1), ("abo", 0.0)}
        second = {r["alpha"] for r in tuned.table if r["stage"] == 2}
        assert second == ({0.1, 1.0} if tuned.model == "qrd-rls" else {0.0, 0.1, 1.0})


def test_bench_tune_quick(tmp_path):
    """The benchmark behind the README's --tune figures runs and scores every setting on
    the values after the tuning part."""
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "bench_tune.py"
    spec = importlib.util.spec_from_file_location("bench_tune", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main_(["--quick", "--output-dir", str(tmp_path)])
    n_tune = results["n_tune"]
    assert n_tune == 1200 * 3 // 10 and results["tune"]["n_scored"] == 1200 - n_tune
    assert {"alpha", "n_components"} <= set(results["tune"]["choice"])
    assert len(results["settings"]) == 2
    assert all(np.isfinite(r["rmse"]) for r in results["settings"])
    assert results["best_in_hindsight"]["rmse"] == min(r["rmse"] for r in results["settings"])
    doc = json.loads((tmp_path / "bench_tune_quick.json").read_text(encoding="utf-8"))
    assert doc["results"]["tune"]["rmse"] == results["tune"]["rmse"]


def test_a_window_that_leaves_folds_of_a_few_rows_is_left_out():
    """240 values to tune on: window 200's warm-up (before every candidate's folds)
    would leave folds of 9 rows; it is left out so that the others are judged on 57;
    when no window leaves 10 rows, those that leave 2 are searched."""
    x = noisy_sine()
    kw = dict(n_lags=12, sigmas=(0.25,), n_components=64, transforms=("none",),
              refit=False)
    tuned = tune_forecast(x, window_sizes=(50, 200), tune_fraction=0.4, **kw)
    (note,) = [r for r in tuned.table if r["transform"] is None]
    assert "window_size 200" in note["note"] and "fewer than 10 rows" in note["note"]
    assert tuned.warmup_size == 50 and tuned.fold_size == 57
    small = tune_forecast(x, window_sizes=(30, 35), tune_fraction=0.11, **kw)
    assert 2 <= small.fold_size < 10 and small.warmup_size == 35
