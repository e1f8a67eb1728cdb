"""Cost of one SW-KRLS update against the floor of an O(N²) step, N = 100 … 3000.

The floor of one row is what any exact O(N²) step must at least do: one N×N
matrix-vector product (``M @ v``, float64, C order) and one kernel row (``N`` Gaussian
kernel evaluations against ``d``-dimensional rows). Both are measured in the same run,
interleaved with the updates (``SlidingWindowKRLSRegressor.prequential_predict`` on a
block of rows, the vectorised path; ``partial_fit`` one row per call, the one-row path),
with BLAS limited to one thread. Printed per window size ``N``: µs per update on each
path, the floor, their ratio, the log-log slope of the update cost in ``N`` (from the
previous ``N``), and the peak resident memory of the process so far.

Command::

    python benchmarks/bench_sw_krls_scaling.py [--n-features 10] [--repeats 5]
"""

import argparse
import os
import time

import numpy as np

from sklearn_orfit import SlidingWindowKRLSRegressor
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, peak_rss_mib, time_calls, write_results,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

WINDOWS = (100, 300, 1000, 3000)
# rows timed per repeat on the vectorised / one-row path: about 0.1–0.5 s each
BLOCK_ROWS = {100: 2000, 300: 1000, 1000: 300, 3000: 40}
ONE_ROW_CALLS = {100: 500, 300: 300, 1000: 100, 3000: 15}


def _floor_seconds(N, d, *, length_scale, rng, inner):
    """Median time of ``M @ v`` plus one kernel row, over ``inner`` calls."""
    M = rng.normal(size=(N, N))
    v = rng.normal(size=N)
    W = rng.normal(size=(N, d))
    x = rng.normal(size=d)
    scale = -1.0 / (2.0 * length_scale**2)

    def floor():
        M @ v
        diff = W - x
        np.exp(np.einsum("ij,ij->i", diff, diff) * scale)

    floor()
    return float(np.median(time_calls(floor, inner)))


def run(*, n_features, repeats, seed=0):
    rng = np.random.default_rng(seed)
    length_scale = float(np.sqrt(n_features))
    rows = []
    for N in WINDOWS:
        n_block, n_one = BLOCK_ROWS[N], ONE_ROW_CALLS[N]
        n_total = N + repeats * (n_block + n_one)
        X = rng.normal(size=(n_total, n_features))
        y = np.sin(X.sum(axis=1)) + 0.1 * rng.normal(size=n_total)
        reg = SlidingWindowKRLSRegressor(N, length_scale=length_scale, alpha=1e-2)
        reg.fit(X[:N], y[:N])  # fill the window (not timed)
        t, block, one, floor = N, [], [], []
        for _ in range(repeats):
            floor.append(_floor_seconds(N, n_features, length_scale=length_scale, rng=rng,
                                        inner=max(5, n_block // 4)))
            t0 = time.perf_counter()
            reg.prequential_predict(X[t : t + n_block], y[t : t + n_block])
            block.append((time.perf_counter() - t0) / n_block)
            t += n_block
            t0 = time.perf_counter()
            for i in range(t, t + n_one):
                reg.partial_fit(X[i : i + 1], y[i : i + 1])
            one.append((time.perf_counter() - t0) / n_one)
            t += n_one
        rows.append((N, np.median(block), np.median(one), np.median(floor), peak_rss_mib(),
                     reg.n_refactorizations_))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-features", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(f"d = {args.n_features}, median of {args.repeats} interleaved repeats\n")
        rows = run(n_features=args.n_features, repeats=args.repeats)
    print(f"{'N':>5} {'update µs':>10} {'one-row µs':>11} {'floor µs':>9} {'ratio':>6} "
          f"{'slope':>6} {'peak RSS MiB':>13}")
    prev = None
    for N, block, one, floor, rss, _ in rows:
        slope = "" if prev is None else f"{np.log(block / prev[1]) / np.log(N / prev[0]):.2f}"
        print(f"{N:>5} {block * 1e6:>10.1f} {one * 1e6:>11.1f} {floor * 1e6:>9.1f} "
              f"{block / floor:>6.2f} {slope:>6} {rss:>13.0f}")
        prev = (N, block)
    Ns = np.array([r[0] for r in rows], dtype=float)
    cost = np.array([r[1] for r in rows])
    slope = float(np.polyfit(np.log(Ns), np.log(cost), 1)[0])
    print(f"\nlog-log slope of the update cost over N = {int(Ns[0])}…{int(Ns[-1])}: "
          f"{slope:.2f} (2 for O(N²))")
    print("ratio = vectorised update / floor (M @ v + one kernel row), same run")
    settings = {"n_features": args.n_features, "repeats": args.repeats, "windows": WINDOWS,
                "blas_threads": 1}
    keys = ("window_size", "update_s", "one_row_s", "floor_s", "peak_rss_mib",
            "n_refactorizations")
    write_results("bench_sw_krls_scaling", {
        "settings": settings, "rows": [dict(zip(keys, r)) for r in rows],
        "slope": slope}, args.out, header=header)
    return rows


if __name__ == "__main__":
    main()
