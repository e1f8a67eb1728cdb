"""The contributor guide's example estimator (tests/_example_estimator.py): the update
template of the package's base class gives it scikit-learn's checks and, through
tests/_hostile.py, every contract of tests/test_contracts.py."""

import numpy as np
from sklearn.utils.estimator_checks import parametrize_with_checks

from _example_estimator import ExponentialMeanRegressor
from sklearn_orfit._streaming._base import expected_failed_checks


@parametrize_with_checks([ExponentialMeanRegressor()], expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_example_against_its_definition():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 2)), rng.normal(size=50)
    w = rng.uniform(0, 2, size=50)
    got = ExponentialMeanRegressor(0.8).prequential_predict(X, y, sample_weight=w, delay=3)
    for t in range(50):
        k = np.arange(max(0, t - 3))  # labels 3 rows late
        a = 0.8 ** (k.size - 1 - k) * w[k]
        assert np.isclose(got[t], a @ y[k] / a.sum() if k.size else 0.0, rtol=1e-12)
