"""The ``sklearn-orfit`` command line (also ``python -m sklearn_orfit``).

Subcommands:

* ``forecast`` (the default) — a prequential one-step-ahead forecast of a bundled series
  or a CSV column: prints ResMSE, ResVAR and the time per update, writes the predictions
  (CSV) and a figure (PNG, when matplotlib is installed);
* ``benchmark`` — the ABO paper's Table 5 speed sweep;
* ``double-descent`` — the ABO paper's synthetic sweep over the number of features.

Errors in the input are reported as one line, ``sklearn-orfit: error: ...``, with exit
status 2; nothing the user types should produce a traceback.
"""

import argparse
import csv
import math
import os
import platform
import sys
import warnings

import numpy as np

from . import _experiments as ex
from .datasets import load_electricity_demand, load_exchange_rates, make_abo_series

__all__ = ["main"]

PROG = "sklearn-orfit"
COMMANDS = ("forecast", "benchmark", "double-descent")
_NA = {"", "nan", "na", "n/a", "null", "none", "-", "?"}


class CLIError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise CLIError(f"{message} (see '{self.prog} --help')")


# ----------------------------------------------------------------------- arguments
def _int_at_least(minimum):
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be >= {minimum}, got {value}")
        return value

    return parse


def _float_in(lo, hi=math.inf, *, lo_open=True, hi_open=False):
    def parse(text):
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        low_ok = value > lo if lo_open else value >= lo
        high_ok = value < hi if hi_open else value <= hi
        if not (low_ok and high_ok and math.isfinite(value)):
            left, right = "(" if lo_open else "[", ")" if hi_open else "]"
            raise argparse.ArgumentTypeError(f"must be in {left}{lo}, {hi}{right}, got {text}")
        return value

    return parse


_DATASETS = {
    "electricity": "half-hourly England & Wales electricity demand, summer 2000 (MW)",
    "eurusd": "ECB daily EUR/USD reference rate (USD per EUR)",
    "eurgbp": "ECB daily EUR/GBP reference rate (GBP per EUR)",
    "eurjpy": "ECB daily EUR/JPY reference rate (JPY per EUR)",
    "eurchf": "ECB daily EUR/CHF reference rate (CHF per EUR)",
    "abo": "the ABO paper's synthetic non-linear autoregressive series (10,500 values)",
}
_DEFAULT_TRANSFORM = {"electricity": "diff", "abo": "none"}  # exchange rates: logdiff
_DEFAULT_D = {"abo": 2048, "ensemble": 2048, "orfit": 2048, "ewrls": 256}


def build_parser():
    """The argument parser of ``sklearn-orfit`` (all subcommands)."""
    from . import __version__

    parser = _Parser(
        prog=PROG,
        description="Streaming overparameterised linear models: prequential forecasts, "
        "the ABO paper's speed sweep and double descent. Without a subcommand, runs "
        "'forecast' (by default on the bundled electricity demand).",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    # ---- forecast
    f = sub.add_parser(
        "forecast",
        help="prequential one-step-ahead forecast of a series (default)",
        description="Predict each value of a series from the values before it, then "
        "learn it (prequential evaluation, no look-ahead). The series is optionally "
        "differenced, standardised with the mean and standard deviation of the past "
        "values, and turned into lagged rows; forecasts are reported in the series' "
        "units.",
    )
    src = f.add_argument_group("input")
    src.add_argument("--dataset", choices=sorted(_DATASETS), default=None,
                     help="bundled series (default: electricity): "
                     + "; ".join(f"{k}: {v}" for k, v in _DATASETS.items()))
    src.add_argument("--csv", metavar="FILE", default=None,
                     help="CSV file with a header row (delimiter , ; tab or | detected)")
    src.add_argument("--column", metavar="NAME", default=None,
                     help="column of --csv to forecast (optional when there is one column)")
    src.add_argument("--n-rows", type=_int_at_least(1), default=None, metavar="N",
                     help="use only the first N values of the series")
    src.add_argument("--transform", choices=("auto", *ex.TRANSFORMS), default="auto",
                     help="model the values, their first differences or log returns "
                     "(auto: diff for electricity, logdiff for exchange rates, none "
                     "otherwise)")
    m = f.add_argument_group("model")
    m.add_argument("--model", choices=ex.MODELS, default="abo",
                   help="abo: random Fourier features -> QR-EWRLS (default); orfit: "
                   "features -> ORFit; ensemble: feature-partition ensemble of abo; "
                   "sw-krls, qrd-rls: the baselines on the lags; ewrls: features -> "
                   "covariance-form EW-RLS")
    m.add_argument("--n-lags", type=_int_at_least(1), default=20, metavar="L",
                   help="lagged values per row (default 20)")
    m.add_argument("--window-size", type=_int_at_least(1), default=50, metavar="N",
                   help="window length N (abo, ensemble, sw-krls, qrd-rls; default 50)")
    m.add_argument("--n-components", type=_int_at_least(1), default=None, metavar="D",
                   help="random features D (default 2048; 256 for ewrls, whose "
                   "covariance form costs D² per step)")
    m.add_argument("--sigma", type=_float_in(0.0), default=0.5,
                   help="frequency scale of the random features (default 0.5)")
    m.add_argument("--forgetting-factor", type=_float_in(0.0, 1.0), default=1.0,
                   metavar="LAMBDA", help="forgetting factor λ in (0, 1] (default 1)")
    m.add_argument("--alpha", type=_float_in(0.0, lo_open=False), default=None,
                   help="ridge penalty (default 0 for abo, 1e-2 for the baselines)")
    m.add_argument("--length-scale", type=_float_in(0.0), default=None,
                   help="sw-krls kernel length scale (default 1/sigma)")
    m.add_argument("--memory-size", type=_int_at_least(0), default=32, metavar="M",
                   help="orfit memory size (default 32)")
    m.add_argument("--memory-policy", choices=("pca", "latest", "random"), default="pca",
                   help="orfit memory policy (default pca)")
    m.add_argument("--delta", type=_float_in(0.0), default=1e-2,
                   help="ewrls initial P = I/delta (default 1e-2)")
    m.add_argument("--n-partitions", type=_int_at_least(1), default=4,
                   help="ensemble partitions (default 4)")
    m.add_argument("--n-jobs", type=int, default=None,
                   help="ensemble joblib workers (default: joblib's)")
    m.add_argument("--random-state", type=int, default=0, help="seed (default 0)")
    o = f.add_argument_group("run and output")
    o.add_argument("--chunk-size", type=_int_at_least(1), default=250,
                   help="rows per prequential call; the progress bar moves per chunk "
                   "(default 250)")
    o.add_argument("--output-dir", default="sklearn-orfit-output", metavar="DIR",
                   help="where the predictions CSV and the figure go "
                   "(default ./sklearn-orfit-output)")
    o.add_argument("--no-save", action="store_true", help="write no files")
    o.add_argument("--no-plot", action="store_true", help="write no figure")
    o.add_argument("--plot-last", type=_int_at_least(2), default=336, metavar="K",
                   help="values shown in the figure's top panel (default 336)")
    o.add_argument("--rolling", type=_int_at_least(1), default=48, metavar="W",
                   help="rolling window of the error panel (default 48)")
    o.add_argument("--quiet", action="store_true", help="no progress bar")

    # ---- benchmark
    b = sub.add_parser(
        "benchmark",
        help="the ABO paper's Table 5 speed sweep (RFF -> QR-EWRLS, N = 20)",
        description="Milliseconds per 1000 predict+update steps of random Fourier "
        "features -> QR-EWRLS on the synthetic series (N = 20, 7 lags, one BLAS thread "
        "by default), against the ABO authors' C++ figures.",
    )
    b.add_argument("--quick", action="store_true",
                   help="D up to 2^10 and best of 2 (a few seconds)")
    b.add_argument("--max-log2-d", type=_int_at_least(1), default=None, metavar="K",
                   help="largest D = 2^K (default 14, 10 with --quick)")
    b.add_argument("--steps", type=_int_at_least(2), default=1000,
                   help="timed steps per D (default 1000)")
    b.add_argument("--threads", type=_int_at_least(1), default=1,
                   help="BLAS threads (needs threadpoolctl; default 1)")
    b.add_argument("--no-one-row", action="store_true",
                   help="skip the one-row-at-a-time timing")
    b.add_argument("--quiet", action="store_true", help="no progress bar")

    # ---- double descent
    d = sub.add_parser(
        "double-descent",
        help="the ABO paper's synthetic sweep over D (test error peaks at D = N)",
        description="Prequential error of random Fourier features -> QR-EWRLS on the "
        "synthetic series for D = 2^1 ... 2^K and D = N = 20, with λ = 1 and 0.9; "
        "prints the table and draws test error against D.",
    )
    d.add_argument("--quick", action="store_true",
                   help="2,000 updates, D up to 2^11 (well under a minute)")
    d.add_argument("--n-updates", type=_int_at_least(2), default=None,
                   help="prequential updates (default 10,000, 2,000 with --quick)")
    d.add_argument("--max-log2-d", type=_int_at_least(1), default=None, metavar="K",
                   help="largest D = 2^K (default 14, 11 with --quick)")
    d.add_argument("--random-state", type=int, default=0, help="seed (default 0)")
    d.add_argument("--threads", type=_int_at_least(1), default=1,
                   help="BLAS threads (needs threadpoolctl; default 1)")
    d.add_argument("--output-dir", default="sklearn-orfit-output", metavar="DIR",
                   help="where the figure goes (default ./sklearn-orfit-output)")
    d.add_argument("--no-plot", action="store_true", help="write no figure")
    d.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


# ----------------------------------------------------------------------- input
def _read_csv_column(path, column):
    """Values of ``column`` of a CSV file as floats (NaN for missing cells)."""
    if not os.path.exists(path):
        raise CLIError(f"file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory, not a CSV file")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            text = fh.read()
    except UnicodeDecodeError:
        raise CLIError(f"{path} is not a UTF-8 text (CSV) file") from None
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    lines = text.splitlines()
    if not any(line.strip() for line in lines):
        raise CLIError(f"{path} is empty")
    try:
        delimiter = csv.Sniffer().sniff(text[:65536], delimiters=",;\t|").delimiter
    except csv.Error:
        delimiter = ","
    rows = [(i + 1, r) for i, r in enumerate(csv.reader(lines, delimiter=delimiter))
            if any(c.strip() for c in r)]
    header = [c.strip() for c in rows[0][1]]
    listing = ", ".join(repr(c) for c in header)
    if column is None:
        if len(header) != 1:
            raise CLIError(f"{path} has {len(header)} columns ({listing}); choose one "
                           "with --column")
        column = header[0]
    if column not in header:
        raise CLIError(f"column {column!r} not found in {path} (columns: {listing})")
    j = header.index(column)
    values = np.empty(len(rows) - 1)
    for k, (line_no, row) in enumerate(rows[1:]):
        cell = row[j].strip() if j < len(row) else ""
        if cell.lower() in _NA:
            values[k] = np.nan
            continue
        try:
            values[k] = float(cell)
        except ValueError:
            raise CLIError(f"column {column!r} of {path} is not numeric: line {line_no} "
                           f"has {cell!r}") from None
    line_numbers = np.array([line_no for line_no, _ in rows[1:]], dtype=int)
    return values, column, line_numbers


def _load_series(args):
    """``(values, timestamps or None, name, description, units)`` of the input."""
    if args.csv is not None and args.dataset is not None:
        raise CLIError("give either --csv or --dataset, not both")
    if args.csv is None and args.column is not None:
        raise CLIError("--column needs --csv")
    if args.csv is not None:
        values, column, line_numbers = _read_csv_column(args.csv, args.column)
        where = [f"line {n}" for n in line_numbers]
        name = f"{os.path.splitext(os.path.basename(args.csv))[0]}:{column}"
        return values, None, name, f"column {column!r} of {args.csv}", "", where
    dataset = args.dataset or "electricity"
    if dataset == "electricity":
        bunch = load_electricity_demand()
        values, times, units = bunch.data, bunch.timestamps, "MW"
    elif dataset == "abo":
        values, times, units = make_abo_series(10_500, random_state=0), None, ""
    else:
        bunch = load_exchange_rates(dataset[3:].upper())
        values, times, units = bunch.data, bunch.dates, ""
    where = [f"position {i}" for i in range(values.shape[0])]
    return values, times, dataset, _DATASETS[dataset], units, where


def _check_series(values, name, where, *, args, transform):
    if values.shape[0] == 0:
        raise CLIError(f"series {name!r} has no values")
    bad = ~np.isfinite(values)
    if bad.any():
        first = int(np.argmax(bad))
        kind = "missing or NaN" if np.isnan(values[first]) else "infinite"
        raise CLIError(f"series {name!r} has {int(bad.sum())} missing, NaN or infinite "
                       f"value(s), the first ({kind}) at {where[first]}; fill or drop "
                       "them before forecasting")
    if transform == "logdiff" and np.any(values <= 0):
        raise CLIError(f"series {name!r} has values <= 0; --transform logdiff needs "
                       "positive values")
    window = args.window_size if args.model not in ("orfit", "ewrls") else 0
    need = ex.min_series_length(n_lags=args.n_lags, window_size=window, transform=transform)
    if values.shape[0] < need:
        raise CLIError(
            f"series {name!r} has {values.shape[0]} values; with --n-lags {args.n_lags}"
            + (f" and --window-size {window}" if window else "")
            + f" the forecast needs at least {need}"
            + (" (one more for differencing)" if transform != "none" else "")
        )


# ----------------------------------------------------------------------- commands
def _model_description(args, n_components):
    feats = f"RandomFourierFeatures(D={n_components}, σ={args.sigma})"
    lam = f"λ={args.forgetting_factor}"
    return {
        "abo": f"{feats} → QREWRLSRegressor(N={args.window_size}, {lam}, "
               f"α={args.alpha or 0.0})",
        "orfit": f"{feats} → ORFitRegressor(memory={args.memory_size}, "
                 f"{args.memory_policy})",
        "ensemble": f"FeaturePartitionEnsemble({args.n_partitions} × {feats}[block] → "
                    f"QREWRLSRegressor(N={args.window_size}, {lam}))",
        "sw-krls": f"SlidingWindowKRLSRegressor(N={args.window_size}, "
                   f"s={args.length_scale or 1.0 / args.sigma:.4g}, "
                   f"α={1e-2 if args.alpha is None else args.alpha})",
        "qrd-rls": f"QRDRLSRegressor(N={args.window_size}, {lam}, "
                   f"α={1e-2 if args.alpha is None else args.alpha})",
        "ewrls": f"{feats} → EWRLSRegressor({lam}, δ={args.delta})",
    }[args.model]


def _fmt(x):
    return f"{x:.6g}" if np.isfinite(x) else str(x)


def _forecast(args, out):
    values, times, name, description, units, where = _load_series(args)
    if args.n_rows is not None:
        values, where = values[: args.n_rows], where[: args.n_rows]
        times = None if times is None else times[: args.n_rows]
    transform = args.transform
    if transform == "auto":
        transform = _DEFAULT_TRANSFORM.get(name, "logdiff" if name.startswith("eur")
                                           and args.csv is None else "none")
    _check_series(values, name, where, args=args, transform=transform)
    n_components = args.n_components or _DEFAULT_D.get(args.model, 4096)
    model = ex.make_forecast_model(
        args.model, n_components=n_components, sigma=args.sigma,
        window_size=args.window_size, forgetting_factor=args.forgetting_factor,
        alpha=args.alpha, length_scale=args.length_scale, memory_size=args.memory_size,
        memory_policy=args.memory_policy, delta=args.delta,
        n_partitions=args.n_partitions, n_jobs=args.n_jobs,
        random_state=args.random_state,
    )
    problem = ex.make_forecast_problem(values, n_lags=args.n_lags, transform=transform)
    skip = min(args.window_size, problem.y.shape[0] - 2)
    modelled = {"none": "values", "diff": "first differences",
                "logdiff": "log returns"}[transform]
    print(f"{PROG} forecast: {name} — {description}; {values.shape[0]} values", file=out)
    print(f"model: {args.model} = {_model_description(args, n_components)}", file=out)
    print(f"rows: {modelled}, standardised with past mean/std, {args.n_lags} lags → "
          f"{problem.y.shape[0]} predict-then-update steps (first {skip} not scored)",
          file=out)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ex.run_forecast(model, problem, skip=skip, chunk_size=args.chunk_size,
                                 quiet=args.quiet, desc=f"{args.model} on {name}")
    u2, u4 = (f" ({units}²)", f" ({units}⁴)") if units else ("", "")
    print(f"\n{'':16}{'ResMSE' + u2:>16}{'ResVAR' + u4:>16}", file=out)
    print(f"{'forecast':16}{_fmt(result.res_mse):>16}{_fmt(result.res_var):>16}", file=out)
    print(f"{'persistence':16}{_fmt(result.persistence_mse):>16}"
          f"{_fmt(result.persistence_var):>16}", file=out)
    print(f"{'standardised':16}{_fmt(result.res_mse_std):>16}"
          f"{_fmt(result.res_var_std):>16}", file=out)
    print("(persistence: the last value as forecast; standardised: errors of the "
          "standardised rows the model learns)", file=out)
    print(f"\ntime per update: {result.seconds_per_update * 1e6:.1f} µs "
          f"(features + predict + update; {problem.y.shape[0]} updates in "
          f"{result.seconds:.2f} s)", file=out)
    if not np.all(np.isfinite(result.forecast)):
        print(f"note: {int(np.sum(~np.isfinite(result.forecast)))} forecasts are not "
              "finite: the model diverged on this stream", file=out)
    if caught:
        first = str(caught[0].message).splitlines()[0]
        print(f"note: {len(caught)} warning(s) during the run; first: "
              f"{caught[0].category.__name__}: {first}", file=out)
    if args.no_save:
        return 0
    try:
        os.makedirs(args.output_dir, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create --output-dir {args.output_dir}: "
                       f"{exc.strerror or exc}") from None
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in name)
    stem = f"forecast_{safe}_{args.model}"
    csv_path = os.path.join(args.output_dir, stem + ".csv")
    with open(csv_path, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["position", "time", "actual", "forecast", "error", "scored"])
        for i, pos in enumerate(problem.index):
            writer.writerow([
                int(pos), "" if times is None else str(times[pos]),
                repr(float(result.actual[i])), repr(float(result.forecast[i])),
                repr(float(result.actual[i] - result.forecast[i])), int(result.scored[i]),
            ])
    print(f"predictions: {csv_path}", file=out)
    if args.no_plot:
        return 0
    png_path = ex.plot_forecast(
        result, os.path.join(args.output_dir, stem + ".png"),
        title=f"{description}\n{args.model}, one step ahead, last {args.plot_last} values "
              f"(ResMSE {result.res_mse:.4g}; persistence {result.persistence_mse:.4g})",
        times=None if times is None else times[problem.index],
        rolling=args.rolling, last=args.plot_last, units=units,
    )
    print(f"figure: {png_path}" if png_path else
          "figure: not drawn (matplotlib is not installed)", file=out)
    return 0


def _machine(threads_ctx_describe):
    return (f"{platform.machine()}, {os.cpu_count()} CPUs, numpy {np.__version__}, "
            f"BLAS: {threads_ctx_describe()}")


def _benchmark(args, out):
    max_log2 = args.max_log2_d or (10 if args.quick else 14)
    dims = [2**k for k in range(1, max_log2 + 1)]
    repeat = 2 if args.quick else 3
    ctx, describe = ex.blas_threads(args.threads)
    with ctx:
        print(f"# {_machine(describe)}", file=out)
        print(f"# ABO Table 5 setting: N=20, 7 lags, {args.steps} predict+update steps, "
              f"best of {repeat}; ms per 1000 steps", file=out)
        rows = ex.speed_sweep(dims, n_steps=args.steps, repeat=repeat,
                              one_row=not args.no_one_row, quiet=args.quiet)
    scale = 1000.0 / args.steps
    print(f"{'D':>6} {'chunked':>10} {'one-row':>10} {'C++':>10} {'C++/chunked':>12}",
          file=out)
    for r in rows:
        print(f"{r['D']:>6} {r['chunked_ms'] * scale:10.2f} {r['one_row_ms'] * scale:10.2f}"
              f" {r['cpp_ms']:10.2f} {r['cpp_ms'] / (r['chunked_ms'] * scale):12.2f}",
              file=out)
    print("# chunked: one prequential_predict call (features included); one-row: "
          "transform_one + predict_one + learn_one; C++: the ABO authors' figures "
          "(i7-1370P, one thread)", file=out)
    return 0


def _double_descent(args, out):
    n_updates = args.n_updates or (2000 if args.quick else 10_000)
    max_log2 = args.max_log2_d or (11 if args.quick else 14)
    window = 20
    dims = sorted({2**k for k in range(1, max_log2 + 1)} | {window})
    ctx, describe = ex.blas_threads(args.threads)
    with ctx:
        print(f"# {_machine(describe)}", file=out)
        print(f"# ABO synthetic series, {n_updates} prequential updates, N={window}, "
              f"7 lags, σ=1, seed {args.random_state}", file=out)
        rows, identity = ex.double_descent_sweep(
            dims, n_updates=n_updates, window_size=window,
            random_state=args.random_state, quiet=args.quiet)
    print(f"{'λ':>5} {'D':>6} {'test mean':>11} {'test var':>11} {'κ median':>10} "
          f"{'µs/update':>10}", file=out)
    for r in rows:
        mark = "  <- D = N" if r["D"] == window else ""
        print(f"{r['lambda']:>5} {r['D']:>6} {r['test_mean']:11.4g} {r['test_var']:11.4g} "
              f"{r['kappa_median']:10.3g} {r['us_per_update']:10.1f}{mark}", file=out)
    if np.isfinite(identity):
        print(f"λ identity for D > N: max relative |ŷ(λ=1) − ŷ(λ=0.9)| = {identity:.2e}",
              file=out)
    if not args.no_plot:
        try:
            os.makedirs(args.output_dir, exist_ok=True)
        except OSError as exc:
            raise CLIError(f"cannot create --output-dir {args.output_dir}: "
                           f"{exc.strerror or exc}") from None
        name = "double_descent_quick.png" if args.quick else "double_descent.png"
        path = ex.plot_double_descent(rows, os.path.join(args.output_dir, name),
                                      window_size=window)
        print(f"figure: {path}" if path else
              "figure: not drawn (matplotlib is not installed)", file=out)
    return 0


_RUN = {"forecast": _forecast, "benchmark": _benchmark, "double-descent": _double_descent}


def main(argv=None):
    """Run ``sklearn-orfit`` with ``argv`` (default: ``sys.argv[1:]``); return the status.

    Exit status: 0 on success, 2 for bad input (one-line message on stderr), 1 for an
    unexpected failure, 130 when interrupted.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    # no subcommand (or only options): forecast
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["forecast", *argv]
    try:
        args = build_parser().parse_args(argv)
        return _RUN[args.command](args, sys.stdout)
    except CLIError as exc:
        _error(str(exc))
        return 2
    except KeyboardInterrupt:
        _error("interrupted")
        return 130
    except (ValueError, OSError) as exc:  # raised by the library on input it rejects
        _error(str(exc) or type(exc).__name__)
        return 2
    except Exception as exc:  # a command line reports, never dumps a traceback
        if os.environ.get("SKLEARN_ORFIT_TRACEBACK"):
            raise
        _error(f"unexpected {type(exc).__name__}: {exc} (set SKLEARN_ORFIT_TRACEBACK=1 "
               "to see the traceback)")
        return 1


def _error(message):
    line = " ".join(str(message).split())  # one line, whatever the message holds
    print(f"{PROG}: error: {line}", file=sys.stderr)
