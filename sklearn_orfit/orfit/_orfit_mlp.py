"""ORFit for a multilayer perceptron: one-pass learning with orthogonal Jacobian updates.

Reference: Min, Ahn and Azizan, "One-Pass Learning via Bridging Orthogonal Gradient
Descent and Recursive Least-Squares", CDC 2022 — §3 (the update and why its basis uses
the gradient ``∇f_i(w_{i−1})`` at the parameters current when a point is learned) and §6
(overparameterised nonlinear models); the user guide's ORFit-MLP section.

Notation: ``f(X; w)`` a multilayer perceptron with parameters flattened to ``w ∈ ℝᴾ`` (the
weight matrices, then the intercepts, as scikit-learn's ``MLPRegressor`` packs them). A
batch ``X_b`` (``n×d``) with targets ``Y_b`` (``n×c``) is learned by one step::

    J  = ∂f(X_b; w)/∂w                       (n·c)×P, one row per sample and output,
                                             by vectorised backpropagation
    R  = f(X_b; w) − Y_b                     flattened like the rows of J
    J̃  = J − (J Bᵀ) B                        B = Uᵀ: the memory of past Jacobian rows
    w ← w − J̃ᵀ (J J̃ᵀ)⁺ R                     (the linear step of ORFitRegressor, rows J)

then the memory absorbs ``J̃`` with :class:`~sklearn_orfit.ORFitRegressor`'s code
(Gram–Schmidt growth, incremental PCA, latest or random directions).
"""

import math
from numbers import Integral, Real

import numpy as np
from scipy.special import expit
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.utils import check_random_state

from .._compat import Interval, StrOptions
from .._docstrings import fill_doc
from ._orfit import _EPS, _ORFitMemoryMixin, _all_finite, _norm, _orthogonal_step
from .._streaming._base import (
    VALIDATION_ATTRIBUTES, OneRowLearnMixin, StreamingRegressorMixin, clear_fitted_state,
)
from .._streaming._validation import check_fitted_fast, check_one_row, check_rows

__all__ = ["ORFitMLPRegressor"]


def _relu(z):
    return np.maximum(z, 0.0)


# activation of the hidden layers, and its derivative in terms of the activation's output
_ACTIVATIONS = {"identity": None, "logistic": expit, "tanh": np.tanh, "relu": _relu}
_DERIVATIVES = {
    "identity": None,
    "logistic": lambda a: a * (1.0 - a),
    "tanh": lambda a: 1.0 - a * a,
    "relu": lambda a: (a > 0.0).astype(np.float64),
}


@fill_doc()
class ORFitMLPRegressor(
    _ORFitMemoryMixin, OneRowLearnMixin, StreamingRegressorMixin, RegressorMixin,
    BaseEstimator
):
    """One-pass learning of a multilayer perceptron by orthogonal recursive fitting.

    The model ``f(x; w)`` is a multilayer perceptron (hidden activation ``activation``,
    identity output, as :class:`~sklearn.neural_network.MLPRegressor`) with parameters
    flattened to ``w``. Each batch (a single row is a batch of one) is learned in one
    step along the part of its Jacobian ``J = ∂f(X_b; w)/∂w`` orthogonal to a memory of
    the Jacobians of past points, each taken at the parameters current when the point was
    learned (the ORFit paper's §6)::

        J̃ = J − U(UᵀJ),   w ← w − J̃ᵀ (J J̃ᵀ)⁺ (f(X_b; w) − Y_b)

    After the step the *linearised* model ``f(X; w) + J(w_new − w)`` fits the batch
    exactly, and the linearised predictions on every remembered point are unchanged; the
    actual predictions on past points change only to second order in the steps (the
    network's curvature). The memory is the one of :class:`ORFitRegressor`: unlimited,
    or the top-``m`` incremental PCA, the ``m`` latest or ``m`` random directions;
    ``memory_size=0`` is One-step SGD (a minimum-norm step that fits the batch to first
    order and protects nothing).

    Parameters
    ----------
    hidden_layer_sizes : array-like of shape (n_layers - 2,), default=(64,)
        Units of each hidden layer. ``()`` is the affine model ``xᵀW + b``, for which the
        method is :class:`ORFitRegressor` on ``[X, 1]``.
    activation : {"identity", "logistic", "tanh", "relu"}, default="tanh"
        Activation of the hidden layers (the output is the identity). A smooth one
        (``"tanh"``, ``"logistic"``) makes the forgetting second order; with ``"relu"`` it
        is second order only away from the kinks.
    memory_size : int or None, default=None
        Maximum number ``m`` of stored Jacobian directions (``None``: every direction;
        ``0``: none, One-step SGD). Each sample contributes up to ``n_outputs`` of them.
    memory_policy : {"pca", "latest", "random"}, default="pca"
        How the memory is reduced to ``m`` directions, as in :class:`ORFitRegressor`.
    batch_size : int or None, default=1
        Rows per step in :meth:`fit` (``None``: all of ``X`` as one batch).
        :meth:`partial_fit` learns the rows of one call as one batch, and
        :meth:`prequential_predict` one row at a time.
    rtol : float or None, default=None
        Relative cut-off below which a direction of ``J̃`` counts as already spanned (as in
        :class:`ORFitRegressor`; ``None`` uses ``eps · max(n_params, k + n·c)``).
    random_state : int, RandomState instance or None, default=None
        Seeds the initial weights (Glorot-uniform, drawn as
        :class:`~sklearn.neural_network.MLPRegressor` draws them: the same seed gives the
        same initial network) and, from the seed afresh, the ``"random"`` memory policy.

    Attributes
    ----------
    params_ : ndarray of shape (n_params,)
        The flattened parameters ``w``: the weight matrices of every layer (row-major),
        then the intercepts.
    coefs_ : list of ndarray
        ``coefs_[i]`` (``fan_in × fan_out``): the weights of layer ``i``, views of
        ``params_`` (as :class:`~sklearn.neural_network.MLPRegressor`'s attribute).
    intercepts_ : list of ndarray
        ``intercepts_[i]`` (``fan_out``): the intercepts of layer ``i``, views of
        ``params_``.
    components_ : ndarray of shape (n_components, n_params)
        The memory: orthonormal rows spanning the remembered Jacobian directions (see
        :class:`ORFitRegressor`).
    singular_values_ : ndarray of shape (n_components,)
        Their singular values (``"pca"``) or the norms of the new parts when they were
        added (``"latest"``, ``"random"``).
    n_features_in_ : int
        Number of input features.
    {feature_names_in}
    n_outputs_ : int
        Number of outputs ``c``.
    n_samples_seen_ : int
        Rows learned since the stream started (reset by :meth:`fit`).

    See Also
    --------
    ORFitRegressor : The linear model (``hidden_layer_sizes=()`` on ``[X, 1]``).
    sklearn.neural_network.MLPRegressor : The same network trained by SGD or Adam.

    Notes
    -----
    **Per-row weights** (``sample_weight``) are not accepted, for the reason given in
    :class:`ORFitRegressor`'s Notes (every row is fitted exactly).

    **Cost.** A step on ``n`` rows with ``c`` outputs, ``P`` parameters and ``k`` stored
    directions: the forward pass and the Jacobian by backpropagation, ``O(n·c·P)`` (one
    vectorised pass over the layers, ``n·c·P`` floats of memory), the projection
    ``J − (J Bᵀ) B``, ``O(n·c·P·k)``, and the memory's update as in
    :class:`ORFitRegressor` (a single row with one output takes no factorisation; a bounded
    ``"pca"`` memory that is full takes an ``O((m + n·c)²·P)`` SVD rotation per step). The
    memory holds up to ``min(P, m)`` rows of ``P`` floats: with ``memory_size=None`` it
    grows by up to ``c`` rows per sample, so long streams need a bounded memory.

    **What is kept.** The guarantee is about the linearisations: the step is orthogonal
    to the remembered Jacobians, so ``J_i(w_{i−1}) Δw = 0`` for every remembered point
    ``i``. The network's prediction on that point changes by
    ``(J_i(w) − J_i(w_{i−1})) Δw + O(‖Δw‖²)``: second order in the steps, small when
    the steps are small (targets close to the current predictions, wide networks), but
    not zero, and it accumulates over a stream. A spanned batch (Jacobian rows in the
    span of the memory, e.g. more sample-outputs than parameters with unlimited memory)
    takes the pseudo-inverse step and issues a
    :class:`~sklearn_orfit.exceptions.SpannedBatchWarning` when part of its residual is left.

    **A stream ordered by its target, and a bounded memory.** The guarantee covers only
    the directions the memory still holds. On rotated digits streamed by increasing angle
    (100 images of 28×28 pixels, angles in ``[0, π]``, one row per call,
    ``hidden_layer_sizes=(32,)``, ``m = 10``; 10 seeds) every residual has the same sign,
    and each step, orthogonal to the memory but not to the directions it dropped, pushes
    the earlier images towards the new angle: with ``"latest"`` or ``"random"`` (or
    ``memory_size=0``) the network ends predicting about the latest angle for every input,
    test RMSE 1.49, 1.54 (1.60) against 0.91 for the stream's mean. The drift of the past
    fits is then first order, the part of their gradients the memory gave up (mean 1.50,
    1.58 rad over the seen images), not the staleness of the stored gradients (0.19,
    0.22 rad); :class:`ORFitRegressor` with the same memories fails alike (1.39, 1.51),
    and neither damping the steps (1.06, 1.02 at a tenth), standardised targets (1.46,
    1.48) nor re-linearising the ``m`` latest rows (1.24) brings it to the mean. The
    ``"pca"`` memory and an unlimited one lose little or nothing to first order and end
    at 0.74 and 0.80 (below the mean on 7 and 9 seeds of 10); their drift is the
    staleness of the stored gradients (0.54, 0.76 rad), which only re-linearising every
    past row would remove (at ``O(t·P)`` a step, with every row kept).
    ``python benchmarks/bench_orfit_mlp_drift.py --seeds 10`` measures the drift
    step by step; see the user guide.

    **A call that raises changes nothing** (bad input, an overflow, an exception or
    ``KeyboardInterrupt`` half-way); the parameters are those the stream started with:
    ``set_params`` before a :meth:`partial_fit` raises ``ValueError`` (call :meth:`fit`).

    References
    ----------
    Y. Min, K. Ahn and N. Azizan, "One-Pass Learning via Bridging Orthogonal Gradient
    Descent and Recursive Least-Squares" (ORFit), IEEE CDC 2022, §3 and §6.
    X. Glorot and Y. Bengio, "Understanding the difficulty of training deep feedforward
    neural networks", AISTATS 2010 (the initialisation).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import ORFitMLPRegressor
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(30, 3))
    >>> y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    >>> reg = ORFitMLPRegressor((32,), random_state=0).fit(X, y)   # one pass
    >>> reg.params_.shape, reg.components_.shape       # one direction per row
    ((161,), (30, 161))
    >>> x_new, y_new = rng.normal(size=(1, 3)), np.array([0.5])
    >>> J, f = reg.jacobian(x_new), reg.predict(x_new)
    >>> w = reg.params_
    >>> reg = reg.partial_fit(x_new, y_new)
    >>> bool(np.allclose(f + J @ (reg.params_ - w), y_new))  # linearised: fitted exactly
    True
    """

    _parameter_constraints: dict = {
        "hidden_layer_sizes": ["array-like", Interval(Integral, 1, None, closed="left")],
        "activation": [StrOptions({"identity", "logistic", "tanh", "relu"})],
        "memory_size": [Interval(Integral, 0, None, closed="left"), None],
        "memory_policy": [StrOptions({"pca", "latest", "random"})],
        "batch_size": [Interval(Integral, 1, None, closed="left"), None],
        "rtol": [Interval(Real, 0, None, closed="left"), None],
        "random_state": ["random_state"],
    }

    # parameters the learned state depends on: a change by set_params mid-stream is
    # refused (check_stream_params)
    _stream_params = ("hidden_layer_sizes", "activation", "memory_size", "memory_policy",
                      "batch_size", "rtol", "random_state")

    def __init__(
        self,
        hidden_layer_sizes=(64,),
        *,
        activation="tanh",
        memory_size=None,
        memory_policy="pca",
        batch_size=1,
        rtol=None,
        random_state=None,
    ):
        self.hidden_layer_sizes = hidden_layer_sizes
        self.activation = activation
        self.memory_size = memory_size
        self.memory_policy = memory_policy
        self.batch_size = batch_size
        self.rtol = rtol
        self.random_state = random_state

    # ------------------------------------------------------------------ public API
    # fit, partial_fit, prequential_predict and learn_one: StreamingRegressorMixin's
    # template, in the steps of the memory mixin (ORFit's)
    def _predict_rows(self, X):
        """Predictions of validated rows, 2-D (the delayed-label path)."""
        return self._forward(X, self.params_)[-1]

    def predict_one(self, x):
        """Predict one row with only cheap checks (shape, dtype, finiteness).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.

        Returns
        -------
        y_pred : float or ndarray of shape (n_outputs,)
            ``f(x; w)``.
        """
        check_fitted_fast(self, "params_")
        self._check_stream_params()
        x = check_one_row(x, n_features=self.n_features_in_)
        out = self._forward(x[None, :], self.params_)[-1][0]
        return float(out[0]) if self._n_targets is None else out

    @fill_doc()
    def jacobian(self, X):
        """The Jacobian of the network's outputs with respect to its parameters.

        {rows_parameters}

        Returns
        -------
        J : ndarray of shape (n_samples * n_outputs, n_params)
            ``J[i·c + j] = ∂f_j(x_i; w)/∂w`` at the current parameters ``params_``.
        """
        X = check_rows(self, X)
        return self._jacobian(self._forward(X, self.params_), self.params_)

    @property
    def coefs_(self):
        return self._unpack(self.params_)[0]

    @property
    def intercepts_(self):
        return self._unpack(self.params_)[1]

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        # one pass, one step per row: not a converged fit of the generic test data
        tags.regressor_tags.poor_score = True
        tags.non_deterministic = self.random_state is None
        return tags

    # ------------------------------------------------------------------ the network
    def _unpack(self, w):
        """Views ``(coefs, intercepts)`` of the flat parameters (scikit-learn's packing)."""
        units = self._layer_units
        coefs, intercepts, start = [], [], 0
        for fan_in, fan_out in zip(units[:-1], units[1:]):
            coefs.append(w[start : start + fan_in * fan_out].reshape(fan_in, fan_out))
            start += fan_in * fan_out
        for fan_out in units[1:]:
            intercepts.append(w[start : start + fan_out])
            start += fan_out
        return coefs, intercepts

    def _forward(self, X, w):
        """The activations of every layer, ``[X, a_1, …, f(X; w)]``."""
        coefs, intercepts = self._unpack(w)
        act = _ACTIVATIONS[self.activation]
        acts = [X]
        last = len(coefs) - 1
        for i, (W, b) in enumerate(zip(coefs, intercepts)):
            z = acts[-1] @ W
            z += b
            if i < last and act is not None:
                z = act(z)
            acts.append(z)
        return acts

    def _jacobian(self, acts, w):
        """``∂f(X; w)/∂w`` by backpropagation, vectorised over samples and outputs.

        ``δ_l[i, j]`` is ``∂f_j(x_i)/∂z_l`` (``z_l`` the pre-activation of layer ``l``):
        ``δ_L[i, j] = e_j``, ``δ_{l−1} = (δ_l W_lᵀ) ⊙ g'(a_{l−1})``, and the rows of the
        Jacobian are ``a_{l−1}[i] ⊗ δ_l[i, j]`` (weights) and ``δ_l[i, j]`` (intercepts).
        Cost ``O(n·c·P)``.
        """
        coefs, _ = self._unpack(w)
        units = self._layer_units
        n, c, n_layers = acts[0].shape[0], units[-1], len(coefs)
        J = np.empty((n, c, w.shape[0]))
        starts = np.cumsum([0] + [a * b for a, b in zip(units[:-1], units[1:])])
        b_starts = starts[-1] + np.cumsum([0] + list(units[1:]))
        deriv = _DERIVATIVES[self.activation]
        delta = np.broadcast_to(np.eye(c), (n, c, c))
        for layer in range(n_layers - 1, -1, -1):
            a_prev = acts[layer]
            fan_in, fan_out = units[layer], units[layer + 1]
            block = J[:, :, starts[layer] : starts[layer + 1]].reshape(n, c, fan_in, fan_out)
            np.multiply(a_prev[:, None, :, None], delta[:, :, None, :], out=block)
            J[:, :, b_starts[layer] : b_starts[layer + 1]] = delta
            if layer:
                delta = delta @ coefs[layer].T
                if deriv is not None:
                    delta *= deriv(acts[layer])[:, None, :]
        return J.reshape(n * c, w.shape[0])

    # ------------------------------------------------------------------ state
    def _init_state(self, n_features, n_outputs, y_ndim):
        clear_fitted_state(self, keep=VALIDATION_ATTRIBUTES)
        hidden = [int(h) for h in np.ravel(np.asarray(self.hidden_layer_sizes, dtype=object))]
        if any(h < 1 for h in hidden):
            raise ValueError(
                f"hidden_layer_sizes must be positive integers; got {self.hidden_layer_sizes}."
            )
        self._layer_units = [n_features, *hidden, n_outputs]
        rng = check_random_state(self.random_state)
        # Glorot-uniform as scikit-learn's MLPRegressor (_init_coef): layer by layer, the
        # weights then the intercepts, from the same generator
        factor = 2.0 if self.activation == "logistic" else 6.0
        coefs, intercepts = [], []
        for fan_in, fan_out in zip(self._layer_units[:-1], self._layer_units[1:]):
            bound = np.sqrt(factor / (fan_in + fan_out))
            coefs.append(rng.uniform(-bound, bound, (fan_in, fan_out)).ravel())
            intercepts.append(rng.uniform(-bound, bound, fan_out))
        self.params_ = np.concatenate(coefs + intercepts)
        self.n_outputs_ = n_outputs
        self._init_memory(self.params_.shape[0])
        # the "random" policy draws from the seed afresh (with hidden_layer_sizes=() the
        # same draws as ORFitRegressor's)
        self._rng = check_random_state(self.random_state)
        self.n_samples_seen_ = 0

    def _check_predict_params(self):
        # the network's shape and activation are parameters: after set_params the
        # learned weights no longer mean what they did, so predicting is refused too
        self._check_stream_params()

    def _direction(self, Xb, Yb):
        """``(Δw, J, P, step)``: the step ``w_new = w − Δw`` on a batch, without learning
        it (``step`` holds what the memory absorbs)."""
        w = self.params_
        acts = self._forward(Xb, w)
        P = acts[-1]
        J = self._jacobian(acts, w)
        R = (P - Yb).reshape(-1, 1)
        B = self._basis[: self._n_dirs]
        step = _orthogonal_step(J, R, B, rtol=self.rtol)
        return step[0][:, 0], J, P, step

    def _step(self, Xb, Yb):
        """Learn one batch; commit the new state only at the end.

        Returns the predictions made before the step and whether part of the batch's
        residual (to first order) had to be left (a spanned batch).
        """
        dw, J, P, (_, left, C, S, V, Qt, _) = self._direction(Xb, Yb)
        w_new = self.params_ - dw
        unfitted = bool(_norm(left) > np.sqrt(_EPS) * (_norm(Yb) + _norm(P)))
        if not (_all_finite(w_new) and _all_finite(P) and _all_finite(J)
                and _all_finite(C) and math.isfinite(float(S.sum()))):
            raise ValueError(
                "ORFit-MLP's update overflowed: the parameters, the predictions or the "
                "Jacobian exceed the float64 range (≈1.8e308); rescale X and y, e.g. with "
                "RecursiveStandardScaler."
            )
        memory = self._update_memory(B=self._basis[: self._n_dirs], C=C, S=S, V=V, Qt=Qt,
                                     m_max=self.memory_size)
        # commit
        self.params_ = w_new
        self._commit_memory(memory)
        self.n_samples_seen_ += Xb.shape[0]
        return P, unfitted
