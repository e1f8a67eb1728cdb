"""Calibrated intervals under drift: coverage and width per horizon step, ACI vs quantile.

:class:`~sklearn_orfit.StreamForecaster` is run over each series as a stream
(``backtest``: every forecast made with the values up to its origin only), with the
direct and the recursive strategy. Both interval methods are computed from the same
prequential residuals in each run:

* ``aci`` — adaptive conformal inference (Gibbs & Candès 2021), one level per horizon
  step and coverage, ``γ = --gamma``;
* ``quantile`` — the empirical quantile of the same recent absolute residuals at the
  nominal level (the naive residual-quantile interval).

For each series, strategy, method, coverage (80 %, 95 %) and step: the empirical
coverage and mean width over every forecast with an interval (the cold start, before a
step has enough residuals, is left out), and the MSE of the forecasts of each step
against the seasonal-naive (demand) or last-value forecast made at the same origin.

Series:

* ``demand`` — half-hourly England & Wales demand (``load_electricity_demand``, 4032
  values), ``transform="seasonal_diff"``, season 48, 48 lags, 12 steps (6 hours);
* ``eurusd`` — daily EUR/USD (``load_exchange_rates``, the last 2500 days),
  ``transform="log_diff"``, 10 lags, 5 steps (a week);
* ``shift`` — a synthetic daily-seasonal AR(1) stream of 2000 values whose level jumps
  by 8 noise standard deviations at the middle, no transform, 24 lags, 6 steps; the
  coverage of the 200 values after the jump is reported too.

Model: running standardisation → random Fourier features (``--n-components``,
σ = 1/√n_features) → ``QREWRLSRegressor(--window, alpha=0.1)``, one BLAS thread.

Run::

    python benchmarks/bench_intervals.py           # the figures in benchmarks/out
    python benchmarks/bench_intervals.py --quick   # shorter series (a smoke test)

Results: ``benchmarks/out/bench_intervals.json`` (``--quick``:
``bench_intervals_quick.json``).
"""

import argparse
import datetime
import json
import math
import os
import platform
import sys
import time

import numpy as np

from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    StreamForecaster,
    make_streaming_pipeline,
)
from sklearn_orfit.datasets import load_electricity_demand, load_exchange_rates

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")
COVERAGE = (0.8, 0.95)
STRATEGIES = ("direct", "recursive")
METHODS = ("aci", "quantile")


def shift_series(n, rng):
    """Daily-seasonal AR(1) noise (φ = 0.7, σ = 1) with a level jump of 8 at n // 2."""
    e = rng.normal(size=n)
    ar = np.zeros(n)
    for t in range(1, n):
        ar[t] = 0.7 * ar[t - 1] + e[t]
    t = np.arange(n)
    y = 20 + 3 * np.sin(2 * np.pi * t / 24) + ar
    y[n // 2 :] += 8.0
    return y


def load_series(quick, max_values=None):
    demand = load_electricity_demand().data
    eurusd = load_exchange_rates("USD").data[-2500:]
    shift = shift_series(2000, np.random.default_rng(0))
    if quick:
        demand, eurusd, shift = demand[:700], eurusd[-500:], shift_series(
            500, np.random.default_rng(0))
    if max_values:
        demand, eurusd, shift = demand[:max_values], eurusd[-max_values:], shift_series(
            max_values, np.random.default_rng(0))
    return {
        "demand": dict(y=demand, transform="seasonal_diff", season=48, n_lags=48,
                       horizon=12, reference="seasonal naive"),
        "eurusd": dict(y=eurusd, transform="log_diff", season=None, n_lags=10,
                       horizon=5, reference="last value"),
        "shift": dict(y=shift, transform=None, season=None, n_lags=24, horizon=6,
                      reference="last value"),
    }


def reference_forecasts(y, horizon, season):
    """``R[i, k − 1]``: the seasonal-naive (or last-value) forecast of ``y[i]`` made at
    origin ``i − k``."""
    n = len(y)
    R = np.full((n, horizon), np.nan)
    for k in range(1, horizon + 1):
        o = np.arange(n) - k
        if season:
            src = o + k - season * math.ceil(k / season)
        else:
            src = o
        ok = (o >= 0) & (src >= 0)
        R[ok, k - 1] = y[src[ok]]
    return R


def interval_stats(y, band, rows=None):
    """Coverage and mean width per step and level over the rows with an interval."""
    lo, hi = band[..., 0], band[..., 1]
    if rows is not None:
        lo, hi, y = lo[rows], hi[rows], y[rows]
    issued = np.isfinite(lo) & np.isfinite(hi)
    inside = (y[:, None, None] >= lo) & (y[:, None, None] <= hi)
    count = issued.sum(axis=0)
    with np.errstate(invalid="ignore"):
        coverage = np.where(issued, inside, 0).sum(axis=0) / count
        width = np.where(issued, hi - lo, 0.0).sum(axis=0) / count
    return coverage, width, count


def run(series_name, spec, strategy, *, n_components, window, gamma, conformal_window):
    y = spec["y"]
    n_features = spec["n_lags"]
    reg = make_streaming_pipeline(
        RecursiveStandardScaler(),
        RandomFourierFeatures(n_components, sigma=1.0 / math.sqrt(n_features),
                              random_state=0),
        QREWRLSRegressor(window, alpha=0.1),
    )
    fc = StreamForecaster(reg, n_lags=spec["n_lags"], transform=spec["transform"],
                          season=spec["season"], horizon=spec["horizon"],
                          strategy=strategy, coverage=COVERAGE, gamma=gamma,
                          conformal_window=conformal_window)
    t0 = time.perf_counter()
    F, bands = fc.backtest(y, return_interval="all")
    seconds = time.perf_counter() - t0
    R = reference_forecasts(y, spec["horizon"], spec["season"])
    both = np.isfinite(F) & np.isfinite(R)
    mse = np.array([np.mean((F[both[:, k], k] - y[both[:, k]]) ** 2)
                    for k in range(F.shape[1])])
    mse_ref = np.array([np.mean((R[both[:, k], k] - y[both[:, k]]) ** 2)
                        for k in range(F.shape[1])])
    out = {"seconds": seconds, "ms_per_step": 1e3 * seconds / len(y),
           "mse": mse.tolist(), "mse_reference": mse_ref.tolist(),
           "reference": spec["reference"], "methods": {}}
    for method in METHODS:
        cov, width, count = interval_stats(y, bands[method])
        entry = {"coverage": cov.tolist(), "width": width.tolist(),
                 "count": count.tolist()}
        if series_name == "shift":
            n = len(y)
            cov_after, width_after, _ = interval_stats(
                y, bands[method], rows=slice(n // 2, n // 2 + 200))
            entry["coverage_after_shift"] = cov_after.tolist()
            entry["width_after_shift"] = width_after.tolist()
        out["methods"][method] = entry
    return out


def machine():
    try:
        from threadpoolctl import threadpool_info

        blas = "; ".join(f"{i.get('internal_api')} {i.get('version')} "
                         f"({i.get('num_threads')} threads)"
                         for i in threadpool_info() if i.get("user_api") == "blas")
    except ImportError:  # pragma: no cover
        blas = "unknown"
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:  # pragma: no cover
        load = None
    return {"machine": platform.processor() or platform.machine(),
            "cpus": os.cpu_count(), "load_average": load,
            "python": platform.python_version(), "numpy": np.__version__, "blas": blas,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime(
                "%Y-%m-%d %H:%M UTC")}


def print_table(results):
    print("| series | strategy | method | level | coverage by step (first, middle, last) "
          "| worst step | mean width | in ±2 pts |")
    print("|---|---|---|---|---|---|---|---|")
    for name, res in results.items():
        for strategy, r in res.items():
            for method, m in r["methods"].items():
                for j, level in enumerate(COVERAGE):
                    cov = np.array(m["coverage"])[:, j]
                    w = np.array(m["width"])[:, j]
                    mid = len(cov) // 2
                    worst = cov[np.argmax(np.abs(cov - level))]
                    ok = bool(np.all(np.abs(cov - level) <= 0.02))
                    print(f"| {name} | {strategy} | {method} | {level:.0%} | "
                          f"{cov[0]:.3f}, {cov[mid]:.3f}, {cov[-1]:.3f} | {worst:.3f} | "
                          f"{w.mean():.4g} | {'yes' if ok else 'no'} |")
    print()
    print("| series | after the shift (200 values) | method | level | coverage by step |")
    print("|---|---|---|---|---|")
    for strategy, r in results.get("shift", {}).items():
        for method, m in r["methods"].items():
            for j, level in enumerate(COVERAGE):
                cov = np.array(m["coverage_after_shift"])[:, j]
                print(f"| shift | {strategy} | {method} | {level:.0%} | "
                      f"{', '.join(f'{c:.2f}' for c in cov)} |")
    print()
    print("| series | MSE by step: direct / recursive / reference (first, last) | "
          "mean direct ÷ recursive | ms per step direct, recursive |")
    print("|---|---|---|---|")
    for name, res in results.items():
        d, r = np.array(res["direct"]["mse"]), np.array(res["recursive"]["mse"])
        ref = np.array(res["direct"]["mse_reference"])
        print(f"| {name} | {d[0]:.4g} / {r[0]:.4g} / {ref[0]:.4g}; {d[-1]:.4g} / "
              f"{r[-1]:.4g} / {ref[-1]:.4g} | {d.mean() / r.mean():.3f} | "
              f"{res['direct']['ms_per_step']:.1f}, {res['recursive']['ms_per_step']:.1f} |")


def _json_ready(obj):
    """NaN (a step without any interval, e.g. in a very short run) as JSON null."""
    if isinstance(obj, dict):
        return {k: _json_ready(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_ready(v) for v in obj]
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="shorter series")
    parser.add_argument("--max-values", type=int, default=None,
                        help="cut every series to this many values (smoke tests)")
    parser.add_argument("--n-components", type=int, default=256)
    parser.add_argument("--window", type=int, default=100)
    parser.add_argument("--gamma", type=float, default=0.005)
    parser.add_argument("--conformal-window", type=int, default=1000)
    parser.add_argument("--out", default=OUT,
                        help="directory of the JSON results ('' writes nothing)")
    args = parser.parse_args(argv)
    from threadpoolctl import threadpool_limits

    results = {}
    with threadpool_limits(limits=1, user_api="blas"):
        header = machine()
        for name, spec in load_series(args.quick, args.max_values).items():
            results[name] = {
                strategy: run(name, spec, strategy, n_components=args.n_components,
                              window=args.window, gamma=args.gamma,
                              conformal_window=args.conformal_window)
                for strategy in STRATEGIES
            }
    print(f"# {header['machine']}, {header['cpus']} CPUs, load {header['load_average']}; "
          f"numpy {header['numpy']}; BLAS {header['blas']}; {header['date']}")
    print_table(results)
    if args.out:
        os.makedirs(args.out, exist_ok=True)
        name = "bench_intervals_quick.json" if args.quick else "bench_intervals.json"
        doc = {"name": "bench_intervals",
               "command": "python benchmarks/bench_intervals.py " + " ".join(
                   sys.argv[1:] if argv is None else argv),
               "header": header,
               "settings": {"coverage": COVERAGE, "n_components": args.n_components,
                            "window": args.window, "gamma": args.gamma,
                            "conformal_window": args.conformal_window,
                            "series": {k: {kk: vv for kk, vv in v.items() if kk != "y"}
                                       | {"n": int(len(v["y"]))}
                                       for k, v in load_series(
                                           args.quick, args.max_values).items()}},
               "results": results}
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as fh:
            json.dump(_json_ready(doc), fh, indent=1, allow_nan=False)
    return results


if __name__ == "__main__":
    main()
