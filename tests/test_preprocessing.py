"""RecursiveStandardScaler and LagTransformer: streaming contracts and no look-ahead."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import LagTransformer, RecursiveStandardScaler
from sklearn_orfit.datasets import make_lagged

EPS = np.finfo(np.float64).eps


@parametrize_with_checks(
    [
        RecursiveStandardScaler(),
        RecursiveStandardScaler(with_mean=False),
        RecursiveStandardScaler(with_std=False),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def _prefix_oracle(X, *, with_mean=True, with_std=True):
    """Row t scaled with numpy's two-pass mean/std of rows < t (row 0: of itself)."""
    out = np.empty_like(X)
    for t in range(X.shape[0]):
        past = X[: max(t, 1)]
        mean, var = past.mean(axis=0), past.var(axis=0)
        n = past.shape[0]
        constant = var <= n * EPS * var + (n * mean * EPS) ** 2
        scale = np.where(constant, 1.0, np.sqrt(var))
        z = X[t] - mean if with_mean else X[t].copy()
        out[t] = z / scale if with_std else z
    return out


@pytest.mark.parametrize("with_mean, with_std", [(True, True), (False, True), (True, False)])
def test_prequential_transform_matches_prefix_oracle(with_mean, with_std):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3)) * [1.0, 10.0, 0.1]
    Xt = RecursiveStandardScaler(
        with_mean=with_mean, with_std=with_std
    ).prequential_transform(X)
    expected = _prefix_oracle(X, with_mean=with_mean, with_std=with_std)
    np.testing.assert_allclose(Xt, expected, rtol=1e-11, atol=1e-11)
    assert Xt[0].tolist() == ([0.0] * 3 if with_mean else Xt[0].tolist())


def test_no_cancellation_far_from_zero():
    # an electricity-like series: mean 3e4, std 1 — E[x²] − E[x]² would lose ~9 digits
    rng = np.random.default_rng(1)
    X = 3e4 + rng.normal(size=(2000, 1))
    Xt = RecursiveStandardScaler().prequential_transform(X)
    expected = _prefix_oracle(X)
    assert np.max(np.abs(Xt - expected)[2:]) < 1e-9


def test_state_after_prequential_transform_equals_partial_fit():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(50, 4))
    a = RecursiveStandardScaler().partial_fit(X[:7])
    b = RecursiveStandardScaler().partial_fit(X[:7])
    a.partial_fit(X[7:])
    b.prequential_transform(X[7:])
    for name in ("mean_", "var_", "scale_"):
        np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert a.n_samples_seen_ == b.n_samples_seen_ == 50
    # and the statistics are those of all rows
    np.testing.assert_allclose(a.mean_, X.mean(axis=0), rtol=1e-13)
    np.testing.assert_allclose(a.var_, X.var(axis=0), rtol=1e-12)


def test_chunking_does_not_change_the_output():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(120, 2)) + 5.0
    whole = RecursiveStandardScaler().prequential_transform(X)
    scaler = RecursiveStandardScaler()
    bounds = [(0, 1), (1, 30), (30, 31), (31, 120)]
    parts = [scaler.prequential_transform(X[a:b]) for a, b in bounds]
    np.testing.assert_allclose(np.concatenate(parts), whole, rtol=1e-12, atol=1e-12)


def test_matches_sklearn_standard_scaler_row_by_row():
    rng = np.random.default_rng(4)
    X = rng.normal(size=(60, 3)) * 3 + 1
    sk = StandardScaler()
    rows = []
    for i in range(X.shape[0]):
        if i == 0:
            sk.partial_fit(X[:1])
            rows.append(sk.transform(X[:1]))
        else:
            rows.append(sk.transform(X[i : i + 1]))
            sk.partial_fit(X[i : i + 1])
    expected = np.concatenate(rows)
    got = RecursiveStandardScaler().prequential_transform(X)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)


def test_transform_and_inverse_use_current_statistics():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(40, 2)) * [2.0, 0.5] + [1.0, -3.0]
    scaler = RecursiveStandardScaler().fit(X)
    np.testing.assert_allclose(scaler.transform(X), StandardScaler().fit_transform(X), atol=1e-12)
    np.testing.assert_allclose(scaler.inverse_transform(scaler.transform(X)), X, atol=1e-12)
    # fit resets
    scaler.fit(X[:5])
    assert scaler.n_samples_seen_ == 5


def test_prequential_transform_does_not_modify_input_and_pickles_mid_stream():
    rng = np.random.default_rng(6)
    X = rng.normal(size=(30, 2))
    X_copy = X.copy()
    scaler = RecursiveStandardScaler()
    scaler.prequential_transform(X[:10])
    np.testing.assert_array_equal(X, X_copy)
    clone = pickle.loads(pickle.dumps(scaler))
    np.testing.assert_array_equal(
        scaler.prequential_transform(X[10:]), clone.prequential_transform(X[10:])
    )


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 40),
    cut=st.integers(0, 39),
    seed=st.integers(0, 2**16),
    offset=st.floats(-1e4, 1e4),
)
def test_scaler_has_no_look_ahead(n, cut, seed, offset):
    cut = min(cut, n - 2)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2)) + offset
    X2 = X.copy()
    X2[cut + 1 :] = rng.normal(size=(n - cut - 1, 2)) * 100
    a = RecursiveStandardScaler().prequential_transform(X)
    b = RecursiveStandardScaler().prequential_transform(X2)
    np.testing.assert_array_equal(a[: cut + 1], b[: cut + 1])


# ---------------------------------------------------------------------- LagTransformer
def test_lags_match_make_lagged_after_the_fill():
    series = np.random.default_rng(7).normal(size=50)
    X_ref, y_ref = make_lagged(series, n_lags=4)
    Xt = LagTransformer(n_lags=4).fit_transform(series[:, None])
    np.testing.assert_array_equal(Xt[4:], X_ref)
    np.testing.assert_array_equal(Xt[0], np.zeros(4))
    np.testing.assert_array_equal(Xt[2], [series[1], series[0], 0.0, 0.0])


def test_lags_continue_across_calls_and_chunks():
    rng = np.random.default_rng(8)
    X = rng.normal(size=(30, 2))
    whole = LagTransformer(3, fill_value=-1.0).prequential_transform(X)
    lags = LagTransformer(3, fill_value=-1.0)
    parts = [lags.prequential_transform(X[a:b]) for a, b in [(0, 1), (1, 2), (2, 17), (17, 30)]]
    np.testing.assert_array_equal(np.concatenate(parts), whole)
    # lag-major layout: lag 1 of both features, then lag 2 ...
    np.testing.assert_array_equal(whole[5], np.concatenate([X[4], X[3], X[2]]))
    assert lags.n_samples_seen_ == 30
    np.testing.assert_array_equal(lags.history_, X[-3:])


def test_lag_transform_continues_the_learned_stream_without_learning():
    X = np.arange(10.0)[:, None]
    lags = LagTransformer(2).fit(X[:6])
    np.testing.assert_array_equal(lags.transform(X[6:8]), [[5.0, 4.0], [6.0, 5.0]])
    np.testing.assert_array_equal(lags.transform(X[6:8]), [[5.0, 4.0], [6.0, 5.0]])
    assert lags.n_samples_seen_ == 6


def test_lag_feature_names():
    lags = LagTransformer(2).fit(np.zeros((3, 2)))
    assert list(lags.get_feature_names_out()) == ["x0_lag1", "x1_lag1", "x0_lag2", "x1_lag2"]


def test_lag_rejects_bad_input():
    with pytest.raises(ValueError):
        LagTransformer(n_lags=0).fit(np.zeros((3, 1)))
    lags = LagTransformer(2).fit(np.zeros((3, 1)))
    with pytest.raises(ValueError):
        lags.partial_fit(np.zeros((3, 2)))
    with pytest.raises(ValueError):
        lags.prequential_transform(np.array([[np.nan]]))


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(2, 30),
    cut=st.integers(0, 29),
    n_lags=st.integers(1, 5),
    seed=st.integers(0, 999),
)
def test_lags_have_no_look_ahead(n, cut, n_lags, seed):
    cut = min(cut, n - 2)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 1))
    X2 = X.copy()
    X2[cut + 1 :] += 1.0
    a = LagTransformer(n_lags).prequential_transform(X)
    b = LagTransformer(n_lags).prequential_transform(X2)
    np.testing.assert_array_equal(a[: cut + 1], b[: cut + 1])
