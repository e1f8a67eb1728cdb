"""ORFit speed: time per streamed row against the cost floor of the PCA memory update.

Setting (issue "ORFitRegressor"): ``p = 2**14`` random Fourier features of 7-dimensional
inputs, memory ``m = 32`` (incremental PCA), 1,000 rows learned one at a time, one BLAS
thread. The floor, measured in the same run, is the one product every step of the
paper's algorithm must do: a ``p×(m+1)`` by ``(m+1)×(m+1)`` matrix product (the rotation
of the memory ``U ← [U g̃/‖g̃‖] Ũ``), written into a preallocated output. Target: ≤ 3× the
floor per step.

Timed paths (best of ``--repeats`` interleaved rounds with the floor, each from the
same fitted state):

* ``prequential_predict`` — one call for all rows (input validated once);
* ``predict_one + learn_one`` — the single-row API, one call pair per row;
* ``predict + partial_fit`` — scikit-learn's API, one call pair per row.

Regenerate with ``python benchmarks/bench_orfit_speed.py`` (``--quick`` for 200 rows).
"""

import argparse
import os

import numpy as np

from sklearn_orfit import ORFitRegressor, RandomFourierFeatures
from sklearn_orfit.utils.benchmarking import (
    best_of, blas_threads, header_line, machine_header, write_results,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-features", type=int, default=2**14)
    parser.add_argument("--memory-size", type=int, default=32)
    parser.add_argument("--n-rows", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="200 rows, 2 repeats")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_rows, args.repeats = 200, 2
    p, m, n = args.n_features, args.memory_size, args.n_rows

    rng = np.random.default_rng(0)
    inputs = rng.uniform(-1, 1, size=(2 * m + n, 7))
    rff = RandomFourierFeatures(n_components=p, sigma=1.0, random_state=0).fit(inputs)
    Z = rff.transform(inputs)
    y = np.sin(3 * inputs).sum(axis=1)
    Z_warm, y_warm, Z_run, y_run = Z[: 2 * m], y[: 2 * m], Z[2 * m :], y[2 * m :]

    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()
        # a full memory before timing: the steady state of the stream
        base = ORFitRegressor(memory_size=m)
        base.partial_fit(Z_warm[:1], y_warm[:1])
        for i in range(1, 2 * m):
            base.learn_one(Z_warm[i], y_warm[i])
        assert base.components_.shape == (m, p)

        # floor: one p×(m+1) by (m+1)×(m+1) product per step, into a preallocated output
        A = np.ascontiguousarray(rng.normal(size=(p, m + 1)))
        B = rng.normal(size=(m + 1, m + 1))
        out = np.empty((p, m + 1))

        def floor():
            for _ in range(n):
                np.matmul(A, B, out=out)

        def run_prequential():
            est = _copy(base)
            est.prequential_predict(Z_run, y_run)

        def run_one():
            est = _copy(base)
            for i in range(n):
                est.predict_one(Z_run[i])
                est.learn_one(Z_run[i], y_run[i])

        def run_partial_fit():
            est = _copy(base)
            for i in range(n):
                est.predict(Z_run[i : i + 1])
                est.partial_fit(Z_run[i : i + 1], y_run[i : i + 1])

        floor()  # warm the BLAS and the allocator
        # interleaved rounds, best of each: the floor and the paths see the same load
        paths = {
            "prequential_predict (one call)": run_prequential,
            "predict_one + learn_one": run_one,
            "predict + partial_fit": run_partial_fit,
        }
        best = dict.fromkeys(["floor", *paths], np.inf)
        for _ in range(args.repeats):
            best["floor"] = min(best["floor"], best_of(floor, 1) / n)
            for name, fn in paths.items():
                best[name] = min(best[name], best_of(fn, 1) / n)
        t_floor = best.pop("floor")
        rows = list(best.items())

    print(f"ORFit speed: p = {p}, m = {m}, {n} rows one at a time (memory full), "
          f"best of {args.repeats}")
    print(header_line(header))
    print()
    print(f"{'path':<34}{'ms / step':>11}{'× floor':>9}")
    print(f"{'floor: (p×(m+1)) @ ((m+1)×(m+1))':<34}{1e3 * t_floor:>11.3f}{1.0:>9.2f}")
    for name, t in rows:
        print(f"{name:<34}{1e3 * t:>11.3f}{t / t_floor:>9.2f}")
    verdict = "met" if rows[0][1] / t_floor <= 3.0 else "NOT met"
    print(f"\ntarget ≤ 3× floor for the streaming path (prequential_predict): {verdict}")
    settings = {"n_features": p, "memory_size": m, "n_rows": n, "repeats": args.repeats,
                "quick": args.quick, "blas_threads": 1}
    write_results("bench_orfit_speed", {
        "settings": settings, "floor_ms": 1e3 * t_floor,
        "rows": [{"path": k, "ms_per_step": 1e3 * t, "over_floor": t / t_floor}
                 for k, t in rows]}, args.out, header=header)
    return t_floor, rows


def _copy(est):
    import pickle

    return pickle.loads(pickle.dumps(est))


if __name__ == "__main__":
    main()
