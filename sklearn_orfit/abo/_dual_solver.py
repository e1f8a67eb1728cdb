"""The dual route for ``D ≥ N``: a fixed core of the window and a small sliding periphery.

Window of unit rows ``ẑ_i`` (norms ``s_i``, see :mod:`._window`), Gram ``K̂ = Ẑ Ẑᵀ``.
With ``â = K̂⁻¹ ỹ``, ``ỹ_i = y_i / s_i``, the minimum-norm interpolant of a full-row-rank
window is ``β = Ẑᵀ â`` and predicts ``ẑ·β`` times ``s``; it does not depend on the weights
``λ^age`` (every residual is zero). A ridge ``α > 0`` without forgetting adds
``α / s_i²`` to the diagonal (``(K + αI) a = y`` with ``K = S K̂ S``, ``â = S a``).

Every ``b`` rows (a *block*) the rows that stay in the window for the whole block — the
core ``A`` — are factorised, ``K̂_AA = L_A L_Aᵀ`` (``O(N³)``, i.e. ``O(N³/b)`` a row). The
other rows of any window of the block — the ``ℓ ≤ b`` oldest rows that leave during the
block and the new rows — form the periphery ``P``. For a periphery row ``p``::

    r_p = L_A⁻¹ k̂_A,p         x_p = L_A⁻ᵀ r_p = K̂_AA⁻¹ k̂_A,p
    T_pq = k̂_pq − r_p·r_q      (the Schur complement of the core, fixed per pair)
    g_p = ỹ_p − r_p·u_A         u_A = L_A⁻¹ ỹ_A

are computed once, when the row enters (``O(N·D)`` for its Gram row, ``O(N²)`` for two
triangular solves, ``O(N·b)`` for its products with the periphery). A window of the block
is ``A`` plus a contiguous range ``I`` of the periphery; with ``S = T_II`` (``≤ b×b``,
factorised from scratch, no recursion and so no drift)::

    prediction for a new row:  ŷ = s (r·u_A + t_Iᵀ S⁻¹ g_I)         t = its T row
    coefficients:              â_I = S⁻¹ g_I,  â_A = K̂_AA⁻¹ ỹ_A − X_I â_I,  β = Ẑᵀ â

A window whose Gram matrix is too ill-conditioned for that (condition estimate above
:data:`GRAM_KAPPA_MAX`, from two probes solved through the same blocks) is refined
against its rows, one or two steps through the same blocks (:meth:`DualSolver._refine_beta`,
up to :data:`KAPPA_REFINE_TWICE`); beyond, or where its weighted rows are so graded that
:func:`numpy.linalg.lstsq` would truncate some, it is solved on the orthogonal route
(:class:`SlidingQR`), which is kept slid while it is in use.
"""

import numpy as np
from scipy.linalg import lapack

from .._docstrings import fill_doc
from ._window import normalise_rows, unit_scale
from ._kernels import (
    GRAM_KAPPA_MAX, KAPPA_REFINE_MAX, KAPPA_REFINE_TWICE, REFINED_TOL, SHIFT_MAX, cholesky, dual_window_solve,
    keeps_cutoff, pad_windows, scatter_rows, solve_shifted, solve_stack,
)
from ._window_solvers import (
    FAST, ORTHOGONAL, REFINE, CoreBlockSolver, Predicted, ReferenceWindow, _principal_blocks, coef_directly,
    expected_steps, forgetting_block_size, ridge_share, weight_block_size,
)

__all__ = ["DualSolver", "default_block_size", "direct_block_size", "iteration_block_size"]

_EPS = np.finfo(np.float64).eps

#: Largest number of window rows for which a ridge with forgetting may form and solve each
#: window's own matrix ``P + δΣ`` (see :meth:`DualSolver._direct_block_size`): this many,
#: or :data:`DIRECT_SHIFT_ROWS_TIMES_BLOCK` divided by the iteration's block length when
#: that is more. The iteration refactorises every ``b`` rows; solving each window directly
#: costs ``O(n³)`` a window. Measured (one thread, µs an update with a full window, the
#: iteration's → each window's own): λ = 0.9 (b = 4), n = 100: 374 → 182, n = 128: 452 →
#: 228, n = 200: 652 → 499; λ = 0.97 (b = 14), n = 100: 180 → 194, n = 200: 342 → 488.
DIRECT_SHIFT_MAX_N = 64
DIRECT_SHIFT_ROWS_TIMES_BLOCK = 1024


def default_block_size(window_size):
    """``b ≈ 0.64 N^¾``: minimises the core's ``N³/(3b)`` plus the periphery's ``⅔ b³``
    flops a row."""
    return int(min(window_size, max(8, round(0.64 * window_size**0.75))))


def iteration_block_size(window_size, forgetting_factor, alpha):
    """:func:`default_block_size`, shortened for a ridge with forgetting so that the
    shifts of a block stay within :data:`~._window_solvers.SHIFT_SPREAD` (the iteration
    against the block's factor)."""
    b = default_block_size(window_size)
    if alpha > 0 and forgetting_factor < 1.0:
        b = min(b, forgetting_block_size(forgetting_factor))
    return b


def direct_block_size(window_size, n_rows, *, forgetting_factor, alpha, iteration_block):
    """The length of a block of windows that solve their own matrices ``P + δΣ`` (a ridge
    with forgetting), starting from a window of ``n_rows`` rows; 0 when the block iterates
    instead (see :meth:`DualSolver._direct_block_size`)."""
    if not (alpha > 0 and forgetting_factor < 1.0):
        return 0
    b = min(default_block_size(window_size), weight_block_size(forgetting_factor))
    if b <= iteration_block or n_rows + b > max(DIRECT_SHIFT_MAX_N,
                                               DIRECT_SHIFT_ROWS_TIMES_BLOCK // iteration_block):
        return 0
    return b


def _probe_values(n, offset):
    """Deterministic probe entries for positions ``offset … offset+n−1`` (2 probes)."""
    i = np.arange(offset, offset + n, dtype=np.float64)[:, None] + np.array([0.0, 0.5])
    # a fixed irrational rotation: no structure shared with the data, no RNG state
    return np.sin(12.9898 * i + 78.233 * np.array([1.0, 2.0])) * 2.0


class _DualBlock(ReferenceWindow):
    """The core factor and the periphery rows of one block (see the module docstring)."""

    # periphery arrays, by the axes their periphery position runs along: the restore of an
    # interrupted call zeroes them beyond the restored counter ``m`` (as when created)
    PERIPHERY = {"slot": (0,), "R": (1,), "X": (1,), "T": (0, 1), "KP": (0, 1), "XX": (0, 1),
                 "g": (0,), "kA2": (0,), "xv": (0,), "xa": (0,), "ru": (0,), "shiftP": (0,),
                 "rdP": (0,), "KAP": (1,)}

    def __init__(self, *, buf, block_size, alpha, forgetting_factor, c, direct=False):
        self.buf = buf
        self.alpha = alpha
        # the shifts α/(w s²) are those of the block's reference window j_ref (its middle):
        # window j of the block has shifts λ^-(j − j_ref) times these (see delta)
        self._set_reference(alpha=alpha, forgetting_factor=forgetting_factor, block_size=block_size)
        self.n0 = buf.n
        self.ell = max(0, buf.n + block_size - buf.N)  # old rows leaving during the block
        self.b = block_size
        slots = buf.slots()
        self.slots_A = slots[self.ell :]
        nA = self.slots_A.size
        P = self.ell + block_size
        self.slot = np.zeros(P, dtype=np.intp)  # ring slot of each periphery position
        self.slot[: self.ell] = slots[: self.ell]
        self.R = np.zeros((nA, P), order="F")  # columns r_p = L_A⁻¹ k̂_A,p
        self.X = np.zeros((nA, P), order="F")  # columns x_p = L_A⁻ᵀ r_p
        self.T = np.zeros((P, P))  # T_pq = k̂_pq − r_p·r_q
        self.KP = np.zeros((P, P))  # k̂_pq (+ shift on the diagonal), for ‖K̂‖_F
        self.XX = np.zeros((P, P))  # x_p·x_q
        self.g = np.zeros((P, c))  # g_p = ỹ_p − r_p·u_A
        self.kA2 = np.zeros(P)  # ‖k̂_A,p‖²
        self.xv = np.zeros((P, 2))  # x_p·v_A
        self.xa = np.zeros((P, 2))  # x_p·K̂_AA⁻¹v_A
        self.vP = _probe_values(P, nA)
        self.m = 0  # periphery rows entered
        self.j = 0  # new rows learned in this block
        self.dropped = 0  # old periphery rows that have left the window
        # core: K̂_AA + diag(shift) = L_A L_Aᵀ
        K = buf.G[np.ix_(self.slots_A, self.slots_A)]
        # log weights at the reference window: the window's rows are ages n0 − 1 … 0 at
        # the block's first window
        log_w0 = (np.arange(buf.n - 1, -1, -1) + self.j_ref) * self.log_lam
        self.shift_A = ridge_shifts(buf.s[self.slots_A], alpha=alpha, log_w=log_w0[self.ell :])
        self.shiftP = np.zeros(P)  # the periphery rows' shifts
        K.flat[:: nA + 1] += self.shift_A
        # with forgetting the shifts span λ^-N: the block works on the Jacobi-scaled
        # system D^-½ (K̂ + Σ) D^-½ (unit diagonal; its condition number is the one that
        # governs Cholesky's error), â = D^-½ x; without forgetting D = I
        self.rd_A = 1.0 / np.sqrt(K.diagonal()) if self.forgets else np.ones(nA)
        self.rdP = np.zeros(P)  # 1/√d of the periphery rows, set as they enter
        if self.forgets:
            K *= self.rd_A[:, None] * self.rd_A[None, :]
            self.shift_A = self.shift_A * self.rd_A**2  # Σ, scaled
        # a ridge with forgetting solved window by window (DualSolver._direct_block_size)
        # needs the scaled core matrix and the periphery's scaled products with the core
        self.direct = bool(direct)
        self.K_A = K.copy() if self.direct else None
        self.KAP = np.zeros((nA if self.direct else 0, P), order="F")  # k̂_A,p (scaled)
        self.nKA2 = float(np.einsum("ij,ij->", K, K))
        self.nSA2 = float(np.sum(self.shift_A**2)) if self.forgets else 0.0  # ‖Σ_A‖_F²
        self.core_ok = True
        self.L = np.zeros((0, 0), order="F")
        if nA:
            # the core only has to be factorisable; each window's own condition estimate
            # (which includes the core through K̂_AA⁻¹v_A) decides its route
            self.L, self.core_ok = cholesky(K, kappa_max=1.0 / (1e3 * _EPS))
        self.vA = _probe_values(nA, 0)
        ytil = buf.Y[self.slots_A] * (_inv_or_zero(buf.s[self.slots_A]) * self.rd_A)[:, None]
        self.ytil_A = ytil if self.direct else None
        self.u = self._fwd(ytil)  # u_A = L_A⁻¹ ỹ_A
        self.a_y = self._bwd(self.u)  # K̂_AA⁻¹ ỹ_A
        self.a0 = self._bwd(self._fwd(self.vA))  # K̂_AA⁻¹ v_A
        self.ru = np.zeros((P, c))  # r_p·u_A, the core's part of a prediction
        old = self.slot[: self.ell]  # the old periphery rows, together
        self._enter(buf.Zh[old], buf.s[old], buf.Y[old], P_old=buf.G[:, old], P_new=buf.G[np.ix_(old, old)],
                    log_w=log_w0[: self.ell])

    def _fwd(self, V):
        if not self.core_ok or V.shape[0] == 0:
            return np.zeros(V.shape)
        return lapack.dtrtrs(self.L, V, lower=1)[0]

    def _bwd(self, V):
        if not self.core_ok or V.shape[0] == 0:
            return np.zeros(V.shape)
        return lapack.dtrtrs(self.L, V, lower=1, trans=1)[0]

    def add_rows(self, Zh, s, Y, *, P_old, P_new):
        """Enter new rows into the periphery at positions ``m, m+1, …``.

        ``P_old[slot, i]`` are the products of row ``i`` with the ring's slots before
        these rows are written, ``P_new`` their products with each other.
        """
        # new row k of the block has age j_ref − k − 1 at the reference window
        k = self.j + np.arange(Zh.shape[0])
        self._enter(Zh, s, Y, P_old=P_old, P_new=P_new, log_w=(self.j_ref - k - 1) * self.log_lam)

    def _enter(self, Zh, s, Y, *, P_old, P_new, log_w):
        n, m, lo = Zh.shape[0], self.m, self.dropped
        if not n:
            return
        new = slice(m, m + n)
        kA = P_old[self.slots_A]  # (n_A, n): the core is never overwritten in a block
        shift = ridge_shifts(s, alpha=self.alpha, log_w=log_w)
        rd = np.ones(n)
        if self.forgets:  # Jacobi scaling (see __init__): d = k̂_pp + shift
            rd = 1.0 / np.sqrt((s > 0) + shift)
            kA = kA * self.rd_A[:, None] * rd[None, :]
            shift = shift * rd * rd
        self.rdP[new] = rd
        if self.direct:
            self.KAP[:, new] = kA
        if self.core_ok and kA.size:
            R = lapack.dtrtrs(self.L, kA, lower=1)[0]  # r = L_A⁻¹ k̂_A
            X = lapack.dtrtrs(self.L, R, lower=1, trans=1)[0]  # x = L_A⁻ᵀ r
        else:
            R = X = np.zeros(kA.shape)
        self.R[:, new], self.X[:, new] = R, X
        # k̂ of the new rows with the live periphery rows before them, then each other
        K = np.concatenate([P_old[self.slot[lo:m]].T, P_new], axis=1)  # (n, m + n − lo)
        if self.forgets:
            K = K * rd[:, None] * self.rdP[lo : m + n][None, :]
        self.shiftP[new] = shift
        live = slice(lo, m + n)
        # T_pq = k̂_pq − r_p·r_q (symmetric); KP = k̂ (+ shift); XX = x_p·x_q
        T = K - R.T @ self.R[:, live]
        KP = K.copy()
        d = np.arange(n)
        T[d, m - lo + d] += shift
        KP[d, m - lo + d] += shift
        XX = X.T @ self.X[:, live]
        for M, V in ((self.T, T), (self.KP, KP), (self.XX, XX)):
            M[new, live] = V
            M[live, new] = V.T
        self.kA2[new] = np.einsum("ij,ij->j", kA, kA)
        # g = ỹ − r·u_A,  ỹ = y/s
        self.g[new] = Y * (_inv_or_zero(s) * rd)[:, None] - R.T @ self.u
        self.ru[new] = R.T @ self.u
        self.xv[new] = X.T @ self.vA
        self.xa[new] = X.T @ self.a0
        self.m += n


@fill_doc()
class DualSolver(CoreBlockSolver):
    """Windowed minimum-norm least squares for ``D ≥ N`` in ``O(N·D + N²)`` a row.

    Parameters
    ----------
    {solver_sizes}
    forgetting_factor, alpha : float
        ``λ`` and the ridge ``α`` (with forgetting the ridge does not scale with the
        weights: see :class:`~._window_solvers.ReferenceWindow`).
    block_size : int, default=None
        ``b``; :func:`default_block_size` when None.

    Notes
    -----
    Per row: one ``N×D`` product (the new row's Gram row), two triangular solves with the
    core factor (``O(N²)``), ``O(N·b + b³)`` for the periphery, and ``O(N³/b)`` amortised
    for the core's factorisation. A ridge with forgetting iterates each window, ``O(N²)`` a
    step: a window whose solution only predicts the next row is solved from that row
    (:meth:`_forgetting_predictions`, one column), whatever the number ``c`` of targets;
    the coefficients a call ends with take ``c`` columns. Memory: the window (``N×D``),
    its Gram matrix and the core factor (``N×N`` each), the periphery (``O(N·b)``).
    """

    orientation = "columns"

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha, block_size=None):
        if block_size is None:
            block_size = iteration_block_size(window_size, forgetting_factor, alpha)
        super().__init__(
            window_size=window_size, n_features=n_features, n_targets=n_targets,
            forgetting_factor=forgetting_factor, alpha=alpha, block_size=block_size, gram=True,
        )
        self.n_refined = 0  # windows refined against the rows (between the two routes)

    def _normalise(self, Z):
        Zh, s = normalise_rows(Z)
        tiny = None
        if self.alpha > 0:
            # rows whose ridge shift α/s² overflows carry no information: decouple them
            with np.errstate(over="ignore"):
                tiny = (s > 0) & (self.alpha * _inv_or_zero(s) ** 2 > SHIFT_MAX)
            Zh[tiny], s[tiny] = 0.0, 0.0
        return Zh, s, tiny

    def _new_block(self):
        b = self._direct_block_size()
        return _DualBlock(buf=self.buf, block_size=b or self.b, alpha=self.alpha, forgetting_factor=self.lam,
                          c=self.c, direct=bool(b))

    def _direct_block_size(self):
        """The length of the next block when its windows solve their own matrices, else 0.

        A ridge with forgetting iterates against the block's factor in blocks short
        enough for the shifts to stay within :data:`~._window_solvers.SHIFT_SPREAD` (4
        rows at ``λ = 0.9``). While every window of the next block has at most
        :data:`DIRECT_SHIFT_MAX_N` rows (the fill of a window), or ``1024/b`` when that is
        more (:data:`DIRECT_SHIFT_ROWS_TIMES_BLOCK`), each window's matrix
        ``P + δΣ`` is formed and solved instead (``O(n³)`` a window, no iteration), in
        blocks of the usual length (:func:`default_block_size`).
        """
        return direct_block_size(self.N, self.buf.n, forgetting_factor=self.lam, alpha=self.alpha,
                                 iteration_block=self.b)

    def coef(self):
        """``β`` of the current window, shape ``(D, n_targets)``.

        From the window's own matrix, ``K̂ + diag(α/(w s²))`` (the ring's Gram matrix and
        one Cholesky solve, :func:`~._kernels.dual_window_solve`), where that costs less
        than the block's route (:func:`~._window_solvers.coef_directly`: short windows, or
        a ridge with forgetting, whose block route iterates all ``c`` columns; a one-row
        call pays this solve every row); a window too ill-conditioned for it takes the
        block's routes."""
        buf = self.buf
        failed = self.matrix_failed is not None and self.matrix_failed is self.block
        if buf.n and not failed and self._coef_directly():
            with np.errstate(all="ignore"):  # (an overflow is reported by the estimator)
                # (with forgetting judged, as the block's windows are, by the condition of
                # the scaled matrix: the shifts span the weights)
                a = dual_window_solve(buf.G, buf.s, buf.Y, buf.slot_weights(self.lam), alpha=self.alpha,
                                      diagonal_spread=not self.lam < 1.0)
            if a is not None and np.isfinite(a).all():
                return buf.Zh.T @ a
            beta = super().coef()
            self.matrix_failed = self.block  # (not tried again in this block)
            return beta
        return super().coef()

    def _coef_directly(self):
        steps = 0  # (without forgetting: the block's fast route alone)
        if self.alpha > 0 and self.lam < 1.0:
            blk = self.block
            if blk is not None and blk.j < blk.b:
                if blk.direct:
                    return False  # (each window solves its own matrix already)
                delta = float(blk.delta(blk.window_steps(blk.m)))
            else:  # the first window of the next block
                delta = float(np.expm1(0.5 * (self.b - 1) * np.log(self.lam)))
            steps = expected_steps(self.ridge_share, delta)
        return coef_directly(self.buf.n, self.c, steps)

    def _shift(self, slots, by_norm=False):
        """Ridge shifts ``α/s²`` of rows given by slot (or by norm), without forgetting
        (the refinement route's; see :func:`ridge_shifts`)."""
        return ridge_shifts(slots if by_norm else self.buf.s[slots], alpha=self.alpha)

    def _solve_windows(self, blk, lo, hi, new, s_new=None, seg=None, keep=None, inert_x=None):
        """Solve windows ``core + periphery[lo_i, hi_i)`` together.

        Returns the route of each window, the predictions ``/s`` for the rows at
        periphery positions ``new`` (one per window) and, per window, ``â_I = S⁻¹ g_I``
        for the coefficients (with ``new``: only for the windows ``keep`` on the fast
        route). With ``seg`` (the new rows of a segment, see :meth:`_refine_windows`)
        the windows to refine are refined here, together.
        """
        c = self.c
        route, pred, parts = self._unsolved(lo.size)
        if not blk.core_ok:
            return route, pred, parts
        if self.alpha == 0.0:
            spread = self._spreads(s_new)
        a0a0 = np.einsum("ik,ik->k", blk.a0, blk.a0)
        vAvA = np.einsum("ik,ik->k", blk.vA, blk.vA)
        # Σ_{p,q ∈ I} k̂_pq² for every window from the prefix sums of KP² (no gather)
        top = int(hi.max(initial=0))
        F = np.zeros((top + 1, top + 1))
        with np.errstate(over="ignore"):
            # (a ridge shift beyond 1e154, rows far below √α, overflows: κ = inf sends
            # those windows to the orthogonal route)
            F[1:, 1:] = np.cumsum(np.cumsum(blk.KP[:top, :top] ** 2, axis=0), axis=1)
        for sel, idx, valid in self._windows(lo, hi):
            a_, b_ = lo[sel], hi[sel]
            kp2 = F[b_, b_] - F[a_, b_] - F[b_, a_] + F[a_, a_]
            S = _principal_blocks(blk.T, idx, valid, copy=True)
            H = idx.shape[1]
            S[:, np.arange(H), np.arange(H)] += ~valid  # padding: unit diagonal
            vm = valid[:, :, None]
            # S m = [g_I, X_Iᵀ v_A − v_I]: the solution's periphery part and the probes'
            rhs = np.concatenate([blk.g[idx] * vm, (blk.xv[idx] - blk.vP[idx]) * vm], axis=2)
            sol, solved = solve_stack(S, rhs)
            a, m = sol[:, :, :c], sol[:, :, c:]
            # condition estimate ‖K̂‖_F · max_v ‖K̂⁻¹v‖/‖v‖ over two probes v = [v_A; v_I]:
            #   K̂⁻¹v = [K̂_AA⁻¹v_A + X_I m; −m];  mᵀ X_IᵀX_I m through one product with
            #   XX over the scattered m (zero outside each window)
            nwin = idx.shape[0]
            Mf = np.zeros((top, nwin, 2))
            w_of = np.broadcast_to(np.arange(nwin)[:, None], idx.shape)
            Mf[idx[valid], w_of[valid]] = m[valid]  # padding positions alias position 0
            Mf = Mf.reshape(top, 2 * nwin)
            quad = np.einsum("pk,pk->k", Mf, blk.XX[:top, :top] @ Mf).reshape(nwin, 2)
            inv2 = (
                a0a0
                + 2.0 * np.einsum("wik,wik->wk", m, blk.xa[idx])
                + quad
                + np.einsum("wik,wik->wk", m, m)
            )
            vv = vAvA + np.einsum("wik,wik->wk", blk.vP[idx] * vm, blk.vP[idx] * vm)
            nK2 = blk.nKA2 + 2.0 * (blk.kA2[idx] * valid).sum(axis=1) + kp2
            with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
                kappa = np.sqrt(nK2 * (np.abs(inv2) / vv).max(axis=1))
            if blk.forgets:
                # window j's matrix is P + δΣ (refined against its rows on the iteration:
                # _forgetting_residuals)
                delta = blk.delta(blk.window_steps(hi[sel]))
                # ‖Σ‖_F of the window (the scaled shifts of its core and periphery rows)
                nS2 = blk.nSA2 + (blk.shiftP[idx] ** 2 * valid).sum(axis=1)
                with np.errstate(invalid="ignore", divide="ignore"):
                    kappa = blk.widen_kappa(kappa, delta, np.sqrt(nS2 / nK2))
                # (each window's own matrix, blk.direct, is not refined: a second solve of
                # it cost more than the orthogonal route, measured at N = 100, λ = 0.9)
                refine = 0.0 if blk.direct else KAPPA_REFINE_TWICE
            else:
                delta, refine = 0.0, KAPPA_REFINE_TWICE
            r = np.where(kappa <= GRAM_KAPPA_MAX, FAST, np.where(kappa <= refine, REFINE, ORTHOGONAL))
            r[~solved] = ORTHOGONAL
            if self.alpha == 0.0:
                # the interpolant is lstsq's answer only if lstsq keeps every singular
                # value of W½Z (the spread of √w s over the window's rows)
                r[~keeps_cutoff(kappa, spread[sel], n=self.N, D=self.D)] = ORTHOGONAL
            if blk.forgets:
                fast = np.flatnonzero(r != ORTHOGONAL)
                if new is not None:
                    # the new rows' products with their windows' rows, k̂_A and k̂_I (â = D^-½x;
                    # KP holds the scaled products k̂_pq/√(d_p d_q))
                    nf = new[sel][fast]
                    kA = seg["P_old"][nf - seg["m0"]][:, blk.slots_A] * blk.rd_A[None, :]
                    kI = np.where(valid[fast], blk.KP[nf[:, None], idx[fast]], 0.0) / blk.rdP[nf][:, None]
                # several targets: a window on the fast route is predicted from one column
                # (_forgetting_predictions): its next row's, or before an inert row, that
                # row's products with the window's rows (x·β = Σ (x·ẑ_i) â_i)
                by_t = np.zeros(fast.size, dtype=bool)
                if new is not None and c > 1 and not blk.direct:
                    by_t = r[fast] == FAST
                    inert_t = np.zeros(fast.size, dtype=bool) if keep is None else keep[sel][fast] & by_t
                    if inert_t.any():
                        kA, kI = kA.copy(), kI.copy()
                        j = np.flatnonzero(inert_t)
                        x_scale, kA[j], kI[j] = self._inert_products(blk, idx[fast[j]], valid[fast[j]],
                                                                     inert_x[new[sel][fast[j]] - seg["m0"]], seg)
                w = fast[~by_t]
                if blk.direct:
                    x, ok = self._forgetting_ridge_direct(blk, idx[w], valid[w], delta[w])
                else:
                    # (a window to refine is solved to REFINED_TOL: the steps correct the rest)
                    x, ok = self._forgetting_ridge(blk, idx[w], valid[w], S[w], a[w], delta[w],
                                                   tol=np.where(r[w] == REFINE, REFINED_TOL, 0.0), pad=new is not None)
                if by_t.any():  # (their x stay zero: only their predictions are solved)
                    x = tuple(scatter_rows(v, ~by_t) for v in x)
                    ok = scatter_rows(ok, ~by_t)
                    w = fast[by_t]
                    pred_t, ok[by_t] = self._forgetting_predictions(blk, idx[w], valid[w], S[w], a[w], delta[w],
                                                                    kA[by_t], kI[by_t])
                    if inert_t.any():
                        # the inert rows' x·β (at the scale of x, put back here)
                        at = np.cumsum(by_t) - 1  # window of fast → its row of pred_t
                        for i, jw in enumerate(np.flatnonzero(inert_t)):
                            if ok[jw]:
                                parts[sel.start + fast[jw]] = Predicted(pred_t[at[jw]] * x_scale[i])
                r[fast[~ok]] = ORTHOGONAL
                k = np.flatnonzero(ok & (r[fast] == REFINE))
                betas = {}  # the refined windows' β (see _forgetting_refine)
                if k.size and (seg is not None or new is None):
                    # refinement against the rows (in the segment's ring and rows, or, for
                    # coef_, the window in the ring)
                    w = fast[k]
                    rows = seg if seg is not None else self._ring_only(blk)
                    beta, good = self._forgetting_refine(blk, idx[w], valid[w], S[w], a[w], delta[w], x[0][k],
                                                         x[1][k], rows, kappa[w])
                    r[w[~good]] = ORTHOGONAL
                    ok[k[~good]] = False
                    k, w = k[good], w[good]
                    betas = {int(j): beta[:, i] for i, j in enumerate(k)}
                    self.n_refined += w.size
                    r[w] = FAST
                route[sel] = r
                if new is not None:
                    # ŷ/s = k̂_Aᵀ x_A + k̂_Iᵀ x_I (the new row's products with the window)
                    pred[sel.start + fast] = np.einsum("wa,wac->wc", kA, x[0]) + np.einsum("wi,wic->wc", kI, x[1])
                    if by_t.any():
                        pred[sel.start + fast[by_t]] = pred_t
                    for j, beta in betas.items():  # refined: ẑ·β
                        pred[sel.start + fast[j]] = seg["Zh"][nf[j] - seg["m0"]] @ beta
                for k in np.flatnonzero(ok & ~by_t):  # x: the fast windows' solutions
                    w = fast[k]
                    if new is None or (keep is not None and keep[sel.start + w]):
                        parts[sel.start + w] = _Solution(blk, idx[w], valid[w], x[0][k], x[1][k],
                                                         beta=betas.get(int(k)))
                continue
            route[sel] = r
            kept = np.zeros(r.size, dtype=bool) if keep is None else keep[sel] & (r == FAST)
            if new is not None:
                # ŷ/s = r·u_A + t_Iᵀ S⁻¹ g_I,  t = the new row's T row
                t = np.where(valid, blk.T[new[sel, None], idx], 0.0)
                pred[sel] = blk.ru[new[sel]] + np.einsum("wi,wic->wc", t, a)
                ref = np.flatnonzero(r == REFINE)
                if seg is not None and ref.size:
                    v, ok = self._refine_windows(blk, idx[ref], valid[ref], a[ref], new[sel][ref], seg, kappa[ref])
                    pred[sel.start + ref] = v
                    r[ref] = np.where(ok, FAST, ORTHOGONAL)
                    route[sel.start + ref] = r[ref]
            for w, i in enumerate(range(sel.start, sel.stop)):
                if r[w] == REFINE:  # (with its condition estimate, for refinable)
                    parts[i] = (a[w][valid[w]], kappa[w])
                elif new is None or kept[w]:
                    parts[i] = a[w][valid[w]]
        return route, pred, parts

    def _forgetting_refine(self, blk, idx, valid, S, a, delta, xA, xI, seg, kappa):
        """Refinement of windows with a ridge and forgetting, on the block's iteration.

        The steps of :meth:`_refine_beta` in the block's scaled coordinates (``â = D^-½x``),
        ``(P + δ_w Σ)⁻¹`` by :meth:`_forgetting_ridge` (``S``, ``a`` and ``delta`` as
        there): from ``x`` and ``β = Ẑᵀâ``, a step is ::

            r = D^-½(ỹ − Ẑβ) − (1 + δ) Σ x,   dx = (P + δΣ)⁻¹ r,
            x ← x + dx,   β ← β + Ẑᵀ D^-½ dx

        one step where ``kappa`` is at most :data:`~._kernels.KAPPA_REFINE_MAX`, two above
        it. Returns ``β`` ``(D, n_good, c)`` of the windows one step can refine
        (:func:`refinable`), and which those are.
        """
        c = self.c
        rA, rI, good, beta, targets = self._forgetting_residuals(blk, idx, valid, xA, xI, delta, seg, kappa)
        idx, valid, S, a, delta, xA, xI, kappa, rA, rI = (
            v[good] for v in (idx, valid, S, a, delta, xA, xI, kappa, rA, rI))
        beta = beta.reshape(self.D, good.size, c)[:, good].reshape(self.D, -1)
        targets = (targets[0], targets[1][good])
        rdI = (blk.rdP[idx] * valid)[:, :, None]
        two = np.repeat(kappa > KAPPA_REFINE_MAX, c)  # β's columns w·c + j that take two steps
        for step in range(2 if two.any() else 1):
            if step:
                rA, rI = self._forgetting_residuals(blk, idx, valid, xA, xI, delta, seg, kappa, beta=beta,
                                                    targets=targets)[:2]
            dx, _ = self._forgetting_ridge(blk, idx, valid, S, a, delta, rhs=(rA, rI), tol=REFINED_TOL)
            step_beta = beta + self._rows_t(blk, idx, valid, np.moveaxis(dx[0], 0, 1) * blk.rd_A[:, None, None],
                                            dx[1] * rdI, seg)[0]
            # (a second step only where the window needs it: a window's β must not depend
            # on the others solved with it)
            beta = np.where(two, step_beta, beta) if step else step_beta
            xA, xI = xA + dx[0], xI + dx[1]
        return beta.reshape(self.D, -1, c), good

    def _forgetting_residuals(self, blk, idx, valid, xA, xI, delta, seg, kappa, beta=None, targets=None):
        """The residuals ``r = ỹ − (K̂ + (1 + δ_w) Σ) x`` of windows with a ridge and
        forgetting (the block's scaled coordinates), ``K̂x`` computed from the rows:
        ``D^-½ Ẑ (Ẑᵀ D^-½ x)`` (:meth:`_window_products`), or ``D^-½ Ẑβ`` given ``β``
        (and the ``targets`` the first call returned).

        Returns ``(r_A, r_I)`` of shapes ``(nw, n_A, c)`` and ``(nw, H, c)``, which
        windows one step can refine (:func:`refinable`, with their condition estimates
        ``kappa``; None given ``β``), ``Ẑᵀâ`` ``(D, nw·c)`` (or ``β``) and the targets.
        """
        rdI = blk.rdP[idx] * valid  # (nw, H)
        if beta is None:
            # â = D^-½ x
            KaA, KaI, yA, yI, good, beta = self._window_products(
                blk, idx, valid, np.moveaxis(xA, 0, 1) * blk.rd_A[:, None, None], xI * rdI[:, :, None], seg,
                kappa)
        else:
            (KaA, KaI), (yA, yI), good = self._rows_dot(blk, idx, valid, beta, seg), targets, None
        grow = (1.0 + delta)[:, None, None]
        # r = D^-½ (ỹ − K̂â) − (1 + δ) Σ x
        rA = (np.moveaxis(yA[:, None] - KaA, 0, 1) * blk.rd_A[None, :, None]
              - grow * blk.shift_A[None, :, None] * xA)
        rI = ((yI - KaI) * rdI[:, :, None] - grow * (blk.shiftP[idx] * valid)[:, :, None] * xI) * valid[:, :, None]
        return rA, rI, good, beta, (yA, yI)

    def _window_products(self, blk, idx, valid, aA, aI, seg, kappa):
        """``K̂â`` of windows ``core + periphery[idx]`` from their rows, ``Ẑ (Ẑᵀâ)``: two
        products with the ring (``O(N·D)`` a window) and with the segment's rows.

        Positions before ``seg["m0"]`` are rows in the ring (not yet overwritten: a row
        leaves the window before its slot is reused), later ones the segment's rows
        ``seg["Zh"]``. ``aA`` ``(n_A, nw, c)`` and ``aI`` ``(nw, H, c)`` are the windows'
        ``â`` on the core and on their periphery positions. Returns ``(K̂â)_A``, ``(K̂â)_I``,
        ``ỹ_A`` ``(n_A, c)``, ``ỹ_I``, which windows one step can refine
        (:func:`refinable`, with their condition estimates ``kappa``) and ``β = Ẑᵀâ``
        ``(D, nw·c)``.
        """
        buf, c = self.buf, self.c
        nw, H = idx.shape
        A = blk.slots_A
        _, in_ring, _, pos_slot, pos_seg = self._positions(blk, idx, valid, seg)
        U, a_norm = self._rows_t(blk, idx, valid, aA, aI, seg)  # β = Ẑᵀâ, (D, nw·c)
        good = refinable(a_norm, _column_norms(U), np.repeat(A.size + valid.sum(axis=1), c),
                         np.repeat(kappa, c)).reshape(nw, c).all(axis=1)
        KaA, KaI = self._rows_dot(blk, idx, valid, U, seg)
        # (a zero target after the segment's: what padding and ring positions index)
        yS = np.concatenate([seg["Y"] * _inv_or_zero(seg["s"])[:, None], np.zeros((1, c))])
        yI = np.where(in_ring[:, :, None], buf.Y[pos_slot] * _inv_or_zero(buf.s[pos_slot])[..., None],
                      yS[pos_seg])
        return KaA, KaI, buf.Y[A] * _inv_or_zero(buf.s[A])[:, None], yI, good, U

    def _positions(self, blk, idx, valid, seg):
        """Where the window positions ``idx`` of a segment are: each position's window
        ``(nw, H)``, which are rows in the ring and which the segment's rows, each one's
        ring slot (0 off the ring) and segment row (−1 off the segment: the zero row the
        callers append)."""
        m0 = seg["m0"]
        in_ring, in_seg = (idx < m0) & valid, (idx >= m0) & valid
        return (np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape), in_ring, in_seg,
                blk.slot[np.where(in_ring, idx, 0)], np.where(in_seg, idx - m0, -1))

    def _rows_dot(self, blk, idx, valid, V, seg):
        """``ẐV`` of windows ``core + periphery[idx]`` for ``V`` ``(D, nw·c)`` (one column
        block per window): its core part ``(n_A, nw, c)`` and periphery part
        ``(nw, H, c)`` (rows in the ring and in the segment as in
        :meth:`_window_products`)."""
        buf, c = self.buf, self.c
        nw = idx.shape[0]
        w_of, in_ring, _, pos_slot, pos_seg = self._positions(blk, idx, valid, seg)
        Kr = (buf.Zh @ V).reshape(buf.N, nw, c)
        # (a row of zeros after the segment's: what padding and ring positions index)
        Ks = np.concatenate([(seg["Zh"] @ V).reshape(-1, nw, c), np.zeros((1, nw, c))])
        return Kr[blk.slots_A], np.where(in_ring[:, :, None], Kr[pos_slot, w_of], Ks[pos_seg, w_of])

    def _rows_t(self, blk, idx, valid, vA, vI, seg):
        """``Ẑᵀv`` of windows ``core + periphery[idx]`` (rows in the ring and in the segment
        as in :meth:`_window_products`) for ``v`` given on the core, ``vA`` ``(n_A, nw, c)``,
        and on the periphery positions, ``vI`` ``(nw, H, c)``: ``(D, nw·c)``, and ``‖v‖``
        of each column."""
        buf, c = self.buf, self.c
        nw = idx.shape[0]
        w_of, in_ring, in_seg, pos_slot, pos_seg = self._positions(blk, idx, valid, seg)
        # v by ring slot and by segment row (zero outside each window)
        ring = np.zeros((buf.N, nw, c))
        ring[blk.slots_A] = vA
        ring[pos_slot[in_ring], w_of[in_ring]] = vI[in_ring]
        segc = np.zeros((seg["Zh"].shape[0], nw, c))
        segc[pos_seg[in_seg], w_of[in_seg]] = vI[in_seg]
        Ztv = buf.Zh.T @ ring.reshape(buf.N, nw * c) + seg["Zh"].T @ segc.reshape(segc.shape[0], nw * c)
        return Ztv, _column_norms(np.concatenate([ring, segc]).reshape(buf.N + segc.shape[0], nw * c))

    def _forgetting_ridge(self, blk, idx, valid, S, a, delta, rhs=None, tol=None, pad=False):
        """A ridge with forgetting: solve ``(P + δ_w Σ) x = ỹ`` for the windows ``w``.

        ``P`` is a window's matrix with the block's reference shifts ``Σ`` (what the
        blocks solve: ``S`` its periphery's Schur complements, ``a`` = ``(P⁻¹ỹ)_I``),
        ``δ_w`` from :meth:`_DualBlock.delta`. With ``x₀ = P⁻¹ỹ``, ``(I + δ P⁻¹Σ) x = x₀``
        by :func:`~._kernels.solve_shifted` (``P⁻¹Σ`` has its eigenvalues in
        ``[0, 1]``). A step is two triangular solves with the core factor and one product
        with each window's ``S⁻¹``, for all the windows together. With ``rhs = (r_A, r_I)``
        (residuals, see :meth:`_forgetting_residuals`) the right-hand side is ``r``
        instead of ``ỹ`` (``x₀ = P⁻¹r``): the correction of a refinement step. ``tol``
        (per window): see :func:`~._kernels.solve_shifted`.

        Returns ``x`` as ``(x_A, x_I)`` of shapes ``(nw, n_A, c)`` and ``(nw, H, c)``, and
        which windows converged (:func:`~._kernels.solve_shifted`).
        """
        n_in = idx.shape[0]
        if pad:  # (see pad_windows: the windows of a call's predictions)
            tol = np.zeros(n_in) if tol is None else np.broadcast_to(tol, (n_in,))
            idx, valid, S, a, delta, tol = pad_windows(n_in, idx, valid, S, a, delta, tol, eye=(2,))
            if rhs is not None:
                rhs = tuple(pad_windows(n_in, *rhs))
        nw, c, nA, P = idx.shape[0], self.c, blk.slots_A.size, blk.slot.size
        vm = valid[:, :, None]
        p_inv, (sA, sI), size, spread = self._shifted_parts(blk, idx, valid, S, c)
        if rhs is None:
            # x₀ = P⁻¹ỹ:  x_I = a,  x_A = K_AA⁻¹ỹ_A − X_I a
            x0I = a * vm
            x0A = np.tile(blk.a_y, nw) - blk.X @ _by_position(x0I, idx, valid, P)
        else:  # x₀ = P⁻¹r
            x0A, x0I = p_inv(np.moveaxis(rhs[0], 0, 1).reshape(nA, nw * c), rhs[1])

        def apply_M(x):  # P⁻¹(Σx)
            return list(p_inv(sA * x[0], sI * x[1]))

        (xA, xI), ok, steps = solve_shifted(apply_M, [x0A, x0I], spread(delta), size, spread=spread, tol=tol)
        if rhs is None and not np.any(tol):  # (solved to rounding: what coef() would take)
            self.ridge_share = ridge_share(steps, delta) or self.ridge_share
        return (np.moveaxis(xA.reshape(nA, nw, c), 1, 0)[:n_in], xI[:n_in]), ok[:n_in]

    def _inert_products(self, blk, idx, valid, X, seg):
        """The products of inert rows ``X`` (one per window) with the unit rows of their
        windows, in the block's scaled coordinates (``x·β = Σ (x·ẑ_i) â_i``, ``â = D^-½x``):
        ``(m, k_A, k_I)``, the rows taken at unit scale first (``m = max |x|``, to be put
        back: a zero-weight row's x is checked for no scale). The periphery rows are the
        ring's before the segment and the segment's own after it. One matrix–vector product
        per row and set of rows, so that a row's products do not depend on the other rows
        asked for (later rows of a call must not change an earlier prediction)."""
        m, Xs = unit_scale(X)
        buf, m0 = self.buf, seg["m0"]
        kA = np.empty((X.shape[0], blk.slots_A.size))
        kI = np.zeros(idx.shape)
        for q, xs in enumerate(Xs):
            ring = buf.Zh @ xs  # (the core's rows are ring rows too)
            kA[q] = ring[blk.slots_A]
            pos = idx[q][valid[q]]
            own = pos >= m0  # the segment's rows before the inert row
            k = np.empty(pos.size)
            k[~own] = ring[blk.slot[pos[~own]]]
            k[own] = seg["Zh"][: int(pos[own].max(initial=m0 - 1)) - m0 + 1] @ xs if own.any() else 0.0
            kI[q, valid[q]] = k * blk.rdP[pos]
        return m, kA * blk.rd_A[None, :], kI

    def _forgetting_predictions(self, blk, idx, valid, S, a, delta, kA, kI):
        """``ŷ/s = kᵀx`` of windows ``w`` of :meth:`_forgetting_ridge` without ``x``.

        With ``(I + δ_w M) x = x₀`` and ``M = P⁻¹Σ``: ``kᵀx = tᵀx₀`` for
        ``(I + δ_w Mᵀ) t = k``, ``Mᵀ = ΣP⁻¹`` (the same eigenvalues in ``[0, 1]``, the
        same iteration), which has one column a window where ``x`` has one a target: a
        step costs ``O(N²)`` a window instead of ``O(N²·c)``. ``x₀ = P⁻¹ỹ`` is
        ``x₀_I = a``, ``x₀_A = K̂_AA⁻¹ỹ_A − X_I a``, so ::

            tᵀx₀ = t_Aᵀ K̂_AA⁻¹ỹ_A + (t_I − X_Iᵀ t_A)ᵀ a

        ``kA`` ``(nw, n_A)`` and ``kI`` ``(nw, H)`` are the new rows' products with each
        window's rows. Returns the predictions ``(nw, c)`` and which windows converged
        (to rounding, :func:`~._kernels.solve_shifted`).
        """
        nw = idx.shape[0]
        # (padded: a window's bits must not depend on how many windows are solved with it)
        idx, valid, S, a, delta, kA, kI = pad_windows(nw, idx, valid, S, a, delta, kA, kI, eye=(2,))
        p_inv, shifts, size, spread = self._shifted_parts(blk, idx, valid, S, 1)

        def apply_Mt(t):  # Σ(P⁻¹t)
            return [s * u for s, u in zip(shifts, p_inv(*t))]

        t0 = [np.ascontiguousarray(kA.T), (kI * valid)[:, :, None]]
        (tA, tI), ok, steps = solve_shifted(apply_Mt, t0, spread(delta), size, spread=spread)
        self.ridge_share = ridge_share(steps, delta) or self.ridge_share
        w_of = np.broadcast_to(np.arange(idx.shape[0])[:, None], idx.shape)
        tI = (tI[:, :, 0] - (blk.X.T @ tA)[idx, w_of]) * valid
        return (tA.T @ blk.a_y + np.einsum("wi,wic->wc", tI, a))[:nw], ok[:nw]

    @staticmethod
    def _shifted_parts(blk, idx, valid, S, k):
        """What the iterations of :meth:`_forgetting_ridge` and
        :meth:`_forgetting_predictions` share, for windows ``idx`` of ``k`` columns each:
        ``p_inv(v_A, v_I) = P⁻¹v``, the shifts ``(Σ_A, Σ_I)`` in the layouts of the
        unknowns (``(n_A, nw·k)`` and ``(nw, H, k)``), and ``size`` and ``spread`` for
        :func:`~._kernels.solve_shifted`."""
        nw, nA, P = idx.shape[0], blk.slots_A.size, blk.slot.size
        vm = valid[:, :, None]
        w_of = np.broadcast_to(np.arange(nw)[:, None], idx.shape)
        Sinv = np.linalg.inv(S) if nw else S  # SPD, κ ≤ GRAM_KAPPA_MAX (the fast route)

        def p_inv(vA, vI):
            # P⁻¹v:  u = L⁻¹v_A,  x_I = S⁻¹(v_I − R_Iᵀu),  x_A = L⁻ᵀ(u − R_I x_I)
            u = blk._fwd(vA)
            Rtu = (blk.R.T @ u).reshape(P, nw, k)[idx, w_of]
            xI = (Sinv @ ((vI - Rtu) * vm)) * vm
            return blk._bwd(u - blk.R @ _by_position(xI, idx, valid, P)), xI

        def size(x):
            return np.maximum(np.abs(x[0]).reshape(nA, nw, k).max(axis=(0, 2), initial=0.0),
                              np.abs(x[1]).max(axis=(1, 2), initial=0.0))

        def spread(v):  # per window → the layouts of the unknowns
            return [np.repeat(v, k)[None, :], v[:, None, None]]

        return p_inv, (blk.shift_A[:, None], blk.shiftP[idx][:, :, None] * vm), size, spread

    def _forgetting_ridge_direct(self, blk, idx, valid, delta):
        """A ridge with forgetting in a short window: each window's matrix, solved.

        In the block's Jacobi-scaled coordinates window ``w`` is ::

            [K̂_AA + (1 + δ_w) Σ_A    K̂_AI              ] [x_A]   [ỹ_A]
            [K̂_IA                    K̂_II + (1 + δ_w) Σ_I] [x_I] = [ỹ_I]

        (``Σ`` the reference shifts, which the stored ``K̂_AA`` and ``KP`` already carry
        once), solved by one LU of the stack of ``(n_A + H)``-square matrices; padding
        positions get an identity row. Returns ``x`` as :meth:`_forgetting_ridge`.
        """
        nw, H = idx.shape
        c, nA = self.c, blk.slots_A.size
        n = nA + H
        vm = valid.astype(float)
        M = np.zeros((nw, n, n))
        M[:, :nA, :nA] = blk.K_A
        dA = np.arange(nA)
        M[:, dA, dA] += delta[:, None] * blk.shift_A[None, :]
        KAI = np.moveaxis(blk.KAP[:, idx], 0, 1) * vm[:, None, :]  # (nw, n_A, H)
        M[:, :nA, nA:] = KAI
        M[:, nA:, :nA] = np.swapaxes(KAI, 1, 2)
        M[:, nA:, nA:] = blk.KP[idx[:, :, None], idx[:, None, :]] * vm[:, :, None] * vm[:, None, :]
        dI = nA + np.arange(H)
        M[:, dI, dI] += np.where(valid, delta[:, None] * blk.shiftP[idx], 1.0)
        rhs = np.zeros((nw, n, c))
        rhs[:, :nA] = blk.ytil_A
        rhs[:, nA:] = (blk.g[idx] + blk.ru[idx]) * vm[:, :, None]  # ỹ_p = g_p + r_p·u_A
        x, ok = solve_stack(M, rhs)
        return (x[:, :nA], x[:, nA:] * vm[:, :, None]), ok

    def _refine_windows(self, blk, idx, valid, a_P, new, seg, kappa):
        """Refinement of several windows of a segment (:meth:`_refine_beta`). Returns the
        prediction ``/s`` of each window's new row, ``ẑ·β``, and which windows could be
        refined (the others are for the orthogonal route)."""
        beta, ok = self._refine_beta(blk, idx, valid, a_P, seg, kappa)
        return np.einsum("wd,dwc->wc", seg["Zh"][new - seg["m0"]], beta), ok

    def _refined(self, blk, lo, hi, part, k=None):
        """``β`` of the window ``core + periphery[lo, hi)`` refined (:meth:`_refine_beta`),
        or ``None`` where it cannot be (:func:`refinable`). ``part``: ``(a_P, κ)``, the
        window's periphery part of ``a`` and its condition estimate. (The windows before a
        segment's rows are refined with the segment's others in :meth:`_solve_windows`:
        ``k``, a new row's products, is never given here.)"""
        assert k is None
        a_P, kappa = part
        beta, ok = self._refine_beta(blk, np.arange(lo, hi)[None], np.ones((1, hi - lo), dtype=bool), a_P[None],
                                     self._ring_only(blk), np.array([kappa]))
        return beta[:, 0] if ok[0] else None

    def _refine_beta(self, blk, idx, valid, a_P, seg, kappa):
        """Refinement of windows ``core + periphery[idx]`` against their rows, as matrix
        products (``valid`` marks real positions; ring and segment rows as in
        :meth:`_window_products`).

        ``a`` from the blocks, ``β = Ẑᵀa``; then a step is::

            r = ỹ − Ẑβ − diag(shift) a,   δ = K̂⁻¹ r (through the blocks),
            a ← a + δ,   β ← β + Ẑᵀδ

        one step for a window whose condition estimate ``kappa`` is at most
        :data:`~._kernels.KAPPA_REFINE_MAX`, two above it (up to
        :data:`KAPPA_REFINE_TWICE`): a step contracts the error by about ``κ·eps``.
        invariant: ``β = Ẑᵀa`` up to the rounding of the products, which the next
        residual, computed from ``β``, sees and corrects. ``β`` is carried rather than
        formed from ``a`` at the end: the refined windows' ``â`` is large beside ``β``
        (growth up to 100√κ, see :func:`refinable`), and ``Ẑᵀâ`` (or ``k̂·â`` summed over
        the window's rows) rounds to about ``eps·‖â‖``, growing with ``N`` (measured, RFF
        σ = 0.3, α = 1e-6, N = D = 1000: 5.3 bound units from the oracle that way, 0.0004
        carried). Returns ``β`` ``(D, nw, c)`` and which windows one step can refine
        (:func:`refinable`; the others are for the orthogonal route).
        """
        c = self.c
        nw, H = idx.shape
        A, nA, nP = blk.slots_A, blk.slots_A.size, blk.slot.size
        vm = valid[:, :, None]
        w_of, in_ring, _, pos_slot, pos_seg = self._positions(blk, idx, valid, seg)
        # a_A = K̂_AA⁻¹ỹ_A − X_I a_I for every window (columns w·c + j)
        a_A = np.tile(blk.a_y, nw) - blk.X @ _by_position(a_P, idx, valid, nP)  # (nA, nw·c)
        KaA, KaI, yA, yI, ok, beta = self._window_products(blk, idx, valid, a_A.reshape(nA, nw, c), a_P, seg,
                                                           kappa)
        self.n_refined += int(ok.sum())
        shift_A = self._shift(A)[:, None]
        seg_s = np.append(seg["s"], 0.0)[pos_seg]  # (an empty segment: coef_)
        shift_I = np.where(in_ring, self._shift(pos_slot), self._shift(seg_s, by_norm=True))[:, :, None]
        S = _principal_blocks(blk.T, idx, valid, copy=True)
        S[:, np.arange(H), np.arange(H)] += ~valid
        yA = np.tile(yA, nw)
        two = np.repeat(kappa > KAPPA_REFINE_MAX, c)  # β's columns w·c + j that take two steps
        for step in range(2 if two.any() else 1):
            if step:
                KaA, KaI = self._rows_dot(blk, idx, valid, beta, seg)
            # r = ỹ − Ẑβ − diag(shift) a
            rA = yA - KaA.reshape(nA, nw * c) - shift_A * a_A
            rI = (yI - KaI - shift_I * a_P) * vm
            # δ_I = S⁻¹ (r_I − X_Iᵀ r_A),  δ_A = K̂_AA⁻¹ r_A − X_I δ_I
            XtrA = (blk.X.T @ rA).reshape(nP, nw, c)[idx, w_of]  # (nw, H, c)
            dI = solve_stack(S, (rI - XtrA) * vm)[0] * vm
            dA = blk._bwd(blk._fwd(rA)) - blk.X @ _by_position(dI, idx, valid, nP)  # (nA, nw·c)
            step_beta = beta + self._rows_t(blk, idx, valid, dA.reshape(nA, nw, c), dI, seg)[0]
            # (a second step only where the window needs it: a window's β must not depend
            # on the others solved with it)
            beta = np.where(two, step_beta, beta) if step else step_beta
            a_A, a_P = a_A + dA, a_P + dI
        return beta.reshape(self.D, nw, c), ok

    def _ring_only(self, blk):
        """An empty segment for :meth:`_window_products`: every window position is a row
        in the ring (the coefficients of a window whose rows are all written)."""
        return dict(m0=blk.m, Zh=np.zeros((0, self.D)), s=np.zeros(0), Y=np.zeros((0, self.c)))

    def _spreads(self, s_new):
        """``max/min`` of ``√w·s`` over the windows before each new row (``s_new``), or
        over the current window (``s_new=None``); ``inf`` with a zero row."""
        buf = self.buf
        s_new = np.zeros(1) if s_new is None else s_new
        q = np.concatenate([buf.s[buf.slots()], s_new[:-1]])
        with np.errstate(divide="ignore"):
            # zero rows are decoupled (see _shift): NaN, which fmax and fmin skip
            lq = np.where(q > 0, np.log(q), np.nan) - 0.5 * np.log(self.lam) * np.arange(q.size)
        padded = np.concatenate([np.full(self.N, np.nan), lq])
        ends = buf.n + np.arange(s_new.size)  # each window: the N values before its end
        V = np.lib.stride_tricks.sliding_window_view(padded, self.N)[ends]
        with np.errstate(invalid="ignore"):
            spread = np.exp(np.fmax.reduce(V, axis=1) - np.fmin.reduce(V, axis=1))
        return np.where(np.isnan(spread), 1.0, spread)  # a window of zero rows: β = 0

    def _coef(self, blk, a_P, lo, hi):
        if isinstance(a_P, _Solution):  # the whole window's â (a ridge with forgetting)
            return a_P.beta if a_P.beta is not None else self.buf.Zh.T @ a_P.by_slot(self.buf.N)
        # â_A = K̂_AA⁻¹ ỹ_A − X_I â_I,  β = Ẑ_Aᵀ â_A + Ẑ_Iᵀ â_I
        I = slice(lo, hi)
        # â by ring slot (zero outside the window): one product with the ring, no copy
        # of the window's rows
        a = np.zeros((self.buf.N, a_P.shape[1]))
        a[blk.slots_A] = blk.a_y - blk.X[:, I] @ a_P
        a[blk.slot[I]] = a_P
        return self.buf.Zh.T @ a


class _Solution:
    """``â`` of one window of a block: core part ``xA`` and periphery part ``xI``."""

    def __init__(self, blk, idx, valid, xA, xI, beta=None):
        self.beta = beta  # β itself, when refinement computed it (see _forgetting_refine)
        self.slots_A, self.slots_I = blk.slots_A, blk.slot[idx[valid]]
        # â = D^-½ x (the block's Jacobi scaling)
        self.xA, self.xI = xA * blk.rd_A[:, None], xI[valid] * blk.rdP[idx[valid]][:, None]

    def by_slot(self, N):
        a = np.zeros((N, self.xA.shape[1]))
        a[self.slots_A] = self.xA
        a[self.slots_I] = self.xI
        return a


#: Largest growth ``‖â‖·‖Ẑ‖_F / ‖β‖`` (``β = Ẑᵀâ``) of a window that one step of
#: refinement may correct, per unit of ``√κ`` (``κ`` the window's Gram condition
#: estimate). The residual's product ``Ẑᵀâ`` rounds to about ``eps·‖â‖·‖Ẑ‖``, which
#: carries into the refined ``β`` as ``eps·growth·‖β‖``, against a bound of ``100·eps·√κ``
#: times the predictions' scale. Where ``â`` is far larger than what ``β`` keeps of it (a
#: window made definite by a small ridge: rank-deficient, low-rank or repeated rows,
#: targets off their span) that is far outside. Measured over 5,000 refined windows at
#: ``N ≤ 100`` (RFF features and low-rank rows, ``α`` 1e-12…1e-4, ``λ`` 1 and 0.999):
#: growth/√κ ≤ 1,000 → at most 0.18 bound units; 4.9e3…1.6e4 → up to 2 units.
REFINE_GROWTH_PER_ROOT_KAPPA = 100.0


def _by_position(vI, idx, valid, n_positions):
    """Values ``vI`` ``(nw, H, c)`` on the windows' periphery positions ``idx`` as
    ``(n_positions, nw·c)``: by position, zero outside each window (padding positions,
    which alias position 0, are not written)."""
    nw, _, c = vI.shape
    out = np.zeros((n_positions, nw, c))
    out[idx[valid], np.broadcast_to(np.arange(nw)[:, None], idx.shape)[valid]] = vI[valid]
    return out.reshape(n_positions, nw * c)


def _column_norms(M):
    """The 2-norm of each column of ``M``, scaled by its largest entry (the sum of squares
    of rows at 1e-150 with targets of 1, ``ỹ = y/s ≈ 1e150``, overflows)."""
    m = np.abs(M).max(axis=0, initial=0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(m > 0, m * np.sqrt(np.sum((M / np.where(m > 0, m, 1.0)) ** 2, axis=0)), 0.0)


def refinable(a_norm, beta_norm, rows, kappa):
    """Whether windows with ``‖â‖ = a_norm``, ``‖β‖ = beta_norm``, ``rows`` unit rows (so
    ``‖Ẑ‖_F² ≤ rows``) and condition estimates ``kappa`` are within
    :data:`REFINE_GROWTH_PER_ROOT_KAPPA` (a zero ``β`` of a zero ``â`` is)."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        growth = a_norm * np.sqrt(rows) / beta_norm
    return ~(growth > REFINE_GROWTH_PER_ROOT_KAPPA * np.sqrt(kappa))


def ridge_shifts(s, *, alpha, log_w=0.0):
    """The diagonal shifts ``α/(w s²)`` of rows of norms ``s`` and weights ``w = e^log_w``.

    A zero row (a zero-weight row is handed over as one) gets ``1``: with a unit diagonal,
    a zero row of the Gram matrix and ``ỹ = 0`` it gets ``â = 0``, what the pseudo-inverse
    gives it, and leaves the rest of the system as it would be without it. Shifts beyond
    ``1e200`` are capped there: such a row is decoupled to rounding either way.
    """
    if alpha == 0.0:
        return np.where(s > 0, 0.0, 1.0)
    with np.errstate(over="ignore", divide="ignore"):
        shift = alpha * np.exp(-log_w) * _inv_or_zero(s) ** 2
    return np.where(s > 0, np.minimum(shift, SHIFT_MAX), 1.0)


def _inv_or_zero(s):
    with np.errstate(divide="ignore", over="ignore"):
        return np.where(s > 0, 1.0 / np.where(s > 0, s, 1.0), 0.0)
