"""The ABO paper's baselines: SW-KRLS, QRD-RLS and covariance-form EW-RLS.

Each recursion is checked, at every step, against its from-scratch oracle:

* SW-KRLS — kernel ridge regression on the window, ``k(x)ᵀ (K + αI)⁻¹ y``;
* QRD-RLS — ``numpy.linalg.lstsq`` on ``[W½X; √αI]``, ``[W½Y; 0]``;
* EW-RLS — ``(Σ λ^(t−i) z_i z_iᵀ + λ^t δ I)⁻¹ Σ λ^(t−i) z_i y_i``, while well conditioned.

The tolerance is ``1e-9`` relative at every step, applied only while the oracle is well
conditioned (``κ ≤ 1e6``, asserted): rounding errors of the recursions grow with the
conditioning (the QRD-RLS downdate loses about ``1/ρ²`` — see its Notes — and errors
accumulate without correction), so a fixed bound is meaningful only on a controlled stream.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.utils.estimator_checks import parametrize_with_checks
from threadpoolctl import threadpool_limits

from sklearn_orfit import (
    EWRLSRegressor,
    QRDRLSRegressor,
    SlidingWindowKRLSRegressor,
    prequential_predict,
)
from sklearn_orfit._streaming._base import expected_failed_checks
from _hostile import gaussian_stream
from _state import assert_same_state, canonical_pickle

RTOL = 1e-9


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # the oracles solve hundreds of tiny dense systems: BLAS threads only add overhead
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _rel_err(a, b):
    return np.linalg.norm(np.asarray(a) - np.asarray(b)) / max(np.linalg.norm(b), 1e-300)


def _tol(kappa):
    assert kappa <= 1e6, f"the oracle is too ill-conditioned for a fixed bound: {kappa:.3g}"
    return RTOL


# ---------------------------------------------------------------------------- oracles
def _krr_oracle(X_win, Y_win, X_query, *, length_scale, alpha):
    """Kernel ridge on the window, from scratch (direct differences, dense solve)."""
    if X_win.shape[0] == 0:
        return np.zeros((X_query.shape[0],) + Y_win.shape[1:]), 1.0
    sq = ((X_win[:, None, :] - X_win[None, :, :]) ** 2).sum(-1)
    A = np.exp(-sq / (2 * length_scale**2)) + alpha * np.eye(X_win.shape[0])
    sq_q = ((X_query[:, None, :] - X_win[None, :, :]) ** 2).sum(-1)
    k = np.exp(-sq_q / (2 * length_scale**2))
    return k @ np.linalg.solve(A, Y_win), np.linalg.cond(A)


def _ridge_oracle(X_win, Y_win, *, lam, alpha):
    """lstsq([W½X; √αI], [W½Y; 0]) with w_i = λ^(n−1−i), oldest first."""
    n, d = X_win.shape
    sw = np.sqrt(lam) ** np.arange(n - 1, -1, -1)
    A = np.vstack([X_win * sw[:, None], np.sqrt(alpha) * np.eye(d)])
    B = np.concatenate([Y_win * sw.reshape((n,) + (1,) * (Y_win.ndim - 1)),
                        np.zeros((d,) + Y_win.shape[1:])])
    return np.linalg.lstsq(A, B, rcond=None)[0], np.linalg.cond(A)


def _ewrls_oracle(X_hist, Y_hist, *, lam, delta):
    """(Σ λ^(t−i) z_i z_iᵀ + λ^t δ I)⁻¹ Σ λ^(t−i) z_i y_i over the whole history."""
    t, d = X_hist.shape
    w = lam ** np.arange(t - 1, -1, -1)
    S = (X_hist * w[:, None]).T @ X_hist + lam**t * delta * np.eye(d)
    return np.linalg.solve(S, (X_hist * w[:, None]).T @ Y_hist), np.linalg.cond(S)


def _stream(n, d, *, n_targets=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d,) if n_targets is None else (d, n_targets))
    noise = rng.normal(size=(n,) if n_targets is None else (n, n_targets))
    y = np.sin(X @ W) + X @ W + 0.05 * noise
    return X, y


# ------------------------------------------------------------------ scikit-learn API
# scikit-learn's sample-weight equivalence check: an expected failure of windowed or
# forgetting models, with the reason (sklearn_orfit._streaming._base.expected_failed_checks)
@parametrize_with_checks(
    [SlidingWindowKRLSRegressor(), QRDRLSRegressor(), EWRLSRegressor()],
    expected_failed_checks=expected_failed_checks,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------------- SW-KRLS
@pytest.mark.parametrize("window_size", [1, 6, 25, 500])
@pytest.mark.parametrize("n_targets", [None, 2])
def test_sw_krls_matches_kernel_ridge_at_every_step(window_size, n_targets):
    s, alpha = 0.9, 1e-2
    X, y = _stream(120, 3, n_targets=n_targets)
    reg = SlidingWindowKRLSRegressor(window_size, length_scale=s, alpha=alpha)
    y_pred = reg.prequential_predict(X, y)
    for t in range(X.shape[0]):
        lo = max(0, t - window_size)
        expected, kappa = _krr_oracle(X[lo:t], y[lo:t], X[t : t + 1], length_scale=s, alpha=alpha)
        assert _rel_err(y_pred[t], expected[0]) <= _tol(kappa) or np.allclose(
            y_pred[t], expected[0], rtol=0, atol=1e-14
        ), t
    # the state after the last row: window, inverse and dual coefficients
    n = min(window_size, X.shape[0])
    assert reg.n_window_ == n
    assert_array_equal(reg.X_window_, X[-n:])
    assert_array_equal(reg.y_window_, y[-n:])
    sq = ((X[-n:, None, :] - X[None, -n:, :]) ** 2).sum(-1)
    A = np.exp(-sq / (2 * s**2)) + alpha * np.eye(n)
    assert _rel_err(reg.inverse_kernel_, np.linalg.inv(A)) <= _tol(np.linalg.cond(A))
    assert _rel_err(reg.dual_coef_, np.linalg.solve(A, y[-n:])) <= _tol(np.linalg.cond(A))
    assert reg.n_refactorizations_ == 0


def test_sw_krls_predict_is_kernel_ridge_on_window():
    X, y = _stream(80, 2, seed=1)
    reg = SlidingWindowKRLSRegressor(15, length_scale=0.5, alpha=1e-3).fit(X, y)
    Xq = np.random.default_rng(2).normal(size=(7, 2))
    expected, kappa = _krr_oracle(X[-15:], y[-15:], Xq, length_scale=0.5, alpha=1e-3)
    assert _rel_err(reg.predict(Xq), expected) <= _tol(kappa)


def test_sw_krls_no_drift_on_a_long_stream():
    # 3,000 Schur downdates/growths; the error must stay at the rounding level
    X, y = _stream(3000, 2, seed=3)
    reg = SlidingWindowKRLSRegressor(10, length_scale=1.0, alpha=1e-2).fit(X, y)
    n = 10
    sq = ((X[-n:, None, :] - X[None, -n:, :]) ** 2).sum(-1)
    A = np.exp(-sq / 2) + 1e-2 * np.eye(n)
    assert _rel_err(reg.inverse_kernel_, np.linalg.inv(A)) <= _tol(np.linalg.cond(A))


# ------------------------------------------------------------------------- QRD-RLS
@pytest.mark.parametrize("window_size", [1, 5, 40, 500])
@pytest.mark.parametrize("forgetting_factor", [1.0, 0.9])
@pytest.mark.parametrize("n_targets", [None, 2])
def test_qrd_rls_matches_ridge_lstsq_at_every_step(window_size, forgetting_factor, n_targets):
    alpha = 1e-2
    X, y = _stream(100, 4, n_targets=n_targets, seed=4)
    reg = QRDRLSRegressor(window_size, alpha=alpha, forgetting_factor=forgetting_factor)
    for t in range(X.shape[0]):
        reg.partial_fit(X[t : t + 1], y[t : t + 1])
        lo = max(0, t + 1 - window_size)
        expected, kappa = _ridge_oracle(X[lo : t + 1], y[lo : t + 1], lam=forgetting_factor,
                                        alpha=alpha)
        assert _rel_err(reg.coef_, expected) <= _tol(kappa), t
    assert reg.n_window_ == min(window_size, X.shape[0])
    assert reg.n_refactorizations_ == 0


def test_qrd_rls_prequential_equals_predict_then_learn():
    X, y = _stream(60, 3, seed=5)
    a = QRDRLSRegressor(8, forgetting_factor=0.95)
    b = QRDRLSRegressor(8, forgetting_factor=0.95)
    y_pred = prequential_predict(a, X, y)
    expected = [0.0]
    b.partial_fit(X[:1], y[:1])
    for t in range(1, X.shape[0]):
        expected.append(b.predict(X[t : t + 1])[0])
        b.partial_fit(X[t : t + 1], y[t : t + 1])
    assert_allclose(y_pred, expected, rtol=1e-13, atol=1e-15)
    assert_allclose(a.coef_, b.coef_, rtol=1e-13)


def test_qrd_rls_refactorizes_when_the_downdate_rounds_to_indefinite():
    # rows along distinct axes, window 2, negligible ridge: the leaving row alone carries
    # its direction, so ρ² = α/(1 + α) rounds to 0 and the window is refactorised
    d, alpha = 6, 1e-30
    X = np.vstack([np.eye(d)] * 3)
    y = np.arange(X.shape[0], dtype=float)
    reg = QRDRLSRegressor(2, alpha=alpha).fit(X, y)
    assert reg.n_refactorizations_ > 0
    expected, _ = _ridge_oracle(X[-2:], y[-2:], lam=1.0, alpha=alpha)
    assert_allclose(reg.coef_, expected, rtol=1e-12)


# -------------------------------------------------------------------------- EW-RLS
@pytest.mark.parametrize("forgetting_factor", [1.0, 0.97])
@pytest.mark.parametrize("n_targets", [None, 3])
def test_ewrls_matches_closed_form_while_well_conditioned(forgetting_factor, n_targets):
    delta = 1e-1
    X, y = _stream(150, 5, n_targets=n_targets, seed=6)
    reg = EWRLSRegressor(forgetting_factor=forgetting_factor, delta=delta)
    y_pred = reg.prequential_predict(X, y)
    reg_steps = EWRLSRegressor(forgetting_factor=forgetting_factor, delta=delta)
    for t in range(X.shape[0]):
        reg_steps.partial_fit(X[t : t + 1], y[t : t + 1])
        expected, kappa = _ewrls_oracle(X[: t + 1], y[: t + 1], lam=forgetting_factor,
                                        delta=delta)
        assert _rel_err(reg_steps.coef_, expected) <= _tol(kappa), t
        assert _rel_err(reg_steps.inverse_gram_, np.linalg.inv(
            (X[: t + 1] * (forgetting_factor ** np.arange(t, -1, -1))[:, None]).T @ X[: t + 1]
            + forgetting_factor ** (t + 1) * delta * np.eye(5))) <= _tol(kappa), t
    # the prequential path is the same recursion, bit for bit
    assert_array_equal(reg.coef_, reg_steps.coef_)
    assert_array_equal(y_pred[0], np.zeros_like(y_pred[0]))


def test_ewrls_is_not_protected_against_its_instability():
    # Inputs confined to the first two axes of R⁴: the unexcited block of P is exactly
    # δ⁻¹ λ^(−t) I — the covariance form blows up there, and the estimator must not hide
    # it (no clipping, no reset, no symmetrisation).
    rng = np.random.default_rng(7)
    lam, delta, n = 0.9, 1e-2, 200
    X = np.zeros((n, 4))
    X[:, :2] = rng.normal(size=(n, 2))
    reg = EWRLSRegressor(forgetting_factor=lam, delta=delta).fit(X, X[:, 0])
    assert_allclose(np.diag(reg.inverse_gram_)[2:], lam ** (-n) / delta, rtol=1e-12)
    assert np.diag(reg.inverse_gram_)[2] > 1e10


# ------------------------------------------------------------- streaming contract
ESTIMATORS = [
    pytest.param(lambda: SlidingWindowKRLSRegressor(7, length_scale=1.3), id="sw-krls"),
    pytest.param(lambda: QRDRLSRegressor(7, forgetting_factor=0.9), id="qrd-rls"),
    pytest.param(lambda: EWRLSRegressor(forgetting_factor=0.98), id="ewrls"),
]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_pickling_mid_stream_equals_uninterrupted(make):
    X, y = _stream(90, 3, n_targets=2, seed=8)
    whole = make()
    y_whole = np.concatenate([whole.prequential_predict(X[:40], y[:40]),
                              whole.prequential_predict(X[40:], y[40:])])
    first = make()
    y_first = first.prequential_predict(X[:40], y[:40])
    resumed = pickle.loads(pickle.dumps(first))
    y_second = resumed.prequential_predict(X[40:], y[40:])
    assert_array_equal(np.concatenate([y_first, y_second]), y_whole)
    assert_array_equal(resumed.predict(X[:5]), whole.predict(X[:5]))


@pytest.mark.parametrize("make", ESTIMATORS)
def test_chunking_and_fit_do_not_change_the_result(make):
    X, y = _stream(70, 3, seed=9)
    one = make()
    y_one = one.prequential_predict(X, y)
    chunked = make()
    cuts = [0, 1, 2, 9, 30, 31, 70]
    y_chunked = np.concatenate(
        [chunked.prequential_predict(X[a:b], y[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    )
    assert_allclose(y_chunked, y_one, rtol=1e-12, atol=1e-14)
    fitted = make().fit(X[:50], y[:50])
    refitted = make().fit(X[:20], y[:20]).fit(X[:50], y[:50])  # fit resets
    streamed = make()
    for t in range(50):
        streamed.partial_fit(X[t : t + 1], y[t : t + 1])
    assert_allclose(fitted.predict(X), refitted.predict(X), rtol=0, atol=0)
    assert_allclose(fitted.predict(X), streamed.predict(X), rtol=1e-12, atol=1e-14)
    assert fitted.n_samples_seen_ == 50


@pytest.mark.parametrize("make", ESTIMATORS)
def test_no_look_ahead(make):
    X, y = _stream(40, 2, seed=10)
    y_pred = make().prequential_predict(X, y)
    X2, y2 = X.copy(), y.copy()
    X2[25:] += 100.0
    y2[24:] -= 50.0  # y_t itself may not influence ŷ_t
    y_pred2 = make().prequential_predict(X2, y2)
    assert_array_equal(y_pred2[:25], y_pred[:25])


@pytest.mark.parametrize("make", ESTIMATORS)
def test_bad_input_is_rejected_atomically(make):
    X, y = _stream(30, 3, seed=11)
    reg = make().fit(X[:20], y[:20])
    before = pickle.loads(pickle.dumps(reg))
    X_nan = X[20:].copy()
    X_nan[5, 1] = np.nan
    y_inf = y[20:].copy()
    y_inf[3] = np.inf
    bad_calls = [
        lambda: reg.partial_fit(X_nan, y[20:]),
        lambda: reg.prequential_predict(X[20:], y_inf),
        lambda: reg.partial_fit(X[20:, :2], y[20:]),
        lambda: reg.partial_fit(X[20:], np.c_[y[20:], y[20:]]),
        lambda: reg.partial_fit(X[20:], y[21:]),
        lambda: reg.fit(X_nan, y[20:]),
    ]
    for call in bad_calls:
        with pytest.raises(ValueError):
            call()
        assert_same_state(reg, before, pickled=True)
    # and the stream continues as if nothing happened
    assert_array_equal(reg.prequential_predict(X[20:], y[20:]),
                       before.prequential_predict(X[20:], y[20:]))


@pytest.mark.parametrize("make", ESTIMATORS)
def test_inputs_are_not_modified(make):
    X, y = _stream(25, 3, seed=12)
    X0, y0 = X.copy(), y.copy()
    reg = make()
    reg.prequential_predict(X, y)
    reg.predict(X)
    assert_array_equal(X, X0)
    assert_array_equal(y, y0)


@pytest.mark.parametrize("make", ESTIMATORS)
def test_multi_target_equals_one_target_at_a_time(make):
    X, Y = _stream(50, 3, n_targets=2, seed=13)
    Y_pred = make().prequential_predict(X, Y)
    for j in range(2):
        assert_allclose(Y_pred[:, j], make().prequential_predict(X, Y[:, j]), rtol=1e-12,
                        atol=1e-14)


# ------------------------------------------------------------------ hostile inputs
# tiny ridges, duplicate rows and rows at 1e±300 give a finite model or a clear
# ValueError that changes nothing (set_params mid-stream: tests/test_contracts.py).


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
        before = canonical_pickle(reg)
        try:
            y_pred = reg.prequential_predict(X[4:], y[4:])
        except ValueError as exc:
            assert "overflowed" in str(exc), exc
            assert canonical_pickle(reg) == before
            return
    assert np.isfinite(y_pred).all() and np.isfinite(reg.coef_).all()


def test_ewrls_delta_whose_inverse_overflows_is_a_clear_error():
    X, y = gaussian_stream(10, 3, seed=14)
    reg = EWRLSRegressor(delta=5e-324)
    with pytest.raises(ValueError, match="delta=5e-324 is too small"):
        reg.fit(X, y)
    assert not [k for k in vars(reg) if k.endswith("_")]
    EWRLSRegressor(delta=1e-300).fit(X, y)  # 1/δ representable: accepted


def test_ewrls_rows_too_large_for_the_covariance_form_are_a_clear_error():
    # zᵀPz overflowed: the gain became 0 and the row was skipped silently (or NaN)
    X, y = gaussian_stream(20, 3, seed=15)
    reg = EWRLSRegressor().fit(X[:10], y[:10])
    before = canonical_pickle(reg)
    with pytest.raises(ValueError, match="covariance-form recursion overflowed"):
        reg.partial_fit(X[10:] * 1e160, y[10:])
    assert canonical_pickle(reg) == before
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
    before = canonical_pickle(reg)
    with pytest.raises(ValueError, match="instability of this form"):
        reg.partial_fit(X[1000:], X[1000:, 0])
    assert canonical_pickle(reg) == before


def test_qrd_rls_coefficient_overflow_is_a_clear_error():
    X, y = gaussian_stream(20, 3, seed=17)
    reg = QRDRLSRegressor(5, alpha=1e-300).fit(X[:10], y[:10])
    before = canonical_pickle(reg)
    with pytest.raises(ValueError, match="ridge solution overflowed"):
        reg.partial_fit(X[10:] * 1e-155, y[10:] * 1e300)
    assert canonical_pickle(reg) == before
