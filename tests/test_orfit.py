"""ORFitRegressor (Min, Ahn and Azizan, CDC 2022): the theorem, zero forgetting, the PCA
memory, spanned batches, streaming contracts and scikit-learn compatibility.

Oracles: ``numpy.linalg.lstsq`` for the minimum-distance interpolant, ``numpy.linalg.svd``
for the memory, plain multi-pass SGD for the theorem's limit.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.exceptions import NotFittedError
from sklearn.pipeline import make_pipeline
from sklearn.utils.estimator_checks import parametrize_with_checks

from sklearn_orfit import (
    ORFitMLPRegressor, ORFitRegressor, RandomFourierFeatures, prequential_predict,
)
from sklearn_orfit.orfit._orfit import SpannedBatchWarning
from _hostile import gaussian_stream
from _state import canonical_pickle

EPS = np.finfo(np.float64).eps


def _stream(n_samples=25, n_features=60, n_targets=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_samples, n_features))
    shape = n_samples if n_targets is None else (n_samples, n_targets)
    return X, rng.normal(size=shape), rng


def _interpolant(X, Y, W0):
    """argmin ‖W − W₀‖ s.t. X W = Y, from scratch."""
    return W0 + np.linalg.lstsq(X, Y - X @ W0, rcond=None)[0]


def _rel(a, b):
    return np.linalg.norm(a - b) / np.linalg.norm(b)


def _projector(rows):
    return rows.T @ rows


# ------------------------------------------------------------------ sklearn compatibility
@parametrize_with_checks(
    [
        ORFitRegressor(),
        ORFitRegressor(memory_size=3, memory_policy="random", batch_size=4, random_state=0),
        ORFitRegressor(memory_size=2, memory_policy="latest", batch_size=None),
        ORFitRegressor(memory_size=0),
    ]
)
@pytest.mark.filterwarnings("ignore::sklearn_orfit.orfit._orfit.SpannedBatchWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)


# ------------------------------------------------------------------ theorem 4.2
@pytest.mark.parametrize("n_targets", [None, 3])
@pytest.mark.parametrize("batch_size", [1, 4, None])
@pytest.mark.parametrize("policy", ["pca", "latest", "random"])
def test_one_pass_is_minimum_distance_interpolant(n_targets, batch_size, policy):
    X, Y, rng = _stream(n_targets=n_targets)
    W0 = rng.normal(size=(X.shape[1],) if n_targets is None else (X.shape[1], n_targets))
    reg = ORFitRegressor(
        batch_size=batch_size, memory_policy=policy, coef_init=W0, random_state=0
    ).fit(X, Y)
    assert reg.coef_.shape == W0.shape
    assert _rel(reg.coef_, _interpolant(X, Y, W0)) <= 1e-10


def test_uneven_partial_fit_batches_reach_the_interpolant():
    X, Y, _ = _stream(n_targets=2)
    reg = ORFitRegressor()
    for lo, hi in [(0, 1), (1, 8), (8, 9), (9, 20), (20, 25)]:
        reg.partial_fit(X[lo:hi], Y[lo:hi])
    assert _rel(reg.coef_, _interpolant(X, Y, np.zeros((60, 2)))) <= 1e-10


def test_one_pass_equals_the_limit_of_multi_pass_sgd():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(8, 30))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    y = rng.normal(size=8)
    w0 = rng.normal(size=30)
    w = w0.copy()
    for _ in range(3000):  # plain SGD, fixed step, cyclic order
        for x_i, y_i in zip(X, y):
            w -= 0.5 * x_i * (x_i @ w - y_i)
    reg = ORFitRegressor(coef_init=w0).fit(X, y)
    assert _rel(reg.coef_, w) <= 1e-6
    # SGD's limit is the interpolant, and ORFit reaches it in one pass
    assert _rel(reg.coef_, _interpolant(X, y, w0)) <= 1e-10


# ------------------------------------------------------------------ zero forgetting
@pytest.mark.parametrize("n_targets", [None, 2])
def test_unlimited_memory_never_forgets(n_targets):
    X, Y, _ = _stream(n_samples=40, n_features=100, n_targets=n_targets)
    reg = ORFitRegressor()
    for t in range(X.shape[0]):
        reg.partial_fit(X[t : t + 1], Y[t : t + 1])
        past = reg.predict(X[: t + 1])
        assert np.abs(past - Y[: t + 1]).max() <= 1e-10 * np.abs(Y).max()


def test_prequential_predictions_then_no_forgetting():
    X, y, _ = _stream(n_samples=40, n_features=100)
    reg = ORFitRegressor()
    y_pred = reg.prequential_predict(X, y)
    assert y_pred[0] == 0.0
    assert np.abs(reg.predict(X) - y).max() <= 1e-10 * np.abs(y).max()


# ------------------------------------------------------------------ the PCA memory
@pytest.mark.parametrize("batch_size", [1, 7])
def test_pca_memory_spans_top_singular_subspace_low_rank(batch_size):
    rng = np.random.default_rng(2)
    rank, m = 5, 8
    X = rng.normal(size=(40, rank)) @ rng.normal(size=(rank, 60))
    y = rng.normal(size=40)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)  # labels are not consistent
        reg = ORFitRegressor(memory_size=m, batch_size=batch_size).fit(X, y)
    _, s, Vt = np.linalg.svd(X, full_matrices=False)
    U = reg.components_
    assert U.shape == (rank, 60)
    assert_allclose(U @ U.T, np.eye(rank), atol=1e-13)
    assert np.linalg.norm(_projector(U) - _projector(Vt[:rank]), 2) <= 1e-10
    assert_allclose(reg.singular_values_, s[:rank], rtol=1e-10)


def test_pca_memory_is_the_svd_of_past_rows():
    X, y, _ = _stream(n_samples=30, n_features=60)
    reg = ORFitRegressor(memory_size=40)  # m ≥ rank = 30: nothing truncated
    _, s, Vt = np.linalg.svd(X, full_matrices=False)
    for t in (10, 20, 30):
        reg.partial_fit(X[t - 10 : t], y[t - 10 : t])
        _, s, Vt = np.linalg.svd(X[:t], full_matrices=False)
        assert_allclose(reg.singular_values_, s, rtol=1e-10)
        # each leading subspace matches: principal angles ≈ 0 (singular values distinct)
        for j in (1, t // 2, t):
            cosines = np.linalg.svd(reg.components_[:j] @ Vt[:j].T, compute_uv=False)
            assert cosines.min() >= 1 - 1e-10


def test_bounded_pca_memory_keeps_m_orthonormal_directions():
    X, y, _ = _stream(n_samples=600, n_features=50)
    reg = ORFitRegressor(memory_size=10)
    reg.prequential_predict(X, y)
    U = reg.components_
    assert U.shape == (10, 50)
    assert np.abs(U @ U.T - np.eye(10)).max() <= 1e-12
    assert np.all(np.diff(reg.singular_values_) <= 0)
    # the most recent row is always fitted
    assert abs(reg.predict(X[-1:])[0] - y[-1]) <= 1e-10 * np.abs(y).max()


@pytest.mark.parametrize("policy", ["latest", "random"])
def test_bounded_ablation_memories(policy):
    X, y, _ = _stream(n_samples=30, n_features=50)
    reg = ORFitRegressor(memory_size=6, memory_policy=policy, random_state=0)
    for t in range(X.shape[0]):
        before = reg.components_.copy() if t else np.zeros((0, 50))
        reg.partial_fit(X[t : t + 1], y[t : t + 1])
        U = reg.components_
        assert U.shape == (min(t + 1, 6), 50)
        assert np.abs(U @ U.T - np.eye(U.shape[0])).max() <= 1e-12
        if policy == "latest":
            # the newest direction: the row's part orthogonal to the previous memory
            x_new = X[t] - (X[t] @ before.T) @ before
            assert_allclose(U[-1], x_new / np.linalg.norm(x_new), atol=1e-12)
            assert_allclose(reg.singular_values_[-1], np.linalg.norm(x_new), rtol=1e-12)


def test_random_memory_depends_on_the_seed_only():
    X, y, _ = _stream(n_samples=30, n_features=50)
    a = ORFitRegressor(memory_size=5, memory_policy="random", random_state=3).fit(X, y)
    b = ORFitRegressor(memory_size=5, memory_policy="random", random_state=3).fit(X, y)
    c = ORFitRegressor(memory_size=5, memory_policy="random", random_state=4).fit(X, y)
    assert_array_equal(a.coef_, b.coef_)
    assert not np.allclose(a.coef_, c.coef_)


def test_memory_size_zero_is_one_step_sgd():
    X, y, _ = _stream(n_samples=30, n_features=20)
    w = np.zeros(20)
    for x_i, y_i in zip(X, y):
        w += x_i * (y_i - x_i @ w) / (x_i @ x_i)
    reg = ORFitRegressor(memory_size=0).fit(X, y)
    assert reg.components_.shape == (0, 20)
    assert_allclose(reg.coef_, w, rtol=1e-12)


# ------------------------------------------------------------------ spanned batches
def test_repeated_row_with_its_label_changes_nothing():
    X, y, _ = _stream()
    reg = ORFitRegressor().fit(X, y)
    coef = reg.coef_.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpannedBatchWarning)
        reg.partial_fit(X[3:4], y[3:4])
        reg.partial_fit(X[5:9], y[5:9])
    assert_allclose(reg.coef_, coef, rtol=1e-12, atol=0)


def test_repeated_row_with_new_label_warns_and_keeps_old_predictions():
    X, y, _ = _stream()
    reg = ORFitRegressor().fit(X, y)
    with pytest.warns(SpannedBatchWarning, match="spanned by the memory"):
        reg.partial_fit(np.vstack([X[3], np.ones(60)]), [y[3] + 1.0, 2.0])
    assert np.isfinite(reg.coef_).all()
    # the old predictions are kept (row 3 keeps y[3], not its new label), and the
    # batch's new direction is fitted
    assert np.abs(reg.predict(X) - y).max() <= 1e-10 * np.abs(y).max()
    assert_allclose(reg.predict(np.ones((1, 60))), [2.0], rtol=1e-10)
    assert reg.components_.shape[0] == 26


def test_duplicate_rows_within_a_batch_are_least_squares():
    x = np.random.default_rng(0).normal(size=10)
    with pytest.warns(SpannedBatchWarning):
        reg = ORFitRegressor(batch_size=None).fit(np.vstack([x, x]), [1.0, 3.0])
    assert_allclose(reg.predict(x[None]), [2.0], rtol=1e-12)
    assert reg.components_.shape == (1, 10)


def test_underparameterised_stream_is_finite_and_keeps_the_first_fit():
    X, y, _ = _stream(n_samples=50, n_features=5)
    reg = ORFitRegressor()
    with pytest.warns(SpannedBatchWarning):
        y_pred = reg.prequential_predict(X, y)
    assert np.isfinite(y_pred).all() and np.isfinite(reg.coef_).all()
    assert_allclose(reg.predict(X[:5]), y[:5], rtol=1e-9)
    assert reg.components_.shape == (5, 5)


def test_zero_row_does_not_break_the_stream():
    reg = ORFitRegressor()
    with pytest.warns(SpannedBatchWarning):
        reg.partial_fit(np.zeros((1, 4)), [1.0])
    reg.partial_fit(np.eye(4)[:1], [2.0])
    assert_allclose(reg.coef_, [2.0, 0, 0, 0])


# ------------------------------------------------------------------ streaming contracts
@pytest.mark.parametrize("memory_size", [None, 4])
def test_fit_equals_partial_fit_chunks(memory_size):
    X, Y, _ = _stream(n_targets=2)
    reg = ORFitRegressor(memory_size=memory_size, batch_size=6).fit(X, Y)
    ref = ORFitRegressor(memory_size=memory_size)
    for lo in range(0, 25, 6):
        ref.partial_fit(X[lo : lo + 6], Y[lo : lo + 6])
    assert_array_equal(reg.coef_, ref.coef_)
    assert_array_equal(reg.components_, ref.components_)
    assert reg.n_samples_seen_ == 25


@pytest.mark.parametrize("memory_policy", ["pca", "random"])
def test_prequential_predict_equals_row_by_row(memory_policy):
    X, y, _ = _stream(n_samples=30, n_features=40)
    kw = dict(memory_size=5, memory_policy=memory_policy, random_state=0)
    fast = ORFitRegressor(**kw)
    y_fast = prequential_predict(fast, X, y)  # dispatches to the method
    slow, one = ORFitRegressor(**kw), ORFitRegressor(**kw)
    y_slow, y_one = np.zeros(30), np.zeros(30)
    for i in range(30):
        if i:
            y_slow[i] = slow.predict(X[i : i + 1])[0]
            y_one[i] = one.predict_one(X[i])
            one.learn_one(X[i], y[i])
        else:
            one.partial_fit(X[:1], y[:1])
        slow.partial_fit(X[i : i + 1], y[i : i + 1])
    assert_allclose(y_fast, y_slow, rtol=1e-13, atol=1e-13)
    assert_allclose(y_one, y_slow, rtol=1e-13, atol=1e-13)
    assert_allclose(fast.coef_, slow.coef_, rtol=1e-13, atol=1e-13)
    assert_allclose(one.coef_, slow.coef_, rtol=1e-13, atol=1e-13)


def test_pickle_mid_stream_equals_never_stopping():
    X, y, _ = _stream(n_samples=40, n_features=30)
    reg = ORFitRegressor(memory_size=6, memory_policy="random", random_state=0)
    reg.partial_fit(X[:20], y[:20])
    reg.prequential_predict(X[20:25], y[20:25])
    resumed = pickle.loads(pickle.dumps(reg))
    a = reg.prequential_predict(X[25:], y[25:])
    b = resumed.prequential_predict(X[25:], y[25:])
    assert_array_equal(a, b)
    assert_array_equal(reg.coef_, resumed.coef_)
    assert_array_equal(reg.components_, resumed.components_)


def test_learning_does_not_modify_inputs_and_returns_self():
    X, Y, _ = _stream(n_targets=2)
    X0, Y0 = X.copy(), Y.copy()
    reg = ORFitRegressor(memory_size=3)
    assert reg.partial_fit(X, Y) is reg
    assert reg.fit(X, Y) is reg
    reg.prequential_predict(X, Y)
    assert reg.learn_one(X[0], Y[0]) is reg
    assert_array_equal(X, X0)
    assert_array_equal(Y, Y0)


def test_components_held_by_the_user_do_not_change():
    X, y, _ = _stream()
    for kw in ({}, {"memory_size": 4}, {"memory_size": 4, "memory_policy": "latest"}):
        reg = ORFitRegressor(**kw).fit(X[:10], y[:10])
        held, held_copy = reg.components_, reg.components_.copy()
        coef = reg.coef_
        coef_copy = coef.copy()
        reg.partial_fit(X[10:], y[10:])
        reg.prequential_predict(X, y)
        assert_array_equal(held, held_copy)
        assert_array_equal(coef, coef_copy)


@pytest.mark.parametrize(
    "bad",
    [
        lambda X, y: (np.where(np.arange(60) == 3, np.nan, X[:1]), y[:1]),
        lambda X, y: (X[:1], np.array([np.inf])),
        lambda X, y: (X[:1, :59], y[:1]),
        lambda X, y: (X[:1], np.c_[y[:1], y[:1]]),
        lambda X, y: (X[:1], y[:1, None]),
        lambda X, y: (X[:2], y[:1]),
    ],
)
def test_rejected_partial_fit_leaves_state_unchanged(bad):
    X, y, _ = _stream()
    reg = ORFitRegressor(memory_size=5, memory_policy="random", random_state=0)
    reg.partial_fit(X[:10], y[:10])
    state = pickle.dumps(reg)
    with pytest.raises(ValueError):
        reg.partial_fit(*bad(X, y))
    assert pickle.dumps(reg) == state
    with pytest.raises(ValueError):
        reg.learn_one(X[0, :59], y[0])
    assert pickle.dumps(reg) == state


def test_rejected_first_call_leaves_estimator_unfitted():
    X, y, _ = _stream()
    reg = ORFitRegressor(coef_init=np.zeros(59))
    with pytest.raises(ValueError, match="coef_init"):
        reg.fit(X, y)
    with pytest.raises(NotFittedError):
        reg.predict(X)
    reg = ORFitRegressor()
    with pytest.raises(ValueError):
        reg.partial_fit(np.full((2, 3), np.nan), [1.0, 2.0])
    assert not [k for k in vars(reg) if k.endswith("_")]


def test_float32_input():
    X, y, _ = _stream()
    reg64 = ORFitRegressor().fit(X, y)
    reg32 = ORFitRegressor().fit(X.astype(np.float32), y.astype(np.float32))
    assert reg32.coef_.dtype == np.float64
    assert_allclose(reg32.predict(X.astype(np.float32)), y, rtol=1e-5)
    assert _rel(reg32.coef_, reg64.coef_) < 1e-5


# ------------------------------------------------------------------ RFF → ORFit pipeline
def test_pipeline_with_random_fourier_features():
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(120, 3))
    y = np.sin(X).sum(axis=1)
    pipe = make_pipeline(
        RandomFourierFeatures(n_components=400, sigma=1.0, random_state=0),
        ORFitRegressor(memory_size=60),
    )
    pipe.fit(X[:60], y[:60])
    assert np.abs(pipe.predict(X[:60]) - y[:60]).max() <= 1e-8  # m ≥ rows: no forgetting

    # stream the rest prequentially through the final estimator, on transformed features
    Z = pipe[:-1].transform(X[60:])
    reg = pipe[-1]
    ref = pickle.loads(pickle.dumps(reg))
    y_pred = prequential_predict(reg, Z, y[60:])
    assert_array_equal(y_pred, ref.prequential_predict(Z, y[60:]))
    rmse = np.sqrt(np.mean((y_pred - y[60:]) ** 2))
    assert rmse < 0.5 * np.std(y[60:])  # it generalises, well below predicting the mean

    restored = pickle.loads(pickle.dumps(pipe))
    assert_array_equal(restored.predict(X), pipe.predict(X))
    restored[-1].partial_fit(Z[:5], y[60:65])
    pipe[-1].partial_fit(Z[:5], y[60:65])
    assert_array_equal(restored.predict(X), pipe.predict(X))


# ------------------------------------------------------------------ unlimited memory at scale
def _pinv_tol(X):
    """Forward-error scale of the min-norm solution: eps · κ(X) · max(n, p)."""
    s = np.linalg.svd(X, compute_uv=False)
    return EPS * (s[0] / s[-1]) * max(X.shape)


@pytest.fixture(scope="module")
def long_stream():
    """300 rows, 500 features, 2 targets; ``W0 + pinv(X_{1:t}) (Y − X W0)`` after each row."""
    X, Y, rng = _stream(n_samples=300, n_features=500, n_targets=2, seed=5)
    W0 = rng.normal(size=(500, 2))
    oracles, tols = [], []
    for t in range(1, 301):
        Xt = X[:t]
        # one SVD for both: pinv(Xt) as np.linalg.pinv forms it from this SVD (its
        # default cut-off, 1e-15·s_max; the same numbers), and _pinv_tol's κ
        u, s, vt = np.linalg.svd(Xt, full_matrices=False)
        inv = np.divide(1, s, where=s > 1e-15 * s.max(), out=np.zeros_like(s))
        pinv = vt.T @ (inv[:, None] * u.T)
        oracles.append(W0 + pinv @ (Y[:t] - Xt @ W0))
        tols.append(EPS * (s[0] / s[-1]) * max(Xt.shape))
    return X, Y, W0, oracles, tols


@pytest.mark.parametrize("policy", ["pca", "latest"])
def test_every_row_of_a_long_stream_is_the_min_norm_interpolant(long_stream, policy):
    X, Y, W0, oracles, tols = long_stream
    reg = ORFitRegressor(memory_policy=policy, coef_init=W0)
    reg.partial_fit(X[:1], Y[:1])
    for t in range(1, 301):
        if t > 1:
            reg.learn_one(X[t - 1], Y[t - 1])
        assert _rel(reg.coef_ - W0, oracles[t - 1] - W0) <= tols[t - 1], t
    assert reg.components_.shape == (300, 500)


@pytest.mark.parametrize("policy", ["pca", "latest"])
def test_basis_stays_orthonormal_over_a_thousand_rows(policy):
    # nearly dependent rows: 20 shared directions plus a 1e-6 perturbation, so every new
    # direction is a tiny remainder and one Gram–Schmidt pass alone would lose orthogonality
    rng = np.random.default_rng(7)
    n, p = 1000, 1200
    X = rng.normal(size=(n, 20)) @ rng.normal(size=(20, p)) + 1e-6 * rng.normal(size=(n, p))
    y = rng.normal(size=n)
    reg = ORFitRegressor(memory_policy=policy)
    reg.prequential_predict(X, y)
    U = reg.components_  # for "latest", the stored Gram–Schmidt basis itself
    assert U.shape == (n, p)
    assert np.linalg.norm(U @ U.T - np.eye(n), 2) <= 10 * EPS * np.sqrt(n * p)
    # and no forgetting, relative to the conditioning of the rows
    assert np.abs(reg.predict(X) - y).max() <= _pinv_tol(X) * np.abs(y).max() * 10


def test_stream_with_repeated_and_spanned_rows():
    """Repeats and combinations of past rows (consistent labels, and one that is not)."""
    rng = np.random.default_rng(11)
    p = 40
    w_true = rng.normal(size=p)
    rows, labels = [], []
    reg = ORFitRegressor()
    for t in range(160):
        kind = t % 4 if t >= 8 else 0
        if kind == 0 or kind == 3 and len(rows) < 2:  # a new row
            x = rng.normal(size=p)
        elif kind == 1:  # an exact repeat
            x = rows[rng.integers(len(rows))].copy()
        else:  # a combination of past rows
            x = rng.normal(size=3) @ np.array(rows)[rng.choice(len(rows), 3)]
        y = float(x @ w_true)
        with warnings.catch_warnings():
            warnings.simplefilter("error", SpannedBatchWarning)
            reg.learn_one(x, y) if t else reg.partial_fit(x[None], [y])
        rows.append(x)
        labels.append(y)
        X, Y = np.array(rows), np.array(labels)
        if t % 10 == 9 or t == 159:
            assert _rel(reg.coef_, np.linalg.pinv(X) @ Y) <= 10 * _pinv_tol(X)
            # the PCA memory counts every row, repeats included
            _, s, Vt = np.linalg.svd(X, full_matrices=False)
            rank = int(np.sum(s > EPS * max(X.shape) * s[0]))
            assert reg.components_.shape == (rank, p)
            assert_allclose(reg.singular_values_, s[:rank], rtol=1e3 * EPS * s[0] / s[rank - 1])
            P = _projector(reg.components_) - _projector(Vt[:rank])
            assert np.linalg.norm(P, 2) <= 1e3 * EPS * s[0] / s[rank - 1]
    assert reg.components_.shape == (p, p)  # every direction seen: underparameterised now
    # a spanned row with a label the model does not predict: warned, nothing changes
    coef = reg.coef_.copy()
    with pytest.warns(SpannedBatchWarning):
        reg.partial_fit(rows[3][None], [labels[3] + 1.0])
    assert_array_equal(reg.coef_, coef)


def _counting_svd(monkeypatch, *, allow=lambda a: False):
    """Replace numpy's and scipy's SVD; record input shapes, raise unless ``allow(a)``."""
    import scipy.linalg

    calls, svd = [], np.linalg.svd

    def guarded(a, *args, **kwargs):
        calls.append(np.shape(a))
        if not allow(a):
            raise AssertionError(f"SVD of a {np.shape(a)} matrix")
        return svd(a, *args, **kwargs)

    monkeypatch.setattr(np.linalg, "svd", guarded)
    monkeypatch.setattr(scipy.linalg, "svd", guarded)
    return calls


@pytest.mark.parametrize("memory_size", [None, 500])
@pytest.mark.parametrize("policy", ["pca", "latest", "random"])
def test_a_memory_with_room_takes_no_svd(monkeypatch, memory_size, policy):
    X, y, _ = _stream(n_samples=260, n_features=120, seed=3)
    X[150:] = X[150:] @ np.eye(120)[:, :120]  # rows 120+ are spanned: the regime changes
    reg = ORFitRegressor(memory_size=memory_size, memory_policy=policy, random_state=0)
    calls = _counting_svd(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        reg.prequential_predict(X, y)
        for i in range(5):
            reg.learn_one(X[i], y[i])
    assert calls == []
    # the patch is live: the PCA directions are computed on access, by one small SVD
    monkeypatch.undo()
    calls = _counting_svd(monkeypatch, allow=lambda a: max(np.shape(a)) <= 2 * 120 + 32)
    assert reg.components_.shape == (120, 120)
    assert len(calls) == (1 if policy == "pca" else 0)
    reg.singular_values_
    assert len(calls) == (1 if policy == "pca" else 0)  # cached until the next step


def test_batches_take_svds_of_their_own_rows_only(monkeypatch):
    X, Y, _ = _stream(n_samples=200, n_features=300, n_targets=2, seed=4)
    calls = _counting_svd(monkeypatch, allow=lambda a: np.shape(a)[0] <= 8)
    reg = ORFitRegressor(batch_size=8).fit(X, Y)
    assert calls and all(shape == (8, 300) for shape in calls)
    monkeypatch.undo()
    assert _rel(reg.coef_, _interpolant(X, Y, np.zeros((300, 2)))) <= 10 * _pinv_tol(X)


def test_truncating_memory_takes_the_svd(monkeypatch):
    X, y, _ = _stream(n_samples=30, n_features=50)
    calls = _counting_svd(monkeypatch, allow=lambda a: np.shape(a) == (10, 50))
    reg = ORFitRegressor(memory_size=10)
    reg.partial_fit(X[:10], y[:10])  # 10 rows fill the memory: no truncation yet
    assert calls == [(10, 50)]  # the batch's own rows only
    with pytest.raises(AssertionError, match="SVD of a"):
        reg.partial_fit(X[10:11], y[10:11])
    assert reg.n_samples_seen_ == 10  # the failed call changed nothing


@pytest.mark.parametrize("memory_size", [None, 8])
def test_pickle_mid_stream_pca_memory(memory_size):
    X, y, _ = _stream(n_samples=120, n_features=30)
    reg = ORFitRegressor(memory_size=memory_size)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        reg.prequential_predict(X[:70], y[:70])  # past 30 rows: spanned rows in L
        resumed = pickle.loads(pickle.dumps(reg))
        a = reg.prequential_predict(X[70:], y[70:])
        b = resumed.prequential_predict(X[70:], y[70:])
    assert_array_equal(a, b)
    assert_array_equal(reg.coef_, resumed.coef_)
    assert_array_equal(reg.components_, resumed.components_)
    assert_array_equal(reg.singular_values_, resumed.singular_values_)


@pytest.mark.parametrize("policy", ["pca", "latest"])
def test_failure_half_way_leaves_state_and_buffers_usable(monkeypatch, policy):
    """An error in the middle of a call restores the state; spare rows left by the failed
    steps do not leak into later ones."""
    import sklearn_orfit.orfit._orfit as orfit_module

    X, y, _ = _stream(n_samples=60, n_features=80)
    reg = ORFitRegressor(memory_policy=policy)
    reg.partial_fit(X[:20], y[:20])
    ref = pickle.loads(pickle.dumps(reg))
    state = pickle.dumps(reg)

    real, count = orfit_module._new_directions, [0]

    def failing(Xt, *, tol):
        count[0] += 1
        if count[0] == 7:
            raise FloatingPointError("injected")
        return real(Xt, tol=tol)

    monkeypatch.setattr(orfit_module, "_new_directions", failing)
    with pytest.raises(FloatingPointError):
        reg.prequential_predict(X[20:], y[20:])
    monkeypatch.undo()
    assert pickle.dumps(reg) == state
    assert_array_equal(reg.prequential_predict(X[20:], y[20:]),
                       ref.prequential_predict(X[20:], y[20:]))
    assert_array_equal(reg.coef_, ref.coef_)
    assert_array_equal(reg.components_, ref.components_)


# ------------------------------------------------------------------ hostile inputs
# a warning escalated to an error leaves the estimator exactly as it was; rows at scales
# 1e±155 and 1e±300 (squares under- or overflow) give the scale-1 answer or a clear
# ValueError. set_params mid-stream: tests/test_contracts.py (every parameter case).
SCALES = [1e155, 1e-155, 1e300, 1e-300]


# ------------------------------------------------------- ORFit: the spanned-batch warning
def _spanned_calls():
    """(name, call) pairs that learn rows spanned by the memory with new labels."""
    X = np.eye(3)
    return [
        ("partial_fit", lambda reg: reg.partial_fit(X, [4.0, 5.0, 6.0])),
        ("learn_one", lambda reg: reg.learn_one(X[0], 7.0)),
        ("prequential_predict", lambda reg: reg.prequential_predict(X, [4.0, 5.0, 6.0])),
        ("fit", lambda reg: reg.fit(np.vstack([X, X]), [1.0, 2.0, 3.0, 4.0, 5.0, 6.0])),
    ]


@pytest.mark.parametrize("name, call", _spanned_calls(), ids=[c[0] for c in _spanned_calls()])
def test_orfit_warning_escalated_to_an_error_leaves_the_state(name, call):
    # the warning was issued after the state was committed: with warnings as errors the
    # call raised but n_samples_seen_ had gone 3 → 6
    reg = ORFitRegressor().fit(np.eye(3), [1.0, 2.0, 3.0])
    before = pickle.dumps(reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SpannedBatchWarning):
            call(reg)
    assert pickle.dumps(reg) == before
    assert reg.n_samples_seen_ == 3
    # ignored, the call goes through and leaves the state the default filters leave
    shown = pickle.loads(before)
    with pytest.warns(SpannedBatchWarning):
        call(shown)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        call(reg)
    assert canonical_pickle(reg) == canonical_pickle(shown)
    assert reg.n_samples_seen_ > 3 or name == "fit"
    assert_allclose(reg.predict(np.eye(3)), shown.predict(np.eye(3)), rtol=0, atol=0)


@pytest.mark.parametrize("name, call", _spanned_calls(), ids=[c[0] for c in _spanned_calls()])
def test_orfit_warning_points_at_the_callers_line(name, call):
    # fit, partial_fit and prequential_predict pointed into _orfit.py (their own return
    # line): the stack level counted the frames of one route, not scikit-learn's
    # _fit_context wrapper; only learn_one's pointed at the caller
    reg = ORFitRegressor().fit(np.eye(3), [1.0, 2.0, 3.0])
    with pytest.warns(SpannedBatchWarning) as caught:
        call(reg)
    assert [w.filename for w in caught] == [__file__]


def test_orfit_delayed_warning_points_at_the_callers_line():
    reg = ORFitRegressor().fit(np.eye(3), [1.0, 2.0, 3.0])
    X = np.vstack([np.eye(3), np.eye(3)])
    with pytest.warns(SpannedBatchWarning, match="6 of the 6 rows") as caught:
        prequential_predict(reg, X, [4.0, 5.0, 6.0, 4.0, 5.0, 6.0], delay=2)
    assert [w.filename for w in caught] == [__file__]


@pytest.mark.parametrize("delay", [0, 3])
def test_failed_call_puts_the_random_memory_generator_back(delay):
    # the "random" policy draws from a generator in place: a call that failed after a
    # draw left it advanced, so every later draw (and memory) differed from those of an
    # estimator that never saw the call
    X, y, _ = _stream(n_samples=30, n_features=8, seed=3)
    kw = dict(memory_size=2, memory_policy="random", random_state=0)
    reg = ORFitRegressor(**kw).fit(X[:4], y[:4])
    ref = ORFitRegressor(**kw).fit(X[:4], y[:4])
    before = canonical_pickle(reg)
    # two rows that draw, then a row whose step overflows
    bad = np.vstack([X[4:6], 1e-3 * X[6]])
    with pytest.raises(ValueError, match="overflowed"):
        reg.prequential_predict(bad, [1.0, 2.0, 1e308], delay=delay)
    assert canonical_pickle(reg) == before
    reg.partial_fit(X[6:10], y[6:10])
    ref.partial_fit(X[6:10], y[6:10])
    for i in range(10, 30):
        reg.learn_one(X[i], y[i])
        ref.learn_one(X[i], y[i])
    assert_array_equal(reg.coef_, ref.coef_)
    assert_array_equal(reg.components_, ref.components_)


@pytest.mark.parametrize("reg", [ORFitRegressor(), ORFitMLPRegressor((3,), random_state=0)])
def test_fit_signature_has_no_sample_weight_and_weights_say_why(reg):
    # ORFit's learning calls come from the streaming base without sample_weight, so
    # scikit-learn's meta-estimators see an estimator that takes no weights; weights
    # passed anyway are refused with the reason (was a TypeError for an unknown keyword)
    from sklearn.utils.validation import has_fit_parameter

    X, y, _ = _stream(n_samples=6, n_features=4)
    assert not has_fit_parameter(reg, "sample_weight")
    for method in (reg.fit, reg.partial_fit, reg.prequential_predict):
        assert "sample_weight" not in (method.__doc__ or "")
        with pytest.raises(ValueError, match="ORFit fits each row exactly"):
            method(X, y, sample_weight=np.ones(6))
    assert not hasattr(reg, "n_samples_seen_")


# ------------------------------------------------------------ ORFit: scale equivariance
@pytest.mark.parametrize("scale", SCALES)
def test_orfit_eye_at_extreme_scales_interpolates_without_warning(scale):
    # was [0, 0, 0] with a false "spanned" warning: ‖x‖² overflowed (or underflowed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = ORFitRegressor().fit(np.eye(3) * scale, [1, 2, 3])
        assert_allclose(reg.predict(np.eye(3) * scale), [1, 2, 3], rtol=4 * EPS)
        assert_allclose(reg.coef_ * scale, [1, 2, 3], rtol=4 * EPS)
        assert_allclose(reg.singular_values_ / scale, [1, 1, 1], rtol=4 * EPS)


@pytest.mark.parametrize("scale", SCALES)
@pytest.mark.parametrize(
    "params",
    [
        {},
        {"batch_size": 4},
        {"batch_size": None},
        {"memory_size": 5},
        {"memory_size": 5, "memory_policy": "latest", "batch_size": 3},
        {"memory_size": 3, "memory_policy": "random", "random_state": 0},
        {"memory_size": 0},
    ],
)
@pytest.mark.parametrize("shape", [(20, 40), (12, 30)])
def test_orfit_is_scale_equivariant(scale, params, shape):
    # X → cX: coefficients W/c, the same predictions, singular values times c
    n, p = shape
    X, y = gaussian_stream(n, p, seed=1)
    ref = ORFitRegressor(**params).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = ORFitRegressor(**params).fit(X * scale, y)
        y_pred = reg.predict(X * scale)
        preq = ORFitRegressor(**params).prequential_predict(X * scale, y)
    tol = 10 * EPS * max(n, p) * np.abs(y).max()
    assert_allclose(y_pred, ref.predict(X), rtol=0, atol=tol)
    assert_allclose(preq, ORFitRegressor(**params).prequential_predict(X, y), rtol=0, atol=tol)
    assert_allclose(reg.singular_values_ / scale, ref.singular_values_, rtol=1e3 * EPS)
    if params.get("memory_size") is None:
        assert_allclose(y_pred, y, rtol=0, atol=tol)  # every row interpolated


def test_orfit_power_of_two_scale_is_bit_exact():
    # the batch is handled in units of a power of two: scaling X by one changes nothing
    X, y = gaussian_stream(15, 25, seed=2)
    for params in ({}, {"batch_size": None}, {"memory_size": 4}):
        ref = ORFitRegressor(**params).fit(X, y)
        for k in (-900, -520, 520, 900):
            reg = ORFitRegressor(**params).fit(np.ldexp(X, k), y)
            assert_array_equal(reg.predict(np.ldexp(X, k)), ref.predict(X))
            assert_array_equal(np.ldexp(reg.coef_, k), ref.coef_)


@pytest.mark.parametrize(
    "X_new, y_new",
    [
        (np.full((1, 4), 1e-155), [1e300]),  # coefficients ≈ 1e455
        (np.full((1, 4), 1.5e308), [1.0]),  # a row norm beyond the float64 range
    ],
)
def test_orfit_overflow_is_a_clear_error_and_changes_nothing(X_new, y_new):
    X, y = gaussian_stream(3, 4, seed=3)
    reg = ORFitRegressor().fit(X, y)
    before = pickle.dumps(reg)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="float64 range"):
            reg.partial_fit(X_new, y_new)
        assert pickle.dumps(reg) == before
        with pytest.raises(ValueError, match="float64 range"):
            reg.prequential_predict(X_new, y_new)
        assert pickle.dumps(reg) == before


def test_orfit_coef_init_changed_in_place_is_refused():
    X, y = gaussian_stream(6, 4, seed=5)
    w0 = np.zeros(4)
    reg = ORFitRegressor(coef_init=w0).fit(X[:3], y[:3])
    reg.partial_fit(X[3:4], y[3:4])  # the same array, unchanged: fine
    w0[0] = 1.0
    with pytest.raises(ValueError, match="coef_init changed.*Call fit"):
        reg.learn_one(X[4], y[4])
    assert reg.n_samples_seen_ == 4
