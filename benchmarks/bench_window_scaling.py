"""How the cost of an update grows with the window: µs per update and peak memory.

ABO synthetic series, 7 lags, random Fourier features (σ = 1), ``alpha = 1e-6`` (so
that windows are well posed at every width; the route a window takes is printed), one
BLAS thread. For each configuration the model first learns ``N`` rows (the window fills),
then prequential updates (``prequential_predict`` in calls of 500 rows; the features are
computed outside the timing) are timed: ``max(--updates, P)``, with ``P`` the period of the
solver's periodic work — ``N`` for the default solver (a new core factor every block, the
Gram matrix recomputed from the window every ``N`` rows or sooner), ``max(4N, 256)`` for
SW-KRLS (its inverse recomputed from the window) — so that this work is counted at its
amortised rate, as a cost per update is meant; ``--periods`` (default 3) such runs follow
one another on the same stream and the best is the figure (the floor is likewise the best
of its rounds; the median is printed beside it). The paper's recursion, at seconds a row
for long windows, times ``--updates / 10`` (its refresh is triggered by a drift probe, not
by a count of rows).
Beside it, measured in the same process: the *floor*, one feature row
(``transform_one``) plus one ``N×D`` (``D×D`` when ``D < N``) matrix–vector product —
the least an exact update of this kind touches. Each configuration runs in its own
process, so the peak RSS printed is that configuration's own.

Sweeps: ``N ∈ {20, 50, 100, 300, 1000, 3000}`` at ``D = 4096``; ``N ∈ {500, 5000}`` at
``D ∈ {256, 1024}``; for ``QREWRLSRegressor`` (default solver and the paper's
``"givens"`` recursion) and ``SlidingWindowKRLSRegressor`` (floor: one ``N×N``
matrix–vector product plus a kernel row). Then the memory check: ``fit`` of 20,000 rows
with ``N = 2000``, ``D = 1024``.

Run: ``python benchmarks/bench_window_scaling.py`` (about 15 minutes; ``--quick`` for a
shorter sweep). Results are also written to ``benchmarks/out/bench_window_scaling.json``.
"""

import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np

from sklearn_orfit.utils.benchmarking import (
    best_of, blas_threads, header_line, machine_header, peak_rss_mib, write_results,
)

D_BIG = 4096
SWEEP_BIG = [20, 50, 100, 300, 1000, 3000]
SWEEP_SMALL = {256: [500, 5000], 1024: [500, 5000]}
# the paper's recursion is a Python loop over 2N rotations a row: its warm-up alone
# (N rows) takes minutes beyond this window
GIVENS_MAX_N = 1000
# rows a timed prequential_predict call takes
CALL_ROWS = 500
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
peak_rss_mb = peak_rss_mib


def series(n_rows):
    from sklearn_orfit.datasets import make_abo_series, make_lagged

    x = make_abo_series(n_rows + 7, random_state=0)
    return make_lagged(x, 7)


def best_floor(fn, repeat=200):
    """Seconds per call of ``fn``: the best of 5 rounds of ``repeat`` calls."""

    def round_of_calls():
        for _ in range(repeat):
            fn()

    return best_of(round_of_calls, 5) / repeat


def run_one(model, D, N, updates, periods=1):
    """One configuration, in this process: µs per update, floor, route, peak RSS.

    ``periods`` runs of ``updates`` consecutive updates are timed (one stream); the best
    is the figure, as the floor's is the best of its rounds.
    """
    from threadpoolctl import threadpool_limits

    from sklearn_orfit import (
        QREWRLSRegressor,
        RandomFourierFeatures,
        SlidingWindowKRLSRegressor,
        prequential_predict,
    )

    X, y = series(N + updates * periods)
    with threadpool_limits(1):
        if model == "swkrls":
            reg = SlidingWindowKRLSRegressor(N, length_scale=1.0, alpha=1e-2)
            features = None
        else:
            rff = RandomFourierFeatures(D, sigma=1.0, random_state=0).fit(X[:1])
            features = rff.transform
            reg = QREWRLSRegressor(N, alpha=1e-6, solver="givens" if model == "givens" else "auto")
        prequential_predict(reg, X[:N] if features is None else features(X[:N]), y[:N])
        # the timed updates, in calls of CALL_ROWS rows whose features are computed
        # outside the timing (and never held all at once: the peak RSS is the model's)
        per_period = []
        for k in range(periods):
            elapsed = 0.0
            start = N + k * updates
            for a in range(start, start + updates, CALL_ROWS):
                b = min(a + CALL_ROWS, start + updates)
                F = X[a:b] if features is None else features(X[a:b])
                t0 = time.perf_counter()
                prequential_predict(reg, F, y[a:b])
                elapsed += time.perf_counter() - t0
            per_period.append(elapsed / updates)
        per_update = min(per_period)
        # the floor: one feature row and one product with the window (or its D×D Gram)
        rng = np.random.default_rng(0)
        if model == "swkrls":
            M = rng.normal(size=(N, N))
            Xw = X[:N]
            x = X[N]

            def floor():
                np.exp(-0.5 * ((Xw - x) ** 2).sum(axis=1))
                M @ x[:1].repeat(N)
        else:
            M = rng.normal(size=(N, D)) if D >= N else rng.normal(size=(D, D))
            x = X[N]

            def floor():
                z = rff.transform_one(x)
                M @ (z if D >= N else z)

        t_floor = best_floor(floor)
        route = type(getattr(reg, "_solver", reg)).__name__
        n_orth = getattr(reg, "n_orthogonal_windows_", 0)
    return {
        "model": model, "D": D, "N": N, "updates": updates,
        "us_per_update": per_update * 1e6, "periods": periods,
        "us_per_update_median": float(np.median(per_period)) * 1e6, "floor_us": t_floor * 1e6,
        "ratio": per_update / t_floor, "route": route, "orthogonal_windows": int(n_orth),
        "peak_rss_mb": peak_rss_mb(),
    }


def run_memory_check():
    """``fit`` of 20,000 rows with N = 2000, D = 1024: peak RSS and time."""
    from threadpoolctl import threadpool_limits

    from sklearn_orfit import QREWRLSRegressor, RandomFourierFeatures

    X, y = series(20_000)
    Z = RandomFourierFeatures(1024, sigma=1.0, random_state=0).fit_transform(X)
    before = peak_rss_mb()
    with threadpool_limits(1):
        t0 = time.perf_counter()
        QREWRLSRegressor(2000).fit(Z, y)
        dt = time.perf_counter() - t0
    return {"check": "fit 20000 rows, N=2000, D=1024", "seconds": dt,
            "peak_rss_mb": peak_rss_mb(), "rss_before_fit_mb": before}


def child(args):
    cmd = [sys.executable, __file__, "--child", *map(str, args)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def slope(rows, lo, hi):
    pts = [(r["N"], r["us_per_update"]) for r in rows if lo <= r["N"] <= hi]
    if len(pts) < 2:
        return float("nan")
    n, t = np.log([p[0] for p in pts]), np.log([p[1] for p in pts])
    return float(np.polyfit(n, t, 1)[0])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N ≤ 1000 and fewer updates")
    parser.add_argument("--updates", type=int, default=300)
    parser.add_argument("--periods", type=int, default=3,
                        help="runs of the timed updates, one after another; the best counts")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        if args.child[0] == "memory":
            print(json.dumps(run_memory_check()))
        else:
            model, D, N, updates, *periods = args.child
            print(json.dumps(run_one(model, int(D), int(N), int(updates), *map(int, periods))))
        return None

    ctx, _ = blas_threads(1)  # the children set one thread themselves
    with ctx:
        machine = machine_header()
    print(header_line(machine))
    print(f"# ABO series, 7 lags, RFF σ=1, alpha=1e-6; after N warm-up rows, timed updates: "
          f"max({args.updates}, N) (SW-KRLS: max({args.updates}, 4N, 256); givens: "
          f"{max(20, args.updates // 10)}), {CALL_ROWS} rows a call; best of {args.periods} "
          f"such runs one after another (givens: one), median beside it")
    sweep_big = [n for n in SWEEP_BIG if not args.quick or n <= 1000]
    configs = [("auto", D_BIG, n) for n in sweep_big]
    configs += [("auto", D, n) for D, ns in SWEEP_SMALL.items() for n in ns if not args.quick or n <= 500]
    configs += [("givens", D_BIG, n) for n in sweep_big if n <= GIVENS_MAX_N]
    configs += [("givens", D, n) for D, ns in SWEEP_SMALL.items() for n in ns if n <= GIVENS_MAX_N]
    configs += [("swkrls", 0, n) for n in sweep_big]
    rows = []
    header = f"{'model':>7} {'D':>5} {'N':>5} {'µs/update':>10} {'median':>8} {'floor µs':>9} {'× floor':>8} {'peak MB':>8}  route"
    print(header)
    for model, D, N in configs:
        # at least one period of the solver's periodic work (module docstring), so that
        # it is counted at its amortised rate
        period = {"auto": N, "swkrls": max(4 * N, 256)}.get(model)
        updates = max(args.updates, period) if period else max(20, args.updates // 10)
        r = child([model, D, N, updates, args.periods if period else 1])
        rows.append(r)
        route = r["route"] + (f" ({r['orthogonal_windows']} orthogonal)" if r["orthogonal_windows"] else "")
        print(f"{model:>7} {D:>5} {N:>5} {r['us_per_update']:>10.0f} {r['us_per_update_median']:>8.0f} {r['floor_us']:>9.0f} "
              f"{r['ratio']:>8.2f} {r['peak_rss_mb']:>8.0f}  {route}", flush=True)
    auto_big = [r for r in rows if r["model"] == "auto" and r["D"] == D_BIG]
    sw = [r for r in rows if r["model"] == "swkrls"]
    summary = {
        "slope_auto_D4096_N100_3000": slope(auto_big, 100, 3000),
        "slope_floor_D4096_N100_3000": float(np.polyfit(
            np.log([r["N"] for r in auto_big if r["N"] >= 100]),
            np.log([r["floor_us"] for r in auto_big if r["N"] >= 100]), 1)[0]) if len(auto_big) > 2 else float("nan"),
        "slope_givens_D4096": slope([r for r in rows if r["model"] == "givens" and r["D"] == D_BIG], 100, 3000),
        "slope_swkrls_N100_3000": slope(sw, 100, 3000),
    }
    print()
    for k, v in summary.items():
        print(f"log-log slope {k}: {v:.2f}")

    def ratio(model, D, N):
        hit = [r["ratio"] for r in rows if (r["model"], r["D"], r["N"]) == (model, D, N)]
        return hit[0] if hit else float("nan")

    targets = [
        ("auto D=4096 N=1000 within 3× the floor", ratio("auto", 4096, 1000), 3.0),
        ("auto slope N=100…3000 at D=4096 ≤ 1.3", summary["slope_auto_D4096_N100_3000"], 1.3),
        ("auto D=256 N=5000 within 10× the floor", ratio("auto", 256, 5000), 10.0),
        ("SW-KRLS N=3000 within 3× its floor", ratio("swkrls", 0, 3000), 3.0),
    ]
    print()
    for name, value, bound in targets:
        verdict = "met" if value <= bound else ("not run" if value != value else f"MISSED by {value / bound:.2f}×")
        print(f"target: {name}: {value:.2f} — {verdict}")
    memory = None
    if not args.quick:
        memory = child(["memory"])
        print(f"\nmemory: {memory['check']}: {memory['seconds']:.1f} s, peak RSS {memory['peak_rss_mb']:.0f} MB "
              f"(before fit {memory['rss_before_fit_mb']:.0f} MB); target < 1024 MB")
    settings = {"updates": args.updates, "periods": args.periods, "quick": args.quick, "D_big": D_BIG,
                "sweep_big": sweep_big, "sweep_small": SWEEP_SMALL,
                "givens_max_n": GIVENS_MAX_N, "blas_threads": 1}
    write_results("bench_window_scaling", {
        "settings": settings, "rows": rows, "summary": summary, "memory": memory,
        "targets": [{"target": n, "value": v, "bound": b} for n, v, b in targets]},
        args.out, header=machine)
    return rows


if __name__ == "__main__":
    main()
