"""Prequential (predict-then-update) evaluation of streaming estimators."""


import numpy as np
from sklearn.utils import check_array, check_consistent_length

from ._base import check_delay, check_stream_sample_weight
from ._validation import accepts_keyword

__all__ = ["prequential_predict"]


def prequential_predict(estimator, X, y, *, delay=0, sample_weight=None):
    """Predict each row from the state learned on earlier rows, then learn it.

    ``ŷ[i]`` is made by ``estimator`` after it has learned rows ``0 .. i-1-delay`` of
    ``X`` (plus whatever it had learned before the call), and never depends on
    ``X[i+1:]`` or ``y[i-delay:]``. On return the estimator has learned every row, in
    order.

    Parameters
    ----------
    estimator : estimator with ``partial_fit`` and ``predict``
        Any scikit-learn regressor with ``partial_fit`` (e.g.
        :class:`~sklearn.linear_model.SGDRegressor`), or one of ours. Estimators that
        define a ``prequential_predict(X, y)`` method (all of this package's) take their
        vectorised path; the others are driven one row at a time. An estimator that has
        learned nothing yet predicts 0 for the rows before its first update.
    X : array-like of shape (n_samples, n_features)
        The rows, in stream order.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Their targets.
    delay : int, default=0
        How many rows late each label arrives. ``0`` is one-step-ahead evaluation: the
        label of row ``i`` is known before row ``i + 1`` is predicted. For an
        ``h``-step-ahead forecast (rows built with
        ``make_lagged(series, n_lags, horizon=h)``, whose target is ``h`` steps after
        its features) use ``delay = h − 1``: row ``i``'s label is only observed at the
        time of row ``i + h − 1``, so the rows wait in a queue until their label is
        due. Learning a label as soon as its row is predicted would use the future.
    sample_weight : float or array-like of shape (n_samples,), default=None
        Per-row weights ``w_i >= 0`` for what is learned (a scalar is broadcast):
        passed to the estimator's ``prequential_predict``, or, row by row, to its
        ``partial_fit(..., sample_weight=...)``. An estimator that takes no weights is a
        ``ValueError`` (before anything is learned). The predictions are those of the
        unweighted rows, zero-weight rows included.

    Returns
    -------
    y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The prequential predictions.

    Notes
    -----
    The row-by-row fallback costs one ``predict`` and one ``partial_fit`` call per row
    (with weights: ``partial_fit(x, y, sample_weight=[w])``; a zero-weight row is
    predicted but not passed to ``partial_fit``, since it contributes nothing and
    scikit-learn's estimators refuse a call whose weights are all zero).
    With ``delay > 0`` the package's estimators learn one row at a time on a private
    copy of their state, committed at the end of the call (so a failure leaves them as
    they were): one prediction and one single-row update per row, instead of their
    vectorised one-step path. Pipelines transform each row as soon as it arrives (the
    inputs ``X`` are not delayed, only the labels) and pass the delay to the final
    estimator; ensembles pass it to every partition. See the user guide's
    :ref:`prequential` page.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import SGDRegressor
    >>> from sklearn_orfit import prequential_predict
    >>> X = np.arange(8, dtype=float).reshape(4, 2)
    >>> y = X.sum(axis=1)
    >>> prequential_predict(SGDRegressor(random_state=0), X, y).shape
    (4,)

    With labels two rows late, the first three rows are predicted by the model as it
    was before the call (here: nothing learned, so 0):

    >>> from sklearn_orfit import QREWRLSRegressor
    >>> prequential_predict(QREWRLSRegressor(window_size=2), X, y, delay=2).round(6)
    array([0., 0., 0., 7.])
    """
    delay = check_delay(delay)
    method = getattr(estimator, "prequential_predict", None)
    if callable(method):
        kwargs = {"delay": delay} if delay else {}
        if sample_weight is not None:
            _check_takes_weights(estimator, method, "prequential_predict")
            kwargs["sample_weight"] = sample_weight
        return method(X, y, **kwargs)
    if sample_weight is not None:
        _check_takes_weights(estimator, getattr(estimator, "partial_fit", None), "partial_fit")
    return _row_by_row(estimator, X, y, delay=delay, sample_weight=sample_weight)



def _check_takes_weights(estimator, method, method_name):
    """A clear ValueError when ``estimator`` cannot take per-row weights."""
    reason = getattr(type(estimator), "_sample_weight_unsupported", None)
    if reason:
        raise ValueError(f"{type(estimator).__name__} does not accept sample_weight: {reason}")
    if method is None or not accepts_keyword(method, "sample_weight"):
        raise ValueError(
            f"{type(estimator).__name__}.{method_name} does not accept sample_weight, so "
            "the rows cannot be weighted; call prequential_predict without sample_weight."
        )


def _is_fitted(estimator):
    try:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator)
    except Exception:  # NotFittedError, or an estimator check_is_fitted cannot read
        return False
    return True


def _row_by_row(estimator, X, y, *, delay=0, sample_weight=None):
    """``predict`` then ``partial_fit`` per row; labels ``delay`` rows late."""
    X = check_array(X, accept_sparse=False, ensure_all_finite=True)
    y = np.asarray(y)
    check_consistent_length(X, y)
    n = X.shape[0]
    w = check_stream_sample_weight(sample_weight, n)

    def learn(j):
        """Learn row ``j``; whether the estimator has learned something now."""
        if w is None:
            estimator.partial_fit(X[j : j + 1], y[j : j + 1])
        elif w[j] > 0:
            estimator.partial_fit(X[j : j + 1], y[j : j + 1], sample_weight=w[j : j + 1])
        else:
            # a zero-weight row contributes nothing (scikit-learn's estimators refuse a
            # call whose weights are all zero): skipped
            return False
        return True

    y_pred = np.zeros(y.shape, dtype=np.float64)
    fitted = _is_fitted(estimator)
    for i in range(n):
        j = i - 1 - delay  # the label that has just arrived
        if j >= 0:
            fitted = learn(j) or fitted
        # invariant: the estimator has learned rows < i − delay of this call
        if fitted:
            y_pred[i] = np.asarray(estimator.predict(X[i : i + 1])).reshape(y_pred[i].shape)
    for j in range(max(0, n - 1 - delay), n):
        learn(j)
    return y_pred
