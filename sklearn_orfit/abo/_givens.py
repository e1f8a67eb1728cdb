"""The ABO paper's QR-EWRLS recursion (Algorithm 1): Givens QR + Greville/Cline pseudo-inverse.

State of a window of ``n ≤ N`` weighted rows ``A = W½ Z`` (oldest first) and targets
``Ỹ = W½ Y``, kept in one array ``M`` whose rows all rotate together::

    A = Q R          Q (n×n) orthogonal, R (n×D) upper trapezoidal (R[i, j] = 0, j < i)
    M = [ R | (R⁺)ᵀ | η = QᵀỸ | Qᵀ ]

    invariants:  R⁺ = pinv(R),   β = R⁺ η = pinv(A) Ỹ,   A = Q R

An orthogonal row rotation ``T`` maps ``R → T R``, ``R⁺ → R⁺ Tᵀ``, ``η → T η`` and
``Qᵀ → T Qᵀ`` and keeps every invariant, which is why the four blocks share rows.
"""

import numpy as np
from scipy.linalg.blas import dnrm2

from .._docstrings import fill_doc
from ._kernels import lstsq_cutoff, svd
from ._window import WindowBuffer, normalise_rows

__all__ = ["GivensSolver", "GivensWindow"]

_EPS = np.finfo(np.float64).eps


class GivensWindow:
    """Sliding-window minimum-norm EW-RLS by Givens rotations and pseudo-inverse updates.

    Parameters
    ----------
    n_features : int
        ``D``.
    n_targets : int
        Columns of ``Y``.
    window_size : int
        ``N``.
    forgetting_factor : float
        ``λ``.
    alpha : float, default=0.0
        Ridge penalty. The paper's recursion has none; with ``alpha > 0`` the rotations
        still maintain ``A = QR`` and the ridge solution is read off the factor after each
        row, ``β = Rᵀ (R Rᵀ + αI)⁻¹ η`` (``O(N²·D)``), instead of the pseudo-inverse
        updates (which only apply to ``alpha = 0``).

    Notes
    -----
    Per row: ``2N`` Givens rotations of rows of length ``2D + c + N`` and the Greville and
    Cline rank-one updates, ``O(N·D + N²)``. Rank decisions: a new row raises the rank when
    its component outside the window's row space exceeds ``rank_tol`` of its norm; the
    oldest row is independent of the others when the window has full row rank, or else
    when ``1 − aᵀk`` is below ``rank_tol``.

    The rank-one pseudo-inverse updates are not backward stable: measured on RFF windows
    at ``D ≈ N`` (``κ(R) ≈ 50``), the error of ``R⁺`` grows from ``1e-16`` to ``1e-9`` in
    about forty steps. ``R`` itself, kept by rotations only, does not drift. So after every
    row both Penrose identities are probed in fixed random directions ``v`` and ``w``
    (``‖R R⁺ R v − R v‖ ≤ probe_tol ‖R v‖`` and ``‖R⁺ R R⁺ w − R⁺ w‖ ≤ probe_tol ‖R⁺ w‖``,
    six ``O(N·D)`` products), and when either fails ``R⁺`` and ``β`` are recomputed from
    ``R`` (SVD of the ``n×D`` factor, ``O(N²·D)``). Well-conditioned windows (``D`` away
    from ``N``) essentially never refresh; at the interpolation threshold (``D = N``)
    about two rows in five do, which keeps the predictions within ``1e-13·κ`` of
    :func:`numpy.linalg.lstsq` (with the first probe alone they drifted to
    ``9e-12·κ``).
    """

    def __init__(
        self,
        *,
        n_features,
        n_targets,
        window_size,
        forgetting_factor,
        alpha=0.0,
        rank_tol=1e-10,
        probe_tol=1e-12,
    ):
        D, c, N = n_features, n_targets, window_size
        self.D, self.c, self.N = D, c, N
        self.sqrt_lam = float(np.sqrt(forgetting_factor))
        self.rank_tol = rank_tol
        self.alpha = float(alpha)
        self.probe_tol = probe_tol
        self.n = 0
        self.rank = 0  # rank of the window, from the rank decisions
        self.n_refresh = 0
        self.cut = False  # whether the last refresh cut non-zero singular values
        self.kappa_max = 1.0 / lstsq_cutoff(1.0, n=N, D=D)
        self._v = np.random.default_rng(0).standard_normal(D)  # fixed probe direction
        self.M = np.zeros((N + 1, 2 * D + c + N + 1))
        self.beta = np.zeros((D, c))
        # column slices of the blocks of M
        self._R = slice(0, D)
        self._P = slice(D, 2 * D)
        self._eta = slice(2 * D, 2 * D + c)
        self._Qt = slice(2 * D + c, 2 * D + c + N + 1)

    def copy(self):
        """An independent copy (arrays copied)."""
        new = GivensWindow.__new__(GivensWindow)
        new.__dict__.update(self.__dict__)
        new.M, new.beta = self.M.copy(), self.beta.copy()
        return new

    # -- one rotation: rows (i, j) of M ← [[c, s], [−s, c]] (rows (i, j))
    def _rotate(self, i, j, cos, sin):
        Mi, Mj = self.M[i], self.M[j]
        new_i = cos * Mi + sin * Mj
        Mj *= cos
        Mj -= sin * Mi
        Mi[:] = new_i

    def update(self, z, y):
        """Scale by ``λ``, append ``(z, y)``, and drop the oldest row if the window is full."""
        M, n = self.M, self.n
        R, P, eta = self._R, self._P, self._eta
        # Step 2 (forgetting): A ← √λ A, Ỹ ← √λ Ỹ  ⇒  R ← √λ R, R⁺ ← R⁺/√λ, η ← √λ η; β unchanged
        if self.sqrt_lam != 1.0 and n:
            M[:n, R] *= self.sqrt_lam
            M[:n, eta] *= self.sqrt_lam
            M[:n, P] /= self.sqrt_lam
        self._append(z, y)
        if self.n > self.N:
            self._remove_oldest()
        if self.alpha > 0.0:
            self._ridge_beta()
            return
        # probe both Penrose identities, R R⁺ R = R along v and R⁺ R R⁺ = R⁺ along w;
        # refresh R⁺ from R when the recursion has drifted. The first sees the drift of
        # R⁺ only through R (blind where R's singular values are small: at the
        # interpolation threshold, predictions drifted to 9e-12·κ while it held), the
        # second sees it directly
        n = self.n
        Rn, Pn = M[:n, R], M[:n, P]
        Rv = Rn @ self._v
        drift = Rn @ (Pn.T @ Rv) - Rv
        Pw = Pn.T @ self._probe_w()[:n]
        drift_pinv = Pn.T @ (Rn @ Pw) - Pw
        # numpy.linalg.lstsq's cut-off: singular values ≤ eps·max(N, D)·s_max count as
        # zero, which the rank-one updates know nothing of. κ(R) ≤ ‖R‖_F ‖R⁺‖_F, so when
        # that product is below 1/(eps·max(N, D)) no singular value R⁺ inverts is below
        # the cut; otherwise (or while the last refresh cut some, or after an overflow of
        # R⁺ under a tiny λ) R⁺ is recomputed from R with the cut-off.
        # Norms, not squared norms: rows may be as small as 1e-300 or as large as 1e300.
        spread = _norm(Rn) * _norm(Pn)
        if (
            self.cut
            or not spread <= self.kappa_max
            or not _norm(drift) <= self.probe_tol * _norm(Rv)
            or not _norm(drift_pinv) <= self.probe_tol * _norm(Pw)
        ):
            self.refresh()

    def _probe_w(self):
        # the fixed probe of R⁺ R R⁺ = R⁺ (made on first use: windows saved by a
        # version with one probe have none)
        w = self.__dict__.get("_w")
        if w is None:
            w = self._w = np.random.default_rng(1).standard_normal(self.N + 1)
        return w

    def _ridge_beta(self):
        # Ã = QR  ⇒  β = Ãᵀ(ÃÃᵀ + αI)⁻¹Ỹ = Rᵀ (R Rᵀ + αI)⁻¹ η
        n = self.n
        R = self.M[:n, self._R]
        S = R @ R.T
        S.flat[:: n + 1] += self.alpha
        self.beta = R.T @ np.linalg.solve(S, self.M[:n, self._eta])

    def refresh(self):
        """Recompute ``R⁺ = pinv(R)``, the rank and ``β = R⁺η`` from the factor ``R``."""
        n = self.n
        if n == 0:
            return
        M = self.M
        U, s, Vt = svd(M[:n, self._R])
        cut = lstsq_cutoff(s[0] if s.size else 0.0, n=self.N, D=self.D)
        keep = s > cut
        # (R⁺)ᵀ = U diag(1/s) Vᵀ over the kept singular values
        M[:n, self._P] = (U[:, keep] / s[keep]) @ Vt[keep]
        self.rank = int(keep.sum())
        # non-zero singular values below the cut: R⁺ is no longer pinv(R) exactly, so the
        # rank-one updates cannot continue from it; refresh after every row until none is
        self.cut = bool((s[~keep] > 0).any())
        self.n_refresh += 1
        self.beta = M[:n, self._P].T @ M[:n, self._eta]

    def _append(self, z, y):
        M, n = self.M, self.n
        R, P = self._R, self._P
        Pt = M[:n, P]  # rows of (R⁺)ᵀ
        if self.alpha > 0.0:
            self._place_row(z, y, None)
            return
        # Greville (row append) on R̄ = [R; zᵀ]:
        #   h = zᵀR⁺,  c = (I − R⁺R) z
        #   b = c/‖c‖²                if c ≠ 0 (the rank grows)
        #   b = R⁺hᵀ/(1 + h hᵀ)        if c = 0
        #   R̄⁺ = [R⁺ − b h, b],   β ← β + b (y − zᵀβ)
        h = Pt @ z
        # c = (I − R⁺R) z on the unit row: R z itself may overflow or underflow
        nz = _norm(z)
        zu = z / nz if nz > 0 else z
        c = (zu - Pt.T @ (M[:n, R] @ zu)) * nz
        nc = _norm(c)
        if nc > self.rank_tol * nz:
            b = (c / nc) / nc
            self.rank += 1
        else:
            b = (Pt.T @ h) / (1.0 + h @ h)
        self.beta += np.outer(b, y - z @ self.beta)
        Pt -= np.outer(h, b)
        self._place_row(z, y, b)

    def _place_row(self, z, y, b):
        M, n, D = self.M, self.n, self.D
        M[n, :] = 0.0
        M[n, self._R] = z
        if b is not None:
            M[n, self._P] = b
        M[n, self._eta] = y
        M[n, self._Qt.start + n] = 1.0  # Q̄ = diag(Q, 1): the new sample is its own row
        self.n = n = n + 1
        # Step 3: Givens rotations zero the new row left of the diagonal (R upper trapezoidal)
        r = n - 1
        for k in range(min(r, D)):
            a, bb = M[k, k], M[r, k]
            if bb == 0.0:
                continue
            rr = np.hypot(a, bb)
            self._rotate(k, r, a / rr, bb / rr)
            M[r, k] = 0.0

    def _remove_oldest(self):
        M, n, Qt = self.M, self.n, self._Qt
        q0 = Qt.start  # column of Qᵀ holding the oldest sample
        # Step 6: rotations, bottom-up, collapse Qᵀe₀ into row 0; R becomes Hessenberg
        for i in range(n - 1, 0, -1):
            a, bb = M[i - 1, q0], M[i, q0]
            if bb == 0.0:
                continue
            rr = np.hypot(a, bb)
            self._rotate(i - 1, i, a / rr, bb / rr)
            M[i, q0] = 0.0
        # now row 0 of the rotated system is ±(oldest row): a = R[0], y_o = η[0]
        if self.alpha == 0.0:
            self._cline_delete_first(n)
        # drop row 0 and the oldest sample's column of Qᵀ
        M[: n - 1] = M[1:n]
        M[n - 1] = 0.0
        M[: n - 1, q0 : Qt.stop - 1] = M[: n - 1, q0 + 1 : Qt.stop]
        M[:, Qt.stop - 1] = 0.0
        self.n = n - 1

    def _cline_delete_first(self, n):
        M, R, P, eta = self.M, self._R, self._P, self._eta
        a = M[0, R]
        k = M[0, P].copy()  # k = R⁺e₁, the first column of R⁺
        Kt = M[1:n, P]
        t = a @ k  # (A A⁺)₀₀: 1 when the oldest row is independent of the others
        if self.rank == n or 1.0 - t <= self.rank_tol:
            self.rank -= 1
            # overparameterised (Cline, rank drops): B⁺ = (I − k k⁺) K,  β ← (I − k k⁺) β,
            # with k k⁺ = u uᵀ, u = k/‖k‖
            u = k / _norm(k)
            Kt -= np.outer(Kt @ u, u)
            self.beta -= np.outer(u, u @ self.beta)
        else:
            # classical (rank kept): B⁺ = K + k (aᵀK)/(1 − aᵀk),
            #   β ← β − k (y_o − aᵀβ)/(1 − aᵀk)
            Kt += np.outer(Kt @ a, k / (1.0 - t))
            self.beta -= np.outer(k, (M[0, eta] - a @ self.beta) / (1.0 - t))


def _norm(v):
    """``‖v‖`` (Frobenius for a matrix) without overflow or underflow of the squares
    (BLAS ``nrm2``)."""
    return dnrm2(np.ascontiguousarray(v, dtype=np.float64).ravel()) if v.size else 0.0


@fill_doc()
class GivensSolver:
    """The window solver interface around :class:`GivensWindow` (``solver="givens"``).

    Parameters
    ----------
    {solver_parameters}
    """

    def __init__(self, *, window_size, n_features, n_targets, forgetting_factor, alpha):
        self.buf = WindowBuffer(window_size=window_size, n_features=n_features, n_targets=n_targets, gram=False)
        self.window = GivensWindow(
            n_features=n_features, n_targets=n_targets, window_size=window_size,
            forgetting_factor=forgetting_factor, alpha=alpha,
        )
        self.n_orthogonal = 0

    takes_inert = True

    def update(self, Z, Y, *, predict, inert=None):
        """Learn the rows of ``Z`` one at a time; return the prequential predictions
        (of ``inert[1]``'s rows where ``inert[0]``: see ``update_rows``)."""
        Y_pred = np.empty((Z.shape[0], Y.shape[1])) if predict else None
        Zh, s = normalise_rows(Z)
        for t in range(Z.shape[0]):
            if predict:
                x = inert[1][t] if inert is not None and inert[0][t] else Z[t]
                Y_pred[t] = x @ self.window.beta
            self.window.update(Z[t], Y[t])
            self.buf.push(Zh[t], s[t], Y[t])
        return Y_pred

    def coef(self):
        """``β`` of the current window, shape ``(D, n_targets)``."""
        return self.window.beta

    def checkpoint(self, n_rows):
        """A record to undo the next ``n_rows`` rows with (see :meth:`restore`)."""
        return self.window.copy(), self.buf.checkpoint(n_rows)

    def restore(self, record):
        """Put the solver back as it was at :meth:`checkpoint`."""
        self.window, token = record
        self.buf.restore(token)
