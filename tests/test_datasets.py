import numpy as np
import pytest

from sklearn_orfit.datasets import make_abo_series, make_lagged


def test_abo_series_follows_its_recursion():
    x = make_abo_series(500, random_state=3)
    eps = x[1:] - 2 * x[:-1] / (1 + 0.8 * x[:-1] ** 2)
    assert x.shape == (500,) and abs(x[0]) < 1
    assert np.all(np.abs(eps) < 1) and abs(eps.mean()) < 0.1
    assert np.array_equal(x, make_abo_series(500, random_state=3))


def test_make_lagged_most_recent_first():
    X, y = make_lagged(np.arange(10.0), 3)
    assert X.shape == (7, 3)
    assert np.array_equal(X[0], [2.0, 1.0, 0.0]) and y[0] == 3.0
    assert np.array_equal(X[-1], [8.0, 7.0, 6.0]) and y[-1] == 9.0
    with pytest.raises(ValueError, match="n_lags"):
        make_lagged(np.arange(3.0), 3)
