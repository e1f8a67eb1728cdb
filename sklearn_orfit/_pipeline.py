"""A scikit-learn ``Pipeline`` that learns from a stream (SPEC §0).

scikit-learn's :class:`~sklearn.pipeline.Pipeline` has no ``partial_fit``, and its ``fit``
fits each transformer on the whole batch, which in a stream is look-ahead. This module
adds a pipeline whose ``fit`` *is* one pass of ``partial_fit`` over the rows, and whose
``prequential_predict`` is the predict-then-update protocol of
:func:`~sklearn_orfit.prequential_predict` for the whole chain.
"""

import numpy as np
from scipy import sparse
from sklearn.base import _fit_context, clone
from sklearn.frozen import FrozenEstimator
from sklearn.pipeline import Pipeline, _name_estimators
from sklearn.preprocessing import FunctionTransformer
from sklearn.utils import Bunch, _safe_indexing, check_consistent_length, get_tags
from sklearn.utils._param_validation import Hidden
from sklearn.utils.metaestimators import available_if
from sklearn.utils.validation import _num_samples, check_is_fitted

from ._prequential import prequential_predict as _prequential_predict
from ._rff import RandomFourierFeatures

__all__ = ["StreamingPipeline", "make_streaming_pipeline"]

# Transformers whose map, once fitted, never changes: fitting depends on the data only
# through its shape. Other classes opt in with a class attribute
# ``_stateless_after_fit = True``.
_STATELESS_AFTER_FIT = (RandomFourierFeatures, FunctionTransformer)


def _is_stateless_after_fit(transformer):
    return bool(getattr(transformer, "_stateless_after_fit", False)) or isinstance(
        transformer, _STATELESS_AFTER_FIT
    )


def _is_fitted(estimator):
    try:
        check_is_fitted(estimator)
    except Exception:  # NotFittedError, or an object check_is_fitted cannot read
        return False
    return True


def _is_skipped(step):
    return step is None or (isinstance(step, str) and step == "passthrough")


def _final_has(attr):
    def check(self):
        final = self.steps[-1][1]
        if attr == "transform" and _is_skipped(final):
            return True
        return hasattr(final, attr)

    return check


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
        return transformer.prequential_transform(X)
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
        return np.concatenate(rows)
    if not fitted:
        raise ValueError(
            f"Step {name!r} ({type(transformer).__name__}) cannot learn from a stream "
            "(it has no partial_fit) and is not fitted. Fit it beforehand and wrap it in "
            "sklearn.frozen.FrozenEstimator, so that it stays fitted when the pipeline "
            "is cloned (e.g. by GridSearchCV); it is then used as a fixed map."
        )
    return transformer.transform(X)


class StreamingPipeline(Pipeline):
    """A :class:`~sklearn.pipeline.Pipeline` that learns one pass over a stream.

    :meth:`partial_fit` sends a chunk of rows through the transformers — each row
    transformed with the state the transformer had *before* that row, then learned — and
    then calls the final estimator's ``partial_fit`` on the transformed chunk.
    :meth:`fit` is a reset followed by :meth:`partial_fit`, so the two cannot disagree.
    :meth:`prequential_predict` is predict-then-update for the whole chain:
    ``y_pred[t]`` comes from the state learned on rows ``< t``, so perturbing any later
    row, ``X`` or ``y``, leaves ``y_pred[:t+1]`` bit-for-bit unchanged (SPEC §0).

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
        The fitted steps by name (``pipe.named_steps_.qrewrlsregressor.coef_``).
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
    The targets are checked (length, finiteness) before any step learns, and the first
    step checks ``X`` before it learns; a later step that rejects its input (e.g. a
    fixed map with another number of features) can leave the earlier steps updated.
    ``memory`` and ``transform_input`` of :class:`~sklearn.pipeline.Pipeline` are not
    supported (nothing is cached: each step learns once per row anyway). Indexing,
    slicing and ``named_steps`` give the template steps, unfitted, as in ``steps``; the
    fitted ones are ``steps_`` and ``named_steps_``.

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
    >>> pipe.named_steps_.qrewrlsregressor.n_samples_seen_
    593
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
    def fit(self, X, y=None):
        """Reset, then learn the rows of ``X`` in order (as one :meth:`partial_fit`).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets.

        Returns
        -------
        self : StreamingPipeline
            The fitted pipeline.
        """
        self._start_stream()
        return self._partial_fit(X, y)

    @_fit_context(prefer_skip_nested_validation=False)
    def partial_fit(self, X, y=None):
        """Learn the rows of ``X`` in order, continuing the stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets), default=None
            Targets.

        Returns
        -------
        self : StreamingPipeline
            The updated pipeline.
        """
        if not hasattr(self, "steps_"):
            self._start_stream()
        return self._partial_fit(X, y)

    def prequential_predict(self, X, y):
        """Predict each row from the state learned on the rows before it, then learn it.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Their targets.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``y_pred[t]`` from the pipeline that has learned rows ``< t`` (0 before the
            final estimator's first row).
        """
        if not hasattr(self, "steps_"):
            self._validate_params()
            self._start_stream()
        final = self.steps_[-1][1]
        if _is_skipped(final) or not hasattr(final, "partial_fit"):
            raise TypeError(
                "prequential_predict needs a final estimator with partial_fit, got "
                f"{final!r}."
            )
        X = self._as_array(X)
        self._check_targets(X, y)
        Xt = self._stream_transformers(X)
        return _prequential_predict(final, Xt, y)

    @available_if(_final_has("transform"))
    def prequential_transform(self, X, y=None):
        """Transform each row with the state before it, then learn it (all steps).

        Available when every step is a transformer, so that a streaming pipeline can be
        a step of another one.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : None
            Ignored.

        Returns
        -------
        Xt : ndarray of shape (n_samples, n_output_features)
            Row ``t`` transformed by the chain that has learned rows ``< t``.
        """
        if not hasattr(self, "steps_"):
            self._validate_params()
            self._start_stream()
        Xt = self._stream_transformers(self._as_array(X))
        final_name, final = self.steps_[-1]
        if _is_skipped(final):
            return Xt
        return _stream_one_step(final_name, final, Xt)

    def _start_stream(self):
        """Fresh clones of the template steps (fixed maps are shared, not cloned)."""
        self._validate_steps()
        last = len(self.steps) - 1
        self.steps_ = [
            (name, est if _step_kind(est) in ("skip", "fixed") and i < last else clone(est))
            for i, (name, est) in enumerate(self.steps)
        ]

    def _check_targets(self, X, y):
        """Reject bad targets before any step learns (steps check ``X`` themselves)."""
        if y is None:
            return
        y_arr = np.asarray(y)
        check_consistent_length(X, y_arr)
        if y_arr.dtype.kind in "fc" and not np.all(np.isfinite(y_arr)):
            raise ValueError("y contains NaN or infinity.")

    def _as_array(self, X):
        # keep DataFrames as they are (first step may record feature names)
        return X if hasattr(X, "iloc") or hasattr(X, "shape") else np.asarray(X)

    def _stream_transformers(self, X):
        Xt = X
        for name, step in self.steps_[:-1]:
            if _is_skipped(step):
                continue
            Xt = _stream_one_step(name, step, Xt)
        return Xt

    def _partial_fit(self, X, y):
        X = self._as_array(X)
        self._check_targets(X, y)
        Xt = self._stream_transformers(X)
        name, final = self.steps_[-1]
        if _is_skipped(final):
            return self
        if hasattr(final, "partial_fit"):
            final.partial_fit(Xt, y)
        elif hasattr(final, "prequential_transform") or hasattr(final, "transform"):
            _stream_one_step(name, final, Xt)
        else:
            raise TypeError(
                f"The final step {name!r} ({type(final).__name__}) has no partial_fit: "
                "a streaming pipeline cannot update it."
            )
        return self

    # ------------------------------------------------------------------ applying
    def _fitted(self):
        check_is_fitted(self)
        return Pipeline(self.steps_)

    @property
    def named_steps_(self):
        check_is_fitted(self)
        return Bunch(**dict(self.steps_))

    @available_if(_final_has("predict"))
    def predict(self, X, **params):
        """Apply the fitted transformers, then the final ``predict`` (no learning).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        **params : dict
            Passed to the final estimator's ``predict``.

        Returns
        -------
        y_pred : ndarray
            The predictions of the current state.
        """
        return self._fitted().predict(X, **params)

    @available_if(_final_has("transform"))
    def transform(self, X, **params):
        """Apply the fitted transformers (no learning).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        **params : dict
            Passed to the steps' ``transform``.

        Returns
        -------
        Xt : ndarray of shape (n_samples, n_output_features)
            The transformed rows.
        """
        return self._fitted().transform(X, **params)

    @available_if(_final_has("transform"))
    def fit_transform(self, X, y=None, **params):
        """:meth:`fit`, then :meth:`transform` with the final state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like or None, default=None
            Targets, passed to the steps.
        **params : dict
            Passed to :meth:`transform`.

        Returns
        -------
        Xt : ndarray of shape (n_samples, n_output_features)
            The rows transformed by the fitted pipeline.
        """
        return self.fit(X, y).transform(X, **params)

    @available_if(_final_has("inverse_transform"))
    def inverse_transform(self, X, **params):
        """Apply the fitted steps' ``inverse_transform`` in reverse order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_output_features)
            Transformed rows.
        **params : dict
            Passed to the steps.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            The rows before transformation.
        """
        return self._fitted().inverse_transform(X, **params)

    @available_if(_final_has("decision_function"))
    def decision_function(self, X, **params):
        """Apply the fitted transformers, then the final ``decision_function``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        **params : dict
            Passed to the final estimator.

        Returns
        -------
        scores : ndarray
            The final estimator's decision function.
        """
        return self._fitted().decision_function(X, **params)

    @available_if(_final_has("predict_proba"))
    def predict_proba(self, X, **params):
        """Apply the fitted transformers, then the final ``predict_proba``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        **params : dict
            Passed to the final estimator.

        Returns
        -------
        proba : ndarray of shape (n_samples, n_classes)
            Class probabilities.
        """
        return self._fitted().predict_proba(X, **params)

    @available_if(_final_has("predict_log_proba"))
    def predict_log_proba(self, X, **params):
        """Apply the fitted transformers, then the final ``predict_log_proba``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        **params : dict
            Passed to the final estimator.

        Returns
        -------
        log_proba : ndarray of shape (n_samples, n_classes)
            Log class probabilities.
        """
        return self._fitted().predict_log_proba(X, **params)

    @available_if(_final_has("score_samples"))
    def score_samples(self, X):
        """Apply the fitted transformers, then the final ``score_samples``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.

        Returns
        -------
        scores : ndarray of shape (n_samples,)
            The final estimator's scores.
        """
        return self._fitted().score_samples(X)

    @available_if(_final_has("fit_predict"))
    def fit_predict(self, X, y=None, **params):
        """:meth:`fit`, then :meth:`predict` with the final state.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like or None, default=None
            Targets.
        **params : dict
            Passed to :meth:`predict`.

        Returns
        -------
        y_pred : ndarray
            Predictions of the fitted pipeline on ``X``.
        """
        return self.fit(X, y).predict(X, **params)

    @available_if(_final_has("score"))
    def score(self, X, y=None, sample_weight=None, **params):
        """The final estimator's ``score`` on the transformed rows (no learning).

        For the predict-then-update score of a stream, use
        :func:`~sklearn_orfit.model_selection.make_prequential_scorer`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.
        y : array-like or None, default=None
            Targets.
        sample_weight : array-like of shape (n_samples,), default=None
            Passed to the final ``score``.
        **params : dict
            Passed to the steps.

        Returns
        -------
        score : float
            The final estimator's score.
        """
        return self._fitted().score(X, y, sample_weight=sample_weight, **params)

    def get_feature_names_out(self, input_features=None):
        """Output feature names of the fitted chain.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names.

        Returns
        -------
        feature_names_out : ndarray of str objects
            Transformed feature names.
        """
        return self._fitted().get_feature_names_out(input_features)

    @property
    def classes_(self):
        """The class labels of a fitted classifier as final step."""
        return self._fitted().classes_

    @property
    def n_features_in_(self):
        """Number of features seen by the first step."""
        return self._fitted().n_features_in_

    @property
    def feature_names_in_(self):
        """Names of the features seen by the first step."""
        return self._fitted().feature_names_in_

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

    def __getitem__(self, ind):
        if isinstance(ind, slice):
            if ind.step not in (None, 1):
                raise ValueError("Pipeline slicing only supports a step of 1")
            return self.__class__(self.steps[ind], verbose=self.verbose)
        return super().__getitem__(ind)


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
