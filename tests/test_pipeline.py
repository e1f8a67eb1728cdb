"""StreamingPipeline: partial_fit, prequential_predict, no look-ahead, sklearn checks."""

import copy
import inspect
import os
import pickle
import warnings

import joblib
import numpy as np
import pytest
import sklearn.pipeline
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import BaseEstimator, TransformerMixin, clone, is_regressor
from sklearn.decomposition import PCA
from sklearn.exceptions import NotFittedError
from sklearn.frozen import FrozenEstimator
from sklearn.linear_model import SGDRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.preprocessing import StandardScaler
from sklearn.utils.estimator_checks import parametrize_with_checks

import sklearn_orfit
from sklearn_orfit import (
    FeaturePartitionEnsemble,
    LagTransformer,
    ORFitRegressor,
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    StreamingPipeline,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit.exceptions import SpannedBatchWarning
from _hostile import TRAPS, Trap, interrupted_states, run_traced, spring
from _state import assert_same_state


def _rff(d=64, sigma=1.0):
    return RandomFourierFeatures(d, sigma=sigma, random_state=0)


# Every chain the package supports, by name (fresh instances each call).
CHAINS = {
    "rff-qrewrls": lambda: make_streaming_pipeline(_rff(), QREWRLSRegressor(window_size=8)),
    "rff-qrewrls-forget": lambda: make_streaming_pipeline(
        _rff(6), QREWRLSRegressor(window_size=10, forgetting_factor=0.9, alpha=1e-2)
    ),
    "scaler-rff-qrewrls": lambda: make_streaming_pipeline(
        RecursiveStandardScaler(), _rff(), QREWRLSRegressor(window_size=8)
    ),
    "lags-scaler-rff-qrewrls": lambda: make_streaming_pipeline(
        LagTransformer(3), RecursiveStandardScaler(), _rff(), QREWRLSRegressor(window_size=8)
    ),
    "rff-orfit": lambda: make_streaming_pipeline(_rff(128), ORFitRegressor(memory_size=10)),
    "sk-scaler-sgd": lambda: make_streaming_pipeline(
        StandardScaler(), SGDRegressor(random_state=0, learning_rate="constant", eta0=0.01)
    ),
    "scaler-sgd": lambda: make_streaming_pipeline(
        RecursiveStandardScaler(),
        SGDRegressor(random_state=0, learning_rate="constant", eta0=0.01),
    ),
    "scaler-givens": lambda: make_streaming_pipeline(
        RecursiveStandardScaler(), _rff(16), QREWRLSRegressor(window_size=6, solver="givens")
    ),
}


def _stream(n=60, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * [1.0, 3.0, 0.5][:d] + [0.0, 10.0, -2.0][:d]
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.05 * rng.normal(size=n)
    return X, y


def _hand_loop(pipe, X, y):
    """Predict-then-update with the public predict / partial_fit, one row at a time."""
    y_pred = np.zeros(len(y))
    for i in range(len(y)):
        if i > 0:
            y_pred[i] = pipe.predict(X[i : i + 1])[0]
        pipe.partial_fit(X[i : i + 1], y[i : i + 1])
    return y_pred


# ---------------------------------------------------------------------- sklearn checks
@parametrize_with_checks(
    [
        make_streaming_pipeline(_rff(32), QREWRLSRegressor(window_size=10)),
        make_streaming_pipeline(
            RecursiveStandardScaler(), _rff(32), QREWRLSRegressor(window_size=10)
        ),
        make_streaming_pipeline(RecursiveStandardScaler(), _rff(16)),
        make_streaming_pipeline(_rff(64), ORFitRegressor()),
        make_streaming_pipeline(StandardScaler(), SGDRegressor(random_state=0)),
    ]
)
# sklearn's StandardScaler warns on the NaN rows of check_estimators_nan_inf
@pytest.mark.filterwarnings(
    "ignore:invalid value encountered:RuntimeWarning:sklearn.utils.extmath"
)
@pytest.mark.filterwarnings("ignore::sklearn_orfit.exceptions.SpannedBatchWarning")
def test_sklearn_compatible(estimator, check):
    check(estimator)  # ORFit's spanned-batch warning is expected: more rows than features


# ---------------------------------------------------------------------- equivalences
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_prequential_predict_equals_hand_written_loop(chain):
    X, y = _stream()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        fast = CHAINS[chain]()
        y_fast = prequential_predict(fast, X, y)
        slow = CHAINS[chain]()
        y_slow = _hand_loop(slow, X, y)
    assert np.max(np.abs(y_fast - y_slow)) <= 1e-12 * max(1.0, np.max(np.abs(y_slow)))
    # both end in the same state
    X_new = _stream(5, seed=1)[0]
    np.testing.assert_allclose(fast.predict(X_new), slow.predict(X_new), rtol=1e-12, atol=1e-12)
    assert y_fast[0] == 0.0


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_prequential_predict_continues_across_calls(chain):
    X, y = _stream()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        whole = prequential_predict(CHAINS[chain](), X, y)
        pipe = CHAINS[chain]()
        parts = [prequential_predict(pipe, X[a:b], y[a:b]) for a, b in [(0, 1), (1, 25), (25, 60)]]
    np.testing.assert_allclose(np.concatenate(parts), whole, rtol=1e-12, atol=1e-12)


def test_transformer_chunk_learning_equals_row_by_row():
    X, y = _stream(40)
    a = make_streaming_pipeline(
        LagTransformer(2), RecursiveStandardScaler(), _rff(), QREWRLSRegressor(window_size=8)
    )
    b = clone(a)
    a.partial_fit(X, y)
    for i in range(len(y)):
        b.partial_fit(X[i : i + 1], y[i : i + 1])
    np.testing.assert_allclose(a.predict(X[:5]), b.predict(X[:5]), rtol=1e-12, atol=1e-12)


def test_predict_uses_the_features_prequential_predict_would_give():
    X, y = _stream(50)
    pipe = CHAINS["scaler-rff-qrewrls"]().fit(X[:40], y[:40])
    frozen = pipe.predict(X[40:41])
    assert prequential_predict(pipe, X[40:41], y[40:41])[0] == pytest.approx(frozen[0], abs=1e-14)


def test_fit_resets_and_equals_partial_fit_on_a_fresh_pipeline():
    X, y = _stream()
    a = CHAINS["scaler-rff-qrewrls"]().fit(X[:30], y[:30]).fit(X, y)
    b = CHAINS["scaler-rff-qrewrls"]().partial_fit(X, y)
    np.testing.assert_array_equal(a.predict(X[:7]), b.predict(X[:7]))
    assert a.named_steps_.qrewrlsregressor.n_samples_seen_ == len(y)


# ---------------------------------------------------------------------- no look-ahead
@settings(max_examples=8, deadline=None)
@given(cut=st.integers(0, 38), seed=st.integers(0, 2**16), scale=st.floats(0.01, 100.0))
@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_no_look_ahead(chain, cut, seed, scale):
    X, y = _stream(40, seed=seed % 7)
    rng = np.random.default_rng(seed)
    X2, y2 = X.copy(), y.copy()
    X2[cut + 1 :] += scale * rng.normal(size=X2[cut + 1 :].shape)
    y2[cut:] += scale * rng.normal(size=y2[cut:].shape)  # y[cut] itself too
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        a = prequential_predict(CHAINS[chain](), X, y)
        b = prequential_predict(CHAINS[chain](), X2, y2)
    np.testing.assert_array_equal(a[: cut + 1], b[: cut + 1])
    assert not np.array_equal(a[cut + 2 :], b[cut + 2 :]) or cut + 2 >= len(y)


def _make(cls, **params):
    """A default instance; a meta-estimator over experts gets two small ones."""
    if cls is sklearn_orfit.AggregatingRegressor:
        return cls([("short", sklearn_orfit.QREWRLSRegressor(5)),
                    ("ridge", sklearn_orfit.QREWRLSRegressor(10, alpha=0.1))], **params)
    return cls(**params)


def _package_regressors():
    out = []
    for name in sklearn_orfit.__all__:
        obj = getattr(sklearn_orfit, name)
        is_estimator = inspect.isclass(obj) and issubclass(obj, BaseEstimator)
        if (
            is_estimator
            and obj is not StreamingPipeline
            and is_regressor(_make(obj))
            and hasattr(obj, "partial_fit")
        ):
            out.append(obj)
    return out


@settings(max_examples=5, deadline=None)
@given(cut=st.integers(0, 28), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("cls", _package_regressors(), ids=lambda c: c.__name__)
def test_no_look_ahead_every_package_regressor(cls, cut, seed):
    X, y = _stream(30, seed=seed % 5)
    rng = np.random.default_rng(seed)
    X2, y2 = X.copy(), y.copy()
    X2[cut + 1 :] = rng.normal(size=X2[cut + 1 :].shape)
    y2[cut:] = rng.normal(size=y2[cut:].shape)
    # seeded, so that two runs differ only by the perturbation
    seeded = {"random_state": 0} if "random_state" in _make(cls).get_params() else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        a = prequential_predict(
            make_streaming_pipeline(RecursiveStandardScaler(), _make(cls, **seeded)), X, y
        )
        b = prequential_predict(
            make_streaming_pipeline(RecursiveStandardScaler(), _make(cls, **seeded)), X2, y2
        )
    np.testing.assert_array_equal(a[: cut + 1], b[: cut + 1])


# ---------------------------------------------------------------------- contract
def test_steps_are_not_modified_and_fitted_steps_are_exposed():
    X, y = _stream()
    reg = QREWRLSRegressor(window_size=8)
    pipe = make_streaming_pipeline(_rff(), reg)
    pipe.fit(X, y)
    assert not hasattr(reg, "coef_")
    assert pipe.named_steps_.qrewrlsregressor is pipe.steps_[-1][1]
    assert pipe.named_steps_.qrewrlsregressor.coef_.shape == (64,)
    assert pipe.n_features_in_ == 3


def test_unfitted_pipeline_refuses_to_predict():
    with pytest.raises(NotFittedError):
        make_streaming_pipeline(_rff(), QREWRLSRegressor()).predict(np.zeros((1, 3)))


def test_learning_does_not_modify_input_and_pickles_mid_stream():
    X, y = _stream()
    X0, y0 = X.copy(), y.copy()
    pipe = CHAINS["lags-scaler-rff-qrewrls"]()
    prequential_predict(pipe, X[:30], y[:30])
    np.testing.assert_array_equal(X, X0)
    np.testing.assert_array_equal(y, y0)
    restored = pickle.loads(pickle.dumps(pipe))
    twin = copy.deepcopy(pipe)
    a = prequential_predict(pipe, X[30:], y[30:])
    np.testing.assert_array_equal(a, prequential_predict(restored, X[30:], y[30:]))
    np.testing.assert_array_equal(a, prequential_predict(twin, X[30:], y[30:]))


def test_fixed_map_must_be_fitted_and_frozen_survives_clone():
    X, y = _stream()
    pca = PCA(2).fit(X)
    pipe = make_streaming_pipeline(FrozenEstimator(pca), QREWRLSRegressor(window_size=5))
    y_pred = prequential_predict(clone(pipe), X, y)
    expected = prequential_predict(QREWRLSRegressor(window_size=5), pca.transform(X), y)
    np.testing.assert_array_equal(y_pred, expected)
    with pytest.raises(ValueError, match="FrozenEstimator"):
        make_streaming_pipeline(PCA(2), QREWRLSRegressor()).fit(X, y)


def test_frozen_partial_fit_transformer_is_not_updated():
    X, y = _stream()
    scaler = StandardScaler().fit(X[:10])
    mean = scaler.mean_.copy()
    pipe = make_streaming_pipeline(FrozenEstimator(scaler), SGDRegressor(random_state=0))
    pipe.fit(X, y)
    np.testing.assert_array_equal(scaler.mean_, mean)


def test_final_estimator_without_partial_fit_is_rejected():
    from sklearn.linear_model import Ridge

    X, y = _stream()
    with pytest.raises(TypeError, match="partial_fit"):
        make_streaming_pipeline(_rff(), Ridge()).fit(X, y)


def test_nested_in_grid_search_sets_step_parameters():
    X, y = _stream(80)
    pipe = make_streaming_pipeline(_rff(), QREWRLSRegressor())
    search = GridSearchCV(
        pipe,
        {"randomfourierfeatures__sigma": [0.5, 1.0], "qrewrlsregressor__window_size": [5, 10]},
        cv=2,
    ).fit(X, y)
    best = search.best_estimator_.named_steps_
    assert best.randomfourierfeatures.sigma in (0.5, 1.0)
    assert best.qrewrlsregressor.window_size in (5, 10)
    assert len(search.cv_results_["params"]) == 4


def test_transformer_only_pipeline_is_a_streaming_step():
    X, y = _stream()
    inner = make_streaming_pipeline(LagTransformer(2), RecursiveStandardScaler())
    outer = make_streaming_pipeline(inner, _rff(), QREWRLSRegressor(window_size=8))
    flat = make_streaming_pipeline(
        LagTransformer(2), RecursiveStandardScaler(), _rff(), QREWRLSRegressor(window_size=8)
    )
    np.testing.assert_array_equal(
        prequential_predict(outer, X, y), prequential_predict(flat, X, y)
    )


def test_slicing_an_unfitted_pipeline_gives_template_pipeline():
    pipe = make_streaming_pipeline(RecursiveStandardScaler(), _rff(), QREWRLSRegressor())
    head = pipe[:2]
    assert isinstance(head, StreamingPipeline) and len(head) == 2
    assert pipe[-1] is pipe.steps[-1][1] and pipe.named_steps["qrewrlsregressor"] is pipe[-1]
    with pytest.raises(NotFittedError):
        head.transform(_stream()[0])


def test_indexing_and_named_steps_give_the_fitted_steps_like_pipeline():
    X, y = _stream()
    pipe = CHAINS["lags-scaler-rff-qrewrls"]()
    templates = [step for _, step in pipe.steps]
    pipe.fit(X[:40], y[:40])
    # the fitted steps, as sklearn.pipeline.Pipeline gives them
    assert [step for _, step in pipe.steps] == templates  # steps keeps the templates
    assert pipe[-1] is pipe.steps_[-1][1] and pipe[0] is pipe.steps_[0][1]
    assert pipe["randomfourierfeatures"] is pipe.steps_[2][1]
    assert pipe.named_steps["qrewrlsregressor"].coef_.shape == (64,)
    assert pipe.named_steps.qrewrlsregressor is pipe.named_steps_.qrewrlsregressor
    assert not hasattr(templates[-1], "coef_")
    # a slice of a fitted pipeline is fitted: its transform applies the fitted steps
    head = pipe[:-1]
    assert isinstance(head, StreamingPipeline) and len(head) == 3
    assert [s for _, s in head.steps] == templates[:-1]
    np.testing.assert_array_equal(
        head.transform(X[40:]), sklearn.pipeline.Pipeline(pipe.steps_[:-1]).transform(X[40:])
    )
    np.testing.assert_array_equal(
        pipe[-1].predict(pipe[:-1].transform(X[40:])), pipe.predict(X[40:])
    )
    assert not hasattr(clone(head), "steps_")  # clone: the templates, unfitted
    # a slice continues the stream of the steps it shares, with the same checks
    Xt = head.prequential_transform(X[40:45])
    assert Xt.shape == (5, 64)
    assert pipe.named_steps_.lagtransformer.n_samples_seen_ == 45
    head.set_params(recursivestandardscaler__with_mean=False)
    with pytest.raises(ValueError, match="recursivestandardscaler__with_mean.*Call fit"):
        head.prequential_transform(X[45:50])


def test_set_params_on_a_fitted_step_is_refused_until_set_back_or_fit():
    X, y = _stream()
    pipe = CHAINS["scaler-rff-qrewrls"]().fit(X[:30], y[:30])
    pipe.named_steps["qrewrlsregressor"].set_params(window_size=3)  # the fitted step
    before = pickle.dumps(pipe)
    for learn in (pipe.partial_fit, pipe.prequential_predict):
        with pytest.raises(ValueError, match="qrewrlsregressor__window_size.*fitted step"):
            learn(X[30:40], y[30:40])
        assert pickle.dumps(pipe) == before
    pipe.named_steps["qrewrlsregressor"].set_params(window_size=8)  # back as it was
    ref = CHAINS["scaler-rff-qrewrls"]().fit(X[:30], y[:30])
    np.testing.assert_array_equal(
        pipe.prequential_predict(X[30:40], y[30:40]), ref.prequential_predict(X[30:40], y[30:40])
    )
    pipe.named_steps["qrewrlsregressor"].set_params(window_size=3)
    pipe.fit(X[:30], y[:30])  # a new stream, from the templates
    assert pipe.named_steps["qrewrlsregressor"].window_size == 8


def _pandas_chain():
    return make_streaming_pipeline(
        LagTransformer(2), StandardScaler(), RecursiveStandardScaler(), _rff(16),
        QREWRLSRegressor(window_size=8),
    )


@pytest.mark.parametrize("when", ["before fit", "after fit, then refit"])
def test_set_output_pandas_carries_feature_names_through_every_step(when):
    pd = pytest.importorskip("pandas")
    X, y = _stream()
    df = pd.DataFrame(X, columns=["a", "b", "c"])
    ref = _pandas_chain().fit(X[:40], y[:40])
    pipe = _pandas_chain()
    if when != "before fit":
        pipe.fit(X[:40], y[:40]).set_output(transform="pandas")
        # the fitted steps are configured too (their columns come out named)
        assert isinstance(pipe.named_steps["lagtransformer"].transform(X[:3]), pd.DataFrame)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "X has feature names, but ... without" and others
        if when == "before fit":
            pipe.set_output(transform="pandas")
        pipe.fit(df[:40], y[:40])
        np.testing.assert_array_equal(pipe.predict(df[40:50]), ref.predict(X[40:50]))
        Xt = pipe[:-1].transform(df[40:50])
        assert isinstance(Xt, pd.DataFrame) and list(Xt.index) == list(df.index[40:50])
        assert list(Xt.columns) == [f"randomfourierfeatures{i}" for i in range(16)]
        np.testing.assert_array_equal(
            pipe.prequential_predict(df[50:], y[50:]), ref.prequential_predict(X[50:], y[50:])
        )
    assert list(pipe.feature_names_in_) == ["a", "b", "c"]
    # each step learned under the names of its input
    names = pipe.named_steps["recursivestandardscaler"].feature_names_in_
    assert list(names) == ["a_lag1", "b_lag1", "c_lag1", "a_lag2", "b_lag2", "c_lag2"]
    assert list(pipe[-1].feature_names_in_) == list(Xt.columns)


def test_bad_targets_are_rejected_before_any_step_learns():
    X, y = _stream()
    pipe = CHAINS["scaler-rff-qrewrls"]().partial_fit(X[:10], y[:10])
    state = pipe.named_steps_.recursivestandardscaler.n_samples_seen_
    y_bad = y[10:20].copy()
    y_bad[3] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        pipe.partial_fit(X[10:20], y_bad)
    with pytest.raises(ValueError):
        prequential_predict(pipe, X[10:20], y[10:19])
    assert pipe.named_steps_.recursivestandardscaler.n_samples_seen_ == state


# ------------------------------------------------------------------ hostile inputs
# Every learning call is all-or-nothing: a bad y, an exception or a KeyboardInterrupt
# raised while one step learns leaves the pipeline exactly as it was, and the stream
# then continues bit for bit as an untouched pipeline's. set_params mid-stream is
# honoured or refused with a clear ValueError, never silently ignored.


def _data(n=400, d=4, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    y = np.sin(X[:, 0]) + 0.1 * rng.standard_normal(n)
    return X, y


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


# a bad y (NaN, strings, a wrong shape, ...) in partial_fit or prequential_predict:
# tests/test_contracts.py::test_bad_targets_get_a_clear_error (both pipelines there)
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
        spring(self.__dict__.get("trap"))
        self.sum_ = getattr(self, "sum_", 0.0) + X.sum(axis=0)
        self.n_features_in_ = X.shape[1]

    def transform(self, X):
        return np.asarray(X, dtype=np.float64) - self.sum_ / 1000.0


class _TornSGD(SGDRegressor):
    """A foreign final estimator that is not all-or-nothing: it learns, then raises."""

    def partial_fit(self, X, y, **params):
        super().partial_fit(X, y, **params)
        spring(self.__dict__.get("trap"))
        return self


TRAP_SITES = {
    # (final step template, middle steps, index in steps_ of the trapped step)
    "final step (atomic)": (lambda: Trap(10), (), -1),
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
    assert_same_state(pipe, ref, params=False)


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_pipeline_failed_fit_keeps_the_previous_stream(trap, monkeypatch):
    X, y = _data()
    pipe = _pipe(Trap(10)).partial_fit(X[:100], y[:100])
    before = pickle.dumps(pipe)
    monkeypatch.setattr(Trap, "countdown", [1, trap])
    with pytest.raises(TRAPS[trap]):
        pipe.fit(X[100:150], y[100:150])
    assert pickle.dumps(pipe) == before


@pytest.mark.parametrize("trap", sorted(TRAPS))
def test_pipeline_failed_first_call_leaves_it_unfitted(trap, monkeypatch):
    X, y = _data()
    pipe = _pipe(Trap(10))
    before = pickle.dumps(pipe)
    monkeypatch.setattr(Trap, "countdown", [1, trap])
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
    assert_same_state(chain, ref, params=False)


def test_pipeline_interrupt_after_the_last_step_returned_is_never_half_a_call(monkeypatch):
    """An interrupt after the final step committed its update, before the pipeline call
    returns: the final step's update is undone with the call (its transaction is nested
    in the pipeline's), so the pipeline is exactly as before the call — never the
    transformers without the final step, or the reverse."""
    X, y = _data()
    pipe = _pipe().partial_fit(X[:100], y[:100])
    untouched = _pipe().partial_fit(X[:100], y[:100])
    real = QREWRLSRegressor.prequential_predict

    def interrupted(estimator, X, y, **kwargs):
        real(estimator, X, y, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(QREWRLSRegressor, "prequential_predict", interrupted)
    with pytest.raises(KeyboardInterrupt):
        pipe.prequential_predict(X[100:150], y[100:150])
    monkeypatch.undo()
    seen = [step.n_samples_seen_ for _, step in pipe.steps_ if hasattr(step, "n_samples_seen_")]
    assert seen == [100] * 3, seen
    assert_same_state(pipe, untouched, params=False)
    pipe.partial_fit(X[100:150], y[100:150])
    untouched.partial_fit(X[100:150], y[100:150])
    np.testing.assert_array_equal(_continue_pipe(pipe, X, y), _continue_pipe(untouched, X, y))


@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
def test_pipeline_with_foreign_steps_interrupted_anywhere_changes_nothing(method):
    """scikit-learn steps have no transaction of their own: the pipeline restores them
    from copies, within its one transaction. Interrupted at any line of the package,
    the pipeline is as before the call (or, on the way out after the commit, after it)."""
    package = os.path.dirname(sklearn_orfit.__file__)
    X, y = _data()
    base = make_streaming_pipeline(
        StandardScaler(), RecursiveStandardScaler(), SGDRegressor(random_state=0)
    ).partial_fit(X[:30], y[:30])
    before = pickle.dumps(base)
    ref = copy.deepcopy(base)
    getattr(ref, method)(X[30:40], y[30:40])
    after = pickle.dumps(ref)

    def call(est):
        return lambda: getattr(est, method)(X[30:40], y[30:40])

    n_lines = run_traced(call(copy.deepcopy(base)), -1, None, package)
    points = range(1, n_lines + 1, 7)
    # KeyboardInterrupt only: a RuntimeError injected into the parameter comparison
    # (_same_value) reads as a comparison that failed, which refuses the call unchanged
    for k, _, state in interrupted_states(base, call, points, package, (KeyboardInterrupt,)):
        assert state in (before, after), f"interrupted at line {k}"


# set_params mid-stream
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
