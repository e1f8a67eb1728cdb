"""How the cost of the default solver's refinement route grows with the window.

Windows whose Gram condition estimate lies between 1e6 and 1e9 take one step of
refinement against their rows (the user guide's *Numerics near the threshold*). Smooth
features at ``D = N`` with a small ridge put most windows there: the ABO synthetic
series, 7 lags, random Fourier features (σ = 0.5, ``D = N``), ``α = 1e-6``, ``λ`` 1 and
0.999. The window is filled first (``N + 16`` rows, not timed), then ``max(200, N/2)``
prequential updates in calls of 250 rows are timed, one BLAS thread. The floor is one
``N×N`` matrix–vector product, measured in the same process. Each configuration runs in
its own process, so the peak RSS printed is its own.

It prints µs per update, the ratio to the floor, the orthogonal windows (0: every window
on the fast or refinement route), the peak RSS, and the log-log slope of the cost against
``N`` between neighbouring sizes (the claimed cost is ``O(N·D + N²)`` a row: slope 2 at
``D = N``)::

    python benchmarks/bench_refinement_scaling.py      # about 20 seconds
"""

import argparse
import json
import math
import subprocess
import sys
import time

SIZES = (100, 200, 400, 800)
SETTINGS = ((1.0, 1e-6), (0.999, 1e-6))


def child(N, lam, alpha):
    from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures, prequential_predict
    from sklearn_orfit.datasets import make_abo_series, make_lagged
    from sklearn_orfit.utils.benchmarking import best_of, blas_threads, peak_rss_mib

    rows = N + 16 + max(200, N // 2)
    X, y = make_lagged(make_abo_series(rows + 7, random_state=0), 7)
    Z = RandomFourierFeatures(N, sigma=0.5, random_state=0).fit_transform(X)[:rows]
    y = y[:rows]
    ctx, _ = blas_threads(1)
    with ctx:
        reg = QREWRLSRegressor(window_size=N, forgetting_factor=lam, alpha=alpha)
        prequential_predict(reg, Z[: N + 16], y[: N + 16])
        t0 = time.perf_counter()
        for a in range(N + 16, rows, 250):
            prequential_predict(reg, Z[a : a + 250], y[a : a + 250])
        us = (time.perf_counter() - t0) / (rows - N - 16) * 1e6
        M, v = Z[:N], Z[N].copy()

        def products():
            for _ in range(1000):
                M @ v

        floor = best_of(products, 5) / 1000 * 1e6
    print(json.dumps({"N": N, "lam": lam, "alpha": alpha, "us": us, "floor_us": floor,
                      "orthogonal": int(reg.n_orthogonal_windows_), "peak_mib": peak_rss_mib()}))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(int(args.child[0]), float(args.child[1]), float(args.child[2]))
        return
    from sklearn_orfit.utils.benchmarking import blas_threads, header_line, machine_header

    ctx, _ = blas_threads(1)
    with ctx:
        print(header_line(machine_header()))
    for lam, alpha in SETTINGS:
        print(f"\nλ = {lam}, α = {alpha}, D = N, RFF σ = 0.5")
        print(f"  {'N':>5s} {'µs/update':>10s} {'floor µs':>9s} {'× floor':>8s} {'orthogonal':>11s} "
              f"{'peak MiB':>9s} {'slope':>6s}")
        first = prev = None
        for N in SIZES:
            out = subprocess.run([sys.executable, __file__, "--child", str(N), str(lam), str(alpha)],
                                 capture_output=True, text=True, check=True).stdout
            r = json.loads(out.strip().splitlines()[-1])
            slope = "" if prev is None else f"{math.log(r['us'] / prev['us']) / math.log(N / prev['N']):.2f}"
            print(f"  {N:5d} {r['us']:10.0f} {r['floor_us']:9.2f} {r['us'] / r['floor_us']:8.1f} "
                  f"{r['orthogonal']:11d} {r['peak_mib']:9.0f} {slope:>6s}")
            first, prev = first or r, r
        print(f"  slope {first['N']}…{prev['N']}: {math.log(prev['us'] / first['us']) / math.log(prev['N'] / first['N']):.2f}"
              f" (floor {math.log(prev['floor_us'] / first['floor_us']) / math.log(prev['N'] / first['N']):.2f})")

if __name__ == "__main__":
    main()
