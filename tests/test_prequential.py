"""prequential_predict: the protocol, the fallback, and no look-ahead."""

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.linear_model import SGDRegressor

from sklearn_orfit import QREWRLSRegressor, prequential_predict


def data(n=120, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, X @ rng.normal(size=d) + 0.1 * rng.normal(size=n)


def test_fallback_equals_hand_written_loop():
    X, y = data()
    est = SGDRegressor(random_state=0, learning_rate="constant", eta0=0.01)
    y_pred = prequential_predict(clone(est), X, y)
    ref, hand = [0.0], clone(est).partial_fit(X[:1], y[:1])
    for i in range(1, len(y)):
        ref.append(hand.predict(X[i : i + 1])[0])
        hand.partial_fit(X[i : i + 1], y[i : i + 1])
    np.testing.assert_array_equal(y_pred, ref)


def test_fallback_continues_a_fitted_estimator_and_learns_every_row():
    X, y = data()
    est = SGDRegressor(random_state=0).partial_fit(X[:10], y[:10])
    first = est.predict(X[10:11])[0]
    y_pred = prequential_predict(est, X[10:], y[10:])
    assert y_pred[0] == first
    assert est.t_ == 1 + len(y)  # sklearn's counter of samples seen, plus one


@pytest.mark.parametrize("est", [SGDRegressor(random_state=0), QREWRLSRegressor(5)])
def test_no_look_ahead(est):
    X, y = data()
    base = prequential_predict(clone(est), X, y)
    for i in [3, 60, 119]:
        X2, y2 = X.copy(), y.copy()
        X2[i + 1 :] *= -2
        y2[i:] += 5
        assert np.array_equal(prequential_predict(clone(est), X2, y2)[: i + 1], base[: i + 1])


def test_vectorised_path_equals_fallback_for_our_estimator():
    X, y = data()

    class RowByRow(QREWRLSRegressor):
        prequential_predict = None  # hide the vectorised path

    fast = prequential_predict(QREWRLSRegressor(8), X, y)
    slow = prequential_predict(RowByRow(8), X, y)
    np.testing.assert_allclose(fast, slow, rtol=0, atol=1e-12)
