"""What the window solvers share: the orthogonal route and the block solvers' skeleton.

Every solver answers the same question for the window ``Ã = W½ Z`` (``n`` weighted rows,
weights ``λ^age``) and ``Ỹ = W½ Y``::

    β = argmin ‖Ã β − Ỹ‖² + α‖β‖²   (minimum norm when α = 0)
      = lstsq([Ã; √α I], [Ỹ; 0], rcond=None)

and has the same small interface: ``update(Z, Y, *, predict) -> predictions or None``,
``coef()``, ``checkpoint(n_rows)`` / ``restore(record)`` (an undo record of what the rows
will overwrite) and ``n_orthogonal``. Here:

* :class:`SlidingQR` / :class:`SlidingR` — the orthogonal route slid row by row
  (``O(N·D)`` for the wide window, ``O(D²)`` for the tall one);
* :class:`CoreBlockSolver` — the skeleton of the dual and primal block solvers.
"""

import math

import numpy as np
import scipy.linalg

from ._kernels import (
    EPS, MAX_STEPS, REDUCED_SHARE, clear_of_cutoff, few_rows, lstsq_cutoff, lstsq_stack, min_norm_solve, probes,
    ridge_from_factor, triangular_lstsq, triangular_solve, unbatched, window_lstsq,
)

# one matrix at a time: without SciPy's batching wrapper (see unbatched)
qr, qr_delete, qr_insert = (unbatched(f) for f in (scipy.linalg.qr, scipy.linalg.qr_delete,
                                                    scipy.linalg.qr_insert))


def _nrm2(v):
    """``‖v‖₂`` without overflow or underflow (BLAS ``dnrm2`` scales)."""
    return float(scipy.linalg.blas.dnrm2(v)) if v.size else 0.0


from ._window import WindowBuffer, normalise_rows

__all__ = [
    "CoreBlockSolver", "Predicted", "ReferenceWindow", "SlidingQR", "SlidingR", "forgetting_block_size",
    "weight_block_size",
]

#: a ridge with forgetting: a block's windows have shifts within a factor of this of those
#: of its reference window (the iteration then contracts by at least 1/9 a step, see
#: :func:`._kernels.solve_shifted`). A wider spread makes longer blocks but widens the
#: condition bound of the windows with less ridge than the reference by up to this
#: factor, sending more ill-conditioned windows to the orthogonal route; measured on
#: N = 2000, D = 64, λ = 0.9 (random features): spreads 1.25 / 1.5 / 2 give 4.8 / 6.1 /
#: 7.3 ms an update at α = 1e-12 (781 / 1008 / 1406 orthogonal windows) and 0.95 / 0.62
#: / 0.51 ms at α = 0.1: the worst case decides.
SHIFT_SPREAD = 1.25


#: unit rows whose entries all agree to this are one direction (merged by SlidingQR)
PARALLEL_TOL = 4 * EPS


def _same_direction(u, v):
    return bool(np.max(np.abs(u - v), initial=0.0) <= PARALLEL_TOL)


def _dot_tol(D):
    # how far the products of two unit rows that agree to PARALLEL_TOL (with a third
    # unit vector, or with each other: then from 1) can differ, rounding included
    return 8.0 * (D + 1) * EPS


#: weights relative to the start of a block stay below this factor (``λ^-b``)
WEIGHT_RANGE = 1e100


def weight_block_size(forgetting_factor):
    """The longest block over which the relative weights ``λ^-b`` stay below
    :data:`WEIGHT_RANGE` (no limit without forgetting)."""
    if forgetting_factor >= 1.0:
        return np.iinfo(np.int64).max
    return int(np.log(WEIGHT_RANGE) / -np.log(forgetting_factor))


def forgetting_block_size(forgetting_factor):
    """The longest block whose windows' shifts stay within :data:`SHIFT_SPREAD` of its
    middle window's: ``λ^-(b/2) ≤ SHIFT_SPREAD``."""
    return int(max(1, 2.0 * np.log(SHIFT_SPREAD) / -np.log(forgetting_factor)))


#: The cost model that decides how the coefficients a call ends with are solved (µs, one
#: BLAS thread; fitted to one-row calls of the dual route at N = 100…400 and of the
#: primal route at D = 64…256, c = 1 and 24, within about 25 %): the block's fast route
#: costs ``_FAST_US + n²(_FAST_NS + (c − 1)·_FAST_COLUMN_NS)/1000``; with a ridge and
#: forgetting each step of its iteration adds ``_STEP_US + n²(_STEP_NS + (c − 1)·
#: _STEP_COLUMN_NS)/1000``; the window's own matrix costs ``_DIRECT_US + n³/
#: _CHOLESKY_N3_PER_US`` (one Cholesky) ``+ n²(_DIRECT_NS + c·_DIRECT_COLUMN_NS)/1000``,
#: plus the product that forms it at ``_PRODUCT_PER_US`` multiply-adds a µs.
_FAST_US, _FAST_NS, _FAST_COLUMN_NS = 300.0, 1.0, 0.2
_STEP_US, _STEP_NS, _STEP_COLUMN_NS = 110.0, 0.67, 0.144
_DIRECT_US, _CHOLESKY_N3_PER_US, _DIRECT_NS, _DIRECT_COLUMN_NS = 60.0, 72e3, 2.0, 0.25
_PRODUCT_PER_US = 12e3
#: the window's matrix is taken when the model gives it at most this share of the block
#: route's cost
_DIRECT_MARGIN = 0.75


def coef_directly(n, c, steps=0, *, form=0):
    """Whether the coefficients of one window (``n`` unknowns, ``c`` targets) cost less
    from the window's own matrix (``form`` multiply-adds to form it) than from the
    block's route, its fast route and ``steps`` steps of its iteration (the model above)."""
    n2 = n * n / 1e3
    block = (_FAST_US + n2 * (_FAST_NS + (c - 1) * _FAST_COLUMN_NS)
             + steps * (_STEP_US + n2 * (_STEP_NS + (c - 1) * _STEP_COLUMN_NS)))
    direct = (_DIRECT_US + n**3 / _CHOLESKY_N3_PER_US + form / _PRODUCT_PER_US
              + n2 * (_DIRECT_NS + c * _DIRECT_COLUMN_NS))
    return direct < _DIRECT_MARGIN * block


def ridge_share(steps, delta):
    """How much the ridge weighs in a block's matrix, ``m``, as the iteration's steps show
    it: a step contracts by about ``m|δ|/(2 + δ)`` (``m ≤ 1``: ``‖P⁻¹Σ‖``, far below 1 where
    the ridge is small against the window), and ``steps`` steps reached rounding at the
    windows' largest ``|δ|/(2 + δ)`` (``delta``, an array). None when it shows nothing."""
    delta = np.asarray(delta, dtype=float)
    r = np.max(np.abs(delta) / (2.0 + delta), initial=0.0)
    if not r > 0.0 or steps < 1:
        return None
    return float(min(1.0, (4 * EPS) ** (1.0 / steps) / r))


def expected_steps(share, delta):
    """The steps the iteration takes to rounding at ``δ`` when the ridge weighs ``share``
    (:func:`ridge_share`)."""
    r = share * abs(delta) / (2.0 + delta)
    if not r > 4 * EPS:
        return 1
    return int(min(MAX_STEPS, np.ceil(np.log(4 * EPS) / np.log(r))))


class ReferenceWindow:
    """What a block of the dual or primal route needs for a ridge with forgetting.

    The ridge does not scale with the weights: the block's factor is made with the ridge
    (the shifts ``α/(w s²)``) of its reference window ``j_ref``, its middle, and window
    ``j`` of the block differs from it by one scalar, ``P + δ_j Σ`` (see :meth:`delta`).
    Without a ridge, or without forgetting, ``j_ref = 0`` and ``δ = 0``.
    """

    def _set_reference(self, *, alpha, forgetting_factor, block_size):
        self.log_lam = float(np.log(forgetting_factor)) if forgetting_factor < 1.0 else 0.0
        self.forgets = alpha > 0 and forgetting_factor < 1.0
        self.j_ref = 0.5 * (block_size - 1) if self.forgets else 0.0

    def delta(self, steps):
        """``δ = λ^-(j − j_ref) − 1`` of the windows ``j = steps`` of the block."""
        return np.expm1(-(np.asarray(steps, dtype=float) - self.j_ref) * self.log_lam)

    def window_steps(self, hi):
        """The block step ``j`` of the windows that end at periphery position ``hi``
        (the window before the row at position ``p`` ends at ``p``, the current one at
        ``m``; positions count the ``ℓ`` old rows first)."""
        return np.asarray(hi) - self.ell

    @staticmethod
    def widen_kappa(kappa, delta, ridge_share):
        """The condition estimate ``‖·‖_F ‖(·)⁻¹‖`` of ``P + δΣ`` from that of ``P``.

        With ``0 ⪯ Σ ⪯ P``: for ``δ ≥ 0``, ``P + δΣ ⪰ P`` (no larger inverse) and
        ``‖P + δΣ‖_F ≤ ‖P‖_F + δ‖Σ‖_F``, a factor ``1 + δ·ridge_share`` with
        ``ridge_share = ‖Σ‖_F/‖P‖_F`` (the estimate's norm; small for a small ridge); for
        ``δ < 0``, ``P + δΣ ⪰ (1 + δ)P``: a factor ``1/(1 + δ)``.
        """
        with np.errstate(invalid="ignore"):
            return kappa * np.where(delta >= 0.0, 1.0 + delta * ridge_share, 1.0 / (1.0 + delta))


class SlidingQR:
    """Economic QR factors of the weighted window, slid one row at a time.

    With ``Ã = W½ Z`` the window (``n`` rows, oldest first):

    * ``orientation="columns"`` (``D ≥ N``): ``Ãᵀ = Q R``, ``Q`` of shape ``(D, n)``,
      ``R`` ``(n, n)``; then ``Ã = Rᵀ Qᵀ`` and ``pinv(Ã) = Q pinv(Rᵀ)``.
    * ``orientation="rows"`` (``D < N``): ``Ã = Q R``, ``Q`` ``(n, D)``, ``R`` ``(D, D)``;
      then ``pinv(Ã) = pinv(R) Qᵀ``.

    invariant: ``Q`` has orthonormal columns and ``Q R`` is ``Ãᵀ`` (or ``Ã``).

    (The tall window of at least ``2D`` rows has :class:`SlidingR`, which needs no ``Q``.)

    With a ridge ``α > 0`` the factors are those of the augmented window, whose
    minimum-norm solution is the ridge solution without squaring the condition number:
    ``[√α E; Ãᵀ]`` for ``"columns"`` (``E`` puts each row's ``√α`` at its ring slot, so
    that ``Ã_aug Ã_augᵀ = ÃÃᵀ + αI``), ``[√α I; Ã]`` for ``"rows"`` (the ridge rows stay
    first and are never slid out). The ridge rows come first so that each Householder
    reflector maps its column onto a ridge row: rows far below ``√α`` are then not
    cancelled against themselves. The ridge does not scale with the weights, so with
    forgetting the factors hold the rows alone and :meth:`solve` takes the ridge.

    A slide removes the oldest row (:func:`scipy.linalg.qr_delete`), ages the rest (the
    weights are a uniform scale: ``R ← √λ R``) and appends the new row with weight 1
    (:func:`scipy.linalg.qr_insert` for ``"rows"``, Gram–Schmidt twice for ``"columns"``,
    where it is the last column: :meth:`_append_column`): ``O(N·D)``, written into the
    factors unless a checkpoint holds them, no product of ``Ã`` with itself, so the
    condition number is not squared. Every ``N`` slides the factors are recomputed from
    the window, so rounding cannot accumulate.

    **Parallel rows are merged** (``"columns"`` without a ridge): rows ``ã_k = μ_k ẑ``
    with one unit row ``ẑ`` (a constant start, repeated rows, a row and its multiple)
    are one column ``ρ ẑ`` of the factors, ``ρ² = Σ μ_k²``, with the target
    ``t = Σ μ_k ỹ_k / ρ``; a zero row is no column at all. Both keep ``ÃᵀÃ`` and
    ``Ãᵀ Ỹ``, so the least-squares solutions, and the minimum-norm one, are those of the
    window. Rows ``ẑ`` that agree to :data:`PARALLEL_TOL` are merged: their difference
    is below lstsq's cut-off, which would drop the direction it spans. A row joining or
    leaving a column rescales that column of ``R`` (``O(n)``; ``Q`` is unchanged); the
    last row of a column deletes it (``O(N·D)``). Without this a window with repeated
    rows is rank deficient and every solve needs an SVD of ``R`` (``O(N³)``).

    invariant (merged): ``Q R = [ρ_g ẑ_g]_g`` over the columns ``g``, ``ρ_g² =
    Σ_{k: col_k = g} μ_k²``, and ``col_k`` is ``-1`` for the zero rows.
    """

    #: whether ``Q`` and ``R`` are this object's alone (no checkpoint holds them), so that
    #: a slide may write into them
    owned = False
    #: ``"columns"``: the buffer whose leading columns are ``Q`` (see :meth:`_append_column`)
    _Qspare = None

    def __init__(self, A, *, orientation, window_size, alpha=0.0, slots=None):
        self.orientation = orientation
        self.N = window_size
        self.D = A.shape[1]
        self.root_alpha = float(np.sqrt(alpha))
        self.merged = orientation == "columns" and not self.root_alpha
        self.refactor(A, slots=slots)

    def refactor(self, A, *, slots=None):
        """Factorise the weighted window ``A`` (oldest row first, ring ``slots``)."""
        if self.merged:
            self._refactor_merged(A)
            return
        M = A.T if self.orientation == "columns" else A
        if self.root_alpha and self.orientation == "columns":
            E = np.zeros((self.N, A.shape[0]))
            E[slots, np.arange(A.shape[0])] = self.root_alpha
            # the ridge rows first: Householder's reflectors then map each column onto a
            # ridge row, and the rows' block of Q (ÃR⁻¹, tiny beside √α for rows far below
            # it) is formed without cancelling against 1 (measured: rows of norm 1e-88 with
            # α = 1e-6, 5 % of each prediction lost with the ridge rows last)
            M = np.vstack([E, M])
        elif self.root_alpha:
            M = np.vstack([self.root_alpha * np.eye(self.D), M])  # (first: see above)
        self.Q, self.R = qr(M, mode="economic", check_finite=False)
        self.owned = True
        self.n = A.shape[0]
        self.slides = 0
        self.peak = _frobenius(self.R)

    def share(self):
        """Mark the factors as held by a checkpoint: changes then write new arrays, not
        into these, until both ``Q`` and ``R`` are new (``owned``)."""
        self.owned = False

    def _delete(self, k, which):
        """``qr_delete`` of column or row ``k``, written into the factors when no
        checkpoint holds them (measured, ``D = 1024``, ``n = 1000``, one thread: 3.4 ms
        with a copy of ``Q`` and ``R``, 2.2 ms in place)."""
        Q, R = qr_delete(self.Q, self.R, k, which=which, overwrite_qr=self.owned, check_finite=False)
        k = min(R.shape)
        # a square Q (a full, not economic, factorisation) comes back square: trim it
        self.Q, self.R, self.owned = Q[:, :k], R[:k], True

    def _age(self, sqrt_lam):
        """``R ← √λ R`` (the weights are a uniform scale)."""
        if self.owned:
            self.R *= sqrt_lam
        else:
            self.R = self.R * sqrt_lam  # (Q is still the checkpoint's: not owned yet)

    def slide(self, a, *, sqrt_lam, drop, slot=None):
        """Drop the oldest row when ``drop``, scale the rest by ``√λ``, append ``a``.

        Returns False when the factors could not be slid reliably (a row deleted from the
        economic factors of a rank-deficient tall window, or a norm that fell below
        :data:`NORM_DROP` times its largest); the caller then refactorises.
        """
        ok = (self._slide_merged(a, sqrt_lam=sqrt_lam, drop=drop) if self.merged
              else self._slide_unmerged(a, sqrt_lam=sqrt_lam, drop=drop, slot=slot))
        if not ok:
            return False
        if self.merged:
            # ‖R‖_F = ‖Ã‖_F (Q has orthonormal columns) = ‖μ‖: O(n), not O(n²)
            m = float(self.mu.max(initial=0.0))
            nrm = m * float(np.linalg.norm(self.mu / m)) if m > 0 else 0.0
        else:
            nrm = _frobenius(self.R)
        dropped, self.peak = _norm_dropped(nrm, self.peak * sqrt_lam)
        return not dropped

    def _slide_unmerged(self, a, *, sqrt_lam, drop, slot):
        which = "col" if self.orientation == "columns" else "row"
        if self.root_alpha and self.orientation == "columns":
            e = np.zeros(self.N)
            e[slot] = self.root_alpha
            a = np.concatenate([e, a])
        if drop and self.orientation == "rows" and not self.root_alpha:
            # deleting a row from economic factors needs R nonsingular
            dR = np.abs(self.R.diagonal())
            if not dR.min() > lstsq_cutoff(dR.max(), n=self.n, D=self.Q.shape[1]):
                return False
        # rows: the ridge rows come first, the window's oldest row after them
        first = self.D if self.root_alpha and self.orientation == "rows" else 0
        if drop:
            self._delete(first, which)
            self.n -= 1
        if sqrt_lam != 1.0:
            self._age(sqrt_lam)
        if self.orientation == "rows":
            Q, R = qr_insert(self.Q, self.R, a, first + self.n, which="row", check_finite=False)
            # a window that grows from n ≤ D to n + 1 > D rows comes back with a square Q
            # and n + 1 rows of R: keep the economic factors, Q (n+1, k), R (k, D)
            k = min(R.shape)
            self.Q, self.R, self.owned = Q[:, :k], R[:k], True
        else:
            self._append_column(a)
        self.n += 1
        self.slides += 1
        if self.orientation == "rows" and not self.root_alpha:
            # probe the invariant QᵀQ = I along a fixed direction (O(N·D))
            v = probes(self.Q.shape[1])[:, 0]
            Qv = self.Q @ v
            if not abs(Qv @ Qv - 1.0) <= 1e-10:
                return False
        return True

    # ------------------------------------------------------------ merged parallel rows
    def _refactor_merged(self, A):
        Zh, mu = normalise_rows(A)
        n, D = A.shape
        col = np.full(n, -1, dtype=np.intp)  # zero rows: no column
        nz = np.flatnonzero(mu > 0)
        # candidate pairs by one fixed projection (parallel rows project within rounding
        # of each other), confirmed entry by entry; O(n·D) and a sort
        p = Zh[nz] @ probes(D)[:, 0]
        order = np.argsort(p, kind="stable")
        ps, rows = p[order], nz[order]
        first = []  # the first row (window position) of each column
        for a_pos, i in enumerate(rows):
            if col[i] >= 0:
                continue
            col[i] = len(first)
            first.append(i)
            for b_pos in range(a_pos + 1, rows.size):
                if ps[b_pos] - ps[a_pos] > _dot_tol(D):
                    break
                j = rows[b_pos]
                if col[j] < 0 and _same_direction(Zh[i], Zh[j]):
                    col[j] = col[i]
        # number the columns by their first row, oldest first
        first = np.asarray(first, dtype=np.intp)
        rank = np.empty(first.size, dtype=np.intp)
        rank[np.argsort(first, kind="stable")] = np.arange(first.size)
        self.col = np.where(col >= 0, rank[np.maximum(col, 0)], -1)
        self.mu = mu
        self.rho = self._rho(self.col, mu, first.size)
        U = Zh[np.sort(first)]
        # each column's unit row, and its projection on the probe (new rows are matched
        # to a column by it, then confirmed entry by entry): a tuple, not an array, so
        # that a column joining or leaving moves n references, not the n×D rows
        self.U, self.p = tuple(U), U @ probes(D)[:, 0]
        self.Q, self.R = qr((U * self.rho[:, None]).T, mode="economic", check_finite=False)
        self.owned = True
        self.n = n
        self.slides = 0
        self.peak = _frobenius(self.R)

    @staticmethod
    def _rho(col, mu, n_cols):
        """``ρ_g = ‖μ_k over the rows of column g‖``, scaled by each column's largest
        ``μ`` against overflow and underflow (one scale for all would underflow the
        columns of rows far below the largest, e.g. scales 1e±100: ``ρ = 0``)."""
        ok = col >= 0
        ref = np.zeros(n_cols)
        np.maximum.at(ref, col[ok], mu[ok])
        ref[~(ref > 0)] = 1.0
        sq = np.bincount(col[ok], weights=(mu[ok] / ref[col[ok]]) ** 2, minlength=n_cols)
        return ref * np.sqrt(sq)

    def _column_norm(self, g):
        return float(self._rho(np.where(self.col == g, 0, -1), self.mu, 1)[0])

    def _merged_targets(self, Yw):
        ok = self.col >= 0
        t = np.zeros((self.rho.size, Yw.shape[1]))
        np.add.at(t, self.col[ok], (self.mu[ok] / self.rho[self.col[ok]])[:, None] * Yw[ok])
        return t

    def _rescale(self, g):
        """Column ``g`` after a row joined or left it: ``R[:, g] ← R[:, g] ρ_new/ρ_old``."""
        rho_new = self._column_norm(g)
        if not self.owned:
            self.R = self.R.copy()  # (Q is still the checkpoint's: not owned yet)
        self.R[:, g] *= rho_new / self.rho[g]
        rho = self.rho.copy()  # a new array: checkpoints keep the old one
        rho[g] = rho_new
        self.rho = rho

    def _slide_merged(self, a, *, sqrt_lam, drop):
        # invariant after each step: Q R = [ρ_g ẑ_g]_g (see the class docstring)
        if drop:
            g = int(self.col[0])
            self.col, self.mu = self.col[1:], self.mu[1:]
            self.n -= 1
            if g >= 0 and np.any(self.col == g):
                self._rescale(g)
            elif g >= 0:  # the column's last row: delete the column
                self._delete(g, "col")
                self.U, self.p = self.U[:g] + self.U[g + 1 :], np.delete(self.p, g)
                self.rho = np.delete(self.rho, g)
                self.col = np.where(self.col > g, self.col - 1, self.col)
        if sqrt_lam != 1.0:
            self._age(sqrt_lam)
            self.rho = self.rho * sqrt_lam
            self.mu = self.mu * sqrt_lam
        zh, m = normalise_rows(a[None, :])
        zh, m = zh[0], float(m[0])
        g = -1
        p = float(zh @ probes(zh.size)[:, 0])
        if m > 0:
            for j in np.flatnonzero(np.abs(self.p - p) <= _dot_tol(zh.size)):
                if _same_direction(self.U[j], zh):
                    g = int(j)
                    break
        self.col, self.mu = np.append(self.col, g), np.append(self.mu, m)
        self.n += 1
        self.slides += 1
        if g >= 0:  # a parallel row: its column grows
            self._rescale(g)
        elif m > 0:  # a new direction: a new column
            self.col[-1] = self.rho.size
            self._append_column(a)
            self.U, self.p = self.U + (zh,), np.append(self.p, p)
            self.rho = np.append(self.rho, m)
        return True

    def _append_column(self, a):
        """Append the column ``a`` to the factors: ``[QR, a] = [Q q] [R r; 0 ρ]``.

        ``r = Qᵀa`` and ``ρq = a − Qr`` by Gram–Schmidt twice: ``O(D·n)``, no rotation
        (the new column is the last). Twice is enough when the second pass keeps at least
        half the norm of the first: ``q`` is then orthogonal to ``Q`` to working precision
        (Kahan's criterion, Parlett, *The Symmetric Eigenvalue Problem*, §6.9). When it
        keeps less, ``a`` lies in the span of ``Q`` to rounding: ``q`` is then any unit
        vector orthogonal to ``Q`` and ``ρ = qᵀa`` (at rounding level), which keeps
        ``QR`` equal to the window and ``Q`` orthonormal.

        invariant: ``Q`` has orthonormal columns and ``QR`` is the window's columns.
        """
        Q = self.Q
        r = Q.T @ a
        v = a - Q @ r
        r2 = Q.T @ v
        q = v - Q @ r2
        r += r2
        nv, nq = _nrm2(v), _nrm2(q)  # (scaled: rows of 1e±160 square beyond float64)
        if nq > 0.0 and nq >= 0.5 * nv:
            q, rho = q / nq, nq
        else:
            # the coordinate direction Q represents least, Gram–Schmidt twice
            q = np.zeros(Q.shape[0])
            q[np.argmin(np.einsum("ij,ij->i", Q, Q))] = 1.0
            for _ in range(2):
                q -= Q @ (Q.T @ q)
            q /= _nrm2(q)
            rho = float(q @ a)
        n = self.R.shape[0]
        # Q is the leading columns of a buffer with room for the window's (its spare
        # columns are scratch, beyond any checkpoint's view): no copy of Q a slide
        spare = self._Qspare
        new = spare is None or spare.shape[1] <= n or not _leading_columns(Q, spare)
        if new:
            # (at most N columns, and as many as Q has rows)
            spare = np.empty((Q.shape[0], max(n, min(self.N, Q.shape[0])) + 1), order="F")
            spare[:, :n] = Q
        spare[:, n] = q
        # R: a new array (the old one may be held by a checkpoint)
        Rn = np.empty((n + 1, n + 1), order="F")
        Rn[:n, :n], Rn[n, :n], Rn[:n, n], Rn[n, n] = self.R, 0.0, r, rho
        # owned once Q is in a new buffer too
        self.Q, self.R, self._Qspare, self.owned = spare[:, : n + 1], Rn, spare, self.owned or new

    def __getstate__(self):
        state = dict(self.__dict__)
        # scratch beyond Q (pickled as its own array), and who holds the arrays (unpickled,
        # the class's False: one copy before the first write)
        state.pop("_Qspare", None)
        state.pop("owned", None)
        return state

    def solve(self, Yw, *, alpha, window=None):
        """``lstsq([Ã; √α I], [Ỹ; 0])`` from the factors.

        ``O(n²)`` plus one product with ``Q`` when ``R`` is safely invertible (a
        triangular solve), ``O(n³)`` (the singular values of ``R``, or an SVD of it)
        when lstsq's cut-off could truncate a singular value of the window
        (:func:`~._kernels.clear_of_cutoff`). Without a ridge, ``window()`` (when
        given) returns the weighted window and its targets: a window with a singular
        value at the cut-off is then solved as lstsq solves it
        (:func:`~._kernels.window_lstsq`), ``O(n·D·min(n, D))``.
        """
        Q, R = self.Q, self.R
        n_rows, D = (R.shape[0], Q.shape[0]) if self.orientation == "columns" else (Q.shape[0], Q.shape[1])
        if self.merged:
            # the columns' targets t_g = Σ μ_k ỹ_k / ρ_g (zero rows add nothing); the
            # cut-off is the window's, of n rows
            Yw, n_rows = self._merged_targets(Yw), self.n
        if self.root_alpha:
            # the augmented window's minimum-norm solution is the ridge solution
            alpha = 0.0
            if self.orientation == "columns":
                Q = Q[self.N :]  # β = the coordinates after the N ridge rows
            else:
                Yw = np.vstack([np.zeros((self.D, Yw.shape[1])), Yw])
        elif alpha and R.shape[0] == R.shape[1]:
            # a ridge taken at solve time (factors without its rows, e.g. with forgetting):
            # β depends on ÃᵀÃ and ÃᵀỸ alone (the merged columns keep both). Columns:
            # ÃᵀÃ = Q R Rᵀ Qᵀ, ÃᵀỸ = Q R Ỹ ⇒ β = Q lstsq([Rᵀ; √α I], [Ỹ; 0]); rows:
            # ÃᵀÃ = RᵀR, ÃᵀỸ = Rᵀ QᵀỸ ⇒ β = lstsq([R; √α I], [QᵀỸ; 0])
            if self.orientation == "columns":
                c = ridge_from_factor(R.T, Yw, alpha, triangular="lower")
                if c is not None:
                    return Q @ c
            else:
                beta = ridge_from_factor(R, Q.T @ Yw, alpha, triangular="upper")
                if beta is not None:
                    return beta
        # Ã = Rᵀ Qᵀ ⇒ β = Q pinv(Rᵀ) Ỹ;  Ã = Q R ⇒ β = pinv(R) Qᵀ Ỹ (Q: orthonormal
        # columns); R⁻ᵀ and R⁻¹ when no singular value is at the cut-off; at it, the
        # window as lstsq solves it (without a ridge, given the window), else the SVD below
        if alpha == 0.0:
            if R.shape[0] == R.shape[1] and clear_of_cutoff(R, n=n_rows, D=D, ridge=bool(self.root_alpha)):
                if self.orientation == "columns":
                    return Q @ triangular_solve(R, Yw, trans=True)
                return triangular_solve(R, Q.T @ Yw)
            if window is not None and not self.root_alpha:
                beta = window_lstsq(*window())
                if beta is not None:
                    return beta
        # with a ridge the same with s/(s² + α) for 1/s
        if self.orientation == "columns":
            return Q @ min_norm_solve(R.T, Yw, n=n_rows, D=D, alpha=alpha)
        return min_norm_solve(R, Q.T @ Yw, n=n_rows, D=D, alpha=alpha)


#: The orthogonal route solves a window with a singular value at lstsq's cut-off as lstsq
#: does (:func:`~._kernels.window_lstsq` on the window, rather than the SVD of its
#: factor) when it is at most this many times longer than wide (or wider than long):
#: ``gelsd`` costs ``O(n·D·min(n, D))`` against ``O(min(n, D)³)`` for the factor's SVD
#: (measured, one thread: 30.5 against 58.1 ms at ``500×500``, 58 against 98 at
#: ``1000×512``; a ``500×64`` window of rows 1e±100 apart 1.4 ms against 0.8 for its
#: ``64×64`` factor).
WINDOW_LSTSQ_ASPECT = 2.0


#: a slid factor is refactorised when its norm falls below this fraction of the largest
#: it had since its last factorisation (aged as the rows are): the rounding of a slide is
#: relative to the rows the factor held, and what large rows that left (a block of rows
#: 10⁶ times the others) leave behind would otherwise stay in the factor, far above the
#: oracle's bound for the rows that remain (measured: 10³–10⁹ times it)
NORM_DROP = 0.1


def _leading_columns(Q, buf):
    """Whether ``Q`` is a view of the leading columns of the Fortran-ordered ``buf``."""
    return (Q.__array_interface__["data"][0] == buf.__array_interface__["data"][0]
            and Q.strides == buf.strides and Q.shape[0] == buf.shape[0])


def _norm_dropped(nrm, peak):
    """``(dropped, new peak)``: whether the norm ``nrm`` fell below :data:`NORM_DROP`
    times ``peak`` (the largest norm since the factorisation, already aged)."""
    return nrm < NORM_DROP * peak, max(peak, nrm)


def _frobenius(R):
    """``‖R‖_F``, scaled by the largest entry where the sum of squares leaves the normal
    range (factors of rows at 1e±160)."""
    with np.errstate(over="ignore", under="ignore"):
        sq = float(np.einsum("ij,ij->", R, R))
        if 1e-290 < sq < np.inf:
            return math.sqrt(sq)
        m = float(np.abs(R).max(initial=0.0))
        return m * math.sqrt(float(np.einsum("ij,ij->", R / m, R / m))) if m > 0 else 0.0


#: a downdate is taken when the leaving row's leverage ``‖R⁻ᵀa‖²`` is at most this: the
#: window's singular values then shrink by at most ``√(1 − 0.75) = 1/2`` (``R̃ᵀR̃ ⪰
#: (1 − ‖p‖²) RᵀR``), so the downdated factor is as well conditioned as the window it
#: describes; a row of higher leverage (the last row of its direction, a row far above
#: the others' scale) is removed by refactorising the window instead
MAX_LEVERAGE = 0.75


class SlidingR:
    """The triangular factor of the weighted window and its targets, slid one row at a
    time with no orthogonal factor (the tall window, ``D < N``).

    With ``Ã = W½ Z`` (``n ≥ D`` rows) and ``Ỹ = W½ Y``, ``T = [R | d]`` (``D`` rows) is
    the top of the triangular factor of ``[Ã | Ỹ]``: ``RᵀR = ÃᵀÃ`` and ``Rᵀd = ÃᵀỸ``,
    so ``lstsq(Ã, Ỹ) = lstsq(R, d)`` (same singular values, same right singular vectors;
    the residual rows below ``T`` carry no information on ``β``).

    invariant: ``RᵀR = ÃᵀÃ`` and ``Rᵀd = ÃᵀỸ`` for the current window.

    A slide is three ``O(D²)`` steps, all compiled (:func:`scipy.linalg.qr_insert` and
    :func:`scipy.linalg.qr_delete` on ``(D + 1)``-row factors), none forming ``ÃᵀÃ``:

    * **downdate** of the leaving row ``[a | y]`` (its current weight): with ``p = R⁻ᵀa``
      and ``ρ = √(1 − ‖p‖²)``, ``[a | y]`` is the first row of ``Q̂ [T; [0 | t]]`` for an
      orthogonal ``Q̂`` whose first row is ``[pᵀ, ρ]`` and ``t = (y − pᵀd)/ρ``; deleting
      that row (Givens rotations determined by ``[pᵀ, ρ]`` alone) leaves ``T̃`` with
      ``R̃ᵀR̃ = RᵀR − aaᵀ`` and ``R̃ᵀd̃ = Rᵀd − aᵀy`` (Golub & Van Loan, §6.5.3). Taken
      when ``‖p‖² ≤`` :data:`MAX_LEVERAGE`, else the caller refactorises;
    * **ageing**: ``T ← √λ T`` (every weight is multiplied by ``λ``);
    * **update** with the new row ``[a | y]`` (weight 1): a row appended to ``T``.

    With a ridge and no forgetting the rows ``[√α I | 0]`` are part of ``T`` (they never
    leave and never age); with forgetting they would age with the rest, so the ridge
    solution is taken from ``T`` at solve time: ``lstsq([R; √α I], [d; 0])``, ``O(D³)``.
    """

    orientation = "rows"  # (the factor of the window's rows, as SlidingQR's "rows")

    def __init__(self, A, Yw, *, alpha=0.0, forgetting_factor=1.0):
        self.D = A.shape[1]
        self.root_alpha = float(np.sqrt(alpha))
        self.ridge_in_factor = bool(self.root_alpha) and forgetting_factor == 1.0
        self.refactor(A, Yw)

    def refactor(self, A, Yw):
        """Factorise the weighted window ``A`` (``n ≥ D`` rows) with its targets ``Yw``."""
        M = np.hstack([A, Yw])
        if self.ridge_in_factor:
            ridge = np.zeros((self.D, M.shape[1]))
            ridge[:, : self.D] = self.root_alpha * np.eye(self.D)
            # the ridge rows first: each Householder reflector then maps its column onto
            # a ridge row, and rows far below √α are not cancelled against themselves
            # (measured: rows of norm 1e-89, α = 1e-6, the ridge rows last: β all lost)
            M = np.vstack([ridge, M])
        self.T = qr(M, mode="r", check_finite=False)[0][: self.D]
        self.n = A.shape[0]
        self.slides = 0
        self.peak = _frobenius(self.T[:, : self.D])

    def slide(self, a, y, *, sqrt_lam, old=None):
        """Remove the row ``old = (a_old, y_old)`` (weighted as it is now) if given, age
        the rest by ``√λ`` and add ``[a | y]``. Returns False, with the factor unchanged,
        when the leaving row's leverage is too high to downdate it (see the class
        docstring) or the factor's norm fell below :data:`NORM_DROP` times its largest:
        the caller then refactorises."""
        T = self.T
        D = self.D
        if old is not None:
            a_old, y_old = old
            if np.any(a_old):
                R = T[:, :D]
                if not np.all(R.diagonal()):  # singular: no downdate (Rᵀp = a has no solution)
                    return False
                p = triangular_solve(R, a_old, trans=True)
                lev = float(p @ p)
                if not lev <= MAX_LEVERAGE:  # also catches a nearly singular R (p not finite)
                    return False
                rho = np.sqrt(1.0 - lev)
                Qf = np.zeros((D + 1, D + 1))
                Qf[0, :D], Qf[0, D] = p, rho
                Tf = np.zeros((D + 1, T.shape[1]))
                Tf[:D] = T
                Tf[D, D:] = (y_old - p @ T[:, D:]) / rho
                # invariant after: R̃ᵀR̃ = RᵀR − a aᵀ, R̃ᵀd̃ = Rᵀd − a yᵀ
                T = qr_delete(Qf, Tf, 0, which="row", check_finite=False)[1][:D]
            self.n -= 1
        if sqrt_lam != 1.0:
            T = T * sqrt_lam  # a new array: checkpoints keep the old one
        if np.any(a):
            row = np.concatenate([a, np.ravel(y)])
            # invariant after: RᵀR = ÃᵀÃ + a aᵀ, Rᵀd = ÃᵀỸ + a yᵀ
            T = qr_insert(np.eye(D), T, row, D, which="row", check_finite=False)[1][:D]
        dropped, peak = _norm_dropped(_frobenius(T[:, :D]), self.peak * sqrt_lam)
        if dropped:
            return False
        self.T, self.peak = T, peak
        self.n += 1
        self.slides += 1
        return True

    def solve(self, *, alpha):
        """``lstsq([Ã; √α I], [Ỹ; 0])`` from the factor: a triangular solve (``O(D²)``)
        when ``R`` is safely invertible, else from the SVD of ``R`` (``O(D³)``)."""
        D = self.D
        R, d = self.T[:, :D], self.T[:, D:]
        if alpha and not self.ridge_in_factor:
            beta = ridge_from_factor(R, d, alpha, triangular="upper")
            return lstsq_stack(R[None], d[None], alpha=alpha)[0][0] if beta is None else beta
        # (a ridge in the factor: [Ã; √α I], of n + D rows)
        return triangular_lstsq(R, d, n=self.n + (D if self.ridge_in_factor else 0), D=D,
                                ridge=self.ridge_in_factor)


# how a window is solved (see CoreBlockSolver)
FAST, REFINE, ORTHOGONAL = 0, 1, 2


class Predicted:
    """What a block solver's ``_solve_windows`` keeps of a window before an inert row when
    it has predicted that row itself (``value``: ``x·β``, shape ``(c,)``) rather than keep
    the window's solution."""

    def __init__(self, value):
        self.value = value


def inert_rows(inert, a, b):
    """The ``inert`` rows (see :func:`update_rows`) of the rows ``a:b`` of a call."""
    return None if inert is None else (inert[0][a:b], inert[1][a:b])


def update_rows(solver, Z, Y, *, predict, inert=None):
    """``solver.update(Z, Y, predict=predict)`` with ``inert`` rows (see
    :meth:`CoreBlockSolver.update`) for any solver.

    A solver without its own support (``takes_inert`` false) learns the call in pieces
    that start at the inert rows; an inert row's prediction is ``x·β`` of the solver's
    coefficients before it.
    """
    if inert is None or not predict or not inert[0].any():
        return solver.update(Z, Y, predict=predict)
    if getattr(solver, "takes_inert", False):
        return solver.update(Z, Y, predict=True, inert=inert)
    mask, X = inert
    out = np.empty((Z.shape[0], Y.shape[1]))
    bounds = [0, *[int(j) for j in np.flatnonzero(mask) if j > 0], Z.shape[0]]
    for a, b in zip(bounds[:-1], bounds[1:]):
        if mask[a]:
            out[a] = X[a] @ solver.coef()
        P = solver.update(Z[a:b], Y[a:b], predict=True)
        live = ~mask[a:b]
        out[a:b][live] = P[live]
    return out


class CoreBlockSolver:
    """Shared skeleton of the block solvers (:mod:`._dual_solver`, :mod:`._primal_solver`).

    Rows are learned one at a time into a :class:`WindowBuffer`. Every ``b`` rows a new
    *block* refactorises the rows that stay in the window for the whole block (the core);
    the other rows of the block's windows (the periphery) enter one by one. Subclasses
    provide the block (``_new_block``), the batched solve of a block's windows
    (``_solve_windows``: predictions and a route per window — :data:`FAST`, or
    :data:`REFINE` for one step of refinement against the rows themselves
    (``_refined``), or :data:`ORTHOGONAL`) and the coefficients (``_coef``). Windows sent to the orthogonal route
    are solved by factors kept slid while they are in use: a :class:`SlidingR` (``O(D²)``
    a row) for a tall window of at least ``2D`` rows, dropped after ``N/16`` rows without
    use, else a :class:`SlidingQR` (``O(N·D)`` a row), dropped after ``min(N, D)/8``.
    """

    orientation = None  # "columns" (D ≥ N) or "rows" (D < N)
    takes_inert = True  # update(..., inert=...): see update_rows
    #: how much the ridge weighs against the window, as the iteration's steps show it
    #: (:func:`ridge_share`; a ridge with forgetting, see the routes' ``_coef_directly``):
    #: 1 until a step is seen
    ridge_share = 1.0
    #: the block in which a window's own matrix was found too ill-conditioned for the
    #: routes' ``coef`` (the block's route is taken for the rest of that block)
    matrix_failed = None

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha, block_size, gram):
        self.N, self.D, self.c = window_size, n_features, n_targets
        self.lam = float(forgetting_factor)
        self.alpha = float(alpha)
        self.b = int(block_size)
        self.buf = WindowBuffer(
            window_size=window_size, n_features=n_features, n_targets=n_targets, gram=gram
        )
        self.block = None
        self.orth = None
        self.orth_idle = 0
        self.n_orthogonal = 0

    def update(self, Z, Y, *, predict, inert=None):
        """Learn the rows of ``Z`` in order; return the prequential predictions if asked.

        ``inert``: ``(mask, X)``, rows of ``Z`` that are zero (zero-weight rows) and
        whose prediction is that of ``X``'s row by the window before it, ``x_i·β_{i−1}``
        (one solve of that window's coefficients each, ``O(N·D)``, in the same pass).
        """
        Zh, s, decoupled = self._normalise(Z)
        if predict and decoupled is not None and decoupled.any():
            # a row decoupled as negligible against the ridge (DualSolver._normalise)
            # learns nothing but is still predicted: z·β of the window before it, as an
            # inert row (before, its prediction was that of the zero row it became: 0)
            mask, X = inert if inert is not None else (np.zeros(Z.shape[0], dtype=bool), Z)
            inert = (mask | decoupled, np.where(decoupled[:, None], Z, X))
        Y_pred = np.zeros((Z.shape[0], self.c)) if predict else None
        a = 0
        while a < Z.shape[0]:
            blk = self._block()
            b = min(Z.shape[0], a + blk.b - blk.j)  # the rows of this call in this block
            self._segment(blk, Zh[a:b], s[a:b], Y[a:b], Z[a:b], None if Y_pred is None else Y_pred[a:b],
                          inert=inert_rows(inert, a, b) if predict else None)
            a = b
        return Y_pred

    def coef(self):
        """``β`` of the current window, shape ``(D, n_targets)``."""
        if self.buf.n == 0:
            return np.zeros((self.D, self.c))
        blk = self._block()
        return self._window_beta(blk, blk.dropped, blk.m)

    def _window_beta(self, blk, lo, hi):
        """``β`` of the window ``core + periphery[lo, hi)``, whose rows are all in the
        ring (the current window, or the window before a row of a segment, while the
        segment writes its rows)."""
        route, _, parts = self._solve_windows(blk, np.array([lo]), np.array([hi]), None)
        if route[0] == FAST:
            return self._coef(blk, parts[0], lo, hi)
        if route[0] == REFINE:
            beta = self._refined(blk, lo, hi, parts[0])
            if beta is not None:
                return beta
        return self._orthogonal_beta()

    def _unsolved(self, n_windows):
        """What :meth:`_solve_windows` starts from, and returns when the block's core
        could not be factorised: every window on the orthogonal route, zero predictions,
        no parts."""
        return (np.full(n_windows, ORTHOGONAL), np.zeros((n_windows, self.c)),
                [None] * n_windows)

    def checkpoint(self, n_rows):
        """A record to undo the next ``n_rows`` rows with (see :meth:`restore`)."""
        blk = self.block
        helpers = [getattr(self, name, None) for name in ("orth", "gram")]
        if isinstance(self.orth, SlidingQR):
            self.orth.share()  # (before its attributes are recorded: restored, still shared)
        return (
            dict(self.__dict__),
            self.buf.checkpoint(n_rows),
            None if blk is None else (blk.m, blk.j, blk.dropped),
            [(h, dict(h.__dict__)) for h in helpers if h is not None],
        )

    def restore(self, record):
        """Put the solver back as it was at :meth:`checkpoint`.

        Exact because nothing written since is read again: the buffer's overwritten slots
        are put back, a block only appends after its counters, the primal route's Gram
        matrix replaces its arrays rather than modify them, and the orthogonal factors
        write into theirs only once they are their own again (:meth:`SlidingQR.share`).
        """
        attrs, buf_token, counters, helpers = record
        self.__dict__.clear()
        self.__dict__.update(attrs)
        self.buf.restore(buf_token)
        if counters is not None:
            blk = self.block
            blk.m, blk.j, blk.dropped = counters
            # positions beyond m are never read before they are written again; zeroed,
            # as when the block was created, the restored state is bit-identical too
            for name, axes in blk.PERIPHERY.items():
                a = getattr(blk, name)
                for ax in axes:
                    a[(slice(None),) * ax + (slice(blk.m, None),)] = 0
        for helper, helper_attrs in helpers:  # their arrays are replaced, never modified
            helper.__dict__.clear()
            helper.__dict__.update(helper_attrs)

    def _normalise(self, Z):
        """Unit rows, their norms, and which non-zero rows were decoupled (None: none can
        be; see :meth:`DualSolver._normalise`)."""
        return (*normalise_rows(Z), None)

    def _block(self):
        if self.block is None or self.block.j == self.block.b:
            self.block = self._new_block()
        return self.block

    def _segment(self, blk, Zh, s, Y, Z, out, inert=None):
        """Learn rows that all fall in block ``blk``; predictions into ``out`` if given.

        The rows enter the periphery together (matrix products), the windows before each
        of them are solved together; then the rows are written to the ring one by one,
        and windows flagged for the orthogonal route are solved on it in order, as are
        the coefficients of the windows before ``inert`` rows (see :meth:`update`).
        """
        buf, n = self.buf, Zh.shape[0]
        held = buf.n + np.arange(n)  # rows held before each new row
        drops = held >= buf.N  # the new row pushes the oldest out
        # products of the new rows with the ring (as it is now) and with each other
        P_old = P_new = None
        if buf.G is not None:
            P_old, P_new = Zh @ buf.Zh.T, Zh @ Zh.T  # (n, N), (n, n)
        m0 = blk.m
        blk.add_rows(Zh, s, Y, P_old=None if P_old is None else P_old.T, P_new=P_new)
        # the ring slots the new rows will take (a window's parts name its rows by slot)
        slots = buf.next_slots(n)
        blk.slot[m0 : m0 + n] = slots
        route = np.full(n, FAST)
        if out is not None:
            # window before new row i: the core and the periphery [dropped_i, m0 + i)
            lo = blk.dropped + np.concatenate([[0], np.cumsum(drops)[:-1]])
            hi = m0 + np.arange(n)
            seg = dict(m0=m0, Zh=Zh, s=s, Y=Y, P_old=P_old, P_new=P_new)
            # (with the coefficients' parts of the windows before inert rows)
            route, pred, parts = self._solve_windows(blk, lo, hi, m0 + np.arange(n), s_new=s, seg=seg,
                                                     keep=None if inert is None else inert[0],
                                                     inert_x=None if inert is None else inert[1])
            out[:] = pred * s[:, None]
            route[held == 0] = FAST
            out[held == 0] = 0.0
        for i in range(n):
            k = Zh[i]  # the refinement route's new row (the primal route's)
            if P_old is not None:
                # the row's products with the ring when it is written: earlier new rows
                # have replaced the slots they were written to
                k = P_old[i].copy()
                k[slots[:i]] = P_new[i, :i]
            if inert is not None and inert[0][i]:
                # a zero row: x_i·β_{i−1}, β_{i−1} of the window core + periphery[lo_i, hi_i)
                # (from the parts solved with the segment's windows when it is on the
                # fast route; the ring holds that window's rows now)
                if held[i] and isinstance(parts[i], Predicted):
                    out[i] = parts[i].value
                elif held[i]:
                    fast = route[i] == FAST and parts[i] is not None
                    beta = (self._coef(blk, parts[i], lo[i], hi[i]) if fast
                            else self._window_beta(blk, lo[i], hi[i]))
                    out[i] = inert[1][i] @ beta
            elif route[i] == REFINE and (v := self._refined(blk, lo[i], hi[i], parts[i], k=k)) is not None:
                out[i] = s[i] * v
            elif route[i] != FAST:  # the orthogonal route, or a window the step could not refine
                out[i] = Z[i] @ self._orthogonal_beta()
            leaving = None
            if drops[i] and isinstance(self.orth, SlidingR):
                leaving = self._oldest_weighted()
            buf.push(Zh[i], s[i], Y[i], k)
            if self.orth is not None:
                self._slide_orthogonal(Z[i], Y[i], drop=bool(drops[i]), leaving=leaving)
        blk.j += n
        blk.dropped += int(drops.sum())

    def _windows(self, lo, hi, chunk_numbers=2**21):
        """Chunks of windows ``(lo, hi)`` of the periphery, padded to one width ``H``.

        Yields ``(sel, idx, valid)``: the windows' numbers, their periphery positions
        ``(n, H)`` (0 where padding) and which positions are real.
        """
        H = int((hi - lo).max(initial=0))
        step = max(1, chunk_numbers // max(1, H * H))
        for a in range(0, lo.size, step):
            sel = slice(a, min(lo.size, a + step))
            idx = lo[sel, None] + np.arange(H)[None, :]
            valid = idx < hi[sel, None]
            yield sel, np.where(valid, idx, 0), valid

    def _orth_orientation(self):
        """The orientation of the orthogonal factors for the current window: the route's
        own, except that a window of more rows than features is factorised by rows when
        there is a ridge (the dual route's windows of ``n > D`` rows, which only a ridge
        allows): its triangular factor is then square, ``D×D`` (by columns it would be
        ``D×n``, solved by an SVD)."""
        if self.orientation == "columns" and self.alpha > 0 and self.buf.n > self.D:
            return "rows"
        return self.orientation

    def _orthogonal_beta(self):
        """``β`` of the current window on the orthogonal route: :class:`SlidingR` for a
        window of at least ``2D`` rows (its rows' leverages average at most 1/2, so
        downdates are rarely refused), :class:`SlidingQR` otherwise."""
        buf = self.buf
        sw = buf.sqrt_weights(self.lam)
        self.n_orthogonal += 1
        slots = buf.slots()
        keep, _ = few_rows((buf.s[slots] * sw)[None], lambda: (np.abs(buf.Y[slots]).max(axis=1) * sw)[None],
                           cap=REDUCED_SHARE * min(buf.n, self.D))
        orientation = self._orth_orientation()
        if self.orth is not None and self.orth.orientation != orientation:
            self.orth = None  # the window grew past D rows: factorised anew, by rows

        def from_scratch():  # lstsq of the weighted window itself (of its rows keep)
            Z, Y = buf.raw()
            return lstsq_stack((Z * sw[:, None])[None], (Y * sw[:, None])[None], alpha=self.alpha,
                               keep=keep)[0][0]

        if keep is not None or (orientation == "rows" and buf.n <= self.D):
            # from scratch: a window that reduces to its few non-negligible rows, or with
            # no more rows than features (the fill of a tall window): O(k·D·min(k, D)) for
            # k rows, no factors to slide
            return from_scratch()
        self.orth_idle = 0
        if self.orth is None:
            Z, Y = buf.raw()
            if orientation == "rows" and self.N >= 2 * self.D:
                self.orth = SlidingR(Z * sw[:, None], Y * sw[:, None], alpha=self.alpha,
                                     forgetting_factor=self.lam)
            else:
                # with forgetting the ridge rows would age with the rest: the factors
                # hold the rows alone and the ridge is taken at solve time
                self.orth = SlidingQR(
                    Z * sw[:, None], orientation=orientation, window_size=self.N,
                    alpha=self.alpha if self.lam == 1 else 0.0, slots=buf.slots(),
                )
        if isinstance(self.orth, SlidingR):
            beta = self.orth.solve(alpha=self.alpha)
        else:
            beta = self._sliding_qr_beta(slots, sw)
        if not np.isfinite(beta).all():
            # the slid factors lost the window to underflow (a forgetting factor of 1e-300
            # ages the factors by 1e-150 a row: 0/0 in their solve, where lstsq on the
            # window is finite): from scratch, and the factors anew when next needed
            self.orth = None
            beta = from_scratch()
        return beta

    def _sliding_qr_beta(self, slots, sw):
        """``β`` of the current window from its slid :class:`SlidingQR` factors."""
        buf = self.buf
        # the factors hold the rows: only the targets are read. A zero row (zeroed as
        # negligible against the ridge, see DualSolver._normalise) has no influence on β,
        # and its target is zeroed with it, as lstsq_stack does: else the rounding of the
        # factors' entries for that row (eps, where they should be 0) carries it (a target
        # of 1e100 on a row of 1e-200 moved β by 1e83 units)
        Yw = buf.Y[slots] * np.where(buf.s[slots] > 0, sw, 0.0)[:, None]

        def window():  # the weighted window and its targets, as lstsq takes them
            return buf.raw()[0] * sw[:, None], Yw

        near_square = max(buf.n, self.D) <= WINDOW_LSTSQ_ASPECT * min(buf.n, self.D)
        return self.orth.solve(Yw, alpha=self.alpha, window=window if near_square else None)

    def _oldest_weighted(self):
        """The oldest row of the window and its target, with their current weight."""
        buf = self.buf
        j = buf.slots()[0]
        w = np.sqrt(self.lam) ** (buf.n - 1)
        return buf.Zh[j] * (buf.s[j] * w), buf.Y[j] * w

    def _slide_orthogonal(self, z, y, *, drop, leaving=None):
        self.orth_idle += 1
        slim = isinstance(self.orth, SlidingR)
        # a slide costs O(N·D) (O(D²) for SlidingR), a new factorisation
        # O(N·D·min(N, D)): keep sliding the factors through a gap of rows that need no
        # orthogonal solve, not through long runs
        if self.orth_idle > max(8, (self.N // 16) if slim else min(self.N, self.D) // 8):
            self.orth = None
            return
        sqrt_lam = float(np.sqrt(self.lam))
        if slim:
            ok = self.orth.slides < self.N and self.orth.slide(z, y, sqrt_lam=sqrt_lam, old=leaving)
        else:
            ok = self.orth.slides < self.N and self.orth.slide(
                z, sqrt_lam=sqrt_lam, drop=drop, slot=(self.buf.pos - 1) % self.N)
        if ok:
            return
        if self.orth.orientation == "rows" and self.buf.n <= self.D:
            self.orth = None  # too few rows for tall factors: from scratch when needed
            return
        Z, Y = self.buf.raw()
        sw = self.buf.sqrt_weights(self.lam)[:, None]
        if slim:
            self.orth.refactor(Z * sw, Y * sw)
        else:
            self.orth.refactor(Z * sw, slots=self.buf.slots())


def _principal_blocks(M, idx, valid, copy=False):
    """``M[I_w, I_w]`` for every window ``w`` (zero where ``valid`` is False).

    Windows that slide by one position or share their start are strided views of ``M``
    (no gather); ``copy=True`` returns a writable array.
    """
    H = idx.shape[1]
    if not H:
        return np.zeros((idx.shape[0], 0, 0))
    lo = idx[:, 0]
    step = np.diff(lo)
    if lo.size > 1 and M.flags.c_contiguous and (np.all(step == 1) or np.all(step == 0)):
        st = M.itemsize
        out = np.lib.stride_tricks.as_strided(
            M[lo[0]:, lo[0]:], shape=(lo.size, H, H),
            strides=(int(step[0]) * (M.shape[1] + 1) * st, M.shape[1] * st, st), writeable=False,
        )
        if valid.all():
            return out.copy() if copy else out
        return np.where(valid[:, :, None] & valid[:, None, :], out, 0.0)
    return np.where(valid[:, :, None] & valid[:, None, :], M[idx[:, :, None], idx[:, None, :]], 0.0)
