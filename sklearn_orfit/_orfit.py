"""Orthogonal recursive fitting (ORFit, SPEC §3): one-pass learning of a linear model.

Notation (row convention, as stored): a batch ``X_b`` (``n×p``) with targets ``Y_b``
(``n×c``); weights ``W`` (``p×c``); memory ``M = Uᵀ`` (``k×p``, orthonormal rows) with
singular values ``Σ`` (``k``). In the paper's column convention ``G = X_bᵀ``.

One step (``_orfit_step``)::

    R  = X_b W − Y_b                         residual of the batch before the step
    C  = X_b Mᵀ,   X̃ = X_b − C M             projection out of the memory  (G̃ = X̃ᵀ)
    X̃  = V S Qᵀ                               thin SVD; rank r by a relative cut-off
    W ← W − Q S⁻¹ Vᵀ R                       = W − G̃ (GᵀG̃)⁺ R, because GᵀG̃ = G̃ᵀG̃

    invariants:  M ΔW = 0                     (predictions on the memory's span kept)
                 X_b W_new = Y_b − (I − V Vᵀ) R   (= Y_b unless the batch is spanned)

Memory update, ``"pca"`` (sequential Karhunen–Loève)::

    K  = [[Σ, Cᵀ], [0, S Vᵀ]]                ((k+r)×(k+n));  S Vᵀ = G_orthᵀ G
    K  = Ũ Σ̃ Ṽᵀ,   M ← (Ũᵀ [M; Qᵀ])[:m],   Σ ← Σ̃[:m]

    invariant (no truncation):  Mᵀ diag(Σ)² M = X_pastᵀ X_past

``"latest"`` and ``"random"`` instead append ``Qᵀ`` to ``M`` and keep ``m`` rows.
"""

import warnings
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, _fit_context
from sklearn.utils import check_random_state
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted, validate_data

from ._stream import LinearPredictMixin, OneRowPredictMixin
from ._validation import check_one_row, check_one_target

__all__ = ["ORFitRegressor", "SpannedBatchWarning"]

_EPS = np.finfo(np.float64).eps
# Re-project a row when the first projection removed more than 1 − 1/√2 of its norm
# ("twice is enough", Kahan–Parlett): then X̃ is orthogonal to M to working precision.
_REORTH = 1.0 / np.sqrt(2.0)


class SpannedBatchWarning(UserWarning):
    """A batch lies (partly) in the span of the memory and could not be fitted.

    Raised by :class:`ORFitRegressor` when fitting the new rows would require changing
    predictions on the remembered directions (rows repeated with a different label, or
    more rows than features). The step then is the pseudo-inverse (least-squares) step:
    it keeps every prediction on the memory's span and leaves the rest of the batch's
    residual in place.
    """


class ORFitRegressor(OneRowPredictMixin, LinearPredictMixin, RegressorMixin, BaseEstimator):
    """One-pass linear regression by orthogonal recursive fitting (ORFit).

    Learns ``f(x) = xᵀW`` from a stream. Each batch (a single row is a batch of one) is
    fitted exactly in one step, along the part of its rows orthogonal to a memory of
    past input directions, so predictions on the remembered directions do not change::

        G = X_bᵀ,   G̃ = G − U(UᵀG),   W ← W − G̃ (GᵀG̃)⁺ (X_b W − Y_b)

    With unlimited memory and linearly independent rows, after rows ``1..K`` the weights
    are the minimum-distance interpolant ``argmin ‖W − W₀‖ s.t. X W = Y`` — the point
    that multi-pass SGD from ``W₀`` converges to — and every past row keeps its label
    (no forgetting). With ``memory_size=m`` the memory is the top-``m`` incremental PCA
    of the past rows (the paper's method), or the ``m`` latest / ``m`` random stored
    directions (the paper's ablations); ``memory_size=0`` is One-step SGD.

    Parameters
    ----------
    memory_size : int or None, default=None
        Maximum number ``m`` of stored directions. ``None`` keeps every direction (exact
        ORFit); ``0`` keeps none (One-step SGD).
    memory_policy : {"pca", "latest", "random"}, default="pca"
        How the memory is reduced to ``m`` directions.

        * ``"pca"`` — incremental PCA of the past rows (sequential Karhunen–Loève): the
          memory is rotated to the left singular vectors of ``[U Σ, X_bᵀ]`` and the top
          ``m`` are kept. When nothing has been truncated yet, ``components_`` are the
          right singular vectors of all past rows and ``singular_values_`` their
          singular values.
        * ``"latest"`` — the ``m`` most recently added directions.
        * ``"random"`` — ``m`` directions drawn uniformly without replacement from the
          current memory and the new ones, with ``random_state``.

        With ``memory_size=None`` the three policies store the same span, so they give
        the same coefficients up to rounding; only the basis differs.
    batch_size : int or None, default=1
        Rows per step in :meth:`fit` (``1`` is the per-datapoint algorithm; ``None``
        learns all of ``X`` as one batch). :meth:`partial_fit` always learns the rows of
        one call as one batch, and :meth:`prequential_predict` one row at a time.
    coef_init : array-like of shape (n_features,) or (n_features, n_targets), default=None
        The initial weights ``W₀`` used when a stream starts (by :meth:`fit` or the first
        :meth:`partial_fit`). ``None`` starts from zero, so the interpolant is the
        minimum-norm one.
    rtol : float or None, default=None
        Relative cut-off: a new direction whose singular value in ``X̃`` is at most
        ``rtol`` times the largest row norm of the batch counts as already spanned.
        ``None`` uses ``eps · max(n_features, k + n)`` (``k`` stored directions, ``n``
        rows), the cut-off of :func:`numpy.linalg.lstsq`.
    random_state : int, RandomState instance or None, default=None
        Seeds the ``"random"`` memory policy (unused otherwise). An integer makes
        :meth:`fit` reproducible.

    Attributes
    ----------
    coef_ : ndarray of shape (n_features,) or (n_features, n_targets)
        The weights ``W`` (1-D when ``y`` was 1-D).
    components_ : ndarray of shape (n_components, n_features)
        The memory: orthonormal rows spanning the remembered input directions, i.e.
        ``Uᵀ`` in the paper's notation (scikit-learn's convention, as in
        :class:`~sklearn.decomposition.IncrementalPCA`). ``n_components ≤ memory_size``.
        For ``"pca"`` ordered by decreasing singular value; for ``"latest"`` and
        ``"random"`` in the order they were added.
    singular_values_ : ndarray of shape (n_components,)
        For ``"pca"``, the singular values of the incremental PCA (exact singular values
        of all past rows as long as nothing was truncated). For ``"latest"`` and
        ``"random"``, the norm of each direction's new part ``‖x̃‖`` when it was added
        (the diagonal of a Gram–Schmidt QR factor).
    n_features_in_ : int
        Number of features ``p``.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the features, when ``X`` had string column names.
    n_samples_seen_ : int
        Rows learned since the stream started (reset by :meth:`fit`).

    See Also
    --------
    RandomFourierFeatures : A feature map to put in front of it.
    QREWRLSRegressor : Windowed minimum-norm least squares (forgets by a window).
    prequential_predict : Predict-then-update over a stream.

    Notes
    -----
    Cost per step for a batch of ``n`` rows with ``k`` stored directions: the projection
    ``O(p·k·n)`` (doubled when re-projection is needed), the thin SVD of ``X̃``
    ``O(p·n²)``, the weight update ``O(p·n·c)``; the ``"pca"`` memory update adds the
    SVD of the small ``(k+r)×(k+n)`` matrix ``O((k+n)³)`` and one ``(m×(k+r))`` by
    ``((k+r)×p)`` matrix product, ``O((m+n)²·p)`` in all, as in the paper.
    ``"latest"`` and ``"random"`` copy the kept rows, ``O(m·p)``. With
    ``memory_size=None`` and ``"pca"``, ``k`` grows with the stream and so does the
    cost; ``"latest"`` then only appends.

    **Spanned batches.** When rows of a batch are already spanned by the memory (repeated
    rows, more rows than features, or rows dependent within the batch), ``GᵀG̃`` is
    singular and the step uses its pseudo-inverse: the batch is fitted on its new
    directions, the predictions on the memory's span are kept, and the remaining
    residual ``(I − VVᵀ)R`` is left. If that residual is not negligible
    (above ``√eps`` of the scale of ``Y_b`` and the predictions) a
    :class:`SpannedBatchWarning` is issued, once per call. Rows consistent with what is
    remembered (a row repeated with its label) produce no warning and no change. In the
    underparameterised regime the unlimited memory eventually spans every direction and
    the model stops changing; a bounded memory keeps learning (and forgetting).

    **Intercept.** There is none: the model is ``f(x) = xᵀW``, as in the paper. Centre
    ``y`` or append a constant column to ``X``; the constant's weight is then learned like
    any other (and counts in the minimum-norm objective).

    Computations are in float64 (float32 input is converted): the memory must stay
    orthonormal to working precision for the no-forgetting guarantee. Bounded memories
    forget by design; which predictions are kept is not guaranteed beyond the span of
    ``components_``.

    :meth:`predict_one` and :meth:`learn_one` are the single-row path: they skip
    scikit-learn's input validation (only shape, dtype and finiteness are checked).

    References
    ----------
    Y. Min, K. Ahn and N. Azizan, "One-Pass Learning via Bridging Orthogonal Gradient
    Descent and Recursive Least-Squares" (ORFit), IEEE CDC 2022.
    A. Levy and M. Lindenbaum, "Sequential Karhunen–Loeve basis extraction and its
    application to images", IEEE Trans. Image Processing, 2000.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import ORFitRegressor, prequential_predict
    >>> rng = np.random.default_rng(0)
    >>> X, y = rng.normal(size=(20, 100)), rng.normal(size=20)
    >>> reg = ORFitRegressor().fit(X, y)              # one pass, one row at a time
    >>> float(np.abs(reg.predict(X) - y).max()) < 1e-10  # every past row is kept
    True
    >>> w_min_norm = np.linalg.lstsq(X, y, rcond=None)[0]
    >>> bool(np.allclose(reg.coef_, w_min_norm, rtol=1e-10, atol=0))
    True
    >>> reg.components_.shape, reg.singular_values_.shape
    ((20, 100), (20,))
    >>> small = ORFitRegressor(memory_size=5).fit(X, y)   # incremental-PCA memory
    >>> small.components_.shape
    (5, 100)
    >>> y_pred = prequential_predict(ORFitRegressor(), X, y)   # predict, then learn
    >>> y_pred.shape
    (20,)
    """

    _parameter_constraints: dict = {
        "memory_size": [Interval(Integral, 0, None, closed="left"), None],
        "memory_policy": [StrOptions({"pca", "latest", "random"})],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "coef_init": ["array-like", None],
        "rtol": [Interval(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        *,
        memory_size=None,
        memory_policy="pca",
        batch_size=1,
        coef_init=None,
        rtol=None,
        random_state=None,
    ):
        self.memory_size = memory_size
        self.memory_policy = memory_policy
        self.batch_size = batch_size
        self.coef_init = coef_init
        self.rtol = rtol
        self.random_state = random_state

    # ------------------------------------------------------------------ public API
    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Reset, then learn the rows of ``X`` in order, ``batch_size`` rows per step.

        Equivalent to a fresh estimator receiving one :meth:`partial_fit` call per
        consecutive chunk of ``batch_size`` rows.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : ORFitRegressor
            The fitted estimator.
        """
        return self._learn(X, y, reset=True, batch_size=self.batch_size, predict=False)[0]

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Learn the rows of ``X`` as one batch, fitted exactly in one step.

        The input is validated before any state changes: a rejected call (NaN, wrong
        number of features or targets) raises ``ValueError`` and leaves the estimator
        as it was.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The batch.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Its targets.

        Returns
        -------
        self : ORFitRegressor
            The updated estimator.
        """
        return self._learn(X, y, reset=False, batch_size=None, predict=False)[0]

    @_fit_context(prefer_skip_nested_validation=True)
    def prequential_predict(self, X, y):
        """Predict each row from the state before it, then learn it (one row per step).

        Gives the same predictions and final state as calling :meth:`predict` and
        :meth:`partial_fit` row by row, with the input validated once.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``y_pred[i]`` from the weights after rows ``< i`` (``x·W₀``, i.e. 0 by
            default, for the first row of a stream).
        """
        return self._learn(X, y, reset=False, batch_size=1, predict=True)[1]

    def learn_one(self, x, y):
        """Learn one row with only cheap checks (shape, dtype, finiteness).

        Equivalent to ``partial_fit(x[None], [y])`` without scikit-learn's per-call
        validation. The first row of a stream must go through :meth:`fit` or
        :meth:`partial_fit` (which fix ``n_features_in_`` and the target shape).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.
        y : float or array-like of shape (n_targets,)
            Its target(s).

        Returns
        -------
        self : ORFitRegressor
            The updated estimator.
        """
        check_is_fitted(self)
        x = check_one_row(x, n_features=self.n_features_in_)
        yv = check_one_target(y, n_targets=self._n_targets)
        _, unfitted = self._step(x[None, :], yv[None, :])
        if unfitted:
            _warn_spanned(1, 1)
        return self

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A one-pass interpolating learner: on data with more rows than features (the
        # generic test data) the unlimited memory fills up and learning stops.
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ pickling
    def __getstate__(self):
        # a copy: object.__getstate__ may return the instance's own __dict__
        state = dict(super().__getstate__())
        # the buffer's spare rows are scratch; components_ holds the rows that matter
        state.pop("_mem", None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "components_" in self.__dict__:
            k = self.components_.shape[0]
            self._mem = _grow(self.components_, k, k + 1)
            self.components_ = self._mem[:k]

    # ------------------------------------------------------------------ state
    def _reset(self):
        for name in [k for k in vars(self) if k.endswith("_") and not k.startswith("__")]:
            delattr(self, name)
        for name in ("_mem", "_rng", "_n_targets"):
            self.__dict__.pop(name, None)

    def _init_state(self, n_features, n_targets, one_d):
        shape = (n_features,) if one_d else (n_features, n_targets)
        if self.coef_init is None:
            coef = np.zeros(shape)
        else:
            try:
                coef = np.array(self.coef_init, dtype=np.float64, order="C")
            except (TypeError, ValueError) as exc:
                raise ValueError(f"coef_init must be numeric; got {exc}") from None
            if coef.shape != shape:
                raise ValueError(
                    f"coef_init has shape {coef.shape} but this stream needs {shape} "
                    f"({n_features} features, "
                    f"{'1-D y' if one_d else f'{n_targets} targets'})."
                )
            if not np.isfinite(coef).all():
                raise ValueError("coef_init contains NaN or infinity.")
        self.coef_ = coef
        self._n_targets = None if one_d else n_targets
        self._mem = np.empty((1, n_features))  # memory rows _mem[:k], then spare rows
        self.components_ = self._mem[:0]
        self.singular_values_ = np.zeros(0)
        self._rng = check_random_state(self.random_state)
        self.n_samples_seen_ = 0

    def _learn(self, X, y, *, reset, batch_size, predict):
        """Validate everything, then learn; on any error restore the previous state."""
        saved = dict(self.__dict__)
        try:
            if reset:
                self._reset()
            first_call = not hasattr(self, "coef_")
            X, y = validate_data(
                self,
                X,
                y,
                reset=first_call,
                dtype=np.float64,
                order="C",
                multi_output=True,
                y_numeric=True,
            )
            Y = y.reshape(y.shape[0], -1)
            if first_call:
                self._init_state(X.shape[1], Y.shape[1], y.ndim == 1)
            elif (y.ndim == 1) != (self._n_targets is None) or (
                y.ndim == 2 and Y.shape[1] != self._n_targets
            ):
                expected = "1-D y" if self._n_targets is None else f"{self._n_targets} targets"
                raise ValueError(f"y has shape {y.shape} but this stream has {expected}.")

            n = X.shape[0]
            step = n if batch_size is None else batch_size
            Y_pred = np.empty_like(Y) if predict else None
            n_unfitted = 0
            for start in range(0, n, step):
                stop = min(start + step, n)
                P, unfitted = self._step(X[start:stop], Y[start:stop])
                if predict:
                    Y_pred[start:stop] = P
                n_unfitted += (stop - start) if unfitted else 0
        except BaseException:
            self.__dict__.clear()
            self.__dict__.update(saved)
            raise
        if n_unfitted:
            _warn_spanned(n_unfitted, n)
        if predict and y.ndim == 1:
            Y_pred = Y_pred[:, 0]
        return self, Y_pred

    # ------------------------------------------------------------------ the step
    def _step(self, Xb, Yb):
        """Learn one batch; commit the new state only at the end.

        Returns the predictions ``X_b W`` made before the step and whether part of the
        batch's residual had to be left (a spanned batch with disagreeing labels).
        """
        n, p = Xb.shape
        k = self.components_.shape[0]
        M = self._mem[:k]
        W = self.coef_.reshape(p, -1)
        m_max = self.memory_size

        # R = X_b W − Y_b
        P = Xb @ W
        R = P - Yb
        # X̃ = X_b − (X_b Mᵀ) M, C = X_b Mᵀ   (X̃ M ᵀ = 0 to working precision)
        Xt, C = _project_out(Xb, M)
        rtol = self.rtol if self.rtol is not None else _EPS * max(p, k + n)
        row_norm = np.sqrt(np.einsum("ij,ij->i", Xb, Xb).max())
        # X̃ = V S Qᵀ, keeping the r singular values above rtol · max ‖x_i‖
        V, S, Qt = _new_directions(Xt, tol=rtol * row_norm)

        # W ← W − Q S⁻¹ Vᵀ R   (= W − G̃ (GᵀG̃)⁺ R: the pseudo-inverse step; M ΔW = 0)
        VtR = V.T @ R
        W_new = W - Qt.T @ (VtR / S[:, None])
        # residual left on the batch: (I − V Vᵀ) R, zero unless the batch is spanned
        left = R - V @ VtR
        scale = np.linalg.norm(Yb) + np.linalg.norm(P)
        unfitted = bool(np.linalg.norm(left) > np.sqrt(_EPS) * scale)

        r = S.shape[0]
        if m_max == 0 or r == 0 and (k == 0 or self.memory_policy != "pca"):
            # nothing to store (a smaller memory_size set mid-stream truncates here)
            n_mem = k if m_max is None else min(k, m_max)
            mem, sigma = self._mem, self.singular_values_[:n_mem]
        else:
            mem = self._mem
            if mem.shape[0] < k + r:
                cap = k + r if m_max is not None else max(k + r, 2 * mem.shape[0])
                mem = _grow(mem, k, cap)
            # stage the new directions in the spare rows: mem[:k+r] = [M; Qᵀ]
            mem[k : k + r] = Qt
            if self.memory_policy == "pca":
                mem, n_mem, sigma = _pca_update(
                    mem, k=k, sigma=self.singular_values_, C=C, S=S, V=V, m_max=m_max
                )
            else:
                mem, n_mem, sigma = self._keep(mem, k=k, S=S, m_max=m_max)

        # commit
        self.coef_ = W_new.reshape(self.coef_.shape)
        self._mem = mem
        self.components_ = mem[:n_mem]
        self.singular_values_ = sigma
        self.n_samples_seen_ += n
        return P, unfitted

    def _keep(self, mem, *, k, S, m_max):
        """``"latest"`` / ``"random"``: keep ``m`` of the rows ``mem[:k+r]``."""
        r = S.shape[0]
        total = k + r
        sigma = np.concatenate([self.singular_values_, S])
        if m_max is None or total <= m_max:
            # only appended: rows < k are untouched, so earlier views stay valid
            return mem, total, sigma
        if self.memory_policy == "latest":
            # newest first; within the batch, the larger singular values (listed first)
            keep = np.arange(k, k + m_max) if r >= m_max else np.arange(total - m_max, total)
        else:
            keep = np.sort(self._rng.choice(total, size=m_max, replace=False))
        new = np.empty_like(mem)
        np.take(mem, keep, axis=0, out=new[:m_max])
        return new, m_max, sigma[keep]


# ---------------------------------------------------------------------- helpers
def _project_out(X, M):
    """Return ``X̃ = X − (X Mᵀ) M`` and ``C = X Mᵀ`` for orthonormal rows ``M``.

    Classical Gram–Schmidt, repeated once for rows that lost more than ``1 − 1/√2`` of
    their norm, so that ``X̃ Mᵀ`` is zero to working precision (CGS2).
    """
    if M.shape[0] == 0:
        return X, np.zeros((X.shape[0], 0))
    C = X @ M.T
    Xt = X - C @ M
    before = np.einsum("ij,ij->i", X, X)
    after = np.einsum("ij,ij->i", Xt, Xt)
    if np.any(after < (_REORTH**2) * before):
        C2 = Xt @ M.T
        Xt -= C2 @ M
        C += C2
    return Xt, C


def _new_directions(Xt, *, tol):
    """Thin SVD ``X̃ = V S Qᵀ`` restricted to singular values above ``tol``."""
    n, p = Xt.shape
    if n == 1:
        s = float(np.sqrt(Xt[0] @ Xt[0]))
        if s > tol:
            return np.ones((1, 1)), np.array([s]), Xt / s
        return np.zeros((1, 0)), np.zeros(0), np.zeros((0, p))
    V, S, Qt = np.linalg.svd(Xt, full_matrices=False)
    r = int(np.count_nonzero(S > tol))
    return V[:, :r], S[:r], Qt[:r]


def _pca_update(mem, *, k, sigma, C, S, V, m_max):
    """Sequential Karhunen–Loève update of the memory rows ``mem[:k]``.

    ``mem[k:k+r]`` must hold the new orthonormal directions ``Qᵀ``. Returns a new buffer
    whose first rows are the top ``m`` left singular vectors (as rows) of
    ``[Mᵀ diag(Σ), X_bᵀ]``, their number and singular values.
    """
    r = S.shape[0]
    n = C.shape[0]
    # K = [[Σ, Cᵀ], [0, S Vᵀ]]: [Mᵀ Q] K = [Mᵀ Σ, X_bᵀ] (up to the dropped rank)
    K = np.zeros((k + r, k + n))
    K[np.arange(k), np.arange(k)] = sigma
    K[:k, k:] = C.T
    K[k:, k:] = S[:, None] * V.T
    Ut, sig, _ = np.linalg.svd(K, full_matrices=False)
    kk = k + r if m_max is None else min(k + r, m_max)
    # M ← (Ũᵀ [M; Qᵀ])[:m]: one (m × (k+r)) by ((k+r) × p) product into a fresh buffer
    new = np.empty_like(mem)
    np.matmul(np.ascontiguousarray(Ut[:, :kk].T), mem[: k + r], out=new[:kk])
    return new, kk, sig[:kk]


def _grow(rows, k, capacity):
    """A buffer of ``capacity`` rows whose first ``k`` rows are ``rows[:k]``."""
    new = np.empty((capacity, rows.shape[1]))
    new[:k] = rows[:k]
    return new


def _warn_spanned(n_unfitted, n):
    warnings.warn(
        f"{n_unfitted} of the {n} rows learned in this call are spanned by the memory "
        "with labels the model does not predict: fitting them would change predictions "
        "on remembered data, so the pseudo-inverse step kept those and left a residual "
        "on the new rows.",
        SpannedBatchWarning,
        stacklevel=3,
    )
