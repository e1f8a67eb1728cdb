"""Prequential model selection with stock scikit-learn tools (the ABO paper's §4 protocol).

scikit-learn's cross-validation fits a model on a training set and scores a *frozen*
model on a test set. Online learners are judged differently: the model is warmed up on
the rows before a fold, then predicts each row of the fold and learns it before the
next (predict-then-update). The two pieces here make ``GridSearchCV``,
``RandomizedSearchCV`` and ``cross_validate`` do exactly that:

* :class:`PrequentialSplit` — ``cv=``: rolling folds, each with the warm-up block before
  it as "train" and the fold as "test";
* :func:`make_prequential_scorer` — ``scoring=``: copies the warmed-up estimator and
  scores its prequential predictions over the fold.
"""

import copy

import numpy as np
from sklearn.model_selection import BaseCrossValidator
from sklearn.utils.metadata_routing import MetadataRequest, get_routing_for_object

from ._compat import _MetadataRequester, _num_samples, _routing_enabled
from ._streaming._prequential import prequential_predict
from ._streaming._validation import accepts_keyword, check_int
from ._streaming._base import check_stream_sample_weight
from .metrics import res_mse, res_var

__all__ = ["PrequentialSplit", "make_prequential_scorer", "validation_test_splits"]


class PrequentialSplit(BaseCrossValidator):
    """Rolling folds for prequential evaluation: warm up before a fold, then stream it.

    The folds are ``n_splits`` consecutive blocks of ``test_size`` rows ending
    ``offset`` rows before the end of the data. For each fold, ``split`` yields

    * ``train``: the ``warmup_size`` rows just before the fold (all earlier rows when
      ``warmup_size=None``), ending ``gap`` rows before it;
    * ``test``: the fold's rows.

    Used as ``cv=`` with a streaming estimator, ``fit(X[train], y[train])`` warms the
    model up, and a scorer from :func:`make_prequential_scorer` evaluates it
    predict-then-update over ``X[test]`` — the ABO paper's protocol, where each fold's
    model is initialised on a batch the size of its window.

    Parameters
    ----------
    n_splits : int, default=5
        Number of folds (>= 1).
    test_size : int or None, default=None
        Rows per fold. ``None``: ``(n_samples − offset) // (n_splits + 1)``, as
        :class:`~sklearn.model_selection.TimeSeriesSplit`.
    warmup_size : int or None, default=None
        Rows the model is initialised on before each fold (ABO: the window length).
        ``None``: every row before the fold (an expanding warm-up).
    gap : int, default=0
        Rows left out between the warm-up block and the fold.
    offset : int, default=0
        Rows left out after the last fold, so that later rows stay unseen: validation
        folds for tuning, then test folds after them for reporting (see
        :func:`validation_test_splits`).
    delay : int, default=0
        Labels arrive ``delay`` rows late (``horizon − 1`` for ``horizon``-step-ahead
        rows, see :func:`~sklearn_orfit.prequential_predict`); give the scorer the same
        value (:func:`make_prequential_scorer`). The last ``delay`` rows before each
        fold, whose labels are not yet known when the fold starts, move from the
        warm-up block to the head of ``test``: the scorer learns them as their labels
        come due and leaves their predictions out of the score, so exactly the fold's
        rows are scored, each by a model that has learned only labels known at its
        time.

    See Also
    --------
    validation_test_splits : Validation folds followed by test folds.
    make_prequential_scorer : The matching ``scoring=``.
    sklearn.model_selection.TimeSeriesSplit : The batch analogue.

    Notes
    -----
    Folds never overlap, and each warm-up block lies entirely before its fold, so no
    row of a fold is seen before it is predicted. Warm-up blocks may overlap earlier
    folds (the rows before a fold are the previous fold's rows), exactly as a model
    running over the stream would have seen them. With a ``gap``, lag features built
    inside the chain (:class:`~sklearn_orfit.LagTransformer`) reach across the gap:
    build lags beforehand (:func:`~sklearn_orfit.datasets.make_lagged`) when using one.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.model_selection import PrequentialSplit
    >>> cv = PrequentialSplit(3, test_size=4, warmup_size=2)
    >>> for train, test in cv.split(np.zeros((20, 1))):
    ...     print(train, test)
    [6 7] [ 8  9 10 11]
    [10 11] [12 13 14 15]
    [14 15] [16 17 18 19]
    """

    def __init__(self, n_splits=5, *, test_size=None, warmup_size=None, gap=0, offset=0,
                 delay=0):
        self.n_splits = n_splits
        self.test_size = test_size
        self.warmup_size = warmup_size
        self.gap = gap
        self.offset = offset
        self.delay = delay

    def get_n_splits(self, X=None, y=None, groups=None):
        """Number of folds.

        Parameters
        ----------
        X, y, groups : object
            Ignored.

        Returns
        -------
        n_splits : int
            ``n_splits``.
        """
        return check_int(self.n_splits, "n_splits", minimum=1)

    def fold_bounds(self, n_samples):
        """The ``(warmup_start, fold_start, fold_stop)`` of every fold.

        Parameters
        ----------
        n_samples : int
            Length of the data.

        Returns
        -------
        bounds : list of tuple of int
            Per fold: first warm-up row, first fold row, one past the last fold row.
        """
        n_splits = check_int(self.n_splits, "n_splits", minimum=1)
        gap = check_int(self.gap, "gap", minimum=0)
        offset = check_int(self.offset, "offset", minimum=0)
        warmup = check_int(self.warmup_size, "warmup_size", minimum=1, allow_none=True)
        usable = n_samples - offset
        test_size = check_int(self.test_size, "test_size", minimum=1, allow_none=True)
        if test_size is None:
            test_size = usable // (n_splits + 1)
            if test_size < 1:
                raise ValueError(
                    f"Too few rows ({n_samples}, offset {offset}) for {n_splits} folds."
                )
        delay = check_int(self.delay, "delay", minimum=0)
        first = usable - n_splits * test_size
        needed = gap + delay + (warmup if warmup is not None else 1)
        if first < needed:
            raise ValueError(
                f"{n_splits} folds of {test_size} rows after a warm-up of "
                f"{warmup if warmup is not None else '>= 1'} rows, a gap of {gap} and "
                f"a delay of {delay} need {n_splits * test_size + needed + offset} rows; got {n_samples}."
            )
        bounds = []
        for k in range(n_splits):
            start = first + k * test_size
            warm_start = 0 if warmup is None else start - delay - gap - warmup
            bounds.append((warm_start, start, start + test_size))
        return bounds

    def _iter_test_indices(self, X=None, y=None, groups=None):  # pragma: no cover
        raise NotImplementedError  # split is overridden: train is not the complement

    def split(self, X, y=None, groups=None):
        """Yield ``(warm-up rows, fold rows)`` for every fold, in time order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            The data (only its length is used).
        y : array-like, default=None
            Ignored.
        groups : array-like, default=None
            Ignored.

        Yields
        ------
        train : ndarray of int
            The warm-up rows, in order.
        test : ndarray of int
            The fold's rows, in order, after the ``delay`` rows whose labels are still
            due when the fold starts.
        """
        n_samples = _num_samples(X)
        gap = check_int(self.gap, "gap", minimum=0)
        delay = check_int(self.delay, "delay", minimum=0)
        for warm_start, start, stop in self.fold_bounds(n_samples):
            # the last `delay` rows before the fold: labels not yet known at its start
            lead = start - delay
            yield np.arange(warm_start, lead - gap), np.arange(lead, stop)

    def __repr__(self):
        return (
            f"{type(self).__name__}(n_splits={self.n_splits}, test_size={self.test_size}, "
            f"warmup_size={self.warmup_size}, gap={self.gap}, offset={self.offset}, "
            f"delay={self.delay})"
        )


def validation_test_splits(
    n_validation=8,
    n_test=5,
    *,
    validation_size,
    test_size=None,
    warmup_size=None,
    gap=0,
    delay=0,
):
    """Validation folds for tuning, then later test folds for reporting (ABO §4).

    The last ``n_test`` folds of ``test_size`` rows end the data; the ``n_validation``
    folds of ``validation_size`` rows come just before them. Tune on the first splitter
    (``GridSearchCV(..., cv=validation_cv)``), report on the second
    (``cross_validate(best, ..., cv=test_cv)``): no test row is ever scored during
    tuning.

    Parameters
    ----------
    n_validation : int, default=8
        Validation folds (the ABO paper uses 8).
    n_test : int, default=5
        Test folds (the ABO paper uses 5).
    validation_size : int
        Rows per validation fold.
    test_size : int or None, default=None
        Rows per test fold (``None``: ``validation_size``).
    warmup_size : int or None, default=None
        Warm-up rows before each fold (``None``: every earlier row).
    gap : int, default=0
        Rows between each warm-up block and its fold.
    delay : int, default=0
        Labels ``delay`` rows late (see :class:`PrequentialSplit`).

    Returns
    -------
    validation_cv : PrequentialSplit
        The validation folds (``offset = n_test · test_size``).
    test_cv : PrequentialSplit
        The test folds.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.model_selection import validation_test_splits
    >>> val, test = validation_test_splits(2, 1, validation_size=3, test_size=4,
    ...                                    warmup_size=2)
    >>> X = np.zeros((14, 1))
    >>> for train, test_rows in val.split(X):
    ...     print(train, test_rows)
    [2 3] [4 5 6]
    [5 6] [7 8 9]
    >>> for train, test_rows in test.split(X):
    ...     print(train, test_rows)
    [8 9] [10 11 12 13]
    """
    test_size = validation_size if test_size is None else test_size
    n_test = check_int(n_test, "n_test", minimum=1)
    test_size = check_int(test_size, "test_size", minimum=1)
    validation_cv = PrequentialSplit(
        n_validation,
        test_size=validation_size,
        warmup_size=warmup_size,
        gap=gap,
        offset=n_test * test_size,
        delay=delay,
    )
    test_cv = PrequentialSplit(n_test, test_size=test_size, warmup_size=warmup_size, gap=gap,
                               delay=delay)
    return validation_cv, test_cv


_METRICS = {
    "mse": (res_mse, False),
    "res_mse": (res_mse, False),
    "var": (res_var, False),
    "res_var": (res_var, False),
    "rmse": (lambda y, p: float(np.sqrt(res_mse(y, p))), False),
    "mae": (lambda y, p: float(np.mean(np.abs(np.asarray(y) - np.asarray(p)))), False),
}


def _check_can_stream(estimator):
    """A clear error for an estimator that cannot learn a fold row by row."""
    if callable(getattr(estimator, "prequential_predict", None)):
        return
    if not callable(getattr(estimator, "partial_fit", None)):
        raise TypeError(
            f"{type(estimator).__name__} cannot be scored prequentially: it has neither "
            "prequential_predict nor partial_fit, so it cannot learn the fold's rows as "
            "they arrive. Use a streaming estimator (e.g. wrap the model and its target "
            "transform in StreamingTransformedTargetRegressor, or its steps in "
            "StreamingPipeline), or a batch scorer."
        )


def _weighted_mean(v, w):
    """Per-output weighted mean of ``v`` (rows weighted by ``w``), averaged over outputs."""
    v = v.reshape(v.shape[0], -1)
    return float(np.mean(w @ v / w.sum()))


def _weighted_res_var(e2, w):
    """Frequency-weighted sample variance of the squared errors, averaged over outputs."""
    total = w.sum()
    if not total > 1.0:
        raise ValueError(
            "the weighted ResVAR is Σw(e² − m)²/(Σw − 1) (frequency weights, ddof=1): it "
            f"needs the scored rows' weights to sum above 1, got {total!r}."
        )
    e2 = e2.reshape(e2.shape[0], -1)
    m = w @ e2 / total
    return float(np.mean(w @ (e2 - m) ** 2 / (total - 1.0)))


_WEIGHTED = {
    "mse": lambda e, w: _weighted_mean(e * e, w),
    "res_mse": lambda e, w: _weighted_mean(e * e, w),
    "var": lambda e, w: _weighted_res_var(e * e, w),
    "res_var": lambda e, w: _weighted_res_var(e * e, w),
    "rmse": lambda e, w: float(np.sqrt(_weighted_mean(e * e, w))),
    "mae": lambda e, w: _weighted_mean(np.abs(e), w),
}



class _PrequentialScorer(_MetadataRequester):
    """Scorer: prequential predictions of a copy of the fitted estimator, then metrics.

    Requests ``sample_weight`` for ``score`` like scikit-learn's scorers
    (``set_score_request(sample_weight=True)``, with metadata routing enabled).
    """

    def __init__(self, metrics, single, skip, delay=0):
        self._metrics = metrics  # name -> (function, greater_is_better)
        self._single = single
        self._skip = skip
        self._delay = delay

    def set_score_request(self, **kwargs):
        """Request the metadata this scorer takes (``sample_weight``), for routing.

        Only available with metadata routing enabled, as for scikit-learn's scorers.

        Parameters
        ----------
        **kwargs : dict
            ``sample_weight=`` ``True``, ``False``, ``None`` or an alias (str).

        Returns
        -------
        self : callable
            This scorer.
        """
        if not _routing_enabled():
            raise RuntimeError(
                "This method is only available when metadata routing is enabled. You "
                "can enable it using sklearn.set_config(enable_metadata_routing=True)."
            )
        unknown = sorted(set(kwargs) - {"sample_weight"})
        if unknown:
            raise TypeError(
                f"Unexpected args: {unknown}: a prequential scorer takes only sample_weight."
            )
        request = MetadataRequest(owner=self)
        for param, alias in kwargs.items():
            request.score.add_request(param=param, alias=alias)
        self._metadata_request = request
        return self

    def _get_metadata_request(self):
        if hasattr(self, "_metadata_request"):
            return get_routing_for_object(self._metadata_request)
        # not requested until set_score_request (scikit-learn's convention for scorers)
        request = MetadataRequest(owner=self)
        request.score.add_request(param="sample_weight", alias=None)
        return request

    def __call__(self, estimator, X, y_true, sample_weight=None):
        _check_can_stream(estimator)
        w = check_stream_sample_weight(sample_weight, _num_samples(X))
        if w is not None:
            for name, (func, _) in self._metrics.items():
                builtin = name in _WEIGHTED and func is _METRICS[name][0]
                if not builtin and not accepts_keyword(func, "sample_weight"):
                    raise ValueError(
                        f"The metric {name!r} does not take sample_weight; give it a "
                        "sample_weight keyword, or score without weights."
                    )
        # the search keeps the fitted estimator: learn the fold on a copy
        model = copy.deepcopy(estimator)
        y_pred = prequential_predict(model, X, y_true, delay=self._delay, sample_weight=w)
        # the first `delay` rows were predicted by a model that had learned labels not
        # yet known at their time (the warm-up's last rows): never scored
        first = self._delay + self._skip
        if first >= _num_samples(X):
            raise ValueError(
                f"The fold has {_num_samples(X)} rows; none is left to score after "
                f"delay={self._delay} and skip={self._skip}."
            )
        y_true = np.asarray(y_true)[first:]
        y_pred = np.asarray(y_pred)[first:]
        if w is not None:
            w = w[first:]
            if not w.sum() > 0:
                raise ValueError(
                    "Every scored row of the fold has sample_weight 0: the weighted "
                    "metrics are undefined."
                )
            err = np.asarray(y_true, dtype=np.float64) - np.asarray(y_pred, dtype=np.float64)
        scores = {}
        for name, (func, greater_is_better) in self._metrics.items():
            if w is None:
                value = float(func(y_true, y_pred))
            elif name in _WEIGHTED and func is _METRICS[name][0]:
                value = _WEIGHTED[name](err, w)
            else:
                value = float(func(y_true, y_pred, sample_weight=w))
            scores[name] = value if greater_is_better else -value
        return scores[self._single] if self._single is not None else scores

    def __repr__(self):
        names = list(self._metrics) if self._single is None else self._single
        return f"make_prequential_scorer({names!r}, skip={self._skip}, delay={self._delay})"


def make_prequential_scorer(metric="mse", *, greater_is_better=False, skip=0, delay=0):
    """A ``scoring=`` callable that scores predict-then-update over the test rows.

    The returned scorer deep-copies the (warmed-up) estimator it is given, runs
    :func:`~sklearn_orfit.prequential_predict` over the fold's rows — each row predicted
    from the state that has learned the rows before it, then learned — and applies the
    metric to those predictions. The estimator the search holds is not modified.

    Parameters
    ----------
    metric : str, callable, or list of them, default="mse"
        ``"mse"`` (ResMSE, :func:`~sklearn_orfit.metrics.res_mse`), ``"var"`` (ResVAR,
        :func:`~sklearn_orfit.metrics.res_var`), ``"rmse"``, ``"mae"``, or a callable
        ``metric(y_true, y_pred) -> float``. A list or tuple gives a multi-metric scorer
        returning a dict (one prequential pass for all metrics), for
        ``scoring=`` with ``refit="mse"``.
    greater_is_better : bool, default=False
        For callables only: whether a larger value is better. Loss values are negated,
        following scikit-learn's convention that a scorer is maximised (so
        ``best_score_`` is ``−ResMSE``).
    skip : int, default=0
        Leading rows of each fold left out of the metric (still predicted and learned).
    delay : int, default=0
        Labels arrive ``delay`` rows late (``horizon − 1`` for ``horizon``-step-ahead
        rows): the fold is streamed with ``prequential_predict(..., delay=delay)``, and
        its first ``delay`` rows are left out of the metric (before ``skip``): the
        warm-up ended with rows whose labels a model running over the stream would not
        have had yet. Give :class:`PrequentialSplit` the same ``delay``, so that those
        rows are the ``delay`` rows before each fold and the whole fold is scored.

    Returns
    -------
    scorer : callable
        ``scorer(estimator, X, y, sample_weight=None) -> float`` (or ``dict`` for
        several metrics).

    See Also
    --------
    PrequentialSplit : The matching ``cv=``.
    sklearn.metrics.make_scorer : The batch analogue.

    Notes
    -----
    Cost: one copy of the estimator and one prequential pass over the fold per call.

    With ``sample_weight`` (``w_i >= 0``, one per row of the fold) the fold is streamed
    with the weights (``prequential_predict(..., sample_weight=w)``: they weight what
    the model learns) and the metrics are weighted over the scored rows: ``"mse"`` is
    ``Σ w_i e_i² / Σ w_i``, ``"rmse"`` its square root, ``"mae"`` ``Σ w_i |e_i| / Σ w_i``,
    ``"var"`` the frequency-weighted sample variance of the squared errors
    ``Σ w_i (e_i² − m)² / (Σ w_i − 1)`` with ``m`` the weighted ``"mse"`` (integer
    weights count repeated rows; it needs ``Σ w_i > 1``); several outputs are averaged.
    A callable metric gets ``sample_weight=`` (one without that keyword is a
    ``ValueError``). With metadata routing enabled
    (``sklearn.set_config(enable_metadata_routing=True)``), the scorer requests the
    weights like scikit-learn's scorers: ``scorer.set_score_request(sample_weight=True)``
    makes ``GridSearchCV(..., scoring=scorer).fit(X, y, sample_weight=w)`` pass each
    fold's weights to it (and ``estimator.set_fit_request(sample_weight=True)`` to the
    warm-up ``fit``).

    An estimator that can neither stream a fold (``prequential_predict``) nor learn it
    row by row (``partial_fit``), such as scikit-learn's ``TransformedTargetRegressor``,
    is a ``TypeError`` naming it, not a silent NaN score. Inside a search, scikit-learn
    turns a scorer's error into ``error_score`` (NaN by default) with a warning that
    carries the message: pass ``error_score="raise"`` to stop at the first one.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.model_selection import cross_validate
    >>> from sklearn_orfit import QREWRLSRegressor
    >>> from sklearn_orfit.model_selection import PrequentialSplit, make_prequential_scorer
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(120, 3))
    >>> y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=120)
    >>> cv = PrequentialSplit(3, test_size=30, warmup_size=20)
    >>> res = cross_validate(QREWRLSRegressor(window_size=20), X, y, cv=cv,
    ...                      scoring=make_prequential_scorer(["mse", "var"]))
    >>> bool(np.all(-res["test_mse"] < 0.05))
    True
    """
    metrics_in = list(metric) if isinstance(metric, (list, tuple)) else [metric]
    if not metrics_in:
        raise ValueError("metric must not be empty.")
    metrics = {}
    for m in metrics_in:
        if isinstance(m, str):
            if m not in _METRICS:
                raise ValueError(f"Unknown metric {m!r}; use one of {sorted(_METRICS)}.")
            metrics[m] = _METRICS[m]
        elif callable(m):
            metrics[getattr(m, "__name__", "metric")] = (m, bool(greater_is_better))
        else:
            raise ValueError(f"metric must be a string or a callable, got {m!r}.")
    skip = check_int(skip, "skip", minimum=0)
    delay = check_int(delay, "delay", minimum=0)
    single = next(iter(metrics)) if not isinstance(metric, (list, tuple)) else None
    return _PrequentialScorer(metrics, single, skip, delay)
