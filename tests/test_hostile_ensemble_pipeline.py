"""Hostile inputs for FeaturePartitionEnsemble and StreamingPipeline.

* the parallel ensemble at real sizes: partition states above joblib's 1 MB
  memory-mapping threshold reach loky workers as read-only memory maps, and a model
  loaded with ``joblib.load(mmap_mode="r")`` holds them too;
* every learning call of the ensemble and of the pipeline is all-or-nothing: a bad ``y``,
  an exception or a ``KeyboardInterrupt`` raised while one partition or one step learns
  leaves the model exactly as it was, and the stream then continues bit for bit as an
  untouched model's;
* ``set_params`` mid-stream is honoured or refused with a clear ValueError, never
  silently ignored.
"""

import contextlib
import pickle
import subprocess
import sys
import textwrap

import joblib
import numpy as np
import pytest
from sklearn.base import BaseEstimator, RegressorMixin, TransformerMixin, clone
from sklearn.linear_model import SGDRegressor

from sklearn_orfit import (
    FeaturePartitionEnsemble,
    LagTransformer,
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    SlidingWindowKRLSRegressor,
    make_streaming_pipeline,
)


MB = 1_000_000  # joblib's default max_nbytes: larger arrays reach workers memory-mapped


# ---------------------------------------------------------------------- test estimators
# what a trap raises; a trap is stored by name (a raised exception object would change:
# Python attaches its traceback, so the model's pickle would change with it)
TRAPS = {"exception": RuntimeError, "keyboard-interrupt": KeyboardInterrupt}


def _spring(trap):
    """Raise the trap named ``trap`` (a key of TRAPS), if any."""
    if trap is not None:
        raise TRAPS[trap]("injected failure")


# Module level, so that loky workers can unpickle them (conftest puts tests/ on sys.path,
# and loky workers inherit the parent's sys.path).
class _Trap(QREWRLSRegressor):
    """QREWRLS that raises inside its update: ``self.trap`` when set (it travels to
    worker processes with the estimator), or ``countdown[1]`` at the ``countdown[0]``-th
    update of any instance in this process (for fresh clones, as ``fit`` makes).

    The trap is raised inside the estimator's own all-or-nothing update, so the
    estimator itself is left as it was; what is tested is the model around it.
    """

    countdown = None

    def _learn(self, X, Y, *, predict):
        trap = self.__dict__.get("trap")
        countdown = type(self).countdown
        if countdown is not None:
            countdown[0] -= 1
            if countdown[0] == 0:
                trap = countdown[1]
        _spring(trap)
        return super()._learn(X, Y, predict=predict)


class _InPlaceSum(RegressorMixin, BaseEstimator):
    """A foreign streaming regressor that updates a large state in place (> 1 MB).

    ``partial_fit`` adds into ``buffer_`` with ``+=``: on a read-only memory map that is
    ``ValueError: assignment destination is read-only``.
    """

    def __init__(self, size=150_000):
        self.size = size

    def partial_fit(self, X, y):
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if not hasattr(self, "buffer_"):
            self.buffer_ = np.zeros(self.size)
            self.coef_ = np.zeros(X.shape[1])
            self.n_features_in_ = X.shape[1]
            self.n_samples_seen_ = 0
        self.buffer_[: X.shape[0]] += y  # in place
        self.coef_ += X.T @ y / (1.0 + self.n_samples_seen_)  # in place
        self.n_samples_seen_ += X.shape[0]
        return self

    def predict(self, X):
        return np.asarray(X, dtype=np.float64) @ self.coef_ + self.buffer_[0]


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


def _flat(obj, prefix="", seen=None):
    """``{path: value}`` over a model's state, recursing into every helper object."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return {}
    seen.add(id(obj))
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        items = vars(obj).items()
    out = {}
    for k, v in items:
        path = f"{prefix}{k}"
        if k == "_stream_lock":
            continue  # a lock, not state
        if callable(v) and not hasattr(v, "get_params"):
            out[path] = getattr(v, "__qualname__", type(v).__qualname__)  # helper functions
        elif isinstance(v, (dict, list, tuple)) or (
            hasattr(v, "__dict__") and not isinstance(v, (type, np.ndarray)) and not callable(v)
        ):
            out.update(_flat(v, path + ".", seen))
        else:
            out[path] = v
    return out


def _learned(model):
    """The learned state of a model: its attributes except its own parameters."""
    params = set(model.get_params(deep=False))
    return _flat({k: v for k, v in vars(model).items() if k not in params})


def assert_same_state(a, b):
    """Two models hold bit-for-bit equal learned state (plain arrays, same values)."""
    fa, fb = _learned(a), _learned(b)
    assert fa.keys() == fb.keys(), set(fa) ^ set(fb)
    for k, v in fa.items():
        w = fb[k]
        if isinstance(v, np.ndarray) or isinstance(w, np.ndarray):
            v, w = np.asarray(v), np.asarray(w)
            assert v.dtype == w.dtype and np.array_equal(v, w, equal_nan=v.dtype.kind == "f"), k
        else:
            assert v == w or (v != v and w != w), k


def _largest_array(obj):
    """nbytes of the largest array in an estimator's state (solver objects included)."""
    return max((v.nbytes for v in _flat(obj).values() if isinstance(v, np.ndarray)), default=0)


# ---------------------------------------------------------------------- item 1: sizes
# partition states above 1 MB; each case runs in a few seconds
BIG_CASES = {
    # window 80 x 2048 features: the row buffer alone is 1.3 MB
    "qrewrls": lambda: (RandomFourierFeatures(4096, random_state=0), QREWRLSRegressor(80)),
    # the Givens recursion's table of window 80 x (1024 features + 81) is 1.4 MB; its
    # row buffer (0.7 MB) stays below the threshold
    "qrewrls-givens": lambda: (
        RandomFourierFeatures(2048, random_state=0),
        QREWRLSRegressor(80, solver="givens"),
    ),
    # the inverse kernel matrix of a 400-row window is 1.3 MB, updated in place by BLAS
    # (on a read-only memory map: a segmentation fault of the worker)
    "sw-krls": lambda: (
        RandomFourierFeatures(8, random_state=0),
        SlidingWindowKRLSRegressor(400),
    ),
    "foreign-in-place": lambda: (RandomFourierFeatures(64, random_state=0), _InPlaceSum()),
}


def _big_ensemble(case, n_jobs):
    features, estimator = BIG_CASES[case]()
    return FeaturePartitionEnsemble(features, estimator, n_partitions=2, n_jobs=n_jobs)


def _big_run(ens, X, y):
    """Every learning path, twice past the first call (when the state is large)."""
    ens.partial_fit(X[:150], y[:150])
    ens.partial_fit(X[150:200], y[150:200])
    p1 = ens.prequential_predict(X[200:260], y[200:260])
    ens.partial_fit(X[260:300], y[260:300])
    return np.concatenate([p1, ens.predict(X[300:320])])


@pytest.mark.parametrize("case", sorted(BIG_CASES))
def test_loky_above_memmap_threshold_equals_sequential(case):
    X, y = _data()
    ref = _big_ensemble(case, n_jobs=1)
    expected = _big_run(ref, X, y)
    # the test is about states that joblib memory-maps: check that they are that large
    assert _largest_array(ref.estimators_[0]) > MB
    ens = _big_ensemble(case, n_jobs=2)
    got = _big_run(ens, X, y)
    np.testing.assert_array_equal(got, expected)
    assert_same_state(ens, ref)
    # and once more from the parallel state (the estimators came back from workers)
    np.testing.assert_array_equal(
        ens.prequential_predict(X[320:340], y[320:340]),
        ref.prequential_predict(X[320:340], y[320:340]),
    )


@pytest.mark.parametrize("case", ["qrewrls", "qrewrls-givens", "foreign-in-place"])
@pytest.mark.parametrize("n_jobs", [1, 2])
def test_memory_mapped_model_continues_its_stream(case, n_jobs, tmp_path):
    X, y = _data()
    ref = _big_ensemble(case, n_jobs=n_jobs)
    ref.partial_fit(X[:150], y[:150])
    path = tmp_path / "ensemble.joblib"
    joblib.dump(ref, path)
    ens = joblib.load(path, mmap_mode="r")
    assert all(
        isinstance(v, np.memmap)
        for v in _flat(ens.estimators_[0]).values()
        if isinstance(v, np.ndarray)
    )
    got = [ens.partial_fit(X[150:200], y[150:200]).predict(X[300:310])]
    got.append(ens.prequential_predict(X[200:260], y[200:260]))
    expected = [ref.partial_fit(X[150:200], y[150:200]).predict(X[300:310])]
    expected.append(ref.prequential_predict(X[200:260], y[200:260]))
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)
    assert_same_state(ens, ref)


@pytest.mark.parametrize("n_jobs", [1, 2])
def test_writable_memory_map_file_is_never_written(n_jobs, tmp_path):
    """Loaded with mmap_mode="r+", the state maps the file for writing: learning must not
    write the stream into the file (nor, under loky, into each other's workers)."""
    X, y = _data()
    ref = _big_ensemble("qrewrls", n_jobs=n_jobs).partial_fit(X[:150], y[:150])
    path = tmp_path / "ensemble.joblib"
    joblib.dump(ref, path)
    on_disk = path.read_bytes()
    ens = joblib.load(path, mmap_mode="r+")
    np.testing.assert_array_equal(
        ens.prequential_predict(X[150:200], y[150:200]),
        ref.prequential_predict(X[150:200], y[150:200]),
    )
    ens.partial_fit(X[200:220], y[200:220])
    del ens
    assert path.read_bytes() == on_disk


def test_memory_mapped_sw_krls_ensemble_continues(tmp_path):
    """SW-KRLS updates its inverse kernel matrix in place with BLAS: on a read-only memory
    map that was a segmentation fault, so this runs in a child process."""
    code = textwrap.dedent(
        f"""
        import joblib, numpy as np
        from sklearn_orfit import (
            FeaturePartitionEnsemble, RandomFourierFeatures, SlidingWindowKRLSRegressor)
        rng = np.random.default_rng(0)
        X = rng.standard_normal((200, 4)); y = np.sin(X[:, 0])
        def make():
            return FeaturePartitionEnsemble(
                RandomFourierFeatures(8, random_state=0), SlidingWindowKRLSRegressor(400),
                n_partitions=2)
        ref = make().partial_fit(X[:150], y[:150])
        joblib.dump(ref, {str(tmp_path / "m.joblib")!r})
        ens = joblib.load({str(tmp_path / "m.joblib")!r}, mmap_mode="r")
        a = ens.prequential_predict(X[150:], y[150:])
        b = ref.prequential_predict(X[150:], y[150:])
        assert np.array_equal(a, b)
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


# ---------------------------------------------------------------------- item 3: ensemble
def _small_ensemble(n_jobs=None, estimator=None):
    return FeaturePartitionEnsemble(
        RandomFourierFeatures(64, random_state=0),
        _Trap(window_size=20) if estimator is None else estimator,
        n_partitions=4,
        n_jobs=n_jobs,
    )


def _continue(model, X, y):
    """Continue a stream on every learning path; returns everything predicted."""
    p1 = model.prequential_predict(X[150:220], y[150:220])
    model.partial_fit(X[220:260], y[220:260])
    return np.concatenate([p1, model.predict(X[260:280])])


BACKENDS = {
    "sequential": dict(n_jobs=None),
    "threading": dict(n_jobs=2, backend="threading"),
    "loky": dict(n_jobs=2, backend="loky"),
}


def _backend(config):
    backend = config.get("backend")
    return joblib.parallel_config(backend=backend) if backend else contextlib.nullcontext()


ENSEMBLE_FAILURES = [
    (backend, trap, method)
    for backend in ("sequential", "threading")
    for trap in sorted(TRAPS)
    for method in ("partial_fit", "prequential_predict", "fit")
] + [  # process workers take seconds to start: one case per kind of failure
    ("loky", "exception", "partial_fit"),
    ("loky", "keyboard-interrupt", "prequential_predict"),
]


@pytest.mark.parametrize("backend, trap, method", ENSEMBLE_FAILURES)
def test_ensemble_failure_in_one_partition_changes_nothing(backend, trap, method, monkeypatch):
    X, y = _data()
    config = BACKENDS[backend]
    ens = _small_ensemble(n_jobs=config["n_jobs"]).partial_fit(X[:100], y[:100])
    ref = _small_ensemble(n_jobs=None).partial_fit(X[:100], y[:100])
    # the third partition fails, after the first two have learned (sequentially)
    if method == "fit":  # fresh clones: trap the third update in this process
        monkeypatch.setattr(_Trap, "countdown", [3, trap])
    else:
        ens.estimators_[2].trap = trap
    before = pickle.dumps(ens)
    with _backend(config):
        with pytest.raises(TRAPS[trap]):
            getattr(ens, method)(X[100:150], y[100:150])
    assert pickle.dumps(ens) == before
    assert [e.n_samples_seen_ for e in ens.estimators_] == [100] * 4
    assert ens.n_samples_seen_ == 100
    ens.estimators_[2].__dict__.pop("trap", None)
    monkeypatch.setattr(_Trap, "countdown", None)
    # the stream continues exactly as an untouched ensemble's
    for model in (ens, ref):
        model.partial_fit(X[100:150], y[100:150])
    with _backend(config):
        got = _continue(ens, X, y)
    np.testing.assert_array_equal(got, _continue(ref, X, y))
    assert_same_state(ens, ref)


def test_ensemble_failed_fit_keeps_the_previous_stream():
    X, y = _data()
    ens = _small_ensemble().partial_fit(X[:100], y[:100])
    before = pickle.dumps(ens)
    with pytest.raises(ValueError, match="NaN"):
        ens.fit(X[100:150], np.full(50, np.nan))
    assert pickle.dumps(ens) == before


def test_ensemble_interrupt_before_commit_changes_nothing(monkeypatch):
    """An interrupt after every partition learned but before the commit: nothing stands."""
    import sklearn_orfit._ensemble as ensemble_module

    X, y = _data()
    ens = _small_ensemble().partial_fit(X[:100], y[:100])
    before = pickle.dumps(ens)

    def interrupted(preds):
        raise KeyboardInterrupt

    monkeypatch.setattr(ensemble_module, "_average", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ens.prequential_predict(X[100:150], y[100:150])
    assert pickle.dumps(ens) == before


# ---------------------------------------------------------------------- item 2: pipeline
def _pipe(final=None, middle=()):
    return make_streaming_pipeline(
        LagTransformer(3),
        RecursiveStandardScaler(),
        *middle,
        RandomFourierFeatures(32, random_state=0),
        QREWRLSRegressor(10) if final is None else final,
    )


def _continue_pipe(pipe, X, y):
    p1 = pipe.prequential_predict(X[150:200], y[150:200])
    pipe.partial_fit(X[200:230], y[200:230])
    return np.concatenate([p1, pipe.predict(X[230:250])])


N_BAD = 50  # rows of the rejected chunk
BAD_Y = {
    "2-D where 1-D was learned": lambda y: y[:, None],
    "wrong length": lambda y: y[:-1],
    "NaN": lambda y: np.r_[y[:-1], np.nan],
    "inf": lambda y: np.r_[np.inf, y[1:]],
    "strings": lambda y: np.array(["a"] * len(y)),
    "numeric strings": lambda y: y.astype(str),
    "shape (n, 0)": lambda y: np.empty((len(y), 0)),
    "two targets": lambda y: np.c_[y, y],
    "3-D": lambda y: y[:, None, None],
    "None values": lambda y: [None] * len(y),
    "complex": lambda y: y + 1j,
    "objects with a string": lambda y: np.array([*y[:-1], "x"], dtype=object),
}


@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
@pytest.mark.parametrize("bad", sorted(BAD_Y))
def test_pipeline_bad_y_changes_nothing(bad, method):
    X, y = _data()
    pipe = _pipe().partial_fit(X[:100], y[:100])
    ref = _pipe().partial_fit(X[:100], y[:100])
    before = pickle.dumps(pipe)
    with pytest.raises(ValueError, match="y"):
        getattr(pipe, method)(X[100:150], BAD_Y[bad](y[100:150]))
    assert pickle.dumps(pipe) == before
    for model in (pipe, ref):
        model.partial_fit(X[100:150], y[100:150])
    np.testing.assert_array_equal(_continue_pipe(pipe, X, y), _continue_pipe(ref, X, y))
    assert_same_state(pipe, ref)


def test_pipeline_multi_output_stream_rejects_other_target_counts():
    X, y = _data()
    Y = np.c_[y, -y]
    pipe = _pipe().partial_fit(X[:100], Y[:100])
    before = pickle.dumps(pipe)
    for bad in (y[100:150], np.c_[y, y, y][100:150], Y[100:150, :1]):
        with pytest.raises(ValueError, match="2 targets"):
            pipe.partial_fit(X[100:150], bad)
        assert pickle.dumps(pipe) == before


class _TrapTransformer(TransformerMixin, BaseEstimator):
    """A streaming transformer (running sum of its rows) that raises ``self.trap``."""

    def fit(self, X, y=None):
        self.__dict__.pop("sum_", None)
        return self.partial_fit(X)

    def partial_fit(self, X, y=None):
        self._learn(np.asarray(X, dtype=np.float64))
        return self

    def prequential_transform(self, X, y=None):
        X = np.asarray(X, dtype=np.float64)
        before = getattr(self, "sum_", np.zeros(X.shape[1]))
        out = X - (before + np.cumsum(X, axis=0) - X) / 1000.0
        self._learn(X)
        return out

    def _learn(self, X):
        _spring(self.__dict__.get("trap"))
        self.sum_ = getattr(self, "sum_", 0.0) + X.sum(axis=0)
        self.n_features_in_ = X.shape[1]

    def transform(self, X):
        return np.asarray(X, dtype=np.float64) - self.sum_ / 1000.0


class _TornSGD(SGDRegressor):
    """A foreign final estimator that is not all-or-nothing: it learns, then raises."""

    def partial_fit(self, X, y, **params):
        super().partial_fit(X, y, **params)
        _spring(self.__dict__.get("trap"))
        return self


TRAP_SITES = {
    # (final step template, middle steps, index in steps_ of the trapped step)
    "final step (atomic)": (lambda: _Trap(10), (), -1),
    "final step (foreign, learns then raises)": (
        lambda: _TornSGD(random_state=0, learning_rate="constant", eta0=0.01),
        (),
        -1,
    ),
    "middle transformer": (lambda: QREWRLSRegressor(10), (_TrapTransformer(),), 2),
}


@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
@pytest.mark.parametrize("trap", sorted(TRAPS))
@pytest.mark.parametrize("site", sorted(TRAP_SITES))
def test_pipeline_failure_inside_a_step_changes_nothing(site, trap, method):
    X, y = _data()
    make_final, middle, index = TRAP_SITES[site]
    pipe = _pipe(make_final(), middle).partial_fit(X[:100], y[:100])
    ref = _pipe(make_final(), middle).partial_fit(X[:100], y[:100])
    pipe.steps_[index][1].trap = trap
    before = pickle.dumps(pipe)
    with pytest.raises(TRAPS[trap]):
        getattr(pipe, method)(X[100:150], y[100:150])
    assert pickle.dumps(pipe) == before
    del pipe.steps_[index][1].trap
    for model in (pipe, ref):
        model.partial_fit(X[100:150], y[100:150])
    np.testing.assert_array_equal(_continue_pipe(pipe, X, y), _continue_pipe(ref, X, y))
    assert_same_state(pipe, ref)


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_pipeline_failed_fit_keeps_the_previous_stream(trap, monkeypatch):
    X, y = _data()
    pipe = _pipe(_Trap(10)).partial_fit(X[:100], y[:100])
    before = pickle.dumps(pipe)
    monkeypatch.setattr(_Trap, "countdown", [1, trap])
    with pytest.raises(TRAPS[trap]):
        pipe.fit(X[100:150], y[100:150])
    assert pickle.dumps(pipe) == before


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_pipeline_failed_first_call_leaves_it_unfitted(trap, monkeypatch):
    X, y = _data()
    pipe = _pipe(_Trap(10))
    before = pickle.dumps(pipe)
    monkeypatch.setattr(_Trap, "countdown", [1, trap])
    with pytest.raises(TRAPS[trap]):
        pipe.prequential_predict(X[:100], y[:100])
    assert pickle.dumps(pipe) == before
    assert "steps_" not in vars(pipe)


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_transformer_pipeline_prequential_transform_is_all_or_nothing(trap):
    X, _ = _data()
    chain = make_streaming_pipeline(LagTransformer(2), RecursiveStandardScaler(), _TrapTransformer())
    chain.prequential_transform(X[:100])
    ref = pickle.loads(pickle.dumps(chain))
    chain.steps_[-1][1].trap = trap
    before = pickle.dumps(chain)
    with pytest.raises(TRAPS[trap]):
        chain.prequential_transform(X[100:150])
    assert pickle.dumps(chain) == before
    del chain.steps_[-1][1].trap
    np.testing.assert_array_equal(
        chain.prequential_transform(X[100:150]), ref.prequential_transform(X[100:150])
    )
    assert_same_state(chain, ref)


def test_pipeline_interrupt_after_the_last_step_returned_is_never_half_a_call(monkeypatch):
    """An interrupt after the final step committed its update, before the pipeline call
    returns: the pipeline is then either exactly as before the call, or has learned the
    whole call (if the final step's committed update cannot be undone) — never the
    transformers without the final step, or the reverse."""
    import sklearn_orfit._pipeline as pipeline_module

    X, y = _data()
    pipe = _pipe().partial_fit(X[:100], y[:100])
    untouched = _pipe().partial_fit(X[:100], y[:100])
    learned = _pipe().partial_fit(X[:100], y[:100])
    learned.prequential_predict(X[100:150], y[100:150])
    real = pipeline_module._prequential_predict

    def interrupted(estimator, X, y):
        real(estimator, X, y)
        raise KeyboardInterrupt

    monkeypatch.setattr(pipeline_module, "_prequential_predict", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pipe.prequential_predict(X[100:150], y[100:150])
    monkeypatch.undo()
    seen = [step.n_samples_seen_ for _, step in pipe.steps_ if hasattr(step, "n_samples_seen_")]
    assert seen in ([100] * 3, [150] * 3), seen
    ref = untouched if seen[0] == 100 else learned
    assert_same_state(pipe, ref)
    if seen[0] == 100:
        pipe.partial_fit(X[100:150], y[100:150])
        ref.partial_fit(X[100:150], y[100:150])
    np.testing.assert_array_equal(_continue_pipe(pipe, X, y), _continue_pipe(ref, X, y))


# ---------------------------------------------------------------------- item 8: set_params
@pytest.mark.parametrize(
    "params, named",
    [
        ({"lagtransformer__n_lags": 5}, "lagtransformer__n_lags"),
        ({"qrewrlsregressor__window_size": 30}, "qrewrlsregressor__window_size"),
        ({"randomfourierfeatures__sigma": 2.0}, "randomfourierfeatures__sigma"),
        ({"qrewrlsregressor": QREWRLSRegressor(30)}, "qrewrlsregressor"),
        ({"lagtransformer": "passthrough"}, "lagtransformer"),
    ],
)
@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
def test_pipeline_set_params_mid_stream_is_refused_until_fit(params, named, method):
    X, y = _data()
    pipe = _pipe().partial_fit(X[:100], y[:100])
    fitted = pipe.steps_
    pipe.set_params(**params)
    before = pickle.dumps(pipe)
    with pytest.raises(ValueError, match=rf"{named}.*changed \(set_params\).*Call fit"):
        getattr(pipe, method)(X[100:150], y[100:150])
    assert pickle.dumps(pipe) == before and pipe.steps_ is fitted
    # fit starts a new stream that honours the change
    pipe.fit(X[:100], y[:100])
    expected = _pipe().set_params(**params).fit(X[:100], y[:100])
    np.testing.assert_array_equal(pipe.predict(X[100:120]), expected.predict(X[100:120]))
    getattr(pipe, method)(X[100:150], y[100:150])  # and continues it


@pytest.mark.parametrize("where", ["template", "fitted"])
def test_pipeline_set_params_on_a_step_directly_is_refused(where):
    X, y = _data()
    pipe = _pipe().partial_fit(X[:100], y[:100])
    # pipe.steps holds the templates; named_steps gives the fitted steps once fitted
    step = dict(pipe.steps)["lagtransformer"] if where == "template" else pipe.named_steps["lagtransformer"]
    step.set_params(n_lags=4)  # in place
    with pytest.raises(ValueError, match="n_lags"):
        pipe.partial_fit(X[100:150], y[100:150])
    step.set_params(n_lags=3)  # back as it was: fine
    pipe.partial_fit(X[100:150], y[100:150])


def test_pipeline_execution_params_are_honoured_mid_stream():
    X, y = _data()
    ens = FeaturePartitionEnsemble(RandomFourierFeatures(32, random_state=0), QREWRLSRegressor(10))
    pipe = make_streaming_pipeline(RecursiveStandardScaler(), ens).partial_fit(X[:100], y[:100])
    ref = make_streaming_pipeline(RecursiveStandardScaler(), clone(ens)).partial_fit(
        X[:100], y[:100]
    )
    pipe.set_params(featurepartitionensemble__n_jobs=2, verbose=True)
    assert pipe.named_steps_.featurepartitionensemble.n_jobs == 2  # the fitted step too
    with joblib.parallel_config(backend="threading"):
        got = pipe.prequential_predict(X[100:150], y[100:150])
    np.testing.assert_array_equal(got, ref.prequential_predict(X[100:150], y[100:150]))


def test_ensemble_set_params_mid_stream():
    X, y = _data()
    ens = _small_ensemble(estimator=QREWRLSRegressor(10)).partial_fit(X[:100], y[:100])
    before = pickle.dumps(ens.set_params(n_jobs=1))  # n_jobs is read at every call
    ens.set_params(estimator__window_size=30)
    with pytest.raises(ValueError, match=r"estimator__window_size changed.*Call fit"):
        ens.partial_fit(X[100:150], y[100:150])
    ens.set_params(estimator__window_size=10, n_partitions=2)
    with pytest.raises(ValueError, match=r"n_partitions changed"):
        ens.prequential_predict(X[100:150], y[100:150])
    ens.set_params(n_partitions=4)
    assert pickle.dumps(ens) == before
    ens.partial_fit(X[100:150], y[100:150])
    ens.set_params(n_partitions=2).fit(X[:100], y[:100])
    assert len(ens.estimators_) == 2


class _BrokenFittedCheck(RandomFourierFeatures):
    """A step whose fitted check fails with an unexpected error (a bug, an interruption)."""

    def __sklearn_is_fitted__(self):
        raise RuntimeError("fitted check failed")


def test_pipeline_does_not_swallow_errors_of_a_steps_fitted_check():
    X, y = _data()
    pipe = make_streaming_pipeline(_BrokenFittedCheck(16, random_state=0), QREWRLSRegressor(5))
    before = pickle.dumps(pipe)
    # it was taken for "not fitted": the step was fitted again, silently
    with pytest.raises(RuntimeError, match="fitted check failed"):
        pipe.partial_fit(X[:20], y[:20])
    assert pickle.dumps(pipe) == before
