"""Soak: a 10⁶-step stream stays exact (deviation from the from-scratch oracle over time).

ABO synthetic series, 7 lags, RFF features, N = 20, D ∈ {8, 64} (D < N and D > N),
λ ∈ {1, 0.99}; ``--window 200 --features 64,256`` soaks the long-window block solvers. The stream is fed in calls of 100,000 rows; after each call the last
``--check`` prequential predictions are compared with ``numpy.linalg.lstsq`` on their
weighted windows, relative to ``max|ŷ|`` over those steps.

Run: ``python benchmarks/bench_soak.py`` (``--steps 100000`` for a shorter run,
``--solver givens`` for the paper's recursion, ``--window 200 --features 64,256`` for
long windows).
"""

import argparse
import os
import time

import numpy as np

from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures, prequential_predict
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, write_results,
)
from sklearn_orfit.datasets import make_abo_series, make_lagged

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def oracle_pred(Z, y, t, lam, N):
    lo = max(0, t - N)
    sw = np.sqrt(lam) ** np.arange(t - lo - 1, -1, -1)
    beta = np.linalg.lstsq(Z[lo:t] * sw[:, None], y[lo:t] * sw, rcond=None)[0]
    return Z[t] @ beta


def soak(D, lam, steps, check, solver, chunk, N):
    x = make_abo_series(steps + 7, random_state=1)
    X, y = make_lagged(x, 7)
    Z = RandomFourierFeatures(D, sigma=1.0, random_state=1).fit_transform(X)
    reg = QREWRLSRegressor(N, forgetting_factor=lam, solver=solver)
    rows = []
    t0 = time.perf_counter()
    for start in range(0, len(y), chunk):
        stop = min(start + chunk, len(y))
        y_pred = prequential_predict(reg, Z[start:stop], y[start:stop])
        ts = range(max(N, start, stop - check), stop)
        ref = np.array([oracle_pred(Z, y, t, lam, N) for t in ts])
        ours = y_pred[[t - start for t in ts]]
        rows.append((stop, np.abs(ours - ref).max() / np.abs(ref).max()))
    return rows, time.perf_counter() - t0, reg.n_orthogonal_windows_


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=1_000_000)
    p.add_argument("--check", type=int, default=1000, help="steps compared per checkpoint")
    p.add_argument("--solver", default="auto", choices=["auto", "givens", "svd"])
    p.add_argument("--window", type=int, default=20, help="N")
    p.add_argument("--features", default="8,64", help="comma-separated D values")
    p.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                   help="folder of the results' JSON (default benchmarks/out)")
    args = p.parse_args(argv)
    chunk = max(1, min(100_000, args.steps // 10))
    worst_final = 0.0
    results = []
    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()
        print(header_line(header))
        for D in map(int, args.features.split(",")):
            for lam in (1.0, 0.99):
                rows, secs, n_orth = soak(D, lam, args.steps, args.check, args.solver, chunk, args.window)
                trace = "  ".join(f"{t // 1000}k:{e:.1e}" for t, e in rows)
                print(f"N={args.window} D={D:>3} λ={lam:<5} solver={args.solver}: {secs:6.1f} s, "
                      f"orthogonal windows {n_orth}; max rel. deviation per checkpoint: {trace}")
                worst_final = max(worst_final, rows[-1][1])
                results.append({"window_size": args.window, "D": D, "lambda": lam,
                                "solver": args.solver, "seconds": secs,
                                "orthogonal_windows": n_orth,
                                "checkpoints": [{"step": t, "max_rel_dev": e}
                                                for t, e in rows]})
    verdict = "PASS" if worst_final <= 1e-9 else "FAIL"
    print(f"final {args.check} steps: worst relative deviation {worst_final:.2e} "
          f"(target ≤ 1e-9): {verdict}")
    settings = {"steps": args.steps, "check": args.check, "solver": args.solver,
                "window_size": args.window, "features": args.features, "chunk": chunk,
                "blas_threads": 1}
    write_results("bench_soak", {"settings": settings, "runs": results,
                                 "worst_final": worst_final}, args.out, header=header)
    return worst_final


if __name__ == "__main__":
    main()
