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
            Z = RandomFourierFeatures(D, sigma=sigma, random_state=seed).fit_transform(
                X
            )
            errs.append(np.mean((np.sum(Z[i] * Z[j], axis=1) - exact) ** 2))
        rms.append(np.sqrt(np.mean(errs)))
    slope = np.polyfit(np.log(widths), np.log(rms), 1)[0]
    assert -0.6 < slope < -0.4, slope
    # and the constant is the Monte-Carlo one: E[(z·z' − k)²] ≤ 2/D per pair (|cos| ≤ 1 terms)
    assert np.all(np.asarray(rms) * np.sqrt(widths) < np.sqrt(2.0))


def test_map_approximates_the_rbf_kernel_with_gamma_sigma2_over_2():
    from sklearn.metrics.pairwise import rbf_kernel

    rng = np.random.default_rng(1)
    X = rng.normal(size=(5, 3))
    Z = RandomFourierFeatures(50000, sigma=1.5, random_state=0).fit_transform(X)
    np.testing.assert_allclose(Z @ Z.T, rbf_kernel(X, gamma=1.5**2 / 2), atol=0.03)


@pytest.mark.parametrize("sigma", [0.05, 0.3, 1.0, 2**0.5, 1.7, 10.0, 1e-150, 1e150])
@pytest.mark.parametrize("seed", [0, 42, "RandomState"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("shape", [(1, 1), (20, 7), (5, 64)])
def test_bit_identical_to_rbfsampler_with_gamma_sigma2_over_2(
    sigma, seed, dtype, shape
):
    from sklearn.kernel_approximation import RBFSampler

    n_rows, d = shape
    D = 3 * d + 5
    X = np.random.default_rng(d).normal(size=(n_rows, d)).astype(dtype)

    def state():
        return np.random.RandomState(11) if seed == "RandomState" else seed

    ours_state, theirs_state = state(), state()
    ours = RandomFourierFeatures(D, sigma=sigma, random_state=ours_state).fit(X)
    with np.errstate(over="ignore", invalid="ignore"):  # sigma = 1e150 in float32
        theirs = RBFSampler(
            gamma=sigma**2 / 2, n_components=D, random_state=theirs_state
        ).fit(X)
        Z, Zs = ours.transform(X), theirs.transform(X)
        # float32 data: RBFSampler keeps float32 copies of the same float64 draw
        A, b = ours.random_weights_.astype(dtype), ours.random_offset_.astype(dtype)
    assert Z.dtype == dtype
    assert Z.tobytes() == Zs.tobytes()
    assert ours.random_weights_.dtype == ours.random_offset_.dtype == np.float64
    assert A.tobytes() == theirs.random_weights_.tobytes()
    assert b.tobytes() == theirs.random_offset_.tobytes()
    if seed == "RandomState":  # the same number of draws taken from a shared generator
        assert ours_state.randint(2**30) == theirs_state.randint(2**30)


@pytest.mark.parametrize("sigma", [5e-324, 1e-320, 1e-200, 2.0**-511, 2.0**512, 1e200])
def test_extreme_sigma_draws_sigma_times_a_standard_normal(sigma):
    # outside about [2e-154, 1.3e154], sigma²/2 overflows or loses bits, so
    # RBFSampler(gamma=sigma²/2) is not this map; the map stays A = sigma·N(0, 1) as drawn
    # by RandomState.normal(scale=sigma) (then b ~ U[0, 2π)), sign of zero included
    rff = RandomFourierFeatures(50, sigma=sigma, random_state=3).fit(np.ones((2, 4)))
    rng = np.random.RandomState(3)
    W = rng.normal(scale=sigma, size=(4, 50))
    b = rng.uniform(0.0, 2.0 * np.pi, size=50)
    assert rff.random_weights_.tobytes() == W.tobytes()
    assert rff.random_offset_.tobytes() == b.tobytes()


# Values of the map as drawn before it was built on RBFSampler, by
# RandomFourierFeatures(D, sigma=sigma, random_state=seed).fit(X), X = (arange(12) - 5) / 7
# in 4 rows: the first row of A, b, and the first two rows of the output.
_PREVIOUS_MAPS = {
    (6, 1.0, 0): (
        [1.764052345967664, 0.4001572083672233, 0.9787379841057392,
         2.240893199201458, 1.8675579901499675, -0.977277879876411],
        [0.7431401348347824, 4.020742358960453, 0.9007152691844127,
         5.935529859755197, 3.2788697077963755, 2.605397808795041],
        [[0.1061064547351734, -0.46730734330653856, 0.5759212844482108,
          -0.3957054638222844, 0.197172955728271, -0.4825431325538498],
         [0.5742667341121355, -0.40782211457849743, 0.46452689963676597,
          0.28899006486693046, -0.5279020811892152, -0.5161190524626552]],
    ),
    (5, 0.3, 42): (
        [0.14901424590336979, -0.0414792903513554, 0.19430656143020775,
         0.45690895692240757, -0.07024601241700079],
        [3.844385118274953, 0.8764657756906659, 1.8355989632476268,
         2.3019193508941536, 2.865572223878106],
        [[-0.4853246448462528, 0.48565806430149444, 0.023179007924135096,
          -0.42234663107158915, -0.6294775842311481],
         [-0.49563359400133994, 0.4311801827585423, -0.11098522923394447,
          -0.3678380703511261, -0.6079639871605591]],
    ),
    (4, 2.5, 7): (
        [4.2263142595008905, -1.164843426352082, 0.082050409196461, 1.0187907074912697],
        [1.8104721959004415, 5.715144688873524, 1.340739718380646, 2.840778633916691],
        [[0.27481164522409884, 0.6560464451886224, -0.264059244092286,
          0.0644218219055287],
         [0.447960854528614, 0.6875121317883157, 0.1771199118832605,
          -0.7066788988228478]],
    ),
}  # fmt: skip


@pytest.mark.parametrize("key", list(_PREVIOUS_MAPS))
def test_same_map_as_before_for_the_same_random_state(key):
    D, sigma, seed = key
    A0, b, Z2 = _PREVIOUS_MAPS[key]
    X = (np.arange(12.0).reshape(4, 3) - 5) / 7
    rff = RandomFourierFeatures(D, sigma=sigma, random_state=seed).fit(X)
    # the draw is exact (the same RandomState stream, the same float64 products)
    np.testing.assert_array_equal(rff.random_weights_[0], A0)
    np.testing.assert_array_equal(rff.random_offset_, b)
    # the output goes through BLAS and cos, whose last bit may vary across machines
    np.testing.assert_allclose(rff.transform(X)[:2], Z2, rtol=0, atol=4e-16)


def test_same_map_from_fit_partial_fit_and_pickle():
    X = np.random.default_rng(0).normal(size=(10, 3))
    a = RandomFourierFeatures(32, random_state=7).fit(X)
    b = RandomFourierFeatures(32, random_state=7).partial_fit(X[:2]).partial_fit(X[2:])
    c = pickle.loads(
        pickle.dumps(RandomFourierFeatures(32, random_state=7).partial_fit(X[:1]))
    )
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
