"""Feature-partition ensembles: one sub-model per block of random features (ABO §6.4)."""

import copy
import os
from numbers import Integral

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, clone
from sklearn.utils import check_random_state, get_tags
from sklearn.utils.parallel import Parallel, delayed

from .._compat import HasMethods, Interval
from .._docstrings import fill_doc
from ._pipeline import check_deep_params, record_deep_params
from .._streaming._prequential import prequential_predict as _prequential_predict
from .._streaming._validation import accepts_keyword
from ..abo._qr_ewrls import QREWRLSRegressor
from ..abo._rff import RandomFourierFeatures
from .._streaming._base import (
    StreamingRegressorMixin, check_stream_sample_weight, clear_fitted_state, expected_failed_checks,
    make_private, stream_update, validate_stream,
)

__all__ = ["FeaturePartitionEnsemble"]

_MAX_SEED = np.iinfo(np.int32).max


# ---------------------------------------------------------------------- worker tasks
# Module-level functions, so that process backends can pickle them. Each learns on a
# private working copy of the partition's estimator and returns it; the ensemble commits
# the returned estimators only when every partition succeeded (all-or-nothing).
def _working_copy(estimator, *, copy_state, parent_pid):
    """A private, writable version of ``estimator`` to learn on.

    * ``copy_state`` False (the fresh estimators of a new stream): ``estimator`` itself.
    * In the parent's process (sequential or thread backends): a deep copy, so that the
      parent's estimator stays as it was until the ensemble commits.
    * In another process (loky, multiprocessing, a cluster): ``estimator`` was unpickled
      there and is already a private copy. joblib hands such workers arrays above its
      ``max_nbytes`` threshold (1 MB) as read-only memory maps, as
      ``joblib.load(mmap_mode="r")`` does, and the estimators write into their state:
      the maps are replaced by plain copies, in place, before learning (which also lets
      joblib delete its temporary files as soon as the task ends).
    """
    if not copy_state:
        return estimator
    if os.getpid() != parent_pid:
        make_private(estimator)
        return estimator
    work = copy.deepcopy(estimator)
    make_private(work)  # a copy of a memory map keeps the numpy.memmap class
    return work


def _partial_fit_partition(*, transformer, estimator, X, y, copy_state, parent_pid,
                           sample_weight=None):
    """Learn the chunk on one partition: ``estimator.partial_fit(block(X), y)``."""
    work = _working_copy(estimator, copy_state=copy_state, parent_pid=parent_pid)
    if sample_weight is None:
        work.partial_fit(transformer.transform(X), y)
    else:
        work.partial_fit(transformer.transform(X), y, sample_weight=sample_weight)
    return work


def _prequential_partition(*, transformer, estimator, X, y, copy_state, parent_pid, delay=0,
                           sample_weight=None):
    """Predict-then-update over the chunk on one partition, in one call."""
    work = _working_copy(estimator, copy_state=copy_state, parent_pid=parent_pid)
    y_pred = _prequential_predict(work, transformer.transform(X), y, delay=delay,
                                  sample_weight=sample_weight)
    return work, np.asarray(y_pred, dtype=np.float64)


def _check_template_takes_weights(template):
    """A clear ValueError, before anything learns, if the partitions take no weights."""
    reason = getattr(type(template), "_sample_weight_unsupported", None)
    if reason:
        raise ValueError(f"{type(template).__name__} does not accept sample_weight: {reason}")
    if not accepts_keyword(getattr(template, "partial_fit", None), "sample_weight"):
        raise ValueError(
            f"{type(template).__name__}.partial_fit does not accept sample_weight: the "
            "partitions cannot be weighted."
        )


def _predict_partition(*, transformer, estimator, X):
    """Predictions of one partition (no learning)."""
    return np.asarray(estimator.predict(transformer.transform(X)), dtype=np.float64)


def _may_change(key):
    """The parameter that may change mid-stream: ``n_jobs``, read at every call."""
    return key == "n_jobs"


def _block_slices(n_components, n_partitions):
    """``n_partitions`` contiguous slices of ``range(n_components)``, sizes within one."""
    # the sizes of numpy.array_split: the first ``n_components % n_partitions`` blocks
    # get one column more
    size, extra = divmod(n_components, n_partitions)
    widths = [size + (k < extra) for k in range(n_partitions)]
    stops = np.cumsum(widths)
    return [slice(int(stop - width), int(stop)) for stop, width in zip(stops, widths)]


def _sub_map(*, features, columns, X_probe):
    """A fitted copy of ``features`` that computes only the columns ``columns``.

    The copy has ``n_components = len(columns)`` and the block's frequencies and phases,
    so it is the standalone map of that width (scale ``sqrt(2/D_block)``) of the same
    draw. Checked on ``X_probe``: it must equal the block of the full map rescaled by
    ``sqrt(D/D_block)``; otherwise ``features`` is not a map this class can split.
    """
    D = features.random_weights_.shape[1]
    width = columns.stop - columns.start
    sub = clone(features)
    # the throw-away draw of fit() is seeded, so that it leaves no trace on the global
    # RNG; the public fitted arrays are then replaced by the block of the real draw
    random_state = sub.get_params().get("random_state")
    sub.set_params(n_components=width, random_state=0)
    sub.fit(X_probe)
    sub.random_weights_ = np.ascontiguousarray(features.random_weights_[:, columns])
    sub.random_offset_ = features.random_offset_[columns].copy()
    sub.set_params(random_state=random_state)
    expected = features.transform(X_probe)[:, columns] * np.sqrt(D / width)
    if not np.allclose(sub.transform(X_probe), expected, rtol=1e-10, atol=1e-12):
        raise TypeError(
            f"features={features!r} cannot be split into column blocks: a copy with "
            "n_components set to the block width and the block's random_weights_ and "
            "random_offset_ does not reproduce the block. Use RandomFourierFeatures or "
            "sklearn.kernel_approximation.RBFSampler."
        )
    return sub


@fill_doc()
class FeaturePartitionEnsemble(StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Average of streaming models, each fitted on one block of one random-feature draw.

    The feature map (default :class:`RandomFourierFeatures`) is drawn once, on the first
    call to :meth:`fit`, :meth:`partial_fit` or :meth:`prequential_predict`. Its ``D``
    columns are split into ``n_partitions`` contiguous blocks; since the columns of a
    random-feature map are i.i.d., each block is itself a random-feature map of the same
    kernel, of width ``D/P``. A clone of ``estimator`` (default
    :class:`QREWRLSRegressor`) learns on each block, and the ensemble predicts the mean
    of their predictions::

        ŷ(x) = (1/P) Σ_p ŷ_p(z_p(x)),    z_p(x) = sqrt(2/D_p) · cos(A_pᵀx + b_p)

    where ``A_p``, ``b_p`` are the block's columns of the one draw ``(A, b)``. The
    partitions are independent, so they run in parallel through joblib
    (:class:`sklearn.utils.parallel.Parallel`): processes, threads, or a cluster through
    joblib's dask backend, chosen with ``n_jobs`` and
    :func:`joblib.parallel_config`, without changing the code.

    Parameters
    ----------
    features : transformer, default=None
        The random-feature map to split: :class:`RandomFourierFeatures` (``None``:
        ``RandomFourierFeatures()``, 100 features) or
        :class:`sklearn.kernel_approximation.RBFSampler` — any transformer with an
        ``n_components`` parameter and fitted ``random_weights_`` of shape
        ``(n_features, n_components)`` and ``random_offset_`` of shape
        ``(n_components,)`` that defines the map. Cloned; the template is not modified.
    estimator : regressor, default=None
        The streaming model fitted on each block; it needs ``partial_fit`` and
        ``predict`` (``None``: ``QREWRLSRegressor()``). Cloned once per partition.
    n_partitions : int, default=4
        ``P``, the number of blocks (at most the number of features ``D``). Blocks are
        contiguous; their widths differ by at most one (those of
        :func:`numpy.array_split`).
    n_jobs : int, default=None
        Parallel jobs over the partitions, for every method. ``None`` means 1 unless in
        a :func:`joblib.parallel_config` context; ``-1`` means all processors. Results
        do not depend on it, nor on the joblib backend.
    random_state : int, RandomState instance or None, default=None
        When not ``None``, the one seed of the ensemble: integer seeds are drawn from it,
        in the parent process and before any work is sent out, for the feature map and
        for each partition's estimator (when they have a ``random_state`` parameter),
        replacing theirs. When ``None``, ``features`` and ``estimator`` keep their own
        ``random_state``.

    Attributes
    ----------
    features_ : transformer
        The full feature map, fitted (``random_weights_`` of shape
        ``(n_features_in_, D)``).
    feature_slices_ : list of slice, length n_partitions
        The columns of ``features_`` of each block.
    partition_features_ : list of transformers, length n_partitions
        The fitted map of each block: a copy of ``features_`` with ``n_components``
        set to the block's width and ``random_weights_`` of shape
        ``(n_features_in_, D_p)``, ``random_offset_`` of shape ``(D_p,)`` taken from
        the block's columns.
    estimators_ : list of regressors, length n_partitions
        The fitted estimator of each block.
    n_features_in_ : int
        Number of input features ``d``.
    {input_feature_names_in}
    {samples_seen}

    See Also
    --------
    RandomFourierFeatures : The default feature map.
    QREWRLSRegressor : The default sub-model (ABO).
    sklearn_orfit.prequential_predict : Predict-then-update over a stream.

    Notes
    -----
    **Scaling of the blocks.** Each sub-model sees its block as a standalone map of its
    width, scaled by ``sqrt(2/D_p)``, not by the full map's ``sqrt(2/D)``: a partition
    alone is exactly ``RandomFourierFeatures(n_components=D_p)`` feeding ``estimator``,
    and a ridge penalty means the same per partition as in a standalone model of that
    width. The choice matters only through the penalty: scaling the features by ``c``
    is the same as dividing a ridge ``α`` by ``c²``, and the minimum-norm (``α = 0``)
    predictions are invariant to it (``β`` scales by ``1/c``), up to rounding. With the
    full map's scale, ``α`` here would correspond to ``α · P`` there.

    **Cost.** Per row, :class:`QREWRLSRegressor` partitions cost ``O(N·D/P)`` each
    (``O(N·D)`` in total, as one full-width model) plus ``P`` small ``O(N³)`` solves
    instead of one; with ``P`` workers the latency is that of one partition. Each call
    sends one task per partition, the whole chunk at once (each worker maps the chunk
    with its block and runs its estimator's own vectorised ``prequential_predict`` or
    ``partial_fit``). Each task learns on a working copy of its partition's estimator
    (``copy.deepcopy``, ``O(N·D/P)`` numbers for :class:`QREWRLSRegressor`, once per
    call and partition, not per row; none on the first call of a stream), so that the
    ensemble can commit all partitions or none. Under a process or cluster backend each
    task also ships the estimator's state to the worker and back, so send large chunks.

    **All or nothing.** Workers return the updated copies, which replace the estimators
    held by the ensemble in one assignment, only once every partition has succeeded:
    nothing relies on a worker mutating the parent's objects, so every backend gives the
    same state. A call that raises — bad input (validated in the parent before any work
    is sent out), an exception or a ``KeyboardInterrupt`` while any partition learns —
    leaves the ensemble exactly as it was, on every backend; :meth:`fit` that raises
    keeps the previous stream. Predictions are averaged in partition order in the
    parent.

    **Per-row weights** (``sample_weight``) are passed to every partition's estimator,
    which must accept them (e.g. :class:`QREWRLSRegressor`).

    **Memory-mapped state.** joblib hands process workers arrays above its
    ``max_nbytes`` threshold (1 MB) as read-only memory maps, and
    ``joblib.load(path, mmap_mode="r")`` returns them too; the working copy is private
    and writable, so a partition of any size learns on any backend, and a
    memory-mapped ensemble continues its stream (the file is never written).

    **Parameters mid-stream.** The partitions are clones made from ``features``,
    ``estimator``, ``n_partitions`` and ``random_state`` when the stream starts. A
    change to any of them (or to a parameter of ``features`` or ``estimator``, e.g.
    ``set_params(estimator__window_size=50)``) after that makes the next
    :meth:`partial_fit` or :meth:`prequential_predict` raise a ValueError that says to
    call :meth:`fit`, which starts a new stream with the new values; it is never
    silently ignored. ``n_jobs`` may change at any time (it is read at every call).

    **Not guaranteed.** The ensemble is not the full-width model: for ``P > 1`` it
    averages ``P`` models of ``D/P`` features each (lower latency, and for
    interpolating models an average of ``P`` interpolators of the window); it equals
    the full-width model only for ``n_partitions=1``. Only regressors are supported
    (predictions are averaged).

    References
    ----------
    ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning in
    Non-stationary Time-series", §6.4 (feature-partition ensembles).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import (
    ...     FeaturePartitionEnsemble, QREWRLSRegressor, RandomFourierFeatures,
    ...     prequential_predict)
    >>> from sklearn_orfit.datasets import make_abo_series, make_lagged
    >>> X, y = make_lagged(make_abo_series(600, random_state=0), n_lags=7)
    >>> ens = FeaturePartitionEnsemble(
    ...     RandomFourierFeatures(512, random_state=0), QREWRLSRegressor(window_size=20),
    ...     n_partitions=4)
    >>> y_pred = prequential_predict(ens, X, y)
    >>> bool(np.mean((y[100:] - y_pred[100:]) ** 2) < np.var(y))
    True
    >>> [est.n_features_in_ for est in ens.estimators_], ens.n_samples_seen_
    ([128, 128, 128, 128], 593)
    """

    _parameter_constraints: dict = {
        "features": [None, HasMethods(["fit", "transform"])],
        "estimator": [None, HasMethods(["partial_fit", "predict"])],
        "n_partitions": [Interval(Integral, 1, None, closed="left")],
        "n_jobs": [None, Integral],
        "random_state": ["random_state"],
    }

    # fit, partial_fit, prequential_predict and predict: StreamingRegressorMixin's, over
    # _partial_fit and _predict_validated; the partitions' parameters are validated when
    # they learn, so nested validation is on
    _skip_nested_validation = False

    def __init__(
        self, features=None, estimator=None, *, n_partitions=4, n_jobs=None, random_state=None
    ):
        self.features = features
        self.estimator = estimator
        self.n_partitions = n_partitions
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _predict_validated(self, X):
        """Mean of the partitions' predictions of validated rows (no learning)."""
        preds = Parallel(n_jobs=self.n_jobs)(
            delayed(_predict_partition)(transformer=transformer, estimator=estimator, X=X)
            for transformer, estimator in zip(self.partition_features_, self.estimators_)
        )
        return _average(preds)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        sub = get_tags(self._estimator_template())
        tags.target_tags.multi_output = sub.target_tags.multi_output
        tags.regressor_tags.poor_score = sub.regressor_tags.poor_score
        return tags

    def _expected_failed_checks(self):
        """scikit-learn checks the partitions' model fails, with the reason (see
        :func:`sklearn_orfit._streaming._base.expected_failed_checks`)."""
        return expected_failed_checks(self._estimator_template())

    # ------------------------------------------------------------------ internals
    def _estimator_template(self):
        return QREWRLSRegressor() if self.estimator is None else self.estimator

    def _reset(self):
        clear_fitted_state(self, private=("_y_ndim", "_n_targets", "_stream_deep_params"))

    def _start(self, X):
        """Draw the map and build the partitions (returned, not stored, until success)."""
        rng = check_random_state(self.random_state)
        features = clone(RandomFourierFeatures() if self.features is None else self.features)
        if self.random_state is not None and "random_state" in features.get_params():
            features.set_params(random_state=int(rng.randint(_MAX_SEED)))
        features.fit(X)
        weights = getattr(features, "random_weights_", None)
        offset = getattr(features, "random_offset_", None)
        if (
            weights is None
            or offset is None
            or "n_components" not in features.get_params()
            or np.ndim(weights) != 2
            or np.shape(offset) != (np.shape(weights)[1],)
        ):
            raise TypeError(
                f"features={features!r} is not a random-feature map that can be split: "
                "it needs an n_components parameter and fitted random_weights_ of shape "
                "(n_features, n_components) and random_offset_ of shape (n_components,)."
            )
        D = weights.shape[1]
        if self.n_partitions > D:
            raise ValueError(
                f"n_partitions={self.n_partitions} is larger than the number of random "
                f"features ({D}): every partition needs at least one feature."
            )
        slices = _block_slices(D, self.n_partitions)
        probe = X[:1]
        sub_maps = [_sub_map(features=features, columns=sl, X_probe=probe) for sl in slices]
        template = self._estimator_template()
        estimators = []
        for _ in slices:
            est = clone(template)
            if self.random_state is not None and "random_state" in est.get_params():
                est.set_params(random_state=int(rng.randint(_MAX_SEED)))
            estimators.append(est)
        return features, slices, sub_maps, estimators

    def __sklearn_is_fitted__(self):
        return hasattr(self, "estimators_")

    def _partial_fit(self, X, y, *, predict, reset, delay=0, sample_weight=None):
        """One learning call, all-or-nothing (the package's update template).

        The partitions learn on working copies (:func:`_working_copy`); the copies are
        committed together, in one assignment, only when every partition succeeded. Any
        exception or ``KeyboardInterrupt`` before that leaves the ensemble's attributes
        as they were (:func:`~sklearn_orfit._streaming._base.stream_update`).
        """
        with stream_update(self, check_params=False):
            first_call = reset or "estimators_" not in self.__dict__
            if first_call:
                self._reset()
            else:
                check_deep_params(self, built="the partitions were built", ignore=_may_change,
                                  note=" (n_jobs may change at any time)")
            X, Y, y_ndim = validate_stream(self, X, y, reset=first_call)
            w = check_stream_sample_weight(sample_weight, X.shape[0], reset=reset)
            if w is not None:
                _check_template_takes_weights(
                    self._estimator_template() if first_call else self.estimators_[0]
                )
            y = Y[:, 0] if y_ndim == 1 else Y
            n_targets = None if y_ndim == 1 else Y.shape[1]
            if first_call:
                features, slices, sub_maps, estimators = self._start(X)
            else:
                sub_maps, estimators = self.partition_features_, self.estimators_

            task = _partial_fit_partition
            extra = {} if w is None else {"sample_weight": w}
            if predict:
                task = _prequential_partition
                extra["delay"] = delay
            # fresh estimators of a first call are already private: no copy needed
            results = Parallel(n_jobs=self.n_jobs)(
                delayed(task)(
                    transformer=transformer, estimator=estimator, X=X, y=y,
                    copy_state=not first_call, parent_pid=os.getpid(), **extra,
                )
                for transformer, estimator in zip(sub_maps, estimators)
            )
            if predict:
                estimators, preds = zip(*results)
                y_pred = _average(preds)
            else:
                estimators, y_pred = results, None
            state = {
                "estimators_": list(estimators),
                "n_samples_seen_": (0 if first_call else self.n_samples_seen_) + X.shape[0],
            }
            if first_call:
                state.update(
                    features_=features,
                    feature_slices_=slices,
                    partition_features_=sub_maps,
                    _y_ndim=y_ndim,
                    _n_targets=n_targets,
                    _stream_deep_params=record_deep_params(self, ignore=_may_change),
                )
            self.__dict__.update(state)  # the commit: one call, after every partition
        return y_pred


def _average(preds):
    """Mean over partitions, summed in partition order (the same on every backend)."""
    total = np.array(preds[0], dtype=np.float64, copy=True)
    for p in preds[1:]:
        total += p
    total /= len(preds)
    return total
