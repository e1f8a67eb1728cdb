"""StreamingTransformedTargetRegressor: a target standardised without look-ahead.

The oracle is a from-scratch loop: for each row, the mean and standard deviation of the
targets before it (numpy), a fresh inner model fed one row at a time, predict then learn.
"""

import copy
import os
import pickle

import joblib
import numpy as np
import pytest
from sklearn.base import clone
from sklearn.compose import TransformedTargetRegressor
from sklearn.exceptions import NotFittedError
from sklearn.linear_model import LinearRegression, SGDRegressor
from sklearn.model_selection import GridSearchCV
from sklearn.utils._param_validation import InvalidParameterError
from sklearn.utils.estimator_checks import parametrize_with_checks

import sklearn_orfit as so
from _hostile import interrupted_states, run_traced
from _state import assert_same_state
from sklearn_orfit._streaming._base import expected_failed_checks
from sklearn_orfit import (
    QREWRLSRegressor,
    RecursiveStandardScaler,
    StreamingTransformedTargetRegressor,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit.model_selection import PrequentialSplit, make_prequential_scorer

PKG_DIR = os.path.dirname(so.__file__)
STT = StreamingTransformedTargetRegressor


def stream(n=80, d=3, k=None, seed=0, level=3.0, unit=2.0):
    """Rows and targets with a level and a unit (so that standardising matters)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = rng.normal(size=(d,) if k is None else (d, k))
    y = level + unit * (np.sin(X @ W) + 0.1 * rng.normal(size=(n,) if k is None else (n, k)))
    return X, y


def _sgd():
    return SGDRegressor(random_state=0, shuffle=False, learning_rate="constant", eta0=0.01)


def oracle(make_inner, X, y, *, delay=0, with_mean=True, with_std=True):
    """ŷ[i] from a fresh inner model that has learned rows < i − delay, one at a time,
    each with its target standardised by numpy's mean/std of the targets before it (the
    first two rows, which have no standard deviation, with z = 0 when with_std), then
    mapped back with the mean/std of the rows it has learned."""
    Y = np.asarray(y, dtype=float).reshape(len(y), -1)
    n, k = Y.shape
    inner = make_inner()

    def stats(m):  # of Y[:m]
        if m == 0:
            return np.zeros(k), np.ones(k)
        mean = Y[:m].mean(axis=0) if with_mean else np.zeros(k)
        std = Y[:m].std(axis=0)
        scale = np.where(std > 1e-12 * np.abs(Y[:m]).max(axis=0), std, 1.0)
        return mean, scale if with_std else np.ones(k)

    def z(j):
        if with_std and j < 2:
            return np.zeros(k)
        mean, scale = stats(j)
        if j == 0:  # no past: the row's own mean
            mean = Y[0] if with_mean else np.zeros(k)
        return (Y[j] - mean) / scale

    learned = 0
    out = np.zeros((n, k))
    for i in range(n):
        while learned < i - delay:
            zj = z(learned)
            inner.partial_fit(X[learned : learned + 1], zj[None, :] if y.ndim == 2 else zj[:1])
            learned += 1
        if learned:
            mean, scale = stats(learned)
            p = np.asarray(inner.predict(X[i : i + 1])).reshape(k)
            out[i] = mean + scale * p
    return out if y.ndim == 2 else out[:, 0]


def loop(est, X, y):
    """Predict then learn, one row at a time, through the public methods."""
    out = []
    for i in range(X.shape[0]):
        try:
            out.append(est.predict(X[i : i + 1])[0])
        except NotFittedError:
            out.append(np.zeros(y.shape[1:]))
        est.partial_fit(X[i : i + 1], y[i : i + 1])
    return np.array(out)


# ---------------------------------------------------------------------- semantics
@pytest.mark.parametrize("with_mean, with_std", [(True, True), (True, False), (False, True),
                                                 (False, False)])
@pytest.mark.parametrize("k", [None, 2])
def test_prequential_predict_matches_the_from_scratch_oracle(with_mean, with_std, k):
    X, y = stream(k=k)
    make = lambda: QREWRLSRegressor(window_size=6, alpha=1e-3)  # noqa: E731
    expected = oracle(make, X, y, with_mean=with_mean, with_std=with_std)
    est = STT(make(), with_mean=with_mean, with_std=with_std)
    # in chunks of every size: the same stream
    got = np.concatenate([est.prequential_predict(X[a:b], y[a:b])
                          for a, b in [(0, 1), (1, 2), (2, 7), (7, 40), (40, 80)]])
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    assert got.shape == y.shape
    one_call = STT(make(), with_mean=with_mean, with_std=with_std).prequential_predict(X, y)
    np.testing.assert_allclose(one_call, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("k", [None, 3])
def test_vectorised_pass_equals_predict_then_learn_loop(k):
    X, y = stream(n=60, k=k, seed=1)
    est = STT(QREWRLSRegressor(window_size=8))
    got = est.prequential_predict(X, y)
    ref = STT(QREWRLSRegressor(window_size=8))
    expected = loop(ref, X, y)
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-12)
    assert got[0] == pytest.approx(0.0)  # nothing learned before the first row
    # and both end in the same state
    np.testing.assert_allclose(est.predict(X[:5]), ref.predict(X[:5]), rtol=1e-10)
    np.testing.assert_allclose(est.transformer_.mean_, np.mean(y, axis=0).reshape(-1))
    np.testing.assert_allclose(est.transformer_.scale_, np.std(y, axis=0).reshape(-1))
    assert est.n_samples_seen_ == ref.n_samples_seen_ == 60


def test_targets_are_standardised_with_the_past_only():
    X, y = stream(n=12)
    est = STT(QREWRLSRegressor(window_size=50)).fit(X, y)
    # the inner model interpolates (D < N rows): it reproduces the targets it learned
    inner = QREWRLSRegressor(window_size=50).fit(
        X, [0.0, 0.0] + [(y[i] - y[:i].mean()) / y[:i].std() for i in range(2, 12)]
    )
    np.testing.assert_allclose(est.regressor_.coef_, inner.coef_, rtol=1e-10, atol=1e-12)


def test_no_look_ahead():
    X, y = stream(n=50)
    base = STT(QREWRLSRegressor(window_size=5)).prequential_predict(X, y)
    for t in (0, 1, 2, 17, 48):
        X2, y2 = X.copy(), y.copy()
        X2[t + 1 :] += 5.0
        y2[t:] *= -1e3  # the target of row t is not known when it is predicted
        got = STT(QREWRLSRegressor(window_size=5)).prequential_predict(X2, y2)
        np.testing.assert_array_equal(got[: t + 1], base[: t + 1])


def test_fit_is_reset_then_partial_fit():
    X, y = stream()
    a = STT().fit(X[:30], y[:30]).fit(X, y)
    b = STT()
    for s in range(0, 80, 9):
        b.partial_fit(X[s : s + 9], y[s : s + 9])
    np.testing.assert_allclose(a.predict(X), b.predict(X), rtol=1e-10)
    assert a.n_samples_seen_ == 80
    assert isinstance(a.regressor_, QREWRLSRegressor)  # regressor=None
    assert isinstance(a.transformer_, RecursiveStandardScaler)


def test_predict_maps_back_with_the_current_statistics():
    X, y = stream()
    est = STT(QREWRLSRegressor(window_size=10)).fit(X, y)
    z = est.regressor_.predict(X)
    np.testing.assert_allclose(est.predict(X), np.mean(y) + np.std(y) * z, rtol=1e-12)


# ---------------------------------------------------------------------- delayed labels
@pytest.mark.parametrize("delay", [1, 3, 100])
@pytest.mark.parametrize("inner", ["qrewrls", "sgd"])
@pytest.mark.parametrize("k", [None, 2])
def test_delayed_labels_match_the_oracle(delay, inner, k):
    if inner == "sgd" and k:
        pytest.skip("SGDRegressor: one target")
    make = {"qrewrls": lambda: QREWRLSRegressor(window_size=6, alpha=1e-3), "sgd": _sgd}[inner]
    X, y = stream(n=40, k=k)
    expected = oracle(make, X, y, delay=delay)
    est = STT(make())
    got = est.prequential_predict(X, y, delay=delay)
    np.testing.assert_allclose(got, expected, rtol=1e-9, atol=1e-9)
    # every row learned on return, as a partial_fit of the same rows
    ref = STT(make()).partial_fit(X, y) if inner == "qrewrls" else None
    assert est.n_samples_seen_ == 40
    if ref is not None:
        np.testing.assert_allclose(est.predict(X[:5]), ref.predict(X[:5]), rtol=1e-9)


def test_delayed_labels_continue_a_stream():
    X, y = stream(n=50)
    make = lambda: QREWRLSRegressor(window_size=6)  # noqa: E731
    est = STT(make()).fit(X[:20], y[:20])
    got = est.prequential_predict(X[20:], y[20:], delay=4)
    # rows of earlier calls are all learned: the state of row 20 + i has learned < 20 + i − 4
    full = oracle(make, X, y, delay=4)
    np.testing.assert_allclose(got[4:], full[24:], rtol=1e-9, atol=1e-9)
    prefix = STT(make()).fit(X[:20], y[:20]).predict(X[20:24])
    np.testing.assert_allclose(got[:4], prefix, rtol=1e-12)


@pytest.mark.parametrize("delay", [-1, 1.5, True, "2"])
def test_bad_delay_is_refused(delay):
    X, y = stream()
    est = STT().fit(X[:10], y[:10])
    before = pickle.dumps(est)
    with pytest.raises(ValueError, match="delay"):
        est.prequential_predict(X[10:], y[10:], delay=delay)
    assert pickle.dumps(est) == before


# ---------------------------------------------------------------------- the package's tools
def test_package_prequential_predict_takes_the_vectorised_path():
    X, y = stream()
    a = prequential_predict(STT(QREWRLSRegressor(window_size=7)), X, y)
    b = STT(QREWRLSRegressor(window_size=7)).prequential_predict(X, y)
    np.testing.assert_array_equal(a, b)
    a = prequential_predict(STT(QREWRLSRegressor(window_size=7)), X, y, delay=2)
    b = STT(QREWRLSRegressor(window_size=7)).prequential_predict(X, y, delay=2)
    np.testing.assert_array_equal(a, b)


def test_sklearn_transformed_target_regressor_cannot_stream():
    # the reason for this class: no partial_fit, so no prequential evaluation
    X, y = stream()
    with pytest.raises(AttributeError):
        prequential_predict(TransformedTargetRegressor(QREWRLSRegressor()), X, y)


def test_grid_search_with_prequential_scorer_gives_finite_scores():
    X, y = stream(n=200, level=1e4, unit=50.0)
    search = GridSearchCV(
        STT(QREWRLSRegressor()),
        {"regressor__window_size": [5, 20], "with_std": [True, False]},
        cv=PrequentialSplit(3, test_size=40, warmup_size=20),
        scoring=make_prequential_scorer("mse"),
        error_score="raise",
    )
    search.fit(X, y)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all() and (scores < 0).all()
    assert search.best_estimator_.n_samples_seen_ == 200
    # the score is the prequential MSE of the fold after the warm-up block
    cv = PrequentialSplit(3, test_size=40, warmup_size=20)
    train, test = next(iter(cv.split(X)))
    est = STT(QREWRLSRegressor(window_size=5)).fit(X[train], y[train])
    mse = np.mean((y[test] - est.prequential_predict(X[test], y[test])) ** 2)
    assert search.cv_results_["split0_test_score"][0] == pytest.approx(-mse, rel=1e-12)


def test_grid_search_with_delayed_labels():
    X, y = stream(n=200, level=-50.0, unit=1e-3)
    cv = PrequentialSplit(3, test_size=40, warmup_size=20, delay=3)
    search = GridSearchCV(
        STT(QREWRLSRegressor()), {"regressor__window_size": [5, 20]}, cv=cv,
        scoring=make_prequential_scorer("mse", delay=3), error_score="raise",
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_memory_mapped_model_continues_the_stream(tmp_path):
    X, y = stream()
    est = STT(QREWRLSRegressor(window_size=6)).fit(X[:40], y[:40])
    joblib.dump(est, tmp_path / "model.joblib")
    loaded = joblib.load(tmp_path / "model.joblib", mmap_mode="r")
    got = loaded.prequential_predict(X[40:], y[40:])
    np.testing.assert_array_equal(got, est.prequential_predict(X[40:], y[40:]))
    np.testing.assert_array_equal(loaded.predict(X), est.predict(X))


def test_final_step_of_a_streaming_pipeline():
    X, y = stream()
    pipe = make_streaming_pipeline(RecursiveStandardScaler(),
                                   STT(QREWRLSRegressor(window_size=6)))
    got = prequential_predict(pipe, X, y)
    Xs = RecursiveStandardScaler().prequential_transform(X)
    expected = STT(QREWRLSRegressor(window_size=6)).prequential_predict(Xs, y)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


# ---------------------------------------------------------------------- all or nothing
class _Failing(QREWRLSRegressor):
    """Learns, then raises ``fail`` (a class switch, not a parameter) from the package's
    update, after the solver wrote."""

    fail = None

    def _learn(self, X, Y, *, predict, **options):
        out = super()._learn(X, Y, predict=predict, **options)
        if type(self).fail is not None:
            raise type(self).fail
        return out


class _FailingSGD(SGDRegressor):
    """Not all-or-nothing: changes its coefficients, then raises."""

    def partial_fit(self, X, y, sample_weight=None):
        super().partial_fit(X, y, sample_weight)
        if getattr(self, "fail_", False):
            raise KeyboardInterrupt
        return self


@pytest.mark.parametrize("call", ["partial_fit", "prequential_predict", "delayed", "fit"])
@pytest.mark.parametrize("exc", [RuntimeError("boom"), KeyboardInterrupt()])
def test_failure_inside_the_regressor_changes_nothing(call, exc, monkeypatch):
    X, y = stream()
    est = STT(_Failing(6)).fit(X[:30], y[:30])
    before = pickle.dumps(est)
    monkeypatch.setattr(_Failing, "fail", exc)
    run = {
        "partial_fit": lambda: est.partial_fit(X[30:], y[30:]),
        "prequential_predict": lambda: est.prequential_predict(X[30:], y[30:]),
        "delayed": lambda: est.prequential_predict(X[30:], y[30:], delay=2),
        "fit": lambda: est.fit(X, y),
    }[call]
    with pytest.raises(type(exc)):
        run()
    assert pickle.dumps(est) == before
    monkeypatch.setattr(_Failing, "fail", None)
    ref = STT(_Failing(6)).fit(X[:30], y[:30])
    np.testing.assert_array_equal(est.prequential_predict(X[30:], y[30:]),
                                  ref.prequential_predict(X[30:], y[30:]))


@pytest.mark.parametrize("call", ["partial_fit", "prequential_predict", "delayed"])
def test_interrupted_regressor_without_its_own_rollback_is_restored(call):
    X, y = stream()
    est = STT(_FailingSGD(random_state=0)).fit(X[:30], y[:30])
    before = pickle.dumps(est)
    est.regressor_.fail_ = True
    run = {
        "partial_fit": lambda: est.partial_fit(X[30:], y[30:]),
        "prequential_predict": lambda: est.prequential_predict(X[30:], y[30:]),
        "delayed": lambda: est.prequential_predict(X[30:], y[30:], delay=2),
    }[call]
    with pytest.raises(KeyboardInterrupt):
        run()
    assert est.regressor_.fail_ is True  # the state before the call, flag included
    del est.regressor_.fail_
    assert pickle.dumps(est) == before


@pytest.mark.parametrize(
    "bad",
    ["nan_y", "inf_x", "wrong_features", "wrong_targets", "1d_x", "rows", "string_y", "empty"],
)
@pytest.mark.parametrize("method", ["partial_fit", "prequential_predict"])
def test_rejected_input_changes_nothing(bad, method):
    X, y = stream()
    est = STT(QREWRLSRegressor(window_size=6)).fit(X[:30], y[:30])
    Xb, yb = X[30:40].copy(), y[30:40].copy()
    if bad == "nan_y":
        yb[4] = np.nan
    elif bad == "inf_x":
        Xb[7, 1] = np.inf
    elif bad == "wrong_features":
        Xb = Xb[:, :2]
    elif bad == "wrong_targets":
        yb = np.column_stack([yb, yb])
    elif bad == "1d_x":
        Xb = Xb[:, 0]
    elif bad == "rows":
        yb = yb[:-1]
    elif bad == "string_y":
        yb = np.array(["a"] * 10)
    else:
        Xb, yb = Xb[:0], yb[:0]
    before = pickle.dumps(est)
    with pytest.raises(ValueError):
        getattr(est, method)(Xb, yb)
    assert pickle.dumps(est) == before
    # and the stream goes on as if the call never happened
    ref = STT(QREWRLSRegressor(window_size=6)).fit(X[:30], y[:30])
    np.testing.assert_array_equal(getattr(est, method)(X[30:], y[30:]) if method != "partial_fit"
                                  else est.partial_fit(X[30:], y[30:]).predict(X),
                                  getattr(ref, method)(X[30:], y[30:]) if method != "partial_fit"
                                  else ref.partial_fit(X[30:], y[30:]).predict(X))


def test_failing_fit_keeps_the_previous_stream():
    X, y = stream()
    est = STT().fit(X[:30], y[:30])
    before = pickle.dumps(est)
    with pytest.raises(ValueError):
        est.fit(X[:, :2], np.full(80, np.nan))
    assert pickle.dumps(est) == before


def test_failing_first_call_leaves_it_unfitted():
    X, y = stream()
    est = STT()
    with pytest.raises(ValueError):
        est.partial_fit(X, np.full(80, np.nan))
    assert set(vars(est)) - {"_stream_lock"} == set(vars(STT()))
    with pytest.raises(NotFittedError):
        est.predict(X)


@pytest.mark.parametrize("call", ["partial_fit", "prequential_predict", "delayed"])
@pytest.mark.parametrize("inner", ["qrewrls", "sgd"])
def test_interrupted_at_any_line_is_all_or_nothing(call, inner):
    """An exception or KeyboardInterrupt at any line the package runs during the call:
    the state is the one before the call (or after it, if it came after the commit), and
    the stream then continues bit-identically (SGDRegressor: restored from a copy)."""
    X, y = stream(n=60)
    make = {"qrewrls": lambda: QREWRLSRegressor(window_size=8), "sgd": _sgd}[inner]
    base = STT(make()).fit(X[:30], y[:30])
    make = {
        "partial_fit": lambda est: lambda: est.partial_fit(X[30:45], y[30:45]),
        "prequential_predict": lambda est: lambda: est.prequential_predict(X[30:45], y[30:45]),
        "delayed": lambda est: lambda: est.prequential_predict(X[30:45], y[30:45], delay=3),
    }[call]
    before = pickle.dumps(base)
    ref = copy.deepcopy(base)
    make(ref)()
    after = pickle.dumps(ref)
    expected = ref.partial_fit(X[45:], y[45:]).predict(X[:6])
    n_lines = min(run_traced(make(copy.deepcopy(base)), -1, None, PKG_DIR) for _ in range(2))
    points = sorted({1, 2, 3, n_lines - 1, n_lines,
                     *np.linspace(1, n_lines, 14).astype(int)})
    for k, est, state in interrupted_states(base, make, points, PKG_DIR):
        assert state in (before, after), f"interrupted at line {k}: a state in between"
        if state == before:
            make(est)()
        np.testing.assert_array_equal(est.partial_fit(X[45:], y[45:]).predict(X[:6]),
                                      expected, err_msg=f"line {k}")


# ---------------------------------------------------------------------- pickling, params
@pytest.mark.parametrize("k", [None, 2])
def test_pickled_mid_stream_continues_as_never_stopped(k):
    X, y = stream(k=k)
    a = STT(QREWRLSRegressor(window_size=6))
    a.prequential_predict(X[:33], y[:33])
    b = pickle.loads(pickle.dumps(a))
    pa = a.prequential_predict(X[33:], y[33:])
    pb = b.prequential_predict(X[33:], y[33:])
    np.testing.assert_array_equal(pa, pb)
    # (pickle bytes differ by the memo of interned strings: compare the states)
    assert_same_state(a.regressor_, b.regressor_)
    assert_same_state(a.transformer_, b.transformer_)
    assert a.n_samples_seen_ == b.n_samples_seen_ == 80
    c = STT(QREWRLSRegressor(window_size=6))  # never stopped
    c.prequential_predict(X[:33], y[:33])
    np.testing.assert_array_equal(c.prequential_predict(X[33:], y[33:]), pa)


@pytest.mark.parametrize(
    "params",
    [{"with_mean": False}, {"with_std": False}, {"regressor": QREWRLSRegressor(5)},
     {"regressor__window_size": 7}],
)
def test_set_params_mid_stream_is_refused_until_fit(params):
    X, y = stream()
    est = STT(QREWRLSRegressor(window_size=6)).fit(X[:30], y[:30])
    est.set_params(**params)
    before = pickle.dumps(est)
    for call in (lambda: est.partial_fit(X[30:], y[30:]),
                 lambda: est.prequential_predict(X[30:], y[30:]),
                 lambda: est.prequential_predict(X[30:], y[30:], delay=2)):
        with pytest.raises(ValueError, match="Call fit"):
            call()
        assert pickle.dumps(est) == before
    est.predict(X)  # applying is not learning
    est.fit(X, y)  # a new stream with the new parameters
    ref = STT(QREWRLSRegressor(window_size=6)).set_params(**params).fit(X, y)
    np.testing.assert_allclose(est.predict(X), ref.predict(X), rtol=1e-12)


def test_set_params_on_the_fitted_regressor_is_refused():
    X, y = stream()
    est = STT(QREWRLSRegressor(window_size=6)).fit(X[:30], y[:30])
    est.regressor_.set_params(window_size=3)
    with pytest.raises(ValueError, match="fit"):
        est.partial_fit(X[30:], y[30:])
    est.regressor_.set_params(window_size=6)  # set back: the stream goes on
    est.partial_fit(X[30:], y[30:])


def test_regressor_is_validated_and_never_modified():
    X, y = stream()
    with pytest.raises(InvalidParameterError, match="regressor"):
        STT(LinearRegression()).fit(X, y)
    template = QREWRLSRegressor(window_size=6)
    est = STT(template).fit(X, y)
    assert est.regressor_ is not template and not hasattr(template, "coef_")
    assert clone(est).get_params()["regressor"].window_size == 6


# ---------------------------------------------------------------------- scale
@pytest.mark.parametrize("scale", [2.0**500, 2.0**-500, 1e150, 1e-150, 1e300])
@pytest.mark.parametrize("k", [None, 2])
def test_targets_at_extreme_scales_scale_the_predictions(scale, k):
    X, y = stream(k=k)
    make = lambda: QREWRLSRegressor(window_size=6)  # noqa: E731
    ref = STT(make()).prequential_predict(X, y)
    est = STT(make())
    got = est.prequential_predict(X, scale * y)
    assert np.isfinite(got).all()
    if np.log2(scale) == int(np.log2(scale)):
        np.testing.assert_array_equal(got, scale * ref)  # powers of two: exact
    else:
        np.testing.assert_allclose(got, scale * ref, rtol=1e-9, atol=0)
    np.testing.assert_allclose(est.predict(X), scale * STT(make()).fit(X, y).predict(X),
                               rtol=1e-9, atol=0)
    if abs(np.log10(scale)) <= 150:  # numpy's own mean/std are exact enough here
        np.testing.assert_allclose(got, oracle(make, X, scale * y), rtol=1e-8, atol=0)


# ---------------------------------------------------------------------- scikit-learn
@parametrize_with_checks([STT()], expected_failed_checks=expected_failed_checks)
def test_sklearn_compatible(estimator, check):
    check(estimator)


def test_two_dimensional_targets_keep_their_shape():
    X, y = stream(k=3)
    est = STT()
    assert est.prequential_predict(X, y).shape == (80, 3)
    assert est.predict(X[:4]).shape == (4, 3)
    one = STT().fit(X, y[:, :1])
    assert one.predict(X[:4]).shape == (4, 1)
    assert STT().fit(X, y[:, 0]).predict(X[:4]).shape == (4,)


def test_sample_weight_reaches_the_regressor():
    # the weights are the regressor's; the statistics of y are unweighted (as
    # TransformedTargetRegressor fits its transformer without them)
    X, y = stream()
    w = np.random.default_rng(5).uniform(0.0, 3.0, size=len(y))
    w[::7] = 0.0
    for call in ("prequential_predict", "partial_fit"):
        est = STT(QREWRLSRegressor(20))
        ref_scaler = RecursiveStandardScaler()
        z = ref_scaler.prequential_transform(y[:, None])[:, 0]
        z[:2] = 0.0  # no standard deviation before two targets
        inner = QREWRLSRegressor(20)
        if call == "prequential_predict":
            got = est.prequential_predict(X, y, sample_weight=w)
            p = so.prequential_predict(inner, X, z, sample_weight=w)
            mean, scale = [], []
            for t in range(len(y)):  # the statistics of the targets before row t
                past = y[:t]
                mean.append(past.mean() if t else 0.0)
                scale.append(past.std() if t >= 2 and past.std() > 0 else 1.0)
            np.testing.assert_allclose(got, np.array(p) * scale + mean, rtol=1e-9, atol=1e-9)
        else:
            est.partial_fit(X, y, sample_weight=w)
            inner.partial_fit(X, z, sample_weight=w)
            np.testing.assert_allclose(est.regressor_.coef_, inner.coef_, rtol=1e-10, atol=1e-12)
    # weights of one are no weights; a regressor without weights is a clear error
    np.testing.assert_array_equal(
        STT(QREWRLSRegressor(20)).prequential_predict(X, y, sample_weight=np.ones(len(y))),
        STT(QREWRLSRegressor(20)).prequential_predict(X, y),
    )
    with pytest.raises(ValueError, match="sample_weight"):
        STT(so.ORFitRegressor()).fit(X, y, sample_weight=w)
