"""Sliding-window kernel RLS with a Gaussian kernel (SW-KRLS).

Van Vaerenbergh, Vía and Santamaría, ICASSP 2006: the inverse ``(K + αI)⁻¹`` of the
window's regularised kernel matrix is carried from row to row; the step that replaces the
oldest row by the new one is one symmetric matrix-vector product and one symmetric rank-two
update of that inverse, both in place (BLAS ``dsymv``, ``dsyr2``).
"""

import functools
import math
from numbers import Integral, Real

import numpy as np
from scipy.linalg import blas, lapack
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._compat import Interval
from .._docstrings import fill_doc
from .._streaming._base import (
    VALIDATION_ATTRIBUTES, StreamingRegressorMixin, check_stream_params, clear_fitted_state,
    on_rollback,
)
from ..abo._window import RingBuffer

__all__ = ["SlidingWindowKRLSRegressor"]

# Bound on the temporary (rows × window × features) difference arrays, in numbers.
_MAX_DIFF_SIZE = 2**21
# The window's inverse is recomputed from the window every
# max(_REFACTOR_WINDOWS · window_size, _REFACTOR_MIN_ROWS) rows: O(N³ + N²d) each time,
# a few per cent of the O(N²) steps it bounds the rounding drift of.
_REFACTOR_WINDOWS = 4
_REFACTOR_MIN_ROWS = 256
_EPS = np.finfo(np.float64).eps
# Length scales for which ‖a − b‖² / (2 s²) is computed directly: a squared distance
# that overflows (underflows) then means a kernel value of exactly 0 (1) anyway.
_SAFE_LENGTH_SCALE = (2.0**-250, 2.0**250)
# Largest squared norm (in length scales) of a centred row for which the Gram-matrix
# formula of the squared distances is used: its rounding error, ≈ 4ε times that, is
# below 1e-11 in the exponent of the kernel; beyond it the distances are taken directly.
_GRAM_MAX_SQ_NORM = 1e4


@fill_doc()
class SlidingWindowKRLSRegressor(StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Sliding-window kernel recursive least squares (SW-KRLS) with a Gaussian kernel.

    After each row the model is kernel ridge regression on the window of the last
    ``window_size`` rows ``x_1..x_n`` (oldest first)::

        ŷ(x) = k(x)ᵀ (K + αI)⁻¹ y,   K_ij = κ(x_i, x_j),   k(x)_i = κ(x, x_i),
        κ(x, x') = exp(−‖x − x'‖² / (2 s²))

    The inverse ``(K + αI)⁻¹`` of the window is carried from row to row: the oldest row is
    removed by a Schur-complement downdate and the new one appended by a
    Schur-complement growth, applied together as one symmetric rank-two update of the
    inverse, ``O(N²)``.

    Parameters
    ----------
    window_size : int, default=20
        ``N``, the number of most recent rows the model is fitted on.
    length_scale : float, default=1.0
        ``s > 0``, the length scale of the Gaussian kernel (unlike the random Fourier
        features' ``sigma``, a larger ``s`` is a smoother kernel; ``s = 1/sigma`` gives
        the kernel that :class:`RandomFourierFeatures` approximates).
    alpha : float, default=1e-2
        Ridge ``α > 0`` added to the kernel matrix's diagonal. It keeps ``K + αI``
        invertible (repeated inputs) and the recursion well conditioned
        (``κ(K + αI) ≤ 1 + N/α``). It must be at least ``window_size · eps`` (about
        ``2.2e-16 · N``, the rounding level of ``K``): a smaller value raises
        ``ValueError`` when the stream starts. See the Notes for the accuracy with
        repeated rows.

    Attributes
    ----------
    n_features_in_ : int
        Number of input features ``d``.
    {feature_names_in}
    {samples_seen}
    n_window_ : int
        Rows in the current window, ``n = min(n_samples_seen_, window_size)``.
    X_window_ : ndarray of shape (n_window_, n_features_in_)
        The window's rows, oldest first (a copy).
    y_window_ : ndarray of shape (n_window_,) or (n_window_, n_targets)
        Their targets (a copy).
    inverse_kernel_ : ndarray of shape (n_window_, n_window_)
        ``(K + αI)⁻¹`` of the window as carried by the recursion, oldest first (a
        symmetric copy).
    dual_coef_ : ndarray of shape (n_window_,) or (n_window_, n_targets)
        ``(K + αI)⁻¹ y`` (a copy); ``predict(X) = K(X, X_window_) @ dual_coef_``.
    n_refactorizations_ : int
        Steps at which rounding made a Schur complement non-positive, so that the
        window's inverse was recomputed from scratch, since the last :meth:`fit` (the
        scheduled recomputations described in the Notes are not counted).

    See Also
    --------
    QREWRLSRegressor : With :class:`RandomFourierFeatures`, the ABO model: the same
        windowed kernel regression through an explicit random feature map.
    sklearn.kernel_ridge.KernelRidge : The batch model each window solves
        (``kernel="rbf", gamma=1/(2 s²)``).

    Notes
    -----
    Per row: ``N`` kernel evaluations (``O(N·d)``, computed for a block of rows at once),
    one symmetric matrix-vector product and one symmetric rank-two update of the ``N×N``
    inverse (BLAS ``dsymv`` and ``dsyr2``, in place, each reading one triangle), and
    ``O(N·c)`` for the dual coefficients of ``c`` targets: ``O(N·d + N² + N·c)``, with no
    ``N×N`` array allocated or copied except the one undo copy per call (see below). The
    state is the window (``O(N·d)``, in the package's ring buffer of rows) and the
    inverse, held in the ring's order (slot ``i`` of the ring is row ``i`` of the
    inverse; only its upper triangle is stored and updated); memory is
    ``O(N² + N·d)`` whatever the number of rows in a call.

    The Schur complements ``[(K + αI)⁻¹]_oo`` (downdate) and ``1 + α − kᵀ(K + αI)⁻¹k``
    (growth) are at least ``1/(N + α)`` and ``α`` in exact arithmetic; if rounding
    takes one below half of that bound, the window's inverse is recomputed by a
    Cholesky factorisation. Rounding errors of the
    recursion accumulate slowly, at a rate set by ``κ(K + αI)``; they are bounded by
    recomputing the inverse from the window every ``max(4N, 256)`` rows
    (``O(N³ + N²·d)``, i.e. ``O(N² + N·d)`` amortised per row). The recursion is
    sequential, so :meth:`prequential_predict` is a loop over rows (validation is done
    once per call, kernel evaluations once per block of rows). There is no intercept:
    centre ``y``.

    **Per-row weights.** ``sample_weight`` (``w_i >= 0``, in :meth:`fit`,
    :meth:`partial_fit` and :meth:`prequential_predict`) gives the weighted kernel ridge
    regression of the window, ``argmin Σ w_i (y_i − f(x_i))² + α‖f‖²``, i.e.
    ``ŷ(x) = k(x)ᵀ a`` with ``(K + αW⁻¹) a = y``: the carried inverse is that of
    ``K + diag(α/w_i)``, updated by the same ``O(N²)`` steps (the new row's diagonal is
    ``1 + α/w``; the Schur complements are bounded below by ``α/w`` and
    ``1/(N + max α/w_i)``). A zero-weight row takes its slot (the window is the last
    ``N`` rows by count) but is held out of the system: zero row and column of the
    inverse, dual coefficient 0; its prediction is still made. ``α/w_i`` must stay
    above ``N·ε`` (the floor ``alpha`` has without weights): larger weights are a
    ``ValueError``. ``inverse_kernel_`` is then ``(K + αW⁻¹)⁻¹``. Uniform weights ``c``
    act as ``alpha/c``; integer weights are not repeated rows (repeats take window
    slots and push older rows out).

    **Hostile inputs.** The kernel is computed without overflow at every scale: a
    distance whose square overflows is infinite (kernel 0), and a length scale beyond
    ``2^±250`` divides the differences before they are squared, so ``length_scale=1e300``
    gives the all-ones kernel (a rank-one ``K`` that ``α`` regularises) and
    ``1e-300`` the identity; ``X → cX`` with ``length_scale → c·length_scale`` gives the
    same model. Rows repeated with *different* targets make ``K`` singular: the dual
    coefficients are then about ``|Δy|/α`` and the predictions' relative error grows
    roughly like ``N·ε/α²`` (measured: ``1e-4`` for ``N = 20``, ``α = 1e-6``, and
    ``O(1)`` below ``α ≈ 1e-8``; bounded, never NaN). Dual coefficients beyond
    the float64 range (huge targets with a small ``α``) raise ``ValueError`` and change
    nothing. ``window_size``, ``length_scale`` and ``alpha`` are those the stream
    started with: changing one by ``set_params`` before the next :meth:`partial_fit`,
    :meth:`prequential_predict` or :meth:`predict` raises ``ValueError`` (call
    :meth:`fit` to start a stream with the new values).

    The update works in place; a call that fails (bad input, an overflow, or an
    interruption such as ``KeyboardInterrupt`` anywhere inside it) leaves the estimator
    exactly as it was, bit for bit: the dual coefficients and the counters are worked on
    as copies, the window's slots that the call overwrites are restored from an undo
    record, and the inverse from a copy taken at the start of the call (``O(N²)`` once
    per call, besides the ``O(N²)`` update of each row).

    References
    ----------
    S. Van Vaerenbergh, J. Vía and I. Santamaría, "A sliding-window kernel RLS
    algorithm and its application to nonlinear channel identification", *ICASSP* 2006.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import SlidingWindowKRLSRegressor, prequential_predict
    >>> rng = np.random.default_rng(0)
    >>> X = rng.uniform(-3, 3, size=(300, 1))
    >>> y = np.sin(X[:, 0])
    >>> reg = SlidingWindowKRLSRegressor(window_size=50, length_scale=1.0, alpha=1e-3)
    >>> y_pred = prequential_predict(reg, X, y)
    >>> float(np.mean((y[50:] - y_pred[50:]) ** 2)) < 1e-3
    True
    >>> reg.n_window_, reg.dual_coef_.shape
    (50, (50,))
    """

    _parameter_constraints: dict = {
        "window_size": [Interval(Integral, 1, None, closed="left")],
        "length_scale": [Interval(Real, 0, None, closed="neither")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, window_size=20, *, length_scale=1.0, alpha=1e-2):
        self.window_size = window_size
        self.length_scale = length_scale
        self.alpha = alpha

    # ------------------------------------------------------------------ public API
    def _predict_rows(self, X):
        """Predictions of validated rows, 2-D (also the delayed-label path)."""
        occupied, ring = self._occupied(), self._ring
        Y_pred = np.empty((X.shape[0], ring.Y.shape[1]))
        step = max(1, _MAX_DIFF_SIZE // max(1, self.window_size * X.shape[1]))
        for start in range(0, X.shape[0], step):
            rows = X[start : start + step]
            K = _gaussian_kernel(rows[:, None, :], ring.X[None, occupied], self.length_scale)
            Y_pred[start : start + step] = K @ self._dual[occupied]
        return Y_pred

    @property
    def n_window_(self):
        check_is_fitted(self)
        check_stream_params(self)
        return int(min(self.n_samples_seen_, self.window_size))

    @property
    def X_window_(self):
        return self._ring.X[self._ordered_slots()].copy()

    @property
    def y_window_(self):
        Y = self._ring.Y[self._ordered_slots()]
        return Y[:, 0].copy() if self._n_targets is None else Y.copy()

    @property
    def inverse_kernel_(self):
        order = self._ordered_slots()
        return _symmetric(self._Kinv)[np.ix_(order, order)]

    @property
    def dual_coef_(self):
        a = self._dual[self._ordered_slots()]
        return a[:, 0].copy() if self._n_targets is None else a.copy()

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a kernel model on the last ``window_size`` rows only: with the default window
        # and length scale its score on a whole (10-feature) training set is not a fit
        # criterion (scikit-learn's check_regressors_train asks for R² > 0.5)
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ internals
    def _ordered_slots(self):
        """Ring slots of the window's rows, oldest first (refused, like every read of
        the window, if a stream parameter changed since the stream started)."""
        check_is_fitted(self)
        check_stream_params(self)
        return self._ring.slots()

    def _occupied(self):
        """Ring slots of the window's rows, in slot order."""
        return np.sort(self._ordered_slots())

    def _init_state(self, n_features, n_targets, y_ndim):
        clear_fitted_state(self, keep=VALIDATION_ATTRIBUTES)
        N = self.window_size
        # the window's rows and targets in the package's ring: slot ``pos`` receives the
        # next row (and holds the oldest once the window is full); the per-slot arrays
        # below are in the same layout, and empty slots have zero rows in ``_Kinv``
        self._ring = RingBuffer(N, X=(n_features,), Y=(n_targets,))
        # upper triangle of (K + αI)⁻¹ in Fortran order: the layout BLAS updates in place
        self._Kinv = np.zeros((N, N), order="F")
        self._dual = np.zeros((N, n_targets))
        # α/w of each slot: inf for an empty slot or a zero-weight row (held out of the
        # system: zero row and column in the inverse)
        self._reg = np.full(N, np.inf)
        self.n_samples_seen_ = 0
        self.n_refactorizations_ = 0

    _stream_params = ("window_size", "length_scale", "alpha")

    def _check_new_stream(self):
        """``α ≥ Nε``: below it ``κ(K + αI) = 1 + N/α`` can exceed ``1/ε``."""
        floor = self.window_size * _EPS
        if self.alpha < floor:
            raise ValueError(
                f"alpha={self.alpha!r} is below window_size · eps = {floor:.3g}, the "
                "rounding level of the window's kernel matrix: with repeated (or "
                "nearly repeated) rows K + αI is singular in float64 and its inverse "
                f"would be rounding noise. Use alpha >= {floor:.3g} (and well above it, "
                "e.g. 1e-6, if rows may repeat with different targets)."
            )

    def _learn_weighted(self, X, Y, sample_weight, *, predict):
        # not the mixin's √w scaling of the rows (a kernel is not linear in them): the
        # weights enter the diagonal of the regularised kernel matrix, α/w_i
        if sample_weight is None:
            return self._learn(X, Y, predict=predict)
        floor = self.window_size * _EPS
        with np.errstate(divide="ignore", over="ignore"):
            reg = float(self.alpha) / sample_weight  # α/w: inf for a zero weight
        if not (reg[np.isfinite(reg)] >= floor).all():
            raise ValueError(
                f"sample_weight is too large for alpha={self.alpha!r}: the weighted "
                f"problem's regularisation α/w_i falls below window_size · eps = "
                f"{floor:.3g}, the rounding level of the window's kernel matrix. Use "
                f"weights <= alpha / {floor:.3g} (only their ratio to alpha matters)."
            )
        return self._learn(X, Y, predict=predict, reg=reg)

    def _learn(self, X, Y, *, predict, reg=None):
        """Learn the rows; ``reg`` (per row, default ``α``): the diagonal term ``α/w_i``
        of each row in ``K + αW⁻¹`` (``inf``: a zero weight, the row held out of the
        system while it takes its slot)."""
        N, alpha, s2 = self.window_size, float(self.alpha), float(self.length_scale)
        period = max(_REFACTOR_WINDOWS * N, _REFACTOR_MIN_ROWS)
        # the dual coefficients are O(N·c): worked on as a copy; the ring of the window's
        # rows (a private copy if it maps a file) and the N×N inverse are updated in
        # place, and an undo record of each undoes the call exactly
        dual = self._dual.copy()
        R = self._reg.copy()  # α/w of each slot, inf for empty or weightless
        ring = self._ring.writable()
        Kinv = self._Kinv
        if not (Kinv.flags.f_contiguous and Kinv.flags.writeable):
            # a state restored by a foreign unpickler, or loaded with joblib's
            # mmap_mode="r" (BLAS would write into the read-only map): a private copy
            Kinv = self._Kinv = np.array(Kinv, order="F")
        n_seen, n_ref = self.n_samples_seen_, self.n_refactorizations_
        Y_pred = np.empty_like(Y) if predict else None
        # blocks of at most N rows, so that no slot is written twice within a block
        step = max(1, min(N, _MAX_DIFF_SIZE // (N * X.shape[1])))
        # undo of the in-place writes, if this call fails or an enclosing one (a
        # pipeline's) fails after it: one O(N²) copy per call, far less than the O(N²)
        # update of each row, and the ring's slots that the call overwrites
        original, saved = Kinv, Kinv.copy(order="F")
        undo_ring = functools.partial(ring.restore, ring.checkpoint(X.shape[0]))
        on_rollback(functools.partial(np.copyto, original, saved))
        on_rollback(undo_ring)
        try:
            # an overflow is detected below and reported as an error
            with np.errstate(over="ignore", invalid="ignore"):
                for start in range(0, X.shape[0], step):
                    stop = min(start + step, X.shape[0])
                    # kernel of the block's rows with the ring as it stands (0 for empty
                    # slots: the last ones while the window fills) and with each other
                    K_ring = _gaussian_kernel(X[start:stop, None, :], ring.X[None, :, :], s2)
                    K_ring[:, ring.n :] = 0.0
                    K_blk = _gaussian_kernel(X[start:stop, None, :], X[None, start:stop, :],
                                             s2)
                    written = ring.next_slots(stop - start)
                    for j in range(stop - start):
                        t, s = start + j, ring.pos
                        # k_i = κ(x_t, row in slot i): the block's earlier rows replaced
                        # slots
                        k = K_ring[j].copy()
                        k[written[:j]] = K_blk[j, :j]
                        if predict:
                            # ŷ = kᵀ (K + αI)⁻¹ y = kᵀ a
                            Y_pred[t] = k @ dual
                        r_new = alpha if reg is None else float(reg[t])
                        # without weights: R[s] = α for every occupied slot, and this
                        # is the plain SW-KRLS step
                        ok = _replace_slot_weighted(
                            Kinv, dual, ring.Y, R, k=k, y_new=Y[t], slot=s, reg_new=r_new)
                        # the new row takes slot s (its target is there already if ok)
                        ring.push(X[t], Y[t])
                        R[s] = r_new
                        n_seen += 1
                        if not ok or n_seen % period == 0:
                            # a Schur complement rounded below its exact lower bound, or
                            # the scheduled recomputation that bounds the drift:
                            # (K + αW⁻¹)⁻¹ from the window
                            Kinv, dual = _inverse_kernel(ring.X, ring.Y, R, length_scale=s2)
                            n_ref += not ok
            if not (np.isfinite(dual).all() and (Y_pred is None or np.isfinite(Y_pred).all())):
                raise ValueError(
                    "the dual coefficients (K + αI)⁻¹y overflowed: the targets are too "
                    "large for this alpha (|dual| ≤ N·|y|/α); rescale y or increase alpha."
                )
        except BaseException:
            np.copyto(original, saved)  # the array the state holds, exactly as it was
            undo_ring()
            raise
        (self._Kinv, self._dual, self._reg, self.n_samples_seen_,
         self.n_refactorizations_) = Kinv, dual, R, n_seen, n_ref
        return Y_pred


def _gaussian_kernel(A, B, length_scale):
    """``exp(−‖a − b‖² / (2 s²))`` along the last axis, broadcasting ``A`` against ``B``.

    Safe at every scale: a difference or squared distance that overflows is an infinite
    distance (kernel 0, its value to working precision), and outside
    ``_SAFE_LENGTH_SCALE`` the differences are divided by ``s`` before squaring (so
    neither ``s²`` nor ``‖a − b‖²`` can overflow or underflow needlessly).
    """
    with np.errstate(over="ignore", under="ignore"):
        diff = A - B
        if _SAFE_LENGTH_SCALE[0] <= length_scale <= _SAFE_LENGTH_SCALE[1]:
            return np.exp(np.einsum("...k,...k->...", diff, diff) / (-2.0 * length_scale**2))
        diff /= length_scale
        return np.exp(-0.5 * np.einsum("...k,...k->...", diff, diff))


def _symmetric(U):
    """The symmetric matrix whose upper triangle is that of ``U``."""
    return np.triu(U) + np.triu(U, 1).T


def _replace_slot(Kinv, dual, Yr, *, k, y_new, slot, alpha, full, bound_reg=None):
    """One step of SW-KRLS: the row in ``slot`` leaves the window, the new row enters it.

    With ``P = (K + αI)⁻¹`` of the window (upper triangle of ``Kinv``, zero rows and
    columns for empty slots) and ``a = P y`` (``dual``), updates both in place to those of
    the window where slot ``s`` holds the new row, and writes ``y_new`` into ``Yr[s]``.
    ``k`` holds the new row's kernel with each slot (it is modified). Returns ``False``,
    touching nothing (not even ``Yr``), if a Schur complement is not positive (rounding;
    the caller then recomputes the inverse).
    """
    s = slot
    if full:
        # f = P e_s (column s, from the stored upper triangle), e = f_s: the downdate's
        # Schur complement, positive in exact arithmetic
        f = np.concatenate((Kinv[: s + 1, s], Kinv[s, s + 1 :]))
        e = float(f[s])
        # e ≥ 1/λ_max(K + αI) ≥ 1/(N + α) in exact arithmetic: below half of that, the
        # carried inverse is dominated by rounding
        if not e > 0.5 / (Kinv.shape[0] + (alpha if bound_reg is None else bound_reg)):
            return False
    k[s] = 0.0
    # b = P₋ k with P₋ = P − f fᵀ/e the inverse without slot s (its row s is 0):
    #   b = P k − f (fᵀk)/e,   b_s = 0
    b = blas.dsymv(1.0, Kinv, k)
    if full:
        b -= float(f @ k) / e * f
    b[s] = 0.0
    # growth's Schur complement g = κ(x, x) + α − kᵀb = 1 + α − kᵀb
    g = 1.0 + alpha - float(k @ b)
    # g ≥ α in exact arithmetic (K is positive semi-definite): below half of that, it is
    # dominated by rounding
    if not g > 0.5 * alpha:
        return False
    # the bordered inverse with the new row in slot s,
    #   P₊ = P₋ + (b − e_s)(b − e_s)ᵀ/g = P + p pᵀ − q qᵀ,
    #   p = (b − e_s)/√g,   q = f/√e   (q = 0 while the window fills: slot s is empty)
    # invariant: Kinv = (K + αI)⁻¹ of the occupied slots (upper triangle), 0 elsewhere
    b *= 1.0 / math.sqrt(g)
    b[s] = -1.0 / math.sqrt(g)
    p = b
    dy = y_new - Yr[s]
    Yr[s] = y_new
    if not full:
        out = blas.dsyr(1.0, p, a=Kinv, overwrite_a=True)
        # a₊ = P y₊ + p (pᵀy₊), with P e_s = 0
        dual += np.outer(p, p @ Yr)
    else:
        q = f * (1.0 / math.sqrt(e))
        # p pᵀ − q qᵀ = ½((p + q)(p − q)ᵀ + (p − q)(p + q)ᵀ): one pass over the triangle
        out = blas.dsyr2(0.5, p + q, p - q, a=Kinv, overwrite_a=True)
        # a₊ = P₊ y₊ = P y + f (y_new − y_old)ᵀ + p (pᵀy₊) − q (qᵀy₊)
        V = np.stack((f, p, q))
        C = np.empty((3, dual.shape[1]))
        C[0] = dy
        np.matmul(V[1:], Yr, out=C[1:])
        C[2] *= -1.0
        dual += V.T @ C
    assert out is Kinv, "the BLAS update must work in place"
    return True


def _replace_slot_weighted(Kinv, dual, Yr, R, *, k, y_new, slot, reg_new):
    """:func:`_replace_slot` for ``P = (K + R)⁻¹``, ``R = diag(α/w_i)`` by slot.

    ``R[s] = inf`` marks a slot out of the system (empty, or a zero-weight row): its row
    and column of ``P`` are zero and its dual coefficient is 0; ``reg_new = inf`` puts the
    new row in that state (it takes the slot, contributes nothing). The Schur complements
    are bounded below by ``1/(N + max R)`` (downdate) and ``reg_new`` (growth).
    """
    s = slot
    held = math.isfinite(R[s])
    grows = math.isfinite(reg_new)
    if not held and not grows:
        Yr[s] = y_new
        return True
    if grows:
        if held:
            finite = R[np.isfinite(R)]
            r_max = max(float(finite.max()), reg_new)
        else:
            r_max = reg_new
        return _replace_slot(Kinv, dual, Yr, k=k, y_new=y_new, slot=s, alpha=reg_new,
                             full=held, bound_reg=r_max)
    # the row in slot s leaves the system and nothing enters: P₋ = P − q qᵀ, q = f/√e
    f = np.concatenate((Kinv[: s + 1, s], Kinv[s, s + 1 :]))
    e = float(f[s])
    finite = R[np.isfinite(R)]
    if not e > 0.5 / (Kinv.shape[0] + float(finite.max())):
        return False
    q = f * (1.0 / math.sqrt(e))
    # a₋ = P₋ y = a − q (qᵀy)   (y with the leaving row's target)
    dual -= np.outer(q, q @ Yr)
    out = blas.dsyr(-1.0, q, a=Kinv, overwrite_a=True)
    assert out is Kinv, "the BLAS update must work in place"
    # row and column s are zero in exact arithmetic: make them so
    Kinv[s, :] = 0.0
    Kinv[:, s] = 0.0
    dual[s] = 0.0
    Yr[s] = y_new
    return True


def _kernel_matrix(W, *, length_scale, alpha):
    """``K + αI`` of the rows ``W``, as a new Fortran-ordered array.

    The squared distances come from the Gram matrix of the centred rows ``z`` in units
    of the length scale, ``‖a − b‖² = ‖a‖² + ‖b‖² − 2aᵀb`` (one matrix product instead of
    an ``n×n×d`` difference array), clipped at 0, when that is accurate: its rounding
    error is about ``4ε·max‖z‖²``, so it is used while ``max‖z‖² ≤ 1e4``; otherwise
    (rows far apart in length scales, or beyond the float64 range when squared) the
    distances are taken directly, in blocks. The diagonal is ``κ(x, x) + α = 1 + α``.
    """
    n = W.shape[0]
    # centred in units of a power of two 2^k ≥ max|W| (exact), then of the length scale
    k = math.frexp(float(np.abs(W).max(initial=0.0)))[1]
    Ws = np.ldexp(W, -k)
    with np.errstate(over="ignore", under="ignore"):
        Z = np.ldexp(Ws - Ws.mean(axis=0), k)
        if _SAFE_LENGTH_SCALE[0] <= length_scale <= _SAFE_LENGTH_SCALE[1]:
            factor = -1.0 / (2.0 * length_scale**2)  # applied to the squared distances
        else:
            Z /= length_scale
            factor = -0.5
        sq_norms = np.einsum("ij,ij->i", Z, Z)
    A = np.empty((n, n), order="F")
    if np.isfinite(sq_norms).all() and (
        sq_norms.max(initial=0.0) * -2.0 * factor <= _GRAM_MAX_SQ_NORM
    ):
        np.matmul(Z, Z.T, out=A)
        A *= -2.0
        A += sq_norms[:, None]
        A += sq_norms[None, :]
        np.maximum(A, 0.0, out=A)
        A *= factor
        np.exp(A, out=A)
    else:
        step = max(1, _MAX_DIFF_SIZE // max(1, n * W.shape[1]))
        for start in range(0, n, step):
            rows = W[start : start + step]
            A[start : start + step] = _gaussian_kernel(rows[:, None, :], W[None, :, :],
                                                       length_scale)
    A.flat[:: n + 1] = 1.0 + alpha
    return A


def _inverse_kernel(Xr, Yr, R, *, length_scale):
    """``(K + αW⁻¹)⁻¹`` and the dual coefficients of the slots in the system
    (``R = α/w`` finite), in the ring's layout, zero elsewhere (see
    :func:`_inverse_kernel_window`)."""
    idx = np.flatnonzero(np.isfinite(R))
    N = Xr.shape[0]
    if idx.size and idx[-1] == idx.size - 1 and np.all(R[idx] == R[idx[0]]):
        # the first slots (the window filling up, or a full window) with one α: the
        # computation without weights
        return _inverse_kernel_window(Xr, Yr, n_window=idx.size, length_scale=length_scale,
                                      alpha=float(R[idx[0]]))
    S = np.zeros((N, N), order="F")
    dual = np.zeros_like(Yr)
    if idx.size:
        inv, _ = _inverse_kernel_window(Xr[idx], Yr[idx], n_window=idx.size,
                                        length_scale=length_scale, alpha=R[idx])
        S[np.ix_(idx, idx)] = np.triu(inv) + np.triu(inv, 1).T
        for j in range(Yr.shape[1]):
            dual[:, j] = blas.dsymv(1.0, S, np.where(np.isfinite(R), Yr[:, j], 0.0))
    return S, dual


def _inverse_kernel_window(Xr, Yr, *, n_window, length_scale, alpha):
    """``(K + αI)⁻¹`` and ``(K + αI)⁻¹ y`` of the window held in the ring, from scratch.

    Returns the inverse in the ring's layout (Fortran order, upper triangle, zero rows and
    columns for the empty slots — the last ones while the window fills) and the dual
    coefficients. Cholesky (``dpotrf``, ``dpotri``); if rounding makes ``K + αI``
    numerically indefinite (``α`` near the rounding level of ``K``), its symmetric
    eigendecomposition with the eigenvalues held at ``α`` or above, their exact bound.
    """
    N, n = Xr.shape[0], n_window
    A = _kernel_matrix(Xr[:n], length_scale=length_scale, alpha=alpha)
    c, info = lapack.dpotrf(A, lower=0, clean=0, overwrite_a=True)
    if info == 0:
        inv, info = lapack.dpotri(c, lower=0, overwrite_c=True)
    if info != 0:
        # K + αI rounded to indefinite: eigendecomposition, eigenvalues held at ≥ α
        # (≥ min α/w_i with weights)
        w, V = np.linalg.eigh(_kernel_matrix(Xr[:n], length_scale=length_scale, alpha=alpha))
        inv = np.asfortranarray((V / np.maximum(w, np.min(alpha))) @ V.T)
    if n == N:
        S = inv
    else:
        S = np.zeros((N, N), order="F")
        S[:n, :n] = inv
    dual = np.zeros_like(Yr)
    for j in range(Yr.shape[1]):
        dual[:, j] = blas.dsymv(1.0, S, Yr[:, j])
    return S, dual
