"""scikit-learn's estimator checks on every public estimator of this module family."""

import numpy as np
import pytest
from sklearn.utils.estimator_checks import check_estimator, parametrize_with_checks

from sklearn_orfit import (
    AggregatingRegressor,
    LagTransformer,
    ORFitMLPRegressor,
    QREWRLSRegressor,
    RandomFourierFeatures,
)
from sklearn_orfit.utils.estimator_checks import expected_failed_checks

LAGS = [LagTransformer(), LagTransformer(n_lags=3, horizon=2, fill_value=-1.0)]


@parametrize_with_checks(
    [
        RandomFourierFeatures(n_components=20, random_state=0),
        QREWRLSRegressor(),
        QREWRLSRegressor(window_size=5, forgetting_factor=0.9, alpha=1e-2),
        QREWRLSRegressor(solver="givens"),
        QREWRLSRegressor(solver="svd"),
        ORFitMLPRegressor(hidden_layer_sizes=(8,), random_state=0),
        ORFitMLPRegressor(hidden_layer_sizes=(8, 4), memory_size=5, random_state=0),
        *LAGS,
        AggregatingRegressor([("short", QREWRLSRegressor(5)),
                              ("ridge", QREWRLSRegressor(20, alpha=1e-2))]),
    ],
    # each with its mathematical reason (e.g. integer weights are not repeated rows in
    # a sliding window)
    expected_failed_checks=expected_failed_checks,
)
# the checks give the network more rows than its memory can fit apart: ORFit's
# documented spanned-batch warning (asserted in test_orfit_mlp.py)
@pytest.mark.filterwarnings("ignore::sklearn_orfit.exceptions.SpannedBatchWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("lags", LAGS, ids=repr)
def test_lag_transformer_declares_exactly_the_checks_it_fails(lags):
    results = check_estimator(lags, on_fail=None, on_skip=None)
    failed = {r["check_name"] for r in results if r["status"] == "failed"}
    expected = expected_failed_checks(lags)
    assert failed == set(expected)
    assert all(isinstance(reason, str) and reason for reason in expected.values())
    # with them declared, nothing else fails
    results = check_estimator(
        lags, expected_failed_checks=expected, on_fail=None, on_skip=None
    )
    assert {r["status"] for r in results} <= {"passed", "xfail", "skipped"}
    assert {r["check_name"] for r in results if r["status"] == "xfail"} == set(expected)


@pytest.mark.parametrize("n_lags, horizon", [(1, 1), (3, 2), (2, 4)])
def test_lag_transformer_fit_transform_differs_only_as_declared(n_lags, horizon):
    # fit(X).transform(X) continues the stream after X; fit_transform(X) starts one: they
    # agree from row n_lags + horizon - 1 on, and before it transform's lags are those
    # of X's rows following X itself
    X = np.random.default_rng(0).normal(size=(20, 3))
    M = n_lags + horizon - 1
    started = LagTransformer(n_lags, horizon=horizon).fit_transform(X)
    continued = LagTransformer(n_lags, horizon=horizon).fit(X).transform(X)
    np.testing.assert_array_equal(continued[M:], started[M:])
    twice = LagTransformer(n_lags, horizon=horizon).fit_transform(np.vstack([X, X]))
    np.testing.assert_array_equal(continued, twice[len(X):])
    assert not np.array_equal(continued[:M], started[:M])


def test_lag_transformer_is_a_transform_of_a_sequence():
    # the reason of the order and subset checks: each row is made of the rows before it
    X = np.arange(12.0).reshape(6, 2)
    lags = LagTransformer(n_lags=2).fit(X[:2] + 100.0)
    whole = lags.transform(X)
    assert not np.array_equal(lags.transform(X[::-1]), whole[::-1])
    assert not np.array_equal(lags.transform(X[3:]), whole[3:])
