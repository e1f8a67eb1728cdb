"""Plumbing shared by the streaming regressors: one validation per call, rollback, API.

Every public entry point validates its whole input once, before any state is touched; the
recursions then work on copies of the state and assign them back at the end, so a call
that raises (bad input, or a numerical failure half-way) leaves the estimator exactly as
it was.
"""

from contextlib import contextmanager

import numpy as np
from sklearn.base import _fit_context
from sklearn.utils.validation import check_is_fitted, validate_data

from ._validation import check_fitted_fast, check_one_row

__all__ = [
    "LinearPredictMixin",
    "OneRowPredictMixin",
    "StreamingRegressorMixin",
    "rollback_on_error",
    "validate_stream",
]


def validate_stream(estimator, X, y, *, reset):
    """Validate one chunk of a stream.

    Parameters
    ----------
    estimator : estimator
        The streaming estimator; ``n_features_in_`` is set when ``reset`` and checked
        otherwise, and ``estimator._n_targets`` (``None`` for a 1-D target) is checked.
    X : array-like of shape (n_samples, n_features)
        Rows in stream order.
    y : array-like of shape (n_samples,) or (n_samples, n_targets)
        Targets.
    reset : bool
        Whether this chunk starts a new stream.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        float64 rows.
    Y : ndarray of shape (n_samples, n_targets)
        The targets as a 2-D float64 array (one column for a 1-D ``y``).
    y_ndim : int
        ``y.ndim`` (1 or 2), which fixes the shape of the predictions.
    """
    X, y = validate_data(
        estimator, X, y, reset=reset, dtype=np.float64, multi_output=True, y_numeric=True
    )
    Y = y.reshape(y.shape[0], -1)
    if not reset:
        n_targets = estimator._n_targets
        if (y.ndim == 1) != (n_targets is None) or (
            n_targets is not None and Y.shape[1] != n_targets
        ):
            expected = "a 1-D target" if n_targets is None else f"{n_targets} targets"
            raise ValueError(f"y has shape {y.shape} but this stream has {expected}.")
    return X, Y, y.ndim


@contextmanager
def rollback_on_error(estimator):
    """Restore the estimator's attributes if the body raises.

    The restore is shallow: it is exact because the recursions never modify a state array
    in place before the end of the call (they work on copies and assign them back).
    """
    saved = dict(estimator.__dict__)
    try:
        yield
    except BaseException:
        estimator.__dict__.clear()
        estimator.__dict__.update(saved)
        raise


class LinearPredictMixin:
    """``predict = X @ coef_`` with scikit-learn's validation; multi-output targets."""

    def predict(self, X):
        """Predict with the current coefficients.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``X @ coef_``.
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class OneRowPredictMixin:
    """``predict_one``: the single-observation path of a linear model (``x @ coef_``)."""

    def predict_one(self, x):
        """Predict one row with only cheap checks (shape, dtype, finiteness).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.

        Returns
        -------
        y_pred : float or ndarray of shape (n_targets,)
            ``x @ coef_``.
        """
        check_fitted_fast(self)
        x = check_one_row(x, n_features=self.n_features_in_)
        return x @ self.coef_


class StreamingRegressorMixin(LinearPredictMixin):
    """``fit``, ``partial_fit``, ``prequential_predict``, and a linear ``predict``.

    The estimator implements ``_partial_fit(X, y, *, predict, reset)``: validate the whole
    call, learn its rows in order (after resetting when ``reset``), and return the
    prequential predictions when ``predict`` (else ``None``). ``fit`` is that with a reset,
    so ``fit`` and streaming ``partial_fit`` cannot disagree.
    """

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y):
        """Reset, then learn the rows of ``X`` in order.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._partial_fit(X, y, predict=False, reset=True)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y):
        """Learn the rows of ``X`` in order, continuing the stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        self : object
            The updated estimator.
        """
        self._partial_fit(X, y, predict=False, reset=False)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def prequential_predict(self, X, y):
        """Predict each row from the state before it, then learn it (vectorised).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows in stream order.
        y : array-like of shape (n_samples,) or (n_samples, n_targets)
            Targets.

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``y_pred[i]`` from the state after rows ``< i`` (0 before the first row of a
            stream).
        """
        return self._partial_fit(X, y, predict=True, reset=False)
