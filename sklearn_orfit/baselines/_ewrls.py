"""Classic covariance-form exponentially weighted RLS, the unstable reference (ABO paper)."""

import math
from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from .._compat import Interval
from .._docstrings import fill_doc
from .._streaming._base import (
    VALIDATION_ATTRIBUTES, LinearPredictMixin, StreamingRegressorMixin, clear_fitted_state,
)

__all__ = ["EWRLSRegressor"]


@fill_doc()
class EWRLSRegressor(LinearPredictMixin, StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Exponentially weighted recursive least squares in covariance (``P``-matrix) form.

    The textbook RLS filter. It carries ``P``, the inverse of the regularised,
    exponentially weighted Gram matrix, and updates it with the Sherman–Morrison formula,
    one row at a time. In exact arithmetic, after rows ``1..t``::

        P_t = (Σ_i λ^(t−i) z_i z_iᵀ + λ^t δ I)⁻¹
        β_t = P_t Σ_i λ^(t−i) z_i y_i

    i.e. ridge regression on the whole exponentially weighted history, with a ridge
    ``λ^t δ`` that fades away. With per-row weights ``w_i`` (``sample_weight``) the sums
    are ``Σ_i λ^(t−i) w_i z_i z_iᵀ`` and ``Σ_i λ^(t−i) w_i z_i y_i``.

    This estimator is the reference for what goes wrong without orthogonal updates: it
    is implemented exactly as printed in the textbooks, with no symmetrisation, no
    clipping and no reset of ``P``. When the inputs do not excite every direction
    (``D`` larger than the effective memory, or inputs in a subspace) and ``λ < 1``, the
    unexcited part of ``P`` grows like ``λ^(−t)`` until rounding errors dominate and,
    eventually, overflow; see ``benchmarks/bench_stability.py``. The overflow is not
    hidden either: the call in which ``P``, the coefficients or a prediction stop being
    finite raises ``ValueError`` and leaves the estimator at its last finite state. Use
    :class:`QREWRLSRegressor` for a numerically stable model.

    Parameters
    ----------
    forgetting_factor : float, default=1.0
        ``λ`` in ``(0, 1]``: row ``i`` has weight ``λ^(t−i)`` after row ``t``.
    delta : float, default=1e-2
        ``δ > 0``: ``P`` starts at ``δ⁻¹ I`` (the initial ridge, forgotten like the data).
        ``1/δ`` must be finite (``δ ≳ 5.6e-309``), or the stream start raises
        ``ValueError``.

    Attributes
    ----------
    {linear_coef}
    inverse_gram_ : ndarray of shape (n_features, n_features)
        ``P`` as carried by the recursion (equal to the inverse above in exact arithmetic;
        not symmetrised).
    n_features_in_ : int
        Number of features ``D``.
    {feature_names_in}
    {samples_seen}

    See Also
    --------
    QREWRLSRegressor : Sliding-window, exponentially weighted least squares, solved
        with orthogonal factorisations.
    QRDRLSRegressor : Windowed ridge least squares with a QR-updated factor.

    Notes
    -----
    Per row: two ``D×D`` matrix-vector products and one rank-one update of ``P``, i.e.
    ``O(D²)`` time and ``O(D²)`` memory, plus a copy of ``P`` per call (the state is
    updated on a copy, so a call that fails leaves the estimator unchanged). There is no
    intercept: centre ``y`` or append a constant feature. The recursion is sequential,
    so :meth:`prequential_predict` is a loop over rows (validation is done once per call).

    The form works with squares of the rows (``zᵀPz``): rows of norm beyond about
    ``1e154/√‖P‖`` overflow it, which raises ``ValueError`` (it used to drop the row
    silently, with a zero gain). ``forgetting_factor`` and ``delta`` are those the stream
    started with: changing one by ``set_params`` before the next :meth:`partial_fit` or
    :meth:`prequential_predict` raises ``ValueError`` (call :meth:`fit` to start a stream
    with the new values).

    ``sample_weight`` (``w_i >= 0``, in :meth:`fit`, :meth:`partial_fit` and
    :meth:`prequential_predict`) scales row ``i`` and its target by ``√w_i`` before the
    recursion, which then minimises ``Σ λ^(t−i) w_i (y_i − z_iᵀβ)² + λ^t δ‖β‖²``; a
    zero-weight row contributes nothing but still ages the others by ``λ``. The
    prequential prediction of a row is that of the unweighted row. Integer weights
    equal repeated rows only when ``λ = 1`` (with ``λ < 1`` the copies of a row would
    get different ages).

    References
    ----------
    S. Haykin, *Adaptive Filter Theory*, 4th ed., Prentice Hall, 2002, ch. 9 (the
    exponentially weighted RLS algorithm). ABO paper, Appendix A (why the covariance
    form fails in the overparameterised regime).

    Examples
    --------
    >>> from sklearn_orfit import EWRLSRegressor
    >>> reg = EWRLSRegressor(forgetting_factor=0.99)
    {linear_example}
    """

    _parameter_constraints: dict = {
        "forgetting_factor": [Interval(Real, 0, 1, closed="right")],
        "delta": [Interval(Real, 0, None, closed="neither")],
    }

    def __init__(self, *, forgetting_factor=1.0, delta=1e-2):
        self.forgetting_factor = forgetting_factor
        self.delta = delta

    def _expected_failed_checks(self):
        # without forgetting the model is ridge regression on the whole history (the
        # ridge λ^t δ is constant): integer weights equal repeated rows, in any order
        if self.forgetting_factor == 1.0:
            return {}
        return super()._expected_failed_checks()

    # ------------------------------------------------------------------ internals
    def _init_state(self, n_features, n_targets, y_ndim):
        clear_fitted_state(self, keep=VALIDATION_ATTRIBUTES)
        # P_0 = δ⁻¹ I
        self.inverse_gram_ = np.eye(n_features) / self.delta
        self.coef_ = np.zeros(n_features if y_ndim == 1 else (n_features, n_targets))
        self.n_samples_seen_ = 0

    _stream_params = ("forgetting_factor", "delta")

    def _check_new_stream(self):
        if not math.isfinite(1.0 / self.delta):
            raise ValueError(
                f"delta={self.delta!r} is too small: P starts at δ⁻¹I, and "
                "1/delta overflows float64. Use delta >= 1e-300."
            )

    def _learn(self, X, Y, *, predict):
        lam = float(self.forgetting_factor)
        P = self.inverse_gram_.copy()
        beta = self.coef_.reshape(X.shape[1], -1).copy()
        Y_pred = np.empty_like(Y) if predict else None
        denominator = lam
        # an overflow is detected below and reported as an error (the state is a copy)
        with np.errstate(over="ignore", invalid="ignore"):
            for t in range(X.shape[0]):
                z = X[t]
                if predict:
                    Y_pred[t] = z @ beta
                Pz = P @ z
                zP = z @ P  # zᵀP, used as printed: (Pz)ᵀ only while P stays symmetric
                # k = P z / (λ + zᵀ P z)                     (gain)
                denominator = lam + z @ Pz
                if not math.isfinite(denominator):
                    break  # reported below (a gain of 0 would skip the row silently)
                k = Pz / denominator
                # β ← β + k (y − zᵀβ)                         (a priori error)
                beta += np.outer(k, Y[t] - z @ beta)
                # P ← (P − k zᵀP) / λ                          (Sherman–Morrison)
                # invariant (exact arithmetic): P = (Σ λ^(t−i) z_i z_iᵀ + λ^t δ I)⁻¹
                P -= np.outer(k, zP)
                if lam != 1.0:
                    P /= lam
        if not (math.isfinite(denominator) and np.isfinite(P).all()
                and np.isfinite(beta).all()
                and (Y_pred is None or np.isfinite(Y_pred).all())):
            raise ValueError(
                "the covariance-form recursion overflowed (zᵀPz, P or the coefficients "
                "are not finite): the rows are too large for the squares this form works "
                "with, or P has grown like λ^(−t)/δ along directions the rows do not "
                "excite (the instability of this form, see the Notes). Rescale X, or use "
                "QREWRLSRegressor; the stream is left at its last finite state."
            )
        # commit, in one statement
        self.__dict__.update(
            inverse_gram_=P,
            coef_=beta.reshape(self.coef_.shape),
            n_samples_seen_=self.n_samples_seen_ + X.shape[0],
        )
        return Y_pred
