"""The numerical kernels every window solver shares, each in one place.

* :func:`solve_stack` — a stack of small linear systems (LU, or Cholesky for tiny
  symmetric positive definite ones); a matrix that LAPACK finds
  exactly singular, or that is not finite, is reported, never raised;
* :func:`solve_normal_stack` — a stack of symmetric positive (semi)definite systems with
  a condition estimate (Gram matrices square the condition number: callers send a window
  whose estimate exceeds :data:`GRAM_KAPPA_MAX` to the orthogonal route);
* :func:`dual_window_solve` and :func:`cho_solve_checked` — one window's dual system
  solved directly, and the one symmetric positive definite solve with its condition
  estimate it rests on;
* :func:`cholesky` — the factor of a block's core (one symmetric positive definite
  matrix) with LAPACK's condition estimate;
* :func:`probes` — the fixed probe vectors of the condition estimates;
* :func:`svd` — singular value decomposition of a stack, LAPACK ``gesdd`` with ``gesvd``
  where ``gesdd`` does not converge;
* :func:`lstsq_cutoff` and :func:`pinv_factors` — :func:`numpy.linalg.lstsq`'s cut-off and
  the factors ``f(s)`` that turn singular values into the solution's (pseudo-inverse or
  ridge);
* :func:`min_norm_solve` — the minimum-norm (or ridge) least-squares solution of one
  factor with lstsq's cut-off, from its SVD;
* :func:`clear_of_cutoff` and :func:`window_lstsq` — whether a window's triangular
  factor has a singular value at lstsq's cut-off, and lstsq's own answer on a window that
  has;
* :func:`few_rows` — the rows of a window that are not negligible (rows and targets
  below ``eps/n`` of the largest are a perturbation under rounding), and whether few are;
* :func:`lstsq_stack` — the orthogonal route from scratch (QR, then an SVD of the small
  triangular factor; an SVD of the non-negligible rows alone when few are);
* :func:`solve_shifted` — a ridge with forgetting: the shifted systems ``(P + δΣ) x = b``
  of a block's windows, by iteration against the block's factor of ``P``.
"""

import math

import numpy as np
from scipy.linalg import lapack
from scipy.linalg import svd as _scipy_svd
from scipy.linalg.blas import dnrm2

__all__ = [
    "EPS",
    "GRAM_KAPPA_MAX",
    "SHIFT_MAX",
    "cho_solve_checked",
    "cholesky",
    "dual_window_solve",
    "clear_of_cutoff",
    "cutoff_margin",
    "keeps_cutoff",
    "lstsq_cutoff",
    "lstsq_stack",
    "min_norm_solve",
    "pinv_factors",
    "probe_columns",
    "probes",
    "few_rows",
    "packed_rows",
    "pad_windows",
    "scatter_rows",
    "solve_normal_stack",
    "solve_shifted",
    "solve_stack",
    "svd",
    "triangular_lstsq",
    "triangular_solve",
    "unbatched",
    "weight_spread",
    "window_lstsq",
]

EPS = np.finfo(np.float64).eps

#: Largest condition-number bound of a Gram matrix ``S`` (≈ κ(Ã)²) accepted on the fast
#: route. Its rounding error is about ``κ(S) · eps ≈ 2e-10`` relative at this bound; worse
#: conditioned windows are recomputed on the orthogonal route.
GRAM_KAPPA_MAX = 1e6

#: Windows whose Gram matrix's condition estimate (dual and primal routes) lies between
#: GRAM_KAPPA_MAX and this take one step of refinement with the residual computed from
#: the rows themselves (corrected seminormal equations): the step contracts the Gram
#: route's error by about κ·eps ≤ 2e-7; measured within the oracle bound up to that limit.
#: Between it and :data:`KAPPA_REFINE_TWICE` they take two.
KAPPA_REFINE_MAX = 1e9

#: Windows whose Gram condition estimate lies between :data:`KAPPA_REFINE_MAX` and this
#: take two steps of refinement (dual and primal routes; with a ridge and forgetting on the
#: block's iteration too), not the orthogonal route: one step leaves about ``(κ·eps)²`` of
#: the Gram route's error, two ``(κ·eps)³``
KAPPA_REFINE_TWICE = 1e12

#: Steps of :func:`solve_shifted` before a window is sent to the orthogonal route (with
#: shifts within 1.25 of the reference its error falls by at least 9 a step: ≈ 17 steps
#: to ``eps`` in the worst case).
MAX_STEPS = 60
#: :func:`solve_shifted` accepts a window whose step stalls (no longer contracts: rounding)
#: within this many ``eps`` of ``max |x|``; far below the error any window is allowed
#: (the oracle's bound is ``100 eps`` times the condition number)
STALL_EPS = 64


#: windows solved together as columns of one product are padded to a multiple of this
#: many (zero windows): BLAS kernels take columns in blocks of up to 8, and a column in a
#: partial block at the end may round differently from one in a full block, so a group
#: whose size depends on the later rows of a call moved an earlier prediction's last
#: bits. Padding removes that source only: other products of a call are sized by the
#: call itself (its new rows' products with the window), and a call cut short can still
#: give an earlier row that differs in its last bits (1e-16 to 1e-14 relative, as before
#: the padding; with one target too). A call of the same length whose later rows change
#: gives the same earlier predictions, bit for bit (the no-look-ahead invariant).
COLUMN_BLOCK = 8


def pad_windows(n, *arrays, eye=()):
    """``arrays`` (one entry per window along axis 0) with zero windows appended up to a
    multiple of :data:`COLUMN_BLOCK`; the arrays at the positions ``eye`` get identity
    matrices there instead (a padding window's system ``I x = 0``)."""
    extra = -n % COLUMN_BLOCK
    out = []
    for i, a in enumerate(arrays):
        pad = np.zeros((extra,) + a.shape[1:], dtype=a.dtype)
        if i in eye:
            pad[:] = np.eye(a.shape[-1])
        out.append(np.concatenate([a, pad]))
    return out


def scatter_rows(v, rows):
    """``v`` (one entry per True of ``rows``) on the entries ``rows`` of a zero array of
    ``rows.size`` entries (of ``v``'s other dimensions)."""
    out = np.zeros((rows.size,) + v.shape[1:], dtype=v.dtype)
    out[rows] = v
    return out


def solve_stack(S, B, *, spd=False):
    """``S_j⁻¹ B_j`` for a stack of square systems, by LU (or Cholesky, see ``spd``).

    Parameters
    ----------
    S : ndarray of shape (n, m, m)
    B : ndarray of shape (n, m, k)
    spd : bool, default=False
        The matrices are symmetric and meant to be positive definite: systems of at most
        :data:`_CHOLESKY_STACK_M` unknowns are then solved by :func:`_cholesky_stack`
        (a pivot that is not positive gives a non-finite solution, reported below).

    Returns
    -------
    X : ndarray of shape (n, m, k)
        The solutions; zero where ``solved`` is False.
    solved : ndarray of shape (n,) of bool
        False where ``S_j`` is exactly singular for LAPACK (or not positive definite for
        the Cholesky route) or the solution is not finite (the caller then takes the
        orthogonal route for that window).
    """
    solved = np.ones(S.shape[0], dtype=bool)
    with np.errstate(all="ignore"):
        try:
            if spd and S.shape[1] <= _CHOLESKY_STACK_M:
                X = _cholesky_stack(S, B)
            else:
                X = np.linalg.solve(S, B)
        except np.linalg.LinAlgError:
            # an exactly singular matrix somewhere in the stack: one by one, so that the
            # others keep their solution
            X = np.zeros(np.broadcast_shapes(S.shape[:-1] + (1,), B.shape))
            for j in range(S.shape[0]):
                try:
                    X[j] = np.linalg.solve(S[j], B[j])
                except np.linalg.LinAlgError:
                    solved[j] = False
        finite = np.isfinite(X).all(axis=tuple(range(1, X.ndim)))
    if not finite.all():
        solved &= finite
        X[~finite] = 0.0
    return X, solved


#: systems of at most this many unknowns are solved by :func:`_cholesky_stack` in
#: :func:`solve_stack` (``spd=True``): numpy's solve calls LAPACK once per matrix, whose
#: fixed cost dominates tiny ones (measured, 1001 systems, 3 right-hand sides, one
#: thread, ms for m = 1/2/3: LU 0.15/0.25/0.37, Cholesky 0.04/0.13/0.23; m = 4 to 6: even)
_CHOLESKY_STACK_M = 3


def _cholesky_stack(S, B):
    """``S_j⁻¹ B_j`` for a stack of small symmetric positive definite systems: the
    Cholesky factor ``S_j = L_j L_jᵀ`` column by column, then ``L u = b`` and
    ``Lᵀ x = u``, each step one array operation over the whole stack (a loop over the
    ``m`` unknowns, not over the systems). A pivot that is not positive (or not finite)
    makes the system's solution NaN or infinite. Called under ``np.errstate(all="ignore")``.
    """
    m = S.shape[1]
    L = np.zeros_like(S)
    X = np.array(B, dtype=np.float64)
    # (the sums over no terms, j = 0 or the last unknown, are skipped)
    for j in range(m):
        # L_jj = √(S_jj − Σ_i<j L_ji²),  L_rj = (S_rj − Σ_i<j L_ri L_ji) / L_jj  (r > j)
        Lj = L[:, j, :j]
        d = np.sqrt(S[:, j, j] - np.einsum("ki,ki->k", Lj, Lj)) if j else np.sqrt(S[:, 0, 0])
        L[:, j, j] = d
        if j + 1 < m:
            col = S[:, j + 1 :, j]
            if j:
                col = col - np.einsum("kri,ki->kr", L[:, j + 1 :, :j], Lj)
            L[:, j + 1 :, j] = col / d[:, None]
    for j in range(m):  # L u = b, forward
        if j:
            X[:, j] -= np.einsum("ki,kic->kc", L[:, j, :j], X[:, :j])
        X[:, j] /= L[:, j, j, None]
    for j in range(m - 1, -1, -1):  # Lᵀ x = u, backward
        if j + 1 < m:
            X[:, j] -= np.einsum("ki,kic->kc", L[:, j + 1 :, j], X[:, j + 1 :])
        X[:, j] /= L[:, j, j, None]
    return X


def solve_normal_stack(S, B, pad=None, jacobi=True):
    """Solve a stack of symmetric positive (semi)definite systems with a condition bound.

    Rows marked in ``pad`` carry no information (window positions before the start of the
    stream, zero rows, rows of zero weight): they are decoupled (unit diagonal, zero
    right-hand side), which is what the pseudo-inverse does with zero rows. Any other zero
    on a diagonal — a row whose squared norm underflowed — gets ``kappa = inf``, so the
    caller sends that window to the orthogonal route, which tells the two apart.

    Parameters
    ----------
    S : ndarray of shape (n_windows, m, m)
        Gram matrices; modified in place.
    B : ndarray of shape (n_windows, m, n_targets)
        Right-hand sides; modified in place.
    pad : ndarray of shape (n_windows, m) of bool, default=None
        Rows to decouple.
    jacobi : bool, default=True
        Scale ``S`` to a unit diagonal first and multiply the estimate by the spread of
        the diagonal. ``False`` for a diagonal that is already 1 to rounding (a Gram
        matrix of unit rows without a ridge) or matrices of moderate scale: the estimate
        is then that of ``κ(S)`` itself.

    Returns
    -------
    X : ndarray of shape (n_windows, m, n_targets)
        ``S_j⁻¹ B_j``; meaningless where ``kappa`` is ``inf``.
    kappa : ndarray of shape (n_windows,)
        Estimate of the 2-norm condition number of each ``S_j`` (over its coupled rows):
        ``‖Ŝ‖_F · max_v ‖Ŝ⁻¹v‖`` for two fixed unit probes ``v`` (a lower bound of
        ``‖Ŝ⁻¹‖`` that is rarely far from it, as in LAPACK's condition estimators), times
        the spread of the diagonal; ``inf`` for singular windows.
    """
    m = S.shape[1]
    diag = np.einsum("jii->ji", S)  # a writable view of the diagonals
    empty = diag <= 0.0
    if pad is not None:
        empty = empty | pad
    singular = (empty & ~pad).any(axis=1) if pad is not None else empty.any(axis=1)
    decoupled = empty.any()
    if decoupled:
        # decouple rows that carry nothing: S_ii = 1, S_i· = 0, B_i = 0
        jj, ii = np.nonzero(empty)
        S[jj, ii, :] = 0.0
        S[jj, :, ii] = 0.0
        S[jj, ii, ii] = 1.0
        B[jj, ii, :] = 0.0
    # Jacobi scaling: d = sqrt(diag S), Ŝ = D⁻¹ S D⁻¹ (the coupled rows' scale mismatch is
    # put back into the bound below)
    if jacobi:
        d = np.sqrt(diag)
        S /= d[:, :, None]
        S /= d[:, None, :]
        B = B / d[:, :, None]
    # one LU solve per window for the right-hand sides and two fixed probe vectors v:
    # ‖Ŝ⁻¹v‖/‖v‖ estimates ‖Ŝ⁻¹‖ (inverse-norm estimation, as LAPACK's *con do)
    c = B.shape[2]
    rhs = np.concatenate([B, np.broadcast_to(probes(m), (S.shape[0], m, 2))], axis=2)
    sol, solved = solve_stack(S, rhs, spd=True)
    singular |= ~solved
    X = sol[:, :, :c] / d[:, :, None] if jacobi else sol[:, :, :c]
    with np.errstate(invalid="ignore", over="ignore"):
        inv_norm = np.sqrt(np.einsum("jik,jik->jk", sol[:, :, c:], sol[:, :, c:]).max(axis=1))
        kappa_hat = np.sqrt(np.einsum("jik,jik->j", S, S)) * inv_norm
        if not jacobi:
            return X, np.where(np.isfinite(kappa_hat) & ~singular, kappa_hat, np.inf)
        # spread of the coupled diagonal: max/min over rows that were not decoupled
        d2 = d * d  # the unscaled diagonal (``diag`` is a view of the scaled S now)
        if decoupled:
            hi = np.where(empty, 0.0, d2).max(axis=1, initial=0.0)
            lo = np.where(empty, np.inf, d2).min(axis=1, initial=np.inf)
            spread = np.where(np.isfinite(lo) & (lo > 0), hi / np.where(lo > 0, lo, 1.0), 1.0)
        else:
            spread = d2.max(axis=1) / d2.min(axis=1)  # every diagonal entry is positive
        kappa = kappa_hat * spread
    kappa = np.where(np.isfinite(kappa) & ~singular, kappa, np.inf)
    return X, kappa


def cholesky(S, *, kappa_max, inverse_norm=False):
    """Lower Cholesky factor of the symmetric positive definite ``S`` and whether it is
    usable.

    ``S = L Lᵀ`` by LAPACK ``dpotrf`` (``S`` may be overwritten); usable when the
    factorisation succeeds and LAPACK's estimate of the 1-norm condition number
    (``dpocon``, from ``‖S‖₁`` taken before the factorisation) is at most ``kappa_max``.

    Returns
    -------
    L : ndarray of shape (m, m), Fortran order
    ok : bool
    inv_norm : float
        Only with ``inverse_norm=True``: LAPACK's estimate of ``‖S⁻¹‖₁`` (an upper bound
        of ``‖S⁻¹‖₂`` to the estimate's accuracy), ``inf`` when ``S`` is not usable.
    """
    anorm = np.abs(S).sum(axis=0).max() if S.size else 0.0
    L, info = lapack.dpotrf(S, lower=1, clean=1, overwrite_a=1)
    L = np.asfortranarray(L)
    rcond, info2 = lapack.dpocon(L, anorm, uplo="L") if info == 0 else (0.0, 1)
    ok = bool(info == 0 and info2 == 0 and rcond * kappa_max >= 1.0)
    if not inverse_norm:
        return L, ok
    inv_norm = 1.0 / float(rcond * anorm) if ok and rcond * anorm > 0 else np.inf
    return L, ok, inv_norm


def weight_spread(ws, s, keep):
    """``max/min`` of ``w s²`` (given ``w s`` and ``s``) over ``keep`` along the last
    axis, ``inf`` for a zero; ``s`` is divided by its largest value first, so the squares
    cannot overflow and only rows far below the largest underflow (to a spread of ``inf``)."""
    top = np.where(keep, s, 0.0).max(axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
        v = ws * (s / np.where(top > 0, top, 1.0))
        hi = np.where(keep, v, 0.0).max(axis=-1, initial=0.0)
        lo = np.where(keep, v, np.inf).min(axis=-1, initial=np.inf)
        return np.where(np.isfinite(lo), hi / lo, 1.0)


def cho_solve_checked(S, B, pad=None, spread=1.0, jacobi=True, overwrite_S=True, diagonal_spread=True,
                      return_kappa=False):
    """Cholesky solve of one SPD system, or ``None`` when it is too ill-conditioned.

    The single-window twin of :func:`solve_normal_stack` (Jacobi scaling, the same
    two-probe condition estimate times ``spread``); ``B`` is a :func:`probe_columns`
    array whose leading columns hold the right-hand sides; ``pad`` rows, already zero,
    are decoupled. ``jacobi=False``: no scaling, for a diagonal that is already 1 (a Gram
    matrix of unit rows) or a matrix of moderate scale, whose estimate then bounds
    ``κ(S)`` itself. ``B`` is overwritten, and so is ``S`` unless
    ``overwrite_S=False`` (then LAPACK factorises a copy, and ``S`` may not be padded or
    scaled). ``diagonal_spread=False``: the estimate is that of the scaled matrix alone
    (Cholesky's error is that of ``Ŝ`` whatever the scaling; the block routes judge a
    ridge with forgetting, whose shifts span the weights, by it too).
    ``return_kappa``: return ``(solution or None, the estimate)``.
    """
    if pad is not None:
        i = np.flatnonzero(pad)
        S[i, i] = 1.0
    c = B.shape[1] - 2
    if jacobi:
        # Jacobi scaling Ŝ = D⁻¹ S D⁻¹, d = √diag S; the spread of the diagonal goes into
        # the bound
        d = np.sqrt(S.diagonal())
        lo = d.min()
        if not lo > 0.0:  # (a zero on the diagonal: a feature no row of the window has)
            return (None, math.inf) if return_kappa else None
        if diagonal_spread:
            q = d.max() / lo
            spread = spread * q * q
        inv = 1.0 / d
        S *= inv
        S *= inv[:, None]
        B[:, :c] *= inv[:, None]
    nrm = dnrm2(S.ravel())  # ‖Ŝ‖_F, before S is factorised
    # one factorisation and triangular solve for the right-hand sides and the two fixed
    # probes v: κ(Ŝ) ≈ ‖Ŝ‖_F · max_v ‖Ŝ⁻¹v‖ (the estimate of solve_normal_stack). S is
    # symmetric: its transpose is a Fortran-ordered view LAPACK factorises in place when
    # it may be overwritten
    _, sol, info = lapack.dposv(S.T, B, lower=1, overwrite_a=overwrite_S, overwrite_b=1)
    kappa = nrm * max(dnrm2(sol[:, c]), dnrm2(sol[:, c + 1])) * spread if info == 0 else math.inf
    x = None
    if kappa <= GRAM_KAPPA_MAX:
        x = sol[:, :c] if not jacobi else sol[:, :c] * inv[:, None]
    return (x, kappa) if return_kappa else x


_PROBE_COLUMNS = {}


def probe_columns(n, c):
    """A fresh Fortran-ordered ``(n, c + 2)`` array whose last two columns are the probes."""
    template = _PROBE_COLUMNS.get((n, c))
    if template is None:
        template = np.zeros((n, c + 2), order="F")
        template[:, c:] = probes(n)
        _PROBE_COLUMNS[(n, c)] = template
    return template.copy(order="F")


#: A ridge shift ``α/(w s²)`` above this decouples its row: the row's influence on the
#: solution is below rounding (and its shift would overflow further on).
SHIFT_MAX = 1e200


def dual_window_solve(G, s, Y, w, *, alpha, diagonal_spread=True):
    """``â`` of one window's dual system, solved directly, or ``None``.

    ``(K̂ + diag(α/(w s²))) â = y/s`` over the window's rows (``G = K̂``, the Gram matrix
    of its unit rows, not modified; ``s`` their norms, ``Y`` their targets, ``w`` their
    weights, None for all 1). The solution is ``β = Ẑᵀâ``: the ridge solution, or with
    ``α = 0`` the minimum-norm interpolant. Rows that carry nothing are decoupled
    (``â = 0``, what the pseudo-inverse gives a zero row): zero rows, zero weights and,
    with a ridge, rows whose shift exceeds :data:`SHIFT_MAX`. One Cholesky solve
    (:func:`cho_solve_checked`, Jacobi-scaled with a ridge: the shifts span the weights);
    ``None`` when its condition estimate exceeds :data:`GRAM_KAPPA_MAX`, when ``y/s``
    overflows, or, without a ridge, when the spread of ``w s²`` would let lstsq's cut-off
    truncate rows the Gram matrix of unit rows does not see (``diagonal_spread``: see
    :func:`cho_solve_checked`). ``O(n³/3 + n²c)``. Call under ``np.errstate(all="ignore")``:
    overflow (of a shift, of the solution) is detected here or by the caller, not warned
    about.
    """
    n, c = G.shape[0], Y.shape[1]
    S = G.copy()
    dec = (s == 0) if w is None else (w == 0) | (s == 0)
    if alpha:
        # (a shift that overflows decouples its row)
        shift = alpha / ((1.0 if w is None else w) * s * s)
        dec |= ~(shift <= SHIFT_MAX)
        S.flat[:: n + 1] += np.where(dec, 0.0, shift)
    B = probe_columns(n, c)
    rhs = B[:, :c]
    np.divide(Y, s[:, None], out=rhs)  # (y/0 of a decoupled row is zeroed below)
    any_dec = dec.any()
    if any_dec:
        S[dec, :] = 0.0
        S[:, dec] = 0.0
        rhs[dec] = 0.0
    if not math.isfinite(dnrm2(rhs.ravel())):
        # y/s overflows (a large target on a row of small norm) where β need not (with a
        # ridge it is about y·s·w/α): the caller's route on the rows themselves
        return None
    spread = 1.0
    if not alpha:
        # the spread of w s² over the rows kept: the unit rows' Gram matrix does not see
        # rows graded in norm or weight, lstsq's cut-off does
        if w is None:
            hi = s.max()
            q = hi / (np.where(dec, hi, s).min() if any_dec else s.min())
            spread = float(q * q)  # inf when it overflows (or NaN for an all-zero window)
        else:
            spread = float(weight_spread(w * s, s, ~dec))
    return cho_solve_checked(S, B, pad=dec if any_dec else None, spread=spread, jacobi=bool(alpha),
                             diagonal_spread=diagonal_spread)


_PROBES = {}


def probes(m):
    """Two fixed unit probe vectors of length ``m``, shape ``(m, 2)`` (deterministic, so
    results are too)."""
    if m not in _PROBES:
        v = np.random.default_rng(20240607).standard_normal((m, 2))
        _PROBES[m] = v / np.linalg.norm(v, axis=0)
    return _PROBES[m]


def unbatched(f):
    """SciPy's ``f`` without its batching wrapper, when it has one.

    SciPy 1.15 wraps many :mod:`scipy.linalg` functions so that they loop over stacks of
    matrices; for one matrix the wrapper only converts and inspects the arguments, which
    costs about as much as the compiled work of a one-row update (measured, one thread:
    :func:`~scipy.linalg.qr_insert` of a row into a ``64×65`` factor 21 → 11 µs,
    :func:`~scipy.linalg.qr_delete` 16.5 → 8.4 µs). The function it wraps is taken when
    ``f`` is that wrapper (``scipy._lib._util``'s ``_apply_over_batch``), else ``f``.
    """
    inner, code = getattr(f, "__wrapped__", None), getattr(f, "__code__", None)
    if (inner is not None and code is not None and code.co_name == "wrapper"
            and code.co_filename.replace("\\", "/").endswith("scipy/_lib/_util.py")):
        return inner
    return f


def svd(A, *, full_matrices=False, compute_uv=True):
    """SVD of a matrix or a stack of matrices, as :func:`numpy.linalg.svd`.

    LAPACK's divide-and-conquer ``gesdd`` (numpy's driver) can fail to converge on
    matrices that the QR-iteration ``gesvd`` handles (measured: a rank-deficient
    triangular factor with diagonal entries down to ``1e-21``); such matrices are
    decomposed again with ``gesvd``. Only a matrix that neither driver decomposes (one
    that is not finite) raises :class:`numpy.linalg.LinAlgError`.
    """
    try:
        return np.linalg.svd(A, full_matrices=full_matrices, compute_uv=compute_uv)
    except np.linalg.LinAlgError:
        pass
    kw = dict(full_matrices=full_matrices, compute_uv=compute_uv, check_finite=False,
              lapack_driver="gesvd")
    if A.ndim == 2:
        return _scipy_svd(A, **kw)
    parts = [_scipy_svd(a, **kw) for a in A.reshape((-1,) + A.shape[-2:])]
    lead = A.shape[:-2]
    if not compute_uv:
        return np.stack(parts).reshape(lead + parts[0].shape)
    return tuple(np.stack(p).reshape(lead + p[0].shape) for p in zip(*parts))


def lstsq_cutoff(s_max, *, n, D):
    """:func:`numpy.linalg.lstsq`'s cut-off (``rcond=None``) for an ``n×D`` problem whose
    largest singular value is ``s_max``: singular values at or below it are treated as
    zero."""
    return EPS * max(n, D) * s_max


def keeps_cutoff(kappa, spread, *, n, D):
    """Whether lstsq's cut-off keeps every singular value of ``n×D`` windows whose Gram
    matrices, scaled, have the condition estimates ``kappa``, the scaling spreading their
    rows' (dual) or features' (primal) scales by ``spread`` (``max/min``): then the
    solution of their Gram systems (without a ridge) is lstsq's. ``κ(W½Z) ≤ √κ·spread``,
    to be far (1e-3) below ``1/(eps·max(n, D))``: the scaling hides graded rows or
    features from ``κ``, which lstsq's cut-off truncates."""
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sqrt(kappa) * spread * lstsq_cutoff(1.0, n=n, D=D) <= 1e-3


def triangular_solve(R, B, *, trans=False):
    """``R⁻¹B`` (``R⁻ᵀB`` with ``trans``) for an upper triangular ``R``: LAPACK ``dtrtrs``
    called directly (a quarter of :func:`scipy.linalg.solve_triangular`'s fixed cost,
    which is most of a solve at ``D = 64``). ``R`` must be invertible: the callers have
    checked it (:func:`clear_of_cutoff`, :func:`_safely_invertible` or a non-zero
    diagonal with a leverage test)."""
    return lapack.dtrtrs(R, B, lower=0, trans=1 if trans else 0)[0]


def upper_rcond(R, norm):
    """LAPACK ``dtrcon``'s estimate of ``1/κ`` of the upper triangular ``R`` in the 1-norm
    (``norm="1"``) or the ∞-norm (``"I"``), and its ``info``. A C-ordered ``R`` is passed
    as its transpose, a lower triangle in Fortran order, with the other norm
    (``‖R‖₁ = ‖Rᵀ‖_∞``): LAPACK would otherwise be handed a Fortran copy of it (measured,
    order 1,000, one thread: 2.5 ms with the copy, 1.1 ms without)."""
    if R.flags.c_contiguous and not R.flags.f_contiguous:
        return lapack.dtrcon(R.T, norm="I" if norm == "1" else "1", uplo="L", diag="N")
    return lapack.dtrcon(R, norm=norm, uplo="U", diag="N")


def cutoff_margin(R, *, n, D, ridge=False):
    """How far the triangular factor ``R`` of an ``n×D`` window (or of its transpose) is
    estimated to be from :func:`lstsq_cutoff`: ``1/(κ·rel)``, ``κ`` LAPACK's estimate of
    its condition number, ``rel = eps·max(n, D)`` (``eps`` with ``ridge``). Above 10 no
    singular value is at the cut-off (:func:`clear_of_cutoff`); 0 when ``R`` is empty
    or its estimate failed.

    ``κ₂(R) ≤ √(κ₁(R)·κ_∞(R))`` (``‖A‖₂² ≤ ‖A‖₁‖A‖_∞``, for ``R`` and ``R⁻¹``), and
    LAPACK's estimates of ``‖R⁻¹‖₁`` and ``‖R⁻¹‖_∞`` (``dtrcon``) are rarely low by more
    than a factor 10. ``ridge``: the factor of an augmented window ``[Ã; √α I]``, which
    has no cut-off to follow (the ridge solution inverts every singular value); it only
    has to be invertible to rounding.
    """
    if not R.size:
        return 0.0
    rel = EPS if ridge else lstsq_cutoff(1.0, n=n, D=D)
    r1, info = upper_rcond(R, "1")
    if info != 0 or not r1 > 0.0:
        return 0.0
    if r1 > 10.0 * R.shape[0] * rel:
        return math.inf  # κ₂ ≤ k·κ₁ for k×k R settles it without the second estimate
    r_inf, info = upper_rcond(R, "I")
    # (each square root apart: their product can underflow)
    return math.sqrt(r1) * math.sqrt(max(r_inf, 0.0)) / rel if info == 0 else 0.0


#: :func:`clear_of_cutoff` takes the singular values of a factor whose
#: :func:`cutoff_margin` is between this and 10 before an SVD with vectors (measured on
#: the solver sweep's RFF windows at ``N = D = 500``, ``λ = 0.9``, ``α = 0``: 64 windows
#: with no singular value at the cut-off had margins 0.10…9.98, 176 with one or more
#: 3e-6…0.099)
NEAR_CUTOFF = 0.1


def clear_of_cutoff(R, *, n, D, ridge=False):
    """Whether no singular value of the triangular factor ``R`` of an ``n×D`` window (or
    of its transpose) is at :func:`lstsq_cutoff`, so that a triangular solve with it is
    lstsq's solution (within ``eps·κ(R)``).

    Clear by the condition estimate (:func:`cutoff_margin` above 10): ``O(k²)`` for
    ``k×k`` ``R``. Near it (a margin above :data:`NEAR_CUTOFF`): by the singular values
    alone (about 2/5 of the cost of an SVD with vectors, measured at order 500: 36
    against 82 ms), clear when the smallest is more than twice the cut-off. Otherwise not
    clear.
    """
    margin = cutoff_margin(R, n=n, D=D, ridge=ridge)
    if margin > 10.0:
        return True
    if margin > NEAR_CUTOFF:
        s = svd(R, compute_uv=False)
        return bool(s[-1] > 2.0 * lstsq_cutoff(s[0], n=n, D=D))
    return False


def triangular_lstsq(R, B, *, n, D, ridge=False, trans=False):
    """lstsq's solution from the square upper-triangular factor ``R`` of an ``n×D``
    window: ``R⁻¹B`` (``R⁻ᵀB`` with ``trans``) when no singular value of ``R`` is at
    the cut-off (:func:`clear_of_cutoff`), else ``pinv(R) B`` with the cut-off
    (:func:`min_norm_solve`, ``O(k³)``; a caller that holds the window itself solves it
    by :func:`window_lstsq` instead).
    """
    if clear_of_cutoff(R, n=n, D=D, ridge=ridge):
        return triangular_solve(R, B, trans=trans)
    return min_norm_solve(R.T if trans else R, B, n=n, D=D)


def window_lstsq(A, B):
    """:func:`numpy.linalg.lstsq` (``rcond=None``: LAPACK ``gelsd``) of the weighted window
    ``A`` itself, for a window with a singular value at the cut-off; ``None`` where LAPACK
    fails or the solution is not finite (the caller then takes its factor's SVD).

    Where the window's singular values run through lstsq's cut-off, the minimum-norm
    answer jumps with each singular value the cut-off keeps or drops, and two exact
    computations decide that differently for singular values within rounding of it: the
    SVD of the window's triangular factor (:func:`min_norm_solve`) and ``gelsd`` on the
    window, the oracle of this package's tests, differed by up to 36 bound units on RFF
    windows at ``N = D = 500``, ``λ = 0.9`` (steps 505–600 of the solver sweep's stream,
    90 singular values within a factor 30 of the cut-off), where ``gelsd`` on the window
    as the solver holds it (unit rows times their norms and weights, within one rounding of
    the oracle's) was within 0.001 of it. It is also the cheaper there: 30.5 ms against
    58.1 ms for the SVD of the ``500×500`` factor with vectors (one BLAS thread).
    ``O(n·D·min(n, D))``.
    """
    try:
        with np.errstate(all="ignore"):
            beta = np.linalg.lstsq(A, B, rcond=None)[0]
    except np.linalg.LinAlgError:  # "SVD did not converge": the factor's SVD has gesvd
        return None
    return beta if np.isfinite(beta).all() else None


def pinv_factors(s, *, alpha, n, D):
    """The factors ``f(s)`` that turn singular values into the solution's.

    ``s / (s² + α)`` for a ridge, else ``1/s`` above :func:`lstsq_cutoff` and ``0`` at or
    below it. ``s`` has shape ``(k,)`` or ``(n_windows, k)``, descending along its last
    axis.

    A ridge is the minimum-norm solution of the augmented window ``[Ã; √α I]``, whose
    singular values are ``√(s² + α)``: those at or below lstsq's cut-off for it
    (``eps·(n + D)·√(s_max² + α)``) are zero, as lstsq on the augmented window treats
    them. That only happens when ``√α`` is itself below rounding against ``‖Ã‖`` (rows of
    1e50 with ``α = 0.1``): singular values that are rounding noise (``eps·s_max``,
    directions the window does not span) would otherwise be inverted, undamped by a ridge
    too small to reach them. ``1/(s + α/s)`` keeps ``s² + α`` from overflowing.
    """
    s_max = s[..., :1] if s.shape[-1] else np.zeros(s.shape[:-1] + (1,))
    if alpha > 0.0:
        root = np.sqrt(alpha)
        cut = EPS * (n + D) * np.hypot(s_max, root)
        keep = (s > 0) & (np.hypot(s, root) > cut)
        with np.errstate(divide="ignore", over="ignore"):
            return np.where(keep, 1.0 / (s + alpha / np.where(keep, s, 1.0)), 0.0)
    cut = lstsq_cutoff(s_max, n=n, D=D)
    with np.errstate(divide="ignore"):
        return np.where(s > cut, 1.0 / np.where(s > cut, s, 1.0), 0.0)


def min_norm_solve(A, B, *, n, D, alpha=0.0):
    """``pinv(A) B`` with the singular values at or below :func:`lstsq_cutoff` of an
    ``n×D`` window treated as zero (``A`` a factor with the window's singular values);
    with ``alpha > 0`` the ridge solution ``V diag(s/(s² + α)) Uᵀ B``.

    ``V f(s) Uᵀ B`` from :func:`svd` (``gesdd``, ``gesvd`` where it does not converge):
    ``O(k³)`` for ``A`` of order ``k``. (LAPACK ``gelsd`` on the factor was 1.5x faster
    at order 500, but on the solver sweep's RFF window at ``N = D = 500``, ``λ = 0.9`` its
    cut-off decisions left one step 2.4 bound units from the oracle: not used.)
    """
    U, s, Vt = svd(A)
    f = pinv_factors(s, alpha=alpha, n=n, D=D)
    return Vt.T @ (f[:, None] * (U.T @ B))


#: the orthogonal route of a block solver solves a window on its non-negligible rows when
#: at most this fraction of ``min(n, D)`` remain: the alternative is a slide of its
#: factors and perhaps an SVD of them (``O(N·D + min(N, D)³)``), and an SVD of ``k``
#: rows (``O(k·D·min(k, D))``) is cheaper only for ``k`` well below ``min(n, D)``
REDUCED_SHARE = 0.25
#: :func:`lstsq_stack` does when at most this fraction of the ``n`` rows remain: the
#: alternative is the same factorisation of all ``n`` rows
REDUCED_SHARE_SCRATCH = 0.5


def few_rows(norms, targets, *, cap, slack=1.0):
    """Which rows of each window of a stack are not negligible, and which windows have
    few of them.

    A row ``ã_i`` of a window with ``‖ã_i‖ ≤ eps·max‖ã‖/n`` and targets
    ``max|ỹ_i| ≤ eps·max|ỹ|/n`` is negligible: together such rows perturb ``[Ã Ỹ]`` by
    less than ``eps·‖[Ã Ỹ]‖``, what a backward-stable lstsq commits anyway, and the
    singular values they add lie below lstsq's cut-off, which truncates them. A zero row
    adds nothing to any least-squares solution, whatever its target. Windows of rows on
    scales 1e±100, or aged far below rounding, reduce to their few largest rows.

    Parameters
    ----------
    norms : ndarray of shape (n_windows, n)
        The rows' norms ``‖ã_i‖``, or lower bounds ``u_i`` with ``‖ã_i‖ ≤ slack·u_i``
        and ``u_i ≤ ‖ã_i‖`` (e.g. ``max|ã_i|``, ``slack = √D``).
    targets : ndarray of shape (n_windows, n), or a callable returning it
        ``max|ỹ_i|`` of each row (called only when the norms leave some window few
        rows).
    cap : float
        The most rows a window may keep to count as having few (see
        :data:`REDUCED_SHARE` and :data:`REDUCED_SHARE_SCRATCH`).
    slack : float, default=1.0

    Returns
    -------
    keep : ndarray of shape (n_windows, n) of bool, or None
        The rows that are not negligible (None when no window has few).
    few : ndarray of shape (n_windows,) of bool
        Windows that keep between 1 and ``cap`` rows.
    """
    n_windows, n = norms.shape
    none = (None, np.zeros(n_windows, dtype=bool))
    if not (norms.size and n):
        return none
    keep = _large(norms, n * slack)
    if keep.sum(axis=1).min() > cap:
        return none  # (the targets can only keep more rows: they are not read)
    keep |= (norms > 0) & _large(targets() if callable(targets) else targets, n)
    count = keep.sum(axis=1)
    few = (count > 0) & (count <= cap)
    return (keep if few.any() else None), few


def packed_rows(keep, width=None):
    """Each window's kept rows first: ``order`` of shape ``(n_windows, m)`` (``m`` the
    most rows a window keeps, or ``width``; row positions, kept rows in their order) and
    ``real`` (which of those positions are kept rows, the rest padding). A fixed
    ``width`` pads each window the same whichever other windows share the stack."""
    m = int(keep.sum(axis=1).max()) if width is None else int(width)
    order = np.argsort(~keep, axis=1, kind="stable")[:, :m]
    return order, np.take_along_axis(keep, order, axis=1)


def _large(v, n):
    """``v > eps·max(v)/n`` along each window (a window of zeros: nothing is large)."""
    return v > EPS * v.max(axis=1, keepdims=True) / n


def lstsq_stack(A, Y, *, alpha=0.0, keep=None, n_rows=None, reduce=True, ridge_qr=True, width=None):
    """Minimum-norm (ridge when ``alpha > 0``) least squares on a stack, orthogonally.

    Parameters
    ----------
    A : ndarray of shape (n_windows, n, D)
        Weighted design matrices ``Ã_j``.
    Y : ndarray of shape (n_windows, n, n_targets)
        Weighted targets ``Ỹ_j``.
    alpha : float, default=0.0
        Ridge penalty.

    keep : ndarray of shape (n_windows, n) of bool, default=None
        The rows each window is solved on (:func:`few_rows`), if the caller has them;
        the others must be negligible.
    n_rows : int, default=None
        With ``keep``: the number of rows of the windows ``A`` was taken from, whose
        lstsq cut-off applies (default ``n``).
    width : int, default=None
        With ``keep``: the rows each window's kept rows are padded to (default: the most
        a window keeps; a fixed width makes each window's solution independent of the
        others in the stack, see ``ridge_qr``).
    reduce : bool, default=True
        Without ``keep``: solve windows with few non-negligible rows on those alone.
    ridge_qr : bool, default=True
        With a ridge, solve a stack of at most ``_RIDGE_QR_WINDOWS`` windows by
        :func:`_ridge_qr`, a larger one by the SVD. A caller whose stack's size depends
        on other windows than the one solved (the windows of a call that need this
        route) passes False: every window then by the SVD, so that its solution, to the
        last bit, does not depend on which other windows share the stack (a prequential
        prediction must not depend on later rows).

    Returns
    -------
    beta : ndarray of shape (n_windows, D, n_targets)
        ``lstsq([Ã_j; √α I], [Ỹ_j; 0])``.
    s : ndarray of shape (n_windows, min(n, D)) or None
        Singular values of each ``Ã_j``, descending (None for a ridge solved by
        :func:`_ridge_qr`; None too for windows solved on their non-negligible rows).
    """
    n, D = A.shape[1], A.shape[2]
    if keep is not None:
        return _reduced_solve(A, Y, keep, alpha=alpha, n=n if n_rows is None else n_rows, width=width), None
    if reduce and A.size:
        # each window on its non-negligible rows when at most REDUCED_SHARE_SCRATCH of
        # them remain (max|ã_i| is within √D of ‖ã_i‖)
        keep, few = few_rows(np.abs(A).max(axis=2), lambda: np.abs(Y).max(axis=2, initial=0.0),
                             cap=REDUCED_SHARE_SCRATCH * n, slack=math.sqrt(D))
        if few.any():
            beta = np.empty((A.shape[0], D, Y.shape[2]))
            beta[few] = _reduced_solve(A[few], Y[few], keep[few], alpha=alpha, n=n)
            if not few.all():
                beta[~few] = _lstsq_all_rows(A[~few], Y[~few], alpha=alpha, ridge_qr=ridge_qr)[0]
            return beta, None
    return _lstsq_all_rows(A, Y, alpha=alpha, ridge_qr=ridge_qr)


def _lstsq_all_rows(A, Y, *, alpha, ridge_qr=True):
    """:func:`lstsq_stack` on every row of each window."""
    n, D = A.shape[1], A.shape[2]
    # a zero row adds nothing to the solution, whatever its target (see few_rows, whose
    # rows kept never include one): its target is zeroed with it, else the rounding of
    # that row's entries of the factors (eps, where they should be 0) carries it (a
    # target of 1e250 moved β by 1e235 of its units)
    zero = ~(A != 0).any(axis=2)
    if zero.any():
        Y = np.where(zero[:, :, None], 0.0, Y)
    # a few windows (the orthogonal route's, one at a time): no SVD; a large stack (the
    # short-window route's calls) keeps numpy's batched SVD, which loops in C where the
    # triangular solves and condition estimates below would loop in Python (measured:
    # N = 20, D = 20, α = 0.1, λ = 0.9, calls of 250 rows: 2.4× slower through _ridge_qr)
    if ridge_qr and alpha > 0 and 0 < A.shape[0] <= _RIDGE_QR_WINDOWS and n and D:
        beta = _ridge_qr(A, Y, alpha)
        if beta is not None:
            return beta, None
    if n >= D:
        # Ã = Q R, R = U_r s V_rᵀ  =>  Ã = (Q U_r) s V_rᵀ
        Q, R = np.linalg.qr(A)
        U_r, s, Vt = svd(R)
        U = Q @ U_r
        V = np.swapaxes(Vt, 1, 2)
    else:
        # Ãᵀ = Q R  =>  Ã = Rᵀ Qᵀ, Rᵀ = U s V_rᵀ  =>  Ã = U s (Q V_r)ᵀ
        Q, R = np.linalg.qr(np.swapaxes(A, 1, 2))
        U, s, Vt_r = svd(np.swapaxes(R, 1, 2))
        V = Q @ np.swapaxes(Vt_r, 1, 2)
    # β = V diag(f(s)) Uᵀ Ỹ
    f = pinv_factors(s, alpha=alpha, n=n, D=D)
    beta = V @ (f[:, :, None] * (np.swapaxes(U, 1, 2) @ Y))
    return beta, s


def _reduced_solve(A, Y, keep, *, alpha, n, width=None):
    """:func:`lstsq_stack` of windows on their rows ``keep`` alone: those rows first,
    padded with zero rows to the longest or to ``width`` (a zero row changes no
    solution), from their SVD; lstsq's cut-off stays the ``n``-row window's."""
    D = A.shape[2]
    order, real = packed_rows(keep, width)
    real = real[:, :, None]
    U, s, Vt = svd(np.take_along_axis(A, order[:, :, None], axis=1) * real)
    f = pinv_factors(s, alpha=alpha, n=n, D=D)
    Yk = np.take_along_axis(Y, order[:, :, None], axis=1) * real
    return np.swapaxes(Vt, 1, 2) @ (f[:, :, None] * (np.swapaxes(U, 1, 2) @ Yk))


#: stacks of at most this many windows take :func:`_ridge_qr` in :func:`lstsq_stack`
_RIDGE_QR_WINDOWS = 4


def _ridge_qr(A, Y, alpha):
    """The ridge solution of a stack by a QR factorisation of the augmented windows.

    ``[√α I; Ã]`` (``n ≥ D``) or ``[√α I; Ãᵀ]`` (``n < D``, the minimum-norm solution of
    ``[√α I, Ã] [γ; β] = Ỹ``) has full column rank: its triangular factor ``R`` is
    invertible and one triangular solve gives ``β`` — backward stable, as the SVD route,
    with no SVD (``O((n + D)·min(n, D)²)``, a fraction of the SVD's cost). Returns None
    when LAPACK's estimate finds some ``R`` too close to singular for that
    (``rcond ≤ 1e3·eps``: ``√α`` below rounding against ``‖Ã‖``), for the SVD route.
    """
    k, n, D = A.shape
    if n >= D:
        # [√α I 0; Ã Ỹ] = Q [R Ỹ₂; 0 ·]  =>  β = R⁻¹ Ỹ₂
        beta = [ridge_from_factor(Aj, Yj, alpha) for Aj, Yj in zip(A, Y)]
        return None if any(b is None for b in beta) else np.stack(beta)
    root = np.sqrt(alpha)
    # the ridge rows first (see ridge_from_factor)
    M = np.concatenate([np.broadcast_to(root * np.eye(n), (k, n, n)), np.swapaxes(A, 1, 2)], axis=1)
    Q, R = np.linalg.qr(M)
    if not all(_safely_invertible(Rj) for Rj in R):
        return None
    # [√α I, Ã] = Rᵀ Qᵀ  =>  [γ; β] = Q R⁻ᵀ Ỹ,  β = Q[n:] R⁻ᵀ Ỹ
    return np.stack([Qj[n:] @ triangular_solve(Rj, Yj, trans=True)
                     for Rj, Qj, Yj in zip(R, Q, Y)])


def _safely_invertible(R):
    """Whether LAPACK's estimate finds the triangular ``R`` safely invertible
    (``rcond₁ > 1e3·eps``): a factor of ``[F; √α I]`` is not when ``√α`` is below
    rounding against ``‖F‖``."""
    rcond, info = upper_rcond(R, "1")
    return info == 0 and rcond > 1e3 * EPS


def ridge_from_factor(F, B, alpha, *, triangular=None):
    """``lstsq([F; √α I], [B; 0])`` for ``F`` of shape ``(m, k)`` (a window with
    ``m ≥ k`` rows, or a square factor of any structure): the ridge solution
    ``(FᵀF + αI)⁻¹ FᵀB`` without forming ``FᵀF``.

    ``[√α I 0; F B] = Q [R₂ B₂; 0 ·]`` by one Householder QR (LAPACK ``dgeqrf``, ``Q`` not
    formed) and ``β = R₂⁻¹ B₂``: ``O((m + k)·k²)``, backward stable. A square triangular
    ``F`` (``triangular="upper"`` or ``"lower"``: a window's factor) takes LAPACK
    ``dtpqrt``, the QR of a triangle stacked on a triangle, which touches no zero of
    either: ``≈ 2k³/3`` against ``dgeqrf``'s ``≈ 10k³/3`` (measured, one thread:
    k = 500 41 → 9.6 ms, k = 1000 390 → 42 ms). Returns None when ``R₂`` is not safely
    invertible (:func:`_safely_invertible`), for an SVD instead.
    """
    if triangular == "lower":
        # reversing rows and columns turns L into an upper triangle:
        # ‖[L; √αI] x − [B; 0]‖ = ‖[JLJ; √αI] Jx − [JB; 0]‖,  J the reversal
        beta = ridge_from_factor(F[::-1, ::-1], B[::-1], alpha, triangular="upper")
        return None if beta is None else beta[::-1]
    m, k = F.shape
    # the ridge rows first: each Householder reflector then maps its column onto a ridge
    # row, and rows of F far below √α are not cancelled against themselves (measured:
    # F of norm 1e-89, α = 1e-6, the ridge rows last: β all lost)
    if triangular == "upper":
        # [√α I; R] = Q [R₂; 0] (dtpqrt: a triangle on a triangle, R read in its upper
        # triangle only), B₂ = the first k rows of Qᵀ [0; B] (dtpmqrt)
        R2, V, T, info = lapack.dtpqrt(k, min(k, _TPQRT_BLOCK), np.sqrt(alpha) * np.eye(k, order="F"),
                                       np.asarray(F, order="F"))
        if info != 0:
            return None
        B2 = lapack.dtpmqrt(k, V, T, np.zeros(B.shape, order="F"), np.array(B, dtype=float, order="F"),
                            trans="T")[0]
        # (R2 is upper triangular as returned: dtpqrt leaves the zeros below the diagonal
        # of √α I as they were)
    else:
        M = np.zeros((k + m, k + B.shape[1]))
        M[np.arange(k), np.arange(k)] = np.sqrt(alpha)
        M[k:, :k], M[k:, k:] = F, B
        H = lapack.dgeqrf(M)[0]
        R2, B2 = np.triu(H[:k, :k]), H[:k, k:]
    if not _safely_invertible(R2):
        return None
    return triangular_solve(R2, B2)


#: block size of :func:`ridge_from_factor`'s ``dtpqrt`` (measured, one thread, µs for
#: blocks 4 / 8 / 16 / 32: k = 50 31 / 28 / 29 / 60, k = 100 89 / 82 / 94 / 192, k = 200
#: 627 / 634 / 645 / 870, k = 500 5564 / 5120 / 5567 / 5505)
_TPQRT_BLOCK = 8


#: Where a refinement step corrects a solve's result (the solution of a window to be
#: refined, or the correction itself), :func:`solve_shifted` stops once a step changes
#: ``x`` by at most this relative to ``max |x|``, not at rounding: the error left, about
#: that much, is then multiplied by the next step's contraction (the correction's relative
#: rounding, at most about 1e-3; on the primal route a second step checks it, see
#: :data:`~._primal_solver.REFINE_LEFT`), or is the error of a correction, itself small
#: against ``β``. Measured on RFF windows, steps
#: a solve: ``N = 1000``, ``D = 256``, ``λ = 0.99``, ``α = 1e-6`` 13.1 → 6.7 (primal);
#: ``N = D = 500``, ``λ = 0.999``, ``α = 1e-6`` 8.5 → 5.4 (dual); the error against the
#: oracle unchanged (0.00174 and 0.0237 bound units).
REFINED_TOL = 1e-8


def solve_shifted(apply_M, x0, delta, size, *, spread=None, max_steps=MAX_STEPS, tol=None):
    """Solve ``(I + δ_w M) x = x₀`` for every window ``w`` of a block, by iteration.

    A ridge with forgetting: window ``w`` of a block has the matrix ``P + δ_w Σ``, where
    ``P`` is the matrix the block factorised (the ridge ``Σ`` of its reference window)
    and ``δ_w = λ^-(j − j_ref) − 1`` (one scalar: the ridge against the ageing weights).
    With ``x₀ = P⁻¹b`` and ``M = P⁻¹Σ``, ``(P + δΣ) x = b`` is ``(I + δM) x = x₀``; since
    ``0 ⪯ Σ ⪯ P``, ``M`` has its eigenvalues in ``[0, 1]``. From ``x = x₀``::

        x ← x + ω (x₀ − (I + δM) x),     ω = 2 / (2 + δ)

    contracts by at most ``|δ|/(2 + δ)`` a step (``1/9`` for shifts within 1.25), and by
    far more where the ridge is small against the window (``M x`` small): then ``x₀``
    is already close and a few steps suffice. (Chebyshev's iteration for the interval
    ``[0, 1]`` was tried: it needs more steps here, since it is built for the whole
    interval and starts its first step further from ``x₀``.) A step needs one product
    with ``M`` (two triangular solves with the block's factor and its periphery's small
    solve, as the block's fast route), for all the windows together.

    Parameters
    ----------
    apply_M : callable
        ``apply_M(x) -> M x``, ``x`` a list of arrays (the windows' unknowns, in the
        caller's layout).
    x0 : list of ndarray
        ``P⁻¹b`` for every window.
    delta : list of ndarray
        ``δ_w`` broadcast to each array of ``x0``.
    size : callable
        ``size(x) -> ndarray of shape (n_windows,)``: ``max |x|`` per window.
    spread : callable, default=None
        ``spread(v)``: per-window values ``v`` of shape ``(n_windows,)`` broadcast to each
        array of ``x0`` (as ``delta`` is). Given, a window is left as it is once it has
        converged, so that its solution, to the last bit, does not depend on how many
        steps the other windows take (a prequential prediction must not depend on later
        rows of the same call).

    tol : float or ndarray of shape (n_windows,), default=None
        A window has converged once a step changes it by at most ``tol`` of ``max |x|``
        (:data:`REFINED_TOL` where a refinement step follows); None: at rounding (below).

    Returns
    -------
    x : list of ndarray
    converged : ndarray of shape (n_windows,) of bool
        Windows that a step changed by at most ``4 eps`` of ``max |x|`` (or ``tol``),
        or by at most :data:`STALL_EPS` ``eps`` without contracting (rounding).
    steps : int
        The steps taken (see :func:`~._window_solvers.ridge_share`).
    """
    omega = [2.0 / (2.0 + d) for d in delta]
    x = list(x0)
    converged = np.zeros(size(x0).shape, dtype=bool)
    last = np.full(converged.shape, np.inf)
    steps = 0
    for steps in range(1, max_steps + 1):
        Mx = apply_M(x)
        step = [w * (v0 - v - d * m) for w, v0, v, d, m in zip(omega, x0, x, delta, Mx)]
        if spread is not None and converged.any():
            step = [np.where(active, st, 0.0) for st, active in zip(step, spread(~converged))]
        x = [v + st for v, st in zip(x, step)]
        # a window has converged once a step is at rounding level: within 4 eps of max|x|,
        # or within STALL_EPS eps and no longer contracting (a step contracts by at least
        # 9 in exact arithmetic: one that does not is rounding). The steps after it jitter
        # at that level (measured: 0.6-6 eps at the smallest, then up to 20; counting only
        # the last step against 4 eps sent such windows to the orthogonal route, 177 of
        # 2,291 at N = 1000, D = 2048, λ = 0.999, α = 1e-6)
        st, sx = size(step), size(x)
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.where(st > 0, st / sx, 0.0)  # (x = 0 after a zero step: converged)
        converged |= (rel <= (4 * EPS if tol is None else np.maximum(tol, 4 * EPS))) | (
            (rel <= STALL_EPS * EPS) & (rel >= 0.5 * last))
        last = rel
        if converged.all():
            break
    return x, converged, steps
