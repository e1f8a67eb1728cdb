"""scikit-learn's estimator checks on every public estimator of this module family."""

import pytest
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import (
    AggregatingRegressor, ORFitMLPRegressor, QREWRLSRegressor, RandomFourierFeatures,
)
from sklearn_orfit._stream import expected_failed_checks


@parametrize_with_checks(
    [
        RandomFourierFeatures(n_components=20, random_state=0),
        QREWRLSRegressor(),
        QREWRLSRegressor(window_size=5, forgetting_factor=0.9, alpha=1e-2),
        QREWRLSRegressor(solver="givens"),
        QREWRLSRegressor(solver="svd"),
        ORFitMLPRegressor(hidden_layer_sizes=(8,), random_state=0),
        ORFitMLPRegressor(hidden_layer_sizes=(8, 4), memory_size=5, random_state=0),
        AggregatingRegressor([("short", QREWRLSRegressor(5)),
                              ("ridge", QREWRLSRegressor(20, alpha=1e-2))]),
    ],
    # each with its mathematical reason (e.g. integer weights are not repeated rows in
    # a sliding window)
    expected_failed_checks=expected_failed_checks,
)
# the checks give the network more rows than its memory can fit apart: ORFit's
# documented spanned-batch warning (asserted in test_orfit_mlp.py)
@pytest.mark.filterwarnings("ignore::sklearn_orfit.exceptions.SpannedBatchWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)
