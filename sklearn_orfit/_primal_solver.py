"""The primal route for ``D < N``: a factor of a fixed core, Woodbury for the periphery.

Window of unit rows ``ẑ_i`` with norms ``s_i`` and weights ``w_i = λ^age``; with
``ω_i = w_i s_i²`` the normal equations of the window are ::

    (Σ_i ω_i ẑ_i ẑ_iᵀ + α I) β = Σ_i w_i s_i y_i ẑ_i

Every ``b`` rows (a *block*), the rows that stay in the window for the whole block — the
core ``A`` — give ``S_A = Σ_A ω ẑẑᵀ + αI``, Jacobi-scaled by ``d = sqrt(diag S_A)`` and
factorised, ``S_A = L_A L_Aᵀ`` (``O(N·D²)`` a block, ``O(N·D²/b)`` a row). Weights are
taken relative to the start of the block (a common scale of ``S`` and the right-hand side
does not change ``β`` when ``α = 0``; with ``α > 0`` there is no forgetting), so nothing is
rescaled row by row. The other rows of the block's windows — the ``ℓ ≤ b`` oldest rows,
which leave during the block, and the new rows — form the periphery; a window is the core
plus a contiguous range ``I`` of it, ``S_I = S_A + U_I Ω_I U_Iᵀ`` (``U`` the periphery's
rows). With ``r_p = L_A⁻¹ ẑ_p`` computed once per row, ``T_pq = r_p·r_q`` and
``ν = √ω``, Woodbury's identity gives ::

    S_I⁻¹ = L_A⁻ᵀ (I − R_I ν C⁻¹ ν R_Iᵀ) L_A⁻¹,    C = I + ν T_II ν   (SPD, ≥ I)

so a prediction costs ``O(D·b + b³)`` and the coefficients one more triangular solve;
``C`` is factorised from scratch for every window (no recursion, no drift). Windows too
ill-conditioned for the normal equations (condition estimate above
:data:`GRAM_KAPPA_MAX`) go to the orthogonal route (:class:`SlidingQR`).
"""

import numpy as np
from scipy.linalg import cho_solve, lapack
from scipy.linalg.blas import dtrsv

from ._window_solvers import GRAM_KAPPA_MAX, BlockRow, CoreBlockSolver

__all__ = ["PrimalSolver", "primal_block_size"]

# weights relative to the start of a block stay below this factor (λ^-b)
_WEIGHT_RANGE = 1e100


def primal_block_size(window_size, n_features, forgetting_factor):
    """``b ≈ (N·D²)^¼`` (core ``O(N·D²/b)`` against periphery ``O(b³)``), capped so that
    the relative weights ``λ^-b`` stay below ``1e100``."""
    b = max(8, round((window_size * n_features**2) ** 0.25))
    if forgetting_factor < 1.0:
        b = min(b, int(np.log(_WEIGHT_RANGE) / -np.log(forgetting_factor)))
    return int(max(1, min(b, window_size)))


def _probe_vectors(D):
    i = np.arange(D, dtype=np.float64)[:, None]
    v = np.sin(12.9898 * i + 78.233 * np.array([1.0, 2.0])) * 2.0 + np.array([0.1, -0.1])
    return v / np.linalg.norm(v, axis=0)


class _PrimalBlock:
    """Core factor and periphery of one block (see the module docstring)."""

    def __init__(self, *, buf, block_size, lam, alpha, c):
        self.buf = buf
        self.log_lam = np.log(lam) if lam < 1.0 else 0.0
        self.n0 = buf.n
        self.ell = max(0, buf.n + block_size - buf.N)
        self.b = block_size
        slots = buf.slots()
        self.slots_A = slots[self.ell :]
        P = self.ell + block_size
        D = buf.Zh.shape[1]
        self.slot = np.empty(P, dtype=np.intp)
        self.slot[: self.ell] = slots[: self.ell]
        self.m = self.j = self.dropped = 0
        # log relative weight of the rows at the start of the block: age·log λ
        self.age0 = np.arange(buf.n - 1, -1, -1, dtype=float)
        sA = buf.s[self.slots_A]
        log_w = self.age0[self.ell :] * self.log_lam
        with np.errstate(divide="ignore"):
            log_om = log_w + 2.0 * np.log(np.where(sA > 0, sA, 0.0))
        # common scale of the block: the largest core weight ω (1 if the core is empty)
        self.log_c0 = float(log_om.max()) if sA.size and np.isfinite(log_om.max()) else 0.0
        if alpha > 0:
            # keep α/c0 finite: rows far below the ridge then simply underflow to nothing
            self.log_c0 = max(self.log_c0, float(np.log(alpha)) - 600.0)
        om = np.exp(log_om - self.log_c0)
        ZA = buf.Zh[self.slots_A]
        # S_A = Σ_A ω ẑẑᵀ + αI (relative to c0), Jacobi-scaled: d = sqrt(diag S_A)
        S = (ZA * om[:, None]).T @ ZA
        S.flat[:: D + 1] += alpha * np.exp(-self.log_c0)
        d = np.sqrt(S.diagonal().copy())
        d[~(d > 0)] = 1.0
        self.d = d
        S /= d[:, None]
        S /= d[None, :]
        self.nSA = float(np.sqrt(np.einsum("ij,ij->", S, S)))
        L, info = lapack.dpotrf(S, lower=1, clean=1, overwrite_a=1)
        anorm = np.abs(S).sum(axis=0).max() if info == 0 else 0.0
        rcond, info2 = lapack.dpocon(L, anorm, uplo="L") if info == 0 else (0.0, 1)
        self.core_ok = bool(info == 0 and info2 == 0 and rcond * GRAM_KAPPA_MAX >= 1.0)
        self.L = np.asfortranarray(L)
        # h_A = L_A⁻¹ (b_A/d),  b_A = Σ_A w s y ẑ (relative to c0)
        with np.errstate(divide="ignore"):
            coef_y = np.exp(log_w - self.log_c0 + np.log(np.where(sA > 0, sA, 0.0)))
        bA = (ZA * coef_y[:, None]).T @ buf.Y[self.slots_A] / d[:, None]
        self.h = self._fwd(bA)
        self.phi = self._fwd(_probe_vectors(D))  # L_A⁻¹ v for two fixed unit probes
        self.R = np.zeros((D, P), order="F")  # r_p = L_A⁻¹ (ẑ_p/d)
        self.T = np.zeros((P, P))  # r_p·r_q
        self.nu = np.zeros(P)  # √ω_p (relative to c0)
        self.wy = np.zeros((P, c))  # w s y (relative to c0)
        self.e = np.zeros((P, c))  # r_p·h_A
        self.rphi = np.zeros((P, 2))  # r_p·φ
        self.zd2 = np.zeros(P)  # ‖ẑ_p/d‖², for ‖S‖_F
        for q in range(self.ell):
            sq = self.slot[q]
            self._enter(buf.Zh[sq], buf.s[sq], buf.Y[sq], log_w=self.age0[q] * self.log_lam)

    def _fwd(self, V):
        if not self.core_ok:
            return np.zeros(V.shape)
        return lapack.dtrtrs(self.L, V, lower=1)[0]

    def add_row(self, zh, s, y):
        """Enter a new row (relative weight ``λ^-(j+1)``) into the periphery."""
        return self._enter(zh, s, y, log_w=-(self.j + 1) * self.log_lam)

    def _enter(self, zh, s, y, *, log_w):
        p = self.m
        zd = zh / self.d
        r = dtrsv(self.L, zd, lower=1) if self.core_ok else np.zeros(zd.shape)  # r = L_A⁻¹ ẑ/d
        self.R[:, p] = r
        q = slice(self.dropped, p)
        t = r @ self.R[:, q]
        self.T[p, q] = self.T[q, p] = t
        self.T[p, p] = r @ r
        with np.errstate(divide="ignore", over="ignore"):
            ls = np.log(s) if s > 0 else -np.inf
            self.nu[p] = np.exp(0.5 * (log_w - self.log_c0) + ls)
            self.wy[p] = y * np.exp(log_w - self.log_c0 + ls)
        self.e[p] = r @ self.h
        self.rphi[p] = r @ self.phi
        self.zd2[p] = zd @ zd
        self.m += 1
        return BlockRow(None, r, t)

    def capacitance(self, I):
        """``C = I + ν T_II ν`` for the periphery range ``I``."""
        nu = self.nu[I]
        C = self.T[I, I] * nu[:, None] * nu[None, :]
        C.flat[:: C.shape[0] + 1] += 1.0
        return C


class PrimalSolver(CoreBlockSolver):
    """Windowed least squares for ``D < N`` in ``O(D² + D·b + b³)`` a row.

    Parameters
    ----------
    window_size : int
        ``N``.
    n_features : int
        ``D``.
    n_targets : int
        Columns of the targets.
    forgetting_factor : float
        ``λ``.
    alpha : float
        Ridge ``α``; ``alpha > 0`` requires ``forgetting_factor == 1`` on this route.
    block_size : int, default=None
        ``b``; :func:`primal_block_size` when None.

    Notes
    -----
    Per row: one triangular solve with the ``D×D`` core factor for the new row and two for
    the condition probes (``O(D²)``), ``O(D·b + b³)`` for the periphery, and
    ``O(N·D²/b + D³/b)`` amortised for the core. Memory: the window (``N×D``), the core
    factor (``D×D``) and the periphery (``O(D·b + b²)``).
    """

    orientation = "rows"

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha, block_size=None):
        if alpha > 0 and forgetting_factor != 1.0:
            raise ValueError("the primal route takes a ridge only without forgetting")
        super().__init__(
            window_size=window_size, n_features=n_features, n_targets=n_targets,
            forgetting_factor=forgetting_factor, alpha=alpha, gram=False,
            block_size=block_size or primal_block_size(window_size, n_features, forgetting_factor),
        )

    def _new_block(self):
        return _PrimalBlock(buf=self.buf, block_size=self.b, lam=self.lam, alpha=self.alpha, c=self.c)

    def _solve_window(self, blk, fact, I, V):
        """``(I − R_I ν C⁻¹ ν R_Iᵀ) V`` for columns ``V`` in the ``L_A⁻¹``-image."""
        nu = blk.nu[I]
        if not nu.size:
            return V
        m = cho_solve((fact, True), nu[:, None] * (blk.R[:, I].T @ V), check_finite=False)
        return V - blk.R[:, I] @ (nu[:, None] * m)

    def _predict(self, blk, fact, row, s):
        # ŷ/s = ρ·h_I − (ν∘t)ᵀ C⁻¹ ν∘(R_Iᵀ h_I),  h_I = h_A + R_I (w s y)_I,  ρ = L_A⁻¹ ẑ/d
        I = slice(blk.dropped, blk.m - 1)
        hI = blk.h + blk.R[:, I] @ blk.wy[I]
        return s * (row.r @ self._solve_window(blk, fact, I, hI))

    def _coef(self, blk, fact):
        # β = d⁻¹ L_A⁻ᵀ (I − R_I ν C⁻¹ ν R_Iᵀ) h_I
        I = slice(blk.dropped, blk.m)
        hI = blk.h + blk.R[:, I] @ blk.wy[I]
        return lapack.dtrtrs(blk.L, self._solve_window(blk, fact, I, hI), lower=1, trans=1)[0] / blk.d[:, None]

    def _factor_window(self, blk):
        """Cholesky factor of ``C``, or None for the orthogonal route."""
        if not blk.core_ok:
            return None
        I = slice(blk.dropped, blk.m)
        if blk.m > blk.dropped:
            fact, info = lapack.dpotrf(blk.capacitance(I), lower=1, clean=1)
            if info != 0:
                return None
        else:
            fact = np.zeros((0, 0))
        # condition estimate ‖S_I‖_F · max_v ‖S_I⁻¹v‖ for two fixed unit probes:
        #   ‖S_A‖_F + Σ ω_p ‖ẑ_p/d‖² ≥ ‖S_I‖_F,   S_I⁻¹v = L_A⁻ᵀ (I − R_I ν C⁻¹ ν R_Iᵀ) φ
        w = self._solve_window(blk, fact, I, blk.phi) if blk.m > blk.dropped else blk.phi
        inv = np.sqrt(np.einsum("ik,ik->k", *(lapack.dtrtrs(blk.L, w, lower=1, trans=1)[0],) * 2).max())
        with np.errstate(invalid="ignore", over="ignore"):
            kappa = (blk.nSA + np.sum(blk.nu[I] ** 2 * blk.zd2[I])) * inv
        if not kappa <= GRAM_KAPPA_MAX:
            return None
        return fact
