"""SW-KRLS at long windows: the in-place recursion against kernel ridge from scratch.

The recursion (Van Vaerenbergh, Vía, Santamaría, ICASSP 2006) carries ``(K + αI)⁻¹`` of
the window; every check below compares it, or the predictions it gives, with kernel ridge
regression solved from scratch on the same window (direct differences, dense solve).
Tolerances: ``1e-9`` relative while ``κ(K + αI) ≤ 1e6`` (as in ``test_baselines.py``);
``100·κ·ε`` for a freshly recomputed inverse; a loose bound when the window is
deliberately near-singular.
"""

import pickle
import warnings

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from threadpoolctl import threadpool_limits

import sklearn_orfit.baselines._sw_krls as sw_krls
from sklearn_orfit import SlidingWindowKRLSRegressor, prequential_predict
from _hostile import gaussian_stream
from _state import assert_same_state, canonical_pickle

RTOL = 1e-9
EPS = np.finfo(np.float64).eps


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _regularised_kernel(W, *, length_scale, alpha):
    sq = ((W[:, None, :] - W[None, :, :]) ** 2).sum(-1)
    return np.exp(-sq / (2 * length_scale**2)) + alpha * np.eye(W.shape[0])


def _oracle(W, y_win, Xq, *, length_scale, alpha, sq=None):
    """Kernel ridge on the window ``W``: predictions at ``Xq`` and ``κ(K + αI)``.

    ``sq``: the squared distances ``‖[W; Xq]_i − [W; Xq]_j‖²`` when already computed (the
    same numbers as computed here: rows of a matrix over the whole stream)."""
    if sq is None:
        A = _regularised_kernel(W, length_scale=length_scale, alpha=alpha)
        k = np.exp(-((Xq[:, None, :] - W[None, :, :]) ** 2).sum(-1) / (2 * length_scale**2))
    else:
        n = W.shape[0]
        A = np.exp(-sq[:n, :n] / (2 * length_scale**2)) + alpha * np.eye(n)
        k = np.exp(-sq[n:, :n] / (2 * length_scale**2))
    # κ₂ from the eigenvalues: A is symmetric positive definite, its singular values are
    # its eigenvalues (half the time of np.linalg.cond's SVD at N = 300; a smallest
    # eigenvalue rounded to ≤ 0 is a κ beyond double precision)
    lam = np.linalg.eigvalsh(A)
    return k @ np.linalg.solve(A, y_win), lam[-1] / lam[0] if lam[0] > 0 else np.inf


def _rel_err(a, b):
    return np.linalg.norm(np.asarray(a) - b) / max(np.linalg.norm(b), 1e-300)


def _stream_with_duplicates(n, d, *, seed):
    """A stream in which every row comes twice, the second time a few rows later."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    X[3::4] = X[1::4][: X[3::4].shape[0]]
    y = np.sin(X.sum(axis=1)) + 0.05 * rng.normal(size=n)
    return X, y


def test_long_window_matches_kernel_ridge_at_every_step():
    # N = 300, 400 steps with a full window, rows repeated inside the window
    N, s, alpha = 300, 1.5, 1e-2
    X, y = _stream_with_duplicates(700, 4, seed=0)
    reg = SlidingWindowKRLSRegressor(N, length_scale=s, alpha=alpha)
    y_pred = reg.prequential_predict(X, y)
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)  # each window's, computed once
    for t in range(1, X.shape[0]):
        lo = max(0, t - N)
        expected, kappa = _oracle(X[lo:t], y[lo:t], X[t : t + 1], length_scale=s, alpha=alpha,
                                  sq=sq[lo : t + 1, lo : t + 1])
        assert kappa <= 1e6
        # normwise: relative to the size of the terms kᵀ(K + αI)⁻¹y sums
        assert abs(y_pred[t] - expected[0]) <= RTOL * max(abs(expected[0]), 1.0), t
    A = _regularised_kernel(X[-N:], length_scale=s, alpha=alpha)
    assert _rel_err(reg.inverse_kernel_, np.linalg.inv(A)) <= RTOL
    assert _rel_err(reg.dual_coef_, np.linalg.solve(A, y[-N:])) <= RTOL
    assert reg.n_refactorizations_ == 0


def test_one_row_calls_equal_one_call():
    N = 40
    X, y = _stream_with_duplicates(130, 3, seed=1)
    whole = SlidingWindowKRLSRegressor(N, alpha=1e-3)
    y_whole = whole.prequential_predict(X, y)
    rows = SlidingWindowKRLSRegressor(N, alpha=1e-3)
    y_rows = np.concatenate([rows.prequential_predict(X[t : t + 1], y[t : t + 1])
                             for t in range(X.shape[0])])
    # the same update code on the same rows: the same numbers
    assert_array_equal(y_rows, y_whole)
    assert_array_equal(rows.inverse_kernel_, whole.inverse_kernel_)


@pytest.mark.parametrize("alpha", [1e-8, 1e-12])
def test_near_singular_window_is_refactorised(alpha):
    # every row twice and a negligible ridge: the Schur complement of a repeated row is
    # ≈ α and rounds to non-positive, so the inverse is recomputed from the window
    N, s = 300, 1.0
    rng = np.random.default_rng(2)
    X = np.repeat(rng.normal(size=(200, 2)), 2, axis=0)
    y = np.sin(X[:, 0])
    reg = SlidingWindowKRLSRegressor(N, length_scale=s, alpha=alpha)
    y_pred = reg.prequential_predict(X, y)
    assert reg.n_refactorizations_ > 0
    assert np.isfinite(y_pred).all()
    Xq = rng.normal(size=(5, 2))
    expected, kappa = _oracle(X[-N:], y[-N:], Xq, length_scale=s, alpha=alpha)
    # κ ≈ 1e10 or more: neither side is accurate to more than κ·ε, and the recursion
    # between rescues adds to it; the check is that the model stays the kernel ridge fit
    # of its window instead of blowing up
    assert kappa > 1e9
    assert np.abs(reg.predict(Xq) - expected).max() <= 1e-2 * np.abs(expected).max()


def test_long_stream_stays_within_tolerance():
    # 20,000 steps at N = 50: the window's inverse, its dual coefficients and the
    # predictions checked against the from-scratch solution at sampled steps
    N, s, alpha = 50, 1.0, 1e-2
    rng = np.random.default_rng(3)
    X = rng.normal(size=(20_000, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    reg = SlidingWindowKRLSRegressor(N, length_scale=s, alpha=alpha)
    for start in range(0, X.shape[0], 997):
        stop = min(start + 997, X.shape[0])
        y_pred = reg.prequential_predict(X[start:stop], y[start:stop])
        W, y_win = X[stop - N : stop], y[stop - N : stop]
        A = _regularised_kernel(W, length_scale=s, alpha=alpha)
        assert np.linalg.cond(A) <= 1e6
        assert _rel_err(reg.inverse_kernel_, np.linalg.inv(A)) <= RTOL, stop
        assert _rel_err(reg.dual_coef_, np.linalg.solve(A, y_win)) <= RTOL, stop
        expected, _ = _oracle(X[stop - 1 - N : stop - 1], y[stop - 1 - N : stop - 1],
                              X[stop - 1 : stop], length_scale=s, alpha=alpha)
        assert abs(y_pred[-1] - expected[0]) <= RTOL * max(abs(expected[0]), 1.0), stop
    assert reg.n_refactorizations_ == 0


def test_scheduled_refactorisation_resets_the_rounding_error():
    # on a poorly conditioned stream (κ ≈ 2.5e4) the recursion's rounding error is
    # ~1e-9 after a few hundred steps; right after the recomputation the notes promise
    # (every max(4N, 256) rows) the inverse is that of a fresh factorisation, ~κ·ε
    N, s, alpha = 50, 1.0, 1e-3
    rng = np.random.default_rng(4)
    X = rng.normal(size=(2 * 256 + 255, 2))
    y = np.sin(3 * X[:, 0]) + X[:, 1]
    reg = SlidingWindowKRLSRegressor(N, length_scale=s, alpha=alpha)
    errors, seen = [], 0
    for stop in (2 * 256 - 1, 2 * 256, 2 * 256 + 255):
        reg.partial_fit(X[seen:stop], y[seen:stop])
        seen = stop
        A = _regularised_kernel(X[stop - N : stop], length_scale=s, alpha=alpha)
        errors.append(_rel_err(reg.inverse_kernel_, np.linalg.inv(A)))
        bound = 100 * np.linalg.cond(A) * EPS
    assert errors[1] <= bound  # just recomputed
    assert errors[1] < errors[0] / 10 and errors[1] < errors[2] / 10


def test_interrupted_update_restores_the_window(monkeypatch):
    # a failure half-way through the in-place update (here: the third BLAS rank-two
    # update raises) leaves the estimator exactly as it was: the window and counters,
    # and the inverse bit for bit (it was recomputed from the window before: equal to
    # rounding only)
    N = 30
    X, y = _stream_with_duplicates(120, 3, seed=5)
    reg = SlidingWindowKRLSRegressor(N, alpha=1e-2).fit(X[:60], y[:60])
    ref = SlidingWindowKRLSRegressor(N, alpha=1e-2).fit(X[:60], y[:60])
    before = pickle.dumps(reg)

    real, calls = sw_krls.blas, []

    class _FailingBlas:
        def __getattr__(self, name):
            return getattr(real, name)

        def dsyr2(self, *args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                raise KeyboardInterrupt
            return real.dsyr2(*args, **kwargs)

    monkeypatch.setattr(sw_krls, "blas", _FailingBlas())
    with pytest.raises(KeyboardInterrupt):
        reg.partial_fit(X[60:], y[60:])
    monkeypatch.undo()
    assert len(calls) == 3
    assert pickle.dumps(reg) == before
    # the stream continues as if the call had not happened, bit for bit
    assert_array_equal(reg.prequential_predict(X[60:], y[60:]),
                       ref.prequential_predict(X[60:], y[60:]))


def test_one_row_update_allocates_one_copy_of_the_inverse_at_most():
    # the N×N inverse is updated in place: a one-row call allocates O(N + d) and the one
    # copy of the inverse that undoes a failed call (N² floats = 1.28 MB here), nothing
    # else window-sized
    import tracemalloc

    N = 400
    X, y = _stream_with_duplicates(N + 10, 3, seed=6)
    reg = SlidingWindowKRLSRegressor(N).fit(X[:N], y[:N])
    reg.partial_fit(X[N : N + 1], y[N : N + 1])
    tracemalloc.start()
    for t in range(N + 1, N + 10):
        reg.partial_fit(X[t : t + 1], y[t : t + 1])
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak < N * N * 8 * 1.25


# ------------------------------------------------------------------ hostile inputs
# extreme length scales and row scales, ridges below the rounding level and duplicate
# rows give kernel ridge's answer or a clear ValueError; set_params mid-stream is refused
# by every call that reads the window (the learning calls: also tests/test_contracts.py).


def _regressor_calls(X, y, *, learn_one=False, predict=False):
    """The calls of a regressor that continue a stream (and predict, if it reads the
    changed parameter)."""
    calls = [
        lambda est: est.partial_fit(X, y),
        lambda est: est.prequential_predict(X, y),
        lambda est: prequential_predict(est, X, y),
    ]
    if learn_one:
        calls.append(lambda est: est.learn_one(X[0], y[0]))
    if predict:
        calls.append(lambda est: est.predict(X))
    return calls


def _assert_refused_then_fit_uses_it(est, make_new, param, calls, fit_data):
    before = canonical_pickle(est)
    for call in calls:
        with pytest.raises(ValueError, match=f"{param} changed.*Call fit"):
            call(est)
        assert canonical_pickle(est) == before
    # fit starts a new stream with the new value
    est.fit(*fit_data)
    assert_same_state(est, make_new().fit(*fit_data), pickled=True)


@pytest.mark.parametrize("length_scale", [1e300, 1e200, 1e-200, 1e-300])
def test_sw_krls_extreme_length_scales(length_scale):
    # 1e300 was a raw OverflowError (1/length_scale²), 1e-300 a ZeroDivisionError
    X, y = gaussian_stream(40, 2, seed=6)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(10, length_scale=length_scale).fit(X, y)
        y_pred = reg.predict(X[-12:])
    if length_scale > 1:  # the all-ones kernel: every prediction the ridge mean
        expected = np.full(12, y[-10:].sum() / (10 + reg.alpha))
    else:  # the identity kernel: y/(1 + α) on the window, 0 elsewhere
        expected = np.r_[0.0, 0.0, y[-10:] / (1 + reg.alpha)]
    # the all-ones kernel is carried with κ(K + αI) = 1 + N/α = 1001: rtol 1e-9
    assert_allclose(y_pred, expected, rtol=1e-9, atol=1e-15)


@pytest.mark.parametrize("scale", [1e155, 1e-155, 1e300, 1e-300, 1e160])
def test_sw_krls_is_scale_equivariant(scale):
    # X → cX with length_scale → c·length_scale is the same model (1e160 rows with a
    # fixed length scale made the refactorised inverse NaN)
    # (rounding of X·c and of the kernel, amplified by κ(K + αI) ≤ 1 + N/α = 2001 and
    # 300 steps of the recursion: measured ≤ 5e-11)
    X, y = gaussian_stream(300, 2, seed=7)
    ref = SlidingWindowKRLSRegressor(20, length_scale=1.5, alpha=1e-2)
    p_ref = ref.prequential_predict(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(20, length_scale=1.5 * scale, alpha=1e-2)
        p = reg.prequential_predict(X * scale, y)
        assert_allclose(p, p_ref, rtol=0, atol=1e-9)
        assert_allclose(reg.predict(X[:5] * scale), ref.predict(X[:5]), rtol=0, atol=1e-9)


def test_sw_krls_huge_rows_with_a_fixed_length_scale():
    # rows 1e160 apart: the kernel is the identity; was NaN after the first refactorisation
    X, y = gaussian_stream(300, 2, seed=8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(10, alpha=1e-2).fit(X * 1e160, y)
        y_pred = reg.predict(X[-10:] * 1e160)
    assert_allclose(y_pred, y[-10:] / (1 + 1e-2), rtol=1e-12)


@pytest.mark.parametrize("alpha", [1e-300, 1e-20, 1e-16])
def test_sw_krls_alpha_below_the_rounding_level_is_a_clear_error(alpha):
    # with repeated rows the carried inverse went to ±1e284, then NaN
    X, y = gaussian_stream(40, 2, seed=9)
    reg = SlidingWindowKRLSRegressor(20, alpha=alpha)
    for call in (lambda: reg.fit(X, y), lambda: reg.partial_fit(X, y),
                 lambda: reg.prequential_predict(X, y)):
        with pytest.raises(ValueError, match="alpha=.* is below window_size · eps"):
            call()
        assert not [k for k in vars(reg) if k.endswith("_")]


@pytest.mark.parametrize("kind", ["pairs", "five rows", "constant"])
def test_sw_krls_repeated_rows_at_the_smallest_alpha_stay_bounded(kind):
    N = 20
    rng = np.random.default_rng(10)
    X = rng.normal(size=(200, 2))
    if kind == "pairs":
        X = np.repeat(X[:100], 2, axis=0)
    elif kind == "five rows":
        X = np.tile(X[:5], (40, 1))
    else:
        X = np.ones_like(X)
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=200)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        reg = SlidingWindowKRLSRegressor(N, alpha=N * EPS)
        y_pred = reg.prequential_predict(X, y)
    assert np.isfinite(y_pred).all()
    assert np.abs(y_pred).max() <= 100 * np.abs(y).max()


def test_sw_krls_dual_overflow_is_a_clear_error_and_changes_nothing():
    X, y = gaussian_stream(40, 2, seed=11)
    reg = SlidingWindowKRLSRegressor(10, alpha=1e-10).fit(X[:20], y[:20] * 1e300)
    before = canonical_pickle(reg)
    X_new = np.repeat(X[20:22], 2, axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match="dual coefficients .* overflowed"):
            reg.partial_fit(X_new, [1e308, -1e308, 1e308, -1e308])
    assert canonical_pickle(reg) == before


@pytest.mark.parametrize("param, value", [("window_size", 5), ("window_size", 40),
                                          ("length_scale", 3.0), ("alpha", 1.0)])
def test_sw_krls_set_params_mid_stream_is_refused(param, value):
    # window_size: predictions from a ring read with the wrong length; length_scale and
    # alpha: silently mixed with an inverse built with the old values
    X, y = gaussian_stream(60, 2, seed=12)
    base = {"window_size": 20, "length_scale": 1.3, "alpha": 1e-2}
    reg = SlidingWindowKRLSRegressor(**base).fit(X[:30], y[:30])
    reg.set_params(**{param: value})
    calls = _regressor_calls(X[30:], y[30:], predict=True) + [
        lambda est: est.X_window_, lambda est: est.n_window_]
    _assert_refused_then_fit_uses_it(
        reg, lambda: SlidingWindowKRLSRegressor(**{**base, param: value}), param,
        calls, (X, y),
    )
