"""RecursiveStandardScaler and LagTransformer: streaming contracts and no look-ahead."""

import pickle
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import (
    LagTransformer,
    QREWRLSRegressor,
    RecursiveStandardScaler,
    make_streaming_pipeline,
)
from sklearn_orfit.datasets import make_lagged
from _hostile import run_traced
from _state import canonical_pickle

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


# ------------------------------------------------------------ LagTransformer: horizon
def _lag_oracle(X, n_lags, horizon=1, fill_value=0.0):
    """Plain loops: row t is [x_{t-h}, ..., x_{t-h-n_lags+1}], fill_value before row 0."""
    n, d = X.shape
    out = np.empty((n, n_lags * d))
    for t in range(n):
        row = []
        for k in range(horizon, horizon + n_lags):
            row.extend(X[t - k] if t - k >= 0 else [fill_value] * d)
        out[t] = row
    return out


def _lags_before_horizon(history, X):
    """LagTransformer._lags as it was before ``horizon`` (the regression reference)."""
    L, (b, d) = history.shape[0], X.shape
    E = np.concatenate([history, X])
    windows = np.lib.stride_tricks.sliding_window_view(E[:-1], L, axis=0)
    return np.ascontiguousarray(windows[:, :, ::-1].transpose(0, 2, 1)).reshape(b, L * d)


@pytest.mark.parametrize("n_lags", [1, 2, 5])
@pytest.mark.parametrize("d", [1, 3])
def test_lag_horizon_one_is_the_previous_output_bit_for_bit(n_lags, d):
    X = np.random.default_rng(n_lags * 7 + d).normal(size=(23, d)) * 1e5
    fill = np.full((n_lags, d), -2.5)
    for lags in (LagTransformer(n_lags, fill_value=-2.5),
                 LagTransformer(n_lags, horizon=1, fill_value=-2.5)):
        first = lags.prequential_transform(X[:9])
        assert first.tobytes() == _lags_before_horizon(fill, X[:9]).tobytes()
        assert lags.history_.shape == (n_lags, d)
        history = lags.history_.copy()
        rest = lags.prequential_transform(X[9:])
        assert rest.tobytes() == _lags_before_horizon(history, X[9:]).tobytes()
        assert rest.shape == (14, n_lags * d) and rest.flags.c_contiguous


@pytest.mark.parametrize(
    "n_lags, horizon, d, fill_value",
    [(1, 1, 1, 0.0), (1, 2, 1, 0.0), (3, 2, 1, -1.0), (2, 5, 2, 0.0), (4, 3, 3, 7.5),
     (1, 12, 2, 0.0), (2, 40, 1, 1.0)],
)
def test_lag_horizon_matches_loop_oracle(n_lags, horizon, d, fill_value):
    X = np.random.default_rng(horizon * 10 + n_lags).normal(size=(30, d))
    lags = LagTransformer(n_lags, horizon=horizon, fill_value=fill_value)
    expected = _lag_oracle(X, n_lags, horizon, fill_value)
    np.testing.assert_array_equal(lags.fit_transform(X), expected)
    # the state: the last n_lags + horizon - 1 rows, fill_value before the stream
    M = n_lags + horizon - 1
    padded = np.concatenate([np.full((M, d), fill_value), X])
    np.testing.assert_array_equal(lags.history_, padded[-M:])
    assert lags.history_.shape == (M, d) and lags.n_samples_seen_ == 30
    # transform continues the learned stream (and learns nothing)
    lags = LagTransformer(n_lags, horizon=horizon, fill_value=fill_value).fit(X[:11])
    np.testing.assert_array_equal(lags.transform(X[11:]), expected[11:])
    assert lags.n_samples_seen_ == 11


@pytest.mark.parametrize("n_lags, horizon", [(1, 3), (3, 2), (2, 6)])
def test_lag_horizon_streamed_in_pieces_equals_one_call(n_lags, horizon):
    X = np.random.default_rng(9).normal(size=(40, 2))
    whole = LagTransformer(n_lags, horizon=horizon, fill_value=-1.0).prequential_transform(X)
    for bounds in ([(0, 1), (1, 2), (2, 3), (3, 17), (17, 18), (18, 40)],
                   [(0, 5), (5, 9), (9, 40)],
                   [(i, i + 1) for i in range(40)]):
        lags = LagTransformer(n_lags, horizon=horizon, fill_value=-1.0)
        parts = [lags.prequential_transform(X[a:b]) for a, b in bounds]
        np.testing.assert_array_equal(np.concatenate(parts), whole)
        # partial_fit then transform: the same rows
        lags = LagTransformer(n_lags, horizon=horizon, fill_value=-1.0).partial_fit(X[:3])
        lags.partial_fit(X[3:20])
        np.testing.assert_array_equal(lags.transform(X[20:]), whole[20:])


@pytest.mark.parametrize("n_lags, horizon", [(1, 1), (4, 1), (1, 3), (4, 2), (3, 7)])
def test_lag_horizon_matches_make_lagged_after_the_fill(n_lags, horizon):
    # make_lagged's row i (most recent lag at t = i + n_lags - 1, target series[t + h])
    # is the transformer's row i + n_lags + horizon - 1 with target y = series
    series = np.random.default_rng(n_lags + 10 * horizon).normal(size=60)
    X_ref, y_ref = make_lagged(series, n_lags, horizon=horizon)
    Xt = LagTransformer(n_lags, horizon=horizon).fit_transform(series[:, None])
    start = n_lags + horizon - 1
    np.testing.assert_array_equal(Xt[start:], X_ref)
    np.testing.assert_array_equal(series[start:], y_ref)
    # before it, the lags reach before the series (filled), so the rows are not in X_ref
    assert Xt.shape[0] - start == X_ref.shape[0]
    assert np.all(Xt[start - 1, -1] == 0.0)


def test_lag_horizon_with_exog_columns_matches_make_lagged():
    # exogenous inputs are extra columns of X; the transformer's layout is lag-major,
    # make_lagged's is column by column
    rng = np.random.default_rng(11)
    series, exog = rng.normal(size=50), rng.normal(size=(50, 2))
    n_lags, h = 3, 2
    X_ref, y_ref = make_lagged(series, n_lags, horizon=h, exog=exog)
    Xt = LagTransformer(n_lags, horizon=h).fit_transform(np.column_stack([series, exog]))
    start = n_lags + h - 1
    # (rows, lag, column) -> (rows, column, lag)
    reordered = Xt[start:].reshape(-1, n_lags, 3).transpose(0, 2, 1).reshape(-1, 3 * n_lags)
    np.testing.assert_array_equal(reordered, X_ref)
    np.testing.assert_array_equal(series[start:], y_ref)


def test_lag_horizon_feature_names():
    lags = LagTransformer(2, horizon=3).fit(np.zeros((3, 2)))
    assert list(lags.get_feature_names_out()) == ["x0_lag3", "x1_lag3", "x0_lag4", "x1_lag4"]
    lags = LagTransformer(2).fit(np.zeros((3, 2)))
    assert list(lags.get_feature_names_out()) == ["x0_lag1", "x1_lag1", "x0_lag2", "x1_lag2"]


@pytest.mark.parametrize("horizon", [0, -2, 1.5, "1", None])
def test_lag_rejects_bad_horizon(horizon):
    X = np.zeros((4, 1))
    for call in (lambda e: e.fit(X), lambda e: e.partial_fit(X),
                 lambda e: e.prequential_transform(X), lambda e: e.fit_transform(X)):
        with pytest.raises(ValueError, match="horizon"):
            call(LagTransformer(2, horizon=horizon))


@pytest.mark.parametrize("value", [1, 2, 4])
def test_lag_horizon_set_params_mid_stream_is_refused(value):
    X = np.random.default_rng(12).normal(size=(12, 2))
    lags = LagTransformer(2, horizon=3).fit(X[:4])
    lags.set_params(horizon=value)
    before = pickle.dumps(lags)
    calls = [
        lambda est: est.partial_fit(X[4:8]),
        lambda est: est.transform(X[4:8]),
        lambda est: est.prequential_transform(X[4:8]),
        lambda est: est.get_feature_names_out(),
    ]
    for call in calls:
        with pytest.raises(ValueError, match="horizon changed.*Call fit"):
            call(lags)
        assert pickle.dumps(lags) == before
    # fit starts a new stream with the new horizon
    np.testing.assert_array_equal(
        lags.fit(X[:4]).transform(X[4:]),
        LagTransformer(2, horizon=value).fit(X[:4]).transform(X[4:]),
    )
    assert lags.history_.shape == (2 + value - 1, 2)


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(2, 30),
    cut=st.integers(0, 29),
    n_lags=st.integers(1, 4),
    horizon=st.integers(1, 6),
    seed=st.integers(0, 999),
)
def test_lags_with_horizon_have_no_look_ahead(n, cut, n_lags, horizon, seed):
    # row t uses rows <= t - horizon only: changing rows j > cut leaves rows
    # t <= cut + horizon unchanged, and row cut + horizon + 1 (if any) sees the change
    cut = min(cut, n - 2)
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    X2 = X.copy()
    X2[cut + 1 :] += 1.0
    a = LagTransformer(n_lags, horizon=horizon).prequential_transform(X)
    b = LagTransformer(n_lags, horizon=horizon).prequential_transform(X2)
    np.testing.assert_array_equal(a[: cut + horizon + 1], b[: cut + horizon + 1])
    if cut + horizon + 1 < n:
        assert not np.array_equal(a[cut + horizon + 1], b[cut + horizon + 1])


# ------------------------------------------------------------------ hostile inputs
# RecursiveStandardScaler at scales whose squares under- or overflow; set_params
# mid-stream honoured exactly (scaler) or refused by every call (LagTransformer);
# an interrupt at any line of preprocessing.py leaves the step as it was.


def _scaled_numpy_statistics(X):
    """Mean and standard deviation of each column, computed on X / max|X| (no squares of
    huge or tiny numbers)."""
    m = np.abs(X).max(axis=0)
    Xs = X / m
    return Xs.mean(axis=0) * m, Xs.std(axis=0) * m


def _scaler_data(seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(60, 3)) * [1.0, 2.0, 0.5] + [0.0, 5.0, -2.0]


@pytest.mark.parametrize("scale", [1e155, 1e-155, 1e160, 1e300, 1e-300, 2.0**-1060])
def test_scaler_statistics_at_extreme_scales(scale):
    # scale_ was NaN at 1e155 (the squared deviations overflowed) and 1 (a "constant"
    # feature) at 1e-300 (they underflowed)
    X = _scaler_data() * scale
    X0 = X / scale  # the rows as represented (2^-1060: subnormal, 14 bits)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        scaler = RecursiveStandardScaler().fit(X)
        halves = RecursiveStandardScaler().partial_fit(X[:25]).partial_fit(X[25:])
        Xt = scaler.transform(X)
        X_back = scaler.inverse_transform(Xt)
        X_preq = RecursiveStandardScaler().prequential_transform(X)
    mean, std = _scaled_numpy_statistics(X)
    tol = 1e3 * EPS
    assert_allclose(scaler.mean_, mean, rtol=tol)
    assert_allclose(scaler.scale_, std, rtol=tol)
    assert_allclose(halves.scale_, std, rtol=tol)
    # the standardised rows do not depend on the scale: StandardScaler at scale 1
    assert_allclose(Xt, StandardScaler().fit_transform(X0), rtol=0, atol=tol * 10)
    assert_allclose(X_back, X, rtol=tol, atol=4 * 2.0**-1074)  # subnormal results: ±ulp
    expected = RecursiveStandardScaler().prequential_transform(X0)
    # rows 0 and 1 have a constant past (scale 1): they are x − mean, in the units of X
    assert_allclose(X_preq[2:], expected[2:], rtol=0, atol=tol * 10)
    assert_allclose(X_preq[1], expected[1] * scale, rtol=tol)
    assert np.all(np.isfinite(scaler.scale_)) and np.all(scaler.scale_ != 1.0)


@pytest.mark.parametrize("scale", [1e100, 1e150, 1e-150])
def test_scaler_matches_standard_scaler_where_its_squares_are_representable(scale):
    X = _scaler_data(1) * scale
    ours, theirs = RecursiveStandardScaler().fit(X), StandardScaler().fit(X)
    for name in ("mean_", "var_", "scale_"):
        assert_allclose(getattr(ours, name), getattr(theirs, name), rtol=1e-13)


def test_scaler_is_unchanged_at_ordinary_scales_and_exact_under_powers_of_two():
    # the units 2^e are an exact rescaling: X·2^k gives the same standardised rows
    X = _scaler_data(2)
    ref = RecursiveStandardScaler()
    out = np.concatenate([ref.prequential_transform(X[:20]), ref.prequential_transform(X[20:])])
    for k in (-1000, -600, 600, 1000):
        scaler = RecursiveStandardScaler()
        Xk = np.ldexp(X, k)
        got = np.concatenate([scaler.prequential_transform(Xk[:20]),
                              scaler.prequential_transform(Xk[20:])])
        assert_array_equal(got[2:], out[2:])
        assert_array_equal(scaler.scale_, np.ldexp(ref.scale_, k))
        assert_array_equal(scaler.mean_, np.ldexp(ref.mean_, k))


def test_scaler_no_look_ahead_across_extreme_magnitudes():
    # the units of a row come from the rows before it: a later row 1e300 times larger
    # does not change an earlier output, bit for bit
    rng = np.random.default_rng(3)
    X = rng.normal(size=(30, 2)) * 1e-150
    X2 = X.copy()
    X2[20:] *= 1e300
    a = RecursiveStandardScaler().prequential_transform(X)
    b = RecursiveStandardScaler().prequential_transform(X2)
    assert_array_equal(a[:20], b[:20])
    assert np.isfinite(b).all()


def test_scaler_with_huge_rows_keeps_a_pipeline_learning():
    # 1e160 rows made scale_ NaN, and every later prediction of the pipeline constant
    rng = np.random.default_rng(4)
    X = rng.normal(size=(80, 3))
    y = X @ [1.0, -2.0, 0.5]
    preds = []
    for scale in (1.0, 1e160):
        pipe = make_streaming_pipeline(RecursiveStandardScaler(), QREWRLSRegressor(10))
        preds.append(pipe.prequential_predict(X * scale, y))
    assert np.isfinite(preds[1]).all()
    # once the window has forgotten rows 0 and 1 (scaled by 1: x − mean, in the units
    # of X), the standardised stream is the same at both scales
    assert_allclose(preds[1][15:], preds[0][15:], rtol=1e-9, atol=1e-9)
    assert np.std(preds[1][40:]) > 0.5


def test_scaler_output_beyond_the_float64_range_is_a_clear_error():
    scaler = RecursiveStandardScaler(with_std=False).fit([[1.5e308], [1.6e308]])
    before = canonical_pickle(scaler)
    with pytest.raises(ValueError, match="float64 range"):
        scaler.transform([[-1.7e308]])
    assert canonical_pickle(scaler) == before


@pytest.mark.parametrize("param, value", [("with_mean", False), ("with_std", False)])
def test_scaler_set_params_mid_stream_is_honoured_exactly(param, value):
    # the statistics do not depend on with_mean/with_std: a change applies to every later
    # output as if the stream had been learned with it (scale_ was left at ones after
    # with_std went False → True, and was stale the other way)
    X = _scaler_data(6)
    for start, new in ((value, not value), (not value, value)):
        scaler = RecursiveStandardScaler(**{param: start})
        scaler.prequential_transform(X[:20])
        scaler.set_params(**{param: new})
        ref = RecursiveStandardScaler(**{param: new})
        ref.prequential_transform(X[:20])
        assert_array_equal(scaler.transform(X), ref.transform(X))
        assert_array_equal(scaler.scale_, ref.scale_)
        assert_array_equal(scaler.inverse_transform(X), ref.inverse_transform(X))
        assert_array_equal(scaler.prequential_transform(X[20:]), ref.prequential_transform(X[20:]))
        assert canonical_pickle(scaler.set_params(**{param: start})) != canonical_pickle(ref)  # only the param


@pytest.mark.parametrize("param, value", [("n_lags", 3), ("n_lags", 1), ("fill_value", 5.0)])
def test_lag_set_params_mid_stream_is_refused(param, value):
    # n_lags: a raw "window shape cannot be larger than input array shape" from transform,
    # and a silently resized history from partial_fit; fill_value: silently ignored
    X = _scaler_data(7)
    lags = LagTransformer(n_lags=2).fit(X[:1])
    lags.set_params(**{param: value})
    calls = [
        lambda est: est.partial_fit(X[1:5]),
        lambda est: est.transform(X[1:5]),
        lambda est: est.prequential_transform(X[1:5]),
        lambda est: est.get_feature_names_out(),
    ]
    before = canonical_pickle(lags)
    for call in calls:
        with pytest.raises(ValueError, match=f"{param} changed.*Call fit"):
            call(lags)
        assert canonical_pickle(lags) == before
    params = {"n_lags": 2, param: value}
    assert_array_equal(lags.fit(X[:1]).transform(X[1:5]),
                       LagTransformer(**params).fit(X[:1]).transform(X[1:5]))
    assert_array_equal(lags.fit_transform(X), LagTransformer(**params).fit_transform(X))


def _run_traced(call, filename, k):
    return run_traced(call, k, KeyboardInterrupt, filename)


@pytest.mark.parametrize(
    "make, method",
    [
        (lambda: RecursiveStandardScaler(), "partial_fit"),
        (lambda: RecursiveStandardScaler(), "prequential_transform"),
        (lambda: RecursiveStandardScaler(), "fit"),
        (lambda: LagTransformer(2), "partial_fit"),
        (lambda: LagTransformer(2), "prequential_transform"),
        (lambda: LagTransformer(2), "fit_transform"),
    ],
)
def test_pre_step_interrupted_anywhere_changes_nothing(make, method):
    # an interrupt between two of the commit's assignments left n_samples_seen_ (or
    # history_) of one call with the statistics of another
    import sklearn_orfit.preprocessing as pre

    X = _scaler_data(19)
    est = make().partial_fit(X[:30])
    before = canonical_pickle(est)
    ref = pickle.loads(before)
    getattr(ref, method)(X[30:45])
    after = canonical_pickle(ref)
    probe = pickle.loads(before)
    n_lines = _run_traced(lambda: getattr(probe, method)(X[30:45]), pre.__file__, -1)
    for k in range(1, n_lines + 1):
        est = pickle.loads(before)
        with pytest.raises(KeyboardInterrupt):
            _run_traced(lambda: getattr(est, method)(X[30:45]), pre.__file__, k)
        assert canonical_pickle(est) in (before, after), f"interrupted at line {k}: a state in between"


@pytest.mark.parametrize("scale", [1e-300, 1.0, 1e300])
@pytest.mark.parametrize("with_mean, with_std", [(True, True), (False, True), (True, False)])
def test_transform_one_equals_transform(scale, with_mean, with_std):
    """The one-row path scales a row exactly as ``transform`` does (every scale), with
    cheap checks that still refuse a wrong width, NaN and an unfitted scaler."""
    from sklearn.exceptions import NotFittedError

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3)) * scale + 5 * scale
    scaler = RecursiveStandardScaler(with_mean=with_mean, with_std=with_std).fit(X)
    for x in rng.normal(size=(5, 3)) * scale:
        assert_array_equal(scaler.transform_one(x), scaler.transform(x[None, :])[0])
    with pytest.raises(ValueError, match="one row of 3 features"):
        scaler.transform_one(np.ones(2))
    with pytest.raises(ValueError, match="NaN"):
        scaler.transform_one(np.array([1.0, np.nan, 0.0]))
    with pytest.raises(NotFittedError):
        RecursiveStandardScaler().transform_one(np.ones(3))
