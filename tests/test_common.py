"""scikit-learn's estimator checks on every public estimator of this module family."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import ORFitMLPRegressor, QREWRLSRegressor, RandomFourierFeatures


@parametrize_with_checks(
    [
        RandomFourierFeatures(n_components=20, random_state=0),
        QREWRLSRegressor(),
        QREWRLSRegressor(window_size=5, forgetting_factor=0.9, alpha=1e-2),
        QREWRLSRegressor(solver="givens"),
        QREWRLSRegressor(solver="svd"),
        ORFitMLPRegressor(hidden_layer_sizes=(8,), random_state=0),
        ORFitMLPRegressor(hidden_layer_sizes=(8, 4), memory_size=5, random_state=0),
    ]
)
def test_sklearn_compatible(estimator, check):
    check(estimator)
