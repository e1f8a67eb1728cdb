"""PrequentialSplit, make_prequential_scorer and the metrics, with stock sklearn search."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import GridSearchCV, RandomizedSearchCV, cross_validate

from sklearn_orfit import (
    LagTransformer,
    PrequentialSplit,
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    make_prequential_scorer,
    make_streaming_pipeline,
)
from sklearn_orfit.datasets import load_electricity_demand, make_lagged
from sklearn_orfit.metrics import res_mse, res_var, residual_statistics
from sklearn_orfit.model_selection import validation_test_splits


def _demand_lagged(n_rows=900, n_lags=8):
    """First differences of the bundled demand series, in GW, with lags."""
    diff = np.diff(load_electricity_demand().data) / 1000.0
    X, y = make_lagged(diff[: n_rows + n_lags], n_lags=n_lags)
    return X, y


def _hand_prequential(pipe, X, y):
    y_pred = np.empty(len(y))
    for i in range(len(y)):
        y_pred[i] = pipe.predict(X[i : i + 1])[0]
        pipe.partial_fit(X[i : i + 1], y[i : i + 1])
    return y_pred


# ---------------------------------------------------------------------- acceptance
def test_grid_search_cv_results_equal_hand_written_prequential_loop():
    X, y = _demand_lagged()
    cv = PrequentialSplit(3, test_size=120, warmup_size=40, offset=60)
    grid = {"randomfourierfeatures__sigma": [0.5, 2.0], "qrewrlsregressor__window_size": [10, 30]}
    search = GridSearchCV(
        make_streaming_pipeline(
            RandomFourierFeatures(128, random_state=0), QREWRLSRegressor()
        ),
        grid,
        cv=cv,
        scoring=make_prequential_scorer("mse"),
    ).fit(X, y)
    results = search.cv_results_
    hand = np.empty((len(results["params"]), 3))
    for j, params in enumerate(results["params"]):
        for k, (train, test) in enumerate(cv.split(X)):
            assert train[-1] + 1 == test[0] and len(train) == 40
            pipe = make_streaming_pipeline(
                RandomFourierFeatures(
                    128, sigma=params["randomfourierfeatures__sigma"], random_state=0
                ),
                QREWRLSRegressor(window_size=params["qrewrlsregressor__window_size"]),
            ).fit(X[train], y[train])
            y_pred = _hand_prequential(pipe, X[test], y[test])
            hand[j, k] = -np.mean((y[test] - y_pred) ** 2)
    for k in range(3):
        np.testing.assert_allclose(results[f"split{k}_test_score"], hand[:, k], rtol=1e-9)
    np.testing.assert_allclose(results["mean_test_score"], hand.mean(axis=1), rtol=1e-9)
    assert search.best_params_ == results["params"][int(np.argmax(hand.mean(axis=1)))]
    # the scores are genuine prequential errors: the best beats predicting 0
    assert -search.best_score_ < np.mean(y**2)


def test_multimetric_scorer_one_pass_and_refit():
    X, y = _demand_lagged(500)
    cv = PrequentialSplit(2, test_size=100, warmup_size=20)
    search = GridSearchCV(
        make_streaming_pipeline(RandomFourierFeatures(64, random_state=0), QREWRLSRegressor()),
        {"qrewrlsregressor__window_size": [5, 20]},
        cv=cv,
        scoring=make_prequential_scorer(["mse", "var"]),
        refit="mse",
    ).fit(X, y)
    res = search.cv_results_
    for j, params in enumerate(res["params"]):
        train, test = list(cv.split(X))[1]
        pipe = make_streaming_pipeline(
            RandomFourierFeatures(64, random_state=0),
            QREWRLSRegressor(window_size=params["qrewrlsregressor__window_size"]),
        ).fit(X[train], y[train])
        y_pred = _hand_prequential(pipe, X[test], y[test])
        assert res["split1_test_var"][j] == pytest.approx(-res_var(y[test], y_pred), rel=1e-8)
        assert res["split1_test_mse"][j] == pytest.approx(-res_mse(y[test], y_pred), rel=1e-9)
    assert hasattr(search.best_estimator_, "steps_")


def test_cross_validate_with_lags_in_the_chain_continues_from_the_warmup():
    series = np.diff(load_electricity_demand().data[:700]) / 1000.0
    X, y = series[:, None], series
    cv = PrequentialSplit(2, test_size=100, warmup_size=50)
    pipe = make_streaming_pipeline(
        LagTransformer(6), RecursiveStandardScaler(), RandomFourierFeatures(64, random_state=0),
        QREWRLSRegressor(window_size=20),
    )
    res = cross_validate(pipe, X, y, cv=cv, scoring=make_prequential_scorer("mse"))
    for k, (train, test) in enumerate(cv.split(X)):
        fitted = make_streaming_pipeline(
            LagTransformer(6), RecursiveStandardScaler(),
            RandomFourierFeatures(64, random_state=0), QREWRLSRegressor(window_size=20),
        ).fit(X[train], y[train])
        # the first fold row's lags are the last warm-up values
        lagged = fitted.named_steps_.lagtransformer.transform(X[test[:1]])
        np.testing.assert_array_equal(lagged[0], series[train[-6:]][::-1])
        y_pred = _hand_prequential(fitted, X[test], y[test])
        assert res["test_score"][k] == pytest.approx(-res_mse(y[test], y_pred), rel=1e-9)


def test_randomized_search_with_sgd_chain_runs():
    X, y = _demand_lagged(300, n_lags=4)
    search = RandomizedSearchCV(
        make_streaming_pipeline(RecursiveStandardScaler(), SGDRegressor(random_state=0)),
        {"sgdregressor__alpha": [1e-4, 1e-3, 1e-2]},
        n_iter=2,
        random_state=0,
        cv=PrequentialSplit(2, test_size=50, warmup_size=30),
        scoring=make_prequential_scorer("mse"),
    ).fit(X, y)
    assert np.all(np.isfinite(search.cv_results_["mean_test_score"]))


def test_scorer_leaves_the_estimator_untouched():
    X, y = _demand_lagged(200)
    pipe = make_streaming_pipeline(RandomFourierFeatures(32, random_state=0), QREWRLSRegressor())
    pipe.fit(X[:100], y[:100])
    before = pipe.predict(X[150:160])
    score = make_prequential_scorer("mse")(pipe, X[100:], y[100:])
    np.testing.assert_array_equal(pipe.predict(X[150:160]), before)
    assert pipe.named_steps_.qrewrlsregressor.n_samples_seen_ == 100
    assert score < 0


def test_scorer_options():
    X, y = _demand_lagged(200)
    pipe = make_streaming_pipeline(RandomFourierFeatures(32, random_state=0), QREWRLSRegressor())
    pipe.fit(X[:100], y[:100])
    full = make_prequential_scorer("mse")(pipe, X[100:], y[100:])
    skipped = make_prequential_scorer("mse", skip=20)(pipe, X[100:], y[100:])
    y_pred = _hand_prequential(pipe.__class__(pipe.steps).fit(X[:100], y[:100]), X[100:], y[100:])
    assert full == pytest.approx(-res_mse(y[100:], y_pred), rel=1e-9)
    assert skipped == pytest.approx(-res_mse(y[120:], y_pred[20:]), rel=1e-9)

    def hit_rate(y_true, y_pred):
        return float(np.mean(np.sign(y_true) == np.sign(y_pred)))

    gain = make_prequential_scorer(hit_rate, greater_is_better=True)(pipe, X[100:], y[100:])
    assert gain == pytest.approx(hit_rate(y[100:], y_pred))
    rmse = make_prequential_scorer("rmse")(pipe, X[100:], y[100:])
    assert rmse == pytest.approx(-np.sqrt(-full))
    with pytest.raises(ValueError, match="Unknown metric"):
        make_prequential_scorer("r2")
    # unit weights: the unweighted score
    assert make_prequential_scorer("mse")(
        pipe, X[100:], y[100:], sample_weight=np.ones(len(y) - 100)
    ) == pytest.approx(full)


# ---------------------------------------------------------------------- splitter
@settings(max_examples=60, deadline=None)
@given(
    n_splits=st.integers(1, 6),
    test_size=st.integers(1, 30),
    warmup=st.one_of(st.none(), st.integers(1, 40)),
    gap=st.integers(0, 5),
    offset=st.integers(0, 20),
    extra=st.integers(0, 50),
)
def test_split_geometry(n_splits, test_size, warmup, gap, offset, extra):
    n = n_splits * test_size + (warmup or 1) + gap + offset + extra
    cv = PrequentialSplit(n_splits, test_size=test_size, warmup_size=warmup, gap=gap, offset=offset)
    splits = list(cv.split(np.zeros((n, 1))))
    assert len(splits) == cv.get_n_splits() == n_splits
    tests = np.concatenate([t for _, t in splits])
    np.testing.assert_array_equal(tests, np.arange(n - offset - n_splits * test_size, n - offset))
    for train, test in splits:
        assert len(test) == test_size and np.all(np.diff(test) == 1)
        assert train[-1] == test[0] - gap - 1 and np.all(np.diff(train) == 1)
        assert len(train) == (warmup if warmup is not None else test[0] - gap)


def test_split_defaults_and_errors():
    splits = list(PrequentialSplit(3).split(np.zeros((40, 1))))
    assert [len(t) for _, t in splits] == [10, 10, 10]
    assert splits[0][0].tolist() == list(range(10))  # expanding warm-up
    with pytest.raises(ValueError, match="need"):
        list(PrequentialSplit(3, test_size=10, warmup_size=20).split(np.zeros((40, 1))))
    with pytest.raises(ValueError, match="n_splits"):
        list(PrequentialSplit(0).split(np.zeros((40, 1))))
    with pytest.raises(ValueError, match="gap"):
        list(PrequentialSplit(2, gap=-1).split(np.zeros((40, 1))))
    assert "warmup_size=5" in repr(PrequentialSplit(2, warmup_size=5))


def test_validation_folds_come_before_test_folds():
    val, test = validation_test_splits(
        8, 5, validation_size=96, test_size=192, warmup_size=21
    )
    X = np.zeros((4000, 1))
    val_rows = np.concatenate([t for _, t in val.split(X)])
    test_splits = list(test.split(X))
    test_rows = np.concatenate([t for _, t in test_splits])
    assert val_rows.max() < test_rows.min()
    assert test_rows.max() == 3999 and len(test_rows) == 5 * 192 and len(val_rows) == 8 * 96
    assert val_rows.max() + 1 == test_rows.min()
    assert all(len(train) == 21 for train, _ in test_splits)


# ---------------------------------------------------------------------- metrics
def test_metrics_against_numpy():
    rng = np.random.default_rng(0)
    y, p = rng.normal(size=50), rng.normal(size=50)
    e2 = (y - p) ** 2
    assert res_mse(y, p) == pytest.approx(e2.mean(), rel=1e-14)
    assert res_var(y, p) == pytest.approx(np.var(e2, ddof=1), rel=1e-14)
    stats = residual_statistics(y, p)
    assert stats["abs_mean"] == pytest.approx(np.mean(np.abs(y - p)), rel=1e-14)
    assert stats["abs_var"] == pytest.approx(np.var(np.abs(y - p), ddof=1), rel=1e-14)
    assert stats["res_mse"] == pytest.approx(e2.mean(), rel=1e-14)
    Y, P = rng.normal(size=(20, 2)), rng.normal(size=(20, 2))
    raw = res_mse(Y, P, multioutput="raw_values")
    np.testing.assert_allclose(raw, ((Y - P) ** 2).mean(axis=0), rtol=1e-14)
    assert res_mse(Y, P) == pytest.approx(raw.mean())
    with pytest.raises(ValueError, match="two samples"):
        res_var([1.0], [0.0])
    with pytest.raises(ValueError, match="shape"):
        res_mse([1.0, 2.0], [[1.0], [2.0]])
    with pytest.raises(ValueError, match="NaN"):
        res_mse([1.0, np.nan], [0.0, 0.0])
