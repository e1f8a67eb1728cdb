"""A new streaming estimator in a few lines: the contributor guide's example.

The base class owns the lock, the all-or-nothing transaction, the parameter snapshot,
label delay, sample weights and the public methods with their docstrings; the estimator
implements only its mathematics: a new stream's state, learning validated (weighted)
rows with the prequential predictions, and predicting validated rows.
"""

from numbers import Real

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin

from sklearn_orfit._compat import Interval
from sklearn_orfit._streaming._base import StreamingRegressorMixin


class ExponentialMeanRegressor(StreamingRegressorMixin, RegressorMixin, BaseEstimator):
    """Predict the exponentially weighted mean of the targets seen (``X`` unused)."""

    _parameter_constraints = {"forgetting_factor": [Interval(Real, 0, 1, closed="right")]}
    _stream_params = ("forgetting_factor",)  # set_params of it mid-stream is refused

    def __init__(self, forgetting_factor=0.9):
        self.forgetting_factor = forgetting_factor

    def _init_state(self, n_features, n_targets, y_ndim):
        self.total_ = np.zeros(n_targets)  # Σ λ^age y
        self.weight_ = 0.0  # Σ λ^age
        self.n_samples_seen_ = 0

    def _learn_weighted(self, X, Y, sample_weight, *, predict):
        w = np.ones(X.shape[0]) if sample_weight is None else sample_weight
        lam, total, weight = self.forgetting_factor, self.total_.copy(), self.weight_
        Y_pred = np.empty_like(Y) if predict else None
        for t in range(X.shape[0]):
            if predict:  # the mean before row t (0 before any row)
                Y_pred[t] = total / weight if weight else 0.0
            # invariant: total / weight = the weighted mean of the targets so far
            total, weight = lam * total + w[t] * Y[t], lam * weight + w[t]
        # commit new arrays in one statement: a failure above changes nothing
        self.__dict__.update(total_=total, weight_=weight,
                             n_samples_seen_=self.n_samples_seen_ + X.shape[0])
        return Y_pred

    def _predict_rows(self, X):
        mean = self.total_ / self.weight_ if self.weight_ else np.zeros_like(self.total_)
        return np.tile(mean, (X.shape[0], 1))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.regressor_tags.poor_score = True  # a mean does not fit scikit-learn's test data
        return tags
