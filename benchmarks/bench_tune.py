"""What ``forecast --tune`` chooses against the best setting of a wider search.

``sklearn-orfit forecast --tune`` chooses its settings on the first 30 % of the bundled
half-hourly demand (4032 values, one step ahead) and reports on the rest. This script
runs it, then runs the command line with each setting of a wider grid (no tuning, the
same lags) and scores every run on the same values: the positions after the tuning
part. The best of the wider grid is the best *in hindsight* (chosen on the values it is
scored on): a bound no choice made in advance can be sure to reach. Also reported: the
command line's defaults and SW-KRLS, on the same values.

Every figure is the RMSE (MW) of the one-step-ahead forecasts at positions
``≥ n_tune`` read from the run's predictions file; the seconds are the run's backtest.

Run::

    python benchmarks/bench_tune.py           # about 20 minutes on 2 shared cores
    python benchmarks/bench_tune.py --quick   # a few settings (a smoke test)

Results: ``benchmarks/out/bench_tune.json`` (``--quick``: ``bench_tune_quick.json``).
"""

import argparse
import contextlib
import csv
import io
import itertools
import json
import math
import os
import tempfile
import time

from sklearn_orfit.cli import main
from sklearn_orfit.utils.benchmarking import header_line, machine_header, write_results

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def run_cli(argv, workdir):
    """``sklearn-orfit forecast ARGV --json``: the parsed JSON document."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = main(["forecast", *map(str, argv), "--json", "--no-plot", "--quiet",
                       "--output-dir", workdir])
    if status not in (0, None):
        raise RuntimeError(f"sklearn-orfit forecast {argv} exited with {status}")
    return json.loads(buf.getvalue())


def rmse_from(doc, first_position):
    """RMSE of the forecasts at positions ``>= first_position`` (predictions file)."""
    (series,) = doc["series"]
    with open(series["predictions"], newline="", encoding="utf-8") as fh:
        errors = [float(r["error"]) for r in csv.DictReader(fh)
                  if int(r["position"]) >= first_position]
    return math.sqrt(sum(e * e for e in errors) / len(errors)), len(errors), series


#: --quick: the first rows of the series and few random features (a smoke test)
QUICK = ["--n-rows", 1200, "--n-components", 128]


def grid(quick):
    if quick:
        return [dict(model="abo", transform="logdiff", window_size=n, sigma=0.5, alpha=0.1)
                for n in (50, 200)]
    abo = [dict(model="abo", transform=t, window_size=n, sigma=s, alpha=a, n_components=d)
           for t, n, s, a, d in itertools.product(
               ("diff", "logdiff"), (500, 1000, 2000), (0.25, 0.5, 1.0),
               (0.0, 0.01, 0.1, 1.0), (4096,))]
    krls = [dict(model="sw-krls", transform=t, window_size=n, sigma=s)
            for t, n, s in itertools.product(("diff", "logdiff"), (1000, 2000),
                                             (0.25, 0.5, 1.0))]
    return abo + krls


def flags(setting):
    return [x for k, v in setting.items()
            for x in (f"--{k.replace('_', '-')}", v)]


def main_(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few settings only")
    parser.add_argument("--output-dir", default=OUT)
    args = parser.parse_args(argv)
    header = machine_header()
    print(header_line(header))
    results = {"settings": []}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        common = QUICK if args.quick else []
        doc = run_cli(["--tune", *common], os.path.join(tmp, "tune"))
        tune_seconds = time.perf_counter() - t0
        n_tune = doc["tuning"]["n_tune"]
        rmse, n, series = rmse_from(doc, n_tune)
        results["tune"] = {"choice": doc["tuning"]["choice"], "rmse": rmse,
                           "n_scored": n, "seconds_tuning": doc["tuning"]["seconds"],
                           "seconds_total": tune_seconds,
                           "n_candidates": sum(r["target_rmse"] is not None
                                               for r in doc["tuning"]["table"])}
        print(f"--tune: {doc['tuning']['choice']} -> RMSE {rmse:.1f} MW over {n} values "
              f"from position {n_tune} ({tune_seconds:.0f} s in all)")
        doc = run_cli(common, os.path.join(tmp, "default"))
        rmse, _, series = rmse_from(doc, n_tune)
        results["defaults"] = {"settings": doc["settings"], "rmse": rmse}
        print(f"defaults: RMSE {rmse:.1f} MW")
        for k, setting in enumerate(grid(args.quick)):
            doc = run_cli([*flags(setting), *common], os.path.join(tmp, f"g{k}"))
            rmse, _, series = rmse_from(doc, n_tune)
            results["settings"].append({**setting, "rmse": rmse,
                                        "seconds": series["seconds"]})
            print(f"{setting} -> RMSE {rmse:.1f} MW ({series['seconds']:.1f} s)",
                  flush=True)
    finite = [r for r in results["settings"] if math.isfinite(r["rmse"])]
    best = min(finite, key=lambda r: r["rmse"])
    results["best_in_hindsight"] = best
    results["n_tune"] = n_tune
    ratio = results["tune"]["rmse"] / best["rmse"]
    print(f"\nbest of the wider grid (in hindsight): {best} \n--tune / best: {ratio:.3f}; "
          f"defaults / best: {results['defaults']['rmse'] / best['rmse']:.3f}")
    name = "bench_tune_quick" if args.quick else "bench_tune"
    path = write_results(name, results, args.output_dir, header=header)
    if path:
        print(f"results: {path}")
    return results


if __name__ == "__main__":
    main_()
