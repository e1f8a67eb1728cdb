"""ABO Table 5 speed setting: ms per 1000 predict+update steps, ours vs the authors' C++.

Synthetic ABO series, 7 lags, window N = 20, λ = 1, σ = 1, D = 2¹ … 2¹⁴, one BLAS thread.
Every time includes the random-feature map of the rows. Columns:

* ``chunked``  — ``prequential_predict`` on a ``RandomFourierFeatures → QREWRLSRegressor``
  chain over 1000 rows (the vectorised path);
* ``one-row``  — the single-observation path: ``transform_one``, ``predict_one``,
  ``learn_one`` per row;
* ``sklearn``  — the scikit-learn API per row: ``transform``, ``predict``, ``partial_fit``
  on one-row arrays (full input validation each call);
* ``C++``      — the authors' figure (ABO paper §3.8, i7-1370P, single thread);
* ``floor``    — measured here: per row, one RFF row and one ``N×D`` matrix-vector
  product, the least any exact method of this kind must do.

Run: ``python benchmarks/bench_table5.py`` (``--quick`` stops at D = 2¹⁰; ``--givens`` adds
the paper's recursion, one row at a time).
"""

import argparse
import platform
import time

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures, prequential_predict
from sklearn_orfit.datasets import make_abo_series, make_lagged

CPP_MS = {
    2: 6.11, 4: 6.25, 8: 7.59, 16: 9.22, 32: 13.25, 64: 19.79, 128: 36.00, 256: 64.30,
    512: 438.02, 1024: 887.13, 2048: 1495.53, 4096: 2699.60, 8192: 5508.04, 16384: 11971.30,
}
N, N_LAGS, STEPS, WARMUP = 20, 7, 1000, 50


def best_of(fn, repeat):
    best = np.inf
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best * 1e3  # ms


def bench_width(D, X, y, repeat, rows_sklearn, givens):
    rff = RandomFourierFeatures(D, sigma=1.0, random_state=0).fit(X[:WARMUP])
    Xw, yw, Xs, ys = X[:WARMUP], y[:WARMUP], X[WARMUP:WARMUP + STEPS], y[WARMUP:WARMUP + STEPS]

    def fresh():
        return QREWRLSRegressor(N).fit(rff.transform(Xw), yw)

    regs = [fresh() for _ in range(repeat)]

    def chunked():
        prequential_predict(regs.pop(), rff.transform(Xs), ys)

    t_chunk = best_of(chunked, repeat)

    def one_row(reg):
        for x, target in zip(Xs, ys):
            z = rff.transform_one(x)
            reg.predict_one(z)
            reg.learn_one(z, target)

    regs = [fresh() for _ in range(repeat)]
    t_one = best_of(lambda: one_row(regs.pop()), repeat)

    def sklearn_api(reg):
        for i in range(rows_sklearn):
            z = rff.transform(Xs[i : i + 1])
            reg.predict(z)
            reg.partial_fit(z, ys[i : i + 1])

    regs = [fresh() for _ in range(repeat)]
    t_sk = best_of(lambda: sklearn_api(regs.pop()), repeat) * STEPS / rows_sklearn

    A, b, s = rff.random_weights_, rff.random_offset_, np.sqrt(2.0 / D)
    Zw = rff.transform(Xw[-N:])  # an N×D window, as the floor's matrix

    def floor():
        for x in Xs:
            z = np.cos(x @ A + b) * s
            Zw @ z

    t_floor = best_of(floor, repeat)
    t_givens = np.nan
    if givens:
        g = QREWRLSRegressor(N, solver="givens").fit(rff.transform(Xw), yw)
        t_givens = best_of(lambda: prequential_predict(g, rff.transform(Xs), ys), 1)
    return t_chunk, t_one, t_sk, t_floor, t_givens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D up to 2**10, fewer repeats")
    parser.add_argument("--givens", action="store_true", help="also time solver='givens'")
    parser.add_argument("--max-width", type=int, default=None, help="largest D to time")
    args = parser.parse_args(argv)
    x = make_abo_series(WARMUP + STEPS + N_LAGS + 1, random_state=0)
    X, y = make_lagged(x, N_LAGS)
    widths = [2**k for k in range(1, 11 if args.quick else 15)]
    if args.max_width:
        widths = [w for w in widths if w <= args.max_width]
    repeat = 2 if args.quick else 3
    with threadpool_limits(limits=1):
        blas = [f"{i['internal_api']} {i.get('version')} ({i['num_threads']} thread)" for i in threadpool_info()]
        print(f"# {platform.processor() or platform.machine()}, numpy {np.__version__}, BLAS: {'; '.join(blas)}")
        print(f"# N={N}, {N_LAGS} lags, {STEPS} predict+update steps, times in ms per {STEPS} steps")
        head = f"{'D':>6} {'chunked':>9} {'one-row':>9} {'sklearn':>9} {'C++':>9} {'C++/chunk':>9} {'chunk/floor':>11} {'floor':>8} {'us/step 1row':>12}"
        if args.givens:
            head += f" {'givens':>9}"
        print(head)
        for D in widths:
            rows_sk = 200 if D <= 1024 else 50
            t_chunk, t_one, t_sk, t_floor, t_g = bench_width(D, X, y, repeat, rows_sk, args.givens)
            line = (
                f"{D:>6} {t_chunk:9.2f} {t_one:9.2f} {t_sk:9.2f} {CPP_MS[D]:9.2f} "
                f"{CPP_MS[D] / t_chunk:9.1f} {t_chunk / t_floor:11.2f} {t_floor:8.2f} "
                f"{t_one / STEPS * 1e3:12.1f}"
            )
            if args.givens:
                line += f" {t_g:9.1f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
