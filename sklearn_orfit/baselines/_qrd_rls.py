"""Windowed QR-decomposition RLS on the raw inputs (QRD-RLS), a baseline of the ABO paper."""

import functools
import math
from numbers import Integral, Real

import numpy as np
from scipy.linalg import qr, solve_triangular
from scipy.linalg.blas import drot
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils.validation import check_is_fitted

from .._compat import Interval, _threadpool_controller_decorator
from .._docstrings import fill_doc
from .._streaming._base import (
    VALIDATION_ATTRIBUTES, LinearPredictMixin, StreamingRegressorMixin, clear_fitted_state,
    on_rollback,
)
from ..abo._window import RingBuffer

__all__ = ["QRDRLSRegressor"]


@fill_doc()
class QRDRLSRegressor(LinearPredictMixin, StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Sliding-window ridge least squares with a QR-updated triangular factor (QRD-RLS).

    After each row ``t`` the coefficients solve the ridge problem on the window of the
    last ``window_size`` rows, with weights ``w_i = λ^(t−i)``::

        β_t = argmin_β Σ_i w_i (y_i − x_iᵀβ)² + α‖β‖²
            = lstsq([W½ X_t; √α I], [W½ Y_t; 0])

    The state is the upper triangular factor ``R`` of that stacked matrix and the rotated
    targets ``p`` (``RᵀR = Σ_i w_i x_i x_iᵀ + αI``, ``Rᵀp = Σ_i w_i x_i y_i``). A new row
    is rotated into ``[R p]`` with Givens rotations, the oldest row is rotated out with
    the LINPACK downdating algorithm, and ``β = R⁻¹p``. The Gram matrix is never formed,
    so the factor carries ``κ(R)``, not ``κ(R)²``.

    This is the linear, raw-input baseline of the ABO paper (no feature map).

    Parameters
    ----------
    {window_size}
    alpha : float, default=1e-2
        Ridge penalty ``α > 0`` (constant: it is not forgotten). It keeps every window's
        factor invertible, which the downdate needs. For the unregularised minimum-norm
        solution use :class:`QREWRLSRegressor`.
    {window_forgetting_factor}

    Attributes
    ----------
    {window_attributes}
    n_refactorizations_ : int
        Downdates that rounding made indefinite and that were replaced by a
        factorisation of the window from scratch, since the last :meth:`fit`.
    condition_number_ : float
        Condition number of the factor ``R`` (the square root of that of
        ``Σ_i w_i x_i x_iᵀ + αI``; computed on access).

    See Also
    --------
    QREWRLSRegressor : The same windowed problem on random Fourier features (ABO),
        minimum-norm when ``alpha=0``.
    EWRLSRegressor : Covariance-form RLS, without a window.

    Notes
    -----
    ``sample_weight`` (``w_i >= 0``, in :meth:`fit`, :meth:`partial_fit` and
    :meth:`prequential_predict`) multiplies each row's forgetting weight: the window's
    ridge solution minimises ``Σ_i λ^(t−i) w_i (y_i − x_iᵀβ)² + α‖β‖²``. The recursion is
    handed ``√w_i x_i`` and ``√w_i y_i`` (the window's raw rows are stored scaled); the
    prequential prediction of a row is that of the unweighted row. A zero-weight row
    takes its window slot but contributes nothing. Integer weights are not repeated
    rows for a sliding window (repeats take slots and push older rows out).

    Per row, with ``d`` features and ``c`` targets: ``d`` Givens rotations of rows of
    length ``≤ d + c`` for the new row, one triangular solve and ``d`` rotations for the
    oldest row, and one triangular solve for ``β``, i.e. ``O(d·(d + c))``. With
    ``λ < 1`` the constant ridge has to be topped up after the data are down-weighted
    (``λRᵀR + (1−λ)αI``), which costs one ``O(d³)`` QR of a ``2d × (d + c)`` matrix per
    row. The recursion is sequential, so :meth:`prequential_predict` is a loop over rows
    (validation is done once per call). There is no intercept: centre ``y`` or append a
    constant feature.

    The downdate is the one numerically delicate step: it computes
    ``ρ² = 1 − ‖R⁻ᵀx_o‖²`` for the leaving row ``x_o``, which is positive in exact
    arithmetic (``α > 0``) but can round to ``≤ 0`` when ``α`` is tiny and ``x_o`` alone
    carried a direction. That window is then factorised from scratch (counted in
    ``n_refactorizations_``).

    ``α`` is in the units of ``x²``: when it is below the rounding level of the window's
    Gram matrix (``α ≲ ε‖x‖²``) and the window does not excite every direction
    (repeated rows, fewer distinct rows than features), the ridge problem itself is
    ill-posed in float64 — :func:`numpy.linalg.lstsq` on ``[W½X; √αI]`` gives
    equally large coefficients — so keep ``α`` well above it. Coefficients or
    predictions beyond the float64 range raise ``ValueError`` and change nothing.
    ``window_size``, ``alpha`` and ``forgetting_factor`` are those the stream started
    with: changing one by ``set_params`` before the next :meth:`partial_fit` or
    :meth:`prequential_predict` raises ``ValueError`` (call :meth:`fit` to start a
    stream with the new values).

    References
    ----------
    C.-T. Pan and R. J. Plemmons, "Least squares modifications with inverse
    factorizations: parallel implications", *J. Comput. Appl. Math.* 27 (1989) 109–127.
    M. A. Saunders, "Large-scale linear programming using the Cholesky factorization",
    Stanford report STAN-CS-72-252 (1972), and J. J. Dongarra et al., *LINPACK Users'
    Guide*, SIAM 1979, ch. 10 (``dchdd``): the downdating algorithm used here.

    Examples
    --------
    >>> from sklearn_orfit import QRDRLSRegressor
    >>> reg = QRDRLSRegressor(window_size=30)
    {linear_example}
    """

    _parameter_constraints: dict = {
        "window_size": [Interval(Integral, 1, None, closed="left")],
        "alpha": [Interval(Real, 0, None, closed="neither")],
        "forgetting_factor": [Interval(Real, 0, 1, closed="right")],
    }

    def __init__(self, window_size=20, *, alpha=1e-2, forgetting_factor=1.0):
        self.window_size = window_size
        self.alpha = alpha
        self.forgetting_factor = forgetting_factor

    # ------------------------------------------------------------------ public API
    @property
    def n_window_(self):
        check_is_fitted(self)
        return int(min(self.n_samples_seen_, self.window_size))

    @property
    def condition_number_(self):
        check_is_fitted(self)
        d = self.n_features_in_
        return float(np.linalg.cond(self._M[:, :d]))


    # ------------------------------------------------------------------ internals
    def _init_state(self, n_features, n_targets, y_ndim):
        clear_fitted_state(self, keep=VALIDATION_ATTRIBUTES)
        N, d = self.window_size, n_features
        # the window's raw rows and targets (as learned: √w-scaled), in the package's ring
        self._ring = RingBuffer(N, X=(d,), Y=(n_targets,))
        # M = [R | p] with RᵀR = αI, p = 0 for the empty window
        self._M = np.zeros((d, d + n_targets))
        self._M[:, :d] = np.sqrt(self.alpha) * np.eye(d)
        self.coef_ = np.zeros(d if y_ndim == 1 else (d, n_targets))
        self.n_samples_seen_ = 0
        self.n_refactorizations_ = 0

    _stream_params = ("window_size", "alpha", "forgetting_factor")

    @_threadpool_controller_decorator(limits=1, user_api="blas")
    def _learn(self, X, Y, *, predict):
        N, d = self.window_size, X.shape[1]
        lam, alpha = float(self.forgetting_factor), float(self.alpha)
        sqrt_w_oldest = math.sqrt(lam) ** N  # √(λ^N): the leaving row's weight, rooted
        M, n_seen, n_ref = self._M.copy(), self.n_samples_seen_, self.n_refactorizations_
        # the ring is written in place (a private copy if it maps a file): an undo record
        # of the slots this call overwrites puts it back if this call, or an enclosing
        # one after it, fails
        ring = self._ring.writable()
        undo = functools.partial(ring.restore, ring.checkpoint(X.shape[0]))
        on_rollback(undo)
        Y_pred = np.empty_like(Y) if predict else None
        try:
            # an overflow is detected below and reported as an error (M is a copy)
            with np.errstate(over="ignore", invalid="ignore"):
                for t in range(X.shape[0]):
                    if predict:
                        Y_pred[t] = X[t] @ _solve_factor(M, d)
                    if lam != 1.0:
                        # RᵀR ← λRᵀR + (1−λ)αI: forget the data, keep the ridge at α
                        M = _scale_keep_ridge(M, lam=lam, alpha=alpha)
                    # [R p] ← rotate the new row [xᵀ yᵀ] in
                    # invariant: RᵀR = Σ_{window + new} w_i x_i x_iᵀ + αI,  Rᵀp = Σ w_i x_i y_i
                    _givens_append(M, np.concatenate([X[t], Y[t]]), n_features=d)
                    ok = True
                    if ring.n == N:
                        # [R p] ← rotate the oldest row (weight λ^N, in slot pos) out
                        # invariant: the same sums over the window of the last N rows only
                        s = ring.pos
                        old = sqrt_w_oldest * np.concatenate([ring.X[s], ring.Y[s]])
                        ok = _linpack_downdate(M, old, n_features=d)
                    ring.push(X[t], Y[t])
                    n_seen += 1
                    if not ok:
                        # rounding made the downdate indefinite (ρ² ≤ 0): factorise the
                        # window from scratch instead
                        slots = ring.slots()
                        M = _factor_window(ring.X[slots], ring.Y[slots], lam=lam,
                                           alpha=alpha)
                        n_ref += 1
                coef = _solve_factor(M, d)
            if not (np.isfinite(coef).all() and (Y_pred is None or np.isfinite(Y_pred).all())):
                raise ValueError(
                    "the window's ridge solution overflowed (non-finite coefficients or "
                    "predictions): they exceed the float64 range; rescale X and y, e.g. "
                    "with RecursiveStandardScaler."
                )
        except BaseException:
            undo()
            raise
        self._M, self.n_samples_seen_, self.n_refactorizations_ = M, n_seen, n_ref
        self.coef_ = coef.reshape(self.coef_.shape)
        return Y_pred


def _solve_factor(M, n_features):
    """``β = R⁻¹p`` from ``M = [R | p]``."""
    return solve_triangular(M[:, :n_features], M[:, n_features:], lower=False)


def _givens_append(M, v, *, n_features):
    """Rotate the row ``v = [xᵀ yᵀ]`` into ``M = [R | p]`` in place.

    If ``[R p]`` is the triangular factor of ``[A B]``, the result is that of
    ``[A B; xᵀ yᵀ]``. ``v`` is overwritten.
    """
    for i in range(n_features):
        b = v[i]
        if b == 0.0:
            continue
        a = M[i, i]
        r = math.hypot(a, b)
        # [R_i; v] ← [[c, s], [−s, c]] [R_i; v] with c = a/r, s = b/r: zeroes v_i
        drot(M[i, i:], v[i:], a / r, b / r, overwrite_x=1, overwrite_y=1)


def _linpack_downdate(M, v, *, n_features):
    """Rotate the row ``v = [xᵀ yᵀ]`` out of ``M = [R | p]`` in place (LINPACK ``dchdd``).

    If ``[R p]`` is the triangular factor of ``[A B; xᵀ yᵀ]``, the result is that of
    ``[A B]``: ``R̃ᵀR̃ = RᵀR − xxᵀ`` and ``R̃ᵀp̃ = Rᵀp − xyᵀ``. Returns ``False``, leaving
    ``M`` untouched, when rounding makes ``RᵀR − xxᵀ`` indefinite.
    """
    d = n_features
    R, p = M[:, :d], M[:, d:]
    x, y = v[:d], v[d:]
    # Rᵀa = x,  ρ² = 1 − ‖a‖²  (> 0 iff RᵀR − xxᵀ is positive definite)
    a = solve_triangular(R, x, trans="T", lower=False)
    rho2 = 1.0 - a @ a
    if not rho2 > 0.0:
        return False
    rho = math.sqrt(rho2)
    # G [a; ρ] = e_{d+1} with rotations of rows (i, d+1), i = d..1. Applied to
    # [R p; 0 ζ] with ζ = (y − aᵀp)/ρ it gives [R̃ p̃; xᵀ yᵀ].
    w = np.zeros(M.shape[1])
    w[d:] = (y - a @ p) / rho
    for i in range(d - 1, -1, -1):
        r = math.hypot(rho, a[i])
        c, s = rho / r, a[i] / r
        # [R_i; w] ← [[c, −s], [s, c]] [R_i; w]: zeroes a_i into ρ
        drot(M[i, i:], w[i:], c, -s, overwrite_x=1, overwrite_y=1)
        rho = r
    return True


def _scale_keep_ridge(M, *, lam, alpha):
    """Factor of ``λ[A B] ; √((1−λ)α)[I 0]``: down-weight the data, keep the ridge at α."""
    d = M.shape[0]
    stacked = np.zeros((2 * d, M.shape[1]))
    stacked[:d] = math.sqrt(lam) * M
    stacked[d:, :d] = math.sqrt((1.0 - lam) * alpha) * np.eye(d)
    return _positive_diagonal(qr(stacked, mode="r", check_finite=False)[0][:d])


def _factor_window(X, Y, *, lam, alpha):
    """Factor ``[R p]`` of ``[W½X W½Y; √αI 0]`` for the window's rows ``X, Y`` (oldest
    first)."""
    n_window, d = X.shape
    sw = math.sqrt(lam) ** np.arange(n_window - 1, -1, -1)  # √w_i, oldest first
    stacked = np.zeros((n_window + d, d + Y.shape[1]))
    stacked[:n_window, :d] = X * sw[:, None]
    stacked[:n_window, d:] = Y * sw[:, None]
    stacked[n_window:, :d] = math.sqrt(alpha) * np.eye(d)
    return _positive_diagonal(qr(stacked, mode="r", check_finite=False)[0][:d])


def _positive_diagonal(M):
    """Flip the sign of the rows of ``[R p]`` whose diagonal entry is negative."""
    d = M.shape[0]
    sign = np.where(np.diagonal(M[:, :d]) < 0.0, -1.0, 1.0)
    return np.ascontiguousarray(M * sign[:, None])
