"""ORFit with unlimited memory: time per row against the Gram–Schmidt floor, as k grows.

Setting: ``ORFitRegressor(memory_size=None)`` (the default ``"pca"`` memory) learns a stream
of standard-normal rows one at a time through ``learn_one``, at ``p ∈ {512, 2048, 8192}``
features, one BLAS thread. Every row adds a direction until ``k = p`` (at ``p = 512`` the
later rows are spanned). Checkpoints at ``{250, 1000, 4000}`` rows are the stream lengths:
the first ``t`` rows of the long stream are the stream of length ``t``.

Printed per checkpoint, all measured in the same run:

* ``mean µs/row`` — the whole stream so far, divided by its length;
* ``last µs/row`` — the last 5 % of the rows before the checkpoint, i.e. at ``k`` close to
  its value there;
* ``floor µs`` — one matrix–vector product pair with a ``k×p`` matrix at that ``k``,
  ``c = Uᵀg`` and ``U c``: the projection every step must do (best of 20);
* ``× floor`` — ``last / floor``;
* ``slope`` — the log-log slope of ``last µs/row`` against ``k`` from the previous
  checkpoint (1 for a cost linear in ``k``; only while ``k < p``);
* ``peak RSS`` — the process's peak resident memory so far (each ``p`` runs in its own
  process, so the figure is that of the stream alone, plus Python and numpy).

Each ``p`` also reports ``fit`` on the first 1,000 rows (scikit-learn's API, one call).

Regenerate with ``python benchmarks/bench_orfit_scaling.py`` (``--quick``: ``p ≤ 2048``,
1,000 rows).
"""

import argparse
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

from sklearn_orfit import ORFitRegressor
from sklearn_orfit.utils.benchmarking import (
    best_of, blas_threads, header_line, machine_header, peak_rss_mib, write_results,
)
from sklearn_orfit.exceptions import SpannedBatchWarning

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

CHECKPOINTS = (250, 1000, 4000)


def _floor(k, p, rng, repeats=20):
    """Best time of ``c = U g``, ``U.T @ c`` on a C-ordered ``k×p`` matrix (the basis's layout)."""
    U = rng.normal(size=(k, p))
    g = rng.normal(size=p)
    return best_of(lambda: (U @ g) @ U, repeats)


def worker(p, n_rows):
    """One ``p``: stream ``n_rows`` rows, report each checkpoint as JSON lines."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n_rows, p))
    y = rng.normal(size=n_rows)
    checkpoints = [t for t in CHECKPOINTS if t <= n_rows]
    with threadpool_limits(limits=1), warnings.catch_warnings():
        # past k = p the rows are spanned and their random labels cannot all be fitted
        warnings.simplefilter("ignore", SpannedBatchWarning)
        t0 = time.perf_counter()
        ORFitRegressor().fit(X[: min(n_rows, 1000)], y[: min(n_rows, 1000)])
        t_fit = time.perf_counter() - t0
        print(json.dumps({"p": p, "fit_rows": min(n_rows, 1000), "fit_s": t_fit}), flush=True)

        est = ORFitRegressor()
        est.partial_fit(X[:1], y[:1])
        done, elapsed = 1, 0.0
        for t in checkpoints:
            tail = max(1, t // 20)
            t0 = time.perf_counter()
            for i in range(done, t - tail):
                est.learn_one(X[i], y[i])
            t1 = time.perf_counter()
            for i in range(max(done, t - tail), t):
                est.learn_one(X[i], y[i])
            t2 = time.perf_counter()
            elapsed += t2 - t0
            n_tail = t - max(done, t - tail)
            done = t
            k = min(t, p)
            rss = peak_rss_mib()
            floor = _floor(k, p, rng)
            row = {
                "p": p,
                "rows": t,
                "k": k,
                "mean_us": 1e6 * elapsed / t,
                "last_us": 1e6 * (t2 - t1) / n_tail,
                "floor_us": 1e6 * floor,
                "rss_mb": rss,
            }
            print(json.dumps(row), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="p ≤ 2048, 1,000 rows")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    parser.add_argument("--worker", type=int, nargs=2, metavar=("P", "ROWS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        worker(*args.worker)
        return
    sizes = (512, 2048) if args.quick else (512, 2048, 8192)
    n_rows = 1000 if args.quick else max(CHECKPOINTS)

    ctx, _ = blas_threads(1)
    with ctx:
        machine = machine_header()
    print("ORFit, memory_size=None: µs per row (learn_one) against the floor "
          "(Uᵀg and U(Uᵀg) at k), one BLAS thread")
    print(header_line(machine))
    print()
    header = (f"{'p':>6}{'rows':>7}{'k':>7}{'mean µs/row':>13}{'last µs/row':>13}"
              f"{'floor µs':>10}{'× floor':>9}{'slope':>7}{'peak RSS':>11}")
    print(header)
    fits, rows = [], []
    for p in sizes:
        out = subprocess.run(
            [sys.executable, __file__, "--worker", str(p), str(n_rows)],
            check=True, capture_output=True, text=True,
        ).stdout
        prev = None
        for line in out.splitlines():
            row = json.loads(line)
            if "fit_s" in row:
                fits.append(row)
                continue
            slope = "—"
            if prev is not None and row["k"] > prev["k"]:
                ratio = np.log(row["last_us"] / prev["last_us"])
                slope = f"{ratio / np.log(row['k'] / prev['k']):.2f}"
            print(f"{p:>6}{row['rows']:>7}{row['k']:>7}{row['mean_us']:>13.1f}"
                  f"{row['last_us']:>13.1f}{row['floor_us']:>10.1f}"
                  f"{row['last_us'] / row['floor_us']:>9.2f}{slope:>7}"
                  f"{row['rss_mb']:>8.0f} MB")
            rows.append(row)
            prev = row
    print()
    for row in fits:
        print(f"fit on {row['fit_rows']} rows, p = {row['p']}: {row['fit_s']:.2f} s")
    settings = {"sizes": sizes, "n_rows": n_rows, "checkpoints": CHECKPOINTS,
                "quick": args.quick, "blas_threads": 1}
    write_results("bench_orfit_scaling", {"settings": settings, "rows": rows, "fits": fits},
                  args.out, header=machine)


if __name__ == "__main__":
    main()
