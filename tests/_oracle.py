"""From-scratch oracles the recursive solvers are tested against."""

from functools import lru_cache

import numpy as np


def window_lstsq(Z, Y, t, *, window_size, forgetting_factor, alpha, sample_weight=None):
    """The windowed least-squares solution on the window of rows ``< t``, from scratch.

    With ``sample_weight`` ``w``, row ``i`` is weighted ``λ^age w_i``:
    ``argmin Σ λ^age w_i (y_i − z_iβ)² + α‖β‖²`` (the rows scaled by ``√(λ^age w_i)``).

    ``alpha == 0``: ``numpy.linalg.lstsq(W½ Z, W½ Y, rcond=None)``. ``alpha > 0``: the ridge
    solution ``argmin ‖W½(Y − Zβ)‖² + α‖β‖²`` from the SVD of ``A = W½ Z``,
    ``β = V diag(s/(s² + α)) Uᵀ W½ Y`` (the same as ``lstsq([A; √α I], [W½ Y; 0])``, see
    ``test_ridge_oracle_equals_augmented_lstsq``, without its ``O(D³)`` cost).

    Returns the coefficients and the condition number of that least-squares problem
    (over its non-zero singular values).
    """
    lo = max(0, t - window_size)
    A, B = Z[lo:t], Y[lo:t]
    if sample_weight is None:
        sw = np.sqrt(forgetting_factor) ** np.arange(t - lo - 1, -1, -1)
    else:
        sw = np.sqrt(forgetting_factor ** np.arange(t - lo - 1, -1, -1) * sample_weight[lo:t])
    A = A * sw[:, None]
    B = B * sw[:, None]
    if A.shape[0] == 0:
        return np.zeros((Z.shape[1], Y.shape[1])), 1.0
    if alpha:
        # β = V diag(s/(s² + α)) Uᵀ B from the SVD of A (the normal equations' own error,
        # ≈ eps·κ(AAᵀ + αI), exceeds the solvers' at small α)
        # (rows that are exactly zero are left out: they do not change the ridge solution,
        # but their targets leak into it through the SVD's rounding, 1e2-1e3 bound units
        # at α = 1e-12 with graded features, measured against a 50-digit answer)
        nz = np.any(A != 0, axis=1)
        U, s, Vt = np.linalg.svd(A[nz], full_matrices=False)
        beta = Vt.T @ ((s / (s * s + alpha))[:, None] * (U.T @ B[nz]))
        # conditioning of the ridge problem on the rows' span: sqrt(κ(AAᵀ + αI))
        ev = np.concatenate([s * s, np.zeros(A.shape[0] - s.size)]) + alpha
        return beta, float(np.sqrt(ev.max() / ev.min()))
    beta, _, _, s = np.linalg.lstsq(A, B, rcond=None)
    # condition number of the oracle's problem over its non-zero singular values
    s = s[s > np.finfo(float).eps * max(A.shape) * s[0]]
    kappa = float(s[0] / s[-1]) if s.size else 1.0
    return beta, kappa


def exact_window_prediction(Z, y, t, *, window_size, forgetting_factor, alpha, digits=50):
    """``z_t·β`` of the window of rows ``< t`` in ``digits``-digit arithmetic (mpmath): the
    reference for windows on which float64 ``lstsq`` itself is outside the bound.

    The same problem as :func:`window_lstsq` (one target): the ridge solution
    ``V diag(s/(s² + α)) Uᵀ W½y`` for ``alpha > 0``, else the minimum-norm solution over
    the singular values above lstsq's cut-off ``eps·max(m, D)·s₁``, from an SVD of the
    exactly weighted window (``O(m·D²)`` at ``digits`` digits: small windows only).
    """
    import mpmath as mp

    with mp.workdps(digits):
        lo = max(0, t - window_size)
        m, D = t - lo, Z.shape[1]
        root = mp.sqrt(mp.mpf(forgetting_factor))
        w = [root ** (m - 1 - i) for i in range(m)]
        A = mp.matrix([[mp.mpf(float(v)) * w[i] for v in Z[lo + i]] for i in range(m)])
        b = [mp.mpf(float(y[lo + i])) * w[i] for i in range(m)]
        U, s, V = mp.svd_r(A)
        cut = max(s) * mp.mpf(np.finfo(float).eps) * max(m, D)
        beta = [mp.mpf(0)] * D
        for k in range(len(s)):
            if not alpha and not s[k] > cut:
                continue
            c = mp.fsum(U[i, k] * b[i] for i in range(m))
            c = c * s[k] / (s[k] ** 2 + mp.mpf(alpha)) if alpha else c / s[k]
            beta = [beta[j] + V[k, j] * c for j in range(D)]
        return float(mp.fsum(mp.mpf(float(Z[t, j])) * beta[j] for j in range(D)))


def prequential_oracle(Z, Y, **params):
    """Oracle prequential predictions, the window condition numbers and the final β."""
    Y = Y.reshape(Y.shape[0], -1)
    pred = np.zeros_like(Y, dtype=float)
    kappa = np.ones(Z.shape[0])
    for t in range(Z.shape[0]):
        beta, kappa[t] = window_lstsq(Z, Y, t, **params)
        pred[t] = Z[t] @ beta
    beta, _ = window_lstsq(Z, Y, Z.shape[0], **params)
    return pred, kappa, beta


def augmented_ridge(A, B, alpha):
    """``lstsq([A; √α I], [B; 0])``: the textbook ridge oracle (``O(D³)``, small D only)."""
    D = A.shape[1]
    A_aug = np.vstack([A, np.sqrt(alpha) * np.eye(D)])
    B_aug = np.vstack([B, np.zeros((D, B.shape[1]))])
    return np.linalg.lstsq(A_aug, B_aug, rcond=None)[0]


@lru_cache(maxsize=None)
def abo_features(D, n_steps):
    """The ABO synthetic series, 7 lags, ``D`` random Fourier features (σ = 1): ``(Z, y)``
    with ``n_steps`` rows (cached: the oracle tests share them)."""
    from sklearn_orfit import RandomFourierFeatures
    from sklearn_orfit.datasets import make_abo_series, make_lagged

    X, y = make_lagged(make_abo_series(n_steps + 7, random_state=0), 7)
    Z = RandomFourierFeatures(D, sigma=1.0, random_state=0).fit_transform(X)
    return Z, y
