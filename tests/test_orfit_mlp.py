"""ORFitMLPRegressor: the Jacobian, the linearised invariants of the ORFit step, the
second-order forgetting, the linear special case and the streaming contract."""

import importlib.util
import pickle
import warnings
from pathlib import Path

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.neural_network import MLPRegressor

from sklearn_orfit import ORFitMLPRegressor, ORFitRegressor, prequential_predict
from sklearn_orfit.orfit._orfit import SpannedBatchWarning


def _data(n=12, d=3, c=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X @ rng.normal(size=d)) if c is None else np.tanh(X @ rng.normal(size=(d, c)))
    return X, y


def _initial(est, X, y):
    """The estimator's initial network (a fresh stream's parameters), not learned."""
    est = clone(est)
    Y = y.reshape(len(y), -1)
    est._init_state(X.shape[1], Y.shape[1], y.ndim == 1)
    return est


# ---------------------------------------------------------------------- the network
@pytest.mark.parametrize("activation", ["tanh", "logistic", "relu", "identity"])
@pytest.mark.parametrize("hidden, c", [((5,), 1), ((4, 3), 2), ((), 3), ((6, 2, 3), 1)])
def test_jacobian_matches_central_differences(activation, hidden, c):
    rng = np.random.default_rng(len(hidden) + c)
    X = rng.normal(size=(4, 3))
    est = _initial(ORFitMLPRegressor(hidden, activation=activation, random_state=1), X,
                   np.zeros((4, c)))
    w = est.params_ + 0.3 * rng.normal(size=est.params_.shape)  # a random network
    J = est._jacobian(est._forward(X, w), w)
    assert J.shape == (4 * c, w.size)
    h = 1e-6
    J_fd = np.empty_like(J)
    for i in range(w.size):
        e = np.zeros_like(w)
        e[i] = h
        J_fd[:, i] = ((est._forward(X, w + e)[-1] - est._forward(X, w - e)[-1]) / (2 * h)).ravel()
    assert_allclose(J, J_fd, atol=1e-7 * max(1.0, np.abs(J).max()))


def test_initial_network_is_mlpregressors():
    X, Y = _data(c=2)
    for activation in ("tanh", "logistic"):
        mlp = MLPRegressor(hidden_layer_sizes=(5, 3), activation=activation, solver="sgd",
                           learning_rate_init=1e-300, momentum=0.0, random_state=3)
        mlp.partial_fit(X, Y)  # a step of 1e-300: the initial weights
        est = _initial(ORFitMLPRegressor((5, 3), activation=activation, random_state=3), X, Y)
        for ours, theirs in zip(est.coefs_ + est.intercepts_, mlp.coefs_ + mlp.intercepts_):
            assert_array_equal(ours, theirs)
        assert np.shares_memory(est.coefs_[0], est.params_)


def test_public_jacobian_and_predict_one():
    X, Y = _data(c=2)
    est = ORFitMLPRegressor((8,), random_state=0).fit(X, Y)
    assert_array_equal(est.jacobian(X), est._jacobian(est._forward(X, est.params_), est.params_))
    assert_allclose(est.predict_one(X[3]), est.predict(X[3:4])[0], rtol=1e-15)
    one = ORFitMLPRegressor((8,), random_state=0).fit(X, Y[:, 0])
    assert isinstance(one.predict_one(X[0]), float)


# ---------------------------------------------------------------------- the linear case
@pytest.mark.parametrize("memory_size, policy", [(None, "pca"), (4, "pca"), (4, "latest"),
                                                 (4, "random"), (0, "pca")])
@pytest.mark.parametrize("batch_size", [1, 3])
def test_without_hidden_layers_it_is_orfit_on_x_and_a_constant(memory_size, policy, batch_size):
    X, y = _data(n=15, d=30)
    kw = dict(memory_size=memory_size, memory_policy=policy, batch_size=batch_size)
    est = ORFitMLPRegressor((), random_state=0, **kw)
    w0 = _initial(est, X, y).params_  # [W; b], the order of [X, 1]
    est.fit(X, y)
    ref = ORFitRegressor(coef_init=w0, random_state=0, **kw).fit(np.c_[X, np.ones(15)], y)
    assert_allclose(est.params_, ref.coef_, rtol=0, atol=1e-12)
    assert_allclose(est.singular_values_, ref.singular_values_, rtol=0, atol=1e-12)


# ---------------------------------------------------------------------- the invariants
@pytest.mark.parametrize("c", [1, 2])
def test_linearised_model_interpolates_the_batch_and_keeps_the_remembered_points(c):
    X, y = _data(n=20, d=3, c=None if c == 1 else c)
    Y = y.reshape(20, -1)
    est = ORFitMLPRegressor((16,), random_state=0)
    remembered = []  # (J_i at the parameters current when learned, its linearised output)
    for start in range(0, 20, 4):
        Xb, Yb = X[start : start + 4], Y[start : start + 4]
        if start == 0:
            est.partial_fit(Xb, Yb if c > 1 else Yb[:, 0])
            continue
        w, J, f = est.params_.copy(), est.jacobian(Xb), est.predict(Xb).reshape(-1)
        est.partial_fit(Xb, Yb if c > 1 else Yb[:, 0])
        dw = est.params_ - w
        # the linearised model fits the batch exactly
        assert_allclose(f + J @ dw, Yb.reshape(-1), rtol=0, atol=1e-10)
        # and keeps the linearised predictions on every remembered point
        for J_old in remembered:
            assert np.abs(J_old @ dw).max() < 1e-10 * np.abs(J_old).max() * np.abs(dw).max()
        remembered.append(J)
    assert est.n_samples_seen_ == 20 and est._n_dirs == 20 * c


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_forgetting_is_second_order_in_the_steps(seed):
    X, _ = _data(n=6, d=3, seed=seed)
    est = ORFitMLPRegressor((64,), random_state=0)
    f0 = _initial(est, X, np.zeros(6)).predict(X)
    D = np.random.default_rng(1).normal(size=6)
    errors = []
    for t in (1e-4, 5e-5):  # targets f0 + t·D: every step scales with t
        y = f0 + t * D
        errors.append(np.abs(clone(est).fit(X, y).predict(X) - y).max())
    assert errors[1] > 0
    # halving the steps divides the change on past points by ~4 (not 2: not first order)
    assert 3.5 < errors[0] / errors[1] < 4.5, errors


def test_one_step_sgd_forgets_to_first_order():
    # the same stream without memory: the change on past points is first order
    X, _ = _data(n=10, d=3)
    est = ORFitMLPRegressor((64,), memory_size=0, random_state=0)
    f0 = _initial(est, X, np.zeros(10)).predict(X)
    D = np.random.default_rng(1).normal(size=10)
    e = [np.abs(clone(est).fit(X, f0 + t * D).predict(X) - (f0 + t * D)).max()
         for t in (1e-3, 5e-4)]
    assert 1.5 < e[0] / e[1] < 2.5, e
    assert clone(est).fit(X, f0).components_.shape == (0, 321)


def test_drift_on_a_sorted_stream_is_lost_memory_then_staleness():
    # benchmarks/bench_orfit_mlp_drift.py on a tiny rotated-digits stream: the change of
    # every past prediction splits exactly into the part a bounded memory gives up (first
    # order), the staleness of the stored gradients and the curvature within a step
    spec = importlib.util.spec_from_file_location(
        "bench_orfit_mlp_drift",
        Path(__file__).parents[1] / "benchmarks" / "bench_orfit_mlp_drift.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    per_seed, steps = bench.main(["--seeds", "1", "--n-train", "15", "--size", "8",
                                  "--hidden", "4", "--memory-size", "3",
                                  "--test-rotations", "1"])
    assert len(steps) == 9 and all(len(s) == 14 for s in steps.values())
    for name, s in steps.items():
        assert max(r["check"] for r in s) < 1e-10, name
        if name.startswith("linear"):  # a linear model's gradients never go stale
            assert max(r["stale"] + r["curv"] for r in s) < 1e-12, name
            assert min(r["cos"] for r in s) > 1 - 1e-12, name
        if name.endswith("unlimited"):  # nothing is given up: the memory spans them all
            assert max(r["lost"] for r in s) < 1e-10, name
            assert min(r["span"] for r in s) > 1 - 1e-10, name
        if "latest" in name or "random" in name or name.endswith("m=0"):
            # the failure mode of the user guide: first-order loss, not staleness
            assert s[-1]["lost"] > 3 * (s[-1]["stale"] + s[-1]["curv"]), name
    assert steps["MLP m=0"][-1]["span"] == 0
    # the MLP's stored gradients do go stale
    assert steps["MLP unlimited"][-1]["stale"] > 1e-3
    assert per_seed[0]["mean predictor"] > 0


# ---------------------------------------------------------------------- the stream
def test_fit_is_a_stream_of_partial_fits_and_prequential_predict_matches():
    X, Y = _data(n=15, c=2)
    est = ORFitMLPRegressor((8,), batch_size=4, memory_size=6, random_state=0).fit(X, Y)
    ref = ORFitMLPRegressor((8,), batch_size=4, memory_size=6, random_state=0)
    for start in range(0, 15, 4):
        ref.partial_fit(X[start : start + 4], Y[start : start + 4])
    assert_array_equal(est.params_, ref.params_)
    a = ORFitMLPRegressor((8,), random_state=0)
    pred = a.prequential_predict(X, Y)
    b = ORFitMLPRegressor((8,), random_state=0).partial_fit(X[:1], Y[:1])
    manual = [None]
    for i in range(1, 15):
        manual.append(b.predict(X[i : i + 1])[0])
        b.learn_one(X[i], Y[i])
    assert_allclose(pred[1:], np.array(manual[1:]), rtol=1e-12, atol=1e-14)
    assert_allclose(a.params_, b.params_, rtol=1e-12, atol=1e-14)
    assert_allclose(prequential_predict(ORFitMLPRegressor((8,), random_state=0), X, Y), pred)


@pytest.mark.parametrize("policy", ["pca", "latest", "random"])
def test_bounded_memory_keeps_m_directions_and_pickles_mid_stream(policy):
    X, y = _data(n=30)
    est = ORFitMLPRegressor((8,), memory_size=5, memory_policy=policy, random_state=0)
    est.partial_fit(X[:10], y[:10])
    est.fit(X[:10], y[:10])
    copy = pickle.loads(pickle.dumps(est))
    est.partial_fit(X[10:], y[10:])
    copy.partial_fit(X[10:], y[10:])
    assert_array_equal(est.params_, copy.params_)
    assert est.components_.shape == (5, est.params_.size)
    assert_allclose(est.components_ @ est.components_.T, np.eye(5), atol=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda est, X, y: est.partial_fit(X[:, :2], y), "features"),
        (lambda est, X, y: est.partial_fit(np.where(X > 1, np.nan, X), y), "NaN"),
        (lambda est, X, y: est.partial_fit(X, np.c_[y, y]), "1-D target"),
        (lambda est, X, y: est.learn_one(X[0, :2], y[0]), "feature"),
        (lambda est, X, y: est.partial_fit(X, np.full(len(y), 1e308)), "overflow"),
        (lambda est, X, y: est.set_params(memory_size=2).partial_fit(X, y), "Call fit"),
        (lambda est, X, y: est.set_params(hidden_layer_sizes=(3,)).partial_fit(X, y), "fit"),
    ],
)
def test_rejected_calls_change_nothing(call, message):
    X, y = _data(n=12)
    est = ORFitMLPRegressor((8,), activation="relu", memory_size=4, random_state=0)
    est.partial_fit(X[:6], y[:6])
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match=message):
        call(est, X[6:], y[6:])
    est.set_params(memory_size=4, hidden_layer_sizes=(8,))
    assert pickle.dumps(est) == before


def test_a_spanned_batch_warns_and_an_escalated_warning_changes_nothing():
    X, y = _data(n=12, d=2)
    est = ORFitMLPRegressor((), random_state=0).partial_fit(X[:3], y[:3])  # 3 parameters
    before = pickle.dumps(est)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(SpannedBatchWarning):
            est.partial_fit(X[3:], y[3:])
    assert pickle.dumps(est) == before
    with pytest.warns(SpannedBatchWarning):
        est.partial_fit(X[3:], y[3:])


def test_interrupted_step_changes_nothing(monkeypatch):
    import sklearn_orfit.orfit._orfit_mlp as module

    X, y = _data(n=12)
    est = ORFitMLPRegressor((8,), random_state=0).partial_fit(X[:6], y[:6])
    before = pickle.dumps(est)
    real, count = module._orthogonal_step, [0]

    def failing(*args, **kwargs):
        count[0] += 1
        if count[0] == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(module, "_orthogonal_step", failing)
    with pytest.raises(KeyboardInterrupt):
        est.prequential_predict(X[6:], y[6:])
    assert pickle.dumps(est) == before
