"""Online aggregation of streaming experts: BOA, ML-Poly and exponentially weighted averages.

Data flow per call: the rows go through every expert once (each expert's own vectorised
``prequential_predict``; experts that share a random-feature map get its features
computed once), giving an ``(n_rows, K)`` matrix of prequential predictions; the weight
recursion then runs over the rows, ``O(K)`` a row, and the aggregate predicts the
weighted combination.
"""

import os
from numbers import Integral, Real

import numpy as np
from joblib import effective_n_jobs
from sklearn.base import RegressorMixin, clone
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.parallel import Parallel, delayed

from .._compat import Interval, StrOptions, _BaseComposition
from .._docstrings import fill_doc
from ._ensemble import _working_copy
from ._pipeline import (
    StreamingPipeline, check_deep_params, record_deep_params, undo_on_rollback,
)
from .._streaming._prequential import prequential_predict as _prequential_predict
from .._streaming._validation import check_rows
from ..abo._qr_ewrls import QREWRLSRegressor
from ..abo._rff import RandomFourierFeatures
from .._streaming._base import (
    StreamingRegressorMixin, _held, check_stream_sample_weight, clear_fitted_state,
    expected_failed_checks,
    stream_update, validate_stream,
)
from ..baselines._sw_krls import SlidingWindowKRLSRegressor

__all__ = ["AggregatingRegressor", "make_expert_grid"]

# opera's constant in BOA's second-order term: S_k += 2.2 r_k² (Wintenberger 2017 uses
# a constant of this order in the adaptive learning rates)
_BOA_C = 2.2


def _may_change(key):
    """The parameter that may change mid-stream: ``n_jobs``, read at every call."""
    return key.rsplit("__", 1)[-1] == "n_jobs"


# ---------------------------------------------------------------------- weight rules
def _new_rule_state(n_experts):
    """The weight rule's state before any regret: every sum is zero."""
    return {
        "regret": np.zeros(n_experts),  # R_k = Σ r_k (cumulative regret)
        "sq": np.zeros(n_experts),  # S_k = Σ r_k² (BOA: Σ 2.2 r_k²)
        "boa": np.zeros(n_experts),  # BOA's regularised regret Σ (r_k − η_k r_k²)
        "eta": np.zeros(n_experts),  # BOA's rates η_k = S_k^(−1/2) (0 while S_k = 0)
        "log_weight": np.zeros(n_experts),  # BOA: log η_k + η_k R̃_k, once all S_k > 0
        "all_active": np.zeros(1, dtype=bool),  # BOA: whether every S_k > 0
    }


def _rule_weights(state, *, method, learning_rate):
    """The mixture ``p`` (sums to one) of the rule's current state.

    * BOA (opera's form): ``p_k ∝ η_k exp(η_k R̃_k)`` with ``η_k = S_k^(−1/2)`` over the
      experts with ``S_k > 0`` (they share the prior mass of their group), the prior
      ``1/K`` for the others;
    * ML-Poly: ``p_k ∝ η_k (R_k)_+`` with ``η_k = 1/S_k``; uniform while no ``R_k > 0``;
    * EWA: ``p_k ∝ exp(η R_k)``.
    """
    K = state["regret"].shape[0]
    if method == "boa":
        S = state["sq"]
        if state["all_active"][0]:  # every expert has a rate (after its first regret)
            # log(η_k) + η_k R̃_k, kept by _rule_update; the log of the uniform prior cancels
            a = state["log_weight"]
            e = np.exp(a - a.max())
            return e / e.sum()
        active = S > 0.0
        w = np.full(K, 1.0 / K)
        if active.any():
            eta = state["eta"][active]
            a = np.log(eta) + state["boa"][active] * eta
            e = np.exp(a - a.max())
            w[active] = active.sum() / K * e / e.sum()
        return w / w.sum()
    if method == "mlpol":
        R, S = state["regret"], state["sq"]
        pos = R > 0.0
        if not pos.any():
            return np.full(K, 1.0 / K)
        w = np.zeros(K)
        # R_k > 0 needs some r_k ≠ 0, so S_k > 0 unless r_k² underflowed: then 1/S = inf
        # takes all the mass, as η = 1/S → ∞ means
        with np.errstate(divide="ignore", invalid="ignore"):
            w[pos] = R[pos] / S[pos]
        if not np.isfinite(w).all():
            w = np.where(np.isinf(w), 1.0, 0.0)
        return w / w.sum()
    a = learning_rate * state["regret"]
    e = np.exp(a - a.max())
    return e / e.sum()


def _rule_update(state, r, *, method):
    """Add the instantaneous regrets ``r`` (K,) of one row to the rule's state, in place."""
    state["regret"] += r
    if method == "boa":
        S = state["sq"]
        r2 = r * r
        # S_k += 2.2 r_k²; η_k = S_k^(−1/2) (0 while S_k = 0)
        S += _BOA_C * r2
        if state["all_active"][0]:
            eta = 1.0 / np.sqrt(S)
        else:
            with np.errstate(divide="ignore"):
                eta = 1.0 / np.sqrt(S)
            eta[S == 0.0] = 0.0
            state["all_active"][0] = S.min() > 0.0
        state["eta"][:] = eta
        # R̃_k += r_k − η_k r_k², with the rate that includes this row
        B = state["boa"]
        B += r - r2 * eta
        if state["all_active"][0]:
            state["log_weight"][:] = np.log(eta) + B * eta
    elif method == "mlpol":
        state["sq"] += r * r


def _regrets(Ps, Ys, Ys_pred, *, loss, gradient):
    """A function of ``j``: the instantaneous regrets ``r_k = ℓ(ŷ) − ℓ(x_k)`` of row ``j``
    (K,), summed over targets.

    ``gradient``: the loss linearised at the aggregate's prediction (the "gradient
    trick"), ``ℓ̃(x) = ∇ℓ(ŷ)·x``, so ``r_k = ∇ℓ(ŷ)·(ŷ − x_k)``.
    """
    if Ps.shape[2] == 1:  # one target: scalar arithmetic on (K,) rows
        P1, Y1, H1 = Ps[:, :, 0], Ys[:, 0], Ys_pred[:, 0]
        if gradient:
            if loss == "squared":
                return lambda j: (2.0 * (H1[j] - Y1[j])) * (H1[j] - P1[j])
            return lambda j: np.sign(H1[j] - Y1[j]) * (H1[j] - P1[j])
        if loss == "squared":
            return lambda j: (H1[j] - Y1[j]) ** 2 - (P1[j] - Y1[j]) ** 2
        return lambda j: abs(H1[j] - Y1[j]) - np.abs(P1[j] - Y1[j])

    def regrets(j):
        e = Ys_pred[j] - Ys[j]  # (T,)
        if gradient:
            g = 2.0 * e if loss == "squared" else np.sign(e)
            return (Ys_pred[j][None, :] - Ps[j]) @ g
        if loss == "squared":
            return e @ e - ((Ps[j] - Ys[j]) ** 2).sum(axis=1)
        return np.abs(e).sum() - np.abs(Ps[j] - Ys[j]).sum(axis=1)

    return regrets


def aggregate_expert_predictions(predictions, y, *, method="boa", loss="squared", gradient=True,
                                 learning_rate=None, delay=0, sample_weight=None, loss_scale=1.0):
    """The aggregation rule of :class:`AggregatingRegressor` over stored predictions.

    Runs the weight recursion of a fresh aggregate over experts' prequential predictions
    made elsewhere (for example an aggregate's ``predictions_history_``): row ``i`` is
    predicted with weights from the losses of rows before it only. With the same
    predictions, targets and ``loss_scale`` (the estimator's ``loss_scale_``), it gives
    the estimator's predictions; with another ``method`` or ``learning_rate`` it shows
    what that rule would have done on the same experts, without running them again.

    Parameters
    ----------
    predictions : array-like of shape (n_samples, n_experts) or (n_samples, n_experts, n_targets)
        The experts' prequential predictions, in stream order.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        The targets.
    method, loss, gradient, learning_rate :
        As :class:`AggregatingRegressor`'s parameters.
    delay : int, default=0
        Row ``i``'s weights use the losses of rows ``< i − delay``.
    sample_weight : array-like of shape (n_samples,), default=None
        Multiplies each row's loss.
    loss_scale : float, default=1.0
        The losses are computed on ``predictions / loss_scale`` and ``y / loss_scale``.

    Returns
    -------
    y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The aggregate's predictions (the shape of ``y``).
    weights : ndarray of shape (n_samples, n_experts)
        The mixture used for each row.

    Notes
    -----
    ``O(n_experts)`` a row and target. See :class:`AggregatingRegressor` for the rules.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.compose import aggregate_expert_predictions
    >>> y = np.arange(200.0) % 7
    >>> P = np.column_stack([y + 0.5, np.zeros(200)])  # a biased and a useless expert
    >>> y_pred, weights = aggregate_expert_predictions(P, y)
    >>> weights[-1].round(2)  # BOA on the gradient: the best convex combination
    array([0.9, 0.1])
    >>> bool(np.mean((y_pred - y) ** 2) < np.mean((P[:, 0] - y) ** 2))
    True
    """
    P = np.asarray(predictions, dtype=np.float64)
    Y = np.asarray(y, dtype=np.float64)
    if P.ndim == 2:
        P = P[:, :, None]
    one_target = Y.ndim == 1
    Y = Y[:, None] if one_target else Y
    if P.ndim != 3 or Y.ndim != 2 or P.shape[0] != Y.shape[0] or P.shape[2] != Y.shape[1]:
        raise ValueError(
            f"predictions of shape {np.shape(predictions)} do not match y of shape {np.shape(y)}: "
            "expected (n_samples, n_experts[, n_targets]) and (n_samples[, n_targets]).")
    if not (np.isfinite(P).all() and np.isfinite(Y).all()):
        raise ValueError("predictions and y must be finite.")
    sw = None if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    Y_pred, W = aggregate_predictions(
        P, Y, state=_new_rule_state(P.shape[1]), method=method, loss=loss, gradient=gradient,
        learning_rate=learning_rate, delay=int(delay), sample_weight=sw, scale=float(loss_scale))
    return (Y_pred[:, 0] if one_target else Y_pred), W


def aggregate_predictions(P, Y, *, state, method, loss, gradient, learning_rate,
                          delay=0, sample_weight=None, scale=1.0):
    """Run the weight recursion over the rows of one call.

    Parameters
    ----------
    P : ndarray of shape (n_rows, K, n_targets)
        The experts' prequential predictions.
    Y : ndarray of shape (n_rows, n_targets)
        The targets.
    state : dict
        The rule's state (:func:`_new_rule_state`); updated in place.
    method, loss, gradient, learning_rate :
        As :class:`AggregatingRegressor`'s parameters.
    delay : int
        Row ``i``'s weights use the regrets of rows ``< i − delay``; the last
        ``delay + 1`` rows' regrets are added after the last prediction.
    sample_weight : ndarray of shape (n_rows,) or None
        Multiplies each row's loss (so its regrets).
    scale : float
        The losses are computed on ``P / scale`` and ``Y / scale`` (a power of two).

    Returns
    -------
    Y_pred : ndarray of shape (n_rows, n_targets)
        ``ŷ_i = Σ_k p_ik x_ik``.
    weights : ndarray of shape (n_rows, K)
        ``p_i``, the mixture used for row ``i``.
    """
    n, K, T = P.shape
    Ps, Ys = P / scale, Y / scale
    Y_pred = np.empty((n, T))
    Ys_pred = np.empty((n, T))
    weights = np.empty((n, K))
    regrets = _regrets(Ps, Ys, Ys_pred, loss=loss, gradient=gradient)
    kw = dict(method=method, learning_rate=learning_rate)
    sw = sample_weight
    P1 = P[:, :, 0] if T == 1 else None

    p = _rule_weights(state, **kw)
    for i in range(n):
        j = i - 1 - delay  # the label that has just arrived
        if j >= 0:
            r = regrets(j)
            _rule_update(state, r if sw is None else r * sw[j], method=method)
            p = _rule_weights(state, **kw)
        # invariant: p uses the regrets of rows < i − delay only
        weights[i] = p
        if P1 is not None:
            Y_pred[i, 0] = yhat = p @ P1[i]
            Ys_pred[i, 0] = yhat / scale
        else:
            Y_pred[i] = p @ P[i]
            Ys_pred[i] = Y_pred[i] / scale
    for j in range(max(0, n - 1 - delay), n):
        r = regrets(j)
        _rule_update(state, r if sw is None else r * sw[j], method=method)
    return Y_pred, weights


# ---------------------------------------------------------------------- history rows
def _append_rows(buf, start, stop, rows, limit):
    """Append ``rows`` to the kept rows ``buf[start:stop]``, keeping at most ``limit``.

    Rows are written past ``stop`` (never into rows already kept, which earlier states
    and returned views show); when the buffer is full, the kept rows move to a new one
    of twice the limit (amortised ``O(row)`` a row). Returns ``(buf, start, stop)``.
    """
    if limit == 0:
        return None, 0, 0
    if limit is not None and rows.shape[0] > limit:
        rows = rows[-limit:]
    n_new = rows.shape[0]
    live = 0 if buf is None else stop - start
    if limit is not None:
        live = min(live, limit - n_new)  # the old rows still kept: buf[stop - live:stop]
    if buf is None or stop + n_new > buf.shape[0] or not buf.flags.writeable:
        cap = max(64, 2 * (live + n_new if limit is None else limit))
        new = np.empty((cap, *rows.shape[1:]))
        if live:
            new[:live] = buf[stop - live : stop]
        buf, stop = new, live
    buf[stop : stop + n_new] = rows
    return buf, stop - live, stop + n_new


def _loss_scale(Y):
    """The power of two just above ``max |y|`` of the stream's first row (1 if zero).

    The first row only: a unit taken from later rows would make the first rows' weights
    depend on them (through rounding, and for EWA through the rate's unit).
    """
    amax = float(np.max(np.abs(Y[0]))) if Y.size else 0.0
    if not np.isfinite(amax) or amax == 0.0:
        return 1.0
    return float(np.ldexp(1.0, int(np.frexp(amax)[1])))


# ---------------------------------------------------------------------- experts
def _shareable_map(est):
    """The key of a pipeline's leading feature map, when experts can share it.

    A two-step :class:`StreamingPipeline` whose first step is a
    :class:`RandomFourierFeatures` seeded with an integer: its fitted map depends only on
    its parameters and the number of input features, so equal keys give equal maps.
    """
    if not isinstance(est, StreamingPipeline) or len(est.steps) != 2:
        return None
    first = est.steps[0][1]
    if type(first) is not RandomFourierFeatures:
        return None
    params = first.get_params()
    if not isinstance(params["random_state"], (int, np.integer)):
        return None
    return (params["n_components"], float(params["sigma"]), int(params["random_state"]))


def _prequential_task(*, estimator, X, y, delay, sample_weight, copy_state, parent_pid):
    """One expert's prequential pass on a private working copy (parallel backends)."""
    work = _working_copy(estimator, copy_state=copy_state, parent_pid=parent_pid)
    y_pred = _prequential_predict(work, X, y, delay=delay, sample_weight=sample_weight)
    return work, np.asarray(y_pred, dtype=np.float64)


def _predict_task(*, estimator, X):
    return np.asarray(estimator.predict(X), dtype=np.float64)


@fill_doc()
class AggregatingRegressor(StreamingRegressorMixin, RegressorMixin, _BaseComposition):
    """Online aggregation of streaming experts (BOA, ML-Poly or EWA), predict-then-update.

    Each row is predicted by every expert from its state before the row (prequentially);
    the aggregate predicts the convex combination ``ŷ_t = Σ_k p_{t,k} x_{t,k}`` of the
    experts' predictions ``x_{t,k}``; then every expert learns the row, and the weights
    are updated from the experts' losses on it. The weights ``p_t`` of row ``t`` use only
    the losses of rows ``< t`` (with ``delay``, of rows whose label has arrived), so the
    aggregate never looks ahead.

    Parameters
    ----------
    estimators : list of (str, estimator)
        The experts: streaming regressors with ``partial_fit`` and ``predict`` (this
        package's estimators and :class:`StreamingPipeline` chains take their vectorised
        ``prequential_predict``; others are driven row by row). Cloned when a stream
        starts. :func:`make_expert_grid` builds a grid of them.
    method : {"boa", "mlpol", "ewa"}, default="boa"
        The weight rule (see Notes): Bernstein online aggregation with adaptive
        per-expert rates, polynomially weighted averages with adaptive rates, or the
        exponentially weighted average with the fixed rate ``learning_rate``.
    loss : {"squared", "absolute"}, default="squared"
        The loss the weights are computed from (summed over targets).
    gradient : bool, default=True
        Apply the rule to the loss linearised at the aggregate's prediction,
        ``ℓ̃_t(x) = ∇ℓ_t(ŷ_t)·x`` (the gradient trick): the aggregate then competes with
        the best convex combination of the experts, not only the best expert.
    learning_rate : float, default=None
        ``η > 0`` of ``method="ewa"`` (required there; unused otherwise), in units of the
        loss of targets divided by ``loss_scale_``.
    history_size : int or None, default=10000
        Rows of ``weights_history_`` and ``predictions_history_`` kept (the latest);
        ``0`` keeps none, ``None`` every row of the stream.
    share_features : bool, default=True
        Experts that are two-step :class:`StreamingPipeline` chains starting with equal
        :class:`RandomFourierFeatures` (same ``n_components``, ``sigma`` and integer
        ``random_state``) share one fitted map: its features are computed once per call
        and fed to each of their final estimators. Predictions are the same either way.
    n_jobs : int, default=None
        Parallel jobs over the experts (joblib; ``None`` means 1 unless in a
        :func:`joblib.parallel_config` context). Results do not depend on it, nor on the
        backend (threads, processes, dask).

    Attributes
    ----------
    estimators_ : list of estimators, length K
        The fitted experts, in the order of ``estimators``. An expert whose features are
        shared (``share_features``) is held as its fitted final estimator, fed by
        ``feature_maps_[expert_features_[k]]``.
    feature_maps_ : list of RandomFourierFeatures
        The fitted shared feature maps.
    expert_features_ : tuple of int, length K
        The index in ``feature_maps_`` of each expert's map, ``-1`` when it has none.
    weights_ : ndarray of shape (K,)
        The mixture for the next row (non-negative, sums to one).
    weights_history_ : ndarray of shape (n_rows, K)
        The mixture used for each of the latest ``history_size`` rows.
    predictions_history_ : ndarray of shape (n_rows, K) or (n_rows, K, n_targets)
        The experts' prequential predictions of the same rows.
    cumulative_regret_ : ndarray of shape (K,)
        ``R_k = Σ_t r_{t,k}``: how much less loss (linearised with ``gradient``) expert
        ``k`` had than the aggregate, in units of ``loss_scale_``.
    loss_scale_ : float
        The unit of the losses: the power of two just above the largest ``|y|`` of the
        stream's first row (1 if zero). Multiplying the targets by a power of two leaves
        the weights unchanged.
    n_features_in_ : int
        Number of input features.
    {input_feature_names_in}
    {samples_seen}

    See Also
    --------
    make_expert_grid : A grid of ABO and SW-KRLS experts.
    FeaturePartitionEnsemble : A fixed average over feature blocks.
    sklearn_orfit.prequential_predict : Predict-then-update over a stream.

    Notes
    -----
    **Rules.** With the regrets ``r_{t,k} = ℓ_t(ŷ_t) − ℓ_t(x_{t,k})`` (times the row's
    ``sample_weight``; linearised losses with ``gradient``), the definitions of the
    ``opera`` R package:

    * BOA: ``S_k ← S_k + 2.2 r_k²``, ``η_k = S_k^(−1/2)``,
      ``R̃_k ← R̃_k + r_k − η_k r_k²``, and ``p_k ∝ η_k exp(η_k R̃_k)``. Parameter-free: the
      rates adapt to each expert's regret, and the rule is invariant to the scale of the
      losses.
    * ML-Poly: ``R_k ← R_k + r_k``, ``S_k ← S_k + r_k²``, ``p_k ∝ (R_k)_+ / S_k``
      (uniform while no ``R_k > 0``). Parameter-free.
    * EWA: ``p_k ∝ exp(η R_k)`` with the fixed ``η = learning_rate`` (for comparison:
      its best rate depends on the loss scale and the horizon).

    **Delay.** With ``prequential_predict(..., delay=d)`` the experts predict row ``t``
    from their state after rows ``< t − d`` and the weights of row ``t`` use the regrets
    of those rows only. As for every estimator of the package, every row is learned when
    the call returns (the last ``d + 1`` regrets are added after the last prediction).
    :meth:`fit` and :meth:`partial_fit` are prequential passes with ``delay=0``: the
    weights need the experts' predictions of each row before they learn it.

    **Per-row weights** (``sample_weight``) are passed to every expert and multiply
    each row's loss in the weight update; the predictions are those of the unweighted
    rows.

    **Cost.** A row costs the sum of the experts' costs (each expert's own vectorised
    ``prequential_predict`` over the call) plus ``O(K · n_targets)`` for the weights: a
    few operations on vectors of length ``K`` in a loop over the rows (``python
    benchmarks/bench_aggregation.py`` reports it, "weight recursion alone", against the
    experts' sum).
    Experts sharing a feature map save its computation (``O(n·d·D)`` per call) for all
    but one of them. With ``n_jobs > 1`` the experts run in parallel; each then learns on
    a copy of its state (``O(state)`` per call and expert), committed when all succeeded,
    so send large chunks. The history keeps ``O(history_size · K)`` numbers.

    **All or nothing.** A call that raises (bad input, an expert failing,
    ``KeyboardInterrupt``) leaves the aggregate and every expert as they were: run in
    this thread, the experts' own updates are undone through the package's update
    template (their undo records join the aggregate's; a foreign expert is copied before
    it learns); run in parallel, the experts learn on copies that are committed together.

    **Not guaranteed.** The regret bounds are for bounded losses; the experts' learning
    is not affected by the weights (no expert is ever dropped, so a long window that is
    poor now still learns and can regain weight).

    References
    ----------
    O. Wintenberger (2017), "Optimal learning with Bernstein online aggregation",
    Machine Learning 106, 119–141.

    P. Gaillard, G. Stoltz, T. van Erven (2014), "A second-order bound with excess
    losses", COLT.

    P. Gaillard, Y. Goude, "opera: Online Prediction by Expert Aggregation", R package.

    Examples
    --------
    {example_stream}
    >>> from sklearn_orfit import AggregatingRegressor, QREWRLSRegressor
    >>> agg = AggregatingRegressor([("short", QREWRLSRegressor(5)),
    ...                             ("long", QREWRLSRegressor(100))])
    >>> y_pred = agg.prequential_predict(X, y)
    >>> agg.weights_history_.shape, bool(agg.weights_[1] > 0.9)
    ((300, 2), True)
    """

    _parameter_constraints: dict = {
        "estimators": [list],
        "method": [StrOptions({"boa", "mlpol", "ewa"})],
        "loss": [StrOptions({"squared", "absolute"})],
        "gradient": ["boolean"],
        "learning_rate": [None, Interval(Real, 0, None, closed="neither")],
        "history_size": [None, Interval(Integral, 0, None, closed="left")],
        "share_features": ["boolean"],
        "n_jobs": [None, Integral],
    }

    def __init__(self, estimators, *, method="boa", loss="squared", gradient=True,
                 learning_rate=None, history_size=10_000, share_features=True, n_jobs=None):
        self.estimators = estimators
        self.method = method
        self.loss = loss
        self.gradient = gradient
        self.learning_rate = learning_rate
        self.history_size = history_size
        self.share_features = share_features
        self.n_jobs = n_jobs

    # ------------------------------------------------------------------ parameters
    def get_params(self, deep=True):
        """Parameters of the aggregate and, with ``deep``, of each expert by name.

        Parameters
        ----------
        deep : bool, default=True
            Include the experts and their parameters (``<name>__<parameter>``).

        Returns
        -------
        params : dict
            Parameter names mapped to their values.
        """
        return self._get_params("estimators", deep=deep)

    def set_params(self, **params):
        """Set parameters of the aggregate or of an expert (``<name>__<parameter>``).

        Mid-stream, any change but ``n_jobs`` makes the next learning call raise a
        ValueError that says to call :meth:`fit`.

        Parameters
        ----------
        **params : dict
            Parameters.

        Returns
        -------
        self : AggregatingRegressor
            This estimator.
        """
        self._set_params("estimators", **params)
        return self

    # ------------------------------------------------------------------ public API
    # fit, partial_fit, prequential_predict and predict: StreamingRegressorMixin's, over
    # _partial_fit and _predict_rows; the experts' parameters are validated when they
    # learn, so nested validation is on
    _skip_nested_validation = False

    def _predict_rows(self, X):
        """``Σ_k weights_[k] · expert_k(X)`` for validated rows, 2-D (no learning)."""
        # Σ_k p_k x_k, summed over the expert axis
        return np.einsum("nkt,k->nt", self._expert_predictions(X), self.weights_)

    @fill_doc()
    def predict_experts(self, X):
        """Every expert's prediction (no learning).

        {rows_parameters}

        Returns
        -------
        P : ndarray of shape (n_samples, K) or (n_samples, K, n_targets)
            Column ``k``: expert ``k``'s prediction.
        """
        X = check_rows(self, X)
        # every expert at the same call boundary (the sequential path learns into the
        # experts in place before it commits): read under the lock, never creating it
        with _held(self):
            P = self._expert_predictions(X)
        return P[:, :, 0] if self._n_targets is None else P

    def _expert_predictions(self, X):
        """Every expert's prediction of validated rows, ``(n_samples, K, n_targets)``."""
        preds = Parallel(n_jobs=self.n_jobs)(
            delayed(_predict_task)(estimator=est, X=Z)
            for est, Z in zip(self.estimators_, self._expert_inputs(X))
        )
        return self._stack(preds, X.shape[0])

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        subs = [get_tags(est) for _, est in self._templates()]
        tags.target_tags.multi_output = bool(subs) and all(
            t.target_tags.multi_output for t in subs)
        tags.regressor_tags.poor_score = any(t.regressor_tags.poor_score for t in subs)
        return tags

    def _expected_failed_checks(self):
        """scikit-learn checks the experts fail, with the reason."""
        out = {}
        for _, est in self._templates():
            out.update(expected_failed_checks(est))
        return out

    def __sklearn_is_fitted__(self):
        return "estimators_" in self.__dict__

    # ------------------------------------------------------------------ pickling
    # the history buffers hold rows past the kept ones (written by a call that then
    # failed, or room to grow): the pickle holds only the kept rows
    _BUFFERS = ("_weights_buf", "_preds_buf", "_hist_start", "_hist_stop")

    def __getstate__(self):
        state = super().__getstate__()
        for key in self._BUFFERS:
            state.pop(key, None)
        return state

    def __setstate__(self, state):
        super().__setstate__(state)
        if "weights_history_" in self.__dict__:
            self._weights_buf = self.__dict__["weights_history_"]
            self._preds_buf = self.__dict__["predictions_history_"]
            self._hist_start, self._hist_stop = 0, self._weights_buf.shape[0]

    # ------------------------------------------------------------------ internals
    def _templates(self):
        ests = self.estimators if isinstance(self.estimators, list) else []
        return [(name, est) for name, est in ests]

    def _check_experts(self):
        if not self.estimators:
            raise ValueError("estimators must be a non-empty list of (name, estimator).")
        try:
            names = [name for name, _ in self.estimators]
        except (TypeError, ValueError):
            raise ValueError("estimators must be a list of (name, estimator) pairs.") from None
        self._validate_names(names)
        for name, est in self.estimators:
            if not (hasattr(est, "partial_fit") and hasattr(est, "predict")):
                raise TypeError(
                    f"Expert {name!r} ({type(est).__name__}) needs partial_fit and predict.")
        if self.method == "ewa" and self.learning_rate is None:
            raise ValueError('method="ewa" needs a learning_rate (a float > 0).')

    def _reset(self):
        clear_fitted_state(self, private=("_n_targets", "_stream_deep_params", "_rule", *self._BUFFERS))

    def _start(self, X):
        """Fresh clones of the experts, grouped by shared feature map."""
        keys = [_shareable_map(est) if self.share_features else None
                for _, est in self.estimators]
        counts = {}
        for key in keys:
            if key is not None:
                counts[key] = counts.get(key, 0) + 1
        maps, index, estimators, feature_of = [], {}, [], []
        for key, (_, est) in zip(keys, self.estimators):
            if key is None or counts[key] < 2:
                estimators.append(clone(est))
                feature_of.append(-1)
                continue
            if key not in index:
                index[key] = len(maps)
                rff = clone(est.steps[0][1])
                rff.fit(X)
                maps.append(rff)
            estimators.append(clone(est.steps[1][1]))
            feature_of.append(index[key])
        return maps, estimators, tuple(feature_of)

    def _expert_inputs(self, X):
        """Each expert's input: ``X``, or its shared map's features (computed once)."""
        Z = [m.transform(X) for m in self.feature_maps_]
        return [X if f < 0 else Z[f] for f in self.expert_features_]

    @staticmethod
    def _stack(preds, n):
        cols = [np.asarray(p, dtype=np.float64).reshape(n, -1) for p in preds]
        P = np.stack(cols, axis=1)  # (n, K, T)
        return P

    def _partial_fit(self, X, y, *, predict, reset, delay=0, sample_weight=None):
        """One learning call, all-or-nothing (the package's update template)."""
        with stream_update(self, check_params=False):
            first = reset or "estimators_" not in self.__dict__
            if first:
                self._reset()
                self._check_experts()
            else:
                check_deep_params(
                    self, built="the experts and the weights were built", ignore=_may_change,
                    note=" (n_jobs may change at any time)")
            X, Y, y_ndim = validate_stream(self, X, y, reset=first)
            n = X.shape[0]
            w = check_stream_sample_weight(sample_weight, n, reset=reset)
            y_in = Y[:, 0] if y_ndim == 1 else Y
            if first:
                maps, estimators, feature_of = self._start(X)
                rule = _new_rule_state(len(estimators))
                scale = _loss_scale(Y)
            else:
                maps, estimators, feature_of = (
                    self.feature_maps_, self.estimators_, self.expert_features_)
                rule = {k: v.copy() for k, v in self._rule.items()}
                scale = self.loss_scale_
            Z = [m.transform(X) for m in maps]
            inputs = [X if f < 0 else Z[f] for f in feature_of]
            extra = {"delay": delay, "sample_weight": w}
            if effective_n_jobs(self.n_jobs) == 1:
                preds = []
                for est, Xk in zip(estimators, inputs):
                    if not first:
                        # a foreign expert: put back from a copy if this call fails
                        undo_on_rollback(est)
                    preds.append(_prequential_predict(est, Xk, y_in, **extra))
            else:
                results = Parallel(n_jobs=self.n_jobs)(
                    delayed(_prequential_task)(
                        estimator=est, X=Xk, y=y_in, copy_state=not first,
                        parent_pid=os.getpid(), **extra)
                    for est, Xk in zip(estimators, inputs)
                )
                estimators = [r[0] for r in results]
                preds = [r[1] for r in results]
            P = self._stack(preds, n)
            if P.shape[2] != Y.shape[1]:
                raise ValueError(
                    f"The experts predict {P.shape[2]} target(s) but y has {Y.shape[1]}.")
            if not np.isfinite(P).all():
                finite = np.isfinite(P).all(axis=(0, 2))
                bad = [name for (name, _), ok in zip(self.estimators, finite) if not ok]
                raise ValueError(f"Experts {bad} predicted NaN or infinity.")
            Y_pred, W = aggregate_predictions(
                P, Y, state=rule, method=self.method, loss=self.loss, gradient=self.gradient,
                learning_rate=self.learning_rate, delay=delay, sample_weight=w, scale=scale)
            weights = _rule_weights(rule, method=self.method, learning_rate=self.learning_rate)
            state = {
                "estimators_": list(estimators),
                "weights_": weights,
                "cumulative_regret_": rule["regret"].copy(),
                "_rule": rule,
                "n_samples_seen_": (0 if first else self.n_samples_seen_) + n,
            }
            state.update(self._history(W, P if y_ndim == 2 else P[:, :, 0], first))
            if first:
                state.update(
                    feature_maps_=maps, expert_features_=feature_of, loss_scale_=scale,
                    _n_targets=None if y_ndim == 1 else Y.shape[1],
                    _stream_deep_params=record_deep_params(self, ignore=_may_change),
                )
            self.__dict__.update(state)  # the commit, after every expert succeeded
        if not predict:
            return None
        return Y_pred[:, 0] if y_ndim == 1 else Y_pred

    def _history(self, W, P, first):
        """The new history rows appended to the kept ones (new attributes, not written
        into the rows the current state shows)."""
        d = self.__dict__
        wb, pb = (None, None) if first else (d.get("_weights_buf"), d.get("_preds_buf"))
        start, stop = (0, 0) if first else (d.get("_hist_start", 0), d.get("_hist_stop", 0))
        limit = self.history_size
        wb2, s2, e2 = _append_rows(wb, start, stop, W, limit)
        pb2, _, _ = _append_rows(pb, start, stop, P, limit)
        if wb2 is None:
            K = W.shape[1]
            return {"weights_history_": np.empty((0, K)),
                    "predictions_history_": np.empty((0, *P.shape[1:])),
                    "_weights_buf": None, "_preds_buf": None,
                    "_hist_start": 0, "_hist_stop": 0}
        return {"weights_history_": wb2[s2:e2], "predictions_history_": pb2[s2:e2],
                "_weights_buf": wb2, "_preds_buf": pb2, "_hist_start": s2, "_hist_stop": e2}


# ---------------------------------------------------------------------- grids
def make_expert_grid(*, abo_windows=(50, 200, 1000), sigmas=(0.5, 1.0), n_components=(1024,),
                     abo_alphas=(0.0,), forgetting_factors=(1.0,), krls_windows=(50, 200),
                     krls_length_scales=None, krls_alphas=(1e-2,), random_state=0):
    """A grid of ABO and SW-KRLS experts from parameter lists, for :class:`AggregatingRegressor`.

    ABO experts are ``StreamingPipeline([("rff", RandomFourierFeatures(D, sigma=σ)),
    ("qrewrls", QREWRLSRegressor(N, forgetting_factor=λ, alpha=α))])``, one per
    ``(σ, D, N, α, λ)``; the experts of one ``(σ, D)`` get the same integer seed, so
    the aggregate computes their features once per call (``share_features``).
    SW-KRLS experts are ``SlidingWindowKRLSRegressor(N, length_scale=s, alpha=α)``.

    Parameters
    ----------
    abo_windows : sequence of int, default=(50, 200, 1000)
        ABO windows ``N`` (empty: no ABO expert).
    sigmas : sequence of float, default=(0.5, 1.0)
        ``sigma`` of the random Fourier features.
    n_components : sequence of int, default=(1024,)
        Numbers of random features ``D``.
    abo_alphas : sequence of float, default=(0.0,)
        Ridge ``α`` of the ABO experts (0: minimum norm).
    forgetting_factors : sequence of float, default=(1.0,)
        ``λ`` of the ABO experts.
    krls_windows : sequence of int, default=(50, 200)
        SW-KRLS windows (empty: no SW-KRLS expert).
    krls_length_scales : sequence of float, default=None
        SW-KRLS length scales; ``None``: ``1/σ`` for each ``σ`` of ``sigmas`` (the kernel
        the random features approximate).
    krls_alphas : sequence of float, default=(1e-2,)
        SW-KRLS ridge ``α``.
    random_state : int, RandomState instance or None, default=0
        Draws one integer seed per ``(σ, D)``.

    Returns
    -------
    estimators : list of (str, estimator)
        Named experts, ABO first.

    Examples
    --------
    >>> from sklearn_orfit import make_expert_grid
    >>> grid = make_expert_grid(abo_windows=(50, 500), sigmas=(1.0,), krls_windows=(100,))
    >>> [name for name, _ in grid]
    ['abo-N50-s1-D1024', 'abo-N500-s1-D1024', 'krls-N100-l1']
    """
    rng = check_random_state(random_state)
    multi_a, multi_l = len(abo_alphas) > 1, len(forgetting_factors) > 1
    out = []
    for sigma in sigmas:
        for D in n_components:
            seed = int(rng.randint(np.iinfo(np.int32).max))
            for N in abo_windows:
                for alpha in abo_alphas:
                    for lam in forgetting_factors:
                        name = f"abo-N{N}-s{sigma:g}-D{D}"
                        name += f"-a{alpha:g}" if multi_a else ""
                        name += f"-l{lam:g}" if multi_l else ""
                        out.append((name, StreamingPipeline([
                            ("rff", RandomFourierFeatures(D, sigma=sigma, random_state=seed)),
                            ("qrewrls", QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha)),
                        ])))
    scales = [1.0 / s for s in sigmas] if krls_length_scales is None else krls_length_scales
    multi_ka = len(krls_alphas) > 1
    for N in krls_windows:
        for ls in scales:
            for alpha in krls_alphas:
                name = f"krls-N{N}-l{ls:g}" + (f"-a{alpha:g}" if multi_ka else "")
                out.append((name, SlidingWindowKRLSRegressor(N, length_scale=ls, alpha=alpha)))
    return out
