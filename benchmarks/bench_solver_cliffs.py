"""The settings where the default solver once fell off its fast routes, each against the
same window and width on a fast route, measured in one run.

Every row is one stream through ``QREWRLSRegressor(solver="auto")`` fed with
:func:`~sklearn_orfit.prequential_predict` in calls of up to 250 rows, one BLAS thread
(threadpoolctl). A row gives µs per update over the rows it times (``fill``: the first
rows of the stream, while the window fills; ``full``: rows after the window is full,
which is fed first without timing) for the setting and for its *reference*, the same
``N`` and ``D`` with the one difference undone, and their ratio; then the orthogonal
windows of the setting and of its reference (``n_orthogonal_windows_``). The ``before``
column is the figure these settings had when they were reported (0.1.0's first solver,
same machine type):

1. ridge with forgetting, ``D = 2048``, ``λ = 0.999, α = 0.1`` against ``λ = 1``, at
   ``N = 1000, 500, 200`` (full window);
2. ``α = 0`` with ``N ≈ D`` while filling: ``N = 2000, D = 2048``, random features of
   width ``σ = 0.25``, against ``α = 0.1``;
3. the fill phase of ``N = 500, D = 490`` (the primal regime while filling) against
   ``D = 500``: seconds for the first 500 rows;
4. ``N = 5000, D = 4096``, the first 200 rows, against ``D = 5000``: ms a row;
5. ``N = 200, D = 1024``, one zero ``sample_weight`` every 200 rows, against none;
6. ``N = 1000, D = 1024``, 30 % zero rows, against none: seconds for 2,000 rows after
   the fill.

Rows are random features (``RandomFourierFeatures(D, sigma)``, ``σ = 0.5`` unless said)
of 7 lags of ``make_abo_series``, targets its next value; the last case is repeated on
standard normal rows (``y = Zw/√D + 0.1·noise``): at ``N = 1000, D = 1024`` random
features put the reference itself at the interpolation threshold's orthogonal route.

Run: ``python benchmarks/bench_solver_cliffs.py`` (about 2 minutes; ``--out DIR``, default
``benchmarks/out``, receives ``bench_solver_cliffs.json``).
"""

import argparse
import os
import time

import numpy as np

from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures, prequential_predict
from sklearn_orfit.datasets import make_abo_series, make_lagged
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, write_results,
)

NAME = "bench_solver_cliffs"
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
CALL_ROWS = 250


def features(D, rows, sigma=0.5, data="rff"):
    if data == "gaussian":  # standard normal rows, y = Zw/√D + 0.1·noise
        rng = np.random.default_rng(D)
        Z = rng.standard_normal((rows, D))
        return Z, Z @ (rng.standard_normal(D) / np.sqrt(D)) + 0.1 * rng.standard_normal(rows)
    X, y = make_lagged(make_abo_series(rows + 7, random_state=0), 7)
    Z = RandomFourierFeatures(D, sigma=sigma, random_state=0).fit(X[:1]).transform(X)
    return np.ascontiguousarray(Z), np.asarray(y, dtype=np.float64)


def feed(reg, Z, y, w, a, b):
    """Learn rows ``a..b`` in calls of ``CALL_ROWS``; returns the seconds."""
    t0 = time.perf_counter()
    for lo in range(a, b, CALL_ROWS):
        hi = min(lo + CALL_ROWS, b)
        kw = {} if w is None else {"sample_weight": w[lo:hi]}
        prequential_predict(reg, Z[lo:hi], y[lo:hi], **kw)
    return time.perf_counter() - t0


def stream_us(N, D, *, lam=1.0, alpha=0.0, sigma=0.5, data="rff", phase="full", rows=None,
              zero_weight_every=None, zero_row_share=0.0):
    """µs per update of the timed rows, and the estimator's orthogonal windows."""
    rows = rows if rows is not None else (N if phase == "fill" else min(N, 500))
    start = 0 if phase == "fill" else N
    Z, y = features(D, start + rows, sigma, data)
    w = None
    if zero_weight_every:
        w = np.ones(start + rows)
        w[::zero_weight_every] = 0.0
    if zero_row_share:
        rng = np.random.default_rng(0)
        Z[rng.random(start + rows) < zero_row_share] = 0.0
    reg = QREWRLSRegressor(N, forgetting_factor=lam, alpha=alpha)
    if start:
        feed(reg, Z, y, w, 0, start)
    seconds = feed(reg, Z, y, w, start, start + rows)
    return seconds / rows * 1e6, int(reg.n_orthogonal_windows_)


#: (label, before, unit, setting, reference): keyword arguments of stream_us
CASES = [
    ("D=2048 N=1000 λ=0.999 α=0.1", 48600, "us", dict(N=1000, D=2048, lam=0.999, alpha=0.1),
     dict(N=1000, D=2048, alpha=0.1)),
    ("D=2048 N=500 λ=0.999 α=0.1", 4700, "us", dict(N=500, D=2048, lam=0.999, alpha=0.1),
     dict(N=500, D=2048, alpha=0.1)),
    ("D=2048 N=200 λ=0.999 α=0.1", 445, "us", dict(N=200, D=2048, lam=0.999, alpha=0.1),
     dict(N=200, D=2048, alpha=0.1)),
    ("D=2048 N=2000 α=0 σ=0.25, fill", 131000, "us",
     dict(N=2000, D=2048, sigma=0.25, phase="fill"),
     dict(N=2000, D=2048, sigma=0.25, alpha=0.1, phase="fill")),
    ("N=500 D=490, first 500 rows", 11.6, "s", dict(N=500, D=490, phase="fill"),
     dict(N=500, D=500, phase="fill")),
    ("N=5000 D=4096, first 200 rows", 66, "ms", dict(N=5000, D=4096, phase="fill", rows=200),
     dict(N=5000, D=5000, phase="fill", rows=200)),
    ("N=200 D=1024, a zero weight every 200 rows", 5500, "us",
     dict(N=200, D=1024, zero_weight_every=200, rows=1000), dict(N=200, D=1024, rows=1000)),
    ("N=1000 D=1024, 30 % zero rows, 2000 rows", 256, "s",
     dict(N=1000, D=1024, zero_row_share=0.3, rows=2000), dict(N=1000, D=1024, rows=2000)),
    ("the same, Gaussian rows", 256, "s",
     dict(N=1000, D=1024, data="gaussian", zero_row_share=0.3, rows=2000),
     dict(N=1000, D=1024, data="gaussian", rows=2000)),
]


def in_unit(us, unit, kw):
    """µs per update as the case's unit (seconds for all its rows, ms or µs a row)."""
    if unit == "s":
        rows = kw.get("rows") or (kw["N"] if kw.get("phase") == "fill" else min(kw["N"], 500))
        return us * rows / 1e6
    return us / 1e3 if unit == "ms" else us


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    ctx, _ = blas_threads(1)
    rows = []
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(f"{'setting':<44} {'unit':>4} {'before':>9} {'now':>9} {'reference':>9} "
              f"{'now/ref':>8} {'orth':>5} {'ref orth':>8}")
        for label, before, unit, setting, reference in CASES:
            us, orth = stream_us(**setting)
            us_ref, orth_ref = stream_us(**reference)
            now, ref = in_unit(us, unit, setting), in_unit(us_ref, unit, reference)
            print(f"{label:<44} {unit:>4} {before:9.4g} {now:9.4g} {ref:9.4g} "
                  f"{us / us_ref:8.2f} {orth:5d} {orth_ref:8d}", flush=True)
            rows.append({"setting": label, "unit": unit, "before": before, "now": now,
                         "reference": ref, "us_per_update": us, "us_reference": us_ref,
                         "ratio_to_reference": us / us_ref, "n_orthogonal_windows": orth,
                         "n_orthogonal_windows_reference": orth_ref,
                         "kwargs": setting, "reference_kwargs": reference})
    worst = max(rows, key=lambda r: r["ratio_to_reference"])
    print(f"worst ratio to its reference: {worst['ratio_to_reference']:.2f} ({worst['setting']})")
    write_results(NAME, {"rows": rows}, args.out, header=header)
    return rows


if __name__ == "__main__":
    main()
