"""Batched exact solvers for stacks of small weighted least-squares windows.

Each window ``j`` holds ``Ã_j = W½ Z_j`` (``n`` weighted rows of ``D`` features) and
``Ỹ_j = W½ Y_j``. Its solution is the oracle of SPEC §2::

    β_j = argmin ‖Ã_j β − Ỹ_j‖² + α‖β‖²   (minimum norm when α = 0)
        = lstsq([Ã_j; √α I], [Ỹ_j; 0], rcond=None)

Two routes are provided:

* :func:`solve_normal_stack` — the fast route on a stack of small symmetric positive
  (semi)definite systems ``S_j x_j = B_j`` (Gram matrices: ``Ã Ãᵀ + αI`` in the dual,
  ``ÃᵀÃ + αI`` in the primal). Forming a Gram matrix squares the condition number, so
  the route also returns a condition estimate; callers send every window whose estimate
  exceeds :data:`GRAM_KAPPA_MAX` to the orthogonal route.
* :func:`lstsq_stack` — the orthogonal route: QR of the tall orientation, then an SVD of
  the small triangular factor; singular values at or below ``eps · max(n, D) · s_max`` are
  treated as zero, exactly as :func:`numpy.linalg.lstsq` does.

No state is carried from one window to the next, so nothing drifts over long streams.
"""

import numpy as np
from scipy.linalg.blas import dnrm2 as _nrm2

__all__ = ["GRAM_KAPPA_MAX", "solve_normal_stack", "lstsq_stack"]

#: Largest condition-number bound of a Gram matrix ``S`` (≈ κ(Ã)²) accepted on the fast
#: route. Its rounding error is about ``κ(S) · eps ≈ 2e-10`` relative at this bound; worse
#: conditioned windows are recomputed on the orthogonal route.
GRAM_KAPPA_MAX = 1e6


def solve_normal_stack(S, B, pad=None):
    """Solve a stack of symmetric positive (semi)definite systems with a condition bound.

    Rows marked in ``pad`` (window positions before the start of the stream) carry no
    information: they are decoupled (unit diagonal, zero right-hand side), which is what
    the pseudo-inverse does with zero rows. Any other zero on a diagonal — an all-zero
    row, or one whose squared norm underflowed — gets ``kappa = inf``, so the caller
    sends that window to the orthogonal route, which tells the two apart.

    Parameters
    ----------
    S : ndarray of shape (n_windows, m, m)
        Gram matrices; modified in place.
    B : ndarray of shape (n_windows, m, n_targets)
        Right-hand sides; modified in place.
    pad : ndarray of shape (n_windows, m) of bool, default=None
        Structural zero rows to decouple.

    Returns
    -------
    X : ndarray of shape (n_windows, m, n_targets)
        ``S_j⁻¹ B_j``; meaningless where ``ok`` is False.
    kappa : ndarray of shape (n_windows,)
        Estimate of the 2-norm condition number of each ``S_j`` (over its coupled rows):
        ``‖Ŝ‖_F · max_v ‖Ŝ⁻¹v‖`` for two fixed unit probes ``v`` (a lower bound of
        ``‖Ŝ⁻¹‖`` that is rarely far from it, as in LAPACK's condition estimators), times
        the spread of the diagonal; ``inf`` for singular windows.
    """
    m = S.shape[1]
    diag = np.einsum("jii->ji", S)  # a writable view of the diagonals
    empty = diag <= 0.0
    singular = (empty & ~pad).any(axis=1) if pad is not None else empty.any(axis=1)
    if empty.any():
        # decouple rows that carry nothing: S_ii = 1, S_i· = 0, B_i = 0
        jj, ii = np.nonzero(empty)
        S[jj, ii, :] = 0.0
        S[jj, :, ii] = 0.0
        S[jj, ii, ii] = 1.0
        B[jj, ii, :] = 0.0
    # Jacobi scaling: d = sqrt(diag S), Ŝ = D⁻¹ S D⁻¹ (the coupled rows' scale mismatch is
    # put back into the bound below)
    d = np.sqrt(diag)
    S /= d[:, :, None]
    S /= d[:, None, :]
    # one LU solve per window for the right-hand sides and two fixed probe vectors v:
    # ‖Ŝ⁻¹v‖/‖v‖ estimates ‖Ŝ⁻¹‖ (inverse-norm estimation, as LAPACK's *con do)
    c = B.shape[2]
    probes = _probes(m)
    rhs = np.concatenate([B / d[:, :, None], np.broadcast_to(probes, (S.shape[0], m, 2))], axis=2)
    try:
        sol = np.linalg.solve(S, rhs)
    except np.linalg.LinAlgError:
        # an exactly singular matrix somewhere in the stack: solve one by one so that the
        # others keep the fast route, and mark the singular ones
        sol = np.empty_like(rhs)
        for j in range(S.shape[0]):
            try:
                sol[j] = np.linalg.solve(S[j], rhs[j])
            except np.linalg.LinAlgError:
                sol[j] = np.nan
    X = sol[:, :, :c] / d[:, :, None]
    with np.errstate(invalid="ignore", over="ignore"):
        inv_norm = np.sqrt(np.einsum("jik,jik->jk", sol[:, :, c:], sol[:, :, c:]).max(axis=1))
        kappa_hat = np.sqrt(np.einsum("jik,jik->j", S, S)) * inv_norm
        # spread of the coupled diagonal: max/min over rows that were not decoupled
        d2 = d * d  # the unscaled diagonal (``diag`` is a view of the scaled S now)
        hi = np.where(empty, 0.0, d2).max(axis=1, initial=0.0)
        lo = np.where(empty, np.inf, d2).min(axis=1, initial=np.inf)
        spread = np.where(np.isfinite(lo) & (lo > 0), hi / np.where(lo > 0, lo, 1.0), 1.0)
        kappa = kappa_hat * spread
    kappa = np.where(np.isfinite(kappa) & ~singular, kappa, np.inf)
    return X, kappa


_PROBES = {}


def _probes(m):
    """Two fixed unit probe vectors of length ``m`` (deterministic, so results are too)."""
    if m not in _PROBES:
        v = np.random.default_rng(20240607).standard_normal((m, 2))
        _PROBES[m] = v / np.linalg.norm(v, axis=0)
    return _PROBES[m]


def lstsq_stack(A, Y, *, alpha=0.0):
    """Minimum-norm (ridge when ``alpha > 0``) least squares on a stack, orthogonally.

    Parameters
    ----------
    A : ndarray of shape (n_windows, n, D)
        Weighted design matrices ``Ã_j``.
    Y : ndarray of shape (n_windows, n, n_targets)
        Weighted targets ``Ỹ_j``.
    alpha : float, default=0.0
        Ridge penalty.

    Returns
    -------
    beta : ndarray of shape (n_windows, D, n_targets)
        ``lstsq([Ã_j; √α I], [Ỹ_j; 0])``.
    s : ndarray of shape (n_windows, min(n, D))
        Singular values of each ``Ã_j``, descending.
    """
    n, D = A.shape[1], A.shape[2]
    if n >= D:
        # Ã = Q R, R = U_r s V_rᵀ  =>  Ã = (Q U_r) s V_rᵀ
        Q, R = np.linalg.qr(A)
        U_r, s, Vt = np.linalg.svd(R)
        U = Q @ U_r
        V = np.swapaxes(Vt, 1, 2)
    else:
        # Ãᵀ = Q R  =>  Ã = Rᵀ Qᵀ, Rᵀ = U s V_rᵀ  =>  Ã = U s (Q V_r)ᵀ
        Q, R = np.linalg.qr(np.swapaxes(A, 1, 2))
        U, s, Vt_r = np.linalg.svd(np.swapaxes(R, 1, 2))
        V = Q @ np.swapaxes(Vt_r, 1, 2)
    if alpha > 0.0:
        # ridge: β = V diag(s / (s² + α)) Uᵀ Ỹ
        f = s / (s * s + alpha)
    else:
        # pseudo-inverse with numpy.linalg.lstsq's cut-off: s ≤ eps · max(n, D) · s_max → 0
        cut = np.finfo(np.float64).eps * max(n, D) * s[:, :1]
        with np.errstate(divide="ignore"):
            f = np.where(s > cut, 1.0 / s, 0.0)
    beta = V @ (f[:, :, None] * (np.swapaxes(U, 1, 2) @ Y))
    return beta, s


class SlidingQR:
    """Economic QR of the transposed window, slid one row at a time (orthogonal route).

    For the window ``Ã = W½ Z`` (``N`` rows, oldest first) it keeps ::

        Ãᵀ = Qᵀ_rows · R        Qt (N×D) orthonormal rows, R (N×N) upper triangular

    so that ``Ã = Rᵀ Qt`` and, with ``R = U S Vᵀ``, ``pinv(Ã) = Qtᵀ U S⁺ Vᵀ`` — the
    singular values of ``Ã`` are those of ``R``, and the cut-off is :func:`lstsq_stack`'s.
    Sliding (drop the oldest row, age the others by ``√λ``, append the new one) costs
    ``O(N·D)``: Givens rotations restore ``R`` after its first column is removed (applied
    to the rows of ``Qt``), the new row is orthogonalised against ``Qt`` twice (classical
    Gram–Schmidt with reorthogonalisation). Every ``N`` slides the factorisation is
    recomputed from the window (``O(N²·D)``), so rounding cannot accumulate.
    """

    def __init__(self, A):
        self.refactor(A)

    def refactor(self, A):
        # Ãᵀ = Q R (numpy's Householder QR), Qt = Qᵀ
        Q, self.R = np.linalg.qr(A.T)
        self.Qt = np.ascontiguousarray(Q.T)
        self.slides = 0

    def slide(self, a, sqrt_lam):
        """Drop the oldest row, scale the others by ``√λ``, append ``a`` (weight 1)."""
        R, Qt = self.R, self.Qt
        n = R.shape[0]
        # R[:, 1:] is upper Hessenberg: rotations (i, i+1) zero its subdiagonal;
        # the same rotations applied to the rows of Qt keep Ãᵀ = Qtᵀ R
        H = R[:, 1:].copy()
        for i in range(n - 1):
            x, y = H[i, i], H[i + 1, i]
            if y == 0.0:
                continue
            r = np.hypot(x, y)
            c, s = x / r, y / r
            Hi, Hj = H[i, i:].copy(), H[i + 1, i:]
            H[i, i:] = c * Hi + s * Hj
            H[i + 1, i:] = c * Hj - s * Hi
            Qi = Qt[i].copy()
            Qt[i] = c * Qi + s * Qt[i + 1]
            Qt[i + 1] = c * Qt[i + 1] - s * Qi
        # the last row of H is now zero: drop it (and the last row of Qt)
        R_keep = H[: n - 1] * sqrt_lam
        Q_keep = Qt[: n - 1]
        # classical Gram–Schmidt with reorthogonalisation (DGKS): a = Qtᵀ r + ρ q, q ⊥ Qt;
        # repeat while a pass removes more than half of what is left
        norm_a = _nrm2(a)  # BLAS nrm2 scales: no overflow for huge rows
        r = np.zeros(n - 1)
        v, norm_prev = a, norm_a
        for _ in range(4):
            rr = Q_keep @ v
            v = v - rr @ Q_keep
            r += rr
            rho = _nrm2(v)
            if rho > 0.5 * norm_prev:
                break
            norm_prev = rho
        if rho > np.finfo(float).eps * max(n, a.shape[0]) * norm_a:
            q = v / rho
        else:
            # a is in the span to rounding (below lstsq's cut-off): ρ = 0 and any unit
            # vector ⊥ Qt keeps the factorisation; take the coordinate axis least
            # represented in Qt, orthogonalised twice
            e = np.zeros_like(a)
            e[np.argmin((Q_keep * Q_keep).sum(axis=0))] = 1.0
            e -= (Q_keep @ e) @ Q_keep
            e -= (Q_keep @ e) @ Q_keep
            q, rho = e / np.sqrt(e @ e), 0.0
        self.R = np.zeros((n, n))
        self.R[: n - 1, : n - 1] = R_keep
        self.R[: n - 1, n - 1] = r
        self.R[n - 1, n - 1] = rho
        self.Qt = np.vstack([Q_keep, q])
        self.slides += 1

    def solve(self, Yw, *, alpha):
        """``lstsq([Ã; √α I], [Ỹ; 0])`` from the factors, ``O(N³ + N·D)``."""
        n, D = self.R.shape[0], self.Qt.shape[1]
        U, s, Vt = np.linalg.svd(self.R)
        if alpha > 0.0:
            f = s / (s * s + alpha)
        else:
            cut = np.finfo(np.float64).eps * max(n, D) * (s[0] if s.size else 0.0)
            with np.errstate(divide="ignore"):
                f = np.where(s > cut, 1.0 / s, 0.0)
        # Ã = Rᵀ Qt = V S Uᵀ Qt  ⇒  pinv(Ã) = Qtᵀ U S⁺ Vᵀ
        return self.Qt.T @ (U @ (f[:, None] * (Vt @ Yw)))


def sliding_lstsq(rows, Yw, windows, *, window_size, sqrt_w, forgetting_factor, alpha):
    """Orthogonal-route solutions of the windows ``windows`` (sorted) of ``rows``.

    Window ``j`` is ``rows[j : j + N]`` weighted by ``sqrt_w``; ``Yw[j]`` its weighted
    targets. Consecutive windows (gaps shorter than ``N``) are reached by sliding a
    :class:`SlidingQR`; a longer gap, or ``N`` slides, refactorises from scratch.

    Returns
    -------
    beta : ndarray of shape (len(windows), D, n_targets)
    """
    N = window_size
    sqrt_lam = float(np.sqrt(forgetting_factor))
    out = np.empty((len(windows), rows.shape[1], Yw.shape[2]))
    qr, at = None, None
    for k, j in enumerate(windows):
        if qr is None or j - at > N or qr.slides + (j - at) > N:
            qr, at = SlidingQR(rows[j : j + N] * sqrt_w[:, None]), j
        while at < j:
            at += 1
            qr.slide(rows[at + N - 1], sqrt_lam)
        out[k] = qr.solve(Yw[j], alpha=alpha)
    return out
