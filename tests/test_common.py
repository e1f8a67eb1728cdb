"""scikit-learn's estimator checks on every public estimator of this module family."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures


@parametrize_with_checks(
    [
        RandomFourierFeatures(n_components=20, random_state=0),
        QREWRLSRegressor(),
        QREWRLSRegressor(window_size=5, forgetting_factor=0.9, alpha=1e-2),
        QREWRLSRegressor(solver="givens"),
        QREWRLSRegressor(solver="svd"),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
