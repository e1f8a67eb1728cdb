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
``C`` is factorised from scratch for every window (no recursion, no drift). A window
whose condition estimate lies between :data:`GRAM_KAPPA_MAX` and
:data:`KAPPA_REFINE_MAX` (or whose core's exceeds :data:`GRAM_KAPPA_MAX`, or whose
periphery so outweighs the core that Woodbury's subtraction may lose more than
the Gram route itself: ``‖S_I‖·‖S_A⁻¹‖`` above :data:`WOODBURY_KAPPA_MAX`) takes one step of
refinement with its normal residual computed from its rows (corrected seminormal
equations, ``O(N_eff·D)``, ``N_eff`` the rows not aged below rounding); a ridge with
forgetting solves for the correction as for the solution (each window's own matrix, or
the iteration). Up to :data:`KAPPA_REFINE_TWICE` (and :data:`WOODBURY_REFINE_TWICE`) a
window whose first correction exceeds :data:`REFINE_LEFT` of ``β`` takes a second step,
which must show the steps contracting. Windows worse than that, or whose steps do not
contract, go to the orthogonal route (:class:`SlidingR` for a window of at least ``2D``
rows, :class:`SlidingQR` otherwise).
"""

import numpy as np
from scipy.linalg import lapack

from .._docstrings import fill_doc
from ._kernels import (
    EPS, GRAM_KAPPA_MAX, KAPPA_REFINE_MAX, KAPPA_REFINE_TWICE, REFINED_TOL, cho_solve_checked, cholesky,
    keeps_cutoff, pad_windows, probe_columns, probes, scatter_rows, solve_shifted, solve_stack,
)
from ._window import unit_scale
from ._window_solvers import (
    FAST, ORTHOGONAL, REFINE, CoreBlockSolver, Predicted, ReferenceWindow, _principal_blocks, coef_directly,
    expected_steps, forgetting_block_size, ridge_share, weight_block_size,
)

__all__ = ["PrimalSolver", "direct_shifts", "primal_block_size"]

#: Largest ``‖S_I‖_F · max_v ‖S_A⁻¹v‖`` (window against core, over the two probes of the
#: windows' own condition estimates) for which a window is solved through the core's
#: factor alone: Woodbury's rounding is about ``eps·‖S_I‖·‖S_A⁻¹‖``, so the limit is the
#: Gram route's own (:data:`~._kernels.GRAM_KAPPA_MAX`, about 2e-10 relative), measured
#: as the window's condition is; beyond it the window is refined against its rows. The
#: periphery (the block's newest rows) outweighs the core by up to ``λ^-b``: with strong
#: forgetting and no ridge, well-conditioned windows of Gaussian rows reached 10^8.5 by the
#: 1-norm estimate (``N = 60``, ``D = 30``, ``λ = 0.7``, ``κ = 988``), and a limit of 1e9
#: on it left them 2.7e-8 relative from lstsq (15.8 bound units; 54 at ``N = 200``,
#: ``D = 16``, ``λ = 0.5``). The 1-norm estimate ``‖S_A⁻¹‖₁`` (loose by up to ``D``) with
#: this limit refined every window of random Fourier features at ``N = 1000``,
#: ``D = 256``, ``λ = 1`` (2× the time), where the probes see a core as strong as the
#: window. Windows of row blocks scaled 10^±3 whose periphery outweighs the core reached
#: 10^11 and were wrong by 10^-4 relative while their probes read 10^5.
WOODBURY_KAPPA_MAX = GRAM_KAPPA_MAX

#: Largest ``‖S_I‖_F · ‖S_A⁻¹‖₁`` for which a window is refined against its rows with one
#: step rather than two. A step computes the normal residual from the rows and solves for
#: the correction through the same factor, whose relative rounding ``ε`` (about
#: ``eps·‖S_I‖·‖S_A⁻¹‖``; 1e-4 measured at 1e11, above) it contracts the error by: after
#: one step about ``ε² + eps·κ`` relative, ``ε² ≤ 1e-10`` here, below the oracle bound's
#: floor of 1e-9. The estimate is an upper bound, loose by up to ``D`` (1-norm and
#: Frobenius norm against 2-norms): measured 10^9.0-10^9.1 on RFF windows of ``D = 512``
#: (σ = 0.5, ``N = 1000``, ``λ = 0.999``, ``α = 1e-6``) whose Gram condition estimates were
#: 10^7.4-10^7.6, the core's about the same; before, all went to the orthogonal route
#: (15 ms a row against 1.2 ms).
WOODBURY_REFINE_MAX = 1e10

#: Up to this, two steps (``ε³``, ``ε ≈ 1e-3`` at most); beyond it the orthogonal route.
#: Measured 10^10.6-10^11.7 on the same windows with ``λ = 0.99``, ``α = 0`` (Gram
#: condition estimates 10^9.1-10^9.6, the core's 10^10.6-10^11.3): it is the core's
#: condition, not a periphery outweighing it.
WOODBURY_REFINE_TWICE = 1e12

#: What a refinement of two steps may leave, relative to ``max |β|``. A window that may
#: take two steps (condition or Woodbury estimate beyond one step's limits) takes the
#: second unless the first changed ``β`` by at most this (what is left is then below it,
#: whatever the step's contraction). After the second, the contraction the two steps show,
#: ``ρ = |δ₂|/|δ₁|``, must leave ``ρ·|δ₂|`` within it, else the window goes to the
#: orthogonal route: a step contracts by the correction's relative rounding, at most about
#: 1e-3 in theory, but a window of a ridge with forgetting (``N = 80``, ``D = 30``,
#: ``λ = 0.9999``, ``α = 1e-9``, singular values over 10^5.5 then isotropic rows) showed
#: second corrections as large as its first (10^-6.7 against 10^-6.2), and accepting it
#: left 1.92 bound units. On RFF windows (``N = 1000``, ``D = 512``, ``λ = 0.99``,
#: ``α = 0``) the first corrections were 10^-8.0-10^-6.9 of ``max |β|`` and the second
#: contracted them by 1e-4 or more. Below the oracle bound's floor of 1e-9 by 10.
REFINE_LEFT = 1e-10

#: A ridge with forgetting whose corrections are solved by the block's iteration: the
#: largest first correction, relative to ``max |β|``, after which one step of refinement
#: is trusted; beyond it the window takes the second step (with the same check of its
#: contraction). One step contracted by far less than ``κ·eps`` there: ``N = 40``,
#: ``D = 39``, ``λ = 0.99``, ``α = 1e-6``, weights 0.5-2 (condition estimates 1e8, within
#: one step's limit) had first corrections up to 2.5e-7 of ``β`` and were left 3.4e-9 from
#: it (3.4 bound units), a contraction of 1e-2; a second step where the first exceeded
#: this left 0.25 units. Windows solved directly, or without forgetting, contracted as
#: expected on the same rows (≤ 3e-4 units with one step).
REFINE_ONCE = 1e-8

#: Largest ``D`` for which a ridge with forgetting may form and factorise each window's own
#: matrix ``P + δΣ`` (see :func:`direct_shifts`). Measured against the iteration (one BLAS
#: thread, ``α`` from 1e-12 to 10, the sweep's six kinds of data): at ``D = 64``,
#: ``λ = 0.9`` 2.3-2.6× less time a row after the fill (median); at ``D = 90``-``96``
#: 1.2-1.5× less at the median but up to 1.7× more where a tiny ridge sends the wider
#: blocks' windows to the orthogonal route, and at ``λ = 0.999`` 1.25× more.
DIRECT_SHIFT_MAX_D = 64


def _full_block_size(window_size, n_features, forgetting_factor):
    """``b ≈ 3√D``, capped so that the relative weights ``λ^-b`` stay below ``1e100``."""
    b = min(max(8, round(3.0 * np.sqrt(n_features))), weight_block_size(forgetting_factor))
    return int(max(1, min(b, window_size)))


def direct_shifts(window_size, n_features, forgetting_factor, alpha):
    """Whether a ridge with forgetting solves each window's matrix ``P + δΣ`` directly.

    The iteration against the block's factor (:func:`~._kernels.solve_shifted`) needs the
    shifts of a block within :data:`~._window_solvers.SHIFT_SPREAD`, which at ``λ = 0.9``
    allows blocks of 4 rows: the core's factorisation and the block's fixed costs then
    come every 4 rows. When that limit is shorter than the full block and ``D`` is small
    (:data:`DIRECT_SHIFT_MAX_D`), the blocks keep their full length and each window's
    ``D×D`` matrix is formed and solved (``O(D²·b + D³)`` a row, no iteration).
    """
    return bool(alpha > 0 and forgetting_factor < 1.0 and n_features <= DIRECT_SHIFT_MAX_D
                and forgetting_block_size(forgetting_factor)
                < _full_block_size(window_size, n_features, forgetting_factor))


def primal_block_size(window_size, n_features, forgetting_factor, alpha=0.0):
    """``b ≈ 3√D`` (the core's ``O(D³/b)`` against the periphery's ``O(b³)``), capped so
    that the relative weights ``λ^-b`` stay below ``1e100`` and, for a ridge with
    forgetting solved by iteration, so that the shifts stay within
    :data:`~._window_solvers.SHIFT_SPREAD` (see :func:`direct_shifts`).

    The constant was measured (two solvers fed the same calls alternately, one period of
    ``N`` rows): against ``2√D``, 4 % less time a row at ``D = 256``, 13 % at ``D = 1024``,
    11 % at ``D = 64``; ``4√D`` is slower again at ``D = 256``.
    """
    b = _full_block_size(window_size, n_features, forgetting_factor)
    if (alpha > 0 and forgetting_factor < 1.0
            and not direct_shifts(window_size, n_features, forgetting_factor, alpha)):
        b = min(b, forgetting_block_size(forgetting_factor))
    return int(max(1, b))


class _PrimalBlock(ReferenceWindow):
    """Core factor and periphery of one block (see the module docstring)."""

    # max(d)/min(d) (set in __init__; blocks of a model saved before it was kept: 1)
    d_spread = 1.0
    # whether the core's sums were formed from its rows rather than by subtraction
    fresh = False
    # max_v ‖S_A⁻¹v‖ over the probes (blocks of a model saved before it was kept: None,
    # the 1-norm estimate inv_SA is taken)
    inv_SA_probe = None
    # periphery arrays, by the axes their periphery position runs along: the restore of an
    # interrupted call zeroes them beyond the restored counter ``m`` (as when created)
    PERIPHERY = {"slot": (0,), "R": (1,), "T": (0, 1), "nu": (0,), "wy": (0,), "e": (0,),
                 "rphi": (0,), "zd2": (0,), "U": (1,)}

    def __init__(self, *, buf, block_size, lam, alpha, c, gram, direct, keep_matrix=False):
        self.buf = buf
        # a ridge with forgetting: the block's factor has the ridge of its reference
        # window j_ref (its middle); window j's is λ^-(j − j_ref) times it (see delta)
        self._set_reference(alpha=alpha, forgetting_factor=lam, block_size=block_size)
        self.n0 = buf.n
        self.ell = max(0, buf.n + block_size - buf.N)
        self.b = block_size
        slots = buf.slots()
        self.slots_A = slots[self.ell :]
        P = self.ell + block_size
        D = buf.Zh.shape[1]
        self.slot = np.zeros(P, dtype=np.intp)  # ring slot of each periphery position
        self.slot[: self.ell] = slots[: self.ell]
        self.m = self.j = self.dropped = 0
        # log relative weight of the rows at the start of the block: age·log λ
        self.age0 = np.arange(buf.n - 1, -1, -1, dtype=float)
        # the window's weighted Gram matrix, relative to c0 = e^L (see _WindowGram)
        self.log_c0 = gram.L
        self._core_w = None  # the core rows' weights ω (core_weights), when first asked
        old = self.slot[: self.ell]
        self.old_rows = (buf.Zh[old].copy(), buf.s[old].copy(), self.age0[: self.ell].copy())
        self.old_y = buf.Y[old].copy()
        # S_A = Σ_A ω ẑẑᵀ + αI = (window's Gram) − (old periphery rows), Jacobi-scaled
        Zo, so, ao = self.old_rows
        w = dict(log_lam=self.log_lam, log_c0=self.log_c0)
        om_old = _weights(so, ao, power=2, **w)
        S = gram.M - (Zo * om_old[:, None]).T @ Zo
        b_A = gram.rhs - Zo.T @ (_weights(so, ao, power=1, **w)[:, None] * self.old_y)
        # the subtraction rounds at about eps times the weight subtracted and the weight M
        # carries (unit rows: a row's weight is its share of the trace). In an ordinary
        # window M carries at most its trace (_WindowGram's rule) and the rows leaving are
        # a block's share of it, about twice what stays at most; beyond 4 times (a row of
        # weight 1e8 leaving left 1e-8 of the window's scale in S, 180 bound units) the
        # core's sums are formed from its rows (O(n_A·D²)), as a from-scratch sum rounds
        self.fresh = bool(not om_old.sum() + gram.mass <= 4.0 * np.trace(S))
        if self.fresh:
            A, age_A = self.slots_A, self.age0[self.ell :]
            S = _weighted_outer(buf.Zh[A], buf.s[A], age_A, **w)
            b_A = buf.Zh[A].T @ (_weights(buf.s[A], age_A, power=1, **w)[:, None] * buf.Y[A])
        # M_A = Σ_A ω ẑẑᵀ: the window's Gram matrix once the old rows have left, which is
        # where the next block's starts from (_WindowGram.advance adds the new rows to it)
        self.M_A = S.copy()
        S.flat[:: D + 1] += alpha * np.exp(-self.log_c0 - self.j_ref * self.log_lam)
        d = np.sqrt(S.diagonal().copy())
        # max(d)/min(d) over the features the core's rows reach: κ(S) ≤ κ(Ŝ)·spread² for
        # S = d Ŝ d (see keeps_cutoff)
        self.d_spread = float(d.max() / d[d > 0].min()) if np.any(d > 0) else 1.0
        d[~(d > 0)] = 1.0
        self.d = d
        # Σ: the reference ridge in the scaled coordinates (β̂ = dβ)
        self.ridge = alpha * np.exp(-self.log_c0 - self.j_ref * self.log_lam) / (d * d)
        self.n_ridge = float(np.linalg.norm(self.ridge))  # ‖Σ‖_F
        S /= d[:, None]
        S /= d[None, :]
        self.nSA = float(np.sqrt(np.einsum("ij,ij->", S, S)))
        # a ridge with forgetting at small D solves each window's own matrix, and the
        # coefficients a call ends with may be solved so (PrimalSolver.coef): that needs
        # the scaled core matrix and the periphery's scaled rows ẑ_p/d (none otherwise)
        self.direct = bool(direct)
        keep_matrix = keep_matrix or self.direct
        self.S_A = S.copy() if keep_matrix else None
        self.U = np.zeros((D if keep_matrix else 0, P), order="F")
        # the core itself must be well conditioned (its factor is what every window's
        # solve and condition probe go through): LAPACK's 1-norm estimate, allowed the
        # factor D by which κ₁ may exceed κ₂, against the largest condition a window may
        # have (KAPPA_REFINE_TWICE: windows may be refined twice). Only windows of a core
        # within GRAM_KAPPA_MAX may take the fast route: Woodbury's rounding grows with
        # the core's condition, which the probes cannot see
        kappa_max = KAPPA_REFINE_TWICE * D
        anorm = np.abs(S).sum(axis=0).max(initial=0.0)
        self.L, self.core_ok, self.inv_SA = cholesky(S, kappa_max=kappa_max, inverse_norm=True)
        # every window's ‖S_I‖_F·‖S_A⁻¹‖₁ is at least the core's: above
        # WOODBURY_REFINE_TWICE each would go to the orthogonal route, after its solve
        self.core_ok = bool(self.core_ok and self.nSA * self.inv_SA <= WOODBURY_REFINE_TWICE)
        self.core_fast = bool(self.core_ok and anorm * self.inv_SA <= GRAM_KAPPA_MAX * D)
        # h_A = L_A⁻¹ (b_A/d),  b_A = Σ_A w s y ẑ (relative to c0)
        # b_A = Σ_A w s y ẑ = (the window's, carried) − (the old periphery rows')
        self.b_A = b_A
        self.h = self._fwd(self.b_A / d[:, None])
        self.phi = self._fwd(probes(D))  # L_A⁻¹ v for two fixed unit probes
        # max_v ‖S_A⁻¹v‖ over the same probes, S_A⁻¹v = L_A⁻ᵀφ: the core's inverse as the
        # windows' condition estimates see theirs (for Woodbury's limit on the fast route)
        self.inv_SA_probe = np.inf
        if self.core_ok:
            psi = lapack.dtrtrs(self.L, self.phi, lower=1, trans=1)[0]
            self.inv_SA_probe = float(np.sqrt(np.einsum("dk,dk->k", psi, psi).max()))
        self.R = np.zeros((D, P), order="F")  # r_p = L_A⁻¹ (ẑ_p/d)
        self.T = np.zeros((P, P))  # r_p·r_q
        self.nu = np.zeros(P)  # √ω_p (relative to c0)
        self.wy = np.zeros((P, c))  # w s y (relative to c0)
        self.e = np.zeros((P, c))  # r_p·h_A
        self.rphi = np.zeros((P, 2))  # r_p·φ
        self.zd2 = np.zeros(P)  # ‖ẑ_p/d‖², for ‖S‖_F
        self._enter(buf.Zh[old], buf.s[old], buf.Y[old], log_w=self.age0[: self.ell] * self.log_lam)

    def _fwd(self, V):
        if not self.core_ok:
            return np.zeros(V.shape)
        return lapack.dtrtrs(self.L, V, lower=1)[0]

    def add_rows(self, Zh, s, Y, *, P_old=None, P_new=None):
        """Enter new rows (relative weights ``λ^-(j+1)``, ``j`` their number in the block)."""
        j = self.j + np.arange(Zh.shape[0])
        self._enter(Zh, s, Y, log_w=-(j + 1) * self.log_lam)

    def _enter(self, Zh, s, Y, *, log_w):
        n, m, lo = Zh.shape[0], self.m, self.dropped
        if not n:
            return
        new, live = slice(m, m + n), slice(lo, m + n)
        Zd = Zh / self.d
        # r = L_A⁻¹ ẑ/d for every row, T_pq = r_p·r_q
        R = lapack.dtrtrs(self.L, Zd.T, lower=1)[0] if self.core_ok else np.zeros(Zd.T.shape)
        self.R[:, new] = R
        if self.U.shape[0]:
            self.U[:, new] = Zd.T
        T = R.T @ self.R[:, live]
        self.T[new, live] = T
        self.T[live, new] = T.T
        with np.errstate(divide="ignore", over="ignore"):
            ls = np.log(np.where(s > 0, s, 0.0))
            self.nu[new] = np.exp(0.5 * (log_w - self.log_c0) + ls)  # √ω
            self.wy[new] = Y * np.exp(log_w - self.log_c0 + ls)[:, None]  # w s y
        self.e[new] = R.T @ self.h
        self.rphi[new] = R.T @ self.phi
        self.zd2[new] = np.einsum("ij,ij->i", Zd, Zd)
        self.m += n

    def core_weights(self):
        """``ω = λ^age s²/c0`` (at most 1) and ``λ^age s y/c0`` of the core's rows (by
        :attr:`slots_A`): the weights and targets of its normal equations' terms."""
        if self._core_w is None:
            A = self.slots_A
            w = dict(log_lam=self.log_lam, log_c0=self.log_c0)
            s, age = self.buf.s[A], self.age0[self.ell :]
            self._core_w = (_weights(s, age, power=2, **w), _weights(s, age, power=1, **w)[:, None] * self.buf.Y[A])
        return self._core_w

    def capacitance(self, I):
        """``C = I + ν T_II ν`` for the periphery range ``I``."""
        nu = self.nu[I]
        C = self.T[I, I] * nu[:, None] * nu[None, :]
        C.flat[:: C.shape[0] + 1] += 1.0
        return C


def _weights(s, age, *, power, log_lam, log_c0):
    """``λ^age s^power / c0`` (``ω`` for ``power=2``, the right-hand side's for 1)."""
    with np.errstate(divide="ignore", over="ignore"):
        return np.exp(age * log_lam + power * np.log(np.where(s > 0, s, 0.0)) - log_c0)


def _weighted_outer(Zh, s, age, *, log_lam, log_c0):
    """``Σ_i λ^age_i s_i² ẑ_i ẑ_iᵀ / c0``."""
    om = _weights(s, age, power=2, log_lam=log_lam, log_c0=log_c0)
    return (Zh * om[:, None]).T @ Zh


class _WindowGram:
    """The weighted Gram matrix of the window, carried from block to block.

    invariant: ``e^L · M = Σ_window λ^age s² ẑẑᵀ`` (to rounding).

    At each block start the rows learned since the last one are added and the rows that
    left are subtracted (``O(b·D²)``; the subtraction is the last block's ``M_A``, made
    when that block started); the scale ``e^L`` absorbs the ageing (``λ^b``).
    The rounding error of those additions and subtractions is at most ``eps`` times the
    weight they carried (``mass``); once that exceeds the window's own weight, or after
    ``N`` rows, ``M`` is recomputed from the window (``O(N·D²)``, ``O(D²)`` a row
    amortised), so the error stays that of a from-scratch sum.
    """

    def __init__(self, buf, *, log_lam, alpha):
        self.log_lam, self.alpha = log_lam, alpha
        self.refresh(buf)

    def refresh(self, buf):
        slots = buf.slots()
        age = np.arange(buf.n - 1, -1, -1, dtype=float)
        s = buf.s[slots]
        with np.errstate(divide="ignore"):
            log_om = age * self.log_lam + 2.0 * np.log(np.where(s > 0, s, 0.0))
        top = log_om.max(initial=-np.inf)
        self.L = float(top) if np.isfinite(top) else 0.0
        if self.alpha > 0:
            # keep α/e^L finite: rows far below the ridge then simply underflow to nothing
            self.L = max(self.L, float(np.log(self.alpha)) - 600.0)
        self.M = _weighted_outer(buf.Zh[slots], s, age, log_lam=self.log_lam, log_c0=self.L)
        wy = _weights(s, age, power=1, log_lam=self.log_lam, log_c0=self.L)[:, None] * buf.Y[slots]
        self.rhs = buf.Zh[slots].T @ wy  # e^L · rhs = Σ_window λ^age s y ẑ
        self.mass = 0.0
        self.rows = 0

    def advance(self, buf, prev):
        """Move from the start of block ``prev`` to now (``prev.j`` rows later)."""
        j = prev.j
        self.rows += j
        if self.rows >= buf.N:
            self.refresh(buf)
            return
        # ageing: e^L ← λ^j e^L;  the rows that left had weight λ^age0 s² at prev's start
        L_prev = self.L
        self.L += j * self.log_lam
        Zo, so, ao = prev.old_rows
        Zo, so, ao = Zo[: prev.dropped], so[: prev.dropped], ao[: prev.dropped]
        new = buf.slots()[buf.n - j :]
        age_new = np.arange(j - 1, -1, -1, dtype=float)
        sn = buf.s[new]
        w = dict(log_lam=self.log_lam)
        om_new = _weights(sn, age_new, power=2, log_c0=self.L, **w)
        wy_new = _weights(sn, age_new, power=1, log_c0=self.L, **w)
        om_left = _weights(so, ao, power=2, log_c0=L_prev, **w)
        if prev.dropped == prev.ell:
            # every old row of the block left: M − Σ_left ω ẑẑᵀ is the block's M_A (and
            # its b_A), computed at its start. M ← M_A + Σ_new ω ẑẑᵀ,  rhs ← b_A + Σ_new w s y ẑ
            Z, Y, om, wy = buf.Zh[new], buf.Y[new], om_new, wy_new
            M, rhs = prev.M_A, prev.b_A
            if prev.fresh:  # (M_A summed from its rows: it carries no rounding of earlier sums)
                self.mass, om_left = 0.0, om_left[:0]
        else:
            # M ← M + Σ_new ω ẑẑᵀ − Σ_left ω ẑẑᵀ,  rhs ← rhs + Σ_new w s y ẑ − Σ_left w s y ẑ
            Z = np.concatenate([buf.Zh[new], Zo])
            Y = np.concatenate([buf.Y[new], prev.old_y[: prev.dropped]])
            om = np.concatenate([om_new, -om_left])
            wy = np.concatenate([wy_new, -_weights(so, ao, power=1, log_c0=L_prev, **w)])
            M, rhs = self.M, self.rhs
        self.M = M + (Z * om[:, None]).T @ Z
        self.rhs = rhs + Z.T @ (wy[:, None] * Y)
        # the rounding carried: at most eps times the weight added and subtracted
        self.mass += float(np.abs(om_new).sum() + np.abs(om_left).sum())
        top = np.abs(self.M.diagonal()).max(initial=0.0)
        # (checked on the M a block is about to start from, not at the next block)
        if not 1e-100 < top < 1e100 or not np.isfinite(self.M).all() or not self.mass <= np.trace(self.M):
            self.refresh(buf)  # the rounding or the scale out of range: again from the window


@fill_doc()
class PrimalSolver(CoreBlockSolver):
    """Windowed least squares for ``D < N`` in ``O(D² + D·b + b³)`` a row.

    Parameters
    ----------
    {solver_parameters}
    block_size : int, default=None
        ``b``; :func:`primal_block_size` when None.

    Notes
    -----
    Per row: one triangular solve with the ``D×D`` core factor for the new row and two for
    the condition probes (``O(D²)``), ``O(D·b + b³)`` for the periphery, and
    ``O(N·D²/b + D³/b)`` amortised for the core; a window refined against its rows adds
    ``O(N·D + b³)`` (``O(D³)`` for a ridge with forgetting). A ridge with forgetting
    iterates each window, ``O(D²)`` a step: a window whose solution only predicts the next
    row is solved from that row (:meth:`_forgetting_predictions`, one column), whatever
    the number ``c`` of targets. Memory: the window (``N×D``), the core factor (``D×D``)
    and the periphery (``O(D·b + b²)``).
    """

    orientation = "rows"

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha, block_size=None):
        super().__init__(
            window_size=window_size, n_features=n_features, n_targets=n_targets,
            forgetting_factor=forgetting_factor, alpha=alpha, gram=False,
            block_size=block_size or primal_block_size(window_size, n_features, forgetting_factor, alpha),
        )
        # a ridge with forgetting solved window by window (fixed for the stream)
        self.direct = direct_shifts(window_size, n_features, forgetting_factor, alpha)
        # whether the blocks keep what the window's own matrix is formed from (PrimalSolver.coef):
        # with a ridge and forgetting (the block's route iterates), or where D is small
        # enough for the matrix to cost less than the block's fast route
        self.keep_matrix = bool((alpha > 0 and forgetting_factor < 1.0)
                                or coef_directly(n_features, n_targets, form=n_features**2 * self.b))
        self.n_refined = 0  # windows refined against the rows (between the two routes)

    def coef(self):
        """``β`` of the current window, shape ``(D, n_targets)``.

        From the window's own ``D×D`` matrix (:meth:`_matrix_beta`) where that costs less
        than the block's route (:func:`~._window_solvers.coef_directly`: small ``D``, or a
        ridge with forgetting, whose block route iterates all ``c`` columns; a one-row
        call pays this solve every row); a window too ill-conditioned for it takes the
        block's routes."""
        if self.buf.n:
            blk = self._block()
            if blk.S_A is not None and self.matrix_failed is not blk and self._coef_directly(blk):
                beta = self._matrix_beta(blk)
                if beta is not None:
                    return beta
                self.matrix_failed = blk  # (not tried again in this block)
        return super().coef()

    def _coef_directly(self, blk):
        steps = 0  # (without forgetting: the block's fast route alone)
        if blk.forgets:
            if blk.direct:
                return False  # (each window solves its own matrix already)
            steps = expected_steps(self.ridge_share, float(blk.delta(blk.window_steps(blk.m))))
        return coef_directly(self.D, self.c, steps, form=self.D * self.D * (blk.m - blk.dropped))

    def _matrix_beta(self, blk):
        """``β`` of the current window from its own matrix (:meth:`_window_matrices`),
        solved by :func:`~._kernels.cho_solve_checked`, or None where that is too
        ill-conditioned (its condition estimate against
        :data:`~._kernels.GRAM_KAPPA_MAX`; without a ridge, also where lstsq's cut-off
        could truncate the window, :meth:`_keeps_cutoff`) or overflows."""
        c = self.c
        hi = np.array([blk.m])
        M, rhs = self._window_matrices(blk, np.arange(blk.dropped, blk.m)[None], blk.nu[None, blk.dropped : blk.m],
                                       blk.wy[None, blk.dropped : blk.m], blk.delta(blk.window_steps(hi)))
        B = probe_columns(self.D, c)
        B[:, :c] = rhs[0]
        if not np.isfinite(B).all():
            return None  # (overflow: the block's route, on the rows themselves)
        x, kappa = cho_solve_checked(M[0], B, jacobi=True, diagonal_spread=False, return_kappa=True)
        if x is None or not np.isfinite(x).all() or (self.alpha == 0.0 and not self._keeps_cutoff(blk, kappa)):
            return None
        return x / blk.d[:, None]

    def _keeps_cutoff(self, blk, kappa):
        """:func:`~._kernels.keeps_cutoff` of windows of the block ``blk`` (without a
        ridge), by the spread of its Jacobi scale ``max(d)/min(d)``: features scaled 1e±8
        (lstsq truncates the small ones) were solved in full, outside the bound, while
        the scaled matrix's estimate could not see them."""
        return keeps_cutoff(kappa, blk.d_spread, n=self.N, D=self.D)

    @staticmethod
    def _window_matrices(blk, idx, nu, wy, delta):
        """The matrices and right-hand sides of windows ``core + periphery[idx_w]``.

        In the block's scaled coordinates (``x = dβ``) window ``w`` solves ::

            (S_A + δ_w Σ + Û_I ν² Û_Iᵀ) x = b_A/d + Û_I (w s y)_I,    Û = [ẑ_p/d]

        (``S_A`` with the reference ridge ``Σ``; ``δ = 0`` without forgetting): shapes
        ``(nw, D, D)`` and ``(nw, D, c)``, formed in ``O(D²·H)`` a window (padding: ``ν = 0``,
        ``w s y = 0``)."""
        U = np.moveaxis(blk.U[:, idx], 0, 1)  # (nw, D, H)
        M = (U * (nu * nu)[:, None, :]) @ np.swapaxes(U, 1, 2)
        M += blk.S_A
        if blk.forgets:
            diag = np.arange(M.shape[1])
            M[:, diag, diag] += np.asarray(delta)[:, None] * blk.ridge[None, :]
        return M, (blk.b_A / blk.d[:, None])[None] + U @ wy

    def _new_block(self):
        if self.block is None:
            self.gram = _WindowGram(self.buf, log_lam=np.log(self.lam) if self.lam < 1 else 0.0, alpha=self.alpha)
        else:
            self.gram.advance(self.buf, self.block)
        return _PrimalBlock(buf=self.buf, block_size=self._core_block_size(), lam=self.lam, alpha=self.alpha,
                            c=self.c, gram=self.gram, direct=self.direct, keep_matrix=self.keep_matrix)

    def _core_block_size(self):
        """The block size ``b' ≤ b`` of the next block: the largest whose core keeps
        ``D + D/16`` non-zero rows (else ``D``).

        Without a ridge (or with one below rounding against the rows) a core of fewer than
        ``D`` non-zero rows (zero-weight rows are zero rows) is singular (or as
        ill-conditioned), and every window of its block would go to the orthogonal route
        although the windows themselves are full rank. A window with ``n_eff > D``
        non-zero rows has a full-rank core for blocks short enough that the core keeps
        ``D`` of them: the core's factorisation is then ``O(D³/b')`` a row instead of
        ``O(D³/b)``; taken while that stays below the orthogonal route's ``O(N·D)`` a row
        (``b' ≥ D²/(12 N)``), else the block keeps ``b``.
        """
        buf = self.buf
        if buf.n == 0:
            return self.b
        s = buf.s[buf.slots()]  # oldest first
        if self.alpha > 0 and not self.direct:
            # with a ridge the core is never singular, but a core short of non-zero rows
            # has the ridge as its smallest eigenvalue, and its largest is at least the
            # mean Σ λ^age s²/D: a ridge far below that (α = 1e-12 against unit rows) is
            # as ill-conditioned as none, and the blocks are shortened as without one
            with np.errstate(under="ignore", over="ignore"):
                weight = float(np.sum((s * buf.sqrt_weights(self.lam)) ** 2))
            if not weight > GRAM_KAPPA_MAX * self.D * self.alpha:
                return self.b
        nonzero = s > 0
        # in_core[e] = non-zero rows of slots[e:], the core of a block with ell = e
        in_core = np.concatenate([np.cumsum(nonzero[::-1])[::-1], [0]])
        b = np.arange(1, self.b + 1)
        ell = np.minimum(buf.n, np.maximum(0, buf.n + b - buf.N))
        for need in (self.D + max(1, self.D // 16), self.D):
            ok = in_core[ell] >= need
            if ok.all():
                return self.b
            if ok.any():
                short = int(b[ok].max())  # in_core[ell] does not grow with b
                return short if short >= self.D**2 / (12 * self.N) else self.b
        return self.b

    def _solve_windows(self, blk, lo, hi, new, s_new=None, seg=None, keep=None, inert_x=None):
        """Solve windows ``core + periphery[lo_i, hi_i)`` together.

        Returns ``ok`` (False: the window goes to the orthogonal route), the predictions
        ``/s`` for the rows at periphery positions ``new`` and, per window, the
        coefficients' periphery part ``m = C⁻¹ ν∘(R_Iᵀ h_I)`` (with ``new``: only for the
        windows ``keep``).
        """
        c = self.c
        route, pred, parts = self._unsolved(lo.size)
        if not blk.core_ok:
            return route, pred, parts
        for sel, idx, valid in self._windows(lo, hi):
            nu = blk.nu[idx] * valid
            T = _principal_blocks(blk.T, idx, valid)
            # C = I + ν T_II ν,  R_Iᵀ h_I = e_I + T_II (w s y)_I
            C = T * nu[:, :, None] * nu[:, None, :]
            H = idx.shape[1]
            C[:, np.arange(H), np.arange(H)] += 1.0
            wy = blk.wy[idx] * valid[:, :, None]
            q = blk.e[idx] + T @ wy
            rhs = np.concatenate([nu[:, :, None] * q, nu[:, :, None] * blk.rphi[idx]], axis=2)
            # a capacitance matrix LAPACK finds singular (or not finite: rows whose scales
            # overflow it) sends its window to the orthogonal route
            sol, solved = solve_stack(C, rhs)
            m_y, m_phi = sol[:, :, :c], sol[:, :, c:]
            # condition estimate ‖S_I‖_F · max_v ‖S_I⁻¹v‖, two fixed unit probes v:
            #   ‖S_A‖_F + Σ ω_p ‖ẑ_p/d‖² ≥ ‖S_I‖_F,   S_I⁻¹v = L_A⁻ᵀ (φ − R_I ν C⁻¹ ν R_Iᵀφ)
            # R_I (ν∘m) for every window at once: scatter the coefficients, one product
            nwin = idx.shape[0]
            coef = np.zeros((blk.R.shape[1], nwin, 2))
            w_of = np.broadcast_to(np.arange(nwin)[:, None], idx.shape)
            coef[idx[valid], w_of[valid]] = (nu[:, :, None] * m_phi)[valid]  # padding aliases 0
            W = np.tile(blk.phi, nwin) - blk.R @ coef.reshape(coef.shape[0], -1)
            Wt = lapack.dtrtrs(blk.L, W, lower=1, trans=1)[0]
            inv = np.sqrt(np.einsum("dk,dk->k", Wt, Wt).reshape(nwin, 2).max(axis=1))
            with np.errstate(invalid="ignore", over="ignore"):
                norm = blk.nSA + (nu * nu * blk.zd2[idx]).sum(axis=1)  # ≥ ‖S_I‖_F
                kappa = norm * inv
                # Woodbury's cancellation: S_I⁻¹ is S_A⁻¹ minus a correction, each as large
                # as ‖S_A⁻¹‖, so its rounding is about eps·‖S_I‖·‖S_A⁻¹‖ relative; the
                # probes go through the same formula and cannot see it (rows far heavier
                # than the core's: the periphery dominates)
                woodbury = norm * blk.inv_SA
                # the same through the probes: judged as the window's own condition is
                woodbury_probe = norm * (blk.inv_SA if blk.inv_SA_probe is None else blk.inv_SA_probe)
            if blk.forgets:
                # window j's matrix is P + δΣ
                delta = blk.delta(blk.window_steps(hi[sel]))
                with np.errstate(invalid="ignore", divide="ignore"):
                    kappa = blk.widen_kappa(kappa, delta, blk.n_ridge / norm)
                    woodbury = blk.widen_kappa(woodbury, delta, blk.n_ridge / norm)
                    woodbury_probe = blk.widen_kappa(woodbury_probe, delta, blk.n_ridge / norm)
            fast = (kappa <= GRAM_KAPPA_MAX) & blk.core_fast & (woodbury_probe <= WOODBURY_KAPPA_MAX)
            # refined: one step, or two where the condition estimate or Woodbury's rounding
            # eps·‖S_I‖·‖S_A⁻¹‖ (relative) is larger; beyond, the orthogonal route
            two = (kappa > KAPPA_REFINE_MAX) | (woodbury > WOODBURY_REFINE_MAX)
            r = np.where(fast, FAST, REFINE)
            r[(kappa > KAPPA_REFINE_TWICE) | (woodbury > WOODBURY_REFINE_TWICE) | ~solved] = ORTHOGONAL
            if self.alpha == 0.0:
                r[~self._keeps_cutoff(blk, kappa)] = ORTHOGONAL
            if blk.forgets:
                fast = np.flatnonzero(r != ORTHOGONAL)
                # several targets: a window on the fast route is predicted from one column
                # (_forgetting_predictions): its next row's r = L⁻¹ẑ/d, or before an inert
                # row, that row's L⁻¹x/d (x·β = (x/d)·x_w = (L⁻¹x/d)ᵀX)
                by_t = np.zeros(fast.size, dtype=bool)
                if new is not None and c > 1 and not blk.direct:
                    by_t = r[fast] == FAST
                w = fast[~by_t]
                # (a window to refine is solved to REFINED_TOL: the step corrects the rest)
                X, ok, direct = self._forgetting_ridge(blk, idx[w], valid[w], nu[w], C[w], wy[w], m_y[w], delta[w],
                                                       tol=np.where(r[w] == REFINE, REFINED_TOL, 0.0),
                                                       pad=new is not None)
                if by_t.any():  # (their X stay zero: only their predictions are solved)
                    X = np.moveaxis(scatter_rows(np.moveaxis(X, 1, 0), ~by_t), 0, 1)
                    ok = scatter_rows(ok, ~by_t)
                    w = fast[by_t]
                    Rt = blk.R[:, new[sel][w]]
                    inert_t = np.zeros(w.size, dtype=bool) if keep is None else keep[sel][w]
                    if inert_t.any():
                        # (the inert rows at unit scale, m = max |x|, put back below)
                        x_scale, Xs = unit_scale(inert_x[new[sel][w[inert_t]] - seg["m0"]])
                        Rt = Rt.copy()
                        for i, jw in enumerate(np.flatnonzero(inert_t)):  # (one row at a time:
                            # its bits must not depend on the other inert rows of the call)
                            Rt[:, jw] = blk._fwd((Xs[i] / blk.d)[:, None])[:, 0]
                    pred_t, ok_t = self._forgetting_predictions(blk, idx[w], valid[w], nu[w], C[w], wy[w], m_y[w],
                                                                delta[w], Rt)
                    ok[by_t] = ok_t
                    for i, jw in enumerate(np.flatnonzero(inert_t)):  # the inert rows' x·β
                        if ok_t[jw]:
                            parts[sel.start + w[jw]] = Predicted(pred_t[jw] * x_scale[i])
                r[fast[~ok]] = ORTHOGONAL
                route[sel] = r
                refined = np.zeros(r.size, dtype=bool)
                if new is not None:
                    # ŷ/s = (ẑ/d)·x = r_newᵀ X,  X = Lᵀx
                    Rn = blk.R[:, new[sel][fast]]  # (D, nw)
                    pred[sel.start + fast] = np.einsum("dw,dwc->wc", Rn, X)
                    if by_t.any():
                        pred[sel.start + fast[by_t]] = pred_t
                    k = np.flatnonzero(ok & (r[fast] == REFINE))
                    if seg is not None and k.size:
                        w = fast[k]
                        ridge = (1.0 + delta[w])[:, None] * (blk.ridge * blk.d * blk.d)[None, :]
                        if direct is not None:  # each window's matrix M and solution x
                            x, M = direct[0][k], direct[1][k]
                            beta, good = self._refine_windows(
                                blk, idx[w], valid[w], seg, x / blk.d[None, :, None], ridge,
                                lambda G, j, M=M: self._direct_solve(blk, M[j], G), two[w])
                        else:  # the correction by the iteration (which may not converge)
                            beta, good = self._refine_shifted(blk, idx[w], valid[w], seg, nu[w], C[w], delta[w],
                                                              self._scaled_beta(blk, X[:, k]), ridge, two[w])
                        pred[sel.start + w] = np.einsum("wd,wdc->wc", seg["Zh"][new[sel][w] - seg["m0"]], beta)
                        refined[w[good]] = True
                        route[sel.start + w] = np.where(good, FAST, ORTHOGONAL)
                for k in np.flatnonzero(ok & ~by_t):  # X: the fast windows' solutions
                    w = fast[k]
                    if refined[w] or route[sel.start + w] == ORTHOGONAL:
                        continue  # (the refined solution is not kept: see _segment's inert rows)
                    if r[w] == REFINE:  # the window's own matrix and solution, or its δ
                        parts[sel.start + w] = (
                            _Scaled(X[:, k], x=direct[0][k], M=direct[1][k], delta=delta[w], two=two[w])
                            if direct is not None else _Scaled(X[:, k], delta=delta[w], two=two[w]))
                    elif new is None or (keep is not None and keep[sel.start + w]):
                        parts[sel.start + w] = _Scaled(X[:, k])
                continue
            route[sel] = r
            refined = np.zeros(r.size, dtype=bool)
            if new is not None:
                # ŷ/s = ρ·h_A + t_I·(w s y)_I − (ν∘t_I)ᵀ m,  t = the new row's T row
                t = np.where(valid, blk.T[new[sel, None], idx], 0.0)
                pred[sel] = blk.e[new[sel]] + np.einsum("wi,wic->wc", t, wy) - np.einsum("wi,wic->wc", t * nu, m_y)
                w = np.flatnonzero(r == REFINE)
                if seg is not None and w.size:
                    beta, good = self._refine_windows(
                        blk, idx[w], valid[w], seg, self._betas(blk, idx[w], valid[w], nu[w], wy[w], m_y[w]),
                        np.broadcast_to(blk.ridge * blk.d * blk.d, (w.size, self.D)),
                        lambda G, j, w=w: self._woodbury_solve(blk, idx[w][j], valid[w][j], nu[w][j], C[w][j], G),
                        two[w])
                    pred[sel.start + w] = np.einsum("wd,wdc->wc", seg["Zh"][new[sel][w] - seg["m0"]], beta)
                    refined[w[good]] = True
                    route[sel.start + w] = np.where(good, FAST, ORTHOGONAL)
            for w, i in enumerate(range(sel.start, sel.stop)):
                if refined[w] or route[i] == ORTHOGONAL:
                    continue  # (the refined solution is not kept: see _segment's inert rows)
                if r[w] == REFINE:  # (with the number of steps it takes)
                    parts[i] = _Refine((nu[w][:, None] * m_y[w])[valid[w]], two[w])
                elif new is None or (keep is not None and keep[i]):
                    parts[i] = (nu[w][:, None] * m_y[w])[valid[w]]
        return route, pred, parts

    def _scatter(self, blk, idx, valid, V):
        """``(nw, H, c)`` values by window and periphery position → ``(P, nw·c)``, zero
        outside each window."""
        nw, c = idx.shape[0], V.shape[2]
        w_of = np.broadcast_to(np.arange(nw)[:, None], idx.shape)
        out = np.zeros((blk.slot.size, nw, c))
        out[idx[valid], w_of[valid]] = V[valid]
        return out.reshape(blk.slot.size, nw * c)

    def _betas(self, blk, idx, valid, nu, wy, m_y):
        """``β`` of windows on the fast route's formula (:meth:`_coef`), ``(nw, D, c)``."""
        W = np.tile(blk.h, idx.shape[0]) + blk.R @ self._scatter(blk, idx, valid, wy - nu[:, :, None] * m_y)
        return self._scaled_beta(blk, W.reshape(self.D, idx.shape[0], self.c))

    def _woodbury_solve(self, blk, idx, valid, nu, C, G):
        """``S_w⁻¹ g_w`` for windows ``w`` (``G`` of shape ``(nw, D, c)``, unscaled):
        ``d⁻¹ L⁻ᵀ X``, ``X`` from :meth:`_woodbury_X`."""
        return self._scaled_beta(blk, self._woodbury_X(blk, idx, valid, nu, G, lambda t: solve_stack(C, t)[0]))

    def _woodbury_X(self, blk, idx, valid, nu, G, solve_C):
        """``X = Lᵀ P_w⁻¹ (g_w/d)`` for windows ``w`` (``G`` of shape ``(nw, D, c)``,
        unscaled) by Woodbury's identity: ``u − R_I ν C⁻¹ ν R_Iᵀ u``, ``u = L⁻¹ (g/d)``,
        ``solve_C(t)`` the windows' ``C⁻¹t``. Returns ``(D, nw, c)``."""
        nw, c, D = idx.shape[0], self.c, self.D
        w_of = np.broadcast_to(np.arange(nw)[:, None], idx.shape)
        u = blk._fwd(np.moveaxis(G, 0, 1).reshape(D, nw * c) / blk.d[:, None])
        t = (blk.R.T @ u).reshape(-1, nw, c)[idx, w_of] * (nu * valid)[:, :, None]
        X = u - blk.R @ self._scatter(blk, idx, valid, nu[:, :, None] * solve_C(t))
        return X.reshape(D, nw, c)

    def _direct_solve(self, blk, M, G):
        """``S_w⁻¹ g_w`` for windows whose scaled matrices ``M`` ``(nw, D, D)`` are formed
        (a ridge with forgetting, :meth:`_forgetting_ridge_direct`): ``d⁻¹ M⁻¹ (g/d)``."""
        return solve_stack(M, G / blk.d[None, :, None])[0] / blk.d[None, :, None]

    def _refine_windows(self, blk, idx, valid, seg, beta, ridge, correct, two):
        """Refinement of windows against their rows: one step (:meth:`_refine_step`),
        then a second for the windows ``two`` whose first correction was above
        :data:`REFINE_LEFT` of ``max |β|`` (with a ridge and forgetting solved by the
        iteration, for every window whose first correction was above
        :data:`REFINE_ONCE` of it). ``correct(G, j)`` solves the matrices of the
        windows ``j`` (an index array) for their residuals ``G``. Returns the refined
        ``β`` and which windows it settled: a second step must show a contraction that
        leaves at most :data:`REFINE_LEFT` (the others are for the orthogonal route)."""
        self.n_refined += idx.shape[0]
        j = np.arange(idx.shape[0])
        first = self._refine_step(blk, idx, valid, seg, beta, ridge, lambda G: correct(G, j))
        ok = np.ones(idx.shape[0], dtype=bool)
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            d1 = np.abs(first - beta).max(axis=(1, 2), initial=0.0)
            size = np.abs(first).max(axis=(1, 2), initial=0.0)
            # (a step that is not finite is taken again)
            j = np.asarray(two) & ~(d1 <= REFINE_LEFT * size)
            if blk.forgets and not blk.direct:  # (corrections solved by the iteration)
                j |= ~(d1 <= REFINE_ONCE * size)
            j = np.flatnonzero(j)
        if j.size:
            second = self._refine_step(blk, idx[j], valid[j], seg, first[j], ridge[j], lambda G: correct(G, j))
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                d2 = np.abs(second - first[j]).max(axis=(1, 2), initial=0.0)
                # left after the second step ≈ ρ·|δ₂|, ρ = |δ₂|/|δ₁| the contraction shown
                ok[j] = d2 * (d2 / d1[j]) <= REFINE_LEFT * size[j]
            first[j] = second
        return first, ok

    def _refine_step(self, blk, idx, valid, seg, beta, ridge, correct):
        """One step of refinement of windows against their rows (corrected seminormal
        equations), as matrix products: ``β ← β + S⁻¹ g`` with the normal residual
        computed from the rows themselves::

            g = Σ_i ẑ_i (t_i − ω_i ẑ_i·β) − α' β,   ω = λ^age s²/c0,  t = λ^age s y/c0

        (``ω ≤ 1`` and the ridge ``α'`` relative to ``c0``, the window's largest
        ``λ^age s²``: rows on scales 1e±300 stay in range; ``O(N_eff·D)`` a window) and
        ``S⁻¹`` the route's own solve (``correct``). The step contracts the fast route's
        error by about ``κ·eps``.

        The windows are ``core + periphery[idx]`` (``valid`` marks real positions);
        positions before ``seg["m0"]`` are rows in the ring (not yet overwritten: a row
        leaves the window before its slot is reused), later ones the segment's rows
        ``seg["Zh"]``. ``beta`` ``(nw, D, c)`` are their solutions, ``ridge`` ``(nw, D)``
        their ridges and ``correct(G)`` solves their matrices for the residuals ``G``
        ``(nw, D, c)``. Returns the refined ``β``.
        """
        buf, m0, c, D = self.buf, seg["m0"], self.c, self.D
        nw = idx.shape[0]
        w_of = np.broadcast_to(np.arange(nw)[:, None], idx.shape)
        in_ring, in_seg = (idx < m0) & valid, (idx >= m0) & valid
        # each window's terms by ring slot and by segment row (zero outside it): the
        # weights ω = λ^age s²/c0 (at most 1) and the targets t = λ^age s y/c0 (the
        # periphery's w s y), formed without y/s, which overflows for rows of tiny norm
        om_A, t_A = blk.core_weights()
        om_P, t_P = blk.nu[idx] ** 2, blk.wy[idx]
        Wr, Tr = np.zeros((buf.N, nw)), np.zeros((buf.N, nw, c))
        Wr[blk.slots_A], Tr[blk.slots_A] = om_A[:, None], t_A[:, None, :]
        rs, rw = blk.slot[idx[in_ring]], w_of[in_ring]
        Wr[rs, rw], Tr[rs, rw] = om_P[in_ring], t_P[in_ring]
        n_seg = seg["Zh"].shape[0]
        Ws, Ts = np.zeros((n_seg, nw)), np.zeros((n_seg, nw, c))
        ss, sw = (idx - m0)[in_seg], w_of[in_seg]
        Ws[ss, sw], Ts[ss, sw] = om_P[in_seg], t_P[in_seg]
        sources = [(buf.Zh, Wr, Tr), (seg["Zh"], Ws, Ts)]
        # rows whose term of g is at most |t| + ω‖β‖ ≤ eps·max(that)/N add less than g's
        # own rounding (≈ eps·Σ of those bounds) and are left out: with forgetting, the
        # rows aged below rounding (λ = 0.9: all but the newest ≈ 400)
        bnorm = np.abs(beta).sum(axis=1).max(axis=1)  # (nw,)
        with np.errstate(over="ignore", invalid="ignore"):
            bounds = [np.abs(T).max(axis=2, initial=0.0) + W * bnorm[None, :] for _, W, T in sources]
        top = np.max([b.max(axis=0, initial=0.0) for b in bounds], axis=0)  # (nw,)
        keep_all = ~np.isfinite(top)  # (overflowing bounds: no row is left out)
        B = np.moveaxis(beta, 0, 1).reshape(D, nw * c)
        # g_w = Σ_i ẑ_i (t_i − ω_i ẑ_i·β_w) − α'_w β_w
        G = -ridge[:, :, None] * beta
        for (Zh, W, T), bound in zip(sources, bounds):
            with np.errstate(invalid="ignore"):
                rows = np.flatnonzero(((bound > EPS / buf.N * top[None, :]) | keep_all[None, :]).any(axis=1))
            if not rows.size:
                continue
            Zr = Zh[rows]
            res = T[rows] - W[rows][:, :, None] * (Zr @ B).reshape(rows.size, nw, c)
            G += np.moveaxis((Zr.T @ res.reshape(rows.size, nw * c)).reshape(D, nw, c), 0, 1)
        # invariant after: Sβ = b to the rounding of g (computed from the rows)
        return beta + correct(G)

    def _refine_shifted(self, blk, idx, valid, seg, nu, C, delta, beta, ridge, two):
        """:meth:`_refine_windows` for a ridge with forgetting solved by the iteration:
        the correction ``(P + δΣ)⁻¹g`` by :meth:`_shifted_solve`. Returns the refined
        ``β`` ``(nw, D, c)`` and which windows' corrections converged (the others are for
        the orthogonal route)."""
        good = np.ones(idx.shape[0], dtype=bool)

        def correct(G, j):
            dbeta, ok = self._shifted_solve(blk, idx[j], valid[j], nu[j], C[j], delta[j], G)
            good[j] &= ok
            return dbeta

        beta, ok = self._refine_windows(blk, idx, valid, seg, beta, ridge, correct, two)
        return beta, good & ok

    def _scaled_beta(self, blk, X):
        """``β = d⁻¹ L⁻ᵀ X`` of windows' ``X = Lᵀ(dβ)`` ``(D, nw, c)``, as ``(nw, D, c)``."""
        D, nw, c = X.shape
        beta = lapack.dtrtrs(blk.L, X.reshape(D, nw * c), lower=1, trans=1)[0] / blk.d[:, None]
        return np.moveaxis(beta.reshape(D, nw, c), 0, 1)

    def _refined(self, blk, lo, hi, nu_m, k=None):
        """Refinement of the window ``core + periphery[lo, hi)`` against its rows, all in
        the ring (see :meth:`_window_beta`): :meth:`_refine_windows` for one window, with
        the steps its part records (:class:`_Scaled` or :class:`_Refine`). Returns ``k·β``
        (``k`` the new row, unit) or ``β``; None when the refinement did not settle the
        window (a correction by the iteration that did not converge, or steps that did not
        contract): it is then for the orthogonal route."""
        idx, valid = np.arange(lo, hi)[None], np.ones((1, hi - lo), dtype=bool)
        empty = dict(m0=hi, Zh=np.zeros((0, self.D)))  # (every position in the ring)
        two = np.array([nu_m.two])
        if isinstance(nu_m, _Scaled) and nu_m.M is None:
            # a ridge with forgetting solved by the iteration: the correction by it too
            ridge = (1.0 + nu_m.delta) * blk.ridge * blk.d * blk.d
            beta, ok = self._refine_shifted(
                blk, idx, valid, empty, blk.nu[lo:hi][None], blk.capacitance(slice(lo, hi))[None],
                np.array([nu_m.delta]), self._scaled_beta(blk, nu_m.X[:, None]), ridge[None], two)
        else:
            if isinstance(nu_m, _Scaled):
                # a ridge with forgetting: the window's matrix M = P + δΣ and its solution x = dβ
                beta, delta = nu_m.x / blk.d[:, None], nu_m.delta

                def correct(G, j):
                    return self._direct_solve(blk, nu_m.M[None], G)
            else:
                beta, delta = self._coef(blk, nu_m.m, lo, hi), 0.0
                nu, C = blk.nu[lo:hi][None], blk.capacitance(slice(lo, hi))[None]

                def correct(G, j):
                    return self._woodbury_solve(blk, idx, valid, nu, C, G)

            ridge = (1.0 + delta) * blk.ridge * blk.d * blk.d
            beta, ok = self._refine_windows(blk, idx, valid, empty, beta[None], ridge[None], correct, two)
        if not ok[0]:
            return None
        return k @ beta[0] if k is not None else beta[0]

    def _forgetting_ridge(self, blk, idx, valid, nu, C, wy, m_y, delta, tol=None, pad=False):
        """A ridge with forgetting: solve ``(P + δ_w Σ) x = b`` for the windows ``w``.

        In the block's scaled coordinates (``x = dβ``), ``P`` a window's normal matrix
        with the reference ridge, ``Σ`` that ridge, ``x₀ = P⁻¹b`` its fast solution:
        ``(I + δ P⁻¹Σ) x = x₀`` by :func:`~._kernels.solve_shifted`.
        Iterated on ``X = Lᵀx`` (then ``ŷ/s = r_newᵀX``): a step is two triangular solves
        with the core factor and one product with each window's ``C⁻¹``.

        ``tol`` (per window): see :func:`~._kernels.solve_shifted`. Returns ``X`` of
        shape ``(D, nw, c)``, which windows converged and, solved directly
        (:meth:`_forgetting_ridge_direct`), ``(x, M)`` of every window (else None).
        """
        if blk.direct:
            return self._forgetting_ridge_direct(blk, idx, valid, nu, wy, delta)
        # X₀ = Lᵀx₀ = h_I − R_I ν C⁻¹ ν R_Iᵀ h_I,  h_I = h_A + R_I (w s y)_I
        X0 = np.tile(blk.h, idx.shape[0]) + blk.R @ self._scatter(blk, idx, valid, wy - nu[:, :, None] * m_y)
        X, ok = self._shifted(blk, idx, valid, nu, np.linalg.inv(C) if idx.shape[0] else C, X0, delta, tol=tol,
                              pad=pad)
        return X, ok, None

    def _shifted_solve(self, blk, idx, valid, nu, C, delta, G):
        """``(P + δ_w Σ)⁻¹ g_w`` for windows ``w`` (``G`` of shape ``(nw, D, c)``,
        unscaled), by the iteration of :meth:`_forgetting_ridge` started from the
        window's fast solve ``P⁻¹g`` (:meth:`_woodbury_solve`): the correction of a
        refinement step, to :data:`~._kernels.REFINED_TOL`. Returns the solutions
        ``(nw, D, c)`` and which windows converged."""
        Cinv = np.linalg.inv(C) if idx.shape[0] else C
        # X₀ = Lᵀ P⁻¹(g/d)
        X0 = self._woodbury_X(blk, idx, valid, nu, G, lambda t: Cinv @ t)
        X, ok = self._shifted(blk, idx, valid, nu, Cinv, X0.reshape(self.D, -1), delta, tol=REFINED_TOL)
        return self._scaled_beta(blk, X), ok

    def _shifted(self, blk, idx, valid, nu, Cinv, X0, delta, tol=None, transposed=False, pad=False):
        """``(I + δ M) X = X₀`` for the windows of ``idx`` (:func:`~._kernels.solve_shifted`),
        ``M = Lᵀ P⁻¹ Σ L⁻ᵀ`` (``X = Lᵀx``: ``(I + δ P⁻¹Σ) x = x₀``), or with ``Mᵀ``
        (``transposed``, see :meth:`_forgetting_predictions`); ``X0`` of shape
        ``(D, nw·k)``, ``k`` columns a window; ``Cinv`` the windows' inverse capacitance
        matrices. Returns ``X`` ``(D, nw, k)`` and which windows converged (``tol``: see
        :func:`~._kernels.solve_shifted`)."""
        n_in, D = idx.shape[0], self.D
        k = X0.shape[1] // n_in if n_in else 1 if transposed else self.c
        if pad:  # (see pad_windows: the windows of a call's predictions)
            tol = np.zeros(n_in) if tol is None else np.broadcast_to(tol, (n_in,))
            X0 = np.moveaxis(X0.reshape(D, n_in, k), 1, 0)
            idx, valid, nu, Cinv, delta, tol, X0 = pad_windows(n_in, idx, valid, nu, Cinv, delta, tol, X0, eye=(3,))
            X0 = np.moveaxis(X0, 0, 1).reshape(D, -1)
        nw, P = idx.shape[0], blk.slot.size
        w_of = np.broadcast_to(np.arange(nw)[:, None], idx.shape)
        ridge = blk.ridge[:, None]

        def woodbury(u):  # Lᵀ P⁻¹ L u = u − R_I ν C⁻¹ ν R_Iᵀ u, each window its own
            t = (blk.R.T @ u).reshape(P, nw, k)[idx, w_of] * nu[:, :, None]
            return u - blk.R @ self._scatter(blk, idx, valid, nu[:, :, None] * (Cinv @ t))

        def shift(u):  # L⁻¹ Σ L⁻ᵀ u
            return blk._fwd(ridge * lapack.dtrtrs(blk.L, u, lower=1, trans=1)[0])

        if transposed:
            def apply_M(x):
                return [shift(woodbury(x[0]))]
        else:
            def apply_M(x):
                return [woodbury(shift(x[0]))]

        def size(x):
            return np.abs(x[0]).reshape(D, nw, k).max(axis=(0, 2), initial=0.0)

        def spread(v):  # per window → the layout of X (D, nw·k)
            return [np.repeat(v, k)[None, :]]

        (X,), ok, steps = solve_shifted(apply_M, [X0], spread(delta), size, spread=spread, tol=tol)
        if not np.any(tol):  # (solved to rounding: what a call's coefficients would take)
            self.ridge_share = ridge_share(steps, delta) or self.ridge_share
        return X.reshape(D, nw, k)[:, :n_in], ok[:n_in]

    def _forgetting_predictions(self, blk, idx, valid, nu, C, wy, m_y, delta, Rn):
        """``ŷ/s = r_newᵀX`` of windows ``w`` of :meth:`_forgetting_ridge` without ``X``.

        With ``(I + δ_w M) X = X₀``: ``r_newᵀX = tᵀX₀`` for ``(I + δ_w Mᵀ) t = r_new``
        (the same eigenvalues, the same iteration), one column a window where ``X`` has
        one a target: a step costs ``O(D²)`` a window instead of ``O(D²·c)``. With
        ``X₀ = h + R_I (w s y − ν m_y)_I`` (:meth:`_forgetting_ridge`)::

            tᵀX₀ = tᵀh + (R_Iᵀt)ᵀ (w s y − ν m_y)_I

        ``Rn`` ``(D, nw)``: the new rows' ``r = L⁻¹ẑ/d``. Returns the predictions
        ``(nw, c)`` and which windows converged (to rounding).
        """
        nw = idx.shape[0]
        # (padded: a window's bits must not depend on how many windows are solved with it)
        idx, valid, nu, C, wy, m_y, delta, Rn = pad_windows(nw, idx, valid, nu, C, wy, m_y, delta, Rn.T, eye=(3,))
        Cinv = np.linalg.inv(C) if idx.shape[0] else C
        T, ok = self._shifted(blk, idx, valid, nu, Cinv, np.ascontiguousarray(Rn.T), delta, transposed=True)
        T = T[:, :, 0]
        w_of = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
        RtT = (blk.R.T @ T)[idx, w_of] * valid
        return (T.T @ blk.h + np.einsum("wi,wic->wc", RtT, wy - nu[:, :, None] * m_y))[:nw], ok[:nw]

    def _forgetting_ridge_direct(self, blk, idx, valid, nu, wy, delta):
        """A ridge with forgetting at small ``D``: each window's matrix
        (:meth:`_window_matrices`), by one LU solve of the ``D×D`` stack (``O(D²·H + D³)``
        a window, nothing iterated).
        Returns ``X = Lᵀx`` as :meth:`_forgetting_ridge`, which windows were solved, and
        ``(x, M)``: the solutions ``(nw, D, c)`` and matrices ``(nw, D, D)`` (for
        :meth:`_refined`).
        """
        nw, c, D = idx.shape[0], self.c, self.D
        M, rhs = self._window_matrices(blk, idx, nu, wy, delta)
        x, solved = solve_stack(M, rhs)  # (nw, D, c)
        X = blk.L.T @ np.moveaxis(x, 0, 1).reshape(D, nw * c)
        return X.reshape(D, nw, c), solved, (x, M)

    def _coef(self, blk, nu_m, lo, hi):
        if isinstance(nu_m, _Scaled):  # X = Lᵀx of the window (a ridge with forgetting)
            return self._scaled_beta(blk, nu_m.X[:, None])[0]
        # β = d⁻¹ L_A⁻ᵀ (h_I − R_I ν C⁻¹ ν R_Iᵀ h_I),  h_I = h_A + R_I (w s y)_I
        I = slice(lo, hi)
        return self._scaled_beta(blk, (blk.h + blk.R[:, I] @ (blk.wy[I] - nu_m))[:, None])[0]


class _Scaled:
    """``X = Lᵀ(dβ)`` of one window of a block (a ridge with forgetting); for a window to
    refine, also ``δ``, whether it takes two steps and, solved directly, ``x = dβ`` and
    its matrix ``M`` (``P + δΣ``, scaled)."""

    def __init__(self, X, *, x=None, M=None, delta=0.0, two=False):
        self.X, self.x, self.M, self.delta, self.two = X, x, M, delta, bool(two)


class _Refine:
    """The periphery part ``m`` of a window to refine (see :meth:`PrimalSolver._coef`),
    and whether it takes two steps."""

    def __init__(self, m, two):
        self.m, self.two = m, bool(two)
