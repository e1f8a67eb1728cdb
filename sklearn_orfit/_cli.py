"""The ``sklearn-orfit`` command line (also ``python -m sklearn_orfit``).

Subcommands:

* ``forecast`` (the default) — a prequential one-step-ahead forecast of a bundled series
  or a CSV column: prints ResMSE, ResVAR and the time per update, writes the predictions
  (CSV) and a figure (PNG, when matplotlib is installed);
* ``benchmark`` — the ABO paper's Table 5 speed sweep;
* ``double-descent`` — the ABO paper's synthetic sweep over the number of features.

Errors in the input are reported as one line, ``sklearn-orfit: error: ...``, with exit
status 2; nothing the user types should produce a traceback. A CSV file is streamed (only
the first ``--n-rows`` rows are read); a run whose arrays would not fit in the available
memory is refused before it starts; output files are written to a temporary name and
moved into place, so an interrupted run leaves no partial file; output that the
terminal's encoding cannot hold is spelled in ASCII (σ → sigma).
"""

import argparse
import array
import codecs
import contextlib
import csv
import io
import math
import os
import platform
import sys
import tempfile
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
                   help="window length N (abo, ensemble, sw-krls, qrd-rls) and, for "
                   "every model, the first steps left out of the scores (default 50)")
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
_SNIFF_CHARS = 65536
_MAX_LINE = 1 << 24  # characters; a longer "line" is not a CSV row


class _Where:
    """``where[i]``: "line 17" / "position 3" for value ``i``, built on demand.

    One label per value would cost tens of bytes per value; this keeps the line numbers
    in one integer array (and slices to a view of it).
    """

    def __init__(self, label, numbers):
        self.label, self.numbers = label, numbers

    def __len__(self):
        return len(self.numbers)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return _Where(self.label, self.numbers[i])
        return f"{self.label} {int(self.numbers[i])}"


def _physical_lines(fh, head, path):
    """The lines of ``fh`` (``head`` first, already read), each at most ``_MAX_LINE``.

    Records end only at ``\\r``, ``\\n`` or ``\\r\\n`` (the file is opened with
    ``newline=''``): U+2028, U+0085, form feed and the other characters
    :meth:`str.splitlines` treats as line breaks stay inside their cell. Reads one line
    at a time, so memory does not grow with the file.
    """
    pending = ""
    for line in io.StringIO(head, newline=""):
        if line.endswith(("\n", "\r")):
            yield line
        else:
            pending = line  # the sample stopped inside this line
    while True:
        line = fh.readline(_MAX_LINE)
        if pending:
            line, pending = pending + line, ""
        if not line:
            return
        if len(line) >= _MAX_LINE and not line.endswith(("\n", "\r")):
            raise CLIError(f"{path} has a line longer than {_MAX_LINE:,} characters; "
                           "is it a CSV file?")
        yield line


def _read_csv_column(path, column, n_rows=None):
    """Values of ``column`` of a CSV file as floats (NaN for missing cells).

    Streams the file: only the first ``n_rows`` data rows (all when ``None``) are read,
    so memory stays bounded by what is used (8 bytes per value and per line number),
    whatever the file's size. Records end only at ``\\r``, ``\\n`` or ``\\r\\n``
    (quoted cells may hold line breaks); blank records are skipped; the first non-blank
    record is the header. Returns ``(values, column, line_numbers)``, the line number
    being that of the record's first line.
    """
    if not os.path.exists(path):
        raise CLIError(f"file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory, not a CSV file")
    values, numbers = array.array("d"), array.array("q")
    line_no = 0
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            head = fh.read(_SNIFF_CHARS)
            if head.endswith("\r"):  # keep "\r\n" in one piece
                head += fh.read(1)
            if not head.strip():
                raise CLIError(f"{path} is empty")
            complete = max(head.rfind("\n"), head.rfind("\r"))
            try:
                delimiter = csv.Sniffer().sniff(
                    head[: complete + 1] if complete >= 0 else head,
                    delimiters=",;\t|").delimiter
            except csv.Error:
                delimiter = ","
            lines = _physical_lines(fh, head, path)
            reader = csv.reader(lines, delimiter=delimiter)
            header = j = None
            for row in reader:
                start, line_no = line_no + 1, reader.line_num
                if not any(c.strip() for c in row):
                    continue
                if header is None:
                    header = [c.strip() for c in row]
                    j = _header_index(header, column, path)
                    column = header[j]
                    continue
                cell = row[j].strip() if j < len(row) else ""
                if cell.lower() in _NA:
                    values.append(math.nan)
                else:
                    try:
                        values.append(float(cell))
                    except ValueError:
                        raise CLIError(f"column {column!r} of {path} is not numeric: "
                                       f"line {start} has {cell!r}") from None
                numbers.append(start)
                if n_rows is not None and len(values) >= n_rows:
                    break
    except UnicodeDecodeError:
        after = f" (undecodable bytes after line {line_no})" if line_no else ""
        raise CLIError(f"{path} is not a UTF-8 text (CSV) file{after}") from None
    except csv.Error as exc:
        raise CLIError(f"{path} is not a readable CSV file: the record starting on line "
                       f"{line_no + 1}: {exc}") from None
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    if header is None:
        raise CLIError(f"{path} is empty: no row has a non-blank cell (a header row with "
                       "column names is needed)")
    return (np.frombuffer(values, dtype=np.float64), column,
            np.frombuffer(numbers, dtype=np.int64))


def _header_index(header, column, path):
    listing = ", ".join(repr(c) for c in header)
    if column is None:
        if len(header) != 1:
            raise CLIError(f"{path} has {len(header)} columns ({listing}); choose one "
                           "with --column")
        column = header[0]
    if column not in header:
        raise CLIError(f"column {column!r} not found in {path} (columns: {listing})")
    return header.index(column)


def _load_series(args):
    """``(values, timestamps or None, name, description, units, where)`` of the input.

    Only the first ``--n-rows`` values are read (a CSV file is streamed and not read
    further).
    """
    if args.csv is not None and args.dataset is not None:
        raise CLIError("give either --csv or --dataset, not both")
    if args.csv is None and args.column is not None:
        raise CLIError("--column needs --csv")
    n = args.n_rows
    if args.csv is not None:
        values, column, line_numbers = _read_csv_column(args.csv, args.column, n)
        name = f"{os.path.splitext(os.path.basename(args.csv))[0]}:{column}"
        return (values, None, name, f"column {column!r} of {args.csv}", "",
                _Where("line", line_numbers))
    dataset = args.dataset or "electricity"
    if dataset == "electricity":
        bunch = load_electricity_demand()
        values, times, units = bunch.data, bunch.timestamps, "MW"
    elif dataset == "abo":
        values, times, units = make_abo_series(10_500, random_state=0), None, ""
    else:
        bunch = load_exchange_rates(dataset[3:].upper())
        values, times, units = bunch.data, bunch.dates, ""
    values, times = values[:n], times if times is None else times[:n]
    where = _Where("position", np.arange(values.shape[0]))
    return values, times, dataset, _DATASETS[dataset], units, where


# Scores are reported in the series' units squared (ResMSE) and to the fourth power
# (ResVAR); beyond this magnitude the fourth powers of the errors leave float64.
_MAX_MAGNITUDE = 1e75


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
    big = np.abs(values) > _MAX_MAGNITUDE
    if big.any():
        first = int(np.argmax(big))
        raise CLIError(
            f"series {name!r} has values beyond {_MAX_MAGNITUDE:.0e} in magnitude (the "
            f"first, {values[first]:.6g}, at {where[first]}): the scores, in the series' "
            "units squared and to the fourth power, would overflow float64; divide the "
            "column by a power of ten before forecasting")
    if transform == "logdiff" and np.any(values <= 0):
        raise CLIError(f"series {name!r} has values <= 0; --transform logdiff needs "
                       "positive values")
    # the first --window-size steps are not scored, for every model: a windowed model
    # fills its window there, the others (orfit, ewrls) warm up
    window = args.window_size
    need = ex.min_series_length(n_lags=args.n_lags, window_size=window, transform=transform)
    if values.shape[0] < need:
        role = ("" if args.model not in ("orfit", "ewrls")
                else f" (--model {args.model}: the unscored warm-up)")
        raise CLIError(
            f"series {name!r} has {values.shape[0]} values; with --n-lags {args.n_lags}"
            f" and --window-size {window}{role} the forecast needs at least {need}"
            + (" (one more for differencing)" if transform != "none" else "")
        )


# ------------------------------------------------------------------ memory estimate
def _available_memory():
    """Bytes of memory this process may still use (``None`` when unknown).

    psutil's "available" when installed, else ``MemAvailable`` of ``/proc/meminfo``,
    else the physical memory (``sysconf``); capped by a cgroup v2 limit if one is set.
    """
    found = None
    try:
        import psutil
    except ImportError:
        try:
            with open("/proc/meminfo", encoding="ascii") as fh:
                for line in fh:
                    if line.startswith("MemAvailable:"):
                        found = int(line.split()[1]) * 1024
                        break
        except (OSError, ValueError, IndexError):
            pass
        if found is None:
            try:
                found = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
            except (AttributeError, ValueError, OSError):
                pass
    else:
        found = int(psutil.virtual_memory().available)
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as fh:
            limit = fh.read().strip()
        if limit.isdigit():
            found = int(limit) if found is None else min(found, int(limit))
    except OSError:
        pass
    return found if found and found > 0 else None


def _memory_terms(args, n_components, n_values):
    """The large arrays of a forecast run: ``[(bytes, what, options), ...]``.

    Counts (8-byte floats) from the models' state and their per-chunk work arrays, each
    rounded up (copies made by the solvers included), so that the estimate is of the
    right order without running anything. Python integers: no overflow.
    """
    D, N, L = n_components, args.window_size, args.n_lags
    c = min(args.chunk_size, max(n_values, 1))
    rows = max(n_values - L, 0)
    terms = [(8 * rows * (L + 4), "the lagged rows", "--n-lags")]
    model = args.model
    if model in ("abo", "orfit", "ewrls", "ensemble"):
        terms.append((8 * D * (L + 1), "the random features' frequencies",
                      "--n-components"))
        terms.append((8 * 4 * c * D, "the features of one chunk",
                      "--n-components and --chunk-size"))
    if model in ("abo", "ensemble"):
        terms.append((8 * 3 * N * D, "the window of feature rows",
                      "--window-size and --n-components"))
        terms.append((8 * 3 * (min(N, D) + c) ** 2, "the window's factorisation",
                      "--window-size" if N <= D else "--n-components"))
    elif model == "orfit":
        terms.append((8 * 3 * (args.memory_size + 1) * D, "the ORFit memory",
                      "--memory-size and --n-components"))
    elif model == "ewrls":
        terms.append((8 * 3 * D * D, "the D × D inverse Gram matrix", "--n-components"))
    elif model == "sw-krls":
        terms.append((8 * 4 * (N + c) ** 2, "the window's kernel matrices",
                      "--window-size"))
        terms.append((8 * 2 * N * L, "the window of lagged rows",
                      "--window-size and --n-lags"))
    else:  # qrd-rls
        terms.append((8 * 2 * N * L, "the window of lagged rows",
                      "--window-size and --n-lags"))
        terms.append((8 * 4 * L * L, "the triangular factor", "--n-lags"))
    return terms


def _bytes(n):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"):
        if n < 1024 or unit == "EiB":
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} EiB"  # pragma: no cover


def _check_memory(args, n_components, n_values):
    """Refuse a run whose arrays cannot fit in the available memory (before any)."""
    available = _available_memory()
    if available is None:
        return
    terms = _memory_terms(args, n_components, n_values)
    total = sum(t[0] for t in terms)
    if total <= available:
        return
    size, what, options = max(terms)
    values = {"--n-components": n_components, "--window-size": args.window_size,
              "--n-lags": args.n_lags, "--chunk-size": args.chunk_size,
              "--memory-size": args.memory_size}
    named = " and ".join(f"{o} {values[o]}" for o in options.split(" and "))
    raise CLIError(
        f"--model {args.model} with {named} needs about {_bytes(total)} of memory "
        f"({what}: {_bytes(size)}), more than the {_bytes(available)} available; "
        f"reduce {options.replace(' and ', ' or ')}"
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


# ----------------------------------------------------------------------- output files
def _check_output_dir(path):
    """Create ``--output-dir`` and prove it writable (a probe file, removed at once).

    Called before any computation, so an unwritable directory costs nothing.
    """
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create --output-dir {path}: {exc.strerror or exc}"
                       ) from None
    try:
        fd, probe = tempfile.mkstemp(prefix=".sklearn-orfit-probe-", dir=path)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"--output-dir {path} is not writable: {exc.strerror or exc}"
                       ) from None


@contextlib.contextmanager
def _replacing(path):
    """Yield a temporary path next to ``path``; on success, move it onto ``path``.

    The file appears whole or not at all: an interruption (KeyboardInterrupt, a full
    disk, an error while writing) removes the temporary file and leaves an existing
    ``path`` as it was; so does a block that writes nothing (no matplotlib). The
    temporary name keeps the extension (matplotlib infers the format from it) and the
    file gets the usual permissions (``0o666`` less the umask).
    """
    folder, base = os.path.split(os.path.abspath(path))
    root, ext = os.path.splitext(base)
    fd, tmp = tempfile.mkstemp(prefix=f".{root[:120]}.", suffix=f".partial{ext}",
                               dir=folder)
    os.close(fd)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        yield tmp
        if os.path.getsize(tmp) == 0:  # nothing was written (no matplotlib): no file
            os.remove(tmp)
        else:
            os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise


def _write_predictions(path, problem, result, times):
    with _replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["position", "time", "actual", "forecast", "error", "scored"])
        for i, pos in enumerate(problem.index):
            writer.writerow([
                int(pos), "" if times is None else str(times[pos]),
                repr(float(result.actual[i])), repr(float(result.forecast[i])),
                repr(float(result.actual[i] - result.forecast[i])), int(result.scored[i]),
            ])


def _forecast(args, out):
    values, times, name, description, units, where = _load_series(args)
    transform = args.transform
    if transform == "auto":
        transform = _DEFAULT_TRANSFORM.get(name, "logdiff" if name.startswith("eur")
                                           and args.csv is None else "none")
    _check_series(values, name, where, args=args, transform=transform)
    n_components = args.n_components or _DEFAULT_D.get(args.model, 4096)
    _check_memory(args, n_components, values.shape[0])
    if not args.no_save:
        _check_output_dir(args.output_dir)
    model = ex.make_forecast_model(
        args.model, n_components=n_components, sigma=args.sigma,
        window_size=args.window_size, forgetting_factor=args.forgetting_factor,
        alpha=args.alpha, length_scale=args.length_scale, memory_size=args.memory_size,
        memory_policy=args.memory_policy, delta=args.delta,
        n_partitions=args.n_partitions, n_jobs=args.n_jobs,
        random_state=args.random_state,
    )
    # warnings (numpy's RuntimeWarnings included) are counted and summarised in one
    # note, never printed raw
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        problem = ex.make_forecast_problem(values, n_lags=args.n_lags, transform=transform)
        skip = min(args.window_size, problem.y.shape[0] - 2)
        modelled = {"none": "values", "diff": "first differences",
                    "logdiff": "log returns"}[transform]
        print(f"{PROG} forecast: {name} — {description}; {values.shape[0]} values",
              file=out)
        print(f"model: {args.model} = {_model_description(args, n_components)}", file=out)
        print(f"rows: {modelled}, standardised with past mean/std, {args.n_lags} lags → "
              f"{problem.y.shape[0]} predict-then-update steps (first {skip} not scored)",
              file=out)
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
    finite_forecasts = np.all(np.isfinite(result.forecast))
    if not finite_forecasts:
        print(f"note: {int(np.sum(~np.isfinite(result.forecast)))} forecasts are not "
              "finite: the model diverged on this stream", file=out)
    scores = (result.res_mse, result.res_var, result.res_mse_std, result.res_var_std)
    if finite_forecasts and not all(np.isfinite(x) for x in scores):
        print("note: some scores overflow float64 (inf/nan above): the forecasts are far "
              "from the series (the model diverged on this stream)", file=out)
    if caught:
        first = str(caught[0].message).splitlines()[0]
        print(f"note: {len(caught)} warning(s) during the run; first: "
              f"{caught[0].category.__name__}: {first}", file=out)
    if args.no_save:
        return 0
    safe = "".join(c if c.isalnum() or c in "-." else "_" for c in name)
    stem = f"forecast_{safe}_{args.model}"
    csv_path = os.path.join(args.output_dir, stem + ".csv")
    _write_predictions(csv_path, problem, result, times)
    print(f"predictions: {csv_path}", file=out)
    if args.no_plot:
        return 0
    png_path = os.path.join(args.output_dir, stem + ".png")
    with _replacing(png_path) as tmp:
        drawn = ex.plot_forecast(
            result, tmp,
            title=f"{description}\n{args.model}, one step ahead, last {args.plot_last} "
                  f"values (ResMSE {result.res_mse:.4g}; persistence "
                  f"{result.persistence_mse:.4g})",
            times=None if times is None else times[problem.index],
            rolling=args.rolling, last=args.plot_last, units=units,
        )
    print(f"figure: {png_path}" if drawn else
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
    if not args.no_plot:
        _check_output_dir(args.output_dir)
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
        name = "double_descent_quick.png" if args.quick else "double_descent.png"
        path = os.path.join(args.output_dir, name)
        with _replacing(path) as tmp:
            drawn = ex.plot_double_descent(rows, tmp, window_size=window)
        print(f"figure: {path}" if drawn else
              "figure: not drawn (matplotlib is not installed)", file=out)
    return 0


_RUN = {"forecast": _forecast, "benchmark": _benchmark, "double-descent": _double_descent}


# ASCII spellings of the non-ASCII characters the command prints, for terminals and
# redirections whose encoding lacks them (cp1252, latin-1, ascii)
_ASCII = {
    "σ": "sigma", "λ": "lambda", "α": "alpha", "δ": "delta", "κ": "kappa", "µ": "u",
    "μ": "u", "ŷ": "y_hat", "—": "-", "–": "-", "−": "-", "→": "->", "×": "x",
    "²": "^2", "⁴": "^4", "…": "...", "≤": "<=", "≥": ">=", "·": "*", "±": "+/-",
}
_ENCODE_ERRORS = "sklearn_orfit.ascii"


def _ascii_fallback(exc):
    """Codec error handler: σ → sigma, λ → lambda, ...; anything else backslash-escaped."""
    if not isinstance(exc, UnicodeEncodeError):
        raise exc
    text = exc.object[exc.start:exc.end]
    return "".join(_ASCII.get(ch) or ch.encode("ascii", "backslashreplace").decode()
                   for ch in text), exc.end


codecs.register_error(_ENCODE_ERRORS, _ascii_fallback)


@contextlib.contextmanager
def _printable_streams():
    """Let stdout degrade to ASCII instead of failing to encode.

    ``PYTHONIOENCODING=cp1252`` (a Windows console redirected with ``>``), ``ascii`` or
    ``latin-1`` cannot encode σ, λ or →; stdout gets an error handler that spells them
    in ASCII for the duration of the command (restored afterwards). stderr keeps
    Python's ``backslashreplace``, which never fails and shows user-typed text (a column
    name in an error message) exactly.
    """
    changed = []
    for stream in (sys.stdout,):  # stderr already backslash-escapes (Python's default)
        encoding = getattr(stream, "encoding", None)
        if not encoding or not hasattr(stream, "reconfigure"):
            continue
        try:
            if codecs.lookup(encoding).name.startswith("utf"):
                continue
            previous = stream.errors
            stream.reconfigure(errors=_ENCODE_ERRORS)
        except (LookupError, ValueError, OSError, AttributeError):
            continue
        changed.append((stream, previous))
    try:
        yield
    finally:
        for stream, previous in changed:
            with contextlib.suppress(ValueError, OSError):
                stream.reconfigure(errors=previous)


def main(argv=None):
    """Run ``sklearn-orfit`` with ``argv`` (default: ``sys.argv[1:]``); return the status.

    Exit status: 0 on success, 2 for bad input (one-line message on stderr), 1 for an
    unexpected failure, 130 when interrupted.
    """
    with _printable_streams():
        return _main(argv)


def _main(argv):
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
    except MemoryError as exc:  # numpy's says what it failed to allocate; plain ones don't
        if os.environ.get("SKLEARN_ORFIT_TRACEBACK"):
            raise
        detail = f" ({exc})" if str(exc) else ""
        _error(f"out of memory{detail}; make the problem smaller (--n-rows, "
               "--n-components, --window-size, --chunk-size or --max-log2-d)")
        return 1
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
