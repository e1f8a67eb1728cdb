"""AggregatingRegressor: the weight rules against from-scratch references (opera's form),
no look-ahead, delayed labels, sample weights, shared feature maps, pickling mid-stream,
all-or-nothing calls, the bounded history, and make_expert_grid."""

import importlib.util
import json
import pickle
from pathlib import Path

import numpy as np
import pytest
from joblib import parallel_config
from sklearn.base import BaseEstimator, RegressorMixin, clone

import sklearn_orfit as so
from _hostile import Trap
from sklearn_orfit import AggregatingRegressor, make_expert_grid


def stream(n=200, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X @ rng.normal(size=d)) + 0.2 * rng.normal(size=n)
    return X, y


def experts():
    return [
        ("abo-4", so.make_streaming_pipeline(
            so.RandomFourierFeatures(32, random_state=0), so.QREWRLSRegressor(4))),
        ("abo-40", so.make_streaming_pipeline(
            so.RandomFourierFeatures(32, random_state=0), so.QREWRLSRegressor(40))),
        ("krls-10", so.SlidingWindowKRLSRegressor(10, length_scale=2.0)),
        ("qrd", so.QRDRLSRegressor(30)),
    ]


class Constant(RegressorMixin, BaseEstimator):
    """A foreign expert that always predicts ``value`` (it learns nothing)."""

    def __init__(self, value=0.0):
        self.value = value

    def partial_fit(self, X, y, sample_weight=None):
        self.n_features_in_ = np.asarray(X).shape[1]
        self.n_calls_ = getattr(self, "n_calls_", 0) + 1
        return self

    def fit(self, X, y, sample_weight=None):
        return self.partial_fit(X, y)

    def predict(self, X):
        return np.full(np.asarray(X).shape[0], float(self.value))


# ---------------------------------------------------------------------- references
# Written after the opera R package's loops (its variable names), row by row, with
# nothing shared with the module: the weights of row t, then the regrets of row t.
def reference(P, y, *, method, delay=0, w=None, gradient=True, loss="squared", eta=None,
              scale=1.0):
    P, y = P / scale, y / scale
    T, N = P.shape
    w = np.ones(T) if w is None else w
    weights = np.zeros((T, N))
    pred = np.zeros(T)
    R = np.zeros(N)
    R_reg = np.zeros(N)
    eta_inv2 = np.zeros(N)  # BOA: Σ 2.2 r²
    inv_eta = np.zeros(N)  # ML-Poly: 1/η = Σ r²
    pending = []

    def regret(t):
        if gradient:
            g = 2 * (pred[t] - y[t]) if loss == "squared" else np.sign(pred[t] - y[t])
            lpred, lexp = g * pred[t], g * P[t]
        elif loss == "squared":
            lpred, lexp = (pred[t] - y[t]) ** 2, (P[t] - y[t]) ** 2
        else:
            lpred, lexp = abs(pred[t] - y[t]), np.abs(P[t] - y[t])
        return w[t] * (lpred - lexp)

    def learn(t):
        nonlocal R, R_reg, eta_inv2, inv_eta
        r = regret(t)
        eta_inv2 = eta_inv2 + 2.2 * r ** 2
        nz = eta_inv2 > 0
        r_reg = np.zeros(N)
        r_reg[nz] = r[nz] - r[nz] ** 2 / np.sqrt(eta_inv2[nz])
        R_reg = R_reg + r_reg
        R = R + r
        inv_eta = inv_eta + r ** 2

    for t in range(T):
        while pending and pending[0] < t - delay:
            learn(pending.pop(0))
        w0 = np.ones(N)
        if method == "boa":
            p = w0.copy()
            nz = eta_inv2 > 0
            if nz.any():
                aux = -np.log(eta_inv2[nz]) / 2 + R_reg[nz] / np.sqrt(eta_inv2[nz])
                p[nz] = nz.sum() * np.exp(aux - aux.max()) / np.exp(aux - aux.max()).sum()
        elif method == "mlpol":
            if R.max() > 0:
                p = np.where(R > 0, np.maximum(R, 0) / np.where(inv_eta > 0, inv_eta, 1), 0)
            else:
                p = w0.copy()
        else:
            p = np.exp(eta * (R - R.max()))
        p = p / p.sum()
        weights[t] = p
        pred[t] = P[t] @ p
        pending.append(t)
    for t in pending:
        learn(t)
    return pred * scale, weights


@pytest.mark.parametrize("kw", [
    dict(method="boa"), dict(method="mlpol"), dict(method="ewa", learning_rate=0.5),
    dict(method="boa", gradient=False), dict(method="mlpol", loss="absolute"),
    dict(method="boa", loss="absolute", gradient=False),
])
def test_weights_equal_a_from_scratch_reference(kw):
    X, y = stream(150)
    agg = AggregatingRegressor(experts(), **kw)
    y_pred = agg.prequential_predict(X[:90], y[:90])
    y_pred = np.r_[y_pred, agg.prequential_predict(X[90:], y[90:])]  # across calls
    P = agg.predictions_history_
    ref_pred, ref_w = reference(
        P, y, method=kw["method"], gradient=kw.get("gradient", True),
        loss=kw.get("loss", "squared"), eta=kw.get("learning_rate"), scale=agg.loss_scale_)
    np.testing.assert_allclose(agg.weights_history_, ref_w, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(y_pred, ref_pred, rtol=1e-10, atol=1e-12)
    # the experts' columns are their own prequential predictions
    for k, (_, est) in enumerate(experts()):
        np.testing.assert_allclose(P[:, k], so.prequential_predict(clone(est), X, y),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("method", ["boa", "mlpol", "ewa"])
def test_weights_are_a_distribution(method):
    X, y = stream()
    agg = AggregatingRegressor(experts(), method=method, learning_rate=1.0).fit(X, y)
    for W in (agg.weights_history_, agg.weights_[None, :]):
        assert np.all(W >= 0)
        np.testing.assert_allclose(W.sum(axis=1), 1.0, rtol=1e-12)
    # the first row: nothing learned, uniform weights and every expert predicts 0
    np.testing.assert_array_equal(agg.weights_history_[0], np.full(4, 0.25))
    assert agg.n_samples_seen_ == len(y)


@pytest.mark.parametrize("delay", [0, 3])
def test_no_look_ahead(delay):
    X, y = stream(120)
    base = AggregatingRegressor(experts())
    y_pred = base.prequential_predict(X, y, delay=delay)
    t = 70
    X2, y2 = X.copy(), y.copy()
    X2[t:] += 5.0  # future inputs
    y2[t - 1 - delay:] *= -3.0  # labels not yet arrived at row t - 1
    other = AggregatingRegressor(experts())
    y_pred2 = other.prequential_predict(X2, y2, delay=delay)
    np.testing.assert_array_equal(y_pred2[:t], y_pred[:t])
    np.testing.assert_array_equal(other.weights_history_[:t], base.weights_history_[:t])
    assert not np.array_equal(y_pred2[t:], y_pred[t:])


def test_delay_matches_the_reference():
    X, y = stream(100)
    d = 4
    agg = AggregatingRegressor(experts())
    y_pred = agg.prequential_predict(X, y, delay=d)
    P = agg.predictions_history_
    # the experts predict with labels d rows late
    for k, (_, est) in enumerate(experts()):
        np.testing.assert_allclose(P[:, k], so.prequential_predict(clone(est), X, y, delay=d),
                                   rtol=1e-12, atol=1e-12)
    ref_pred, ref_w = reference(P, y, method="boa", delay=d, scale=agg.loss_scale_)
    np.testing.assert_allclose(agg.weights_history_, ref_w, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(y_pred, ref_pred, rtol=1e-10, atol=1e-12)
    # the first d + 1 rows use the uniform weights
    np.testing.assert_array_equal(agg.weights_history_[: d + 1], 0.25)


def test_sample_weight_weights_the_losses_and_reaches_the_experts():
    X, y = stream(100)
    w = np.random.default_rng(1).uniform(0, 2, size=100)
    w[10:20] = 0.0
    agg = AggregatingRegressor(experts())
    y_pred = agg.prequential_predict(X, y, sample_weight=w)
    P = agg.predictions_history_
    for k, (_, est) in enumerate(experts()):
        np.testing.assert_allclose(
            P[:, k], so.prequential_predict(clone(est), X, y, sample_weight=w),
            rtol=1e-12, atol=1e-12)
    ref_pred, ref_w = reference(P, y, method="boa", w=w, scale=agg.loss_scale_)
    np.testing.assert_allclose(agg.weights_history_, ref_w, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(y_pred, ref_pred, rtol=1e-10, atol=1e-12)
    # zero-weight rows leave the weights where they were
    W = agg.weights_history_
    assert (W[11:21] == W[11]).all()
    assert not (W[21] == W[11]).all()


@pytest.mark.parametrize("method", ["boa", "mlpol"])
def test_concentrates_on_the_best_expert(method):
    # the best expert is a vertex of the experts' hull: no combination does better
    rng = np.random.default_rng(0)
    X = rng.normal(size=(400, 2))
    y = 1.0 + 0.1 * rng.normal(size=400)
    agg = AggregatingRegressor(
        [("one", Constant(1.0)), ("two", Constant(2.0)), ("three", Constant(3.0))],
        method=method).fit(X, y)
    assert agg.weights_[0] > 0.95, agg.weights_
    assert agg.cumulative_regret_[0] > 0 > agg.cumulative_regret_[2]


def test_targets_scaled_by_a_power_of_two_give_the_same_weights():
    X, y = stream(80)
    a = AggregatingRegressor(experts()).fit(X, y)
    b = AggregatingRegressor(experts()).fit(X, y * 2.0 ** 40)
    np.testing.assert_array_equal(a.weights_history_, b.weights_history_)
    assert b.loss_scale_ == a.loss_scale_ * 2.0 ** 40


def test_shared_features_and_parallel_experts_give_the_same_predictions():
    X, y = stream(120)
    shared = AggregatingRegressor(experts())
    ref = shared.prequential_predict(X, y)
    assert shared.expert_features_ == (0, 0, -1, -1) and len(shared.feature_maps_) == 1
    alone = AggregatingRegressor(experts(), share_features=False)
    np.testing.assert_array_equal(alone.prequential_predict(X, y), ref)
    assert alone.expert_features_ == (-1, -1, -1, -1)
    with parallel_config(backend="threading"):
        par = AggregatingRegressor(experts(), n_jobs=2)
        np.testing.assert_array_equal(par.prequential_predict(X, y), ref)
    np.testing.assert_array_equal(par.predict(X[:5]), shared.predict(X[:5]))
    np.testing.assert_array_equal(par.weights_history_, shared.weights_history_)
    # chunks: the experts' own chunking changes only the rounding
    with parallel_config(backend="threading"):
        par = AggregatingRegressor(experts(), n_jobs=2)
        chunked = np.r_[par.prequential_predict(X[:60], y[:60]),
                        par.prequential_predict(X[60:], y[60:])]
    np.testing.assert_allclose(chunked, ref, rtol=1e-10, atol=1e-12)


def test_pickled_mid_stream_continues_bit_identically():
    X, y = stream(150)
    agg = AggregatingRegressor(experts(), history_size=70)
    agg.partial_fit(X[:60], y[:60])
    copy = pickle.loads(pickle.dumps(agg))
    a = agg.prequential_predict(X[60:], y[60:])
    b = copy.prequential_predict(X[60:], y[60:])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(agg.weights_history_, copy.weights_history_)
    np.testing.assert_array_equal(agg.predict(X[:7]), copy.predict(X[:7]))
    # and equal to never stopping (the same calls on an uninterrupted object)
    whole = AggregatingRegressor(experts(), history_size=70)
    whole.partial_fit(X[:60], y[:60])
    np.testing.assert_array_equal(whole.prequential_predict(X[60:], y[60:]), a)
    np.testing.assert_array_equal(whole.weights_history_, agg.weights_history_)


def test_history_is_bounded_and_kept_across_calls():
    X, y = stream(150)
    full = AggregatingRegressor(experts(), history_size=None)
    small = AggregatingRegressor(experts(), history_size=25)
    full.fit(X[:1], y[:1])
    small.fit(X[:1], y[:1])
    for i in range(1, 150, 7):  # many small calls: the buffer wraps several times
        full.partial_fit(X[i : i + 7], y[i : i + 7])
        small.partial_fit(X[i : i + 7], y[i : i + 7])
    assert full.weights_history_.shape == (150, 4)
    np.testing.assert_array_equal(small.weights_history_, full.weights_history_[-25:])
    np.testing.assert_array_equal(small.predictions_history_, full.predictions_history_[-25:])
    none = AggregatingRegressor(experts(), history_size=0).fit(X, y)
    assert none.weights_history_.shape == (0, 4)
    whole = AggregatingRegressor(experts()).fit(X, y)
    np.testing.assert_array_equal(none.weights_, whole.weights_)


def _state(est):
    return pickle.dumps(est)


@pytest.mark.parametrize("n_jobs", [None, 2])
def test_a_failing_expert_leaves_everything_unchanged(n_jobs):
    X, y = stream(120)
    trap = Trap(10)
    # the foreign expert learns before the trap springs: it is put back from a copy
    grid = [*experts(), ("constant", Constant(0.5)), ("trap", trap)]
    with parallel_config(backend="threading"):
        agg = AggregatingRegressor(grid, n_jobs=n_jobs).fit(X[:60], y[:60])
        before = _state(agg)
        agg.estimators_[5].trap = "exception"
        armed = _state(agg)
        with pytest.raises(RuntimeError, match="injected"):
            agg.prequential_predict(X[60:], y[60:])
        assert _state(agg) == armed, "a failed call changed the aggregate or an expert"
        del agg.estimators_[5].trap
        assert _state(agg) == before
        # the stream goes on as if the call never happened
        ref = AggregatingRegressor(grid).fit(X[:60], y[:60])
        np.testing.assert_array_equal(agg.prequential_predict(X[60:], y[60:]),
                                      ref.prequential_predict(X[60:], y[60:]))


def test_bad_input_and_parameters_are_rejected_atomically():
    X, y = stream(80)
    agg = AggregatingRegressor(experts()).fit(X[:40], y[:40])
    before = _state(agg)
    Xb = X[40:].copy()
    Xb[3, 1] = np.nan
    with pytest.raises(ValueError):
        agg.partial_fit(Xb, y[40:])
    with pytest.raises(ValueError):
        agg.partial_fit(X[40:, :2], y[40:])
    assert _state(agg) == before
    with pytest.raises(ValueError, match="learning_rate"):
        AggregatingRegressor(experts(), method="ewa").fit(X, y)
    with pytest.raises(ValueError, match="non-empty"):
        AggregatingRegressor([]).fit(X, y)


def test_make_expert_grid_shares_one_map_per_sigma_and_D():
    grid = make_expert_grid(abo_windows=(5, 10, 20), sigmas=(0.5, 1.0), n_components=(16,),
                            krls_windows=(8,))
    assert len(grid) == 3 * 2 + 2
    X, y = stream(40)
    agg = AggregatingRegressor(grid).fit(X, y)
    assert agg.expert_features_ == (0, 0, 0, 1, 1, 1, -1, -1)
    assert len(agg.feature_maps_) == 2
    # the same seed for one (σ, D): equal maps, so the features are computed once
    seeds = {est.steps[0][1].random_state for _, est in grid[:3]}
    assert len(seeds) == 1


def test_bench_aggregation_quick(tmp_path):
    path = Path(__file__).parents[1] / "benchmarks" / "bench_aggregation.py"
    spec = importlib.util.spec_from_file_location("bench_aggregation", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "agg.json"
    doc = bench.main(["--quick", "--series", "switch", "--no-cost", "--json", str(out)])
    res = json.loads(out.read_text())["series"]["switch"]
    assert res == doc["series"]["switch"]
    # the estimator's predictions are the recursion rerun on its stored predictions
    assert res["check |aggregate - rerun|"] < 1e-12
    for key in ("aggregate (BOA)", "(a) best on first 30%", "(b) best in hindsight",
                "(c) uniform average", "(d) EWA, eta=1"):
        assert 0 < res[key] < 10 * res["target_var"], key
    assert res["(b) best in hindsight"] <= res["(a) best on first 30%"]
    np.testing.assert_allclose(sum(res["final weights"].values()), 1.0)


def test_aggregate_expert_predictions_replays_the_estimator():
    from sklearn_orfit import QREWRLSRegressor, prequential_predict

    # the public rule over stored predictions gives the estimator's own predictions, and
    # refuses predictions that do not match the targets
    from sklearn_orfit.compose import aggregate_expert_predictions

    rng = np.random.default_rng(3)
    X = rng.normal(size=(240, 3))
    y = X @ np.array([1.0, -2.0, 0.5]) + 0.1 * rng.normal(size=240)
    for method in ("boa", "mlpol", "ewa"):
        agg = AggregatingRegressor([("short", QREWRLSRegressor(8)), ("long", QREWRLSRegressor(60))],
                                   method=method, learning_rate=0.5 if method == "ewa" else None,
                                   history_size=None)
        y_pred = prequential_predict(agg, X, y, delay=2)
        replay, W = aggregate_expert_predictions(
            agg.predictions_history_, y, method=method, delay=2,
            learning_rate=agg.learning_rate, loss_scale=agg.loss_scale_)
        np.testing.assert_array_equal(replay, y_pred)
        np.testing.assert_allclose(W.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="do not match"):
        aggregate_expert_predictions(np.zeros((10, 2)), np.zeros(9))
    with pytest.raises(ValueError, match="finite"):
        aggregate_expert_predictions(np.full((10, 2), np.nan), np.zeros(10))


# ---------------------------------------------------------------------- dask
def dask_experts():
    """Cheap experts, one of them with a state above joblib's 1 MB memmapping threshold
    (an RFF map of 40,000 × 4 weights: 1.28 MB), which reaches the workers read-only."""
    grid = experts()
    grid[1] = ("abo-big", so.make_streaming_pipeline(
        so.RandomFourierFeatures(40_000, random_state=1), so.QREWRLSRegressor(3)))
    return grid


def _dask_run(agg, X, y):
    """prequential_predict, then partial_fit in two calls, then predict."""
    p1 = agg.prequential_predict(X[:120], y[:120])
    agg.partial_fit(X[120:160], y[120:160])
    agg.partial_fit(X[160:], y[160:])
    return np.r_[p1, agg.predict(X[:20])]


def test_dask_cluster_equals_sequential(dask_client):
    from _cluster import on_cluster
    from _state import assert_same_state

    X, y = stream(200)
    seq = AggregatingRegressor(dask_experts())
    y_seq = _dask_run(seq, X, y)
    big = seq.estimators_[1].steps_[0][1]
    assert sum(a.nbytes for a in vars(big).values() if isinstance(a, np.ndarray)) > 1_000_000
    with on_cluster(dask_client):  # (and checks that the work really ran there)
        par = AggregatingRegressor(dask_experts(), n_jobs=-1)
        y_par = _dask_run(par, X, y)
    # the same arithmetic in another process: bit-identical (one BLAS thread on both)
    np.testing.assert_array_equal(y_par, y_seq)
    np.testing.assert_array_equal(par.weights_, seq.weights_)
    np.testing.assert_array_equal(par.weights_history_, seq.weights_history_)
    # every expert's learned state (as pickled: the history buffers' unused rows left out)
    assert_same_state(par, seq, params=False, pickled=True)


# ---------------------------------------------------------------------- concurrency
def test_predict_during_partial_fit_sees_a_call_boundary():
    from _concurrent import assert_reads_are_call_boundaries

    X, y = stream(160)
    n = assert_reads_are_call_boundaries(lambda: AggregatingRegressor(experts()), X, y)
    assert n > 0
