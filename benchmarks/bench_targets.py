"""Cost per row of ``QREWRLSRegressor`` against the number of targets.

A forecaster of ``h`` steps ahead learns ``h`` targets at once (``LagTransformer(...,
horizon=h)``): one window, ``c = h`` columns of ``Y``. The work that depends on ``c``
is a window's right-hand sides and its predictions, ``O(N·c)`` a row, next to the
``O(N·D + N²)`` of the window itself; a route whose cost grows like ``c`` times its cost
for one target has a cliff there. This script times the same stream with ``c`` in
{1, 4, 24, 96} targets, on every route: the from-scratch solver (short windows, and
windows of a few features), the dual and primal block routes with and without a ridge
with forgetting, and a window at the interpolation threshold whose windows go to the
orthogonal route; and the two routes with a ridge and forgetting again with 30 % of
zero weights (a zero-weight row is predicted by the window before it), and again in
one-row calls (each call ends with the coefficients of its window, ``c`` columns: a
stream that arrives a row at a time pays that solve every row), with the dual route
without a ridge for comparison. The window is filled first (one call, not timed); then
``ROWS`` rows (100 in one-row calls) are timed in calls of 250 or 1
(``prequential_predict``), one BLAS thread (threadpoolctl),
the target counts of a configuration alternating round by round, the best of
``--repeat`` rounds kept.

It prints µs per row, the ratio to one target, the log-log slope of the cost against
``c`` (least squares over the four counts: 0 is free, 1 is proportional) and the peak
memory that one call allocates (tracemalloc), and writes
``benchmarks/out/bench_targets.json``::

    python benchmarks/bench_targets.py            # about half a minute
    python benchmarks/bench_targets.py --quick    # one round, fewer rows
"""

import os
import time
import tracemalloc

import numpy as np

from sklearn_orfit import QREWRLSRegressor, prequential_predict
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, parse_rounds, write_results,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
# (N, D, λ, α, what it exercises)
CONFIGS = [
    (20, 64, 0.9, 1e-3, "short window"),
    (200, 8, 0.99, 0.0, "few features, from scratch"),
    (400, 1024, 1.0, 0.0, "dual"),
    (400, 1024, 0.99, 1e-3, "dual, ridge with forgetting"),
    (500, 64, 0.99, 0.0, "primal"),
    (1000, 256, 0.99, 1e-3, "primal, ridge with forgetting"),
    (100, 100, 0.9, 1e-12, "N = D, orthogonal windows"),
    (400, 1024, 0.99, 1e-3, "dual, ridge with forgetting, 30 % zero weights"),
    (1000, 256, 0.99, 1e-3, "primal, ridge with forgetting, 30 % zero weights"),
    (400, 1024, 1.0, 0.0, "dual, one-row calls"),
    (400, 1024, 0.99, 1e-3, "dual, ridge with forgetting, one-row calls"),
    (1000, 256, 0.99, 1e-3, "primal, ridge with forgetting, one-row calls"),
]
ZERO_SHARE = 0.3  # of the configurations that say "zero weights"
TARGETS = (1, 4, 24, 96)
CALL = 250
ONE_ROW_ROWS = 100  # timed rows of the configurations in one-row calls (at most)


def call_rows(what):
    """Rows a timed call: 1 for the configurations that say "one-row calls"."""
    return 1 if "one-row calls" in what else CALL


def make_stream(N, D, rows, c, seed=0):
    """Random features of a noisy sine (``σ`` such that windows at ``N ≈ D`` are
    ill-conditioned, as real lagged series are) and ``c`` targets: the series ``1…c``
    steps ahead."""
    rng = np.random.default_rng(seed)
    T = N + rows + c + 8
    x = np.sin(0.07 * np.arange(T)) + 0.1 * rng.standard_normal(T)
    X = np.lib.stride_tricks.sliding_window_view(x, 8)[: N + rows]
    W = rng.standard_normal((8, D)) / 0.5
    Z = np.sqrt(2.0 / D) * np.cos(X @ W + rng.uniform(0, 2 * np.pi, D))
    Y = np.lib.stride_tricks.sliding_window_view(x[8:], c)[: N + rows]
    return np.ascontiguousarray(Z), np.ascontiguousarray(Y)


def zero_weights(rows, share, seed=1):
    """Sample weights with ``share`` of zeros (a zero-weight row is predicted, not
    learned), or None."""
    if not share:
        return None
    return (np.random.default_rng(seed).random(rows) >= share).astype(float)


def run(N, lam, alpha, Z, Y, w, call):
    """Seconds per timed row (calls of ``call`` rows), and the estimator after them."""
    reg = QREWRLSRegressor(window_size=N, forgetting_factor=lam, alpha=alpha)
    prequential_predict(reg, Z[:N], Y[:N], sample_weight=None if w is None else w[:N])
    t0 = time.perf_counter()
    for a in range(N, Z.shape[0], call):
        prequential_predict(reg, Z[a : a + call], Y[a : a + call],
                            sample_weight=None if w is None else w[a : a + call])
    return (time.perf_counter() - t0) / (Z.shape[0] - N), reg


def peak_mb(N, lam, alpha, Z, Y, w, call):
    """Peak memory (MB) allocated by one ``call``-row call after the fill."""
    reg = QREWRLSRegressor(window_size=N, forgetting_factor=lam, alpha=alpha)
    prequential_predict(reg, Z[:N], Y[:N], sample_weight=None if w is None else w[:N])
    tracemalloc.start()
    prequential_predict(reg, Z[N : N + call], Y[N : N + call],
                        sample_weight=None if w is None else w[N : N + call])
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak / 2**20


def slope(xs, ys):
    return float(np.polyfit(np.log(xs), np.log(ys), 1)[0])


def main(argv=None):
    repeat, rows, out = parse_rounds(argv, __doc__.split("\n")[0], OUT, repeat=2, rows=500, quick_rows=250)
    results = []
    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()  # inside the limit: it records one BLAS thread
        print(header_line(header))
        for N, D, lam, alpha, what in CONFIGS:
            call = call_rows(what)
            timed = rows if call > 1 else min(rows, ONE_ROW_ROWS)
            w = zero_weights(N + timed, ZERO_SHARE if "zero weights" in what else 0.0)
            streams = {c: (*make_stream(N, D, timed, c), w) for c in TARGETS}
            best = {c: float("inf") for c in TARGETS}
            orth = {}
            for _ in range(repeat):
                for c in TARGETS:
                    sec, reg = run(N, lam, alpha, *streams[c], call)
                    best[c] = min(best[c], sec)
                    orth[c] = int(reg.n_orthogonal_windows_)
            peaks = {c: peak_mb(N, lam, alpha, *streams[c], call) for c in TARGETS}
            k = slope(TARGETS, [best[c] for c in TARGETS])
            print(f"\nN = {N}, D = {D}, λ = {lam}, α = {alpha} ({what}): log-log slope {k:.2f}")
            print(f"  {'targets':>8s} {'µs/row':>9s} {'× 1 target':>11s} {'peak MB':>8s} {'orthogonal':>11s}")
            for c in TARGETS:
                us = best[c] * 1e6
                print(f"  {c:8d} {us:9.1f} {best[c] / best[1]:11.2f} {peaks[c]:8.1f} {orth[c]:11d}")
                results.append({"N": N, "D": D, "lam": lam, "alpha": alpha, "what": what, "call_rows": call, "targets": c,
                                "us_per_row": us, "ratio_to_one": best[c] / best[1], "slope": k,
                                "peak_mb": peaks[c], "n_orthogonal_windows": orth[c]})
    path = write_results("bench_targets", {"rows": rows, "repeat": repeat, "call_rows": CALL, "points": results},
                         out, header=header)
    if path:
        print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
