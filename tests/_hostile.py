"""Helpers shared by the hostile-input and contract tests: small streams, the learning
and output calls of regressors and transformers alike, line-level interruptions, and
estimators that fail on demand (traps) or update a large state in place."""

import contextvars
import copy
import pickle
import sys

import numpy as np
from sklearn.base import BaseEstimator, RegressorMixin, is_regressor

import sklearn_orfit as so
from _example_estimator import ExponentialMeanRegressor
from sklearn_orfit import QREWRLSRegressor


def stream(n=90, d=5, seed=0):
    """A smooth regression stream: ``n`` rows of ``d`` features and their targets."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X @ rng.normal(size=d)) + 0.1 * rng.normal(size=n)


def streaming_estimators():
    """Every public estimator, transformer, pipeline and the ensemble, one per route (fresh
    instances, by name): the contract and delayed-label suites run over them."""
    return {
        "qrewrls-short": so.QREWRLSRegressor(8, forgetting_factor=0.9),
        "qrewrls-dual": so.QREWRLSRegressor(40),
        "qrewrls-primal": so.QREWRLSRegressor(40, forgetting_factor=0.95),
        "qrewrls-givens": so.QREWRLSRegressor(8, solver="givens"),
        "qrewrls-svd": so.QREWRLSRegressor(8, solver="svd"),
        "qrewrls-ridge": so.QREWRLSRegressor(8, alpha=1e-2),
        "qrewrls-ridge-long": so.QREWRLSRegressor(30, alpha=1e-2),
        "orfit": so.ORFitRegressor(),
        "orfit-pca": so.ORFitRegressor(memory_size=3),
        "orfit-mlp": so.ORFitMLPRegressor((8,), random_state=0),
        "orfit-mlp-pca": so.ORFitMLPRegressor((8,), memory_size=4, random_state=0),
        "sw-krls": so.SlidingWindowKRLSRegressor(8),
        "qrd-rls": so.QRDRLSRegressor(8),
        "ewrls": so.EWRLSRegressor(forgetting_factor=0.99),
        "rff": so.RandomFourierFeatures(16, random_state=0),
        "scaler": so.RecursiveStandardScaler(),
        "lags": so.LagTransformer(2),
        "pipeline-qrewrls": so.make_streaming_pipeline(
            so.RandomFourierFeatures(64, random_state=0), so.QREWRLSRegressor(10)
        ),
        "pipeline-orfit": so.make_streaming_pipeline(
            so.LagTransformer(2), so.RecursiveStandardScaler(),
            so.RandomFourierFeatures(32, random_state=0), so.ORFitRegressor(memory_size=5),
        ),
        "target": so.StreamingTransformedTargetRegressor(so.QREWRLSRegressor(8)),
        "example": ExponentialMeanRegressor(0.9),
        "ensemble": so.FeaturePartitionEnsemble(
            so.RandomFourierFeatures(32, random_state=0), so.QREWRLSRegressor(8),
            n_partitions=2,
        ),
    }


def gaussian_stream(n=20, p=40, *, n_targets=None, seed=0):
    """``n`` rows of ``p`` standard normal features and standard normal targets."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, p))
    return X, rng.normal(size=n if n_targets is None else (n, n_targets))


def learn(est, X, y):
    return est.partial_fit(X, y) if is_regressor(est) else est.partial_fit(X)


def output(est, X):
    return est.predict(X) if is_regressor(est) else est.transform(X)


class RaiseAtLine:
    """A trace function that counts the lines executed in files whose path starts with
    ``prefix`` and raises ``exc`` at the ``k``-th (``k = -1``: only count)."""

    def __init__(self, k, exc, prefix):
        self.k, self.exc, self.prefix = k, exc, prefix
        self.count, self.fired = 0, False

    def __call__(self, frame, event, arg):
        return self._local if frame.f_code.co_filename.startswith(self.prefix) else None

    def _local(self, frame, event, arg):
        if event == "line":
            self.count += 1
            if self.count == self.k:
                self.fired = f"{frame.f_code.co_filename}:{frame.f_lineno} ({frame.f_code.co_name})"
                raise self.exc
        return self._local


def run_traced(call, k, exc, prefix):
    """Run ``call()`` raising ``exc`` at its ``k``-th traced line; return the line count.

    If the call returns normally it ran fewer lines this time; an exception that fired
    but did not come out was swallowed, which is an error.
    """
    tracer = RaiseAtLine(k, exc, prefix)
    # in a copy of the context: an exception injected into a cleanup line (the ``finally``
    # of the update template, before it resets the learning call in progress) must not
    # leave that call set for the tests run after this one in the same thread
    context = contextvars.copy_context()
    sys.settrace(tracer)
    try:
        context.run(call)
    finally:
        sys.settrace(None)
    assert not tracer.fired, f"the exception injected at {tracer.fired} was swallowed"
    return tracer.count


def interrupted_states(base, make_call, points, prefix,
                       kinds=(RuntimeError, KeyboardInterrupt)):
    """Interrupt the call ``make_call(est)()`` on a deep copy ``est`` of ``base`` at each
    of ``points`` (its traced lines under ``prefix``), with the exception classes of
    ``kinds`` in turn; yield ``(line, est, pickle.dumps(est))`` for each."""
    for i, k in enumerate(points):
        est = copy.deepcopy(base)
        exc = kinds[i % len(kinds)]("injected")
        try:
            run_traced(make_call(est), k, exc, prefix)
        except (KeyboardInterrupt, RuntimeError):
            pass
        yield k, est, pickle.dumps(est)


# what a trap raises; a trap is stored by name (a raised exception object would change:
# Python attaches its traceback, so the model's pickle would change with it)
TRAPS = {"exception": RuntimeError, "keyboard-interrupt": KeyboardInterrupt}


def spring(trap):
    """Raise the trap named ``trap`` (a key of TRAPS), if any."""
    if trap is not None:
        raise TRAPS[trap]("injected failure")


# Module level in a light module, so that loky workers can unpickle them (conftest puts
# tests/ on sys.path, and loky workers inherit the parent's sys.path).
class Trap(QREWRLSRegressor):
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
        spring(trap)
        return super()._learn(X, Y, predict=predict)


class InPlaceSum(RegressorMixin, BaseEstimator):
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
