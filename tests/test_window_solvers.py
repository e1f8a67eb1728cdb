"""The window solvers' invariants, checked directly (scipy ``_decomp_update`` style)."""

import numpy as np
import pytest
from _oracle import prequential_oracle

from sklearn_orfit import QREWRLSRegressor, prequential_predict
from sklearn_orfit._window_solvers import SlidingQR, lstsq_stack, solve_normal_stack

EPS = np.finfo(np.float64).eps


@pytest.mark.parametrize("lam", [1.0, 0.9])
@pytest.mark.parametrize("kind", ["generic", "rank2", "zeros_then_rows"])
def test_sliding_qr_keeps_its_invariant(kind, lam):
    # invariant after every slide: Qt Qtᵀ = I and Qtᵀ R = Ãᵀ (the weighted window)
    rng = np.random.default_rng(0)
    N, D, T = 6, 15, 60
    rows = rng.normal(size=(T, D))
    if kind == "rank2":
        rows = rng.normal(size=(T, 2)) @ rng.normal(size=(2, D))
    elif kind == "zeros_then_rows":
        rows[:N] = 0.0
    sw = np.sqrt(lam) ** np.arange(N - 1, -1, -1)
    qr = SlidingQR(rows[:N] * sw[:, None])
    for at in range(1, T - N + 1):
        qr.slide(rows[at + N - 1], np.sqrt(lam))
        A = rows[at : at + N] * sw[:, None]
        scale = max(1.0, np.abs(A).max())
        np.testing.assert_allclose(qr.Qt @ qr.Qt.T, np.eye(N), atol=50 * EPS * at)
        np.testing.assert_allclose(qr.Qt.T @ qr.R, A.T, atol=50 * EPS * at * scale)
        assert np.allclose(np.tril(qr.R, -1), 0.0)
        y = rng.normal(size=(N, 1))
        beta = qr.solve(y, alpha=0.0)
        ref = np.linalg.lstsq(A, y, rcond=None)[0]
        np.testing.assert_allclose(beta, ref, atol=1e-9 * max(1.0, np.abs(ref).max()))


def test_lstsq_stack_matches_numpy_lstsq_including_rank_deficient():
    rng = np.random.default_rng(1)
    A = rng.normal(size=(5, 7, 4))
    A[2, :, 3] = A[2, :, 0]  # rank-deficient
    A[3] = 0.0
    Y = rng.normal(size=(5, 7, 2))
    beta, s = lstsq_stack(A, Y)
    for j in range(5):
        np.testing.assert_allclose(beta[j], np.linalg.lstsq(A[j], Y[j], rcond=None)[0], atol=1e-12)
    wide = np.swapaxes(A, 1, 2)
    beta, _ = lstsq_stack(wide, Y[:, :4])
    for j in range(5):
        np.testing.assert_allclose(beta[j], np.linalg.lstsq(wide[j], Y[j, :4], rcond=None)[0], atol=1e-12)


def test_normal_stack_flags_what_it_cannot_solve_accurately():
    rng = np.random.default_rng(2)
    B = rng.normal(size=(3, 4, 6))
    S = B @ np.swapaxes(B, 1, 2)
    S[1] = np.outer(B[1, :, 0], B[1, :, 0])  # rank one: must be flagged
    S[2, 2, :] = S[2, :, 2] = 0.0  # an all-zero row that is not padding: flagged
    rhs = rng.normal(size=(3, 4, 1))
    X, kappa = solve_normal_stack(S.copy(), rhs.copy())
    assert np.isfinite(kappa[0]) and kappa[0] < 1e6
    np.testing.assert_allclose(X[0], np.linalg.solve(S[0], rhs[0]), rtol=1e-10)
    assert not kappa[1] <= 1e6 and not kappa[2] <= 1e6
    pad = np.zeros((3, 4), dtype=bool)
    pad[2, 2] = True  # the same zero row as padding is decoupled, not flagged
    _, kappa = solve_normal_stack(S.copy(), rhs.copy(), pad=pad)
    assert kappa[2] < 1e6


@pytest.mark.parametrize("lam", [1.0, 0.95])
def test_ill_conditioned_stream_takes_the_sliding_route_and_stays_exact(lam):
    # small-σ-like features: rows close to a 3-dimensional subspace, every window flagged
    rng = np.random.default_rng(3)
    T, D, N = 160, 40, 25
    base = rng.normal(size=(T, 3)) @ rng.normal(size=(3, D))
    Z = base + 1e-5 * rng.normal(size=(T, D))
    y = rng.normal(size=T)
    reg = QREWRLSRegressor(N, forgetting_factor=lam)
    y_pred = prequential_predict(reg, Z, y)
    o_pred, kappa, _ = prequential_oracle(Z, y, window_size=N, forgetting_factor=lam, alpha=0)
    assert reg.n_orthogonal_windows_ > T // 2
    scale = np.abs(o_pred).max()
    tol = np.maximum(1e-9, 100 * EPS * kappa) * scale
    assert np.all(np.abs(y_pred - o_pred[:, 0]) <= tol)
