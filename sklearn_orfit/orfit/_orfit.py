"""Orthogonal recursive fitting (ORFit): one-pass learning of a linear model.

Reference: Min, Ahn and Azizan, "One-Pass Learning via Bridging Orthogonal Gradient
Descent and Recursive Least-Squares", CDC 2022 — §3 (Algorithms 1–4: the orthogonal step,
the incremental-PCA memory, batches) and §4.1 (cost); the user guide's ORFit chapter.

Notation (row convention, as stored): a batch ``X_b`` (``n×p``) with targets ``Y_b``
(``n×c``); weights ``W`` (``p×c``); memory basis ``B = Uᵀ`` (``k×p``, orthonormal rows);
``X_past`` the ``N`` rows learned so far. In the paper's column convention ``G = X_bᵀ``.

One step (``_step``)::

    R  = X_b W − Y_b                         residual of the batch before the step
    C  = X_b Bᵀ,   X̃ = X_b − C B             projection out of the memory  (G̃ = X̃ᵀ),
                                             classical Gram–Schmidt, reorthogonalised
                                             once when needed (DGKS)
    X̃  = V S Qᵀ                               rank r by a relative cut-off (a single row:
                                             V = 1, S = ‖x̃‖, Qᵀ = x̃/‖x̃‖, no SVD)
    W ← W − Q S⁻¹ Vᵀ R                       = W − G̃ (GᵀG̃)⁺ R, because GᵀG̃ = G̃ᵀG̃

    invariants:  B ΔW = 0                     (predictions on the memory's span kept)
                 X_b W_new = Y_b − (I − V Vᵀ) R   (= Y_b unless the batch is spanned)

Memory while it has room (always with ``memory_size=None``; ``O(p·k·n)``, no SVD)::

    B ← [B; Qᵀ]                              Gram–Schmidt growth (X_b = [C, V S] [B; Qᵀ])
    L ← [[L, 0], [C, V S]]                   "pca" only: coordinates of the past rows

    invariant:  X_pastᵀ X_past = Bᵀ LᵀL B     (L is N'×k; the QR of L compresses it to a
                                             k×k triangle when spanned rows pile up)

so the PCA of the past rows is the SVD of the small ``L = Z Σ Aᵀ``: ``components_ = Aᵀ B``,
``singular_values_ = Σ``, computed on access only. The three policies store the same ``B``.

Memory when it would exceed ``m`` directions (incremental PCA, sequential Karhunen–Loève)::

    K  = [[L, 0], [C, V S]]ᵀ                 (Lᵀ = diag(Σ) once the memory is full)
    K  = Ũ Σ̃ Ṽᵀ,   B ← (Ũᵀ [B; Qᵀ])[:m],   Σ ← Σ̃[:m],   L ← diag(Σ)

``"latest"`` and ``"random"`` instead keep ``m`` rows of ``[B; Qᵀ]``.
"""

import inspect
import math
import operator
import os
import sys
import warnings
from numbers import Integral, Real

import numpy as np
import sklearn
from scipy.linalg import blas
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state

from .._compat import Interval, StrOptions
from .._docstrings import fill_doc
from .._streaming._base import (
    VALIDATION_ATTRIBUTES, LinearPredictMixin, OneRowLearnMixin, OneRowPredictMixin,
    StreamingRegressorMixin, clear_fitted_state, on_rollback, run_with_delay, same_param_value,
)
from ..exceptions import SpannedBatchWarning

__all__ = ["ORFitRegressor", "SpannedBatchWarning"]

_EPS = np.finfo(np.float64).eps
# parameters the learned state depends on: fixed from the start of a stream to the next
# fit (a change by set_params in between is refused by _check_stream_params)
_STREAM_PARAMS = ("memory_size", "memory_policy", "batch_size", "coef_init", "rtol",
                  "random_state")
_get_stream_params = operator.attrgetter(*_STREAM_PARAMS)
# norms of a batch within which its squares and products cannot overflow or underflow
_SAFE_LOW, _SAFE_HIGH = 2.0**-400, 2.0**400
# Re-project a row whose projection kept less than 1/√2 of its norm (the DGKS criterion,
# "twice is enough", Kahan–Parlett): then X̃ is orthogonal to B to working precision.
_REORTH = 1.0 / np.sqrt(2.0)


class _ORFitMemoryMixin:
    """The memory of ORFit, shared by :class:`ORFitRegressor` and ORFit-MLP.

    The gradient basis ``B = _basis[:_n_dirs]`` (orthonormal rows, spare rows for growth),
    ``_sigma``, the ``"pca"`` coordinate factor ``L = _coords[:_n_coords, :_n_dirs]`` and
    the cache of the PCA rotation; the estimator has the parameters ``memory_size``,
    ``memory_policy`` and a generator ``_rng`` (``"random"``). A step computes the new
    directions with :func:`_orthogonal_step`, then :meth:`_update_memory` returns the new
    memory without touching the current one, and :meth:`_commit_memory` assigns it.
    """

    _sample_weight_unsupported = (
        "ORFit fits each row exactly (the minimum-norm change that interpolates it), so "
        "per-row weights have no least-squares objective to multiply; use "
        "QREWRLSRegressor (windowed weighted least squares) for per-row weights."
    )

    # ------------------------------------------------------------------ public API
    # fit, partial_fit, prequential_predict and learn_one: StreamingRegressorMixin's and
    # OneRowLearnMixin's template (lock, parameter check, validation, all or nothing);
    # ORFit cuts the rows of a call into its steps (_learn_call)

    # ------------------------------------------------------------------ learning
    def _learn_call(self, X, Y, sample_weight, *, predict, reset, delay):
        """The steps of one call: ``batch_size`` rows each in ``fit``, the whole call in
        ``partial_fit``, one row each in ``prequential_predict`` (labels ``delay`` rows
        late: one row per step as each label comes due, :func:`run_with_delay`).

        The steps learn in place: each assigns new arrays or writes only the spare rows
        of the memory's buffers, so the call's transaction restores the state if a later
        step fails (no private copy of the state, whatever the delay).
        """
        if not (predict and delay):
            return self._learn(X, Y, predict=predict,
                               batch_size=self.batch_size if reset else None)
        X = np.ascontiguousarray(X)
        self._undo_draws(X.shape[0])
        n_unfitted = 0

        def learn(Xr, Yr):
            nonlocal n_unfitted
            n_unfitted += self._steps(Xr, Yr, step=1)

        # overflow is detected and reported by _step, not as a RuntimeWarning
        with np.errstate(over="ignore", invalid="ignore"):
            Y_pred = run_with_delay(X, Y, delay, predict=self._predict_rows, learn=learn)
        _warn_spanned(n_unfitted, X.shape[0])
        return Y_pred

    def _learn(self, X, Y, *, predict, batch_size=None):
        """Learn validated rows (``Y`` 2-D) in steps of ``batch_size`` rows (``None``: one
        step), or of one row when ``predict``; return the predictions each row had before
        its step (2-D) when ``predict``.

        A :class:`SpannedBatchWarning` for the rows left with a residual is issued once,
        inside the call's transaction (a warning escalated to an error restores the
        state).
        """
        X = np.ascontiguousarray(X)
        n = X.shape[0]
        self._undo_draws(n)
        Y_pred = np.empty_like(Y) if predict else None
        step = 1 if predict else (batch_size or max(n, 1))
        # overflow is detected and reported by _step, not as a RuntimeWarning
        with np.errstate(over="ignore", invalid="ignore"):
            n_unfitted = self._steps(X, Y, step=step, Y_pred=Y_pred)
        _warn_spanned(n_unfitted, n)
        return Y_pred

    def _steps(self, X, Y, *, step, Y_pred=None):
        """Learn the rows ``step`` at a time, one :meth:`_step` each; the predictions
        made before each step go to ``Y_pred``. Returns the number of rows whose batch
        was left with a residual."""
        n_unfitted = 0
        for start in range(0, X.shape[0], step):
            P, unfitted = self._step(X[start : start + step], Y[start : start + step])
            if Y_pred is not None:
                Y_pred[start : start + step] = P
            if unfitted:
                n_unfitted += P.shape[0]
        return n_unfitted

    def _undo_draws(self, n_rows):
        """The ``"random"`` policy draws from ``_rng`` in place: if a call of ``n_rows``
        rows fails, the generator's state is put back, so the next draws are those of an
        estimator that never saw the call.

        Not for one row (``learn_one``): saving the state costs about as much as a step
        (≈ 40 µs), and nothing after a single row's draw can fail but an interrupt in the
        lines between it and the commit (a row left with a residual adds no direction,
        so it draws nothing).
        """
        if n_rows > 1 and self.memory_policy == "random" and self.memory_size:
            rng = self._rng
            state = rng.get_state()
            on_rollback(lambda: rng.set_state(state))

    def _init_memory(self, n_features):
        """An empty memory for rows (gradients) of ``n_features`` entries."""
        # B = _basis[:_n_dirs] (orthonormal rows), then spare rows for growth
        self._basis = np.empty((1, n_features))
        self._n_dirs = 0
        # per direction: ‖x̃‖ when added (Gram–Schmidt), or Σ when the basis is in PCA form
        self._sigma = np.zeros(0)
        # "pca": L = _coords[:_n_coords, :_n_dirs] with X_pastᵀX_past = Bᵀ LᵀL B;
        # None when the basis itself is in PCA form (then L = diag(_sigma))
        self._coords = None
        self._n_coords = 0
        self._pca_cache = None

    def _commit_memory(self, memory):
        """Assign a memory returned by :meth:`_update_memory`."""
        (self._basis, self._n_dirs, self._sigma, self._coords, self._n_coords) = memory
        self._pca_cache = None

    def _update_memory(self, *, B, C, S, V, Qt, m_max):
        """The memory after a batch: ``(basis, k, sigma, coords, n_coords)``."""
        k, r = B.shape[0], S.shape[0]
        pca = self.memory_policy == "pca"
        coords, n_coords = (self._coords, self._n_coords) if pca else (None, 0)
        basis = self._basis

        if m_max == 0:
            # One-step SGD: nothing is stored
            return basis, 0, self._sigma[:0], None, 0
        if m_max is not None and k + r > m_max:
            # the memory would exceed m directions: truncate (the only SVD of the memory)
            if r:
                basis = _with_spare_rows(basis, k=k, r=r, limit=k + r)
                # stage the new directions in the spare rows: basis[:k+r] = [B; Qᵀ]
                basis[k : k + r] = Qt
            if pca:
                L = _coords_or_diag(coords, n_coords, sigma=self._sigma, k=k)
                basis, kk, sigma = _pca_truncate(basis, L=L, k=k, C=C, S=S, V=V, m_max=m_max)
                return basis, kk, sigma, None, 0
            if r == 0:
                # more stored rows than m: only a state pickled before set_params was
                # checked, with memory_size lowered; keep the first m rows
                return basis, m_max, self._sigma[:m_max], None, 0
            basis, kk, sigma = self._keep(basis, k=k, S=S, m_max=m_max)
            return basis, kk, sigma, None, 0

        # room for the new directions: Gram–Schmidt growth, O(p·r) and no SVD
        if r:
            # k ≤ p always (orthonormal rows), and k ≤ m when bounded
            limit = basis.shape[1] if m_max is None else min(m_max, basis.shape[1])
            basis = _with_spare_rows(basis, k=k, r=r, limit=limit)
            # B ← [B; Qᵀ]: rows < k untouched, so views held by the user stay valid
            basis[k : k + r] = Qt
        sigma = np.concatenate([self._sigma, S]) if r else self._sigma
        if pca and k + r:
            # L ← [[L, 0], [C, V S]]: X_b = [C, V S] [B; Qᵀ], so X_pastᵀX_past = Bᵀ LᵀL B
            if coords is None:
                coords = _grow_coords(
                    np.diag(self._sigma), rows=k, cols=k, capacity=(k + C.shape[0], k + r)
                )
                n_coords = k
            coords, n_coords = _append_coords(coords, n_coords, k=k, C=C, VS=V * S)
            if n_coords > 2 * (k + r) + _COMPRESS_SLACK:
                # spanned rows piled up: L ← R of L = QR (LᵀL unchanged), O(k³) per ≥ k rows
                coords, n_coords = _compress_coords(coords, n_coords, k=k + r)
        return basis, k + r, sigma, coords, n_coords

    def _keep(self, basis, *, k, S, m_max):
        """``"latest"`` / ``"random"``: keep ``m`` of the rows ``basis[:k+r]``."""
        r = S.shape[0]
        total = k + r
        sigma = np.concatenate([self._sigma, S])
        if self.memory_policy == "latest":
            # newest first; within the batch, the larger singular values (listed first)
            keep = np.arange(k, k + m_max) if r >= m_max else np.arange(total - m_max, total)
        else:
            keep = np.sort(self._rng.choice(total, size=m_max, replace=False))
        new = np.empty_like(basis)
        np.take(basis, keep, axis=0, out=new[:m_max])
        return new, m_max, sigma[keep]

    # ------------------------------------------------------------------ the memory
    @property
    def components_(self):
        return self._memory()[0]

    @property
    def singular_values_(self):
        return self._memory()[1]

    def _memory(self):
        """``(components_, singular_values_)``, derived from the basis when first asked.

        With a ``"pca"`` memory that has not been truncated since its last growth, the
        PCA directions are computed here from the SVD of the small coordinate factor
        ``L = Z Σ Aᵀ`` (``N'×k``): ``components_ = Aᵀ B``, ``O(k²·p)`` once per state.
        """
        state = self.__dict__
        if "_basis" not in state:
            raise AttributeError(
                f"This {type(self).__name__} instance has no learned memory yet "
                "(components_ and singular_values_ exist after fit or partial_fit)."
            )
        if state.get("_pca_cache") is not None:
            return state["_pca_cache"]
        k = self._n_dirs
        basis = self._basis[:k]
        if self._coords is None:
            # the basis rows are the memory as exposed (PCA form after a truncation, or
            # the Gram–Schmidt order of "latest"/"random"); a view, no copy
            return basis, self._sigma
        if k == 0:
            memory = (basis, np.zeros(0))
        else:
            # X_pastᵀX_past = Bᵀ LᵀL B and L = Z Σ Aᵀ  ⇒  right singular vectors Aᵀ B
            _, sigma, At = _svd(self._coords[: self._n_coords, :k])
            memory = (At @ basis, sigma)
        state["_pca_cache"] = memory
        return memory

    # ------------------------------------------------------------------ pickling
    def __getstate__(self):
        # a copy: object.__getstate__ may return the instance's own __dict__
        state = dict(super().__getstate__())
        # the buffers' spare rows and columns are scratch, and the cache is recomputed
        state.pop("_pca_cache", None)
        if "_basis" in state:
            state["_basis"] = state["_basis"][: state["_n_dirs"]]
            if state["_coords"] is not None:
                state["_coords"] = state["_coords"][: state["_n_coords"], : state["_n_dirs"]]
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "_basis" in self.__dict__:
            k = self._n_dirs
            self._basis = _grow(self._basis, rows=k, capacity=k + 1)
            if self._coords is not None:
                n_rows = self._n_coords
                self._coords = _grow_coords(
                    self._coords, rows=n_rows, cols=k, capacity=(n_rows + 1, k + 1)
                )
            self._pca_cache = None


@fill_doc()
class ORFitRegressor(
    _ORFitMemoryMixin,
    OneRowLearnMixin,
    OneRowPredictMixin,
    LinearPredictMixin,
    StreamingRegressorMixin,
    RegressorMixin,
    BaseEstimator,
):
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

        With ``memory_size=None`` the three policies store the same basis and give the
        same coefficients; only the exposed ``components_`` and ``singular_values_``
        differ.
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
        ``"random"`` in the order they were added. The stored basis is the same for the
        three policies while nothing is truncated; the ``"pca"`` rotation of it is
        computed when the attribute is read (see Notes), and a bounded memory is kept in
        PCA form once it has been truncated.
    singular_values_ : ndarray of shape (n_components,)
        For ``"pca"``, the singular values of the incremental PCA (exact singular values
        of all past rows as long as nothing was truncated). For ``"latest"`` and
        ``"random"``, the norm of each direction's new part ``‖x̃‖`` when it was added
        (the diagonal of a Gram–Schmidt QR factor).
    n_features_in_ : int
        Number of features ``p``.
    {feature_names_in}
    n_samples_seen_ : int
        Rows learned since the stream started (reset by :meth:`fit`).

    See Also
    --------
    RandomFourierFeatures : A feature map to put in front of it.
    QREWRLSRegressor : Windowed minimum-norm least squares (forgets by a window).
    prequential_predict : Predict-then-update over a stream.

    Notes
    -----
    **Per-row weights** (``sample_weight``) are not accepted: ORFit fits each row
    exactly (the smallest change of the parameters that interpolates it, orthogonal to
    the stored gradients), so a positive weight would change nothing, and the only
    least-squares step (a batch whose rows the memory already spans, see
    :class:`~sklearn_orfit.exceptions.SpannedBatchWarning`) is a fallback, not an
    objective that weights could honestly multiply. ``fit``, ``partial_fit`` and
    ``prequential_predict`` have no ``sample_weight`` parameter (scikit-learn's
    ``has_fit_parameter`` is False) and raise ``ValueError`` saying so when given
    weights, as do :func:`~sklearn_orfit.prequential_predict`,
    :class:`StreamingPipeline` and :class:`FeaturePartitionEnsemble`. Use :class:`QREWRLSRegressor` (windowed least squares,
    weighted exactly) for per-row weights.

    **Cost.** A step on a batch of ``n`` rows with ``k`` stored directions: the
    projection ``C = X_b Bᵀ``, ``X̃ = X_b − C B`` (classical Gram–Schmidt, ``O(p·k·n)``,
    doubled for rows that need the second pass) and the weight update ``O(p·n·c)``. A
    single row is two matrix–vector products with the ``k×p`` basis and no factorisation;
    a batch adds the thin SVD of its own projected rows ``X̃``, ``O(p·n²)``. While the
    memory has room — always with ``memory_size=None`` — it grows by appending the new
    directions (the buffer doubles, so the copy is ``O(p)`` per direction amortised), and
    ``"pca"`` also appends the batch's coordinates ``[C, V S]`` to a small factor ``L``
    with ``X_pastᵀ X_past = Bᵀ LᵀL B``: ``O(p·(k + n)·n)`` per batch, no SVD (the paper's
    unbounded Algorithms 1 and 3, §3). ``L`` is ``k×k`` triangular unless rows were
    spanned; when those exceed ``k`` it is compressed by a QR, ``O(k²)`` per row amortised.
    The PCA directions and singular values of ``"pca"`` are computed when
    ``components_`` or ``singular_values_`` is first read after a step, from the SVD of
    ``L``: ``O(k²·(p + N'))`` for ``N' ≤ 2k + 32`` rows of ``L``.

    Only a bounded memory that would exceed ``m`` directions is truncated: ``"pca"``
    then takes the SVD of the ``(k+r)×(N'+n)`` matrix ``[L, 0; C, V S]ᵀ`` and rotates
    the basis, one ``(m×(k+r))`` by ``((k+r)×p)`` product, ``O((m + n)²·p)`` per batch as
    in the paper (§3, Algorithms 2 and 4; §4.1); ``"latest"`` and ``"random"`` copy the
    kept rows, ``O(m·p)``.

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

    **Scale.** The model is scale-equivariant: ``X → cX`` gives ``W → W/c``, the same
    predictions and ``singular_values_`` times ``c``, for any ``c`` that keeps ``X``
    and ``W`` representable (``1e±300`` included). A batch whose norm is outside
    ``2^±400`` is learned in units of a power of two (an exact rescaling: no norm or
    inner product of rows overflows or underflows, and the tolerances are relative to
    the rows' norms). Coefficients, predictions or row norms beyond the float64 range
    raise ``ValueError`` and change nothing.

    **A call that raises changes nothing**, including when the
    :class:`SpannedBatchWarning` is turned into an error (``warnings.simplefilter
    ("error")``): the warning is issued before the call's state is committed. The
    parameters are those the stream started with: changing one by ``set_params``
    before a :meth:`partial_fit`, :meth:`prequential_predict` or :meth:`learn_one`
    raises ``ValueError`` (call :meth:`fit` to start a stream with the new values).

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

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # A one-pass interpolating learner: on data with more rows than features (the
        # generic test data) the unlimited memory fills up and learning stops.
        tags.regressor_tags.poor_score = True
        return tags

    # ------------------------------------------------------------------ state
    _stream_params = _STREAM_PARAMS  # the names (values: _stream_param_values)

    def _check_stream_params(self):
        """The state was built with the parameters the stream started with (a copy of
        ``coef_init`` catches an array changed in place)."""
        values = self._stream_param_values
        coef_init = self.__dict__.get("_stream_coef_init")
        current = _get_stream_params(self)
        if all(map(operator.is_, current, values)) and (
            coef_init is None or np.array_equal(np.asarray(self.coef_init), coef_init)
        ):
            return  # the usual case: the very same objects, no comparison needed
        now = dict(zip(self._stream_params, current))
        before = dict(zip(self._stream_params, values))
        if self.coef_init is not None:
            now["coef_init"] = np.array(self.coef_init, dtype=np.float64)
        before["coef_init"] = coef_init
        changed = [name for name in self._stream_params
                   if not same_param_value(now[name], before[name])]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} changed (set_params) since this stream started; the "
                "model's state (coefficients and memory) was built with the previous "
                "values. Call fit to start a new stream with the new parameters."
            )

    def _init_state(self, n_features, n_targets, y_ndim):
        clear_fitted_state(self, keep=VALIDATION_ATTRIBUTES)
        shape = (n_features,) if y_ndim == 1 else (n_features, n_targets)
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
                    f"{'1-D y' if y_ndim == 1 else f'{n_targets} targets'})."
                )
            if not np.isfinite(coef).all():
                raise ValueError("coef_init contains NaN or infinity.")
        self.coef_ = coef
        self._init_memory(n_features)
        self._rng = check_random_state(self.random_state)
        # a copy: _check_stream_params catches a coef_init changed in place
        self._stream_coef_init = (None if self.coef_init is None
                                  else np.array(self.coef_init, dtype=np.float64))
        self.n_samples_seen_ = 0

    # ------------------------------------------------------------------ the step
    def _step(self, Xb, Yb):
        """Learn one batch; commit the new state only at the end.

        Writes before the commit go to spare rows/columns of the buffers or to new
        arrays, so an exception half-way leaves the estimator unchanged.

        A batch whose norm is outside ``2^±400`` is handled in units of a power of two,
        ``X_b = 2^e X_s`` with ``‖X_s‖`` in ``[1/2, 1)``: the scaling is exact, so the
        result is the same (to the last bit, barring subnormal numbers) as that of the
        same rows scaled into range, and no norm or inner product of rows overflows or
        underflows, whatever the scale of ``X`` (ORFit is scale-equivariant:
        ``X → cX`` gives ``W → W/c`` and the same predictions).

        Returns the predictions ``X_b W`` made before the step and whether part of the
        batch's residual had to be left (a spanned batch with disagreeing labels).
        """
        n = Xb.shape[0]
        B = self._basis[: self._n_dirs]
        W = self.coef_.reshape(Xb.shape[1], -1)

        # R = X_b W − Y_b
        P = Xb @ W
        R = P - Yb
        dW, left, C, S, V, Qt, nrm = _orthogonal_step(Xb, R, B, rtol=self.rtol)
        W_new = W - dW
        scale = _norm(Yb) + _norm(P)
        unfitted = bool(_norm(left) > np.sqrt(_EPS) * scale)
        if not (_all_finite(W_new) and _all_finite(P)) or not (
            math.isfinite(nrm) or (_all_finite(C) and _all_finite(S))
        ):
            raise ValueError(
                "ORFit's update overflowed: the coefficients, the predictions or the "
                "norms of the rows exceed the float64 range (≈1.8e308); rescale X and y, "
                "e.g. with RecursiveStandardScaler."
            )

        memory = self._update_memory(B=B, C=C, S=S, V=V, Qt=Qt, m_max=self.memory_size)

        # commit
        self.coef_ = W_new.reshape(self.coef_.shape)
        self._commit_memory(memory)
        self.n_samples_seen_ += n
        return P, unfitted


# ---------------------------------------------------------------------- helpers
# Spanned rows added to L before it is compressed back to k×k (beyond k of them).
_COMPRESS_SLACK = 32


def _orthogonal_step(G, R, B, *, rtol):
    """The ORFit step for rows ``G`` (``n×p``: inputs, or a model's Jacobian) with residual
    ``R = f − Y`` (``n×c``) and memory ``B`` (``k×p``, orthonormal rows).

    ``G̃ = G − (G Bᵀ) B = V S Qᵀ`` (rank ``r`` by the relative cut-off ``rtol``, see
    :class:`ORFitRegressor`) and the update ``ΔW = Q S⁻¹ Vᵀ R = G̃ᵀ(G G̃ᵀ)⁺ R``, to subtract
    from the parameters. A batch whose norm is outside ``2^±400`` is handled in units of a
    power of two (exact; no norm or inner product of rows overflows or underflows).

    Returns ``(ΔW, left, C, S, V, Qt, ‖G‖)``: ``left = (I − V Vᵀ) R`` is the residual the
    step cannot fit (zero unless the rows are spanned by the memory), and ``C = G Bᵀ``,
    ``S``, ``V``, ``Qt`` (in the units of ``G``) are what the memory absorbs.
    """
    n, p = G.shape
    k = B.shape[0]
    # G_s = 2^(−e) G (exact), ‖G_s‖ in [1/2, 1) (max|G_s| if ‖G‖ overflows); e = 0 when
    # ‖G‖ is within 2^±400, where no square below can overflow or underflow (the common
    # case costs one norm)
    nrm = _norm(G)
    if _SAFE_LOW <= nrm <= _SAFE_HIGH or nrm == 0.0:
        e = 0
    else:
        e = math.frexp(nrm if math.isfinite(nrm) else float(np.abs(G).max()))[1]
    Gs = _times_pow2(G, -e)
    # C = G_s Bᵀ, G̃ = G_s − C B   (G̃ Bᵀ = 0 to working precision)
    Gt, C = _project_out(Gs, B)
    rtol = rtol if rtol is not None else _EPS * max(p, k + n)
    row_norm = np.sqrt(np.einsum("ij,ij->i", Gs, Gs).max())  # < 1: no overflow
    # G̃ = V S Qᵀ, keeping the r singular values above rtol · max ‖g_i‖
    V, S, Qt = _new_directions(Gt, tol=rtol * row_norm)
    # ΔW = Q S⁻¹ Vᵀ R   (= G̃ᵀ (G G̃ᵀ)⁺ R: the pseudo-inverse step; B ΔW = 0); S is in
    # units of 2^e, hence the final 2^(−e)
    VtR = V.T @ R
    dW = _times_pow2(Qt.T @ (VtR / S[:, None]), -e)
    # residual left on the batch: (I − V Vᵀ) R, zero unless the batch is spanned
    left = R - V @ VtR
    # the memory's coordinates and singular values in the units of G (at most ‖G‖:
    # finite when that is)
    C, S = _times_pow2(C, e), _times_pow2(S, e)
    return dW, left, C, S, V, Qt, nrm


def _project_out(X, B):
    """Return ``X̃ = X − (X Bᵀ) B`` and ``C = X Bᵀ`` for orthonormal rows ``B``.

    Classical Gram–Schmidt, repeated once when a row keeps less than ``1/√2`` of its
    norm (the DGKS criterion ``‖x̃‖ < ‖x‖/√2``), so that ``X̃ Bᵀ`` is zero to working
    precision.
    A single row costs two matrix–vector products with ``B`` (four when repeated).
    """
    if B.shape[0] == 0:
        return X, np.zeros((X.shape[0], 0))
    if X.shape[0] == 1:
        x = X[0]
        # c = B x,  x̃ = x − Bᵀc   (two passes over B, as matrix–vector products)
        c = B @ x
        xt = x - c @ B
        if xt @ xt < (_REORTH**2) * (x @ x):
            c2 = B @ xt
            xt -= c2 @ B
            c += c2
        return xt[None, :], c[None, :]
    C = X @ B.T
    Xt = X - C @ B
    before = np.einsum("ij,ij->i", X, X)
    after = np.einsum("ij,ij->i", Xt, Xt)
    if np.any(after < (_REORTH**2) * before):
        C2 = Xt @ B.T
        Xt -= C2 @ B
        C += C2
    return Xt, C


def _new_directions(Xt, *, tol):
    """``X̃ = V S Qᵀ`` restricted to singular values above ``tol``.

    One row needs no factorisation; a batch takes the thin SVD of its own ``n×p``
    projected rows, ``O(p·n²)`` (rank-revealing, for rows dependent within the batch).
    """
    n, p = Xt.shape
    if n == 1:
        s = float(np.sqrt(Xt[0] @ Xt[0]))
        if s > tol:
            return np.ones((1, 1)), np.array([s]), Xt / s
        return np.zeros((1, 0)), np.zeros(0), np.zeros((0, p))
    V, S, Qt = np.linalg.svd(Xt, full_matrices=False)
    r = int(np.count_nonzero(S > tol))
    return V[:, :r], S[:r], Qt[:r]


def _coords_or_diag(coords, n_coords, *, sigma, k):
    """The factor ``L`` (``N'×k``): the stored one, or ``diag(Σ)`` for a basis in PCA form."""
    if coords is None:
        return np.diag(sigma[:k])
    return coords[:n_coords, :k]


def _pca_truncate(basis, *, L, k, C, S, V, m_max):
    """Sequential Karhunen–Loève update of the memory, truncated to ``m`` directions.

    ``basis[k:k+r]`` must hold the new orthonormal directions ``Qᵀ``. Returns a new buffer
    whose first rows are the top ``m`` right singular vectors of ``[L, 0; C, V S] [B; Qᵀ]``
    (the past rows and the batch), their number and singular values.
    """
    r = S.shape[0]
    n = C.shape[0]
    n_prev = L.shape[0]
    # K = [[Lᵀ, Cᵀ], [0, S Vᵀ]]: [Bᵀ Q] K = [X_pastᵀ, X_bᵀ] up to a rotation of the columns
    K = np.zeros((k + r, n_prev + n))
    K[:k, :n_prev] = L.T
    K[:k, n_prev:] = C.T
    K[k:, n_prev:] = S[:, None] * V.T
    Ut, sig, _ = _svd(K)
    kk = min(k + r, m_max, sig.shape[0])
    # B ← (Ũᵀ [B; Qᵀ])[:m]: one (m × (k+r)) by ((k+r) × p) product into a fresh buffer
    new = np.empty_like(basis)
    np.matmul(np.ascontiguousarray(Ut[:, :kk].T), basis[: k + r], out=new[:kk])
    return new, kk, sig[:kk]


def _with_spare_rows(basis, *, k, r, limit):
    """``basis`` if it has room for ``k + r`` rows, else a copy with geometric capacity."""
    if basis.shape[0] >= k + r:
        return basis
    capacity = max(k + r, min(2 * basis.shape[0], limit))
    return _grow(basis, rows=k, capacity=capacity)


def _grow(buffer, *, rows, capacity):
    """A buffer of ``capacity`` rows whose first ``rows`` rows are ``buffer[:rows]``."""
    new = np.empty((capacity, buffer.shape[1]))
    new[:rows] = buffer[:rows]
    return new


def _grow_coords(coords, *, rows, cols, capacity):
    """A zero buffer of shape ``capacity`` holding ``coords[:rows, :cols]``."""
    new = np.zeros(capacity)
    new[:rows, :cols] = coords[:rows, :cols]
    return new


def _append_coords(coords, n_coords, *, k, C, VS):
    """Write the rows ``[C, V S]`` below ``L`` (in spare rows, growing geometrically).

    Each row is written over the buffer's full width, zeros beyond ``k + r``, so spare
    columns of every stored row are zero whatever a failed step left there.
    """
    n, r = VS.shape
    cap_rows, cap_cols = coords.shape
    if cap_rows < n_coords + n or cap_cols < k + r:
        capacity = (
            max(n_coords + n, 2 * cap_rows if cap_rows < n_coords + n else cap_rows),
            max(k + r, 2 * cap_cols if cap_cols < k + r else cap_cols),
        )
        coords = _grow_coords(coords, rows=n_coords, cols=k, capacity=capacity)
    rows = coords[n_coords : n_coords + n]
    rows[:, :k] = C
    rows[:, k : k + r] = VS
    rows[:, k + r :] = 0.0
    return coords, n_coords + n


def _compress_coords(coords, n_coords, *, k):
    """``L ← R`` of ``L = QR`` (``k×k``, upper triangular): ``LᵀL`` is unchanged."""
    L = coords[:n_coords, :k]
    e = _pow2_exponent(L)
    R = _times_pow2(np.linalg.qr(_times_pow2(L, -e), mode="r"), e)
    new = np.zeros((2 * k + _COMPRESS_SLACK + 1, coords.shape[1]))
    new[:k, :k] = R
    return new, k


def _pow2_exponent(A):
    """``e`` with ``‖A‖`` in ``[2^(e−1), 2^e)`` (``0`` for a zero or non-finite norm)."""
    nrm = _norm(A)
    return math.frexp(nrm)[1] if math.isfinite(nrm) else 0


def _svd(A):
    """Thin SVD of the memory's coordinates, computed on ``A`` scaled by a power of two.

    LAPACK rescales a matrix whose entries are beyond about ``1e±146`` by a factor that
    is not a power of two; scaling it into range first keeps the memory exactly
    equivariant to ``X → 2^k X`` (and identical at normal scales).
    """
    e = _pow2_exponent(A)
    U, s, Vt = np.linalg.svd(_times_pow2(A, -e), full_matrices=False)
    return U, _times_pow2(s, e), Vt


def _all_finite(A):
    """No NaN or infinity in ``A`` (a sum propagates them: one pass in the usual case)."""
    return math.isfinite(float(A.sum())) or bool(np.isfinite(A).all())


def _times_pow2(A, e):
    """``A · 2^e``, exact (barring subnormal results)."""
    if e == 0:
        return A
    if -1000 < e < 1000:
        return A * math.ldexp(1.0, e)  # a normal power of two: the product is exact
    return np.ldexp(A, e)


def _norm(A):
    """Frobenius norm without overflow or underflow of the squares (BLAS ``nrm2``)."""
    a = np.ravel(A)
    return float(blas.dnrm2(a)) if a.size else 0.0


def _warn_spanned(n_unfitted, n):
    """A :class:`SpannedBatchWarning` for the ``n_unfitted`` of ``n`` rows of a call that
    were left with a residual (none when ``n_unfitted`` is 0), pointing at the line that
    called the package."""
    if not n_unfitted:
        return
    warnings.warn(
        f"{n_unfitted} of the {n} rows learned in this call are spanned by the memory "
        "with labels the model does not predict: fitting them would change predictions "
        "on remembered data, so the pseudo-inverse step kept those and left a residual "
        "on the new rows.",
        SpannedBatchWarning,
        stacklevel=_caller_stacklevel(),
    )


# the frames of this package and of scikit-learn (whose _fit_context wraps fit)
_INTERNAL_FILES = (
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep,
    os.path.dirname(os.path.abspath(inspect.getfile(sklearn))) + os.sep,
)


def _caller_stacklevel():
    """``stacklevel`` for a warning issued by the caller: the first frame outside this
    package and scikit-learn (the user's line, however deep the call went)."""
    level, frame = 1, sys._getframe(1)  # stacklevel 1: the frame that warns
    while frame is not None and frame.f_code.co_filename.startswith(_INTERNAL_FILES):
        level += 1
        frame = frame.f_back
    return level
