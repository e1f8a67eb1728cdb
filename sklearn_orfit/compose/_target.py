"""A streaming ``TransformedTargetRegressor``: the target z-scored without look-ahead.

scikit-learn's :class:`~sklearn.compose.TransformedTargetRegressor` fits its transformer
on the whole of ``y`` and has no ``partial_fit``, so it can neither learn a stream nor be
evaluated prequentially (user guide: :ref:`prequential`). This module's
:class:`StreamingTransformedTargetRegressor` standardises each target with the running
statistics of the targets *before* it (those of :class:`~sklearn_orfit.
RecursiveStandardScaler`) and maps each prediction back with the statistics of exactly
the rows the model has learned.
"""

import contextvars

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils import get_tags

from .._compat import HasMethods
from .._docstrings import fill_doc
from ._pipeline import (
    changed_stream_params,
    check_deep_params,
    record_deep_params,
    undo_on_rollback,
)
from .._streaming._prequential import _check_takes_weights, _is_fitted
from .._streaming._prequential import prequential_predict as _prequential_predict
from ..abo._qr_ewrls import QREWRLSRegressor
from .._streaming._base import StreamingRegressorMixin
from ..preprocessing import RecursiveStandardScaler, _constant

__all__ = ["StreamingTransformedTargetRegressor"]


# The per-row statistics of the scaler's prequential_transform in progress (a list of
# blocks), when a caller asked for them; see _TargetScaler.
_CAPTURE = contextvars.ContextVar("sklearn_orfit_target_statistics", default=None)


class _TargetScaler(RecursiveStandardScaler):
    """:class:`RecursiveStandardScaler` that can report, during
    :meth:`prequential_transform`, the statistics it scaled each row with.

    The statistics are the scaler's own (its prefix Welford recursion in units ``2^e``,
    and its rule for constant columns): nothing is recomputed here. Outside a
    :func:`_capture` block it is exactly a :class:`RecursiveStandardScaler`.
    """

    def _apply_scaled(self, Xs, mean_s, var_s, n, e):
        blocks = _CAPTURE.get()
        if blocks is not None and np.ndim(mean_s) == 2:
            # a block of prequential_transform: row t's statistics before it, in units 2^e
            mean = np.ldexp(mean_s, e)
            with np.errstate(over="ignore"):
                scale = np.where(
                    _constant(var_s, mean_s, n), 1.0, np.ldexp(np.sqrt(var_s), e)
                )
            blocks.append((mean, scale))
        return super()._apply_scaled(Xs, mean_s, var_s, n, e)


def _map_back(P, mean, scale):
    """``P · scale + mean`` (standardised predictions back in the units of ``y``)."""
    with np.errstate(over="ignore", invalid="ignore"):
        Y = P * scale + mean
    if not np.isfinite(Y).all():
        raise ValueError(
            "the predictions mapped back to the units of y (prediction · scale + mean) "
            "exceed the float64 range (≈1.8e308) or are not finite; rescale y."
        )
    return Y


@fill_doc()
class StreamingTransformedTargetRegressor(StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """A streaming regressor on a recursively standardised target (no look-ahead).

    The streaming counterpart of :class:`~sklearn.compose.TransformedTargetRegressor`
    with a standard scaler: the inner regressor learns each target ``y_t`` as
    ``z_t = (y_t − mean_{<t}) / std_{<t}``, standardised with the statistics of the
    targets *before* it, and every prediction is mapped back,
    ``ŷ = mean + std · regressor.predict(X)``, with the statistics of the targets the
    regressor has learned. The statistics are those of
    :class:`~sklearn_orfit.RecursiveStandardScaler` (held, fitted on ``y``, as
    ``transformer_``). Unlike :class:`~sklearn.compose.TransformedTargetRegressor`, it
    has :meth:`partial_fit` and :meth:`prequential_predict`, so it can learn a stream,
    be chained in a :class:`~sklearn_orfit.StreamingPipeline`, and be scored by
    :func:`~sklearn_orfit.model_selection.make_prequential_scorer`.

    Parameters
    ----------
    regressor : estimator with ``partial_fit`` and ``predict``, default=None
        The regressor of the standardised target, cloned when a stream starts.
        ``None`` means :class:`~sklearn_orfit.QREWRLSRegressor()`. Any scikit-learn
        regressor with ``partial_fit`` works (e.g.
        :class:`~sklearn.linear_model.SGDRegressor`, one-dimensional ``y`` only).
    with_mean : bool, default=True
        Subtract the running mean of ``y`` (and add it back to the predictions): a
        model without intercept, such as :class:`~sklearn_orfit.QREWRLSRegressor`,
        then follows the level of the series.
    with_std : bool, default=True
        Divide by the running standard deviation of ``y`` (and multiply the
        predictions by it), so that the regressor sees targets of unit scale whatever
        the units of ``y``.

    Attributes
    ----------
    regressor_ : estimator
        The fitted clone of ``regressor``; it has learned the standardised targets.
    transformer_ : RecursiveStandardScaler
        The running statistics of the targets learned since the last :meth:`fit`
        (``transformer_.mean_``, ``transformer_.scale_``, one column per target); a
        private subclass that also reports the statistics each row was scaled with.
    n_samples_seen_ : int
        Rows learned since the last :meth:`fit`.
    n_features_in_ : int
        Number of features.
    {feature_names_in}

    See Also
    --------
    sklearn.compose.TransformedTargetRegressor : Batch analogue (the transform is fitted
        on all of ``y``: look-ahead in a stream).
    sklearn_orfit.RecursiveStandardScaler : The same statistics for features.
    sklearn_orfit.prequential_predict : Predict-then-update for any estimator.

    Notes
    -----
    **No look-ahead.** Row ``t`` of a stream (counted from the last :meth:`fit`) is
    learned with ``z_t = (y_t − mean_{<t}) / std_{<t}``, the mean and (population)
    standard deviation of ``y_0 … y_{t−1}`` computed as
    :meth:`RecursiveStandardScaler.prequential_transform <sklearn_orfit.
    RecursiveStandardScaler.prequential_transform>` computes them (a constant past has
    scale 1, as :class:`~sklearn.preprocessing.StandardScaler`); the statistics then
    absorb ``y_t``. ``z_t`` thus depends on ``y_0 … y_t`` only, and is the same whether
    the stream arrives in one call or row by row. A standard deviation needs two
    targets, so with ``with_std=True`` the first two rows of a stream are learned with
    ``z = 0`` (each target taken as its past mean). The start is then free of the units
    of ``y``: for ``c · y`` (``c > 0``) the regressor learns the same ``z`` as for ``y``
    and the predictions are ``c · ŷ`` (exactly when ``c`` is a power of two), whatever
    the regressor — unless all the targets before some later row are equal (their
    scale is then 1). With ``with_std=False``, ``z_t = y_t − mean_{<t}`` (``0`` for the
    first row when ``with_mean=True``).

    :meth:`prequential_predict` gives ``ŷ[t]`` from the state that has learned rows
    ``< t − delay``: the regressor's prediction mapped back with the statistics of
    exactly those rows. Before the first row of a stream there are none, and ``ŷ`` is
    0, the package's convention. This is one pass: the per-row statistics come from
    the scaler's prefix recursion, and :func:`~sklearn_orfit.prequential_predict` of
    the regressor runs on the standardised targets with the same ``delay`` (vectorised
    for every regressor of this package at ``delay=0``; for others, one ``predict``
    and one ``partial_fit`` per row). The predictions equal those of a loop of
    :meth:`predict` then :meth:`partial_fit` over single rows, up to rounding (the loop
    merges the statistics one row at a time, the pass by prefix sums). See the user
    guide's chapter on prequential evaluation (:ref:`prequential`).

    :meth:`predict` maps the regressor's predictions back with the current statistics.

    **Cost.** The statistics cost ``O(n_samples · n_targets)`` per call, on top of the
    regressor's own cost on the same rows. Each call validates its input three times
    (here, in the scaler and in the regressor): a fixed overhead (about three times a
    bare regressor's) that dominates calls of one row, so feed chunks, or a whole block
    to :meth:`prequential_predict`. A regressor that is not all-or-nothing on its own
    (not one of this package's) is deep-copied once per learning call, so that a failed
    call can be undone.

    **All or nothing.** Every learning call validates ``X`` and ``y`` completely before
    anything learns; if anything raises later (the regressor rejects its input, an
    exception or a ``KeyboardInterrupt`` inside it), the statistics and the regressor
    are put back, so the estimator is exactly as it was. A failing :meth:`fit` keeps
    the previous stream.

    **Parameters mid-stream.** ``regressor``, its parameters, ``with_mean`` and
    ``with_std`` are those the stream started with: after a ``set_params`` that changes
    one (or a change of ``regressor_``'s parameters), the next learning call raises a
    ValueError that says to call :meth:`fit`, which starts a new stream.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import (
    ...     QREWRLSRegressor, StreamingTransformedTargetRegressor, prequential_predict)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(300, 3))
    >>> y = 5e7 + 1e6 * (X @ np.array([1.0, -2.0, 0.5]))  # a level far from 0
    >>> model = StreamingTransformedTargetRegressor(QREWRLSRegressor(window_size=20))
    >>> y_pred = model.prequential_predict(X, y)  # row t from rows < t, then learned
    >>> def relative_mse(y_pred):
    ...     return float(np.mean((y[100:] - y_pred[100:]) ** 2) / np.var(y))
    >>> relative_mse(y_pred) < 0.01
    True
    >>> # alone, the model (no intercept) cannot follow the level
    >>> relative_mse(prequential_predict(QREWRLSRegressor(window_size=20), X, y)) > 100
    True
    >>> model.n_samples_seen_, bool(np.isclose(model.transformer_.mean_[0], np.mean(y)))
    (300, True)
    """

    _parameter_constraints: dict = {
        "regressor": [HasMethods(["partial_fit", "predict"]), None],
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
    }

    # every learning call is all-or-nothing (a streaming pipeline needs no copy of it)
    _atomic_updates = True

    def __init__(self, regressor=None, *, with_mean=True, with_std=True):
        self.regressor = regressor
        self.with_mean = with_mean
        self.with_std = with_std

    # ------------------------------------------------------------------ learning
    # (fit, partial_fit and prequential_predict: StreamingRegressorMixin's template; the
    # regressor's parameters are validated when it learns, so nested validation is on)
    _skip_nested_validation = False

    def _check_new_stream(self):
        self._start_stream()

    def _init_state(self, n_features, n_targets, y_ndim):
        self.n_samples_seen_ = 0

    def _check_stream_params(self):
        self._check_params_unchanged()
        # a regressor that is not all-or-nothing on its own is restored from a copy
        undo_on_rollback(self.regressor_)

    def _learn_weighted(self, X, Y, sample_weight, *, predict, **piece):
        """Validated rows in order; the weights are the regressor's (the statistics of
        ``y`` are unweighted, as :class:`~sklearn.compose.TransformedTargetRegressor`
        fits its transformer without them)."""
        Y_pred = self._learn_predict(X, Y, 0, sample_weight) if predict else None
        if not predict:
            Z, _, _ = self._standardise(Y, statistics=False)
            kwargs = {}
            if sample_weight is not None:
                _check_takes_weights(self.regressor_, self.regressor_.partial_fit, "partial_fit")
                kwargs["sample_weight"] = sample_weight
            self.regressor_.partial_fit(X, self._inner_targets(Z), **kwargs)
        self.n_samples_seen_ = self.transformer_.n_samples_seen_
        return Y_pred

    def _learn_delayed(self, X, Y, delay, sample_weight):
        """Labels ``delay`` rows late: the regressor's own delayed pass (vectorised)."""
        Y_pred = self._learn_predict(X, Y, delay, sample_weight)
        self.n_samples_seen_ = self.transformer_.n_samples_seen_
        return Y_pred

    def _start_stream(self):
        """Fresh clones of the parameters, and a record of them (``set_params`` check)."""
        for name in ("n_samples_seen_", "_n_targets", "n_features_in_", "feature_names_in_"):
            self.__dict__.pop(name, None)
        regressor = QREWRLSRegressor() if self.regressor is None else self.regressor
        self.regressor_ = clone(regressor)
        self.transformer_ = _TargetScaler(with_mean=self.with_mean, with_std=self.with_std)
        self._stream_deep_params = record_deep_params(self)
        self._fitted_regressor_params = record_deep_params(self.regressor_)

    def _check_params_unchanged(self):
        check_deep_params(self, built="regressor_ learned targets standardised")
        changed = changed_stream_params(
            self.regressor_, self.__dict__.get("_fitted_regressor_params")
        )
        if changed:
            raise ValueError(
                f"regressor_ parameters {', '.join(changed)} changed (set_params) since "
                "this stream started; its state was learned with the previous values. "
                "Set them back, or call fit to start a new stream."
            )

    def _standardise(self, Y, *, statistics):
        """Each target standardised with the statistics of the targets before it; the
        scaler then learns them.

        Returns ``Z`` and, when ``statistics``, the ``(mean, scale)`` of each row's past
        (``mean`` 0 and ``scale`` 1 before the first row of a stream, and for the parts
        switched off by ``with_mean`` / ``with_std``).
        """
        scaler = self.transformer_
        n0 = scaler.__dict__.get("n_samples_seen_", 0)
        blocks = [] if statistics else None
        token = _CAPTURE.set(blocks)
        try:
            Z = scaler.prequential_transform(Y)
        finally:
            _CAPTURE.reset(token)
        if self.with_std and n0 < 2:
            # no standard deviation before two targets: a scale-free start (see Notes)
            Z[: 2 - n0] = 0.0
        if not statistics:
            return Z, None, None
        mean = np.concatenate([b[0] for b in blocks])
        scale = np.concatenate([b[1] for b in blocks])
        if mean.shape != Y.shape:  # pragma: no cover - the scaler's internals changed
            raise RuntimeError("RecursiveStandardScaler did not report its statistics.")
        if n0 == 0:
            # the scaler scales a stream's first row with its own statistics; its
            # prediction was made before any target was seen
            mean[0], scale[0] = 0.0, 1.0
        if not self.with_mean:
            mean[...] = 0.0
        if not self.with_std:
            scale[...] = 1.0
        return Z, mean, scale

    def _inner_targets(self, Z):
        return Z[:, 0] if self._n_targets is None else Z

    def _learn_predict(self, X, Y, delay, sample_weight):
        """The prequential pass: the regressor's own (vectorised for this package's
        regressors) on the standardised targets, each prediction mapped back with the
        statistics of the rows its state has learned."""
        n = X.shape[0]
        Z, mean, scale = self._standardise(Y, statistics=True)
        P = _prequential_predict(self.regressor_, X, self._inner_targets(Z), delay=delay,
                                 sample_weight=sample_weight)
        if delay:
            # row i's state has learned the rows < i − delay: their statistics (a delay
            # beyond the call is the call's length: no arithmetic overflows int64)
            past = np.maximum(np.arange(n) - min(delay, n), 0)
            mean, scale = mean[past], scale[past]
        return _map_back(np.asarray(P, dtype=np.float64).reshape(n, -1), mean, scale)

    # ------------------------------------------------------------------ applying
    def _predict_rows(self, X):
        """Predictions of validated rows by the current state, 2-D (0 before any row)."""
        n_targets = self._n_targets or 1
        if self.transformer_.__dict__.get("n_samples_seen_", 0) == 0 or not _is_fitted(
            self.regressor_
        ):
            return np.zeros((X.shape[0], n_targets))
        P = np.asarray(self.regressor_.predict(X), dtype=np.float64).reshape(X.shape[0], -1)
        scaler = self.transformer_
        # the statistics the regressor learned its targets with: the scaler's own
        # settings, not the parameters, which set_params may have changed since
        mean = scaler.mean_ if scaler.with_mean else 0.0
        return _map_back(P, mean, scaler.scale_)

    def __sklearn_is_fitted__(self):
        return "n_samples_seen_" in self.__dict__

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        regressor = QREWRLSRegressor() if self.regressor is None else self.regressor
        inner = get_tags(regressor)
        tags.target_tags.multi_output = inner.target_tags.multi_output
        tags.input_tags.sparse = False
        tags.input_tags.allow_nan = False
        # a streaming model (sliding window, forgetting): its score on the whole
        # training set is not a fit criterion
        tags.regressor_tags.poor_score = True
        return tags
