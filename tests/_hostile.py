"""Helpers shared by the hostile-input and contract tests: small streams, the learning
and output calls of regressors and transformers alike, and line-level interruptions."""

import sys

import numpy as np
from sklearn.base import is_regressor


def stream(n=90, d=5, seed=0):
    """A smooth regression stream: ``n`` rows of ``d`` features and their targets."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X @ rng.normal(size=d)) + 0.1 * rng.normal(size=n)


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
    sys.settrace(tracer)
    try:
        call()
    finally:
        sys.settrace(None)
    assert not tracer.fired, f"the exception injected at {tracer.fired} was swallowed"
    return tracer.count
