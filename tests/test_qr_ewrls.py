"""QREWRLSRegressor against the from-scratch oracle (lstsq on the weighted window), at every step."""

import copy
import pickle
from functools import lru_cache

import numpy as np
import pytest
from _oracle import abo_features as _abo_features
from _oracle import augmented_ridge, prequential_oracle, window_lstsq
from _state import assert_same_state

from sklearn_orfit import QREWRLSRegressor, prequential_predict

EPS = np.finfo(np.float64).eps
N = 20
N_STEPS = 2000
# per-step bound, relative to max|ŷ|: 1e-9, or the window's condition number times a
# solver constant where that is larger (only near the interpolation threshold D = N)
KAPPA_FACTOR = {"auto": 100 * EPS, "svd": 100 * EPS, "givens": 1e-12}


def abo_features(D, n_steps=N_STEPS):
    return _abo_features(D, n_steps)


@lru_cache(maxsize=None)
def oracle(D, lam, alpha, n_steps=N_STEPS):
    Z, y = abo_features(D, n_steps)
    return prequential_oracle(Z, y, window_size=N, forgetting_factor=lam, alpha=alpha)


def assert_matches_oracle(y_pred, o_pred, kappa, solver):
    y_pred = y_pred.reshape(o_pred.shape)
    scale = np.abs(o_pred).max()
    tol = np.maximum(1e-9, KAPPA_FACTOR[solver] * kappa)[:, None] * scale
    err = np.abs(y_pred - o_pred)
    worst = np.argmax((err / tol).max(axis=1))
    assert np.all(err <= tol), (
        f"step {worst}: |ŷ − oracle| = {err[worst].max():.3e} > {tol[worst, 0]:.3e} "
        f"(κ = {kappa[worst]:.3e}, max|ŷ| = {scale:.3e})"
    )


# The default run's streams at the widest D (the 2000-step ones run with -m slow):
# * D = 8192, 600 steps: past what that width alone exercises, a call of more than 256
#   rows learned in pieces (_CALL_NUMBERS / D rows; Givens), more than one 512-row block
#   on the orthogonal route (_BLOCK_NUMBERS / D; svd) and the band of the dual route
#   summed over two column slices (_BAND_COLUMNS = 4096; auto). A fault in any of the
#   three fails at 600 steps as at 2000 (checked by breaking each: steps 497-546), and
#   none of them is reached at D <= 1024.
# * D = 1024, 1000 steps (50 windows): at N = 20 these routes carry nothing from one
#   window to the next but the window (the from-scratch batch routes) and the Givens
#   factor, whose drift the probes refresh; nothing is triggered by a count of rows. The
#   windows are well conditioned (κ <= 19) and every solver stays within 1e-5 of the
#   bound over both halves of the 2000 steps, the second no worse than the first. The
#   long stream past the interpolation threshold keeps its 2000 steps at D = 64, and at
#   D = 20, the only width that catches the Givens refresh disabled (worst step: 1806).
WIDE_STEPS = {1024: 1000, 8192: 600}


def _oracle_cases():
    # At D = 8192 an oracle of 2000 steps costs ~6 s of CPU and a stream up to 10 s: the
    # default run checks that width once, with forgetting (lambda = 0.9, alpha = 0), on
    # every solver, on WIDE_STEPS rows; lambda = 1 and the ridge at that width are in the
    # slow set (python -m pytest -m slow), and guarded in the default run at D = 64 and
    # 1024 (D > N as well)
    for D in [2, 8, 20, 64, 1024, 8192]:
        for lam in [1.0, 0.9]:
            for alpha in [0.0, 1e-2]:
                for solver in ["auto", "givens", "svd"]:
                    yield pytest.param(D, lam, alpha, solver, N_STEPS,
                                       id=f"{D}-{lam}-{alpha}-{solver}",
                                       marks=[pytest.mark.slow] if D in WIDE_STEPS else [])
                    if D == 1024 or (D == 8192 and (lam, alpha) == (0.9, 0.0)):
                        n = WIDE_STEPS[D]
                        yield pytest.param(D, lam, alpha, solver, n,
                                           id=f"{D}-{lam}-{alpha}-{solver}-{n}steps")


@pytest.mark.parametrize("D, lam, alpha, solver, n_steps", list(_oracle_cases()))
def test_prequential_matches_oracle(D, lam, alpha, solver, n_steps):
    if solver == "svd" and D == 8192 and (lam, alpha) != (0.9, 0.0):
        pytest.skip("the orthogonal reference route is checked once at this width")
    Z, y = abo_features(D, n_steps)
    o_pred, kappa, o_beta = oracle(D, lam, alpha, n_steps)
    reg = QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha, solver=solver)
    y_pred = prequential_predict(reg, Z, y)
    assert y_pred.shape == y.shape
    assert_matches_oracle(y_pred, o_pred, kappa, solver)
    scale = np.abs(o_beta).max()
    np.testing.assert_allclose(reg.coef_, o_beta[:, 0], atol=1e-9 * max(1, kappa[-1]) * scale)


@pytest.mark.parametrize("lam", [1.0, 0.9])
@pytest.mark.parametrize("D", [8, 20, 64])
def test_ridge_oracle_equals_augmented_lstsq(D, lam):
    Z, y = abo_features(D, 200)
    for t in [1, 5, 20, 150]:
        beta, _ = window_lstsq(Z, y[:, None], t, window_size=N, forgetting_factor=lam, alpha=1e-2)
        lo = max(0, t - N)
        sw = np.sqrt(lam) ** np.arange(t - lo - 1, -1, -1)
        ref = augmented_ridge(Z[lo:t] * sw[:, None], y[lo:t, None] * sw[:, None], 1e-2)
        np.testing.assert_allclose(beta, ref, rtol=1e-10, atol=1e-12)


def test_oracle_test_can_fail():
    # a solver that is wrong by 1e-7 relative must be caught by the bound above
    Z, y = abo_features(64)
    o_pred, kappa, _ = oracle(64, 1.0, 0.0)
    wrong = o_pred[:, 0] * (1 + 1e-7)
    with pytest.raises(AssertionError):
        assert_matches_oracle(wrong, o_pred, kappa, "auto")


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("D", [8, 64])
def test_two_dimensional_targets(D, solver):
    Z, y = abo_features(D, 600)
    rng = np.random.default_rng(1)
    Y = np.column_stack([y, np.sin(3 * y), rng.normal(size=y.shape)])
    reg = QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver)
    Y_pred = prequential_predict(reg, Z, Y)
    o_pred, kappa, o_beta = prequential_oracle(Z, Y, window_size=N, forgetting_factor=0.9, alpha=0)
    assert Y_pred.shape == Y.shape and reg.coef_.shape == (D, 3)
    assert_matches_oracle(Y_pred, o_pred, kappa, solver)
    np.testing.assert_allclose(reg.coef_, o_beta, atol=1e-9 * np.abs(o_beta).max())
    np.testing.assert_allclose(reg.predict(Z[:5]), Z[:5] @ o_beta, atol=1e-9 * np.abs(Y).max())


@pytest.mark.parametrize("D", [64, 1024])
def test_forgetting_factor_identity_when_overparameterised(D):
    # D > N: every residual of the window is zero, so β_t does not depend on λ
    Z, y = abo_features(D, 500)
    p1 = prequential_predict(QREWRLSRegressor(N, forgetting_factor=1.0), Z, y)
    p2 = prequential_predict(QREWRLSRegressor(N, forgetting_factor=0.9), Z, y)
    np.testing.assert_allclose(p1, p2, rtol=0, atol=1e-10 * np.abs(p1).max())
    # and it really does when D < N
    Z8, y8 = abo_features(8, 500)
    q1 = prequential_predict(QREWRLSRegressor(N, forgetting_factor=1.0), Z8, y8)
    q2 = prequential_predict(QREWRLSRegressor(N, forgetting_factor=0.9), Z8, y8)
    assert np.abs(q1 - q2).max() > 1e-3


def degenerate_stream(kind, D, n=300, seed=0):
    rng = np.random.default_rng(seed)
    if kind == "low_rank":  # rows confined to a 3-dimensional subspace
        Z = rng.normal(size=(n, 3)) @ rng.normal(size=(3, D))
    elif kind == "duplicated":  # the same row repeated long enough to fill the window
        Z = rng.normal(size=(n, D))
        Z[50:90] = Z[50]
        Z[200:205] = Z[199]
    elif kind == "zero_rows":
        Z = rng.normal(size=(n, D))
        Z[::7] = 0.0
    y = rng.normal(size=n)
    return Z, y


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("kind", ["low_rank", "duplicated", "zero_rows"])
@pytest.mark.parametrize("D", [8, 20, 64])
@pytest.mark.parametrize("lam", [1.0, 0.9])
def test_degenerate_windows_match_oracle(kind, D, lam, solver):
    Z, y = degenerate_stream(kind, D)
    reg = QREWRLSRegressor(N, forgetting_factor=lam, solver=solver)
    y_pred = prequential_predict(reg, Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=lam, alpha=0)
    assert np.all(np.isfinite(y_pred))
    assert_matches_oracle(y_pred, o_pred, kappa, solver)


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("D", [8, 64])
def test_chunking_fit_and_single_row_paths_agree(D, solver):
    Z, y = abo_features(D, 400)
    whole = prequential_predict(QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver), Z, y)
    reg = QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver)
    pieces = [prequential_predict(reg, Z[a:b], y[a:b]) for a, b in [(0, 1), (1, 13), (13, 250), (250, 400)]]
    np.testing.assert_allclose(np.concatenate(pieces), whole, rtol=0, atol=1e-10)
    # fit == streaming partial_fit
    fitted = QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver).fit(Z, y)
    np.testing.assert_allclose(fitted.coef_, reg.coef_, rtol=0, atol=1e-10)
    # single-observation path
    one = QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver).partial_fit(Z[:1], y[:1])
    preds = [0.0]
    for t in range(1, len(y)):
        preds.append(one.predict_one(Z[t]))
        one.learn_one(Z[t], y[t])
    np.testing.assert_allclose(preds, whole, rtol=0, atol=1e-10)
    np.testing.assert_allclose(one.coef_, reg.coef_, rtol=0, atol=1e-10)


def test_no_look_ahead_bit_identical():
    Z, y = abo_features(64, 300)
    base = prequential_predict(QREWRLSRegressor(N), Z, y)
    for i in [0, 17, 150, 299]:
        Z2, y2 = Z.copy(), y.copy()
        Z2[i + 1 :] += 1.0
        y2[i:] -= 3.0
        pert = prequential_predict(QREWRLSRegressor(N), Z2, y2)
        assert np.array_equal(pert[: i + 1], base[: i + 1])


@pytest.mark.parametrize("solver", ["auto", "givens"])
def test_pickle_mid_stream_is_seamless(solver):
    Z, y = abo_features(64, 300)
    reg = QREWRLSRegressor(N, forgetting_factor=0.9, solver=solver)
    prequential_predict(reg, Z[:120], y[:120])
    copies = [pickle.loads(pickle.dumps(reg)), copy.deepcopy(reg), joblib_roundtrip(reg)]
    p_straight = prequential_predict(reg, Z[120:], y[120:])
    for other in copies:
        assert np.array_equal(prequential_predict(other, Z[120:], y[120:]), p_straight)
        assert np.array_equal(other.coef_, reg.coef_)


def joblib_roundtrip(est):
    import io

    import joblib

    buf = io.BytesIO()
    joblib.dump(est, buf)
    buf.seek(0)
    return joblib.load(buf)


@pytest.mark.parametrize(
    "X_bad, y_bad, match",
    [
        ("nan", None, "NaN"),
        ("wide", None, "features"),
        (None, "nan", "NaN"),
        (None, "short", "inconsistent"),
        (None, "2d", "target"),
    ],
)
def test_rejected_partial_fit_leaves_state_unchanged(X_bad, y_bad, match):
    Z, y = abo_features(64, 100)
    reg = QREWRLSRegressor(N).partial_fit(Z[:50], y[:50])
    before = copy.deepcopy(reg.__dict__)
    Xb, yb = Z[50:60].copy(), y[50:60].copy()
    if X_bad == "nan":
        Xb[3, 5] = np.nan
    if X_bad == "wide":
        Xb = np.hstack([Xb, Xb[:, :1]])
    if y_bad == "nan":
        yb[2] = np.nan
    if y_bad == "short":
        yb = yb[:-1]
    if y_bad == "2d":
        yb = np.column_stack([yb, yb])
    with pytest.raises(ValueError, match=match):
        reg.partial_fit(Xb, yb)
    assert_same_state(before, reg.__dict__)
    # and the stream continues as if nothing happened
    ref = QREWRLSRegressor(N).partial_fit(Z[:50], y[:50]).partial_fit(Z[50:], y[50:])
    assert np.array_equal(reg.partial_fit(Z[50:], y[50:]).coef_, ref.coef_)


@pytest.mark.parametrize("D", [8, 64])
def test_window_diagnostics(D):
    Z, y = abo_features(D, 100)
    reg = QREWRLSRegressor(N, forgetting_factor=0.9).fit(Z, y)
    sw = np.sqrt(0.9) ** np.arange(N - 1, -1, -1)
    s = np.linalg.svd(Z[-N:] * sw[:, None], compute_uv=False)
    assert reg.n_window_ == N and reg.n_samples_seen_ == len(y)
    np.testing.assert_allclose(reg.condition_number_, s[0] / s[-1], rtol=1e-8)
    assert reg.rank_ == min(N, D)
    low = QREWRLSRegressor(N).fit(*degenerate_stream("low_rank", D, n=60))
    assert low.rank_ == 3


def test_single_row_path_rejects_bad_rows():
    Z, y = abo_features(8, 50)
    reg = QREWRLSRegressor(N).fit(Z, y)
    coef = reg.coef_.copy()
    with pytest.raises(ValueError, match="NaN"):
        reg.learn_one(np.full(8, np.nan), 1.0)
    with pytest.raises(ValueError, match="features"):
        reg.learn_one(np.ones(9), 1.0)
    with pytest.raises(ValueError, match="NaN"):
        reg.learn_one(np.ones(8), np.inf)
    assert np.array_equal(reg.coef_, coef)


@pytest.mark.parametrize("scale", [0.0, 1e-300, 1e-160, 1e-130, 1.0, 1e140, 1e160, 1e300])
def test_single_row_norm_from_the_finiteness_check(scale):
    # learn_one takes the row's norm from check_one_row: BLAS ddot where ‖x‖² is in range,
    # nrm2 (which scales) elsewhere; both must give the norm, and β the oracle's answer
    from sklearn_orfit._streaming._validation import check_one_row

    rng = np.random.default_rng(5)
    x = rng.normal(size=7) * scale
    _, norm = check_one_row(x, n_features=7, return_norm=True)
    expected = scale * np.linalg.norm(x / scale) if scale else 0.0
    assert norm == pytest.approx(expected, rel=8 * EPS, abs=0.0)
    # a short window (the one-row dual path, D ≥ N) and a long one (D < N)
    for N in (5, 10):
        Z, y = rng.normal(size=(12, 7)) * (scale or 1.0), rng.normal(size=12)
        Z[-1] = x
        reg = QREWRLSRegressor(N).fit(Z[:-1], y[:-1])
        reg.learn_one(Z[-1], y[-1])
        beta, kappa = window_lstsq(Z, y[:, None], 12, window_size=N, forgetting_factor=1.0, alpha=0.0)
        bound = 100 * EPS * kappa * np.abs(beta).max()
        assert np.all(np.abs(reg.coef_ - beta[:, 0]) <= bound)


def test_single_row_norm_that_overflows_is_a_clear_error():
    # finite entries whose norm exceeds the float64 range (‖x‖ ≈ 2.6e308): not "NaN or
    # infinity", but the overflow message, and the model is unchanged
    reg = QREWRLSRegressor(4).fit(np.ones((6, 3)), np.ones(6))
    before = pickle.dumps(reg)
    with pytest.raises(ValueError, match="norm exceeds"):
        reg.learn_one(np.array([1.5e308, 1.5e308, 1.5e308]), 1.0)
    assert pickle.dumps(reg) == before


def test_window_larger_than_stream_and_window_of_one():
    rng = np.random.default_rng(3)
    Z, y = rng.normal(size=(15, 6)), rng.normal(size=15)
    for window, lam in [(50, 0.8), (1, 1.0)]:
        reg = QREWRLSRegressor(window, forgetting_factor=lam)
        y_pred = prequential_predict(reg, Z, y)
        o_pred, kappa, beta = prequential_oracle(Z, y, window_size=window, forgetting_factor=lam, alpha=0)
        assert_matches_oracle(y_pred, o_pred, kappa, "auto")
        np.testing.assert_allclose(reg.coef_, beta[:, 0], atol=1e-10)


def test_rejected_fit_keeps_the_previous_stream():
    Z, y = abo_features(64, 100)
    reg = QREWRLSRegressor(N).fit(Z, y)
    before = copy.deepcopy(reg.__dict__)
    Zb = Z.copy()
    Zb[5, 3] = np.inf
    with pytest.raises(ValueError, match="infinity"):
        reg.fit(Zb, y)
    assert_same_state(before, reg.__dict__)


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("scale", [1e-150, 1e150])
def test_extreme_scales_are_exact(scale, solver):
    Z, y = degenerate_stream("zero_rows", 8, n=120)
    Z, y = Z * scale, y * scale
    y_pred = prequential_predict(QREWRLSRegressor(N, solver=solver), Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=1.0, alpha=0)
    assert_matches_oracle(y_pred, o_pred, kappa, solver)


def test_gram_overflow_falls_back_to_the_orthogonal_route():
    # ‖z‖² overflows at 1e200, the window itself does not: the result is still exact
    Z, y = degenerate_stream("low_rank", 64, n=60)
    reg = QREWRLSRegressor(N)
    y_pred = prequential_predict(reg, Z * 1e200, y)
    o_pred, kappa, _ = prequential_oracle(Z * 1e200, y, window_size=N, forgetting_factor=1.0, alpha=0)
    assert_matches_oracle(y_pred, o_pred, kappa, "auto")
    assert reg.n_orthogonal_windows_ > 0


def test_overflowing_solution_is_a_clear_error_not_nan():
    Z, y = degenerate_stream("low_rank", 64, n=60)
    reg = QREWRLSRegressor(N).fit(Z[:30], y[:30])
    coef = reg.coef_.copy()
    with pytest.raises(ValueError, match="overflow"):
        reg.partial_fit(Z[30:] * 1e-200, y[30:] * 1e200)  # |β| ~ 1e400
    assert np.array_equal(reg.coef_, coef) and reg.n_samples_seen_ == 30


@pytest.mark.parametrize("first", [1, 3, 19, 20, 25])
def test_single_row_path_after_a_partial_window(first):
    # the ring's padding must be recognised whatever call filled it
    rng = np.random.default_rng(0)
    Z, y = rng.normal(size=(60, 64)), rng.normal(size=60)
    reg = QREWRLSRegressor(N).partial_fit(Z[:first], y[:first])
    preds = []
    for t in range(first, 60):
        preds.append(reg.predict_one(Z[t]))
        reg.learn_one(Z[t], y[t])
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=1.0, alpha=0)
    assert_matches_oracle(np.array(preds), o_pred[first:], kappa[first:], "auto")
    assert reg.n_orthogonal_windows_ == 0  # generic windows stay on the fast route


@pytest.mark.parametrize("solver", ["auto", "givens"])
def test_single_feature_stream(solver):
    rng = np.random.default_rng(4)
    Z, y = rng.normal(size=(150, 1)), rng.normal(size=150)
    y_pred = prequential_predict(QREWRLSRegressor(N, forgetting_factor=0.95, solver=solver), Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=0.95, alpha=0)
    assert_matches_oracle(y_pred, o_pred, kappa, solver)


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("D", [2, 64])
def test_forgetting_factor_close_to_zero(D, solver):
    # λ = 1e-3: the window's weights span λ^(N−1); with N = 3 the problem stays well posed
    Z, y = degenerate_stream("zero_rows", D, n=150)
    y_pred = prequential_predict(QREWRLSRegressor(3, forgetting_factor=1e-3, solver=solver), Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=3, forgetting_factor=1e-3, alpha=0)
    assert_matches_oracle(y_pred, o_pred, kappa, solver)


@pytest.mark.parametrize("D", [8, 64])
def test_forgetting_factor_close_to_zero_long_window_auto(D):
    # N = 20, λ = 1e-3: κ(W½Z) ≈ 1e28, numerically rank-deficient, and the oracle itself
    # is only defined to about κ·eps, so the oracle bound below is loose; what this pins
    # down is that the default solver sends these windows to the orthogonal route (lstsq's
    # cut-off) and stays finite
    Z, y = degenerate_stream("low_rank", D, n=120)
    Z = Z + np.random.default_rng(5).normal(size=Z.shape)
    reg = QREWRLSRegressor(N, forgetting_factor=1e-3)
    y_pred = prequential_predict(reg, Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=1e-3, alpha=0)
    assert np.all(np.isfinite(y_pred)) and reg.n_orthogonal_windows_ > 0
    assert_matches_oracle(y_pred, o_pred, kappa, "auto")


@pytest.mark.parametrize("solver", ["auto", "svd", "givens"])
@pytest.mark.parametrize("D, window", [(3, 10), (40, 10), (4, 48), (96, 48)])
@pytest.mark.parametrize("scale", [1e-300, 1e-160, 1e-100, 1e100, 1e160, 1e300])
def test_every_scale_is_exact(scale, D, window, solver):
    # rows of norm ≈ 1e-160 once sent the default solver off by 0.4 (a subnormal s²)
    # The stream goes in one call, then calls of 7 rows, then row by row: each path must
    # continue from the window the one before left (a short-window call once stored
    # rows of norm ≤ 1e-100 with norm 0, whose squares had underflowed: exact within the
    # call, 0.97 off from the next call on)
    rng = np.random.default_rng(13)
    Z = rng.normal(size=(120, D)) * (scale / np.sqrt(D))
    y = rng.normal(size=120)
    reg = QREWRLSRegressor(window, solver=solver)
    parts = [prequential_predict(reg, Z[:60], y[:60])]
    parts += [prequential_predict(reg, Z[a : a + 7], y[a : a + 7]) for a in range(60, 102, 7)]
    for t in range(102, 120):
        parts.append([reg.predict_one(Z[t])])
        reg.learn_one(Z[t], y[t])
    y_pred = np.concatenate(parts)
    o_pred, kappa, o_beta = prequential_oracle(Z, y, window_size=window, forgetting_factor=1.0, alpha=0)
    assert_matches_oracle(y_pred, o_pred, kappa, solver)
    np.testing.assert_allclose(reg.coef_, o_beta[:, 0], rtol=0, atol=1e-9 * np.abs(o_beta).max())


@pytest.mark.parametrize("D, window", [(3, 10), (40, 10), (4, 24), (96, 24)])
@pytest.mark.parametrize("spread", [1e-3, 1e90, 1e120])
def test_norms_straddling_the_moderate_range_are_exact(spread, D, window):
    # The short-window route works on the rows as given when every norm is moderate
    # (1e-100 … 1e100) and on unit rows otherwise; a call whose norms straddle the bound,
    # with zero rows among them, must match lstsq either way, row by row and chunked.
    rng = np.random.default_rng(17)
    Z = rng.normal(size=(90, D)) / np.sqrt(D)
    Z *= np.exp(rng.uniform(-1.0, 1.0, size=(90, 1)) * np.log(spread))
    Z[[5, 33, 34]] = 0.0
    y = rng.normal(size=90)
    o_pred, kappa, o_beta = prequential_oracle(Z, y, window_size=window, forgetting_factor=1.0, alpha=0)
    for chunk in (90, 7):
        reg = QREWRLSRegressor(window)
        y_pred = np.concatenate([reg.prequential_predict(Z[a : a + chunk], y[a : a + chunk])
                                 for a in range(0, 90, chunk)])
        assert_matches_oracle(y_pred, o_pred, kappa, "auto")
        np.testing.assert_allclose(reg.coef_, o_beta[:, 0], rtol=0, atol=1e-9 * np.abs(o_beta).max())


@pytest.mark.parametrize("window", [10, 64])
@pytest.mark.parametrize("alpha", [1e-100, 1e-30, 1e-12, 1e-2])
def test_tiny_ridge_coefficients_are_exact_on_both_paths(alpha, window):
    # alpha = 1e-100 with 10 rows × 40 features once gave coef_ off by 2.17
    rng = np.random.default_rng(14)
    Z, y = rng.normal(size=(10, 40)), rng.normal(size=10)
    # Zᵀ(ZZᵀ + αI)⁻¹y: well conditioned here (κ(ZZᵀ) ≈ 10), unlike the augmented
    # lstsq oracle, whose own error is ≈ eps·σ_max/√α (3e-9 at α = 1e-12)
    ref = Z.T @ np.linalg.solve(Z @ Z.T + alpha * np.eye(10), y)
    whole = QREWRLSRegressor(window, alpha=alpha).fit(Z, y)
    one = QREWRLSRegressor(window, alpha=alpha).fit(Z[:1], y[:1])
    for t in range(1, 10):
        one.learn_one(Z[t], y[t])
    for reg in (whole, one):
        np.testing.assert_allclose(reg.coef_, ref, rtol=0, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("lam, alpha", [(1.0, 0.0), (0.97, 0.0), (1.0, 1e-2), (0.97, 1e-2)])
@pytest.mark.parametrize("D", [40, 160])
def test_long_windows_match_oracle_on_every_path(D, lam, alpha):
    # N = 60: the block solvers (dual for D ≥ N, primal for D < N; a ridge with
    # forgetting is solved window by window), through prequential_predict, partial_fit
    # pieces and the single-row path
    Z, y = abo_features(D, 500)
    window = 60
    o_pred, kappa, o_beta = prequential_oracle(Z, y, window_size=window, forgetting_factor=lam, alpha=alpha)
    make = lambda: QREWRLSRegressor(window, forgetting_factor=lam, alpha=alpha)  # noqa: E731
    whole = make()
    y_pred = prequential_predict(whole, Z, y)
    assert_matches_oracle(y_pred, o_pred, kappa, "auto")
    np.testing.assert_allclose(whole.coef_, o_beta[:, 0], atol=1e-9 * max(1, kappa[-1]) * np.abs(o_beta).max())
    pieces = make()
    chunks = [prequential_predict(pieces, Z[a:b], y[a:b]) for a, b in [(0, 1), (1, 70), (70, 71), (71, 333), (333, 500)]]
    np.testing.assert_allclose(np.concatenate(chunks), y_pred, rtol=0, atol=1e-10 * np.abs(y_pred).max())
    one = make().partial_fit(Z[:1], y[:1])
    preds = [0.0]
    for t in range(1, 200):
        preds.append(one.predict_one(Z[t]))
        one.learn_one(Z[t], y[t])
    np.testing.assert_allclose(preds, y_pred[:200], rtol=0, atol=1e-10 * np.abs(y_pred).max())


@pytest.mark.parametrize("D", [40, 160])
def test_long_window_no_look_ahead_bit_identical(D):
    Z, y = abo_features(D, 300)
    base = prequential_predict(QREWRLSRegressor(60), Z, y)
    for i in [0, 59, 60, 150, 299]:
        Z2, y2 = Z.copy(), y.copy()
        Z2[i + 1 :] += 1.0
        y2[i:] -= 3.0
        assert np.array_equal(prequential_predict(QREWRLSRegressor(60), Z2, y2)[: i + 1], base[: i + 1])


def test_single_row_path_allocates_nothing_of_window_squared():
    # N = 10⁵ with 5 features: the primal route holds the window (N×D) and O(D²), no N×N
    import tracemalloc

    window, D = 100_000, 5
    rng = np.random.default_rng(15)
    Z, y = rng.normal(size=(60, D)), rng.normal(size=60)
    reg = QREWRLSRegressor(window).partial_fit(Z[:10], y[:10])
    tracemalloc.start()
    for t in range(10, 60):
        reg.predict_one(Z[t])
        reg.learn_one(Z[t], y[t])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 64 * window * D  # a few copies of the window at most; N² would be 8e10
    o_pred, kappa, o_beta = prequential_oracle(Z, y, window_size=window, forgetting_factor=1.0, alpha=0)
    np.testing.assert_allclose(reg.coef_, o_beta[:, 0], atol=1e-10)


@pytest.mark.parametrize(
    "param, value",
    [("forgetting_factor", 0.5), ("window_size", 7), ("alpha", 1e-2), ("solver", "givens")],
)
def test_set_params_mid_stream_is_a_clear_error_then_fit_restarts(param, value):
    # a changed parameter was once silently ignored (λ) or broke the ring (window_size)
    Z, y = abo_features(64, 120)
    reg = QREWRLSRegressor(N).partial_fit(Z[:60], y[:60])
    coef = reg.coef_.copy()
    reg.set_params(**{param: value})
    for call in (lambda: reg.partial_fit(Z[60:70], y[60:70]), lambda: reg.learn_one(Z[60], y[60]),
                 lambda: prequential_predict(reg, Z[60:70], y[60:70])):
        with pytest.raises(ValueError, match=f"{param} changed.*Call fit"):
            call()
    assert np.array_equal(reg.coef_, coef) and reg.n_samples_seen_ == 60
    ref = QREWRLSRegressor(**{"window_size": N, param: value}).fit(Z, y)
    np.testing.assert_allclose(reg.fit(Z, y).coef_, ref.coef_, rtol=0, atol=0)


@pytest.mark.parametrize("D", [40, 160])
def test_long_window_pickle_mid_block_is_seamless(D):
    # the block solvers' state (core factor, periphery, carried Gram matrix, orthogonal
    # factors) survives pickle, deepcopy and joblib mid-block
    Z, y = abo_features(D, 400)
    reg = QREWRLSRegressor(60, forgetting_factor=0.95)
    prequential_predict(reg, Z[:137], y[:137])
    copies = [pickle.loads(pickle.dumps(reg)), copy.deepcopy(reg), joblib_roundtrip(reg)]
    p_straight = prequential_predict(reg, Z[137:], y[137:])
    for other in copies:
        assert np.array_equal(prequential_predict(other, Z[137:], y[137:]), p_straight)
        assert np.array_equal(other.coef_, reg.coef_)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
@pytest.mark.parametrize("D", [40, 160])
def test_long_window_interrupt_inside_a_call_changes_nothing(D, exc, monkeypatch):
    # an interrupt half-way through a call (after some blocks were replaced and some
    # rows written) restores the estimator exactly, and the stream continues untouched
    Z, y = abo_features(D, 400)
    reg = QREWRLSRegressor(60).partial_fit(Z[:100], y[:100])
    ref = copy.deepcopy(reg)
    before = copy.deepcopy(reg.__dict__)
    # the block solver itself (for D < N behind the dual-then-primal switch)
    inner = lambda r: getattr(r._solver, "inner", r._solver)  # noqa: E731
    solver_cls = type(inner(reg))
    calls = {"n": 0}
    original = solver_cls._solve_windows

    def failing(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == 4:
            raise exc("interrupted")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(solver_cls, "_solve_windows", failing)
    with pytest.raises(exc):
        prequential_predict(reg, Z[100:300], y[100:300])
    monkeypatch.setattr(solver_cls, "_solve_windows", original)
    assert calls["n"] == 4
    # the learned state and the window are as before; a block's arrays past its counters
    # may hold what the failed call wrote there, which nothing reads (see restore())
    assert np.array_equal(reg.coef_, before["coef_"]) and reg.n_samples_seen_ == 100
    assert_same_state(before["_solver"].buf, reg._solver.buf)
    blk, blk0 = inner(reg).block, getattr(before["_solver"], "inner", before["_solver"]).block
    assert (blk.m, blk.j) == (blk0.m, blk0.j)
    assert np.array_equal(prequential_predict(reg, Z[100:], y[100:]), prequential_predict(ref, Z[100:], y[100:]))


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("D, window", [(160, 60), (16, 60), (8, 20)])
def test_memory_mapped_model_continues_the_stream(D, window, solver, tmp_path):
    # joblib.load(mmap_mode="r") gives read-only arrays: the solvers once failed with
    # "assignment destination is read-only"
    import joblib

    rng = np.random.default_rng(16)
    Z, y = rng.normal(size=(3000 if solver == "auto" else 300, D)), rng.normal(size=3000 if solver == "auto" else 300)
    cut = len(y) * 2 // 3
    reg = QREWRLSRegressor(window, solver=solver).partial_fit(Z[:cut], y[:cut])
    joblib.dump(reg, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib", mmap_mode="r")
    assert not loaded._solver.buf.Zh.flags.writeable  # the case under test
    assert np.array_equal(prequential_predict(loaded, Z[cut:], y[cut:]), prequential_predict(reg, Z[cut:], y[cut:]))
    loaded.learn_one(Z[0], y[0])


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize("D, window", [(160, 60), (8, 20)])
def test_model_mapped_read_write_never_writes_the_file(D, window, solver, tmp_path):
    # Regression: with mmap_mode="r+", learning wrote the stream into the file's arrays
    # (whose pickled counters stayed old): the file reloaded as a corrupted model
    import joblib

    rng = np.random.default_rng(17)
    Z, y = rng.normal(size=(300, D)), rng.normal(size=300)
    reg = QREWRLSRegressor(window, solver=solver).partial_fit(Z[:200], y[:200])
    path = tmp_path / "model.joblib"
    joblib.dump(reg, path)
    saved = path.read_bytes()
    loaded = joblib.load(path, mmap_mode="r+")
    loaded.partial_fit(Z[200:250], y[200:250])
    loaded.learn_one(Z[250], y[250])
    del loaded
    assert path.read_bytes() == saved


def test_givens_state_mapped_read_only_by_a_worker():
    # Regression: joblib maps arrays above 1 MB read-only in its workers; the Givens
    # table (here 1.4 MB) was written into ("output array is read-only")
    from joblib import Parallel, delayed

    rng = np.random.default_rng(18)
    Z, y = rng.normal(size=(160, 1024)), rng.normal(size=160)
    reg = QREWRLSRegressor(80, solver="givens").partial_fit(Z[:150], y[:150])
    assert reg._solver.window.M.nbytes > 1e6  # above joblib's memmapping threshold
    out = Parallel(n_jobs=2, backend="loky")(
        delayed(lambda r: r.partial_fit(Z[150:], y[150:]).coef_)(reg) for _ in range(2)
    )
    expected = copy.deepcopy(reg).partial_fit(Z[150:], y[150:]).coef_
    for coef in out:
        np.testing.assert_array_equal(coef, expected)


def test_short_window_learn_one_in_a_worker_whose_targets_are_mapped():
    # Regression: the single-row path made the state private only when the rows' array
    # was mapped; with many targets the targets' array is the one above joblib's 1 MB
    # threshold, mapped read-only in the worker ("assignment destination is read-only")
    from joblib import Parallel, delayed

    rng = np.random.default_rng(22)
    Z, Y = rng.normal(size=(24, 40)), rng.normal(size=(24, 20000))
    reg = QREWRLSRegressor(20).fit(Z[:20], Y[:20])
    assert reg._solver.buf.Y.nbytes > 1e6 > reg._solver.buf.Zh.nbytes  # the case under test

    def learn(r):
        for t in range(20, 24):
            r.learn_one(Z[t], Y[t])
        return r.coef_

    out = Parallel(n_jobs=2, backend="loky", max_nbytes="1M")(delayed(learn)(reg) for _ in range(2))
    expected = learn(copy.deepcopy(reg))
    for coef in out:
        np.testing.assert_array_equal(coef, expected)


def test_missing_targets_are_reported_as_such():
    Z, y = abo_features(8, 40)
    with pytest.raises(ValueError, match="NaN or infinity"):
        QREWRLSRegressor(5).partial_fit(Z[:20], np.array([None] * 20, dtype=object))


@lru_cache(maxsize=None)
def _graded_stream(N, D, lam, kind):
    rng = np.random.default_rng(3)
    Z = rng.standard_normal((120, D))
    if kind == "alternating":  # rows alternating 1e8 and 1e-8: κ beyond lstsq's cut-off
        Z[::2] *= 1e8
        Z[1::2] *= 1e-8
    y = rng.standard_normal(120)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=lam, alpha=0)
    return Z, y, o_pred, kappa


@pytest.mark.parametrize("solver", ["auto", "givens"])
@pytest.mark.parametrize(
    "N, D, lam, kind",
    [(N_, D_, lam_, "normal") for N_, D_ in [(20, 8), (50, 8), (20, 40)]
     for lam_ in [1e-20, 1e-15, 1e-10, 1e-4, 1e-2]]
    + [(20, 8, 1.0, "alternating"), (20, 40, 1.0, "alternating")],
)
def test_weights_beyond_the_cutoff_follow_lstsq(N, D, lam, kind, solver):
    # Regression: with λ ≤ 1e-2 the window's weights span more than lstsq's cut-off
    # eps·max(N, D); the Givens recursion overflowed R⁺ (NaN, then a false "overflowed"
    # on every later call) or kept singular values lstsq drops (errors 1.2–940, and
    # −1.7e14 instead of −0.63 on alternating rows).
    Z, y, o_pred, kappa = _graded_stream(N, D, lam, kind)
    reg = QREWRLSRegressor(N, forgetting_factor=lam, solver=solver)
    y_pred = reg.prequential_predict(Z, y)
    assert_matches_oracle(y_pred, o_pred, kappa, solver)
    reg.partial_fit(Z[:5], y[:5])  # the stream goes on
    # the single-observation path (its own condition check) on the same windows
    one = QREWRLSRegressor(N, forgetting_factor=lam, solver=solver).fit(Z[:1], y[:1])
    preds = [0.0, float(one.predict_one(Z[1]))]
    for t in range(1, Z.shape[0] - 1):
        one.learn_one(Z[t], y[t])
        preds.append(float(one.predict_one(Z[t + 1])))
    preds[0] = o_pred[0, 0]
    assert_matches_oracle(np.array(preds), o_pred, kappa, solver)


def test_plain_chunks_and_converted_chunks_learn_alike():
    # a float64 array passes validation as it is; a list, float32 rows, a column of
    # huge values (whose sum overflows) and a DataFrame go through scikit-learn's
    # validation: every one learns the same numbers
    Z, y = abo_features(8, 120)
    Z, y = Z[:, :1].copy(), y.copy()
    Z[60:80] = 1e307  # finite, but their sum overflows float64
    y[60:80] = 1e-300 * np.arange(20)
    plain = QREWRLSRegressor(N).fit(Z[:40], y[:40])
    listed = QREWRLSRegressor(N).fit(Z[:40], y[:40])
    p_plain = plain.prequential_predict(Z[40:], y[40:])
    p_list = listed.prequential_predict(Z[40:].tolist(), y[40:].tolist())
    np.testing.assert_array_equal(p_plain, p_list)
    np.testing.assert_array_equal(plain.coef_, listed.coef_)


def test_plain_chunk_of_a_model_fitted_with_feature_names_still_warns():
    pd = pytest.importorskip("pandas")
    Z, y = abo_features(8, 60)
    frame = pd.DataFrame(Z, columns=[f"z{i}" for i in range(Z.shape[1])])
    reg = QREWRLSRegressor(N).fit(frame[:40], y[:40])
    with pytest.warns(UserWarning, match="feature names"):
        reg.prequential_predict(Z[40:], y[40:])


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_predict_one_refuses_a_non_finite_row(bad):
    Z, y = abo_features(8, 60)
    reg = QREWRLSRegressor(N).fit(Z, y)
    x = Z[0].copy()
    x[3] = bad
    with pytest.raises(ValueError, match="NaN or infinity"):
        reg.predict_one(x)
    with pytest.raises(ValueError, match="features"):
        reg.predict_one(Z[0, :-1])
    assert reg.predict_one(Z[1].tolist()) == reg.predict(Z[1:2])[0]


def test_arrays_are_made_private_once_per_solver_and_again_after_a_load(monkeypatch):
    # the walk over the solver's arrays (make_private) runs once per solver object, not
    # on every call; a pickle or a copy is a new object, walked again before it learns
    # (a model loaded with mmap_mode="r": the test above)
    import copy
    import pickle

    from sklearn_orfit._streaming import _base

    walked = []
    real = _base.make_private
    monkeypatch.setattr(_base, "make_private", lambda obj: walked.append(obj) or real(obj))
    rng = np.random.default_rng(19)
    Z, y = rng.normal(size=(120, 30)), rng.normal(size=120)
    reg = QREWRLSRegressor(50).fit(Z[:60], y[:60])
    for a in range(60, 100, 10):
        reg.partial_fit(Z[a : a + 10], y[a : a + 10])
    assert walked == [reg._solver]
    for other in (pickle.loads(pickle.dumps(reg)), copy.deepcopy(reg)):
        walked.clear()
        other.partial_fit(Z[100:110], y[100:110])
        prequential_predict(other, Z[110:], y[110:])
        assert walked == [other._solver] and other._solver is not reg._solver


@pytest.mark.parametrize("N, D, lam, alpha", [(100, 64, 0.99, 0.0), (60, 200, 1.0, 1e-6), (20, 8, 0.9, 0.0)])
def test_one_row_prequential_call_solves_its_window_once(N, D, lam, alpha, monkeypatch):
    # a one-row prequential call predicts x·β of the window before it: the coefficients
    # the previous call committed (that call's solve of the window), bit for bit what
    # predict() gives; the row is then learned with one solve (its new window, for
    # coef_), not two (the same window again for the prediction)
    from sklearn_orfit.abo._dual_solver import DualSolver
    from sklearn_orfit.abo._primal_solver import PrimalSolver

    solved = []  # windows solved by the block routes
    for cls in (DualSolver, PrimalSolver):
        monkeypatch.setattr(cls, "_solve_windows", lambda self, blk, lo, *a, real=cls._solve_windows, **k:
                            solved.append(lo.size) or real(self, blk, lo, *a, **k))
    rng = np.random.default_rng(20)
    Z, y = rng.normal(size=(N + 40, D)), rng.normal(size=N + 40)
    w = np.where(np.arange(N + 40) % 7 == 3, 0.0, 1.0)  # zero-weight rows too
    reg = QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha).fit(Z[:N], y[:N], sample_weight=w[:N])
    pred = []
    for t in range(N, N + 40):
        expected = reg.predict(Z[t : t + 1])
        solved.clear()
        pred.append(prequential_predict(reg, Z[t : t + 1], y[t : t + 1], sample_weight=w[t : t + 1])[0])
        assert pred[-1] == expected[0]
        assert sum(solved) <= 1, solved
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=lam, alpha=alpha, sample_weight=w)
    assert_matches_oracle(np.array(pred), o_pred[N:], kappa[N:], "auto")


def test_one_row_prequential_call_with_a_huge_weight_predicts_the_row_as_given():
    # Regression: the one-row call predicted √w·x and divided by √w; with w = 1e300 and
    # a row of 1e100 that product overflowed and the call raised, where predict() gives
    # a finite prediction
    from sklearn_orfit._streaming._base import stream_lock

    rng = np.random.default_rng(21)
    Z, y = rng.normal(size=(60, 200)), rng.normal(size=60) * 1e60
    x = rng.normal(size=(1, 200)) * 1e100
    reg = QREWRLSRegressor(60).fit(Z, y)
    expected = reg.predict(x)[0]
    assert np.isfinite(expected)
    fresh = pickle.loads(pickle.dumps(reg))
    assert prequential_predict(reg, x, [1.0], sample_weight=[1e300])[0] == expected
    # a prediction that overflows (a finite row of 1e260) is refused, the state left as
    # it was
    stream_lock(fresh)  # (made by the first learning call, as in a learned model)
    before = pickle.dumps(fresh)
    with pytest.raises(ValueError, match="overflow"):
        prequential_predict(fresh, x * 1e160, [1.0])
    assert pickle.dumps(fresh) == before


@pytest.mark.parametrize("lam", [1.0, 0.99])
@pytest.mark.parametrize("mode", ["r", "r+"])
def test_orthogonal_factors_above_the_memmap_threshold_continue_the_stream(lam, mode, tmp_path):
    # The orthogonal route writes its slides into its factors (qr_delete in place) when it
    # owns them: factors loaded from a file mapped read-only ("r") or for writing ("r+")
    # are copied before the first write (the loaded solver's arrays are made private, and
    # a loaded factor is not marked as owned: the test fails only without both), and the
    # stream continues as if never stopped
    import joblib

    rng = np.random.default_rng(19)
    N, D = 140, 1024
    Z = rng.normal(size=(320, 40)) @ rng.normal(size=(40, D))  # rank 40: orthogonal windows
    y = rng.normal(size=320)
    ref = QREWRLSRegressor(N, forgetting_factor=lam)
    p_ref = prequential_predict(ref, Z, y)
    reg = QREWRLSRegressor(N, forgetting_factor=lam)
    p1 = prequential_predict(reg, Z[:200], y[:200])
    orth = getattr(reg._solver, "inner", reg._solver).orth
    assert orth is not None and orth.Q.nbytes > 1e6  # above joblib's memmapping threshold
    path = tmp_path / "model.joblib"
    joblib.dump(reg, path)
    saved = path.read_bytes()
    loaded = joblib.load(path, mmap_mode=mode)
    orth = getattr(loaded._solver, "inner", loaded._solver).orth
    assert isinstance(orth.Q, np.memmap)  # the case under test
    p2 = prequential_predict(loaded, Z[200:], y[200:])
    assert reg.n_orthogonal_windows_ > 0 and loaded.n_orthogonal_windows_ > reg.n_orthogonal_windows_
    np.testing.assert_array_equal(np.concatenate([p1, p2]), p_ref)
    del loaded, orth
    assert path.read_bytes() == saved
