"""A scikit-learn ``Pipeline`` that learns from a stream (user guide: :ref:`prequential`).

scikit-learn's :class:`~sklearn.pipeline.Pipeline` has no ``partial_fit``, and its ``fit``
fits each transformer on the whole batch, which in a stream is look-ahead. This module
adds a pipeline whose ``fit`` *is* one pass of ``partial_fit`` over the rows, and whose
``prequential_predict`` is the predict-then-update protocol of
:func:`~sklearn_orfit.prequential_predict` for the whole chain.
"""

import copy
import functools
import inspect

import numpy as np
from scipy import sparse
from sklearn.base import BaseEstimator, clone, is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import Bunch, get_tags
from sklearn.utils.metadata_routing import MetadataRouter, MethodMapping, process_routing
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import check_is_fitted

from .._compat import (
    Hidden,
    _fit_context,
    _name_estimators,
    _num_samples,
    _routing_enabled,
    _safe_indexing,
    _safe_set_output,
    _wrap_data_with_container,
)
from .._streaming._prequential import _row_by_row
from ..abo._rff import RandomFourierFeatures
from .._streaming._base import (
    StreamingRegressorMixin,
    StreamLockMixin,
    _held,
    check_delay,
    check_stream_sample_weight,
    check_target_shape,
    on_rollback,
    stream_update,
)
from .._streaming._validation import accepts_keyword, as_float64, check_numeric
from .._docstrings import ROWS, fill_doc

__all__ = ["StreamingPipeline", "make_streaming_pipeline"]

# Transformers whose map, once fitted, never changes: fitting depends on the data only
# through its shape. Other classes opt in with a class attribute
# ``_stateless_after_fit = True``.
_STATELESS_AFTER_FIT = (RandomFourierFeatures, FunctionTransformer)


# ---------------------------------------------------------------------- parameters
# Parameters that never change what an estimator learns (scikit-learn's convention):
# ``set_params`` may change them mid-stream; StreamingPipeline forwards them to its fitted
# steps.
_EXECUTION_PARAMS = ("verbose", "n_jobs")


def _is_execution_param(key):
    return key.rsplit("__", 1)[-1] in _EXECUTION_PARAMS


def _frozen_value(value):
    """A copy of a mutable container, so that a later in-place change shows."""
    if isinstance(value, list):
        return list(value)
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, np.ndarray):
        return value.copy()
    return value


def _same_value(a, b):
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        try:
            return bool(np.array_equal(a, b))
        except Exception:
            return False
    try:
        return bool(a == b) or (a != a and b != b)  # NaN parameters
    except Exception:  # comparisons that raise (e.g. ambiguous truth values)
        return False


@functools.lru_cache(maxsize=None)
def _param_names(cls):
    return tuple(cls._get_param_names())


def _deep_params(estimator, prefix="", out=None):
    """``estimator.get_params(deep=True)`` with keys prefixed, computed cheaply.

    The same items as scikit-learn's ``get_params(deep=True)``, with each class's
    parameter names cached (scikit-learn reads the constructor's signature at every
    call); classes that define their own ``get_params`` (pipelines, composites) are
    asked directly.
    """
    out = {} if out is None else out
    cls = type(estimator)
    if isinstance(estimator, StreamingPipeline):
        out[prefix + "steps"] = estimator.steps
        out[prefix + "verbose"] = estimator.verbose
        for name, step in estimator.steps:
            out[prefix + name] = step
            if hasattr(step, "get_params") and not isinstance(step, type):
                _deep_params(step, f"{prefix}{name}__", out)
    elif cls.get_params is not BaseEstimator.get_params or not isinstance(
        estimator, BaseEstimator
    ):
        out.update((prefix + k, v) for k, v in estimator.get_params(deep=True).items())
    else:
        for name in _param_names(cls):
            value = getattr(estimator, name)
            out[prefix + name] = value
            if hasattr(value, "get_params") and not isinstance(value, type):
                _deep_params(value, f"{prefix}{name}__", out)
    return out


def record_deep_params(estimator, *, ignore=_is_execution_param):
    """``estimator.get_params(deep=True)`` at the start of a stream (nested steps too).

    Parameters
    ----------
    estimator : estimator
        A meta-estimator whose fitted parts are clones made from its parameters.
    ignore : callable, default=_is_execution_param
        ``ignore(key)`` is true for the parameters that may change mid-stream.

    Returns
    -------
    snapshot : dict
        The parameters, lists, dicts and arrays copied shallowly.
    """
    return {k: _frozen_value(v) for k, v in _deep_params(estimator).items() if not ignore(k)}


def changed_stream_params(estimator, snapshot, *, ignore=_is_execution_param):
    """The (sorted) keys of the parameters that differ from ``snapshot``.

    ``[]`` when ``snapshot`` is ``None`` (no stream has started).
    Estimator-valued parameters compare by identity, so replacing a step shows, and a
    step's own parameters (``name__param``) compare by value.
    """
    if snapshot is None:
        return []
    now = {k: v for k, v in _deep_params(estimator).items() if not ignore(k)}
    if now.keys() == snapshot.keys() and all(
        _same_value(snapshot[k], v) for k, v in now.items()
    ):
        return []
    keys = sorted(set(snapshot) | set(now))
    return [
        k for k in keys if k not in snapshot or k not in now or not _same_value(snapshot[k], now[k])
    ]


def _format_changed(changed, limit=6):
    shown = ", ".join(changed[:limit])
    return shown + (f" (and {len(changed) - limit} more)" if len(changed) > limit else "")


def check_deep_params(estimator, *, built, ignore=_is_execution_param, note=""):
    """Refuse to continue a meta-estimator's stream after ``set_params`` changed a
    parameter that its fitted parts were made with.

    Parameters
    ----------
    estimator : estimator
        A meta-estimator whose ``_stream_deep_params`` (:func:`record_deep_params`) were
        recorded when its stream started (none recorded: nothing to check).
    built : str
        What was made with the previous values, for the message (``"the partitions
        were built"``).
    ignore : callable, default=_is_execution_param
        ``ignore(key)`` is true for the parameters that may change mid-stream.
    note : str, default=""
        Appended to the message (which parameters may change).

    Raises
    ------
    ValueError
        Naming the parameters that changed, and saying to call ``fit``.
    """
    changed = changed_stream_params(
        estimator, estimator.__dict__.get("_stream_deep_params"), ignore=ignore
    )
    if changed:
        raise ValueError(
            f"{_format_changed(changed)} changed (set_params) since this stream started; "
            f"{built} with the previous values. Call fit to start a new stream with the "
            f"new parameters{note}."
        )


# ---------------------------------------------------------------------- transactions
def _is_atomic(step):
    """Steps whose every learning call is all-or-nothing and undone with the enclosing
    call: the package's streaming regressors (update template
    :func:`~sklearn_orfit._streaming._base.stream_update`) and classes that declare
    ``_atomic_updates = True`` (the pipeline, the target transformer, the streaming
    transformers, the random Fourier features)."""
    return isinstance(step, StreamingRegressorMixin) or (
        getattr(type(step), "_atomic_updates", False) is True
    )


def _restore(step, saved):
    """Put ``saved`` (a deep copy of ``step``) back into ``step``, keeping its identity."""
    lock = step.__dict__.get("_stream_lock")
    step.__dict__.clear()
    step.__dict__.update(saved.__dict__)
    if lock is not None:
        step.__dict__["_stream_lock"] = lock


def undo_on_rollback(step):
    """Have the learning call in progress put ``step`` back if it fails.

    The package's estimators (:func:`_is_atomic`) need nothing here: each of their
    learning calls runs under :func:`~sklearn_orfit._streaming._base.stream_update`,
    which registers its own rollback with the enclosing call. Any other step (a
    scikit-learn transformer or regressor) is deep-copied now, ``O(size of its
    state)``, and restored from the copy by
    :func:`~sklearn_orfit._streaming._base.on_rollback`.

    Parameters
    ----------
    step : estimator, ``"passthrough"`` or None
        A step about to learn, inside a learning call.
    """
    if _is_skipped(step) or _is_atomic(step):
        return
    saved = copy.deepcopy(step)
    on_rollback(lambda: _restore(step, saved))


def _is_stateless_after_fit(transformer):
    return bool(getattr(transformer, "_stateless_after_fit", False)) or isinstance(
        transformer, _STATELESS_AFTER_FIT
    )


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except (NotFittedError, TypeError):  # not fitted, or not an estimator at all
        return False
    return True


def _has_params(step):
    return hasattr(step, "get_params") and not isinstance(step, type) and not _is_skipped(step)


def _is_skipped(step):
    return step is None or (isinstance(step, str) and step == "passthrough")


def _final_has(attr):
    def check(self):
        final = self.steps[-1][1]
        if attr == "transform" and _is_skipped(final):
            return True
        return hasattr(final, attr)

    return check


_X_DOC = ROWS
_FIT_DOC = """X : array-like of shape (n_samples, n_features)
    Rows in stream order (learned by :meth:`fit`, then applied).
y : array-like or None, default=None
    Targets."""
_PARAMS_DOC = """**params : dict
    Passed to the steps."""

# The members of a fitted pipeline that apply its fitted steps (steps_) without
# learning, as :class:`~sklearn.pipeline.Pipeline` applies its steps:
# name -> (summary, Parameters section, Returns section). Methods are available when the
# final step has them (scikit-learn's available_if); get_feature_names_out always is.
_APPLIED = {
    "predict": ("Apply the fitted transformers, then the final ``predict``.",
                f"{_X_DOC}\n{_PARAMS_DOC}",
                "y_pred : ndarray\n    The predictions of the current state."),
    "decision_function": ("Apply the fitted transformers, then the final "
                          "``decision_function``.", f"{_X_DOC}\n{_PARAMS_DOC}",
                          "scores : ndarray\n    The final estimator's decision function."),
    "predict_proba": ("Apply the fitted transformers, then the final ``predict_proba``.",
                      f"{_X_DOC}\n{_PARAMS_DOC}",
                      "proba : ndarray of shape (n_samples, n_classes)\n"
                      "    Class probabilities."),
    "predict_log_proba": ("Apply the fitted transformers, then the final "
                          "``predict_log_proba``.", f"{_X_DOC}\n{_PARAMS_DOC}",
                          "log_proba : ndarray of shape (n_samples, n_classes)\n"
                          "    Log class probabilities."),
    "transform": ("Apply the fitted transformers.", f"{_X_DOC}\n{_PARAMS_DOC}",
                  "Xt : ndarray of shape (n_samples, n_output_features)\n"
                  "    The transformed rows."),
    "inverse_transform": ("Apply the fitted steps' ``inverse_transform`` in reverse order.",
                          "X : array-like of shape (n_samples, n_output_features)\n"
                          f"    Transformed rows.\n{_PARAMS_DOC}",
                          "X_original : ndarray of shape (n_samples, n_features)\n"
                          "    The rows before transformation."),
    "score_samples": ("Apply the fitted transformers, then the final ``score_samples``.",
                      _X_DOC,
                      "scores : ndarray of shape (n_samples,)\n"
                      "    The final estimator's scores."),
    "score": ("The final estimator's ``score`` on the transformed rows.\n\n"
              "For the predict-then-update score of a stream, use\n"
              ":func:`~sklearn_orfit.model_selection.make_prequential_scorer`.",
              f"{_X_DOC}\ny : array-like or None, default=None\n    Targets.\n"
              "sample_weight : array-like of shape (n_samples,), default=None\n"
              f"    Passed to the final ``score``.\n{_PARAMS_DOC}",
              "score : float\n    The final estimator's score."),
    "get_feature_names_out": ("Output feature names of the fitted chain.",
                              "input_features : array-like of str or None, default=None\n"
                              "    Input feature names.",
                              "feature_names_out : ndarray of str objects\n"
                              "    Transformed feature names."),
    # fit, then apply the final state to the same rows
    "fit_transform": (":meth:`fit`, then :meth:`transform` with the final state.",
                      f"{_FIT_DOC}\n**params : dict\n    Passed to :meth:`transform`.",
                      "Xt : ndarray of shape (n_samples, n_output_features)\n"
                      "    The rows transformed by the fitted pipeline."),
    "fit_predict": (":meth:`fit`, then :meth:`predict` with the final state.",
                    f"{_FIT_DOC}\n**params : dict\n    Passed to :meth:`predict`.",
                    "y_pred : ndarray\n    Predictions of the fitted pipeline on ``X``."),
}


def _applied(name):
    """The pipeline's method ``name`` (a key of ``_APPLIED``), built from its entry.

    Every step is read at one call boundary: the method holds the stream lock when
    the pipeline has one (no learning call runs meanwhile). Its signature is
    :class:`~sklearn.pipeline.Pipeline`'s; ``fit_<method>`` fits, then applies
    ``<method>`` to the same rows.
    """
    summary, parameters, returns = _APPLIED[name]
    then = name[len("fit_"):] if name.startswith("fit_") else None

    if then is None:
        def method(self, *args, **kwargs):
            with _held(self):  # every step at one call boundary
                return getattr(self._fitted(), name)(*args, **kwargs)
    else:
        def method(self, X, y=None, **params):
            return getattr(self.fit(X, y), then)(X, **params)

    method.__name__ = name
    method.__qualname__ = f"StreamingPipeline.{name}"
    method.__signature__ = inspect.signature(getattr(Pipeline, name))
    first, *rest = [*summary.splitlines(), "", "Parameters", "----------",
                    *parameters.splitlines(), "", "Returns", "-------", *returns.splitlines()]
    method.__doc__ = "\n".join([first, *(f"        {line}" if line else "" for line in rest)])
    if name == "get_feature_names_out":
        return method
    # fit_transform follows transform (a transformer-only chain); fit_predict, as in
    # Pipeline, the final step's own fit_predict
    return available_if(_final_has("transform" if then == "transform" else name))(method)


def _fitted_attribute(name, doc):
    """A read-only attribute of the fitted pipeline, read from its fitted steps."""

    def read(self):
        with _held(self):
            return getattr(self._fitted(), name)

    return property(read, doc=doc)


def _step_kind(step):
    """How a streaming pipeline drives ``step`` (see :func:`_stream_one_step`)."""
    if _is_skipped(step):
        return "skip"
    if isinstance(step, FrozenEstimator):  # it forwards partial_fit: check it first
        return "fixed"
    if callable(getattr(step, "prequential_transform", None)):
        return "prequential"
    if _is_stateless_after_fit(step):
        return "stateless"
    if hasattr(step, "partial_fit"):
        return "partial_fit"
    return "fixed"


def _learns(step):
    """Whether :func:`_stream_one_step` may change ``step``'s state."""
    kind = _step_kind(step)
    return kind in ("prequential", "partial_fit") or (
        kind == "stateless" and not _is_fitted(step)
    )


def _as_configured(Xt, X, transformer):
    """``Xt`` in the container ``transformer.transform`` gives (``set_output``).

    A streaming step's output (``prequential_transform``, rows stacked one by one) gets
    the same container and column names as the step's ``transform``, so that the next
    step learns under the names it will later be applied with.
    """
    return _wrap_data_with_container("transform", Xt, X, transformer)


def _stream_one_step(name, transformer, X):
    """Transform the rows of ``X`` with the state before each, and learn them.

    The kinds of step, and what row ``t``'s output depends on:

    * ``"prequential"`` — has ``prequential_transform`` (our
      :class:`RecursiveStandardScaler`, :class:`LagTransformer`, a transformer-only
      :class:`StreamingPipeline`): the step's own vectorised no-look-ahead path;
    * ``"stateless"`` — stateless after fit (:class:`RandomFourierFeatures`,
      ``FunctionTransformer``, or ``_stateless_after_fit = True``): fitted on the first
      chunk it sees (the fit uses the shape only), then one ``transform`` of the chunk —
      row ``t`` depends on ``x_t`` only;
    * ``"partial_fit"`` — any other step with ``partial_fit`` (e.g. scikit-learn's
      ``StandardScaler``): one row at a time, ``transform`` with the current state,
      then ``partial_fit`` — except the first row of a stream, which has no state before
      it and is transformed after being learned;
    * ``"fixed"`` — no ``partial_fit``, or a :class:`~sklearn.frozen.FrozenEstimator`:
      a fixed map; it must already be fitted.
    """
    kind = _step_kind(transformer)
    if kind == "prequential":
        return _as_configured(transformer.prequential_transform(X), X, transformer)
    fitted = _is_fitted(transformer)
    if kind == "stateless":
        if not fitted:
            learn = getattr(transformer, "partial_fit", None) or transformer.fit
            learn(X)
        return transformer.transform(X)
    if kind == "partial_fit":
        if sparse.issparse(X):
            X = sparse.csr_matrix(X)  # row slicing needs a row-major format
        rows = []
        for i in range(_num_samples(X)):
            row = _safe_indexing(X, slice(i, i + 1))
            if fitted:
                rows.append(transformer.transform(row))
                transformer.partial_fit(row)
            else:
                # the first row of a stream: no state before it, use its own
                transformer.partial_fit(row)
                rows.append(transformer.transform(row))
                fitted = True
        if not rows:
            return transformer.transform(X)
        if sparse.issparse(rows[0]):
            return sparse.vstack(rows, format="csr")
        return _as_configured(np.concatenate([np.asarray(r) for r in rows]), X, transformer)
    if not fitted:
        raise ValueError(
            f"Step {name!r} ({type(transformer).__name__}) cannot learn from a stream "
            "(it has no partial_fit) and is not fitted. Fit it beforehand and wrap it in "
            "sklearn.frozen.FrozenEstimator, so that it stays fitted when the pipeline "
            "is cloned (e.g. by GridSearchCV); it is then used as a fixed map."
        )
    return transformer.transform(X)


class StreamingPipeline(StreamLockMixin, Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` that learns one pass over a stream.

    :meth:`partial_fit` sends a chunk of rows through the transformers — each row
    transformed with the state the transformer had *before* that row, then learned — and
    then calls the final estimator's ``partial_fit`` on the transformed chunk.
    :meth:`fit` is a reset followed by :meth:`partial_fit`, so the two cannot disagree.
    :meth:`prequential_predict` is predict-then-update for the whole chain:
    ``y_pred[t]`` comes from the state learned on rows ``< t``, so perturbing any later
    row, ``X`` or ``y``, leaves ``y_pred[:t+1]`` bit-for-bit unchanged (user guide:
    :ref:`prequential`).

    Parameters
    ----------
    steps : list of (str, estimator) tuples
        Transformers, then a final estimator (or ``"passthrough"``). Transformers
        should have ``partial_fit`` or ``prequential_transform``, or be fixed maps
        (see Notes); the final estimator needs ``partial_fit``.
    verbose : bool, default=False
        Accepted for compatibility with :class:`~sklearn.pipeline.Pipeline`; nothing is
        printed.

    Attributes
    ----------
    steps_ : list of (str, estimator) tuples
        The fitted steps. ``steps`` itself is never modified: the first call of
        :meth:`fit`, :meth:`partial_fit` or :meth:`prequential_predict` works on fresh
        clones of its estimators (fixed maps are shared, not cloned), as
        scikit-learn requires of every estimator's parameters.
    named_steps_ : :class:`~sklearn.utils.Bunch`
        The fitted steps by name (``pipe.named_steps_.qrewrlsregressor.coef_``); once
        fitted, ``named_steps`` and indexing give them too, as for
        :class:`~sklearn.pipeline.Pipeline`.
    n_features_in_ : int
        Number of features of the first step.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Names of the input features, when the first step recorded them.

    See Also
    --------
    make_streaming_pipeline : Build one without naming the steps.
    sklearn_orfit.prequential_predict : Predict-then-update for any estimator.
    sklearn_orfit.model_selection.PrequentialSplit : Rolling folds for ``cv=``.

    Notes
    -----
    **When is a row transformed, and with what?** "Before it": row ``t`` of a chunk is
    transformed with the state a stateful transformer had learned from rows ``< t``,
    and the transformer learns row ``t`` afterwards — the same order as a model, which
    predicts a row and then learns it. A row thus gets the same features whether it is
    being predicted or learned, and :meth:`predict` on new rows uses exactly the
    features :meth:`prequential_predict` would give them. The first row of a fresh
    stream has no past: it is transformed with the state learned from itself alone (a
    z-score of 0). How each kind of step is driven:

    ============================================  ====================================
    step                                          per chunk
    ============================================  ====================================
    has ``prequential_transform``                 that method (vectorised)
    (:class:`RecursiveStandardScaler`,
    :class:`LagTransformer`)
    stateless after fit                           fitted once on the first chunk, then
    (:class:`RandomFourierFeatures`,              ``transform`` of the whole chunk
    ``FunctionTransformer``, or a class with
    ``_stateless_after_fit = True``)
    other ``partial_fit`` transformers            one row at a time: ``transform``,
    (``StandardScaler``, ``MinMaxScaler`` ...)    then ``partial_fit``
    no ``partial_fit`` (a fixed map)              ``transform`` only; must be fitted —
                                                  wrap it in
                                                  :class:`~sklearn.frozen.FrozenEstimator`
                                                  to survive cloning
    ============================================  ====================================

    The final estimator then gets ``prequential_predict`` (its own vectorised method
    when it has one, e.g. :class:`QREWRLSRegressor`; otherwise ``predict`` and
    ``partial_fit`` one row at a time, 0 before its first row). With only vectorised
    steps, as in ``RandomFourierFeatures → QREWRLSRegressor``, a chunk costs one
    transform per step and no Python loop over rows.

    :meth:`predict`, :meth:`transform` and :meth:`score` apply the fitted steps
    without learning (as :class:`~sklearn.pipeline.Pipeline` does). For the transformers,
    learning a chunk is the same as learning its rows one by one (up to rounding in
    vectorised steps); the final estimator gets the transformed chunk in one
    ``partial_fit`` call, whose own semantics apply (:class:`QREWRLSRegressor`: row by
    row, exactly; :class:`ORFitRegressor`: one batch; ``SGDRegressor``: one epoch).
    **All or nothing.** Every learning call (:meth:`fit`, :meth:`partial_fit`,
    :meth:`prequential_predict`, :meth:`prequential_transform`) either completes for
    every step or leaves the pipeline exactly as it was. The targets are validated
    completely before any step learns, against the final estimator's stream (numbers
    only, finite, one per row, the stream's number of targets once it has one), so a
    bad ``y`` is a ValueError that names the problem. If anything raises later — a step
    that rejects its input, an exception or a ``KeyboardInterrupt`` inside any step —
    every step is put back: the call is one transaction
    (:func:`~sklearn_orfit._streaming._base.stream_update`), with which the package's
    estimators register the rollback of their own learning calls, and a foreign step
    (scikit-learn's ``StandardScaler``, ``SGDRegressor`` ...) gets a deep copy of its
    state taken just before it learns (``O(state)`` per step, once per call, not per
    row), put back if the call fails. An interruption after the final step has
    committed its update, before the pipeline call returns, undoes it too. A failing
    :meth:`fit` keeps the previous stream; a failing first call leaves the pipeline
    unfitted.

    **Parameters mid-stream.** The fitted steps (``steps_``) are clones made from
    ``steps`` when the stream starts. A later ``set_params`` that changes a step
    (``set_params(qrewrlsregressor=...)``) or a step's parameter
    (``set_params(lagtransformer__n_lags=5)``,
    ``set_params(qrewrlsregressor__window_size=50)``, or ``set_params`` on a template
    step itself) makes the next learning call raise a ValueError that names the
    parameters and says to call :meth:`fit`, which starts a new stream with the new
    values; the change is never silently ignored. :meth:`predict` and the other methods
    that do not learn keep using the fitted steps. ``verbose`` and the steps' ``n_jobs``
    and ``verbose`` do not change what is learned: ``set_params`` also sets them on the
    fitted steps at once.

    **Metadata (sample_weight).** Only the final estimator takes metadata: the
    transformers learn from the inputs alone. :meth:`fit` and :meth:`partial_fit` pass
    ``sample_weight=w`` or ``<final step>__sample_weight=w`` to the final step's
    ``partial_fit`` (unlike :class:`~sklearn.pipeline.Pipeline`, a bare
    ``sample_weight`` is accepted: it can only mean the final step);
    :meth:`prequential_predict` takes ``sample_weight=`` and passes it to the final
    step's prequential predictions. With metadata routing enabled
    (``sklearn.set_config(enable_metadata_routing=True)``), :meth:`fit` routes what the
    final step's ``fit`` requests (``set_fit_request(sample_weight=True)``) and
    :meth:`partial_fit` what its ``partial_fit`` requests
    (:meth:`get_metadata_routing`), so that ``GridSearchCV(pipe, ...).fit(X, y,
    sample_weight=w)`` weights the warm-up of each fold. Metadata for a transformer is a
    ``ValueError``, and so are weights for a final step that takes none; weights are
    validated (numbers, finite, ``>= 0``, one per row) before any step learns.

    ``memory`` and ``transform_input`` of :class:`~sklearn.pipeline.Pipeline` are not
    supported (nothing is cached: each step learns once per row anyway). As with
    :class:`~sklearn.pipeline.Pipeline`, indexing and ``named_steps`` give the fitted
    steps once the pipeline is fitted (the templates before), and a slice of a fitted
    pipeline is fitted (``pipe[:-1].transform(X)``); ``steps`` (``get_params``) always
    holds the templates. ``set_params`` on a fitted step (``named_steps[name]``) is
    refused at the next learning call as on a template. ``set_output`` applies to the
    templates and the fitted steps, and carries the feature names through every step.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import (
    ...     QREWRLSRegressor, RandomFourierFeatures, RecursiveStandardScaler,
    ...     make_streaming_pipeline, prequential_predict)
    >>> from sklearn_orfit.datasets import make_abo_series, make_lagged
    >>> X, y = make_lagged(make_abo_series(600, random_state=0), n_lags=7)
    >>> pipe = make_streaming_pipeline(
    ...     RecursiveStandardScaler(),
    ...     RandomFourierFeatures(256, sigma=1.0, random_state=0),
    ...     QREWRLSRegressor(window_size=20))
    >>> y_pred = prequential_predict(pipe, X, y)
    >>> bool(np.mean((y[100:] - y_pred[100:]) ** 2) < np.var(y))
    True
    >>> pipe.named_steps["qrewrlsregressor"].n_samples_seen_
    593
    >>> pipe[:-1].transform(X[:2]).shape
    (2, 256)
    """

    _parameter_constraints: dict = {
        "steps": [list, Hidden(tuple)],
        "verbose": ["boolean"],
    }

    def __init__(self, steps, *, verbose=False):
        self.steps = steps
        self.verbose = verbose

    # Pipeline methods that this class does not use read these two.
    memory = None
    transform_input = None

    # ------------------------------------------------------------------ learning
    @_fit_context(prefer_skip_nested_validation=False)
    @fill_doc()
    def fit(self, X, y=None, **params):
        """Reset, then learn the rows of ``X`` in order (as one :meth:`partial_fit`).

        Parameters
        ----------
        {stream_x}
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets.
        **params : dict
            Metadata for the final estimator's ``partial_fit``: ``sample_weight=w`` or
            ``<final step>__sample_weight=w``; with metadata routing enabled, the
            metadata its ``fit`` requests (``set_fit_request``). See Notes.

        Returns
        -------
        self : StreamingPipeline
            The fitted pipeline.
        """
        self._learn(X, y, mode="fit", reset=True, params=self._final_params("fit", params))
        return self

    @_fit_context(prefer_skip_nested_validation=False)
    @fill_doc()
    def partial_fit(self, X, y=None, **params):
        """Learn the rows of ``X`` in order, continuing the stream.

        Parameters
        ----------
        {stream_x}
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets.
        **params : dict
            Metadata for the final estimator's ``partial_fit`` (see :meth:`fit`; with
            metadata routing enabled, what its ``partial_fit`` requests).

        Returns
        -------
        self : StreamingPipeline
            The updated pipeline.
        """
        self._learn(X, y, mode="fit", reset=False,
                    params=self._final_params("partial_fit", params))
        return self

    @fill_doc()
    def prequential_predict(self, X, y, *, delay=0, sample_weight=None, **params):
        """Predict each row from the state learned on the rows before it, then learn it.

        Parameters
        ----------
        {stream_x}
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Their targets.
        delay : int, default=0
            Labels arrive ``delay`` rows late (see
            :func:`~sklearn_orfit.prequential_predict`). Only the final estimator
            waits for them: the transformers learn from the inputs, which arrive with
            their rows, so row ``t`` gets the same features whatever the delay.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Per-row weights, passed to the final estimator (what it learns; the
            predictions are those of the unweighted rows). Given directly, not routed.
        **params : dict
            ``<final step>__sample_weight=w``, or, with metadata routing enabled,
            metadata routed as for :meth:`partial_fit`.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``y_pred[t]`` from the final estimator that has learned rows ``< t − delay``
            (0 before its first row).
        """
        delay = check_delay(delay)
        if "steps_" not in self.__dict__:
            self._validate_params()
        final_params = self._final_params("partial_fit", params)
        if sample_weight is not None:
            if "sample_weight" in final_params:
                raise ValueError(
                    "sample_weight given twice (sample_weight= and through the final "
                    "step's parameters)."
                )
            final_params["sample_weight"] = sample_weight
        unknown = sorted(set(final_params) - {"sample_weight"})
        if unknown:
            raise ValueError(
                f"prequential_predict passes only sample_weight to the final estimator, "
                f"got {unknown}."
            )
        return self._learn(X, y, mode="predict", reset=False, delay=delay, params=final_params)

    def _final_params(self, method, params):
        """The metadata of a learning call that go to the final estimator.

        Streaming transformers take none. Without metadata routing: ``sample_weight``
        and ``<final step>__<name>``; with routing enabled, what the final step
        requests for ``method`` (:meth:`get_metadata_routing`).
        """
        if not params:
            return {}
        steps = self.steps
        final_name = steps[-1][0]
        if _routing_enabled():
            routed = process_routing(self, method, **params)
            for name, _ in steps[:-1]:
                got = {k: v for d in routed.get(name, {}).values() for k, v in d.items()}
                if got:
                    raise ValueError(
                        f"Step {name!r} is a streaming transformer: it takes no metadata, "
                        f"got {sorted(got)}."
                    )
            return dict(routed.get(final_name, {}).get(method, {}))
        out = {}
        for key, value in params.items():
            if "__" not in key:
                if key != "sample_weight":
                    raise ValueError(
                        f"StreamingPipeline.{method} does not accept the {key} parameter: "
                        "pass sample_weight=..., or parameters of the final step as "
                        f"{final_name}__<parameter>."
                    )
                name, param = final_name, key
            else:
                name, param = key.split("__", 1)
            if name != final_name:
                raise ValueError(
                    f"{key}: only the final step ({final_name!r}) takes parameters in a "
                    "streaming pipeline (the transformers learn from the inputs alone)."
                )
            if param in out:
                raise ValueError(f"{param} given twice for the final step {final_name!r}.")
            out[param] = value
        return out

    def get_metadata_routing(self):
        """Metadata routing of the pipeline (scikit-learn's metadata routing).

        The final step gets what its ``fit`` requests in :meth:`fit` (passed to its
        ``partial_fit``, which a streaming fit is), and what its ``partial_fit``
        requests in :meth:`partial_fit`; the transformers are routed as in
        :class:`~sklearn.pipeline.Pipeline` and must request nothing.

        Returns
        -------
        routing : MetadataRouter
            The routing information.
        """
        router = MetadataRouter(owner=self)
        steps = self.steps
        for name, trans in steps[:-1]:
            if _is_skipped(trans):
                continue
            mapping = MethodMapping()
            for caller in ("fit", "partial_fit"):
                callee = "partial_fit" if hasattr(trans, "partial_fit") else "fit"
                mapping.add(caller=caller, callee=callee)
            for caller in ("predict", "transform", "score"):
                mapping.add(caller=caller, callee="transform")
            router.add(method_mapping=mapping, **{name: trans})
        final_name, final = steps[-1]
        if _is_skipped(final):
            return router
        mapping = (
            MethodMapping()
            .add(caller="fit", callee="fit")
            .add(caller="partial_fit", callee="partial_fit")
            .add(caller="predict", callee="predict")
            .add(caller="score", callee="score")
        )
        if hasattr(final, "transform"):
            mapping.add(caller="transform", callee="transform")
        router.add(method_mapping=mapping, **{final_name: final})
        return router

    @available_if(_final_has("transform"))
    def prequential_transform(self, X, y=None):
        """Transform each row with the state before it, then learn it (all steps).

        Available when every step is a transformer, so that a streaming pipeline can be
        a step of another one. ``X``: rows in stream order; ``y`` is ignored.

        Returns
        -------
        Xt : ndarray of shape (n_samples, n_output_features)
            Row ``t`` transformed by the chain that has learned rows ``< t``.
        """
        if "steps_" not in self.__dict__:
            self._validate_params()
        return self._learn(X, None, mode="transform", reset=False)

    def set_params(self, **params):
        """Set the parameters of the pipeline and of its template steps.

        Mid-stream, ``verbose`` and ``n_jobs`` of any step are also set on the fitted
        steps (``steps_``) at once; a change to any other parameter makes the next
        learning call raise a ValueError that says to call :meth:`fit` (see Notes).

        Parameters
        ----------
        **params : dict
            ``steps``, ``verbose``, a step by name, or ``<step>__<parameter>``.

        Returns
        -------
        self : StreamingPipeline
            This pipeline.
        """
        super().set_params(**params)
        fitted = self.__dict__.get("steps_")
        if fitted is not None:
            named = dict(fitted)
            for key, value in params.items():
                if "__" in key and _is_execution_param(key):
                    name, sub = key.split("__", 1)
                    step = named.get(name)
                    if step is not None and not _is_skipped(step):
                        step.set_params(**{sub: value})
        return self

    _atomic_updates = True  # see _is_atomic: every learning call is all-or-nothing

    def _learn(self, X, y, *, mode, reset, delay=0, params=None):
        """One learning call of the whole chain, all-or-nothing.

        ``mode`` is ``"fit"`` (:meth:`partial_fit`), ``"predict"``
        (:meth:`prequential_predict`) or ``"transform"`` (:meth:`prequential_transform`).
        The parameters, the final step and the targets are checked before any step
        learns. The call is one transaction
        (:func:`~sklearn_orfit._streaming._base.stream_update`): the steps' own learning
        calls register their rollback with it, and a foreign step is restored from a copy
        taken just before it learns (:func:`undo_on_rollback`). If anything raises,
        ``KeyboardInterrupt`` included, every step and the pipeline's attributes are
        put back.
        """
        with stream_update(self, check_params=False):
            # fresh clones need no copy: the restored attributes drop them on failure
            fresh = reset or "steps_" not in self.__dict__
            if fresh:
                self._start_stream()
            else:
                self._check_params_unchanged()
            final_name, final = self.steps_[-1]
            self._check_final(final_name, final, mode)
            X = self._as_array(X)
            if mode != "transform":
                self._check_targets(X, y, final)
            params = self._check_final_params(final_name, final, mode, X, params,
                                              reset=reset)
            Xt = self._stream_transformers(X, keep=not fresh)
            if not fresh:
                undo_on_rollback(final)
            if mode == "predict":
                # the final step's own predict-then-update (the weights are checked)
                method = getattr(final, "prequential_predict", None)
                if not callable(method):
                    method = functools.partial(_row_by_row, final)
                return method(Xt, y, **params, **({"delay": delay} if delay else {}))
            if _is_skipped(final):
                return Xt
            if mode == "fit" and hasattr(final, "partial_fit"):
                return final.partial_fit(Xt, y, **params)
            return _stream_one_step(final_name, final, Xt)

    @staticmethod
    def _check_final_params(name, final, mode, X, params, *, reset):
        """The final step's metadata, checked before any step learns (weights validated:
        numbers, finite, >= 0, one per row; the final step must take them)."""
        if not params:
            return {}
        if _is_skipped(final) or (mode == "fit" and not hasattr(final, "partial_fit")):
            raise ValueError(
                f"The final step {name!r} does not learn with partial_fit: it takes no "
                f"parameters, got {sorted(params)}."
            )
        params = dict(params)
        if params.get("sample_weight") is not None:
            params["sample_weight"] = check_stream_sample_weight(
                params["sample_weight"], _num_samples(X), estimator=final, reset=reset
            )
            method = final.prequential_predict if (
                mode == "predict" and callable(getattr(final, "prequential_predict", None))
            ) else final.partial_fit
            if not accepts_keyword(method, "sample_weight"):
                raise ValueError(
                    f"The final step {name!r} ({type(final).__name__}) does not accept "
                    "sample_weight."
                )
        return params

    def _check_final(self, name, final, mode):
        """The final step can do what ``mode`` asks (checked before any step learns)."""
        if mode == "predict":
            if _is_skipped(final) or not hasattr(final, "partial_fit"):
                raise TypeError(
                    "prequential_predict needs a final estimator with partial_fit, got "
                    f"{final!r}."
                )
        elif mode == "fit" and not _is_skipped(final):
            if not (
                hasattr(final, "partial_fit")
                or hasattr(final, "prequential_transform")
                or hasattr(final, "transform")
            ):
                raise TypeError(
                    f"The final step {name!r} ({type(final).__name__}) has no partial_fit: "
                    "a streaming pipeline cannot update it."
                )

    def _start_stream(self):
        """Fresh clones of the template steps (fixed maps are shared, not cloned)."""
        self._validate_steps()
        last = len(self.steps) - 1
        self.steps_ = [
            (name, est if _step_kind(est) in ("skip", "fixed") and i < last else clone(est))
            for i, (name, est) in enumerate(self.steps)
        ]
        self._stream_deep_params = record_deep_params(self)
        self._fitted_step_params = {
            name: record_deep_params(step)
            for name, step in self.steps_
            if _has_params(step)
        }

    def _check_params_unchanged(self):
        """``set_params`` since the stream started: an error, never silently ignored.

        Both the template steps (``steps``) and the fitted ones (``steps_``, which
        indexing and ``named_steps`` give after fitting) are checked.
        """
        check_deep_params(self, built="the fitted steps (steps_) are clones made")
        recorded = self.__dict__.get("_fitted_step_params") or {}
        changed = [
            f"{name}__{key}"
            for name, step in self.steps_
            if name in recorded
            for key in changed_stream_params(step, recorded[name])
        ]
        if changed:
            raise ValueError(
                f"{_format_changed(changed)} changed (set_params on a fitted step, e.g. "
                "through named_steps) since this stream started; the step's state was "
                "learned with the previous values. Set them back, or call fit to start a "
                "new stream with the parameters of steps."
            )

    def _check_targets(self, X, y, final):
        """Validate ``y`` completely against the final step's stream, before any step
        learns (the steps check ``X`` themselves, and are rolled back if one rejects it).
        """
        if y is None:
            return
        if is_regressor(final) or "_n_targets" in getattr(final, "__dict__", {}):
            check_numeric(y, "y")
            # the stream's target shape, once the final estimator has one
            continuing = "_n_targets" in final.__dict__  # set by the first learning call
            check_target_shape(final, y, reset=not continuing)
            y_arr = as_float64(y, "y cannot be converted to float64 numbers")
            if not np.all(np.isfinite(y_arr)):
                raise ValueError("y contains NaN or infinity.")
        else:
            y_arr = np.asarray(y)
            if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
                raise ValueError("y contains NaN or infinity.")
        n_rows = _num_samples(X)
        if y_arr.ndim == 0 or y_arr.shape[0] != n_rows:
            raise ValueError(
                f"y has {y_arr.shape[0] if y_arr.ndim else 0} rows but X has {n_rows}: "
                "a stream needs one target per row."
            )

    def _as_array(self, X):
        # keep DataFrames as they are (first step may record feature names)
        return X if hasattr(X, "iloc") or hasattr(X, "shape") else np.asarray(X)

    def _stream_transformers(self, X, *, keep):
        """The rows of ``X`` through the transformers, each learning them; with
        ``keep``, a foreign transformer that learns is first copied
        (:func:`undo_on_rollback`)."""
        Xt = X
        for name, step in self.steps_[:-1]:
            if _is_skipped(step):
                continue
            if keep and _learns(step):
                undo_on_rollback(step)
            Xt = _stream_one_step(name, step, Xt)
        return Xt

    # ------------------------------------------------------------------ applying
    def _fitted(self):
        check_is_fitted(self)
        return Pipeline(self.steps_)

    @property
    def named_steps_(self):
        check_is_fitted(self)
        return Bunch(**dict(self.steps_))

    @property
    def named_steps(self):
        """The steps by name: the fitted ones once fitted, the templates before.

        As for :class:`~sklearn.pipeline.Pipeline`, whose steps are fitted in place:
        ``pipe.named_steps["qrewrlsregressor"].coef_`` after :meth:`fit`. The templates
        stay in ``steps`` (``get_params``).
        """
        return Bunch(**dict(self.__dict__.get("steps_", self.steps)))

    def __getitem__(self, ind):
        """A step (fitted once the pipeline is), or a sub-pipeline for a slice.

        The slice of a fitted pipeline is fitted: its ``steps`` are the templates and
        its ``steps_`` the fitted steps of that slice (shared, not copied, as
        :class:`~sklearn.pipeline.Pipeline` shares them), so ``pipe[:-1].transform(X)``
        applies the fitted transformers.
        """
        fitted = self.__dict__.get("steps_")
        if isinstance(ind, slice):
            if ind.step not in (None, 1):
                raise ValueError("Pipeline slicing only supports a step of 1")
            sub = self.__class__(self.steps[ind], verbose=self.verbose)
            if fitted is not None:
                sub.steps_ = fitted[ind]
                names = {name for name, _ in sub.steps_}
                recorded = self.__dict__.get("_stream_deep_params")
                if recorded is not None:
                    sub._stream_deep_params = {
                        k: v for k, v in recorded.items() if k.split("__", 1)[0] in names
                    }
                    if "steps" in recorded:
                        sub._stream_deep_params["steps"] = list(recorded["steps"])[ind]
                steps_params = self.__dict__.get("_fitted_step_params")
                if steps_params is not None:
                    sub._fitted_step_params = {
                        k: v for k, v in steps_params.items() if k in names
                    }
            return sub
        try:
            name, est = (fitted if fitted is not None else self.steps)[ind]
        except TypeError:  # not an int: a name
            return self.named_steps[ind]
        return est

    def set_output(self, *, transform=None):
        """Set the output container of every step's ``transform``, fitted ones too.

        Parameters
        ----------
        transform : {"default", "pandas", "polars"}, default=None
            As :meth:`sklearn.pipeline.Pipeline.set_output`; ``None`` leaves it
            unchanged. Steps that stream (``prequential_transform``, rows learned one
            at a time) give their output in the same container, with the names of
            ``get_feature_names_out``, so each step learns under the feature names it
            is later applied with.

        Returns
        -------
        self : StreamingPipeline
            This pipeline.
        """
        super().set_output(transform=transform)
        for _, step in self.__dict__.get("steps_", []):
            if not _is_skipped(step):
                _safe_set_output(step, transform=transform)
        return self

    predict = _applied("predict")
    decision_function = _applied("decision_function")
    predict_proba = _applied("predict_proba")
    predict_log_proba = _applied("predict_log_proba")
    transform = _applied("transform")
    fit_transform = _applied("fit_transform")
    inverse_transform = _applied("inverse_transform")
    score_samples = _applied("score_samples")
    fit_predict = _applied("fit_predict")
    score = _applied("score")
    get_feature_names_out = _applied("get_feature_names_out")
    classes_ = _fitted_attribute(
        "classes_", "The class labels of a fitted classifier as final step.")
    n_features_in_ = _fitted_attribute(
        "n_features_in_", "Number of features seen by the first step.")
    feature_names_in_ = _fitted_attribute(
        "feature_names_in_", "Names of the features seen by the first step.")

    def __sklearn_is_fitted__(self):
        return hasattr(self, "steps_")

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        # a chain keeps a dtype only if every step does (Pipeline copies the last step's)
        if tags.transformer_tags is not None:
            try:
                for _, step in self.steps:
                    if not _is_skipped(step):
                        kept = get_tags(step).transformer_tags
                        kept = kept.preserves_dtype if kept is not None else []
                        tags.transformer_tags.preserves_dtype = [
                            d for d in tags.transformer_tags.preserves_dtype if d in kept
                        ]
            except (ValueError, AttributeError, TypeError):
                pass  # steps not validated yet: keep Pipeline's tags
        return tags



def make_streaming_pipeline(*steps, verbose=False):
    """Build a :class:`StreamingPipeline`, naming each step after its class.

    Parameters
    ----------
    *steps : estimators
        Transformers, then the final estimator.
    verbose : bool, default=False
        Passed to :class:`StreamingPipeline`.

    Returns
    -------
    pipe : StreamingPipeline
        Steps named by lower-cased class name (``"randomfourierfeatures"``,
        ``"qrewrlsregressor"``, ...), numbered when a class repeats.

    See Also
    --------
    StreamingPipeline : The pipeline class.
    sklearn.pipeline.make_pipeline : The batch equivalent.

    Examples
    --------
    >>> from sklearn_orfit import (
    ...     QREWRLSRegressor, RandomFourierFeatures, make_streaming_pipeline)
    >>> pipe = make_streaming_pipeline(RandomFourierFeatures(64), QREWRLSRegressor())
    >>> [name for name, _ in pipe.steps]
    ['randomfourierfeatures', 'qrewrlsregressor']
    """
    return StreamingPipeline(_name_estimators(steps), verbose=verbose)
