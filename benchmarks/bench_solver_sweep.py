"""Worst-case sweep of ``QREWRLSRegressor``: cost per update and error against an oracle.

Every point is one stream through the public estimator (``solver="auto"``), fed with
:func:`~sklearn_orfit.prequential_predict` in calls of up to 250 rows, one BLAS thread
(threadpoolctl):

* **fill phase** — the first ``N`` rows (the window fills): µs per update over them;
* **full phase** — the next ``max(N, 200)`` rows (full window): µs per update over the
  rows timed, within the phase's budget (the rows timed are recorded);
* **floor** — one ``N×D`` matrix–vector product (``D×D`` when ``D < N``), ``Zwin @ z`` on
  the point's own window, best of 5 rounds in the same process; both phases are printed
  as multiples of it;
* **error** — the prequential predictions against a from-scratch oracle on a sample of
  at least 20 steps spread over both phases (every step when the stream is short and the
  oracle cheap): ``numpy.linalg.lstsq(W½Z, W½y, rcond=None)`` on the weighted window
  (weights ``λ^age`` times the sample weight), and for ``alpha > 0`` the ridge solution
  from the SVD of ``A = W½Z``, ``β = V diag(s/(s² + α)) Uᵀ W½y`` (the definitions of the
  test suite's oracle, copied). The error of a step in units of the bound is
  ``|ŷ − ŷ_oracle| / (max(1e-9, 100·eps·κ) · max(1, max |ŷ_oracle| over the sampled
  steps))`` with ``κ`` the condition number of the oracle's problem (over its non-zero
  singular values; with a ridge ``sqrt(κ(AAᵀ + αI))``); a point's error is the worst of
  its steps, and a point with error > 1 is *outside the bound*. For such a point the
  worst step is also solved by three other exact LAPACK routes (the SVD by ``gesvd``
  and by ``gesdd`` with lstsq's cut-off, and ``gelss``): their largest distance from the
  oracle, in the same units, is printed as the *oracle's spread* (a step where exact
  solvers disagree with each other by about the bound is decided by rounding); the point
  still counts as outside the bound;
* **route** — whatever the estimator exposes of ``n_orthogonal_windows_`` and
  ``route_counts_`` (read with ``getattr``; at the end of the fill and at the end), and
  the class of its solver;
* **exceptions** — any exception of the estimator is caught, recorded (type, message,
  phase, row) and counted; the sweep goes on. Warnings are recorded too.

Data kinds (``R = N + max(N, 200)`` rows; every kind but ``rff`` is built on ``gaussian``):

* ``gaussian`` — standard normal rows, ``y = Zw/√D + 0.1·noise``;
* ``rff`` — ``RandomFourierFeatures(D, sigma=0.5, random_state=0)`` of 7 lags of
  ``make_abo_series`` (``make_lagged``), its target;
* ``constant_start`` — the first ``max(1, N/4)`` rows (and targets) identical;
* ``zero_weights`` — 20 % of the rows get ``sample_weight`` 0 (passed to
  ``prequential_predict``), the others 1;
* ``duplicates`` — 10 % of the rows are copies (row and target) of an earlier row still
  in the window (rank deficiency whatever ``D``);
* ``mixed_scales`` — rows and targets scaled by ``10**k``, ``k`` an integer drawn from
  ``[-100, 100]`` for each block of 7 rows.

Grid: ``N ∈ {20, 100, 500, 2000, 5000}``, ``D ∈ {2, 64, N−1, N, 1024, 4096}``,
``λ ∈ {1, 0.999, 0.9}``, ``α ∈ {0, 1e-12, 1e-6, 1e-1, 10}`` and the six data kinds. The
whole product (``--full``) has 2,700 points; the default sweep is a covering design:

* **A** — every ``(N, D)`` pair with every data kind at the estimator's defaults
  ``λ = 1, α = 0`` (180 points before pruning);
* **B** — every ``(λ, α)`` pair: with ``gaussian`` and ``rff`` data at the
  interpolation threshold ``D ∈ {N−1, N, N+1}`` for ``N ∈ {20, 100}``; with ``rff`` data
  at ``N = D = 500`` and on the primal route at ``(N, D) ∈ {(500, 64), (2000, 64)}``;
* **C** — the ridge-with-forgetting combinations (``α > 0`` with ``λ < 1``, eight) with
  every data kind at ``(N, D) ∈ {(20, 20), (20, 64), (100, 64), (100, 1024)}``;
* **D** — feature widths between the grid's: ``rff`` data at ``N = 1000``,
  ``D ∈ {256, 512}``, every ``(λ, α)`` pair and ``λ = 0.99`` with every ``α`` (40
  points; a width the grid does not hold met cliffs it missed: ``D = 512``, ``λ = 0.99``,
  ``α = 0`` sent 1,495 of 2,000 windows to the orthogonal route, 150× the floor);

duplicates removed. ``--quick`` (the smoke test) runs part A at
``N = 20, D ∈ {2, 19, 20, 21, 1024}`` and ``N = 100, D ∈ {64, 100}`` plus every
``(λ, α)`` at ``N = D = 20`` on ``rff`` data, with a 2-second budget.

Budget: ``--budget B`` seconds a point (default 10, ``--quick`` 2): ``B/2`` for each
phase and about ``B/10`` for the oracle (at least 20 steps). Before a point runs, a cost
model estimates its fill phase (``N/2`` rows at ``3e-10·(N·D + min(N, D)²)`` s + 20 µs
a row) and 20 oracle steps (``≈ 2.5e-10·m·D·min(m, D)`` s each for ``lstsq``, twice that
for the SVD, ``m`` the window's rows); a point whose fill estimate exceeds ``B/2`` or
whose oracle estimate exceeds ``B`` is not run and is listed as pruned with the
estimates (in the default sweep: ``N ≥ 2000`` with ``D ≥ 1999``, ``N = 5000`` with
``D ≥ 1024``). Within a point each phase stops at its budget: the call sizes shrink so
that the next call fits what is left, and a call still running ``B/4`` (at least
0.5 s) after the budget is interrupted (the estimator rolls the call back) — its time
then counts with its rows, and the figure is marked as a lower bound (``≥``). A point
stopped in the fill has no full-phase figure. The cost model knows nothing of the slow
routes the sweep is there to find: those points are the ones the budget stops.

At the end: the worst ratio after the fill and during it, the worst error, the number of
exceptions and of points outside the bound, each with the settings of its worst point,
beside the targets (≤ 5× the floor after the fill, ≤ 10× during it, no exception, no
point outside the bound).

Run: ``python benchmarks/bench_solver_sweep.py`` (≈ 9 minutes on 2 CPUs;
``--quick`` < 1 minute; ``--full`` the whole product, pruned; ``--out PATH`` a folder
or a ``.json`` file, default ``benchmarks/out/bench_solver_sweep.json``). The table in
``benchmarks/README.md`` is generated from that file by ``tools/benchmark_tables.py``.
"""

import argparse
import itertools
import math
import os
import signal
import threading
import time
import traceback
import warnings

import numpy as np

from sklearn_orfit.utils.benchmarking import (
    best_of, blas_threads, header_line, machine_header, peak_rss_mib, write_results,
)

NAME = "bench_solver_sweep"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
EPS = np.finfo(np.float64).eps

WINDOWS = (20, 100, 500, 2000, 5000)
LAMBDAS = (1.0, 0.999, 0.9)
ALPHAS = (0.0, 1e-12, 1e-6, 1e-1, 10.0)
DATA = ("gaussian", "rff", "constant_start", "zero_weights", "duplicates", "mixed_scales")
DEFAULT_LAM, DEFAULT_ALPHA = 1.0, 0.0
CALL_ROWS = 250          # rows a prequential_predict call takes (at most)
FIRST_FULL_CALL = 16     # the full phase starts with a short call: its rate sizes the next
MIN_ORACLE_STEPS = 20
MAX_ORACLE_STEPS = 60
ALL_STEPS_ROWS = 400     # every step is checked when the stream is this short (and cheap)
ROUTE_ATTRS = ("n_orthogonal_windows_", "route_counts_")

# part D: feature widths between the grid's, at a window users pick, every (λ, α) and
# λ = 0.99 besides
WIDTHS_N, WIDTHS_D, WIDTHS_LAMBDAS = 1000, (256, 512), (0.99,)

TARGETS = {"ratio_full": 5.0, "ratio_fill": 10.0, "exceptions": 0, "outside_bound": 0}

# cost model (seconds), measured on a 2-CPU AMD EPYC with one BLAS thread
SOLVER_UNIT = 3e-10      # a row at window m: SOLVER_UNIT·(m·D + min(m, D)²) + SOLVER_ROW
SOLVER_ROW = 20e-6
LSTSQ_UNIT = 2.5e-10     # an oracle step: LSTSQ_UNIT·m·D·min(m, D) + ORACLE_STEP
SVD_UNIT = 5e-10
ORACLE_STEP = 60e-6


def grid_dims(N):
    """``D ∈ {2, 64, N−1, N, 1024, 4096}`` for window ``N`` (duplicates removed, sorted)."""
    return sorted({2, 64, N - 1, N, 1024, 4096} - {0})


# ---------------------------------------------------------------------- the design
def design(mode):
    """The points of a sweep: dicts with ``N, D, lam, alpha, data, part`` (ordered so
    that points sharing a data set are consecutive)."""
    pts = {}

    def add(part, N, D, lam, alpha, data):
        key = (N, D, lam, alpha, data)
        pts.setdefault(key, part)

    if mode == "full":
        for N in WINDOWS:
            for D, lam, alpha, data in itertools.product(grid_dims(N), LAMBDAS, ALPHAS, DATA):
                add("full", N, D, lam, alpha, data)
    elif mode == "quick":
        for N, D in [(20, 2), (20, 19), (20, 20), (20, 21), (20, 1024), (100, 64), (100, 100)]:
            for data in DATA:
                add("A", N, D, DEFAULT_LAM, DEFAULT_ALPHA, data)
        for lam, alpha in itertools.product(LAMBDAS, ALPHAS):
            add("B", 20, 20, lam, alpha, "rff")
    else:
        for N in WINDOWS:
            for D, data in itertools.product(grid_dims(N), DATA):
                add("A", N, D, DEFAULT_LAM, DEFAULT_ALPHA, data)
        pairs_b = [((N, N + k), ("gaussian", "rff")) for N in (20, 100) for k in (-1, 0, 1)]
        pairs_b += [((500, 500), ("rff",)), ((500, 64), ("rff",)), ((2000, 64), ("rff",))]
        for ((N, D), kinds), (lam, alpha) in itertools.product(
                pairs_b, itertools.product(LAMBDAS, ALPHAS)):
            for data in kinds:
                add("B", N, D, lam, alpha, data)
        ridge_forget = [(lam, a) for lam in LAMBDAS if lam < 1 for a in ALPHAS if a > 0]
        for (N, D), (lam, alpha), data in itertools.product(
                [(20, 20), (20, 64), (100, 64), (100, 1024)], ridge_forget, DATA):
            add("C", N, D, lam, alpha, data)
        for D, lam, alpha in itertools.product(WIDTHS_D, LAMBDAS + WIDTHS_LAMBDAS, ALPHAS):
            add("D", WIDTHS_N, D, lam, alpha, "rff")
    order = sorted(pts, key=lambda k: (k[0], k[1], DATA.index(k[4]), -k[2], k[3]))
    return [dict(zip(("N", "D", "lam", "alpha", "data"), k), part=pts[k]) for k in order]


# ---------------------------------------------------------------------- cost model
def solver_row_seconds(m, D):
    return SOLVER_UNIT * (m * D + min(m, D) ** 2) + SOLVER_ROW


def oracle_step_seconds(m, D, alpha):
    unit = SVD_UNIT if alpha else LSTSQ_UNIT
    return unit * m * D * min(m, D) + ORACLE_STEP


def estimate(p):
    """Cost-model seconds of a point: its fill phase and 20 oracle steps."""
    N, D = p["N"], p["D"]
    fill = N * solver_row_seconds(max(1, N // 2), D) / 2 + N * SOLVER_ROW / 2
    steps = oracle_steps(N, N + max(N, 200), MIN_ORACLE_STEPS)
    oracle = sum(oracle_step_seconds(min(t, N), D, p["alpha"]) for t in steps)
    mem_mb = 8 * ((N + max(N, 200)) * D + 4 * N * D + 3 * min(N, D) ** 2) / 2**20
    return {"fill_s": fill, "oracle_s": oracle, "memory_mb": mem_mb}


# ---------------------------------------------------------------------- the data
def make_data(kind, N, D, rows, seed=None):
    """``(Z, y, sample_weight or None)`` of a data kind (module docstring).

    ``seed``: another draw of the same kind (the property tests draw from the sweep's
    grid through it); None gives the sweep's own data, fixed by ``(kind, N, D)``.
    """
    rng = np.random.default_rng([DATA.index(kind), N, D] if seed is None else seed)
    if kind == "rff":
        from sklearn_orfit import RandomFourierFeatures
        from sklearn_orfit.datasets import make_abo_series, make_lagged

        # another seed: another stretch of the series and other random features
        start = 0 if seed is None else int(rng.integers(0, 200))
        X, y = make_lagged(make_abo_series(start + rows + 7, random_state=0), 7)
        X, y = X[start:], y[start:]
        Z = RandomFourierFeatures(D, sigma=0.5, random_state=0 if seed is None else seed % 1000).fit(X[:1]).transform(X)
        return np.ascontiguousarray(Z), np.asarray(y, dtype=float), None
    Z = rng.standard_normal((rows, D))
    y = Z @ (rng.standard_normal(D) / math.sqrt(D)) + 0.1 * rng.standard_normal(rows)
    w = None
    if kind == "constant_start":
        k = max(1, N // 4)
        Z[1:k] = Z[0]
        y[1:k] = y[0]
    elif kind == "zero_weights":
        w = np.ones(rows)
        w[rng.choice(rows, size=int(round(0.2 * rows)), replace=False)] = 0.0
    elif kind == "duplicates":
        for i in np.sort(rng.choice(np.arange(1, rows), size=int(round(0.1 * rows)),
                                    replace=False)):
            j = int(rng.integers(max(0, i - N + 1), i))  # an earlier row still in the window
            Z[i] = Z[j]
            y[i] = y[j]
    elif kind == "mixed_scales":
        k = rng.integers(-100, 101, size=(rows + 6) // 7)
        s = (10.0 ** k.astype(float)).repeat(7)[:rows]
        Z *= s[:, None]
        y *= s
    elif kind != "gaussian":
        raise ValueError(f"unknown data kind {kind!r}")
    return Z, y, w


class _DataCache:
    """The last data set made (points sharing one are consecutive)."""

    def __init__(self):
        self.key, self.value = None, None

    def get(self, kind, N, D, rows):
        key = (kind, N, D, rows)
        if key != self.key:
            self.key, self.value = None, None  # free the old one first
            self.value = make_data(kind, N, D, rows)
            self.key = key
        return self.value


# ---------------------------------------------------------------------- the oracle
def weighted_window(Z, y, t, *, window_size, forgetting_factor, sample_weight=None):
    """``(W½Z, W½y)`` of the window of rows ``< t`` (weights ``λ^age`` times the sample
    weight)."""
    lo = max(0, t - window_size)
    if sample_weight is None:
        sw = np.sqrt(forgetting_factor) ** np.arange(t - lo - 1, -1, -1)
    else:
        sw = np.sqrt(forgetting_factor ** np.arange(t - lo - 1, -1, -1) * sample_weight[lo:t])
    return Z[lo:t] * sw[:, None], y[lo:t] * sw


def window_lstsq(Z, y, t, *, window_size, forgetting_factor, alpha, sample_weight=None):
    """The weighted window's least-squares (ridge) solution on rows ``< t`` from scratch,
    and the condition number of that problem (the test suite's oracle, copied)."""
    A, B = weighted_window(Z, y, t, window_size=window_size, forgetting_factor=forgetting_factor,
                           sample_weight=sample_weight)
    if A.shape[0] == 0:
        return np.zeros(Z.shape[1]), 1.0
    if alpha:
        nz = np.any(A != 0, axis=1)  # zero rows left out (they leak through rounding)
        U, s, Vt = np.linalg.svd(A[nz], full_matrices=False)
        beta = Vt.T @ ((s / (s * s + alpha)) * (U.T @ B[nz]))
        ev = np.concatenate([s * s, np.zeros(A.shape[0] - s.size)]) + alpha
        return beta, float(np.sqrt(ev.max() / ev.min()))
    beta, _, _, s = np.linalg.lstsq(A, B, rcond=None)
    s = s[s > EPS * max(A.shape) * s[0]] if s.size else s
    kappa = float(s[0] / s[-1]) if s.size else 1.0
    return beta, kappa


def oracle_steps(N, n_rows, k):
    """``k`` (or a few more) steps spread over the fill (``< N``) and full phases, with
    the phase boundaries and the ends."""
    n_fill = min(N, n_rows)
    half = max(1, k // 2) if n_rows > N else k
    fill = np.linspace(0, n_fill - 1, min(n_fill, half)).round().astype(int)
    keys = [1, N // 4, N - 1, N, N + 1, n_rows - 1]
    full = (np.linspace(N, n_rows - 1, min(n_rows - N, k - fill.size)).round().astype(int)
            if n_rows > N else np.array([], dtype=int))
    steps = set(fill.tolist()) | set(full.tolist()) | {t for t in keys if 0 <= t < n_rows}
    return sorted(steps)


def choose_steps(N, D, alpha, n_rows, budget):
    """Every step when the stream is short and the oracle cheap (``budget/20``), else a
    spread sample of at least 20 steps, as many as fit in ``budget/10`` (up to 60)."""
    if n_rows <= ALL_STEPS_ROWS:
        every = sum(oracle_step_seconds(min(t, N), D, alpha) for t in range(n_rows))
        if every <= budget / 20:
            return list(range(n_rows))
    per_step = oracle_step_seconds(N, D, alpha)
    k = int(np.clip(budget / 10 / per_step, MIN_ORACLE_STEPS, MAX_ORACLE_STEPS))
    return oracle_steps(N, n_rows, k)


def oracle_error(Z, y, w, pred, steps, *, N, lam, alpha):
    """Worst error of ``pred`` over ``steps`` in units of the bound, with its step."""
    o_pred = np.empty(len(steps))
    kappa = np.empty(len(steps))
    with np.errstate(all="ignore"):
        for i, t in enumerate(steps):
            beta, kappa[i] = window_lstsq(Z, y, t, window_size=N, forgetting_factor=lam,
                                          alpha=alpha, sample_weight=w)
            o_pred[i] = Z[t] @ beta
        scale = max(1.0, float(np.max(np.abs(o_pred))))
        bound = np.maximum(1e-9, 100 * EPS * kappa) * scale
        got = pred[np.asarray(steps)]
        err = np.abs(got - o_pred) / bound
    err = np.where(np.isfinite(err), err, np.inf)
    worst = int(np.argmax(err))
    out = {"error": float(err[worst]), "error_step": int(steps[worst]),
           "error_kappa": float(kappa[worst]), "kappa_max": float(np.max(kappa)),
           "oracle_scale": scale, "oracle_steps": len(steps),
           "oracle_steps_outside": int(np.sum(err > 1))}
    if err[worst] > 1:
        t = int(steps[worst])
        alt = other_exact_predictions(Z, y, w, t, N=N, lam=lam, alpha=alpha)
        out["oracle_spread"] = float(np.max(np.abs(alt - o_pred[worst])) / bound[worst])
    return out


def other_exact_predictions(Z, y, w, t, *, N, lam, alpha):
    """Step ``t``'s prediction by three other exact LAPACK routes: the SVD by ``gesvd``
    and by ``gesdd`` (lstsq's cut-off, or the ridge factors), and ``gelss``."""
    import scipy.linalg

    A, b = weighted_window(Z, y, t, window_size=N, forgetting_factor=lam, sample_weight=w)
    preds = []
    for driver in ("gesvd", "gesdd"):
        U, s, Vt = scipy.linalg.svd(A, full_matrices=False, lapack_driver=driver)
        if alpha:
            f = s / (s * s + alpha)
        else:
            f = np.where(s > EPS * max(A.shape) * s[0], 1.0 / np.where(s > 0, s, 1.0), 0.0)
        preds.append(Z[t] @ (Vt.T @ (f * (U.T @ b))))
    if not alpha:
        beta = scipy.linalg.lstsq(A, b, cond=EPS * max(A.shape), lapack_driver="gelss")[0]
        preds.append(Z[t] @ beta)
    return np.array(preds)


# ---------------------------------------------------------------------- timing
class _BudgetStop(BaseException):
    """Raised by the timer in a call that runs past a phase's budget (a BaseException,
    so that nothing on the way swallows it; the estimator rolls the call back)."""


def _alarm(signum, frame):
    raise _BudgetStop()


class _Deadline:
    """An interval timer raising :class:`_BudgetStop` after ``seconds`` (no-op where
    SIGALRM is unavailable or off the main thread)."""

    usable = hasattr(signal, "setitimer") and hasattr(signal, "SIGALRM")

    def __init__(self, seconds):
        self.seconds = max(1e-3, seconds)
        self.on = self.usable and threading.current_thread() is threading.main_thread()

    def __enter__(self):
        if self.on:
            self.old = signal.signal(signal.SIGALRM, _alarm)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
        return self

    def __exit__(self, *exc):
        if self.on:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.old)
        return False


def run_phase(reg, Z, y, w, a, b, pred, budget, first_call, rate, fed):
    """Feed rows ``a..b`` in timed calls within ``budget`` seconds; fills ``pred`` and
    ``fed[0]``, the rows of the completed calls.

    Returns ``(rows timed, seconds, calls, stopped)``: ``stopped`` is ``None`` or how
    the budget ended the phase (``"budget"`` between calls, ``"interrupted"`` inside one,
    whose seconds and rows are then counted).
    """
    from sklearn_orfit import prequential_predict

    grace = max(0.5, budget / 2)  # the phase's budget is half the point's: B/4
    done, spent, calls, size = a, 0.0, 0, min(first_call, b - a)
    while done < b:
        left = budget - spent
        if done > a and left <= 0:
            return done - a, spent, calls, {"how": "budget", "rows_done": done - a}
        if done > a and rate:
            size = min(size, max(1, int(left / rate)))
        hi = min(done + max(1, size), b)
        kw = {} if w is None else {"sample_weight": w[done:hi]}
        t0 = time.perf_counter()
        try:
            with _Deadline(left + grace):
                out = prequential_predict(reg, Z[done:hi], y[done:hi], **kw)
        except _BudgetStop:
            dt = time.perf_counter() - t0
            return (done - a + (hi - done), spent + dt, calls + 1,
                    {"how": "interrupted", "rows_done": done - a,
                     "unfinished_call_rows": hi - done, "unfinished_call_seconds": dt})
        dt = time.perf_counter() - t0
        pred[done:hi] = out
        fed[0] = hi
        rate = dt / (hi - done)
        spent += dt
        calls += 1
        done = hi
        size = CALL_ROWS
    return done - a, spent, calls, None


def route_info(reg):
    """What the estimator exposes of its routes (attributes read with getattr), and the
    class of its solver."""
    info = {}
    for attr in ROUTE_ATTRS:
        try:
            value = getattr(reg, attr)
        except Exception:  # absent, or not fitted
            continue
        if value is not None:
            info[attr] = dict(value) if isinstance(value, dict) else value
    solver = reg.__dict__.get("_solver")
    if solver is not None:
        info["solver"] = type(solver).__name__
    return info


def floor_us(Z, N, D):
    """One ``Zwin @ z``: the ``N×D`` window (its last ``D`` rows when ``D < N``) times the
    next row; best of 5 rounds, µs."""
    m = min(N, D)
    Zwin = np.ascontiguousarray(Z[N - m:N])
    z = np.ascontiguousarray(Z[min(N, Z.shape[0] - 1)])
    t0 = time.perf_counter()
    for _ in range(10):
        Zwin @ z
    one = max((time.perf_counter() - t0) / 10, 1e-7)
    repeat = int(np.clip(0.01 / one, 5, 20000))

    def rounds():
        for _ in range(repeat):
            Zwin @ z

    return best_of(rounds, 5) / repeat * 1e6


def warm_up():
    """A few short streams through the routes, untimed (first-call costs: imports,
    caches), before the first point."""
    from sklearn_orfit import QREWRLSRegressor, prequential_predict

    rng = np.random.default_rng(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for N, D, lam, alpha in [(20, 8, 1.0, 0.0), (20, 40, 0.9, 1e-3), (40, 8, 1.0, 0.0),
                                 (40, 80, 0.999, 0.0), (40, 80, 0.9, 1e-3)]:
            Z = rng.standard_normal((3 * N, D))
            y = rng.standard_normal(3 * N)
            w = (rng.random(3 * N) > 0.2).astype(float)
            for weights in (None, w):
                reg = QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha)
                kw = {} if weights is None else {"sample_weight": weights}
                prequential_predict(reg, Z, y, **kw)


def run_point(p, cache, budget, oracle_budget):
    """One point of the sweep (module docstring); returns its record."""
    from sklearn_orfit import QREWRLSRegressor

    N, D, lam, alpha, kind = p["N"], p["D"], p["lam"], p["alpha"], p["data"]
    n_full = max(N, 200)
    rows = N + n_full
    rec = dict(p, rows_fill=N, full_rows_target=n_full, fill_rows_timed=0,
               full_rows_timed=0, us_fill=math.nan, us_full=math.nan, fill_lower_bound=False,
               full_lower_bound=False, stopped=None, exception=None, oracle_exception=None,
               route_fill={}, route={}, warnings=[])
    t_point = time.perf_counter()
    Z, y, w = cache.get(kind, N, D, rows)
    pred = np.full(rows, np.nan)
    fed = [0]  # rows of the completed calls
    phase, reg = "construct", None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            reg = QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha)
            phase = "fill"
            n, sec, calls, stop = run_phase(reg, Z, y, w, 0, N, pred, budget / 2, CALL_ROWS,
                                            None, fed)
            rec.update(fill_rows_timed=n, fill_seconds=sec, fill_calls=calls,
                       us_fill=1e6 * sec / max(n, 1), fill_lower_bound=stop is not None
                       and stop["how"] == "interrupted")
            rec["route_fill"] = route_info(reg)
            if stop is not None:
                rec["stopped"] = dict(stop, phase="fill")
            else:
                phase = "full"
                rate = sec / max(n, 1)
                n, sec, calls, stop = run_phase(reg, Z, y, w, N, rows, pred, budget / 2,
                                                FIRST_FULL_CALL, rate, fed)
                rec.update(full_rows_timed=n, full_seconds=sec, full_calls=calls,
                           us_full=1e6 * sec / max(n, 1), full_lower_bound=stop is not None
                           and stop["how"] == "interrupted")
                if stop is not None:
                    rec["stopped"] = dict(stop, phase="full")
            rec["route"] = route_info(reg)
        except Exception as exc:  # the sweep goes on
            tb = traceback.extract_tb(exc.__traceback__)
            where = next((f"{os.path.basename(f.filename)}:{f.lineno} in {f.name}"
                          for f in reversed(tb) if "sklearn_orfit" in f.filename), None)
            rec["exception"] = {"type": type(exc).__name__, "message": str(exc)[:500],
                                "phase": phase, "where": where,
                                "rows_learned": int(getattr(reg, "n_samples_seen_", 0) or 0)
                                if reg is not None else 0}
            if reg is not None:
                rec["route"] = route_info(reg)
    seen = {}
    for c in caught:
        key = f"{c.category.__name__}: {str(c.message)[:200]}"
        seen[key] = seen.get(key, 0) + 1
    rec["warnings"] = [{"warning": k, "count": v} for k, v in seen.items()]
    rec["floor_us"] = floor_us(Z, N, D)
    rec["ratio_fill"] = rec["us_fill"] / rec["floor_us"]
    rec["ratio_full"] = rec["us_full"] / rec["floor_us"]
    # the oracle, on the rows whose predictions are known (completed calls; also those
    # before an exception)
    known = rec["rows_fed"] = fed[0]
    rec.update(error=math.nan, outside_bound=False, oracle_steps=0)
    if known > 0:
        steps = choose_steps(N, D, alpha, known, oracle_budget)
        try:
            rec.update(oracle_error(Z, y, w, pred, steps, N=N, lam=lam, alpha=alpha))
            rec["outside_bound"] = bool(rec["error"] > 1)
        except Exception as exc:
            rec["oracle_exception"] = {"type": type(exc).__name__, "message": str(exc)[:300]}
    rec["peak_rss_mb"] = peak_rss_mib()
    rec["seconds"] = time.perf_counter() - t_point
    return rec


# ---------------------------------------------------------------------- reporting
def settings_of(r):
    return (f"N={r['N']} D={r['D']} λ={r['lam']:g} α={r['alpha']:g} {r['data']}")


def fmt(x, spec, lower=False):
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "—"
    return ("≥" if lower else "") + format(x, spec)


def point_line(r):
    exc = r["exception"]
    note = (f"EXCEPTION {exc['type']}: {exc['message'][:90]}" if exc else "")
    if r["stopped"]:
        s = r["stopped"]
        note += f" stopped in {s['phase']} ({s['how']}, {s['rows_done']} rows done)"
    if r["oracle_exception"]:
        note += f" oracle {r['oracle_exception']['type']}"
    route = r["route"]
    orth = route.get("n_orthogonal_windows_", "—")
    return (f"{r['N']:>5} {r['D']:>5} {r['lam']:>6g} {r['alpha']:>6g} {r['data']:>14} "
            f"{fmt(r['us_fill'], '.0f', r['fill_lower_bound']):>9} "
            f"{fmt(r['ratio_fill'], '.1f', r['fill_lower_bound']):>7} "
            f"{fmt(r['us_full'], '.0f', r['full_lower_bound']):>9} "
            f"{fmt(r['ratio_full'], '.1f', r['full_lower_bound']):>7} "
            f"{r['full_rows_timed']:>5} {r['floor_us']:>8.2f} {fmt(r['error'], '.2g'):>8} "
            f"{orth!s:>5} {route.get('solver', ''):>13} {r['seconds']:>5.1f} {note}")


HEADER = (f"{'N':>5} {'D':>5} {'λ':>6} {'α':>6} {'data':>14} {'fill µs':>9} {'×floor':>7} "
          f"{'full µs':>9} {'×floor':>7} {'rows':>5} {'floor µs':>8} {'error':>8} "
          f"{'orth':>5} {'solver':>13} {'s':>5} notes")


def worst(rows, key):
    vals = [r for r in rows if r.get(key) is not None and not math.isnan(r[key])]
    return max(vals, key=lambda r: r[key]) if vals else None


def summarise(rows, pruned, seconds):
    """The worst points, the counts, the exceptions and the targets."""
    summary = {"points": len(rows), "pruned": len(pruned), "seconds": seconds,
               "stopped": sum(r["stopped"] is not None for r in rows),
               "exceptions": sum(r["exception"] is not None for r in rows),
               "outside_bound": sum(bool(r["outside_bound"]) for r in rows),
               "oracle_exceptions": sum(r["oracle_exception"] is not None for r in rows)}
    for key in ("ratio_full", "ratio_fill", "error"):
        r = worst(rows, key)
        summary[f"worst_{key}"] = None if r is None else {
            "value": r[key], "settings": settings_of(r),
            "point": {k: r[k] for k in ("N", "D", "lam", "alpha", "data")},
            "lower_bound": bool(r.get({"ratio_full": "full_lower_bound",
                                       "ratio_fill": "fill_lower_bound"}.get(key, ""), False))}
    kinds = {}
    for r in rows:
        if r["exception"]:
            e = r["exception"]
            k = f"{e['type']}: {e['message']}"
            d = kinds.setdefault(k, {"type": e["type"], "message": e["message"], "count": 0,
                                     "first": settings_of(r), "phases": []})
            d["count"] += 1
            if e["phase"] not in d["phases"]:
                d["phases"].append(e["phase"])
    summary["exception_kinds"] = list(kinds.values())
    summary["outside_bound_points"] = [
        {"settings": settings_of(r), "error": r["error"], "step": r.get("error_step"),
         "kappa": r.get("error_kappa"), "oracle_spread": r.get("oracle_spread")}
        for r in rows if r["outside_bound"]]

    def value(key):
        w = summary[f"worst_{key}"]
        return math.nan if w is None else w["value"]

    summary["targets"] = [
        {"target": "worst ratio after the fill ≤ 5× the floor", "value": value("ratio_full"),
         "bound": TARGETS["ratio_full"]},
        {"target": "worst ratio during the fill ≤ 10× the floor", "value": value("ratio_fill"),
         "bound": TARGETS["ratio_fill"]},
        {"target": "no exception", "value": summary["exceptions"], "bound": 0},
        {"target": "no point outside the bound", "value": summary["outside_bound"], "bound": 0},
    ]
    for t in summary["targets"]:
        t["met"] = bool(t["value"] == t["value"] and t["value"] <= t["bound"])
    return summary


def print_summary(s):
    print()
    print(f"{s['points']} points run ({s['stopped']} stopped by the budget), {s['pruned']} "
          f"pruned, {s['seconds']:.0f} s")
    for key, label in (("ratio_full", "worst ratio after the fill"),
                       ("ratio_fill", "worst ratio during the fill"),
                       ("error", "worst error (units of the bound)")):
        w = s[f"worst_{key}"]
        if w is None:
            print(f"{label}: —")
        else:
            lower = "≥" if w["lower_bound"] else ""
            print(f"{label}: {lower}{w['value']:.3g} at {w['settings']}")
    print(f"exceptions: {s['exceptions']}")
    for e in s["exception_kinds"]:
        print(f"  {e['count']}× {e['type']}: {e['message'][:160]} (first: {e['first']}; "
              f"{', '.join(e['phases'])})")
    print(f"points outside the bound: {s['outside_bound']}")
    for o in s["outside_bound_points"][:20]:
        spread = o.get("oracle_spread")
        spread = "" if spread is None else f"; other exact solvers {spread:.3g} from the oracle"
        print(f"  {o['settings']}: error {o['error']:.3g} at step {o['step']} "
              f"(κ {o['kappa']:.2g}{spread})")
    if s["oracle_exceptions"]:
        print(f"oracle failures (not counted): {s['oracle_exceptions']}")
    print()
    for t in s["targets"]:
        verdict = "met" if t["met"] else ("not run" if t["value"] != t["value"] else "MISSED")
        print(f"target: {t['target']}: {t['value']:.3g} — {verdict}")


def package_info():
    """Where the ``sklearn_orfit`` measured was imported from, and its git commit when
    that folder is in a git checkout (``+`` when it has uncommitted changes)."""
    import subprocess

    import sklearn_orfit

    path = os.path.dirname(os.path.abspath(sklearn_orfit.__file__))
    commit = None
    try:
        rev = subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        if rev.returncode == 0:
            dirty = subprocess.run(["git", "-C", path, "status", "--porcelain", "--", "."],
                                   capture_output=True, text=True, timeout=10).stdout.strip()
            commit = rev.stdout.strip() + ("+" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        pass
    return {"path": path, "commit": commit}


def resolve_out(out):
    """``(folder, name)`` of the results: ``--out`` is a folder or a ``.json`` path."""
    if out is None:
        return None, NAME
    if out.endswith(".json"):
        return os.path.dirname(os.path.abspath(out)), os.path.basename(out)[:-5]
    return out, NAME


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a few points, < 1 minute")
    mode.add_argument("--full", action="store_true", help="the whole product (pruned)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds a point may take, half for each phase "
                             "(default 10; --quick 2)")
    parser.add_argument("--oracle-budget", type=float, default=None,
                        help="seconds the oracle of a point may be estimated to take "
                             "(default: --budget)")
    parser.add_argument("--limit", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=os.path.join(OUT, f"{NAME}.json")
                        if __name__ == "__main__" else None,
                        help="folder or .json path of the results "
                             "(default benchmarks/out/bench_solver_sweep.json)")
    args = parser.parse_args(argv)
    sweep = "quick" if args.quick else ("full" if args.full else "default")
    budget = args.budget if args.budget is not None else (2.0 if args.quick else 10.0)
    oracle_budget = args.oracle_budget if args.oracle_budget is not None else budget

    points = design(sweep)
    if args.limit:
        points = points[:args.limit]
    run, pruned = [], []
    for p in points:
        est = estimate(p)
        if (est["fill_s"] > budget / 2 or est["oracle_s"] > oracle_budget
                or est["memory_mb"] > 4096):
            pruned.append(dict(p, estimate=est))
        else:
            run.append(dict(p, estimate=est))

    package = package_info()
    ctx, _ = blas_threads(1)
    t_start = time.perf_counter()
    rows = []
    cache = _DataCache()
    with ctx:
        machine = machine_header()
        print(header_line(machine))
        print(f"# {sweep} sweep: {len(run)} points, {len(pruned)} pruned by the cost model; "
              f"budget {budget:g} s a point (half for each phase), oracle {oracle_budget:g} s; "
              f"calls of ≤ {CALL_ROWS} rows; one BLAS thread")
        print(f"# sklearn_orfit from {package['path']}"
              + (f" (commit {package['commit']})" if package["commit"] else ""))
        warm_up()
        print(HEADER, flush=True)
        for p in run:
            est = p.pop("estimate")
            r = run_point(p, cache, budget, oracle_budget)
            r["estimate"] = est
            rows.append(r)
            print(point_line(r), flush=True)
    seconds = time.perf_counter() - t_start
    if pruned:
        print(f"\npruned ({len(pruned)}): " + ", ".join(sorted(
            {f"N={q['N']} D={q['D']}" for q in pruned}, key=lambda s: tuple(
                int(x.split("=")[1]) for x in s.split())))
              )
    summary = summarise(rows, pruned, seconds)
    print_summary(summary)
    settings = {"sweep": sweep, "package": package, "budget_s": budget,
                "oracle_budget_s": oracle_budget,
                "blas_threads": 1, "call_rows": CALL_ROWS,
                "first_full_call": FIRST_FULL_CALL, "windows": WINDOWS, "lambdas": LAMBDAS,
                "alphas": ALPHAS, "data": DATA, "default_lambda": DEFAULT_LAM,
                "default_alpha": DEFAULT_ALPHA, "min_oracle_steps": MIN_ORACLE_STEPS,
                "targets": TARGETS,
                "cost_model": {"solver_unit": SOLVER_UNIT, "solver_row": SOLVER_ROW,
                               "lstsq_unit": LSTSQ_UNIT, "svd_unit": SVD_UNIT,
                               "oracle_step": ORACLE_STEP}}
    directory, name = resolve_out(args.out)
    path = write_results(name, {"settings": settings, "summary": summary, "rows": rows,
                                "pruned": pruned}, directory, header=machine)
    if path:
        print(f"\nresults: {path}")
    return {"settings": settings, "summary": summary, "rows": rows, "pruned": pruned}


if __name__ == "__main__":
    main()
