"""RandomFourierFeatures: the kernel it approximates, and the streaming contract."""

import pickle

import numpy as np
import pytest

from sklearn_orfit import RandomFourierFeatures


@pytest.mark.parametrize("sigma", [0.5, 1.0, 2.0])
def test_kernel_error_shrinks_like_inverse_sqrt_D(sigma):
    rng = np.random.default_rng(0)
    X = rng.normal(scale=0.7, size=(60, 4))
    i, j = np.triu_indices(len(X), k=1)
    exact = np.exp(-(sigma**2) * np.sum((X[i] - X[j]) ** 2, axis=1) / 2)
    widths = np.array([64, 256, 1024, 4096])
    rms = []
    for D in widths:
        errs = []
        for seed in range(8):
            Z = RandomFourierFeatures(D, sigma=sigma, random_state=seed).fit_transform(X)
            errs.append(np.mean((np.sum(Z[i] * Z[j], axis=1) - exact) ** 2))
        rms.append(np.sqrt(np.mean(errs)))
    slope = np.polyfit(np.log(widths), np.log(rms), 1)[0]
    assert -0.6 < slope < -0.4, slope
    # and the constant is the Monte-Carlo one: E[(z·z' − k)²] ≤ 2/D per pair (|cos| ≤ 1 terms)
    assert np.all(np.asarray(rms) * np.sqrt(widths) < np.sqrt(2.0))


def test_map_is_the_rbf_kernel_map_with_gamma_sigma2_over_2():
    from sklearn.kernel_approximation import RBFSampler

    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, 3))
    Z = RandomFourierFeatures(50000, sigma=1.5, random_state=0).fit_transform(X)
    Zs = RBFSampler(gamma=1.5**2 / 2, n_components=50000, random_state=0).fit_transform(X)
    np.testing.assert_allclose(Z @ Z.T, Zs @ Zs.T, atol=0.03)


def test_same_map_from_fit_partial_fit_and_pickle():
    X = np.random.default_rng(0).normal(size=(10, 3))
    a = RandomFourierFeatures(32, random_state=7).fit(X)
    b = RandomFourierFeatures(32, random_state=7).partial_fit(X[:2]).partial_fit(X[2:])
    c = pickle.loads(pickle.dumps(RandomFourierFeatures(32, random_state=7).partial_fit(X[:1])))
    for other in (b, c):
        assert np.array_equal(a.random_weights_, other.random_weights_)
        assert np.array_equal(a.transform(X), other.transform(X))


def test_partial_fit_never_redraws_and_checks_features():
    X = np.random.default_rng(0).normal(size=(10, 3))
    rff = RandomFourierFeatures(16, random_state=None).partial_fit(X)
    W = rff.random_weights_.copy()
    rff.partial_fit(X * 100)
    assert np.array_equal(W, rff.random_weights_)
    with pytest.raises(ValueError, match="features"):
        rff.partial_fit(np.ones((2, 4)))
    assert np.array_equal(W, rff.random_weights_)


def test_float32_preserved_and_close_to_float64():
    X = np.random.default_rng(0).normal(size=(20, 3))
    rff = RandomFourierFeatures(64, random_state=0).fit(X)
    Z32 = rff.transform(X.astype(np.float32))
    assert Z32.dtype == np.float32
    np.testing.assert_allclose(Z32, rff.transform(X), atol=1e-5)


def test_transform_one_equals_transform_and_feature_names():
    X = np.random.default_rng(0).normal(size=(4, 3))
    rff = RandomFourierFeatures(8, random_state=0).fit(X)
    np.testing.assert_allclose(rff.transform_one(X[2]), rff.transform(X)[2], rtol=1e-14)
    names = rff.get_feature_names_out()
    assert list(names) == [f"randomfourierfeatures{k}" for k in range(8)]
    with pytest.raises(ValueError, match="NaN"):
        rff.transform_one([np.nan, 0, 0])
