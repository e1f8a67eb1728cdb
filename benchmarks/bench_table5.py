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
import os

import numpy as np

from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures, prequential_predict
from sklearn_orfit._experiments import (
    TABLE5_CPP_MS, TABLE5_SETTING, _timed_chunked, _timed_one_row, best_of, blas_threads,
    header_line, machine_header, write_results,
)
from sklearn_orfit.datasets import make_abo_series, make_lagged

N, N_LAGS, STEPS = (TABLE5_SETTING[k] for k in ("window_size", "n_lags", "n_steps"))
WARMUP = 50
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def best_ms(fn, repeat):
    return best_of(fn, repeat) * 1e3


def bench_width(D, X, y, repeat, rows_sklearn, givens):
    rff = RandomFourierFeatures(D, sigma=1.0, random_state=0).fit(X[:WARMUP])
    Xw, yw, Xs, ys = X[:WARMUP], y[:WARMUP], X[WARMUP:WARMUP + STEPS], y[WARMUP:WARMUP + STEPS]

    def fresh():
        return QREWRLSRegressor(N).fit(rff.transform(Xw), yw)

    # the two paths the command line's speed sweep times (sklearn-orfit speed)
    t_chunk = best_ms(_timed_chunked(rff, [fresh() for _ in range(repeat)], Xs, ys), repeat)
    t_one = best_ms(_timed_one_row(rff, [fresh() for _ in range(repeat)], Xs, ys), repeat)

    def sklearn_api(reg):
        for i in range(rows_sklearn):
            z = rff.transform(Xs[i : i + 1])
            reg.predict(z)
            reg.partial_fit(z, ys[i : i + 1])

    regs = [fresh() for _ in range(repeat)]
    t_sk = best_ms(lambda: sklearn_api(regs.pop()), repeat) * STEPS / rows_sklearn

    A, b, s = rff.random_weights_, rff.random_offset_, np.sqrt(2.0 / D)
    Zw = rff.transform(Xw[-N:])  # an N×D window, as the floor's matrix

    def floor():
        for x in Xs:
            z = np.cos(x @ A + b) * s
            Zw @ z

    t_floor = best_ms(floor, repeat)
    t_givens = np.nan
    if givens:
        g = QREWRLSRegressor(N, solver="givens").fit(rff.transform(Xw), yw)
        t_givens = best_ms(lambda: prequential_predict(g, rff.transform(Xs), ys), 1)
    return t_chunk, t_one, t_sk, t_floor, t_givens


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D up to 2**10, fewer repeats")
    parser.add_argument("--givens", action="store_true", help="also time solver='givens'")
    parser.add_argument("--max-width", type=int, default=None, help="largest D to time")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    x = make_abo_series(WARMUP + STEPS + N_LAGS + 1, random_state=0)
    X, y = make_lagged(x, N_LAGS)
    widths = [2**k for k in range(1, 11 if args.quick else 15)]
    if args.max_width:
        widths = [w for w in widths if w <= args.max_width]
    repeat = 2 if args.quick else 3
    ctx, _ = blas_threads(1)
    rows = []
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(f"# N={N}, {N_LAGS} lags, {STEPS} predict+update steps, times in ms per {STEPS} steps")
        head = f"{'D':>6} {'chunked':>9} {'one-row':>9} {'sklearn':>9} {'C++':>9} {'C++/chunk':>9} {'chunk/floor':>11} {'floor':>8} {'us/step 1row':>12}"
        if args.givens:
            head += f" {'givens':>9}"
        print(head)
        for D in widths:
            rows_sk = 200 if D <= 1024 else 50
            t_chunk, t_one, t_sk, t_floor, t_g = bench_width(D, X, y, repeat, rows_sk, args.givens)
            cpp = TABLE5_CPP_MS[D]
            line = (
                f"{D:>6} {t_chunk:9.2f} {t_one:9.2f} {t_sk:9.2f} {cpp:9.2f} "
                f"{cpp / t_chunk:9.1f} {t_chunk / t_floor:11.2f} {t_floor:8.2f} "
                f"{t_one / STEPS * 1e3:12.1f}"
            )
            if args.givens:
                line += f" {t_g:9.1f}"
            print(line, flush=True)
            rows.append({"D": D, "chunked_ms": t_chunk, "one_row_ms": t_one, "sklearn_ms": t_sk,
                         "cpp_ms": cpp, "floor_ms": t_floor, "givens_ms": t_g})
    settings = {"window_size": N, "n_lags": N_LAGS, "n_steps": STEPS, "warmup": WARMUP,
                "repeat": repeat, "quick": args.quick, "givens": args.givens,
                "blas_threads": 1}
    write_results("bench_table5", {"settings": settings, "rows": rows}, args.out,
                  header=header)
    return rows


if __name__ == "__main__":
    main()
