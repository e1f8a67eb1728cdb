"""The update contract, for every public estimator, transformer, pipeline and the ensemble.

* bad input (NaN, inf, a wrong width or length, strings, complex, sparse, no rows) is
  rejected with a clear exception and leaves the whole state unchanged (compared
  through its pickle), and the stream continues as if the call never happened;
* pickle, ``copy.deepcopy``, ``joblib.dump/load`` and ``clone`` + refit mid-stream: the
  continued stream is bit-identical to the uninterrupted one;
* an exception or ``KeyboardInterrupt`` raised at any line of the package's code during a
  learning call leaves the whole state exactly as it was (compared through its pickle),
  and the stream then continues bit-identically;
* concurrent writes from two threads lose no row, copies taken while another thread
  writes are never torn (each equals the state at a call boundary), nor is a
  ``predict`` (``transform``) made while another thread writes, and concurrent
  ``predict`` from several threads equals sequential calls;
* ``set_params`` mid-stream is honoured exactly (as a stream learned from the start with
  the new value) or refused by every call that continues the stream, with a clear
  ``ValueError`` that names the parameter and says to call ``fit`` (and ``fit`` then
  starts the stream a fresh estimator with the new value would);
* chunking a stream does not change the prequential predictions, and degenerate
  streams (zero, repeated, rank-one, tiny or huge rows) stay finite or fail clearly;
* targets scaled by ``1e±300`` scale the predictions (every regressor but the network
  is linear in y);
* a model loaded with ``joblib.load(..., mmap_mode="r")`` continues the stream.

The interruptions are injected with a trace function that raises at the k-th line the
package executes: every such line is a place where a real Ctrl-C can arrive.
"""

import copy
import io
import os
import pickle
import re
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor

import joblib
import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn.base import clone, is_regressor

import sklearn_orfit as so
from _hostile import learn, output, run_traced, streaming_estimators
from _hostile import stream as _stream
from _state import assert_same_state, flat_state

PKG_DIR = os.path.dirname(so.__file__)

# ORFit learns these streams (more rows than features): its documented spanned-batch
# warning is expected here, and asserted in test_orfit.py / test_orfit_mlp.py.
pytestmark = pytest.mark.filterwarnings("ignore::sklearn_orfit.exceptions.SpannedBatchWarning")


ESTIMATORS = {
    **streaming_estimators(),
    # two experts sharing one feature map, and one SW-KRLS
    "aggregate": so.AggregatingRegressor([
        ("abo-5", so.make_streaming_pipeline(
            so.RandomFourierFeatures(16, random_state=0), so.QREWRLSRegressor(5))),
        ("abo-20", so.make_streaming_pipeline(
            so.RandomFourierFeatures(16, random_state=0), so.QREWRLSRegressor(20))),
        ("krls", so.SlidingWindowKRLSRegressor(8)),
    ]),
}
NAMES = list(ESTIMATORS)
REGRESSORS = [k for k in NAMES if is_regressor(ESTIMATORS[k])]
ONE_ROW = [k for k in NAMES if hasattr(ESTIMATORS[k], "learn_one")]


def stream(n=60, d=5, seed=0):
    return _stream(n, d, seed)


def started(name, n=30):
    X, y = stream()
    return learn(clone(ESTIMATORS[name]), X[:n], y[:n])


# ---------------------------------------------------------------------- bad input
BAD_INPUTS = {
    "nan_in_X": lambda X, y: (np.where(np.arange(X.size).reshape(X.shape) == 7, np.nan, X), y),
    "inf_in_y": lambda X, y: (X, np.where(np.arange(y.size) == 3, np.inf, y)),
    "more_features": lambda X, y: (np.hstack([X, X[:, :1]]), y),
    "zero_rows": lambda X, y: (X[:0], y[:0]),
    "one_dimensional_X": lambda X, y: (X[:, 0], y),
    "strings": lambda X, y: (X.astype(str).astype(object) + "x", y),
    "complex": lambda X, y: (X + 1j, y),
    "length_mismatch": lambda X, y: (X, y[:-1]),
    "sparse": lambda X, y: (sp.csr_matrix(X), y),
}
Y_ONLY = ("inf_in_y", "length_mismatch")  # transformers ignore y


@pytest.mark.parametrize(
    "name, bad",
    [(n, b) for n in NAMES for b in BAD_INPUTS if is_regressor(ESTIMATORS[n]) or b not in Y_ONLY],
)
def test_bad_input_is_rejected_atomically(name, bad):
    X, y = _stream()
    est = learn(clone(ESTIMATORS[name]), X[:40], y[:40])
    before = pickle.dumps(est)
    Xb, yb = BAD_INPUTS[bad](X[40:50].copy(), y[40:50].copy())
    with pytest.raises((ValueError, TypeError)) as info:
        learn(est, Xb, yb)
    assert str(info.value)  # the message says what is wrong
    assert pickle.dumps(est) == before, "a rejected call changed the state"
    # the stream continues as if the bad call never happened
    ref = learn(learn(clone(ESTIMATORS[name]), X[:40], y[:40]), X[40:], y[40:])
    learn(est, X[40:], y[40:])
    np.testing.assert_array_equal(output(est, X[:5]), output(ref, X[:5]))


# ---------------------------------------------------------------------- copies mid-stream
def _fit(est, X, y):
    return est.fit(X, y) if is_regressor(est) else est.fit(X)


@pytest.mark.parametrize("name", NAMES)
def test_copied_stream_continues_bit_identically(name):
    # pickle, deepcopy, joblib and clone + refit mid-stream
    X, y = _stream()
    first = _fit(clone(ESTIMATORS[name]), X[:50], y[:50])
    buf = io.BytesIO()
    joblib.dump(first, buf)
    buf.seek(0)
    copies = {
        "pickle": pickle.loads(pickle.dumps(first)),
        "deepcopy": copy.deepcopy(first),
        "joblib": joblib.load(buf),
        "clone+refit": _fit(clone(first), X[:50], y[:50]),
    }
    # uninterrupted: the same calls on the original object
    learn(first, X[50:70], y[50:70])
    learn(first, X[70:], y[70:])
    expected = output(first, X)
    for how, other in copies.items():
        learn(other, X[50:70], y[50:70])
        learn(other, X[70:], y[70:])
        np.testing.assert_array_equal(output(other, X), expected, err_msg=how)


# ---------------------------------------------------------------------- streams
def _degenerate(kind, n=70, d=5, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    if kind == "zero_rows":
        X[::4] = 0.0
    elif kind == "repeated_row":
        X[10:50] = X[10]
    elif kind == "rank_one":
        X = np.outer(rng.normal(size=n), rng.normal(size=d))
    elif kind == "tiny":
        X *= 1e-150
    elif kind == "huge":
        X *= 1e150
    return X, np.sin(X.sum(axis=1) / max(1.0, np.abs(X).max())) + rng.normal(size=n)


@pytest.mark.parametrize("kind", ["zero_rows", "repeated_row", "rank_one", "tiny", "huge"])
@pytest.mark.parametrize("name", REGRESSORS)
def test_degenerate_streams_stay_finite_or_fail_clearly(name, kind):
    X, y = _degenerate(kind)
    est = clone(ESTIMATORS[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # e.g. ORFit's documented SpannedBatchWarning
        try:
            y_pred = so.prequential_predict(est, X, y)
        except ValueError as exc:  # a clear error is allowed, never a silent NaN
            assert str(exc)
            return
        assert np.all(np.isfinite(y_pred)), "non-finite prequential predictions"
        assert np.all(np.isfinite(est.predict(X[:5])))


@pytest.mark.parametrize("name", REGRESSORS)
def test_chunking_does_not_change_prequential_predictions(name):
    X, y = stream(60)
    whole = so.prequential_predict(clone(ESTIMATORS[name]), X, y)
    scale = max(1.0, np.abs(whole).max())

    @settings(max_examples=10, deadline=None, suppress_health_check=list(HealthCheck))
    @given(cuts=st.lists(st.integers(1, 59), max_size=4, unique=True))
    def check(cuts):
        other, bounds = clone(ESTIMATORS[name]), [0, *sorted(cuts), 60]
        parts = [so.prequential_predict(other, X[a:b], y[a:b]) for a, b in zip(bounds, bounds[1:])]
        np.testing.assert_allclose(np.concatenate(parts), whole, rtol=0, atol=1e-10 * scale)

    check()


# ---------------------------------------------------------------------- interruptions
def _traced(call, k, exc):
    return run_traced(call, k, exc, PKG_DIR)


def _interruption_points(call_factory):
    """The number of package lines a call executes, and ~16 points spread over them."""
    # twice: the first call may fill caches (probe vectors), running more lines
    n_lines = min(_traced(call_factory(), k=-1, exc=None) for _ in range(2))
    points = sorted({1, 2, 3, n_lines - 1, n_lines, *np.linspace(1, n_lines, 12).astype(int)})
    return n_lines, [k for k in points if 1 <= k <= n_lines]


def _check_interruptions(name, make_call):
    """``make_call(est)`` returns the learning call; interrupt it everywhere.

    All or nothing: after the interruption the state is the one before the call, or (when
    the interruption came after the commit, on the way out) the one after it.
    """
    X, y = stream()
    base = started(name)
    before = pickle.dumps(base)
    ref = copy.deepcopy(base)
    make_call(ref)()
    after = pickle.dumps(ref)
    learn(ref, X[45:], y[45:])
    expected = output(ref, X[:6])
    _, points = _interruption_points(lambda: make_call(copy.deepcopy(base)))
    for i, k in enumerate(points):
        est = copy.deepcopy(base)
        exc = KeyboardInterrupt if i % 2 else RuntimeError("injected")
        try:
            _traced(make_call(est), k, exc)
        except (KeyboardInterrupt, RuntimeError) as got:
            assert got is exc or isinstance(got, exc), got
        state = pickle.dumps(est)
        assert state in (before, after), f"interrupted at line {k}: a state in between"
        if state == before:
            make_call(est)()  # the stream goes on as if the call never happened
        learn(est, X[45:], y[45:])
        np.testing.assert_array_equal(output(est, X[:6]), expected, err_msg=f"line {k}")


@pytest.mark.parametrize("name", ["qrewrls-short", "qrewrls-dual", "pipeline-qrewrls"])
def test_an_interrupt_anywhere_leaves_no_learning_call_in_progress(name):
    # every line of the update template's file, not a sample. An interrupt on the cleanup
    # lines of a call can leave it set as the thread's call in progress; the next calls
    # (partial_fit, and learn_one's inlined short-window path) must see that it ended:
    # they hand it no undo record (else memory grows with the stream) and leave none set
    import contextvars

    from sklearn_orfit._streaming import _base

    X, y = stream()
    base = started(name)
    n_lines = min(run_traced(lambda: learn(copy.deepcopy(base), X[30:45], y[30:45]), -1, None,
                             _base.__file__) for _ in range(2))
    for k in range(1, n_lines + 1):
        est = copy.deepcopy(base)
        context = contextvars.copy_context()
        try:
            run_traced(lambda: context.run(learn, est, X[30:45], y[30:45]), k, KeyboardInterrupt,
                       _base.__file__)
        except KeyboardInterrupt:
            pass
        left = context.run(_base._ACTIVE.get)
        held = None if left is None else len(left.undo)
        context.run(learn, est, X[45:50], y[45:50])
        if hasattr(est, "learn_one"):
            context.run(est.learn_one, X[50], y[50])
        assert context.run(_base._ACTIVE.get) is None, f"line {k}: a learning call left in progress"
        assert left is None or len(left.undo) == held, f"line {k}: undo records handed to an ended call"


@pytest.mark.parametrize("name", NAMES)
def test_interrupted_partial_fit_changes_nothing(name):
    X, y = stream()
    _check_interruptions(name, lambda est: lambda: learn(est, X[30:45], y[30:45]))


@pytest.mark.parametrize("name", ONE_ROW)
def test_interrupted_learn_one_changes_nothing(name):
    X, y = stream()
    _check_interruptions(name, lambda est: lambda: est.learn_one(X[30], y[30]))


@pytest.mark.parametrize("name", REGRESSORS)
def test_interrupted_prequential_predict_changes_nothing(name):
    X, y = stream()
    _check_interruptions(name, lambda est: lambda: est.prequential_predict(X[30:45], y[30:45]))


@pytest.mark.parametrize("name", REGRESSORS)
def test_interrupted_delayed_prequential_predict_changes_nothing(name):
    # labels 3 rows late: the rows are learned one by one on a private copy, committed
    # at the end
    X, y = stream()
    _check_interruptions(
        name, lambda est: lambda: est.prequential_predict(X[30:45], y[30:45], delay=3)
    )


# ---------------------------------------------------------------------- threads
def _rows_seen(est):
    if hasattr(est, "steps_"):
        return _rows_seen(est.steps_[-1][1])
    return getattr(est, "n_samples_seen_", None)


@pytest.mark.parametrize("name", NAMES)
def test_concurrent_writes_lose_nothing(name):
    X, y = stream(120)
    est = started(name)
    n0 = _rows_seen(est)
    errors = []
    start = threading.Barrier(2)

    def writer(rows):
        start.wait()
        try:
            for i in rows:
                learn(est, X[i : i + 1], y[i : i + 1])
        except BaseException as exc:  # reported below, not swallowed
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(r,)) for r in (range(30, 75), range(75, 120))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    if n0 is not None:
        assert _rows_seen(est) == n0 + 90, "rows were lost by concurrent writes"
    assert np.all(np.isfinite(output(est, X[:6])))


@pytest.mark.parametrize("name", NAMES)
def test_concurrent_predict_equals_sequential(name):
    X, y = _stream()
    est = learn(clone(ESTIMATORS[name]), X, y)
    batches = [X[i : i + 7] for i in range(0, len(X), 7)] * 3
    sequential = [output(est, b) for b in batches]
    with ThreadPoolExecutor(max_workers=4) as pool:
        concurrent = list(pool.map(lambda b: output(est, b), batches))
    for s, c in zip(sequential, concurrent):
        np.testing.assert_array_equal(s, c)


@pytest.mark.parametrize("name", [k for k in NAMES if k not in ("rff",)])
def test_copies_during_a_write_are_never_torn(name):
    X, y = stream(120)
    base = started(name)
    if _rows_seen(base) is None:
        pytest.skip("no row count to identify the boundary with")
    # the state after each boundary, replayed sequentially
    ref, boundary = copy.deepcopy(base), {}
    boundary[_rows_seen(ref)] = output(ref, X[:6])
    for i in range(30, 120, 3):
        learn(ref, X[i : i + 3], y[i : i + 3])
        boundary[_rows_seen(ref)] = output(ref, X[:6])
    est = copy.deepcopy(base)
    copies, done = [], threading.Event()

    def writer():
        try:
            for i in range(30, 120, 3):
                learn(est, X[i : i + 3], y[i : i + 3])
        finally:
            done.set()

    def copier():
        while True:  # at least once, then until the writer is done
            finished = done.is_set()
            copies.append(copy.deepcopy(est))
            copies.append(pickle.loads(pickle.dumps(est)))
            if finished:
                break

    threads = [threading.Thread(target=writer), threading.Thread(target=copier)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert copies
    for c in copies:
        n = _rows_seen(c)
        assert n in boundary, f"a copy holds {n} rows: not a call boundary"
        np.testing.assert_array_equal(output(c, X[:6]), boundary[n])


# ---------------------------------------------------------------------- set_params
SET_PARAMS = [
    ("qrewrls-short", {"window_size": 12}),
    ("qrewrls-short", {"forgetting_factor": 0.5}),
    ("qrewrls-givens", {"alpha": 0.1}),
    ("qrewrls-dual", {"solver": "givens"}),
    # ORFit: every one of these was silently ignored by the next partial_fit
    ("orfit", {"memory_size": 2}),
    ("orfit-pca", {"memory_size": 1}),
    ("orfit-pca", {"memory_size": 50}),
    ("orfit-pca", {"memory_policy": "latest"}),
    ("orfit-pca", {"batch_size": 5}),
    ("orfit-pca", {"rtol": 0.5}),
    ("orfit-pca", {"coef_init": np.ones(5)}),
    ("orfit-pca", {"random_state": 3}),
    ("orfit-mlp", {"hidden_layer_sizes": (4,)}),
    ("orfit-mlp", {"activation": "relu"}),
    ("orfit-mlp-pca", {"memory_policy": "latest"}),
    ("sw-krls", {"length_scale": 2.0}),
    ("sw-krls", {"window_size": 4}),
    # QRD-RLS and EW-RLS: λ, α and δ were silently ignored, a new window applied to a
    # factor built with the old one
    ("qrd-rls", {"window_size": 4}),
    ("qrd-rls", {"alpha": 1.0}),
    ("qrd-rls", {"forgetting_factor": 0.5}),
    ("ewrls", {"forgetting_factor": 0.5}),
    ("ewrls", {"delta": 1.0}),
    ("scaler", {"with_mean": False}),
    ("lags", {"n_lags": 5}),
    ("rff", {"n_components": 8}),
    ("pipeline-orfit", {"lagtransformer__n_lags": 4}),
    ("pipeline-qrewrls", {"qrewrlsregressor__window_size": 5}),
    ("ensemble", {"n_partitions": 4}),
    ("example", {"forgetting_factor": 0.5}),
    ("target", {"with_mean": False}),
    ("target", {"with_std": False}),
    ("target", {"regressor__window_size": 5}),
    ("aggregate", {"method": "mlpol"}),
    ("aggregate", {"krls__window_size": 4}),
]


def _continuing_calls(est, X, y):
    """Every call that continues a stream: learning calls and prequential passes."""
    if not is_regressor(est):
        calls = {"partial_fit": lambda: est.partial_fit(X)}
        if hasattr(est, "prequential_transform"):
            calls["prequential_transform"] = lambda: est.prequential_transform(X)
        return calls
    calls = {
        "partial_fit": lambda: est.partial_fit(X, y),
        "prequential_predict": lambda: est.prequential_predict(X, y),
        "so.prequential_predict": lambda: so.prequential_predict(est, X, y),
    }
    if hasattr(est, "learn_one"):
        calls["learn_one"] = lambda: est.learn_one(X[0], y[0])
    return calls


@pytest.mark.parametrize("name, param", [
    ("qrewrls-short", "forgetting_factor"), ("qrewrls-primal", "alpha"), ("qrewrls-dual", "alpha"),
    ("ewrls", "forgetting_factor"), ("qrd-rls", "forgetting_factor"), ("orfit-pca", "rtol"),
])
def test_a_float32_of_a_parameter_is_another_value(name, param):
    # under NumPy 2 np.float32(0.9) == 0.9 is computed in float32 and is true, though the
    # value differs by 2.4e-8: a stream started with 0.9 went on with it after
    # set_params(np.float32(0.9)), while get_params said otherwise
    X, y = stream()
    est = learn(clone(ESTIMATORS[name]).set_params(**{param: 0.9}), X[:30], y[:30])
    before = pickle.dumps(est)
    est.set_params(**{param: np.float32(0.9)})
    for call_name, call in _continuing_calls(est, X[30:], y[30:]).items():
        with pytest.raises(ValueError, match=rf"{param} changed \(set_params\)"):
            call()
        assert pickle.dumps(est.set_params(**{param: 0.9})) == before, call_name
        est.set_params(**{param: np.float32(0.9)})
    for other in (np.array(0.9, dtype=np.float32), np.array([0.9])):  # arrays: other values
        est.set_params(**{param: other})
        with pytest.raises(ValueError, match=rf"{param} changed \(set_params\)"):
            est.partial_fit(X[30:], y[30:])
    est.set_params(**{param: np.float64(0.9)})  # the same value: the stream goes on
    learn(est, X[30:], y[30:])


@pytest.mark.parametrize(
    "name, params", SET_PARAMS, ids=[f"{n}-{list(p)[0]}" for n, p in SET_PARAMS]
)
def test_set_params_mid_stream_is_honoured_or_refused(name, params):
    X, y = stream()
    est = started(name)
    learned = output(est, X[:6])
    est.set_params(**params)
    before = pickle.dumps(est)
    try:
        learn(est, X[30:], y[30:])
    except ValueError:
        # refused: by every call that continues the stream, naming the parameter and
        # saying to call fit, and the state is left as it was
        (param,) = params
        # predict (transform) uses the learned state or is refused too, never a mix of
        # the new parameters with the state built with the old ones
        try:
            now = output(est, X[:6])
        except ValueError as exc:
            assert re.search(rf"{re.escape(param)} changed \(set_params\)", str(exc))
        else:
            np.testing.assert_array_equal(now, learned)
        for call_name, call in _continuing_calls(est, X[30:], y[30:]).items():
            with pytest.raises(ValueError, match=rf"{re.escape(param)} changed \(set_params\).*Call fit"):
                call()
            assert pickle.dumps(est) == before, f"a refused {call_name} changed the state"
        # fit starts a new stream with the new value (as fit of a fresh estimator: ORFit's
        # fit learns row by row, its partial_fit a call as one batch)
        fresh = clone(ESTIMATORS[name]).set_params(**params)
        fresh = fresh.fit(X, y) if is_regressor(fresh) else fresh.fit(X)
        refit = est.fit(X, y) if is_regressor(est) else est.fit(X)
        assert_same_state(refit, fresh, pickled=True)  # the whole state, as pickled
        np.testing.assert_array_equal(output(refit, X[:6]), output(fresh, X[:6]))
        return
    # honoured: as a stream learned from the start with the new value
    fresh = learn(clone(ESTIMATORS[name]).set_params(**params), X, y)
    np.testing.assert_allclose(output(est, X[:6]), output(fresh, X[:6]), rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------- scale
@pytest.mark.parametrize("scale", [1e-300, 1e300])
@pytest.mark.parametrize("name", [k for k in REGRESSORS if not k.startswith("orfit-mlp")])
def test_targets_at_extreme_scales_scale_the_predictions(name, scale):
    # every regressor but the network is linear in y
    X, y = stream()
    ref_est = clone(ESTIMATORS[name])
    ref = so.prequential_predict(ref_est, X, y)
    est = clone(ESTIMATORS[name])
    got = so.prequential_predict(est, X, y * scale)
    assert np.all(np.isfinite(got))
    atol = 1e-8 * np.abs(ref).max()
    np.testing.assert_allclose(got / scale, ref, rtol=1e-8, atol=atol)
    np.testing.assert_allclose(est.predict(X[:6]) / scale, ref_est.predict(X[:6]), rtol=1e-8, atol=atol)


# ---------------------------------------------------------------------- memory-mapped
@pytest.mark.parametrize("name", NAMES)
def test_memory_mapped_model_continues_the_stream(name, tmp_path):
    X, y = stream()
    est = started(name)
    path = tmp_path / "model.joblib"
    joblib.dump(est, path)
    loaded = joblib.load(path, mmap_mode="r")
    # the test is about read-only memory maps: the loaded state holds them (an in-place
    # update of one, e.g. SW-KRLS's inverse kernel matrix by BLAS, was a segfault)
    assert any(
        isinstance(v, np.memmap) and not v.flags.writeable
        for v in flat_state(loaded).values()
    )
    learn(est, X[30:], y[30:])
    learn(loaded, X[30:], y[30:])
    np.testing.assert_array_equal(output(loaded, X[:6]), output(est, X[:6]))


# ---------------------------------------------------------------------- targets
BAD_TARGETS = {
    "numeric_strings": lambda y: y.astype(str),
    "strings": lambda y: np.array(["a"] * len(y)),
    "objects_with_a_string": lambda y: np.array([*y[:-1], "x"], dtype=object),
    "no_columns": lambda y: np.zeros((y.shape[0], 0)),
    "complex": lambda y: y + 1j,
    "none": lambda y: np.array([None] * y.shape[0], dtype=object),
    "nan": lambda y: np.r_[y[:-1], np.nan],
    "inf": lambda y: np.r_[np.inf, y[1:]],
    "wrong_length": lambda y: y[:-1],
    "2d_where_1d_was_learned": lambda y: y[:, None],
    "two_targets": lambda y: np.c_[y, y],
    "3d": lambda y: y[:, None, None],
}


@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
@pytest.mark.parametrize("bad", list(BAD_TARGETS))
@pytest.mark.parametrize("name", REGRESSORS)
def test_bad_targets_get_a_clear_error(name, bad, method):
    # Regression: numeric strings as y gave a raw UFuncTypeError, y of shape (n, 0) was
    # reported as "0 feature(s)", None targets as an overflow; a pipeline's steps learned
    # before its final step refused y
    X, y = stream()
    est = started(name)
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match=r"(?i)\by\b|target|complex|numbers of samples"):
        getattr(est, method)(X[30:40], BAD_TARGETS[bad](y[30:40]))
    assert pickle.dumps(est) == before


@pytest.mark.parametrize("name", [k for k in ONE_ROW if k.startswith("qrewrls")])
def test_learn_one_refuses_what_partial_fit_refuses(name):
    # Regression: learn_one took complex rows (dropping the imaginary part) and strings,
    # and let an overflowing solution through as inf or NaN coefficients
    X, y = stream()
    est = started(name)
    before = pickle.dumps(est)
    for x, target in [(X[30] + 1j, y[30]), (X[30].astype(str), y[30]), (X[30], "1.5"),
                      (X[30], 1 + 2j), (np.full(5, np.inf), 1.0)]:
        with pytest.raises(ValueError):
            est.learn_one(x, target)
        assert pickle.dumps(est) == before
    # a window of one row: the solution y/x = 1e600 overflows
    one = so.QREWRLSRegressor(1).fit([[1.0]], [1.0])
    with pytest.raises(ValueError, match="overflowed"):
        one.learn_one([1e-300], 1e300)
    assert one.coef_[0] == 1.0 and one.n_samples_seen_ == 1


# ---------------------------------------------------------------------- delay
@pytest.mark.parametrize("name", REGRESSORS)
def test_a_delay_beyond_the_call_is_the_call_length(name):
    # labels later than the call's end: no row of it is learned before every prediction
    # is made, whatever the integer (2**63 overflowed int64 arithmetic in one estimator)
    X, y = stream()
    preds = {}
    for delay in (X.shape[0] - 30, 2**63, 10**30):
        est = started(name)
        preds[delay] = (
            np.asarray(so.prequential_predict(est, X[30:], y[30:], delay=delay)),
            output(est, X[:6]),
        )
    ref = preds[X.shape[0] - 30]
    for delay in (2**63, 10**30):
        np.testing.assert_array_equal(preds[delay][0], ref[0])
        np.testing.assert_array_equal(preds[delay][1], ref[1])


# ---------------------------------------------------------------------- state format
@pytest.mark.parametrize("name", NAMES)
def test_a_pickle_of_another_state_format_is_refused(name):
    # a state is read only by the layout that wrote it: no migration, a clear refusal
    from sklearn_orfit._streaming._base import STATE_FORMAT, StreamLockMixin

    est = started(name)
    assert isinstance(est, StreamLockMixin)
    state = est.__getstate__()
    assert state["_sklearn_orfit_state_format"] == STATE_FORMAT
    pickle.loads(pickle.dumps(est))  # the format it writes, it reads
    for found, message in ((STATE_FORMAT + 1, rf"state format {STATE_FORMAT + 1}"),
                           (None, "no state format")):
        bad = dict(state)
        if found is None:
            del bad["_sklearn_orfit_state_format"]
        else:
            bad["_sklearn_orfit_state_format"] = found
        fresh = type(est).__new__(type(est))
        with pytest.raises(ValueError, match=rf"{message}.*Fit the model again"):
            fresh.__setstate__(bad)


@pytest.mark.parametrize("name", NAMES)
def test_predict_during_a_write_sees_a_call_boundary(name):
    from _concurrent import assert_reads_are_call_boundaries

    X, y = stream(40)
    assert_reads_are_call_boundaries(lambda: clone(ESTIMATORS[name]), X, y)


@pytest.mark.parametrize("name", ["qrewrls-dual", "orfit", "ensemble", "aggregate"])
def test_prequential_predict_validates_the_parameters_when_they_may_have_changed(name, monkeypatch):
    # validated by the call that starts a stream and by the first call after any
    # set_params, not by every call of a stream whose parameters did not change (44 µs
    # a call); an invalid value set mid-stream is refused, the state left as it was
    # (parameters allowed to change mid-stream too, e.g. n_jobs)
    X, y = stream()
    est = clone(ESTIMATORS[name])
    cls = type(est)
    calls = []
    real = cls._validate_params
    monkeypatch.setattr(cls, "_validate_params", lambda self: calls.append(1) or real(self))
    so.prequential_predict(est, X[:10], y[:10])
    assert len(calls) == 1
    for a in range(10, 25, 5):
        so.prequential_predict(est, X[a : a + 5], y[a : a + 5])
    assert len(calls) == 1
    bad = {"qrewrls-dual": ("window_size", -1), "orfit": ("coef_init", "nope"),
           "ensemble": ("n_jobs", 1.5), "aggregate": ("n_jobs", "nope")}[name]
    est.set_params(**{bad[0]: bad[1]})
    before = pickle.dumps(est)
    for call in (lambda: so.prequential_predict(est, X[30:], y[30:]), lambda: est.fit(X, y)):
        with pytest.raises(ValueError, match=bad[0]):
            call()
        assert pickle.dumps(est) == before
    assert len(calls) == 3  # both calls validated


def test_parameters_not_validated_under_a_global_switch_are_validated_later():
    # a call made with scikit-learn's parameter validation switched off does not count
    # as validated: the next call outside the switch validates the same parameters
    # (n_jobs may change mid-stream, so only validation refuses 1.5)
    import sklearn

    X, y = stream()
    est = clone(ESTIMATORS["ensemble"])
    so.prequential_predict(est, X[:10], y[:10])
    est.set_params(n_jobs=1.5)
    with sklearn.config_context(skip_parameter_validation=True):
        so.prequential_predict(est, X[10:20], y[10:20])  # not validated: learned
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match="n_jobs"):
        so.prequential_predict(est, X[20:30], y[20:30])
    assert pickle.dumps(est) == before
