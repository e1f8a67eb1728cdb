"""Hostile inputs for ORFit, the streaming pre-steps and the ABO paper's baselines.

* a warning escalated to an error leaves the estimator exactly as it was;
* inputs at scales ``1e±155`` and ``1e±300`` (squares under- or overflow), degenerate
  parameters (huge length scales, ridges below the rounding level) and duplicate rows
  give the scale-1 answer or a clear ``ValueError`` — never NaN, a raw numpy/LinAlg/
  Overflow error or a silently wrong model;
* ``set_params`` between calls of a stream is honoured exactly or refused with one clear
  ``ValueError`` that names the parameter and says to call ``fit``.

"Exactly as it was" is checked through the pickled bytes of the estimator.
"""

import pickle
import subprocess
import sys
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from sklearn.preprocessing import StandardScaler

from sklearn_orfit import (
    EWRLSRegressor,
    LagTransformer,
    ORFitRegressor,
    QRDRLSRegressor,
    QREWRLSRegressor,
    RecursiveStandardScaler,
    SlidingWindowKRLSRegressor,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit._orfit import SpannedBatchWarning
from _hostile import run_traced

EPS = np.finfo(np.float64).eps
SCALES = [1e155, 1e-155, 1e300, 1e-300]


def _bytes(est):
    """The pickled state in a canonical form (buffers trimmed as after a round trip)."""
    return pickle.dumps(pickle.loads(pickle.dumps(est)))


def _stream(n=20, p=40, *, n_targets=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, rng.normal(size=n if n_targets is None else (n, n_targets))


# ------------------------------------------------------- ORFit: the spanned-batch warning
def _spanned_calls():
    """(name, call) pairs that learn rows spanned by the memory with new labels."""
    X = np.eye(3)
    return [
        ("partial_fit", lambda reg: reg.partial_fit(X, [4.0, 5.0, 6.0])),
        ("learn_one", lambda reg: reg.learn_one(X[0], 7.0)),
        ("prequential_predict", lambda reg: reg.prequential_predict(X, [4.0, 5.0, 6.0])),
        ("fit", lambda reg: reg.fit(np.vstack([X, X]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
    ]


@pytest.mark.parametrize("name, call", _spanned_calls(), ids=[c[0] for c in _spanned_calls()])
def test_orfit_warning_escalated_to_an_error_leaves_the_state(name, call):
    # the warning was issued after the state was committed: with warnings as errors the
    # call raised but n_samples_seen_ had gone 3 → 6
    reg = ORFitRegressor().fit(np.eye(3), [1.0, 2.0, 3.0])
    before = pickle.dumps(reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SpannedBatchWarning):
            call(reg)
    assert pickle.dumps(reg) == before
    assert reg.n_samples_seen_ == 3
    # ignored, the call goes through and leaves the state the default filters leave
    shown = pickle.loads(before)
    with pytest.warns(SpannedBatchWarning):
        call(shown)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call(reg)
    assert _bytes(reg) == _bytes(shown)
    assert reg.n_samples_seen_ > 3 or name == "fit"
    assert_allclose(reg.predict(np.eye(3)), shown.predict(np.eye(3)), rtol=0, atol=0)


# ------------------------------------------------------------ ORFit: scale equivariance
@pytest.mark.parametrize("scale", SCALES)
def test_orfit_eye_at_extreme_scales_interpolates_without_warning(scale):
    # was [0, 0, 0] with a false "spanned" warning: ‖x‖² overflowed (or underflowed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = ORFitRegressor().fit(np.eye(3) * scale, [1, 2, 3])
        assert_allclose(reg.predict(np.eye(3) * scale), [1, 2, 3], rtol=4 * EPS)
        assert_allclose(reg.coef_ * scale, [1, 2, 3], rtol=4 * EPS)
        assert_allclose(reg.singular_values_ / scale, [1, 1, 1], rtol=4 * EPS)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"batch_size": 4},
        {"batch_size": None},
        {"memory_size": 5},
        {"memory_size": 5, "memory_policy": "latest", "batch_size": 3},
        {"memory_size": 3, "memory_policy": "random", "random_state": 0},
        {"memory_size": 0},
    ],
)
@pytest.mark.parametrize("shape", [(20, 40), (12, 30)])
def test_orfit_is_scale_equivariant(scale, params, shape):
    # X → cX: coefficients W/c, the same predictions, singular values times c
    n, p = shape
    X, y = _stream(n, p, seed=1)
    ref = ORFitRegressor(**params).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = ORFitRegressor(**params).fit(X * scale, y)
        y_pred = reg.predict(X * scale)
        preq = ORFitRegressor(**params).prequential_predict(X * scale, y)
    tol = 10 * EPS * max(n, p) * np.abs(y).max()
    assert_allclose(y_pred, ref.predict(X), rtol=0, atol=tol)
    assert_allclose(preq, ORFitRegressor(**params).prequential_predict(X, y), rtol=0, atol=tol)
    assert_allclose(reg.singular_values_ / scale, ref.singular_values_, rtol=1e3 * EPS)
    if params.get("memory_size") is None:
        assert_allclose(y_pred, y, rtol=0, atol=tol)  # every row interpolated


def test_orfit_power_of_two_scale_is_bit_exact():
    # the batch is handled in units of a power of two: scaling X by one changes nothing
    X, y = _stream(15, 25, seed=2)
    for params in ({}, {"batch_size": None}, {"memory_size": 4}):
        ref = ORFitRegressor(**params).fit(X, y)
        for k in (-900, -520, 520, 900):
            reg = ORFitRegressor(**params).fit(np.ldexp(X, k), y)
            assert_array_equal(reg.predict(np.ldexp(X, k)), ref.predict(X))
            assert_array_equal(np.ldexp(reg.coef_, k), ref.coef_)


@pytest.mark.parametrize(
    "X_new, y_new",
    [
        (np.full((1, 4), 1e-155), [1e300]),  # coefficients ≈ 1e455
        (np.full((1, 4), 1.5e308), [1.0]),  # a row norm beyond the float64 range
    ],
)
def test_orfit_overflow_is_a_clear_error_and_changes_nothing(X_new, y_new):
    X, y = _stream(3, 4, seed=3)
    reg = ORFitRegressor().fit(X, y)
    before = pickle.dumps(reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="float64 range"):
            reg.partial_fit(X_new, y_new)
        assert pickle.dumps(reg) == before
        with pytest.raises(ValueError, match="float64 range"):
            reg.prequential_predict(X_new, y_new)
        assert pickle.dumps(reg) == before


# --------------------------------------------------- RecursiveStandardScaler: scale
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


def test_pipeline_with_huge_rows_keeps_learning():
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
    before = _bytes(scaler)
    with pytest.raises(ValueError, match="float64 range"):
        scaler.transform([[-1.7e308]])
    assert _bytes(scaler) == before


def test_scaler_pickled_by_the_previous_version_continues():
    X = _scaler_data(5)
    scaler = RecursiveStandardScaler().fit(X[:30])
    state = scaler.__getstate__()
    old = {k: v for k, v in state.items() if k not in ("_m2s", "_exp", "_scale")}
    old.update(_m2=state["_m2s"] * 4.0 ** state["_exp"], scale_=scaler.scale_)
    restored = RecursiveStandardScaler.__new__(RecursiveStandardScaler)
    restored.__setstate__(old)
    assert_allclose(restored.transform(X[30:]), scaler.transform(X[30:]), rtol=1e-14)
    assert_allclose(restored.prequential_transform(X[30:]),
                    scaler.prequential_transform(X[30:]), rtol=1e-14)


# ------------------------------------------------------------- set_params mid-stream
def _regressor_calls(X, y, *, learn_one=False, predict=False):
    """The calls of a regressor that continue a stream (and predict, if it reads the
    changed parameter)."""
    calls = [
        lambda est: est.partial_fit(X, y),
        lambda est: est.prequential_predict(X, y),
        lambda est: prequential_predict(est, X, y),
    ]
    if learn_one:
        calls.append(lambda est: est.learn_one(X[0], y[0]))
    if predict:
        calls.append(lambda est: est.predict(X))
    return calls


def _assert_refused_then_fit_uses_it(est, make_new, param, calls, fit_data):
    before = _bytes(est)
    for call in calls:
        with pytest.raises(ValueError, match=f"{param} changed.*Call fit"):
            call(est)
        assert _bytes(est) == before
    # fit starts a new stream with the new value
    est.fit(*fit_data)
    _assert_same_state(est, make_new().fit(*fit_data))


def _assert_same_state(a, b):
    """Equal pickled states (in any attribute order)."""
    sa, sb = a.__getstate__(), b.__getstate__()
    assert sa.keys() == sb.keys()
    for key, va in sa.items():
        vb = sb[key]
        if isinstance(va, np.ndarray):
            assert_array_equal(va, vb, err_msg=key)
        else:
            assert pickle.dumps(va) == pickle.dumps(vb), key


@pytest.mark.parametrize(
    "param, value",
    [
        ("memory_size", 2),
        ("memory_size", 50),
        ("memory_policy", "latest"),
        ("batch_size", 5),
        ("rtol", 0.5),
        ("coef_init", np.ones(8)),
        ("random_state", 3),
    ],
)
@pytest.mark.filterwarnings("ignore::sklearn_orfit._orfit.SpannedBatchWarning")
def test_orfit_set_params_mid_stream_is_refused(param, value):
    # every one of them was silently ignored by the next partial_fit
    X, y = _stream(12, 8, seed=4)
    base = {"memory_size": 6, "random_state": 0}
    reg = ORFitRegressor(**base).fit(X[:6], y[:6])
    reg.set_params(**{param: value})
    _assert_refused_then_fit_uses_it(
        reg, lambda: ORFitRegressor(**{**base, param: value}), param,
        _regressor_calls(X[6:], y[6:], learn_one=True), (X, y),
    )


def test_orfit_coef_init_changed_in_place_is_refused():
    X, y = _stream(6, 4, seed=5)
    w0 = np.zeros(4)
    reg = ORFitRegressor(coef_init=w0).fit(X[:3], y[:3])
    reg.partial_fit(X[3:4], y[3:4])  # the same array, unchanged: fine
    w0[0] = 1.0
    with pytest.raises(ValueError, match="coef_init changed.*Call fit"):
        reg.learn_one(X[4], y[4])
    assert reg.n_samples_seen_ == 4


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
        assert _bytes(scaler.set_params(**{param: start})) != _bytes(ref)  # only the param


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
    before = _bytes(lags)
    for call in calls:
        with pytest.raises(ValueError, match=f"{param} changed.*Call fit"):
            call(lags)
        assert _bytes(lags) == before
    params = {"n_lags": 2, param: value}
    assert_array_equal(lags.fit(X[:1]).transform(X[1:5]),
                       LagTransformer(**params).fit(X[:1]).transform(X[1:5]))
    assert_array_equal(lags.fit_transform(X), LagTransformer(**params).fit_transform(X))


# ------------------------------------------------------------------------ SW-KRLS
def _krr(W, y_win, Xq, *, length_scale, alpha):
    """Kernel ridge on the window from scratch, distances in length scales."""
    def kern(A, B):
        D = (A[:, None, :] - B[None, :, :]) / length_scale
        return np.exp(-0.5 * (D**2).sum(-1))
    return kern(Xq, W) @ np.linalg.solve(kern(W, W) + alpha * np.eye(len(W)), y_win)


@pytest.mark.parametrize("length_scale", [1e300, 1e200, 1e-200, 1e-300])
def test_sw_krls_extreme_length_scales(length_scale):
    # 1e300 was a raw OverflowError (1/length_scale²), 1e-300 a ZeroDivisionError
    X, y = _stream(40, 2, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(10, length_scale=length_scale).fit(X, y)
        y_pred = reg.predict(X[-12:])
    if length_scale > 1:  # the all-ones kernel: every prediction the ridge mean
        expected = np.full(12, y[-10:].sum() / (10 + reg.alpha))
    else:  # the identity kernel: y/(1 + α) on the window, 0 elsewhere
        expected = np.r_[0.0, 0.0, y[-10:] / (1 + reg.alpha)]
    # the all-ones kernel is carried with κ(K + αI) = 1 + N/α = 1001: rtol 1e-9
    assert_allclose(y_pred, expected, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("scale", SCALES + [1e160])
def test_sw_krls_is_scale_equivariant(scale):
    # X → cX with length_scale → c·length_scale is the same model (1e160 rows with a
    # fixed length scale made the refactorised inverse NaN)
    # (rounding of X·c and of the kernel, amplified by κ(K + αI) ≤ 1 + N/α = 2001 and
    # 300 steps of the recursion: measured ≤ 5e-11)
    X, y = _stream(300, 2, seed=7)
    ref = SlidingWindowKRLSRegressor(20, length_scale=1.5, alpha=1e-2)
    p_ref = ref.prequential_predict(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(20, length_scale=1.5 * scale, alpha=1e-2)
        p = reg.prequential_predict(X * scale, y)
        assert_allclose(p, p_ref, rtol=0, atol=1e-9)
        assert_allclose(reg.predict(X[:5] * scale), ref.predict(X[:5]), rtol=0, atol=1e-9)


def test_sw_krls_huge_rows_with_a_fixed_length_scale():
    # rows 1e160 apart: the kernel is the identity; was NaN after the first refactorisation
    X, y = _stream(300, 2, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(10, alpha=1e-2).fit(X * 1e160, y)
        y_pred = reg.predict(X[-10:] * 1e160)
    assert_allclose(y_pred, y[-10:] / (1 + 1e-2), rtol=1e-12)


@pytest.mark.parametrize("alpha", [1e-300, 1e-20, 1e-16])
def test_sw_krls_alpha_below_the_rounding_level_is_a_clear_error(alpha):
    # with repeated rows the carried inverse went to ±1e284, then NaN
    X, y = _stream(40, 2, seed=9)
    reg = SlidingWindowKRLSRegressor(20, alpha=alpha)
    for call in (lambda: reg.fit(X, y), lambda: reg.partial_fit(X, y),
                 lambda: reg.prequential_predict(X, y)):
        with pytest.raises(ValueError, match="alpha=.* is below window_size · eps"):
            call()
        assert not [k for k in vars(reg) if k.endswith("_")]


@pytest.mark.parametrize("kind", ["pairs", "five rows", "constant"])
def test_sw_krls_repeated_rows_at_the_smallest_alpha_stay_bounded(kind):
    N = 20
    rng = np.random.default_rng(10)
    X = rng.normal(size=(200, 2))
    if kind == "pairs":
        X = np.repeat(X[:100], 2, axis=0)
    elif kind == "five rows":
        X = np.tile(X[:5], (40, 1))
    else:
        X = np.ones_like(X)
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(N, alpha=N * EPS)
        y_pred = reg.prequential_predict(X, y)
    assert np.isfinite(y_pred).all()
    assert np.abs(y_pred).max() <= 100 * np.abs(y).max()


def test_sw_krls_dual_overflow_is_a_clear_error_and_changes_nothing():
    X, y = _stream(40, 2, seed=11)
    reg = SlidingWindowKRLSRegressor(10, alpha=1e-10).fit(X[:20], y[:20] * 1e300)
    before = _bytes(reg)
    X_new = np.repeat(X[20:22], 2, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="dual coefficients .* overflowed"):
            reg.partial_fit(X_new, [1e308, -1e308, 1e308, -1e308])
    assert _bytes(reg) == before


@pytest.mark.parametrize("param, value", [("window_size", 5), ("window_size", 40),
                                          ("length_scale", 3.0), ("alpha", 1.0)])
def test_sw_krls_set_params_mid_stream_is_refused(param, value):
    # window_size: predictions from a ring read with the wrong length; length_scale and
    # alpha: silently mixed with an inverse built with the old values
    X, y = _stream(60, 2, seed=12)
    base = {"window_size": 20, "length_scale": 1.3, "alpha": 1e-2}
    reg = SlidingWindowKRLSRegressor(**base).fit(X[:30], y[:30])
    reg.set_params(**{param: value})
    calls = _regressor_calls(X[30:], y[30:], predict=True) + [
        lambda est: est.X_window_, lambda est: est.n_window_]
    _assert_refused_then_fit_uses_it(
        reg, lambda: SlidingWindowKRLSRegressor(**{**base, param: value}), param,
        calls, (X, y),
    )


# ------------------------------------------------------------------ QRD-RLS and EW-RLS
def _duplicates(seed=13):
    rng = np.random.default_rng(seed)
    X = np.repeat(rng.normal(size=(30, 3)), 2, axis=0)
    return X, np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda a: QRDRLSRegressor(10, alpha=a), id="qrd"),
        pytest.param(lambda a: QRDRLSRegressor(10, alpha=a, forgetting_factor=0.9), id="qrd-lam"),
        pytest.param(lambda a: EWRLSRegressor(delta=a), id="ewrls"),
        pytest.param(lambda a: EWRLSRegressor(delta=a, forgetting_factor=0.9), id="ewrls-lam"),
    ],
)
@pytest.mark.parametrize("tiny", [5e-324, 1e-300, 1e-100, 1e-20])
@pytest.mark.parametrize("scale", [1.0, 1e300, 1e-300])
def test_baselines_tiny_ridge_on_duplicates_never_nan(make, tiny, scale):
    # EW-RLS went NaN (δ = 5e-324: P = δ⁻¹I = inf; δ = 1e-300 with repeated rows: P·z
    # overflowed) and silently skipped rows whose zᵀPz overflowed; QRD-RLS went inf on
    # coefficients beyond the float64 range. Now: finite, or a clear ValueError that
    # changes nothing.
    X, y = _duplicates()
    X = X * scale
    reg = make(tiny)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            reg.fit(X[:4], y[:4])
        except ValueError as exc:  # a start that is impossible: the parameter is named
            assert "delta=" in str(exc) or "overflowed" in str(exc), exc
            return
        before = _bytes(reg)
        try:
            y_pred = reg.prequential_predict(X[4:], y[4:])
        except ValueError as exc:
            assert "overflowed" in str(exc), exc
            assert _bytes(reg) == before
            return
    assert np.isfinite(y_pred).all() and np.isfinite(reg.coef_).all()


def test_ewrls_delta_whose_inverse_overflows_is_a_clear_error():
    X, y = _stream(10, 3, seed=14)
    reg = EWRLSRegressor(delta=5e-324)
    with pytest.raises(ValueError, match="delta=5e-324 is too small"):
        reg.fit(X, y)
    assert not [k for k in vars(reg) if k.endswith("_")]
    EWRLSRegressor(delta=1e-300).fit(X, y)  # 1/δ representable: accepted


def test_ewrls_rows_too_large_for_the_covariance_form_are_a_clear_error():
    # zᵀPz overflowed: the gain became 0 and the row was skipped silently (or NaN)
    X, y = _stream(20, 3, seed=15)
    reg = EWRLSRegressor().fit(X[:10], y[:10])
    before = _bytes(reg)
    with pytest.raises(ValueError, match="covariance-form recursion overflowed"):
        reg.partial_fit(X[10:] * 1e160, y[10:])
    assert _bytes(reg) == before
    reg.partial_fit(X[10:], y[10:])  # the stream goes on


def test_ewrls_instability_overflow_is_reported_not_nan():
    # the unexcited block of P grows like δ⁻¹λ^(−t): with λ = 0.5 it overflows after
    # ~1016 rows; the call that overflows raises and the estimator keeps its last
    # finite state
    rng = np.random.default_rng(16)
    X = np.zeros((1100, 3))
    X[:, 0] = rng.normal(size=1100)
    reg = EWRLSRegressor(forgetting_factor=0.5).fit(X[:1000], X[:1000, 0])
    assert np.isfinite(reg.inverse_gram_).all() and reg.inverse_gram_[2, 2] > 1e300
    before = _bytes(reg)
    with pytest.raises(ValueError, match="instability of this form"):
        reg.partial_fit(X[1000:], X[1000:, 0])
    assert _bytes(reg) == before


def test_qrd_rls_coefficient_overflow_is_a_clear_error():
    X, y = _stream(20, 3, seed=17)
    reg = QRDRLSRegressor(5, alpha=1e-300).fit(X[:10], y[:10])
    before = _bytes(reg)
    with pytest.raises(ValueError, match="ridge solution overflowed"):
        reg.partial_fit(X[10:] * 1e-155, y[10:] * 1e300)
    assert _bytes(reg) == before


@pytest.mark.parametrize(
    "make, param, value",
    [
        (lambda **p: QRDRLSRegressor(**{"window_size": 8, **p}), "window_size", 4),
        (lambda **p: QRDRLSRegressor(**{"window_size": 8, **p}), "alpha", 1.0),
        (lambda **p: QRDRLSRegressor(**{"window_size": 8, **p}), "forgetting_factor", 0.5),
        (lambda **p: EWRLSRegressor(**p), "forgetting_factor", 0.5),
        (lambda **p: EWRLSRegressor(**p), "delta", 1.0),
    ],
)
def test_baselines_set_params_mid_stream_is_refused(make, param, value):
    # silently ignored (λ, α, δ) or applied to a factor built with the old window
    X, y = _stream(40, 3, seed=18)
    reg = make().fit(X[:20], y[:20])
    reg.set_params(**{param: value})
    _assert_refused_then_fit_uses_it(
        reg, lambda: make(**{param: value}), param, _regressor_calls(X[20:], y[20:]), (X, y)
    )
    assert_allclose(reg.predict(X[:3]), make(**{param: value}).fit(X, y).predict(X[:3]))


def test_sw_krls_memory_mapped_model_continues_without_crashing(tmp_path):
    # joblib.load(mmap_mode="r") gave a read-only inverse that the in-place BLAS update
    # wrote into: a segmentation fault. Run in a subprocess, so that a crash is a failure.
    script = f"""
import joblib, numpy as np
from sklearn_orfit import SlidingWindowKRLSRegressor
rng = np.random.default_rng(0)
X = rng.normal(size=(60, 3)); y = np.sin(X[:, 0])
est = SlidingWindowKRLSRegressor(8).fit(X[:30], y[:30])
joblib.dump(est, {str(tmp_path / "model.joblib")!r})
loaded = joblib.load({str(tmp_path / "model.joblib")!r}, mmap_mode="r")
assert not loaded._Kinv.flags.writeable
loaded.partial_fit(X[30:], y[30:])
est.partial_fit(X[30:], y[30:])
assert np.array_equal(loaded.predict(X[:5]), est.predict(X[:5]))
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]


# ------------------------------------------------------- interruptions of the pre-steps
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
    before = _bytes(est)
    ref = pickle.loads(before)
    getattr(ref, method)(X[30:45])
    after = _bytes(ref)
    probe = pickle.loads(before)
    n_lines = _run_traced(lambda: getattr(probe, method)(X[30:45]), pre.__file__, -1)
    for k in range(1, n_lines + 1):
        est = pickle.loads(before)
        with pytest.raises(KeyboardInterrupt):
            _run_traced(lambda: getattr(est, method)(X[30:45]), pre.__file__, k)
        assert _bytes(est) in (before, after), f"interrupted at line {k}: a state in between"
