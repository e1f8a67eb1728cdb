"""Online aggregation of a grid of ABO and SW-KRLS experts against choosing one of them.

For each series, one :class:`~sklearn_orfit.AggregatingRegressor` (BOA, the default)
runs one prequential pass over the grid of :func:`~sklearn_orfit.make_expert_grid`
(ABO windows 50 to 2000, SW-KRLS windows 50 to 1000, two σ, α = 0 for ABO and 1e-2 for
SW-KRLS); its ``predictions_history_`` holds every expert's prequential prediction of
every row, from which the references are computed. Errors are mean squared errors on
the last 70 % of the rows (the "test" part), relative to the variance of the targets
there:

* ``aggregate (BOA)`` — the estimator's own prequential predictions;
* (a) ``best on first 30 %`` — the expert with the smallest error on the first 30 %,
  then used alone on the rest (a tuning phase; it is the same expert's prequential
  predictions, so it has learned the first 30 % too);
* (b) ``best in hindsight`` — the expert with the smallest test error (not available
  online: an oracle);
* (c) ``uniform average`` of all experts;
* (d) river's ``EWARegressor`` cannot wrap these experts (it needs river regressors with
  ``learn_one``/``predict_one``; river is not a dependency), so the fixed-rate EWA of
  this package over the same predictions, at several rates (the best rate in hindsight
  is reported too); ML-Poly too.

The aggregate's predictions are checked against the weight recursion rerun on its
``predictions_history_``.

Series:

* ``demand`` — first differences of the half-hourly England & Wales demand
  (:func:`~sklearn_orfit.datasets.load_electricity_demand`), recursively standardised
  (each value with the mean and standard deviation of the values before it), 10 lags;
* ``eurusd`` — daily EUR/USD log returns (ECB reference rates), the same preparation;
* ``switch`` — a synthetic stream whose best window changes mid-stream: ``y_t =
  sin(w·x_t) + 0.3 ε_t``, ``x_t ~ N(0, I_5)``; ``w`` is fixed for the first half (long
  windows are best) and redrawn every 100 rows in the second half (short windows are
  best).

Cost (one BLAS thread, threadpoolctl): on the first ``--cost-rows`` rows of ``demand``,
the sum of the experts' times (each expert's own ``prequential_predict``, run alone, a
fresh clone) against the aggregate without shared features (the same work plus the
aggregation), with shared features, and with ``n_jobs=2`` (threads and processes).
The machine may be shared: the times are the best of ``--repeats`` passes.

Usage::

    python benchmarks/bench_aggregation.py            # full run
    python benchmarks/bench_aggregation.py --quick    # small grid and series (~1 min)

The recorded file was made with the series in parallel processes, then merged::

    for s in demand eurusd switch; do
        python benchmarks/bench_aggregation.py --series $s --no-cost --json /tmp/$s.json &
    done
    python benchmarks/bench_aggregation.py --series --cost-rows 300 --repeats 2 \
        --json /tmp/cost.json
    wait
    python benchmarks/bench_aggregation.py --merge /tmp/demand.json /tmp/eurusd.json \
        /tmp/switch.json /tmp/cost.json

On a shared 2-core machine (load average 8 to 16) each series took 33 to 36 minutes of
wall-clock time; most of it waiting for a CPU (the cost run's processes had about a
tenth of the wall-clock time as CPU time).

The results go to ``benchmarks/out/bench_aggregation.json`` (``..._quick.json`` with
``--quick``).
"""

import argparse
import json
import os
import platform
import sys
import time

import numpy as np
import sklearn
from joblib import parallel_config
from sklearn.utils.parallel import Parallel, delayed
from sklearn.base import clone
from threadpoolctl import threadpool_info, threadpool_limits

import sklearn_orfit
from sklearn_orfit import (
    AggregatingRegressor, RecursiveStandardScaler, make_expert_grid, prequential_predict,
)
from sklearn_orfit.compose import aggregate_expert_predictions
from sklearn_orfit.datasets import load_electricity_demand, load_exchange_rates, make_lagged

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
TRAIN = 0.3  # the tuning part of every series
EWA_RATES = (0.1, 1.0, 10.0, 100.0)  # in units of the loss of y / loss_scale_


def grid_params(quick):
    if quick:
        return dict(abo_windows=(20, 100), sigmas=(0.5, 1.0), n_components=(128,),
                    krls_windows=(20, 100))
    return dict(abo_windows=(50, 200, 1000, 2000), sigmas=(0.5, 1.0), n_components=(1024,),
                krls_windows=(50, 200, 1000))


def real_series(name, n_lags, n_rows=None):
    if name == "demand":
        raw = np.diff(load_electricity_demand().data)
    else:
        raw = np.diff(np.log(load_exchange_rates("USD").data))
    if n_rows is not None:
        raw = raw[: n_rows + n_lags]
    # recursive standardisation: value t scaled with the values before it (no look-ahead)
    series = RecursiveStandardScaler().prequential_transform(raw[:, None])[:, 0]
    return make_lagged(series, n_lags=n_lags)


def switch_series(n, seed=0, d=5, period=100):
    """Fixed regression for the first half, a new one every ``period`` rows after."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    W = np.empty((n, d))
    half = n // 2
    W[:half] = rng.normal(size=d) / np.sqrt(d)
    for a in range(half, n, period):
        W[a : a + period] = rng.normal(size=d) / np.sqrt(d)
    y = np.sin(3.0 * np.einsum("nd,nd->n", X, W)) + 0.3 * rng.normal(size=n)
    return X, y


def load(name, quick):
    n_rows = 1200 if quick else None
    if name == "switch":
        return switch_series(1200 if quick else 4000)
    return real_series(name, n_lags=10, n_rows=n_rows)


def mse(a, b):
    return float(np.mean((a - b) ** 2))


def evaluate(name, X, y, grid, n_jobs):
    n = len(y)
    cut = int(TRAIN * n)
    test = slice(cut, n)
    agg = AggregatingRegressor(grid, history_size=None, n_jobs=n_jobs)
    t0 = time.perf_counter()
    y_agg = agg.prequential_predict(X, y)
    elapsed = time.perf_counter() - t0
    P = agg.predictions_history_  # (n, K)
    names = [k for k, _ in grid]
    var = float(np.var(y[test]))
    train_err = ((P[:cut] - y[:cut, None]) ** 2).mean(axis=0)
    test_err = ((P[test] - y[test, None]) ** 2).mean(axis=0)
    a, b = int(np.argmin(train_err)), int(np.argmin(test_err))
    # the recursion rerun on the stored predictions gives the estimator's predictions
    rerun, _ = aggregate_expert_predictions(P, y, method="boa", loss_scale=agg.loss_scale_)
    check = float(np.max(np.abs(rerun - y_agg)))

    def rule(method, lr=None):
        out, _ = aggregate_expert_predictions(P, y, method=method, learning_rate=lr,
                                              loss_scale=agg.loss_scale_)
        return out

    ewa = {lr: mse(rule("ewa", lr)[test], y[test]) for lr in EWA_RATES}
    best_lr = min(ewa, key=ewa.get)
    res = {
        "n_rows": n, "n_test": n - cut, "target_var": var,
        "aggregate (BOA)": mse(y_agg[test], y[test]),
        "(a) best on first 30%": float(test_err[a]), "(a) expert": names[a],
        "(b) best in hindsight": float(test_err[b]), "(b) expert": names[b],
        "(c) uniform average": mse(P[test].mean(axis=1), y[test]),
        "(d) EWA, eta=1": ewa[1.0],
        "(d) EWA, best eta in hindsight": ewa[best_lr], "(d) best eta": best_lr,
        "ML-Poly": mse(rule("mlpol")[test], y[test]),
        "zero forecast": float(np.mean(y[test] ** 2)),
        "expert test errors": dict(zip(names, map(float, test_err))),
        "final weights": dict(zip(names, map(float, agg.weights_))),
        "mean test weights": dict(zip(names, map(float, agg.weights_history_[test].mean(axis=0)))),
        "seconds": elapsed,
        "check |aggregate - rerun|": check,
    }
    res["beats (a)"] = res["aggregate (BOA)"] < res["(a) best on first 30%"]
    res["vs (b), %"] = 100.0 * (res["aggregate (BOA)"] / res["(b) best in hindsight"] - 1.0)
    return res


def best_time(fn, repeats):
    """Best wall-clock and best CPU seconds (this process, all its threads) of a call."""
    wall = cpu = float("inf")
    for _ in range(repeats):
        t0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall = min(wall, time.perf_counter() - t0)
        cpu = min(cpu, time.process_time() - c0)
    return wall, cpu


def cost(X, y, grid, repeats):
    """Seconds of the experts alone (summed) and of the aggregate, on the same rows.

    The overhead and the sharing gain are measured in CPU time of this process (on a
    shared machine, wall-clock time also counts the other users' load); the parallel
    speed-ups in wall-clock time (the CPU time of loky's workers is not this process's).
    """
    per_expert = {}
    for name, est in grid:
        per_expert[name] = best_time(lambda: prequential_predict(clone(est), X, y), repeats)
    out = {"rows": len(y), "experts": len(grid),
           "sum of experts, CPU s": sum(c for _, c in per_expert.values()),
           "sum of experts, wall s": sum(w for w, _ in per_expert.values()),
           "per expert, CPU s": {k: c for k, (_, c) in per_expert.items()}}
    runs = {
        "aggregate, no sharing": dict(share_features=False),
        "aggregate, shared features": dict(share_features=True),
    }
    for label, kw in runs.items():
        wall, cpu = best_time(
            lambda: AggregatingRegressor(grid, **kw).prequential_predict(X, y), repeats)
        out[label + ", CPU s"], out[label + ", wall s"] = cpu, wall
    for backend in ("threading", "loky"):
        with parallel_config(backend=backend):
            # start the workers first (loky's process start-up is not per call)
            Parallel(n_jobs=2)(delayed(abs)(i) for i in range(4))
            out[f"aggregate, shared, n_jobs=2 ({backend}), wall s"] = best_time(
                lambda: AggregatingRegressor(grid, n_jobs=2).prequential_predict(X, y),
                repeats)[0]
    # the weight recursion alone, on the same predictions
    agg = AggregatingRegressor(grid, history_size=None).fit(X, y)
    P = agg.predictions_history_[:, :, None]
    out["weight recursion alone, CPU s"] = best_time(
        lambda: aggregate_expert_predictions(P, y, method="boa", loss_scale=agg.loss_scale_),
        repeats)[1]
    total = out["sum of experts, CPU s"]
    out["overhead vs sum of experts (CPU), %"] = 100.0 * (
        out["aggregate, no sharing, CPU s"] / total - 1.0)
    out["weight recursion vs sum of experts (CPU), %"] = 100.0 * (
        out["weight recursion alone, CPU s"] / total)
    out["sharing gain (CPU), %"] = 100.0 * (
        1.0 - out["aggregate, shared features, CPU s"] / out["aggregate, no sharing, CPU s"])
    for backend in ("threading", "loky"):
        out[f"speed-up n_jobs=2 ({backend}, wall)"] = (
            out["aggregate, shared features, wall s"]
            / out[f"aggregate, shared, n_jobs=2 ({backend}), wall s"])
    return out


def print_table(results):
    cols = ["aggregate (BOA)", "(a) best on first 30%", "(b) best in hindsight",
            "(c) uniform average", "(d) EWA, eta=1", "(d) EWA, best eta in hindsight",
            "ML-Poly", "zero forecast"]
    print("\nTest MSE (last 70 % of each series) / variance of the test targets")
    print(f"{'':32s}" + "".join(f"{s:>10s}" for s in results))
    for c in cols:
        print(f"{c:32s}" + "".join(f"{r[c] / r['target_var']:10.4f}" for r in results.values()))
    print(f"{'aggregate beats (a)':32s}" + "".join(f"{str(r['beats (a)']):>10s}"
                                                  for r in results.values()))
    print(f"{'aggregate vs (b), %':32s}" + "".join(f"{r['vs (b), %']:10.1f}"
                                                  for r in results.values()))
    for s, r in results.items():
        print(f"{s}: (a) = {r['(a) expert']}, (b) = {r['(b) expert']}, best EWA rate "
              f"{r['(d) best eta']}, {r['seconds']:.0f} s, rerun check "
              f"{r['check |aggregate - rerun|']:.1e}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="small grid and series")
    parser.add_argument("--series", nargs="*", default=["demand", "eurusd", "switch"])
    parser.add_argument("--cost-rows", type=int, default=None)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--n-jobs", type=int, default=1,
                        help="joblib jobs over the experts for the accuracy runs")
    parser.add_argument("--no-cost", action="store_true")
    parser.add_argument("--out", default=OUT)
    parser.add_argument("--json", default=None,
                        help="output file (default: OUT/bench_aggregation[_quick].json)")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="only merge the series and cost of earlier runs' files")
    args = parser.parse_args(argv)
    path = args.json or os.path.join(
        args.out, "bench_aggregation_quick.json" if args.quick else "bench_aggregation.json")
    if args.merge:
        return merge(args.merge, path)
    grid = make_expert_grid(**grid_params(args.quick))
    blas = [(i.get("internal_api"), i.get("num_threads")) for i in threadpool_info()]
    print(f"sklearn-orfit {sklearn_orfit.__version__}, scikit-learn {sklearn.__version__}, "
          f"numpy {np.__version__}, {platform.machine()}, {os.cpu_count()} CPUs, BLAS {blas} "
          "(limited to 1 thread)")
    print(f"{len(grid)} experts: {[k for k, _ in grid]}")
    results = {}
    with threadpool_limits(1):
        for name in args.series:
            X, y = load(name, args.quick)
            results[name] = evaluate(name, X, y, grid, args.n_jobs)
            print(f"{name}: {len(y)} rows, {results[name]['seconds']:.1f} s", flush=True)
        costs = None
        if not args.no_cost:
            n_cost = args.cost_rows or (300 if args.quick else 1000)
            X, y = load("demand", args.quick)
            costs = cost(X[:n_cost], y[:n_cost], grid, args.repeats)
    print_table(results)
    if costs is not None:
        print(f"\nCost on {costs['rows']} rows of demand, {costs['experts']} experts "
              "(best of %d):" % args.repeats)
        for k, v in costs.items():
            if k != "per expert, CPU s" and k not in ("rows", "experts"):
                print(f"  {k:45s} {v:10.3f}")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    doc = {
        "command": "python benchmarks/bench_aggregation.py "
                   + " ".join(argv if argv is not None else sys.argv[1:]),
        "grid": [k for k, _ in grid], "train_fraction": TRAIN, "series": results,
        "cost": costs,
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "blas": blas},
    }
    with open(path, "w") as fh:
        json.dump(doc, fh, indent=1)
    print(f"\nwrote {path}")
    return doc


def merge(paths, path):
    """One file from runs of separate series (run in parallel processes) and the cost."""
    docs = [json.load(open(p)) for p in paths]
    out = dict(docs[0], command=[d["command"] for d in docs], series={}, cost=None)
    for d in docs:
        out["series"].update(d["series"])
        out["cost"] = d["cost"] or out["cost"]
    with open(path, "w") as fh:
        json.dump(out, fh, indent=1)
    print_table(out["series"])
    print(f"\nwrote {path}")
    return out


if __name__ == "__main__":
    main()
