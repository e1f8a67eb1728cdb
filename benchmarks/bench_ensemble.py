"""Feature-partition ensemble (ABO §6.4): speed-up of 2 workers over 1, and accuracy.

Setting of the issue: ``D = 2¹⁴`` random Fourier features in total, window ``N = 20``,
``λ = 1``, ``α = 0``, 4 partitions, chunks of 2,000 rows, one BLAS thread per process.

* **Speed** — two :class:`FeaturePartitionEnsemble` copies stream the same chunks of the
  ABO synthetic series (7 lags) with ``prequential_predict``: one with ``n_jobs=1``
  (sequential, in this process), one with ``n_jobs=2`` on joblib's loky backend
  (``inner_max_num_threads=1``: one BLAS thread per worker). Calls are interleaved chunk
  by chunk, after one untimed warm-up chunk (which also starts the worker processes), so
  that both see the same machine load. Reported: seconds per chunk and the median of the
  per-chunk ratios; the threading backend with 2 threads as a third run; the largest
  difference between the predictions of each run and the sequential one. Two "ceiling"
  rows time 4 equal pure-numpy tasks, no estimator, in this process and on 2 loky
  workers, between the chunks: the speed-up the machine allows at that moment (other
  jobs may hold the cores). The fixed cost of one call (20-row chunks) gives a model
  estimate for idle cores, printed as such.
* **Accuracy** — prequential ResMSE and ResVAR (ABO paper §3.3) of the 4-partition ensemble, of
  one full-width model on the same ``D = 2¹⁴`` draw, and of one partition alone
  (the ensemble's first block, ``D = 2¹²``), on the ABO synthetic series (10,500
  values, 7 lags, σ = 1, the last 10,000 rows scored) and on the bundled half-hourly
  electricity demand (first differences scaled by the standard deviation of the first
  500, 20 lags as in the ABO paper's real-data runs, σ = 1/√20 (not tuned; see the
  README), rows after the first 500 scored).

Run: ``python benchmarks/bench_ensemble.py`` (``--quick``: ``D = 2¹²``, fewer rows and
rounds — checks that the script runs, the numbers mean little).
"""

import argparse
import os
import time

import joblib
import numpy as np
from threadpoolctl import threadpool_info

from sklearn_orfit import FeaturePartitionEnsemble, QREWRLSRegressor, RandomFourierFeatures
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, time_calls, write_results,
)
from sklearn_orfit.datasets import load_electricity_demand, make_abo_series, make_lagged
from sklearn_orfit.metrics import res_mse, res_var

N, N_PARTITIONS, CHUNK = 20, 4, 2000
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def _blas_threads():
    return sorted({(p["internal_api"], p["num_threads"]) for p in threadpool_info()})


def _worker_blas_threads(n_jobs):
    from sklearn.utils.parallel import Parallel, delayed

    return Parallel(n_jobs=n_jobs)(delayed(_blas_threads)() for _ in range(n_jobs))


def _ceiling_task(*, n, reps):
    """Pure numpy work, no Python loop: what one core does for a partition's share."""
    a = np.linspace(0.0, 1.0, n)
    for _ in range(reps):
        b = np.cos(a)
    return float(b[-1])


def _ceiling(n_jobs, n):
    """Wall time of 4 equal compute tasks on ``n_jobs`` loky workers (1: in this process)."""
    from sklearn.utils.parallel import Parallel, delayed

    t0 = time.perf_counter()
    if n_jobs == 1:
        for _ in range(N_PARTITIONS):
            _ceiling_task(n=n, reps=2)
    else:
        Parallel(n_jobs=n_jobs)(
            delayed(_ceiling_task)(n=n, reps=2) for _ in range(N_PARTITIONS)
        )
    return time.perf_counter() - t0


def _ensemble(D, n_jobs, sigma=1.0):
    return FeaturePartitionEnsemble(
        RandomFourierFeatures(D, sigma=sigma, random_state=0),
        QREWRLSRegressor(window_size=N),
        n_partitions=N_PARTITIONS,
        n_jobs=n_jobs,
    )


def bench_speed(D, X, y, n_chunks):
    chunks = [slice(k * CHUNK, (k + 1) * CHUNK) for k in range(n_chunks + 1)]
    if chunks[-1].stop > X.shape[0]:
        raise ValueError(f"need {chunks[-1].stop} rows, have {X.shape[0]}")
    runs = {
        "n_jobs=1": (_ensemble(D, 1), "loky"),
        "loky, n_jobs=2": (_ensemble(D, 2), "loky"),
        "threading, n_jobs=2": (_ensemble(D, 2), "threading"),
    }
    times = {name: [] for name in runs}
    times["ceiling: pure numpy, 1 process"] = []
    times["ceiling: pure numpy, loky 2"] = []
    preds = {name: [] for name in runs}
    n_cos = CHUNK * D // N_PARTITIONS  # one partition's features of one chunk
    for k, sl in enumerate(chunks):
        for name, (ens, backend) in runs.items():
            # threads share this process's BLAS limit (1); loky workers get theirs
            inner = {"inner_max_num_threads": 1} if backend == "loky" else {}
            with joblib.parallel_config(backend=backend, **inner):
                t0 = time.perf_counter()
                y_pred = ens.prequential_predict(X[sl], y[sl])
                elapsed = time.perf_counter() - t0
            if k > 0:  # chunk 0 warms up (and starts the worker processes)
                times[name].append(elapsed)
                preds[name].append(y_pred)
        # what the machine allows right now: the same layout of work (4 equal tasks on 2
        # workers) with no estimator at all, measured between the ensemble's chunks
        with joblib.parallel_config(backend="loky", inner_max_num_threads=1):
            t_seq, t_par = _ceiling(1, n_cos), _ceiling(2, n_cos)
        if k > 0:
            times["ceiling: pure numpy, 1 process"].append(t_seq)
            times["ceiling: pure numpy, loky 2"].append(t_par)
    # fixed cost of one call (dispatch, the partitions' state to the workers and back):
    # tiny chunks, where the arithmetic is negligible
    overhead = {}
    tiny = slice(chunks[-1].stop, chunks[-1].stop + 20)
    for name, (ens, backend) in runs.items():
        inner = {"inner_max_num_threads": 1} if backend == "loky" else {}
        with joblib.parallel_config(backend=backend, **inner):
            t = time_calls(lambda: ens.prequential_predict(X[tiny], y[tiny]), 7)
        overhead[name] = float(np.median(t))
    ref = np.concatenate(preds["n_jobs=1"])
    diffs = {name: float(np.max(np.abs(np.concatenate(p) - ref))) for name, p in preds.items()}
    return times, diffs, overhead


def print_speed(times, diffs, overhead):
    print("| run                            | s per timed chunk       | median | "
          "speed-up | max abs Δŷ vs n_jobs=1 |")
    print("|--------------------------------|-------------------------|-------:|"
          "---------:|-----------------------:|")
    for name, t in times.items():
        t = np.array(t)
        base = np.array(times["ceiling: pure numpy, 1 process" if "ceiling" in name
                              else "n_jobs=1"])
        ratio = np.median(base / t)  # median of the per-chunk ratios
        diff = f"{diffs[name]:.1e}" if name in diffs else "–"
        print(f"| {name:<30} | {' '.join(f'{v:.3f}' for v in t):<23} | "
              f"{np.median(t):6.3f} | {ratio:7.2f}× | {diff:>22} |")
    t1 = float(np.median(times["n_jobs=1"]))
    print("fixed cost of one call (median of 7 calls on 20 rows): " + ", ".join(
        f"{name} {1e3 * t:.1f} ms" for name, t in overhead.items()))
    o = overhead["loky, n_jobs=2"] - overhead["n_jobs=1"]
    print(f"estimate for 2 idle cores, loky: T1 / (T1/2 + extra fixed cost) = "
          f"{t1:.3f} / ({t1 / 2:.3f} + {o:.3f}) = {t1 / (t1 / 2 + o):.2f}× "
          "(a model, not a measurement)")


def prequential_scores(model_preds, y, start):
    return {
        name: (res_mse(y[start:], p[start:]), res_var(y[start:], p[start:]))
        for name, p in model_preds.items()
    }


def accuracy(D, X, y, start, sigma):
    """Prequential predictions of the ensemble, the full-width model and partition 0."""
    ens = _ensemble(D, 2, sigma=sigma)
    full = QREWRLSRegressor(window_size=N)
    alone = QREWRLSRegressor(window_size=N)
    out = {"ensemble (4 × D/4)": [], "full width (D)": [], "one partition (D/4)": []}
    with joblib.parallel_config(backend="loky", inner_max_num_threads=1):
        for lo in range(0, X.shape[0], CHUNK):
            sl = slice(lo, lo + CHUNK)
            out["ensemble (4 × D/4)"].append(ens.prequential_predict(X[sl], y[sl]))
            # the same draw: the ensemble's full map, and its first block on its own
            Z = ens.features_.transform(X[sl])
            out["full width (D)"].append(full.prequential_predict(Z, y[sl]))
            del Z
            Z0 = ens.partition_features_[0].transform(X[sl])
            out["one partition (D/4)"].append(alone.prequential_predict(Z0, y[sl]))
    preds = {name: np.concatenate(p) for name, p in out.items()}
    preds["zero predictor"] = np.zeros_like(y)
    return prequential_scores(preds, y, start)


def electricity(n_lags):
    diff = np.diff(load_electricity_demand().data)
    diff = diff / diff[:500].std(ddof=1)  # scale from the first 500 (unscored) values
    return make_lagged(diff, n_lags)


def print_scores(title, scores):
    print(f"\n{title}")
    print("| model                | ResMSE  | ResVAR  |")
    print("|----------------------|--------:|--------:|")
    for name, (mse, var) in scores.items():
        print(f"| {name:<20} | {mse:7.4f} | {var:7.4f} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="D = 2^12, few rows")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    D = 2**12 if args.quick else 2**14
    n_chunks = 2 if args.quick else 4

    print(f"joblib {joblib.__version__}")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(f"cores available: {cores}")

    series = make_abo_series(10500, random_state=0)
    X, y = make_lagged(series, n_lags=7)

    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(f"BLAS in this process: {_blas_threads()}")
        with joblib.parallel_config(backend="loky", inner_max_num_threads=1):
            print(f"BLAS in the loky workers: {_worker_blas_threads(2)}")

        print(f"\nSpeed: D = {D}, N = {N}, {N_PARTITIONS} partitions, chunks of {CHUNK} "
              f"rows, {n_chunks} timed chunks (after one warm-up chunk)")
        times, diffs, overhead = bench_speed(D, X, y, n_chunks)
        print_speed(times, diffs, overhead)
        load1 = os.getloadavg()
        print(f"load average after the speed runs: {load1[0]:.2f} {load1[1]:.2f} {load1[2]:.2f}")

        n_abo = X.shape[0] if not args.quick else 2500
        start = n_abo - 10000 if not args.quick else 500
        scores = accuracy(D, X[:n_abo], y[:n_abo], start, sigma=1.0)
        accuracy_abo = scores
        print_scores(f"ABO synthetic series: 7 lags, σ = 1, D = {D}, rows {start}–{n_abo} "
                     "scored", scores)

        Xe, ye = electricity(20)
        if args.quick:
            Xe, ye = Xe[:1500], ye[:1500]
        scores = accuracy(D, Xe, ye, 500, sigma=1.0 / np.sqrt(20))
        print_scores(f"Electricity demand (first differences, scaled): 20 lags, σ = 1/√20, "
                     f"D = {D}, rows 500–{Xe.shape[0]} scored", scores)
    load2 = os.getloadavg()
    print(f"\nload average at the end: {load2[0]:.2f} {load2[1]:.2f} {load2[2]:.2f}")
    settings = {"D": D, "window_size": N, "n_partitions": N_PARTITIONS, "chunk": CHUNK,
                "n_chunks": n_chunks, "quick": args.quick, "blas_threads": 1,
                "joblib": joblib.__version__, "cores": cores}

    def table(sc):
        return [{"model": k, "res_mse": m, "res_var": v} for k, (m, v) in sc.items()]

    write_results("bench_ensemble_quick" if args.quick else "bench_ensemble", {
        "settings": settings, "speed_s_per_chunk": times, "max_abs_diff": diffs,
        "call_overhead_s": overhead, "load_after_speed": load1, "load_at_end": load2,
        "accuracy_abo": table(accuracy_abo), "accuracy_electricity": table(scores)},
        args.out, header=header)


if __name__ == "__main__":
    main()
