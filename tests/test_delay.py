"""Delayed labels: ``prequential_predict(..., delay=d)``, ``PrequentialSplit(delay=d)`` and
``make_prequential_scorer(delay=d)``.

``ŷ[i]`` must come from the model that has learned rows ``0 … i − 1 − d`` of the call:
changing ``y[j]`` for ``j > i − 1 − d`` or ``X[j]`` for ``j > i`` cannot change
``ŷ[: i + 1]`` (bit for bit), for every estimator and chain; and the predictions equal
those of a from-scratch oracle that learns exactly those rows.
"""

import copy
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn.base import clone, is_regressor
from sklearn.compose import TransformedTargetRegressor
from sklearn.linear_model import LinearRegression, SGDRegressor
from sklearn.model_selection import GridSearchCV, cross_validate

import sklearn_orfit as so
from _hostile import stream, streaming_estimators
from sklearn_orfit.model_selection import (
    PrequentialSplit, make_prequential_scorer, validation_test_splits,
)

pytestmark = pytest.mark.filterwarnings("ignore::sklearn_orfit.exceptions.SpannedBatchWarning")


def _models():
    # the regressors (and regressor chains) of the contract suite, and scikit-learn's
    # SGDRegressor alone and after a streaming scaler (the partial_fit fallback)
    models = {k: v for k, v in streaming_estimators().items() if is_regressor(v)}
    models["sgd"] = SGDRegressor(random_state=0)
    models["pipeline-sgd"] = so.make_streaming_pipeline(
        so.RecursiveStandardScaler(), SGDRegressor(random_state=0)
    )
    return models


MODELS = _models()
NAMES = list(MODELS)
# the models whose partial_fit of a block equals learning its rows one by one (the oracle
# below learns a prefix in one call); ORFit learns a block as one batch
ROW_BY_ROW_FIT = [k for k in NAMES if "orfit" not in k and k != "sgd" and k != "pipeline-sgd"]


def _warm(name, n):
    X, y = stream(n=n + 40, seed=1)
    est = clone(MODELS[name])
    if n:
        so.prequential_predict(est, X[:n], y[:n])
    return est


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=8, deadline=None)
@given(
    delay=st.integers(0, 6),
    i=st.integers(0, 29),
    warm=st.sampled_from([0, 12]),
    seed=st.integers(0, 2**16),
)
def test_no_prediction_sees_a_label_before_it_is_due(name, delay, i, warm, seed):
    X, y = stream(n=30, seed=seed)
    base = _warm(name, warm)
    y_pred = so.prequential_predict(copy.deepcopy(base), X, y, delay=delay)
    rng = np.random.default_rng(seed)
    X2, y2 = X.copy(), y.copy()
    first_unknown = max(0, i - delay)  # labels i − delay … are not known at row i
    y2[first_unknown:] += rng.normal(size=y2[first_unknown:].shape) * 10
    X2[i + 1 :] = rng.normal(size=X2[i + 1 :].shape) * 10
    y_pred2 = so.prequential_predict(copy.deepcopy(base), X2, y2, delay=delay)
    np.testing.assert_array_equal(y_pred2[: i + 1], y_pred[: i + 1])
    # and the label that is due does matter (the test can fail): from row delay + 1 on,
    # y[i − 1 − delay] is learned before row i is predicted
    # (ORFit on 5 features: once the memory spans them, a new label may change nothing)
    if i >= delay + 1 and name not in ("sgd", "pipeline-sgd", "orfit", "orfit-pca"):
        y3 = y.copy()
        y3[i - 1 - delay] += 100.0
        y_pred3 = so.prequential_predict(copy.deepcopy(base), X, y3, delay=delay)
        assert y_pred3[i] != y_pred[i]


def _features_and_final(base, X):
    """A pipeline's transformers learn the inputs as they arrive (inputs are never
    delayed, only labels): the features of every row, and the final estimator."""
    if isinstance(base, so.StreamingPipeline):
        work = copy.deepcopy(base)
        return work[:-1].prequential_transform(X), work[-1]
    return X, copy.deepcopy(base)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("delay", [1, 4])
def test_delayed_predictions_equal_the_oracle(name, delay):
    """ŷ[i] = the prediction of a model that has learned exactly rows < i − delay."""
    X, y = stream(n=24, seed=3)
    base = _warm(name, 10)
    y_pred = so.prequential_predict(copy.deepcopy(base), X, y, delay=delay)
    Z, final = _features_and_final(base, X)
    for i in range(len(y)):
        oracle = copy.deepcopy(final)
        # one row per call: the order and grouping the delayed path uses
        for j in range(max(0, i - delay)):
            oracle.partial_fit(Z[j : j + 1], y[j : j + 1])
        np.testing.assert_allclose(
            y_pred[i], np.asarray(oracle.predict(Z[i : i + 1])).ravel()[0],
            rtol=1e-9, atol=1e-12, err_msg=f"row {i}",
        )


@pytest.mark.parametrize("name", NAMES)
def test_every_row_is_learned_on_return(name):
    X, y = stream(n=40, seed=4)
    Xq, _ = stream(n=5, seed=5)
    delayed = _warm(name, 10)
    so.prequential_predict(delayed, X, y, delay=5)
    plain = _warm(name, 10)
    so.prequential_predict(plain, X, y)
    # the same rows were learned (one by one instead of vectorised: rounding only, and
    # ORFit's rows as single steps in both)
    np.testing.assert_allclose(delayed.predict(Xq), plain.predict(Xq), rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", NAMES)
def test_delay_zero_is_the_one_step_path_bit_for_bit(name):
    X, y = stream(n=30, seed=6)
    a = so.prequential_predict(_warm(name, 10), X, y)
    b = so.prequential_predict(_warm(name, 10), X, y, delay=0)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("name", ["qrewrls-dual", "orfit", "pipeline-orfit", "ensemble"])
def test_a_delay_longer_than_the_call_predicts_everything_from_the_state_before(name):
    X, y = stream(n=6, seed=7)
    base = _warm(name, 10)
    y_pred = so.prequential_predict(copy.deepcopy(base), X, y, delay=50)
    Z, final = _features_and_final(base, X)
    np.testing.assert_allclose(y_pred, final.predict(Z), rtol=1e-12, atol=1e-12)


def test_delayed_call_streamed_in_pieces_with_carried_labels_is_not_the_same_call():
    # the queue lives within one call: a call learns all its rows on return, so the
    # next call starts from a model that has learned them (documented)
    X, y = stream(n=20, seed=8)
    est = so.QREWRLSRegressor(8)
    so.prequential_predict(est, X[:10], y[:10], delay=3)
    assert est.n_samples_seen_ == 10


@pytest.mark.parametrize("bad", [-1, 1.5, True, "2", None])
def test_bad_delay_is_a_clear_error(bad):
    X, y = stream(n=10)
    for est in (so.QREWRLSRegressor(4), SGDRegressor()):
        with pytest.raises(ValueError, match="delay must be an int >= 0"):
            so.prequential_predict(est, X, y, delay=bad)
    with pytest.raises(ValueError, match="delay"):
        make_prequential_scorer(delay=bad)
    with pytest.raises(ValueError, match="delay"):
        list(PrequentialSplit(2, test_size=3, delay=bad).split(X))


def test_rejected_delayed_call_leaves_the_model_as_it_was():
    X, y = stream(n=30)
    est = so.QREWRLSRegressor(8).fit(X[:10], y[:10])
    before = pickle.dumps(est)
    y_bad = y[10:].copy()
    y_bad[-1] = np.nan
    with pytest.raises(ValueError):
        est.prequential_predict(X[10:], y_bad, delay=2)
    assert pickle.dumps(est) == before


# ------------------------------------------------------------------ model selection
def test_split_moves_the_rows_whose_labels_are_due_into_the_test_block():
    cv = PrequentialSplit(2, test_size=4, warmup_size=3, delay=2)
    folds = list(cv.split(np.zeros((20, 1))))
    assert [list(tr) for tr, _ in folds] == [[7, 8, 9], [11, 12, 13]]
    assert [list(te) for _, te in folds] == [[10, 11, 12, 13, 14, 15], [14, 15, 16, 17, 18, 19]]
    assert "delay=2" in repr(cv)
    with pytest.raises(ValueError, match="delay of 2"):
        list(PrequentialSplit(2, test_size=4, warmup_size=3, delay=2).split(np.zeros((12, 1))))


@pytest.mark.parametrize("delay", [0, 3])
def test_scored_predictions_are_those_of_one_run_over_the_stream(delay):
    """With an expanding warm-up, each fold's scored rows are predicted exactly as one
    delayed pass over the whole series predicts them."""
    X, y = stream(n=120, seed=9)
    est = so.QREWRLSRegressor(8, solver="givens")  # fit = streaming, row by row
    full = so.prequential_predict(clone(est), X, y, delay=delay)
    cv = PrequentialSplit(3, test_size=20, delay=delay)
    scorer = make_prequential_scorer("mse", delay=delay)
    res = cross_validate(est, X, y, cv=cv, scoring=scorer)
    for k, (_, test) in enumerate(cv.split(X)):
        scored = test[delay:]
        expected = np.mean((y[scored] - full[scored]) ** 2)
        np.testing.assert_allclose(-res["test_score"][k], expected, rtol=1e-9)


def test_grid_search_tunes_with_delayed_labels():
    X, y = stream(n=150, seed=10)
    val, test = validation_test_splits(3, 2, validation_size=20, warmup_size=30, delay=4)
    search = GridSearchCV(
        so.QREWRLSRegressor(), {"window_size": [5, 10]}, cv=val,
        scoring=make_prequential_scorer("mse", delay=4), error_score="raise",
    ).fit(X, y)
    assert np.isfinite(search.cv_results_["mean_test_score"]).all()


def test_scorer_needs_rows_left_to_score():
    X, y = stream(n=20)
    scorer = make_prequential_scorer(delay=3, skip=2)
    est = so.QREWRLSRegressor(4).fit(X[:10], y[:10])
    with pytest.raises(ValueError, match="none is left to score"):
        scorer(est, X[10:15], y[10:15])


def test_scorer_refuses_an_estimator_that_cannot_stream():
    X, y = stream(n=40)
    ttr = TransformedTargetRegressor(LinearRegression()).fit(X[:20], y[:20])
    scorer = make_prequential_scorer()
    with pytest.raises(TypeError, match="cannot be scored prequentially"):
        scorer(ttr, X[20:], y[20:])
    # inside a search, with error_score="raise", the same clear error (never a NaN)
    with pytest.raises(TypeError, match="TransformedTargetRegressor cannot be scored"):
        GridSearchCV(ttr, {"check_inverse": [True]}, scoring=scorer, error_score="raise",
                     cv=PrequentialSplit(2, test_size=10)).fit(X, y)
