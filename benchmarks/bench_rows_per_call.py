"""Cost per row of ``QREWRLSRegressor`` against the number of rows per call.

A stream is often learned as it arrives, one row (or a few) per call. This script times
the same stream fed in calls of ``k`` rows, ``k`` in {1, 10, 250}: ``prequential_predict``
(predict each row, then learn it) and ``partial_fit`` (learn only), and, for ``k = 1``,
``predict_one`` + ``learn_one`` (the single-observation path). The window is filled
first (``N`` rows, not timed); then ``ROWS`` further rows are timed, one BLAS thread
(threadpoolctl), the implementations of a configuration alternating round by round,
the best of ``--repeat`` rounds kept. The floor is one ``N×D`` matrix–vector product
(``D×D`` when ``D < N``), measured in the same process.

It prints µs per row, the ratio of each call size to calls of 250 rows, and the ratio
to the floor, and writes ``benchmarks/out/bench_rows_per_call.json``::

    python benchmarks/bench_rows_per_call.py            # about 2 minutes
    python benchmarks/bench_rows_per_call.py --quick    # one round, fewer rows

Configurations: Gaussian rows, ``(N, D, λ, α)`` in ``(20, 64, 1, 0)`` (the short-window
solver), ``(100, 64, 0.99, 0)`` (the primal route), ``(200, 1024, 1, 1e-6)`` and
``(1000, 4096, 1, 0)`` (the dual route).
"""

import os
import time

import numpy as np

from sklearn_orfit import QREWRLSRegressor, prequential_predict
from sklearn_orfit.utils.benchmarking import (
    best_of, blas_threads, header_line, machine_header, parse_rounds,
    write_results,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
CONFIGS = [(20, 64, 1.0, 0.0), (100, 64, 0.99, 0.0), (200, 1024, 1.0, 1e-6), (1000, 4096, 1.0, 0.0)]
SIZES = (1, 10, 250)


def make_stream(N, D, rows, seed=0):
    rng = np.random.default_rng(seed)
    Z = rng.standard_normal((N + rows, D))
    y = Z @ (rng.standard_normal(D) / np.sqrt(D)) + 0.1 * rng.standard_normal(N + rows)
    return Z, y


def run(N, D, lam, alpha, Z, y, how, k):
    """Seconds per timed row of one way of feeding the rows after the first ``N``."""
    reg = QREWRLSRegressor(window_size=N, forgetting_factor=lam, alpha=alpha).partial_fit(Z[:N], y[:N])
    T = Z.shape[0]
    t0 = time.perf_counter()
    if how == "one":
        for t in range(N, T):
            reg.predict_one(Z[t])
            reg.learn_one(Z[t], y[t])
    else:
        step = prequential_predict if how == "prequential" else (lambda r, A, b: r.partial_fit(A, b))
        for a in range(N, T, k):
            step(reg, Z[a : a + k], y[a : a + k])
    return (time.perf_counter() - t0) / (T - N)


def floor_seconds(Z, N, D, reps=2000):
    """One ``N×D`` matrix–vector product (``D×D`` when ``D < N``), best of 5 rounds."""
    M = Z[:N] if D >= N else Z[:D, :D] @ Z[:D, :D].T
    v = Z[N - 1].copy() if D >= N else Z[N - 1, :D].copy()

    def products():
        for _ in range(reps):
            M @ v

    return best_of(products, 5) / reps


def main(argv=None):
    repeat, rows, out = parse_rounds(argv, __doc__.split("\n")[0], OUT, repeat=3, rows=300, quick_rows=100)
    ways = [("prequential", k) for k in SIZES] + [("partial_fit", k) for k in SIZES] + [("one", 1)]
    results = []
    ctx, describe = blas_threads(1)
    with ctx:
        header = machine_header()  # inside the limit: it records one BLAS thread
        print(header_line(header))
        for N, D, lam, alpha in CONFIGS:
            Z, y = make_stream(N, D, rows)
            floor = floor_seconds(Z, N, D)
            best = {w: float("inf") for w in ways}
            for _ in range(repeat):
                for how, k in ways:
                    best[(how, k)] = min(best[(how, k)], run(N, D, lam, alpha, Z, y, how, k))
            print(f"\nN = {N}, D = {D}, λ = {lam}, α = {alpha}; floor {floor * 1e6:.2f} µs")
            print(f"  {'calls':28s} {'µs/row':>9s} {'× 250-row calls':>16s} {'× floor':>9s}")
            for how, k in ways:
                ref = best[("partial_fit" if how == "partial_fit" else "prequential", 250)]
                label = "predict_one + learn_one" if how == "one" else f"{how}, {k} rows"
                us = best[(how, k)] * 1e6
                print(f"  {label:28s} {us:9.1f} {best[(how, k)] / ref:16.1f} {best[(how, k)] / floor:9.1f}")
                results.append({"N": N, "D": D, "lam": lam, "alpha": alpha, "how": how, "rows_per_call": k,
                                "us_per_row": us, "ratio_to_250": best[(how, k)] / ref,
                                "floor_us": floor * 1e6, "ratio_to_floor": best[(how, k)] / floor})
    path = write_results("bench_rows_per_call", {"rows": rows, "repeat": repeat, "points": results},
                         out, header=header)
    if path:
        print(f"\nwritten {path}")


if __name__ == "__main__":
    main()
