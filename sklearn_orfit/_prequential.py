"""Prequential (predict-then-update) evaluation of streaming estimators."""

import numpy as np
from sklearn.utils import check_array, check_consistent_length

__all__ = ["prequential_predict"]


def prequential_predict(estimator, X, y):
    """Predict each row from the state learned on earlier rows, then learn it.

    ``ŷ[i]`` is made by ``estimator`` after it has learned rows ``0 .. i-1`` of ``X``
    (plus whatever it had learned before the call), and never depends on ``X[i+1:]`` or
    ``y[i:]``. On return the estimator has learned every row, in order.

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

    Returns
    -------
    y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
        The prequential predictions.

    Notes
    -----
    The row-by-row fallback costs one ``predict`` and one ``partial_fit`` call per row.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import SGDRegressor
    >>> from sklearn_orfit import prequential_predict
    >>> X = np.arange(8, dtype=float).reshape(4, 2)
    >>> y = X.sum(axis=1)
    >>> prequential_predict(SGDRegressor(random_state=0), X, y).shape
    (4,)
    """
    method = getattr(estimator, "prequential_predict", None)
    if callable(method):
        return method(X, y)
    return _row_by_row(estimator, X, y)


def _is_fitted(estimator):
    try:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(estimator)
    except Exception:  # NotFittedError, or an estimator check_is_fitted cannot read
        return False
    return True


def _row_by_row(estimator, X, y):
    X = check_array(X, accept_sparse=False, ensure_all_finite=True)
    y = np.asarray(y)
    check_consistent_length(X, y)
    y_pred = np.zeros(y.shape, dtype=np.float64)
    fitted = _is_fitted(estimator)
    for i in range(X.shape[0]):
        if fitted:
            y_pred[i] = np.asarray(estimator.predict(X[i : i + 1])).reshape(y_pred[i].shape)
        estimator.partial_fit(X[i : i + 1], y[i : i + 1])
        fitted = True
    return y_pred
