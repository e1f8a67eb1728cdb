"""StreamForecaster: exact continuation, no look-ahead, pandas time axis, intervals.

The forecaster takes the series first (``fit(y, X=None)``), so scikit-learn's
``check_estimator`` / ``parametrize_with_checks`` (which fit ``(X, y)`` rows) do not
apply; the checks of the estimator contract that take any estimator run below, and the
streaming contracts (continuation, pickling mid-stream, all-or-nothing updates) are
tested directly.
"""

import pickle

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, clone
from sklearn.model_selection import GridSearchCV
from sklearn.utils.estimator_checks import (
    check_get_params_invariance,
    check_no_attributes_set_in_init,
    check_parameters_default_constructible,
    check_set_params,
)

from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    StreamForecaster,
    make_streaming_pipeline,
)
from sklearn_orfit.forecasting import StreamForecaster as FromForecasting
from sklearn_orfit.model_selection import PrequentialSplit


def small_model(n_components=16, window=10):
    return make_streaming_pipeline(
        RecursiveStandardScaler(),
        RandomFourierFeatures(n_components, sigma=0.3, random_state=0),
        QREWRLSRegressor(window, alpha=0.1),
    )


def series(n=120, seed=0, shift_at=None):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    y = 10 + np.sin(2 * np.pi * t / 12) + 0.2 * rng.normal(size=n)
    if shift_at is not None:
        y[shift_at:] += 3.0
    return y


def exog(n=120, seed=1):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, 2))


def make(**params):
    params.setdefault("n_lags", 4)
    params.setdefault("horizon", 3)
    params.setdefault("coverage", (0.8, 0.9))
    params.setdefault("conformal_window", 50)
    return StreamForecaster(small_model(), **params)


class LastValue(BaseEstimator):
    """A streaming regressor that predicts 0 for every target: with
    ``transform="diff"`` the forecaster's forecasts are then the last value."""

    def partial_fit(self, X, y):
        self.n_targets_ = np.shape(y)[1]
        return self

    def predict(self, X):
        return np.zeros((len(X), self.n_targets_))


CASES = [
    dict(strategy="direct"),
    dict(strategy="recursive"),
    dict(strategy="direct", transform="diff"),
    dict(strategy="recursive", transform="seasonal_diff", season=12),
    dict(strategy="direct", transform="seasonal_diff", season=2),
    dict(strategy="direct", transform="log_diff"),
    dict(strategy="direct", exog_lags=2, future_exog=[1]),
    dict(strategy="recursive", exog_lags=0, future_exog=[0, 1]),
]


def _state(fc, X_future=None):
    return (fc.predict(X_future=X_future), fc.predict_interval(X_future=X_future),
            fc.alpha_.copy(), fc.n_residuals_.copy(), fc.n_rows_learned_)


def _assert_same(a, b):
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)


def test_public_names():
    assert FromForecasting is StreamForecaster


@pytest.mark.parametrize("params", CASES, ids=lambda p: "-".join(map(str, p.values())))
def test_update_continues_the_stream_exactly(params):
    y = series()
    X = exog() if "future_exog" in params else None
    Xf = None if X is None else np.zeros((3, 2)) + 0.5
    whole = make(**params).fit(y, X)
    parts = make(**params).fit(y[:70], None if X is None else X[:70])
    for a, b in [(70, 71), (71, 95), (95, 120)]:
        parts.update(y[a:b], None if X is None else X[a:b])
    # one time step at a time whatever the chunking: bit-equal
    _assert_same(_state(whole, Xf), _state(parts, Xf))
    assert np.isfinite(whole.predict(X_future=Xf)).all()


@pytest.mark.parametrize("params", CASES[:2] + CASES[6:],
                         ids=lambda p: "-".join(map(str, p.values())))
def test_backtest_never_sees_the_future(params):
    y = series()
    X = exog() if "future_exog" in params else None
    F, intervals = make(**params).backtest(y, X, return_interval=True)
    t = 80
    y2 = y.copy()
    y2[t + 1 :] += 50.0
    X2 = None
    if X is not None:
        X2 = X.copy()
        # past-only columns after t change; known-future ones may be read up to t + h
        past = [j for j in range(2) if j not in params["future_exog"]]
        X2[t + 1 :, past] -= 7.0
        X2[t + 1 + 3 :, params["future_exog"]] += 9.0
    F2, intervals2 = make(**params).backtest(y2, X2, return_interval=True)
    h = F.shape[1]
    origin = np.arange(len(y))[:, None] - np.arange(1, h + 1)[None, :]
    made = origin <= t
    np.testing.assert_array_equal(F[made], F2[made])
    np.testing.assert_array_equal(intervals[made], intervals2[made])
    assert np.isfinite(F[made][-10:]).all()
    assert not np.array_equal(F[~made], F2[~made])  # the change is seen afterwards


def test_predict_is_the_backtest_forecast_at_the_last_origin():
    y, X = series(), exog()
    for params in (CASES[0], CASES[1], CASES[6]):
        F = make(**params).backtest(y, X if "future_exog" in params else None)
        a = 90
        fc = make(**params).fit(y[:a], X[:a] if "future_exog" in params else None)
        Xf = X[a : a + 3] if "future_exog" in params else None
        expected = [F[a - 1 + k, k - 1] for k in (1, 2, 3)]
        np.testing.assert_allclose(fc.predict(X_future=Xf), expected, rtol=1e-12)


def test_cold_start_is_nan_and_numpy_stays_numpy():
    y = series()
    # no row learned yet: the direct model waits for a row's last target, the recursive
    # one for the value after the first lags
    for strategy, n in (("direct", 5), ("recursive", 4), ("auto", 4)):
        out = make(n_lags=4, horizon=3, strategy=strategy).fit(y[:n]).predict()
        assert isinstance(out, np.ndarray) and out.shape == (3,) and np.isnan(out).all()
    fc = make(n_lags=4, horizon=3, strategy="direct").fit(y[:5])
    assert np.isnan(fc.predict_interval()).all()
    assert np.isfinite(make(n_lags=4, horizon=3).fit(y[:5]).predict()).all()
    F = make(strategy="direct").backtest(y)
    assert np.isnan(F[:6]).all() and np.isfinite(F[-50:]).all()
    F = make(strategy="recursive").backtest(y)
    assert np.isnan(F[:5]).all() and np.isfinite(F[5]).any() and np.isfinite(F[-50:]).all()
    assert fc.update(y[5:]).predict().dtype == np.float64


def test_pandas_in_pandas_out_with_the_future_index():
    def cheap():
        return StreamForecaster(LastValue(), n_lags=1, horizon=3, transform="diff")

    y = series()
    idx = pd.date_range("2024-01-01", periods=len(y), freq="h")
    s = pd.Series(y, index=idx)
    fc = make().fit(s[:100])
    fc.update(s[100:])
    out = fc.predict()
    assert isinstance(out, pd.Series)
    assert list(out.index) == list(pd.date_range(idx[-1], periods=4, freq="h")[1:])
    np.testing.assert_array_equal(out.to_numpy(), make().fit(y).predict())
    band = fc.predict_interval()
    assert list(band.columns) == ["lower_80", "upper_80", "lower_90", "upper_90"]
    assert band.index.equals(out.index)
    F = cheap().backtest(s)
    assert isinstance(F, pd.DataFrame) and F.index.equals(idx)
    assert list(F.columns) == ["h1", "h2", "h3"]
    # no freq on the index: inferred; irregular: the last step
    no_freq = pd.Series(y, index=pd.DatetimeIndex(list(idx)))
    assert cheap().fit(no_freq).predict().index.equals(out.index)
    irregular = pd.Series(y[:3], index=pd.DatetimeIndex(["2024-01-01", "2024-01-03",
                                                         "2024-01-04"]))
    nxt = cheap().fit(irregular).predict().index
    assert list(nxt) == list(pd.to_datetime(["2024-01-05", "2024-01-06", "2024-01-07"]))
    one = pd.Series([1.0], index=pd.DatetimeIndex(["2024-01-01"]))
    with pytest.raises(ValueError, match="time step"):
        cheap().fit(one).predict()
    ints = pd.Series(y, index=pd.RangeIndex(10, 10 + 2 * len(y), 2))
    assert list(cheap().fit(ints).predict().index) == [10 + 2 * len(y) + 2 * k for k in
                                                       range(3)]


def test_known_future_columns_enter_at_the_target_time():
    rng = np.random.default_rng(3)
    x = rng.normal(size=300)
    y = 5.0 * x + 0.01 * rng.normal(size=300)  # only the value at the target time helps
    X = x[:, None]
    with_future = StreamForecaster(small_model(32, 30), n_lags=1, horizon=2,
                                   future_exog=[0], exog_lags=0).fit(y[:150], X[:150])
    past_only = StreamForecaster(small_model(32, 30), n_lags=1, horizon=2,
                                 exog_lags=2).fit(y[:150], X[:150])
    err_future = np.abs(with_future.predict(X_future=X[150:152]) - y[150:152]).max()
    err_past = np.abs(past_only.predict() - y[150:152]).max()
    assert err_future < 0.5 < err_past
    with pytest.raises(ValueError, match="X_future is required"):
        with_future.predict()
    df = pd.DataFrame({"temp": x, "other": x ** 2})[:60]
    by_name = StreamForecaster(small_model(), n_lags=2, horizon=2, future_exog=["temp"],
                               exog_lags=1).fit(pd.Series(y[:60]), df)
    full_rows = by_name.predict(X_future=df.iloc[:2])
    only_col = by_name.predict(X_future=df[["temp"]].iloc[:2])
    np.testing.assert_array_equal(full_rows.to_numpy(), only_col.to_numpy())


def test_aci_update_rule_and_delayed_residuals():
    y = series(150, shift_at=90)
    fc = make(method="aci", gamma=0.01)
    F, band = fc.backtest(y, return_interval="aci")
    outside = (y[:, None, None] < band[..., 0]) | (y[:, None, None] > band[..., 1])
    issued = np.isfinite(band[..., 0])
    nominal = 1 - np.array([0.8, 0.9])
    # α_T = α + γ Σ_t (α − err_t) over the intervals issued, per step and level
    expected = nominal + 0.01 * np.where(issued, nominal - outside, 0.0).sum(axis=0)
    np.testing.assert_allclose(fc.alpha_, expected, rtol=1e-12, atol=1e-12)
    # step k's residuals arrive k steps after their forecast: at the end, step 3 has
    # two fewer than step 1 (those of the last two origins are still outstanding)
    counts = np.isfinite(F).sum(axis=0)
    assert counts[0] - counts[2] == 2
    quant = make(method="quantile").fit(y)
    np.testing.assert_array_equal(quant.predict(), fc.predict())


def test_aci_recovers_coverage_after_the_noise_grows():
    rng = np.random.default_rng(4)
    steps = rng.normal(size=600)
    steps[300:] *= 4.0  # the noise grows fourfold at t = 300
    y = 100 + np.cumsum(steps)
    params = dict(n_lags=1, horizon=2, transform="diff", coverage=(0.8, 0.9),
                  conformal_window=200)
    _, aci = StreamForecaster(LastValue(), gamma=0.05, **params).backtest(
        y, return_interval="aci")
    _, naive = StreamForecaster(LastValue(), **params).backtest(
        y, return_interval="quantile")

    def coverage(b, rows):
        inside = ((y[rows, None, None] >= b[rows, ..., 0])
                  & (y[rows, None, None] <= b[rows, ..., 1]))
        return inside.mean(axis=0)

    after = slice(320, 450)
    gap_aci = np.abs(coverage(aci, after) - [0.8, 0.9]).max()
    gap_naive = np.abs(coverage(naive, after) - [0.8, 0.9]).max()
    assert gap_aci < 0.1 < gap_naive
    # before the change both are calibrated
    before = slice(100, 300)
    assert np.abs(coverage(naive, before) - [0.8, 0.9]).max() < 0.08


def test_estimator_contract():
    fc = make()
    check_no_attributes_set_in_init("StreamForecaster", StreamForecaster())
    check_parameters_default_constructible("StreamForecaster", StreamForecaster())
    check_get_params_invariance("StreamForecaster", fc)
    check_set_params("StreamForecaster", fc)
    c = clone(fc)
    assert c.get_params()["n_lags"] == 4 and c.regressor is not fc.regressor
    assert fc.set_params(n_lags=5, regressor__qrewrlsregressor__window_size=10) is fc
    assert fc.regressor.steps[-1][1].window_size == 10
    y = series()
    fc.fit(y[:100])
    fc.set_params(horizon=2)
    with pytest.raises(ValueError, match="horizon changed"):
        fc.update(y[100:])


def test_grid_search_with_prequential_split():
    y = series(100)
    search = GridSearchCV(make(), {"n_lags": [1, 4]},
                          cv=PrequentialSplit(2, test_size=20)).fit(y)
    # each fold's score: warm up on the rows before it, continue the stream over it
    for i, (train, test) in enumerate(PrequentialSplit(2, test_size=20).split(y)):
        for j, n_lags in enumerate([1, 4]):
            score = make(n_lags=n_lags).fit(y[train]).score(y[test])
            assert search.cv_results_[f"split{i}_test_score"][j] == score
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))
    assert search.best_estimator_.predict().shape == (3,)


def test_pickle_mid_stream():
    y = series()
    fc = make(transform="diff").fit(y[:100])
    copy = pickle.loads(pickle.dumps(fc))
    fc.update(y[100:])
    copy.update(y[100:])
    _assert_same(_state(fc), _state(copy))


@pytest.mark.parametrize("bad", ["nan", "width", "rows", "log"])
def test_rejected_update_leaves_the_state_unchanged(bad):
    y, X = series(), exog()
    transform = "log_diff" if bad == "log" else None
    fc = make(future_exog=[1], exog_lags=1, transform=transform).fit(y[:100], X[:100])
    before = pickle.dumps(fc)
    y_new, X_new = y[100:110].copy(), X[100:110]
    if bad == "nan":
        y_new[5] = np.nan
    elif bad == "width":
        X_new = X_new[:, :1]
    elif bad == "rows":
        X_new = X_new[:4]
    else:
        y_new[3] = -1.0
    with pytest.raises(ValueError):
        fc.update(y_new, X_new)
    assert pickle.dumps(fc) == before
    fc.update(y[100:], X[100:])
    whole = make(future_exog=[1], exog_lags=1, transform=transform).fit(y, X)
    _assert_same(_state(fc, X[:3]), _state(whole, X[:3]))


def test_parameter_errors():
    y = series()
    with pytest.raises(ValueError, match="season"):
        make(transform="seasonal_diff").fit(y)
    with pytest.raises(ValueError, match="recursive"):
        make(strategy="recursive").fit(y, exog())
    with pytest.raises(ValueError, match="log_diff"):
        make(transform="log_diff").fit(y - 20)
    with pytest.raises(ValueError, match="future_exog"):
        make(future_exog=[5]).fit(y, exog())
    fc = make().fit(y)
    with pytest.raises(ValueError, match="horizon"):
        fc.predict(horizon=4)
    with pytest.raises(ValueError, match="not tracked"):
        fc.predict_interval(coverage=(0.5,))
    assert make(method="quantile").fit(y).predict_interval(coverage=(0.5,)).shape == (3, 1, 2)
    with pytest.raises(ValueError, match="X given"):
        fc.update(y[:3], exog(3))


def test_bench_intervals_quick(tmp_path, capsys):
    import importlib.util
    import json
    from pathlib import Path

    path = Path(__file__).parents[1] / "benchmarks" / "bench_intervals.py"
    spec = importlib.util.spec_from_file_location("bench_intervals", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    results = bench.main(["--quick", "--max-values", "160", "--n-components", "16",
                          "--window", "10", "--conformal-window", "50",
                          "--out", str(tmp_path)])
    assert set(results) == {"demand", "eurusd", "shift"}
    for res in results.values():
        for strategy in ("direct", "recursive"):
            r = res[strategy]
            assert np.all(np.isfinite(r["mse"])) and np.all(np.isfinite(r["mse_reference"]))
            for method in ("aci", "quantile"):
                cov = np.array(r["methods"][method]["coverage"])
                assert cov.shape == (len(r["mse"]), 2)
                assert np.all((cov >= 0) & (cov <= 1))
    doc = json.loads((tmp_path / "bench_intervals_quick.json").read_text(encoding="utf-8"))
    assert doc["settings"]["series"]["demand"]["n"] == 160
    assert "| demand | direct | aci | 80% |" in capsys.readouterr().out


def test_a_rejected_fit_keeps_the_previous_stream():
    y = np.sin(np.arange(120) / 5.0) + 0.01 * np.arange(120)
    fc = StreamForecaster(n_lags=4, horizon=2).fit(y[:100])
    before = pickle.dumps(fc)
    bad = y.copy()
    bad[7] = np.nan
    with pytest.raises(ValueError):
        fc.fit(bad)
    assert pickle.dumps(fc) == before
    np.testing.assert_array_equal(fc.update(y[100:]).predict(), StreamForecaster(
        n_lags=4, horizon=2).fit(y).predict())


@pytest.mark.parametrize("strategy", ["recursive", "direct"])
def test_an_aggregate_of_experts_is_a_model(strategy):
    from sklearn_orfit import AggregatingRegressor, make_expert_grid

    t = np.arange(300)
    y = np.sin(t / 6) + 0.05 * np.random.default_rng(0).normal(size=300)
    agg = AggregatingRegressor(make_expert_grid(
        abo_windows=(30, 60), sigmas=(0.5,), n_components=(64,), krls_windows=(30,)))
    full = StreamForecaster(agg, n_lags=6, horizon=3, strategy=strategy).fit(y)
    part = StreamForecaster(agg, n_lags=6, horizon=3, strategy=strategy).fit(y[:200])
    np.testing.assert_array_equal(part.update(y[200:]).predict(), full.predict())
    assert np.isfinite(full.predict()).all() and np.isfinite(full.predict_interval()).all()
    w = full.regressor_.weights_
    assert w.shape[-1] == 3 and np.allclose(np.sum(w, axis=-1), 1.0)


def test_a_pickle_records_the_state_format():
    from sklearn_orfit._streaming._base import STATE_FORMAT

    y = np.sin(np.arange(80) / 5.0)
    fc = StreamForecaster(n_lags=4, horizon=2).fit(y)
    state = fc.__getstate__()
    assert state["_sklearn_orfit_state_format"] == STATE_FORMAT
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(fc)).predict(), fc.predict())
    state["_sklearn_orfit_state_format"] = STATE_FORMAT + 1
    with pytest.raises(ValueError, match="Fit the model again"):
        StreamForecaster.__new__(StreamForecaster).__setstate__(state)


class _Interrupt(BaseException):
    """Raised inside a step to play an error or a Ctrl-C in the middle of an update."""


def _fail_at(obj, name, call, exc=_Interrupt):
    """Make ``obj.name`` raise ``exc`` at its ``call``-th call (counted from 1)."""
    real, count = getattr(obj, name), [0]

    def wrapped(*args, **kwargs):
        count[0] += 1
        if count[0] == call:
            raise exc("interrupted")
        return real(*args, **kwargs)

    setattr(obj, name, wrapped)
    return lambda: delattr(obj, name)  # the class's method again


@pytest.mark.parametrize("final", ["short-window", "long-window", "orfit"])
@pytest.mark.parametrize("exc", [_Interrupt, ValueError])
@pytest.mark.parametrize("strategy", ["direct", "recursive"])
def test_an_update_interrupted_inside_a_step_leaves_the_state_unchanged(final, exc,
                                                                       strategy):
    """An error or a Ctrl-C at the 5th row an update learns: the forecaster (its
    histories, conformal state, the regressor's window) is as before the call, and the
    stream continues as if the call had never been made."""
    from sklearn_orfit import ORFitRegressor

    last = {"short-window": QREWRLSRegressor(10, alpha=0.1),
            "long-window": QREWRLSRegressor(60, alpha=0.1),
            "orfit": ORFitRegressor(memory_size=5)}[final]
    model = make_streaming_pipeline(RecursiveStandardScaler(),
                                    RandomFourierFeatures(16, sigma=0.3, random_state=0),
                                    last)
    y = series(200)
    fc = StreamForecaster(model, n_lags=4, horizon=3, strategy=strategy,
                          conformal_window=50).fit(y[:100])
    clean = pickle.loads(pickle.dumps(fc))
    before = pickle.dumps(fc)
    step = list(fc.regressor_.named_steps_.values())[-1]  # the fitted final step
    undo = _fail_at(step, "learn_one", 5, exc)
    with pytest.raises(exc, match="interrupted"):
        fc.update(y[100:130])
    undo()
    assert fc.n_samples_seen_ == 100
    _assert_same(_state(fc), _state(clean))
    assert pickle.dumps(fc) == before
    fc.update(y[100:])
    clean.update(y[100:])
    _assert_same(_state(fc), _state(clean))


def test_predict_during_updates_reads_one_call_boundary():
    """One thread updates in calls of 2 values while another forecasts: every forecast
    (and interval) equals, exactly, the one after some update."""
    import sys
    import threading

    y = series(200)
    seq = make(strategy="recursive").fit(y[:100])
    boundaries = [(seq.predict(), seq.predict_interval())]
    for a in range(100, 200, 2):
        seq.update(y[a:a + 2])
        boundaries.append((seq.predict(), seq.predict_interval()))

    fc = make(strategy="recursive").fit(y[:100])
    done, seen = threading.Event(), []

    def write():
        try:
            for a in range(100, 200, 2):
                fc.update(y[a:a + 2])
        finally:
            done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        writer = threading.Thread(target=write)
        writer.start()
        while not done.is_set():
            seen.append((fc.predict(), fc.predict_interval()))
        writer.join()
    finally:
        sys.setswitchinterval(interval)
    assert seen
    for f, band in seen:  # (each call reads one boundary; the two may differ)
        assert any(np.array_equal(f, bf) for bf, _ in boundaries)
        assert any(np.array_equal(band, bb, equal_nan=True) for _, bb in boundaries)


ONE_STEP = [dict(c, horizon=1) for c in CASES if c.get("season") != 12]


@pytest.mark.parametrize("chunk_size", [2, 7, 256])
@pytest.mark.parametrize("params", ONE_STEP, ids=lambda p: "-".join(map(str, p.values())))
def test_one_step_blocks_equal_one_value_at_a_time(params, chunk_size):
    """One step ahead, the values are learned in blocks by one vectorised prequential
    call: the forecasts, intervals and ACI levels are those of one value at a time (the
    regressor's one-row updates) up to rounding, with the same forecasts missing."""
    y = series(200)
    X = exog(200) if "future_exog" in params else None
    ref = make(chunk_size=1, **params)
    F0, I0 = ref.backtest(y, X, return_interval="all")
    fc = make(chunk_size=chunk_size, **params)
    F1, I1 = fc.backtest(y, X, return_interval="all")
    assert np.array_equal(np.isnan(F0), np.isnan(F1)) and np.isfinite(F0[-150:]).all()
    scale = np.abs(y).max()
    np.testing.assert_allclose(F1, F0, rtol=0, atol=1e-12 * scale)
    for method in ("aci", "quantile"):
        np.testing.assert_allclose(I1[method], I0[method], rtol=0, atol=1e-12 * scale)
    np.testing.assert_array_equal(fc.alpha_, ref.alpha_)
    assert fc.n_rows_learned_ == ref.n_rows_learned_ == 200 - 1 - fc._t0
    Xf = None if X is None else np.full((1, 2), 0.5)
    np.testing.assert_allclose(fc.predict(X_future=Xf), ref.predict(X_future=Xf),
                               rtol=0, atol=1e-12 * scale)


@pytest.mark.parametrize("params", ONE_STEP[:3] + ONE_STEP[-2:],
                         ids=lambda p: "-".join(map(str, p.values())))
def test_one_step_blocks_are_aligned_on_the_stream(params):
    """Blocks end on multiples of chunk_size whatever the calls: streams whose calls
    differ only by cuts on multiples are bit-equal; a cut inside a block changes the
    results to rounding only."""
    y = series(200)
    X = exog(200) if "future_exog" in params else None
    Xf = None if X is None else np.full((1, 2), 0.5)

    def run(cuts):
        fc = make(chunk_size=16, **params)
        for a, b in zip([0, *cuts], [*cuts, 200]):
            if a == 0:
                fc.fit(y[:b], None if X is None else X[:b])
            else:
                fc.update(y[a:b], None if X is None else X[a:b])
        return _state(fc, Xf)

    _assert_same(run([]), run([64, 80, 144]))
    _assert_same(run([50]), run([50, 64, 128]))
    _assert_same(run([50, 51, 99]), run([50, 51, 64, 99, 112]))
    for u, v in zip(run([]), run([50, 51, 99])):
        np.testing.assert_allclose(u, v, rtol=1e-12)


@pytest.mark.parametrize("chunk_size", [7, 256])
def test_one_step_blocks_never_see_the_future(chunk_size):
    y = series(200)
    t = 120
    y2 = y.copy()
    y2[t + 1 :] += 50.0
    F, I = make(horizon=1, chunk_size=chunk_size).backtest(y, return_interval=True)
    F2, I2 = make(horizon=1, chunk_size=chunk_size).backtest(y2, return_interval=True)
    made = np.arange(200) - 1 <= t
    np.testing.assert_array_equal(F[made], F2[made])
    np.testing.assert_array_equal(I[made], I2[made])
    assert np.isfinite(F[made][-10:]).all()
    assert not np.array_equal(F[~made], F2[~made])


def test_one_step_block_failure_changes_nothing(monkeypatch):
    """An error inside a block's prequential call (or in the time steps after it)
    leaves the forecaster, its regressor included, as it was."""
    y = series(200)
    fc = make(horizon=1, chunk_size=16).fit(y[:100])
    before = pickle.dumps(fc)
    calls = {"n": 0}
    real = StreamForecaster._residuals

    def failing(self, *args):
        calls["n"] += 1
        if calls["n"] == 40:
            raise KeyboardInterrupt
        return real(self, *args)

    monkeypatch.setattr(StreamForecaster, "_residuals", failing)
    with pytest.raises(KeyboardInterrupt):
        fc.update(y[100:])
    monkeypatch.undo()
    assert pickle.dumps(fc) == before
    clean = make(horizon=1, chunk_size=16).fit(y[:100])
    _assert_same(_state(fc.update(y[100:])), _state(clean.update(y[100:])))


# (scikit-learn's SGDRegressor warns about the forecaster's one-column targets)
@pytest.mark.filterwarnings("ignore:A column-vector y was passed")
def test_chunk_size_is_checked_fixed_for_the_stream_and_ignored_without_blocks():
    """chunk_size must be an int >= 1; changing it mid-stream is refused like any other
    parameter; a huge block and a regressor without a vectorised prequential_predict
    give one value at a time's forecasts."""
    from sklearn.linear_model import SGDRegressor

    y = series(200)
    with pytest.raises(ValueError, match="chunk_size"):
        make(horizon=1, chunk_size=0).fit(y)
    fc = make(horizon=1, chunk_size=16).fit(y[:100])
    before = pickle.dumps(fc)
    fc.set_params(chunk_size=1)
    with pytest.raises(ValueError, match="chunk_size changed"):
        fc.update(y[100:])
    assert pickle.dumps(fc.set_params(chunk_size=16)) == before
    one = make(horizon=1, chunk_size=1).backtest(y)
    np.testing.assert_allclose(make(horizon=1, chunk_size=10**9).backtest(y), one,
                               rtol=0, atol=1e-12 * np.abs(y).max())
    sgd = [StreamForecaster(SGDRegressor(random_state=0), n_lags=4, horizon=1,
                            chunk_size=c).backtest(y) for c in (1, 64)]
    np.testing.assert_array_equal(sgd[0], sgd[1])
