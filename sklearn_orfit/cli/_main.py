"""The ``sklearn-orfit`` command line (also ``python -m sklearn_orfit``).

Subcommands:

* ``forecast`` (the default) — a prequential forecast, one or ``--horizon`` steps ahead,
  of a bundled series or of CSV columns (several at once, each with its own model, on
  joblib's workers or a dask cluster), with optional exogenous columns and time stamps:
  prints RMSE, MAE, MASE, skill against the last-value and seasonal-naive forecasts,
  ResMSE, ResVAR and the time per update (or one JSON object, ``--json``), writes the
  predictions (CSV) and a figure (PNG, when matplotlib is installed); then forecasts the
  next ``--horizon`` values after the data with prediction intervals (a
  :class:`~sklearn_orfit.forecasting.StreamForecaster`, adaptive conformal intervals at
  ``--level``; known-future columns ``--exog-future``) to a future-forecast CSV; a stream
  can be saved (``--save-model``: a :class:`~sklearn_orfit.cli.SavedForecast`, which
  ``joblib.load`` returns) and continued on new values (``--load-model``); ``--tune``
  chooses the transform, window, σ and model on the first part of the series
  (:func:`sklearn_orfit.forecasting.tune_forecast`) and reports on the rest;
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
import dataclasses
import io
import json
import logging
import math
import os
import platform
import socket
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

from . import _experiments as ex
from . import _timestamps as _ts
from . import _model
from .._streaming._base import STATE_FORMAT
from ..datasets import load_electricity_demand, load_exchange_rates, make_abo_series
from ..metrics import _beyond_scored_range

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


class _Once(argparse.Action):
    """Store the value; a second occurrence of the option is an error, not a silent
    replacement (``--column a --column b`` would otherwise forecast only ``b``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        seen = getattr(namespace, "_given_once", set())
        if self.dest in seen:
            hint = " (several columns: --column a,b)" if self.dest == "column" else ""
            parser.error(f"{option_string} given more than once "
                         f"({getattr(namespace, self.dest)!r} and {values!r}); give it "
                         f"once{hint}")
        namespace._given_once = seen | {self.dest}
        setattr(namespace, self.dest, values)


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
# the default window and abo's ridge, measured on the bundled demand one step ahead
# (README, "The command line"): N = 500, α = 0.1 cut the RMSE from 335 MW (N = 50,
# α = 0) to 190 MW; N = 1000 reaches 181 MW at twice the cost of the run
_DEFAULT_WINDOW = 500
_DEFAULT_ABO_ALPHA = 0.1
# the grid of --tune (searched in two stages: the transforms, windows and σ at the first
# ridge and D, then every ridge and D of the chosen ones)
_TUNE_WINDOWS = (50, 200, 500, 1000, 2000)
_TUNE_SIGMAS = (0.25, 0.5, 1.0)
_TUNE_ALPHAS = (0.1, 0.0, 0.01, 1.0)
_TUNE_DIMS = (2048, 1024, 4096)
_TUNE_MODELS = ("abo",)
_TUNE_SPLITS = 3


def build_parser():
    """The argument parser of ``sklearn-orfit`` (all subcommands)."""
    from .. import __version__

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
        help="prequential forecast of one or more series (default)",
        description="Predict each value of a series from the values before it, then "
        "learn it (prequential evaluation, no look-ahead). The series is optionally "
        "differenced, standardised with the mean and standard deviation of the past "
        "values, and turned into lagged rows; forecasts are reported in the series' "
        "units, against the last-value and seasonal-naive forecasts. Then the next "
        "--horizon values after the data are forecast, with prediction intervals "
        "(--level), to a future-forecast CSV (*_future.csv).",
        epilog="Model files (--save-model, --load-model) are pickles (joblib): loading "
        "one runs code stored in it, as unpickling does. Load only files you saved "
        "yourself or trust; the command never loads a file you did not name.",
    )
    src = f.add_argument_group("input")
    src.add_argument("--dataset", choices=sorted(_DATASETS), default=None,
                     action=_Once,
                     help="bundled series (default: electricity): "
                     + "; ".join(f"{k}: {v}" for k, v in _DATASETS.items()))
    src.add_argument("--csv", metavar="FILE", default=None, action=_Once,
                     help="CSV file with a header row (delimiter , ; tab or | detected)")
    src.add_argument("--column", metavar="NAME[,NAME...]|all", default=None, action=_Once,
                     help="column(s) of --csv to forecast (optional when one column "
                     "besides the time and --exog columns is numeric): a name, a "
                     "comma-separated list, or 'all' (every numeric column except the "
                     "time and --exog columns); each series gets its own model")
    src.add_argument("--time-column", metavar="NAME", default=None, action=_Once,
                     help="column of --csv holding the time stamps, written to the "
                     "predictions and used as the figure's x-axis and for the default "
                     "--season (default: the first other column whose cells all parse as "
                     "time stamps). Formats, decided by the whole column: ISO 8601 "
                     "(2024-01-31, 2024-01-31T12:00, '2024-01-31 12:00', with a UTC "
                     "offset such as +01:00 or Z: converted to UTC), MM/DD/YYYY or "
                     "DD/MM/YYYY (the order every value fits; see --date-order), "
                     "DD.MM.YYYY, each optionally with a time HH:MM[:SS] [AM|PM], or "
                     "epoch seconds (numbers in [1e8, 1e10): 1973 to 2286, UTC; detected "
                     "only in a column whose name holds time, date, epoch, stamp or unix, "
                     "or is ts). The rows must be in time order without repeated stamps "
                     "(see --sort-time); missing steps are reported in a note")
    src.add_argument("--date-order", choices=("month-first", "day-first"), default=None,
                     help="how to read a/b/YYYY dates (MM/DD/YYYY or DD/MM/YYYY) when every "
                     "value fits both (without it, such a column is an error naming the "
                     "two readings of a value)")
    src.add_argument("--sort-time", action="store_true",
                     help="sort the rows by their time stamps (a stable sort) instead of "
                     "refusing rows out of time order; of rows sharing a time stamp the "
                     "last in the file is kept (a later row corrects an earlier one) and a "
                     "note says how many were dropped")
    src.add_argument("--exog", metavar="NAME[,NAME...]", default=None, action=_Once,
                     help="exogenous columns of --csv: standardised with the statistics "
                     "of their own past values (levels, not differenced) and lagged like "
                     "the series (--n-lags values up to the forecast origin)")
    src.add_argument("--exog-future", metavar="NAME[,NAME...]", default=None, action=_Once,
                     help="exogenous columns of --csv known in advance for the target time "
                     "(a calendar, a temperature forecast): a row holds their standardised "
                     "value at the time it forecasts, not their lags. The CSV may end with "
                     "future rows that hold only these columns (and the time): the series "
                     "left empty; their values feed the forecast of the future (at least "
                     "--horizon such rows are needed)")
    src.add_argument("--n-rows", type=_int_at_least(1), default=None, metavar="N",
                     help="use only the first N values of the series")
    src.add_argument("--transform", choices=("auto", *ex.TRANSFORMS), default="auto",
                     help="model the values, their changes (diff) or log changes (logdiff) "
                     "(auto: diff for electricity, logdiff for exchange rates, none "
                     "otherwise). With --horizon H, diff targets the change over the "
                     "horizon, v[t+H] - v[t], and the forecast is v[t] + the predicted "
                     "change (logdiff: log v[t+H] - log v[t], forecast v[t]·exp(...))")
    m = f.add_argument_group("model")
    m.add_argument("--model", choices=ex.MODELS, default="abo",
                   help="abo: random Fourier features -> QR-EWRLS (default); orfit: "
                   "features -> ORFit; ensemble: feature-partition ensemble of abo; "
                   "sw-krls, qrd-rls: the baselines on the lags; ewrls: features -> "
                   "covariance-form EW-RLS; aggregate: online aggregation (BOA) of a grid "
                   "of abo and sw-krls experts (--experts), which chooses its own "
                   "settings as the stream goes, with no tuning phase")
    m.add_argument("--experts", metavar="SPEC", default=None, action=_Once,
                   help="the expert grid of --model aggregate: parameters of "
                   "sklearn_orfit.make_expert_grid, 'name=v1,v2;name=...' (abo_windows, "
                   "sigmas, n_components, abo_alphas, forgetting_factors, krls_windows, "
                   "krls_length_scales, krls_alphas; an empty list, e.g. 'krls_windows=', "
                   "leaves that family out). Default: "
                   + ";".join(f"{k}={','.join(map(str, v))}"
                              for k, v in ex.DEFAULT_EXPERTS.items())
                   + " (8 experts; the SW-KRLS length scales are 1/σ)")
    m.add_argument("--n-lags", type=_int_at_least(1), default=20, metavar="L",
                   help="lagged values per row (default 20)")
    m.add_argument("--horizon", type=_int_at_least(1), default=1, metavar="H",
                   help="forecast H steps ahead (default 1): a row built at time t "
                   "predicts the value at t+H, and is learned only once that value is "
                   "known (prequential evaluation with delayed labels, H-1 rows late; "
                   "the learning is done twice, so H > 1 costs about twice as much)")
    m.add_argument("--window-size", type=_int_at_least(1), default=None, metavar="N",
                   help="window length N (abo, ensemble, sw-krls, qrd-rls, aggregate's "
                   "scores) and, for every model, the first steps left out of the scores "
                   f"(default {_DEFAULT_WINDOW}, or half the rows of a series too short "
                   "for it, at least 20)")
    m.add_argument("--n-components", type=_int_at_least(1), default=None, metavar="D",
                   help="random features D (default 2048; 256 for ewrls, whose "
                   "covariance form costs D² per step)")
    m.add_argument("--sigma", type=_float_in(0.0), default=0.5,
                   help="frequency scale of the random features (default 0.5)")
    m.add_argument("--forgetting-factor", type=_float_in(0.0, 1.0), default=1.0,
                   metavar="LAMBDA", help="forgetting factor λ in (0, 1] (default 1)")
    m.add_argument("--alpha", type=_float_in(0.0, lo_open=False), default=None,
                   help=f"ridge penalty (default {_DEFAULT_ABO_ALPHA} for abo, 0 for the "
                   "ensemble, 1e-2 for the baselines)")
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
    m.add_argument("--random-state", type=int, default=0, help="seed (default 0)")
    t = f.add_argument_group("tuning")
    t.add_argument("--tune", action="store_true",
                   help="choose the transform, --window-size, --sigma, --alpha, "
                   "--n-components and --model on the first part of the series only (--tune-fraction; GridSearchCV over "
                   "prequential folds, transforms compared in the series' units), then "
                   "forecast with the choice and report only on the values after that "
                   "part. A setting given explicitly (e.g. --window-size 100) is kept, "
                   "not tuned. Grid: transforms none, diff, logdiff (logdiff only for a "
                   "positive series); N in " + ", ".join(map(str, _TUNE_WINDOWS))
                   + "; σ in " + ", ".join(map(str, _TUNE_SIGMAS)) + "; the --tune-models; "
                   "then, for the chosen ones, α in " + ", ".join(map(str, _TUNE_ALPHAS))
                   + " and D in " + ", ".join(map(str, _TUNE_DIMS))
                   + " (a window too long for the tuning part is left out with a note)")
    t.add_argument("--tune-fraction", type=_float_in(0.0, 1.0, hi_open=True), default=0.3,
                   metavar="F", help="fraction of the series, from its start, that --tune "
                   "sees (default 0.3)")
    t.add_argument("--tune-models", metavar="NAME[,NAME...]", default=None, action=_Once,
                   help="models --tune chooses among (default abo), e.g. abo,sw-krls")
    o = f.add_argument_group("run and output")
    o.add_argument("--n-jobs", type=int, default=None,
                   help="joblib workers: the series of a several-column forecast run in "
                   "parallel, and the ensemble's partitions (default: joblib's, one)")
    o.add_argument("--backend", choices=("loky", "threading", "dask"), default=None,
                   help="joblib backend of those workers (default: joblib's, loky); "
                   "dask needs --scheduler and the optional packages dask and "
                   "distributed")
    o.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="address of a running dask scheduler (e.g. tcp://10.0.0.5:8786), "
                   "for --backend dask (implied)")
    o.add_argument("--timeout", type=_float_in(0.0), default=None, metavar="SECONDS",
                   help="with --backend dask: stop the run with an error (exit status "
                   "2) when the cluster has had no worker, or its scheduler has not "
                   f"answered, for SECONDS (default {_DASK_TIMEOUT:g}; looked at once a "
                   "second); a run whose workers are all lost would otherwise wait for "
                   "new ones for ever")
    o.add_argument("--threads", type=_int_at_least(1), default=1,
                   help="BLAS threads per series (default 1: the updates are small matrix "
                   "products, which more threads slow down, badly so on a busy machine)")
    o.add_argument("--season", type=_int_at_least(1), default=None, metavar="S",
                   help="season length of the seasonal-naive comparison and of MASE, in "
                   "steps (default: from the time stamps' spacing, e.g. 48 for "
                   "half-hourly data, 7 for daily; none without time stamps)")
    o.add_argument("--chunk-size", type=_int_at_least(1), default=250,
                   help="rows per prequential call; the progress bar moves per chunk "
                   "(default 250)")
    o.add_argument("--save-model", metavar="PATH", default=None, action=_Once,
                   help="save the fitted model(s) and what the stream needs to continue "
                   "(standardisation state, last lags, settings) to PATH (joblib: "
                   "joblib.load(PATH) returns a sklearn_orfit.cli.SavedForecast, one "
                   "StreamForecaster per series, with predict and predict_interval), "
                   "written whole or not at all; the model is kept as of the last "
                   "--chunk-size boundary and the rows after it are learned again when "
                   "the stream continues, so that it continues exactly")
    o.add_argument("--load-model", metavar="PATH", default=None, action=_Once,
                   help="continue the stream saved in PATH on new values (the rows after "
                   "those it was saved with): the forecasts are those of one "
                   "uninterrupted run. Settings come from the file; flags given must "
                   "agree with them. Loading runs code from the file (it is a pickle): "
                   "load only files you trust")
    o.add_argument("--level", type=_float_in(0.0, 100.0, hi_open=True), nargs="+",
                   default=[80.0, 95.0], metavar="PERCENT",
                   help="coverage of the future forecast's prediction intervals, in %% "
                   "(default: 80 95); adaptive conformal intervals (ACI) from the "
                   "forecaster's own prequential residuals of each step")
    o.add_argument("--calibration", type=_int_at_least(20), default=500, metavar="C",
                   help="forecasts whose residuals calibrate the intervals: the future "
                   "forecaster learns the last window plus C values of each series (plus "
                   "the lags and the horizon; default 500); a continued stream keeps "
                   "learning every new value")
    o.add_argument("--skip-seen", action="store_true",
                   help="with --load-model: skip (with a note) the rows at or before the "
                   "saved model's last time stamp instead of refusing them")
    o.add_argument("--json", action="store_true",
                   help="print the metrics and settings as one JSON object on stdout "
                   "(nothing else; no progress bar)")
    o.add_argument("--output-dir", default="sklearn-orfit-output", metavar="DIR",
                   help="where the predictions CSV and the figure go "
                   "(default ./sklearn-orfit-output)")
    o.add_argument("--no-save", action="store_true",
                   help="write no predictions or figure (--save-model still saves)")
    o.add_argument("--no-plot", action="store_true", help="write no figure")
    o.add_argument("--plot-last", type=_int_at_least(2), default=None, metavar="K",
                   help="values shown in the figure's top panel, before the future "
                   "forecast and its band (default: the last week, from the time stamps' "
                   "spacing; 336 without time stamps)")
    o.add_argument("--rolling", type=_int_at_least(1), default=48, metavar="W",
                   help="rolling window of the error panel (default 48)")
    o.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.forecast_parser = f

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


def _float_cell(cell):
    """``float(cell)``, NaN for a missing cell, ``None`` when not a number."""
    if cell.lower() in _NA:
        return math.nan
    try:
        return float(cell)
    except ValueError:
        return None


def _read_csv_table(path, *, columns=None, exog=None, time_column=None, n_rows=None,
                    date_order=None, report=None):
    """Read the columns a forecast needs from a CSV file, streaming.

    ``columns``: ``None`` (the file's only numeric column besides the time and ``exog``
    columns), ``"all"`` (every numeric column but the
    time and ``exog`` columns), or names separated by commas (a column whose name holds a
    comma is named whole), or a list of names; ``exog`` likewise (``None``: none).
    ``time_column``: a name, or ``None`` to detect one (the first other column whose
    cells all parse as dates). Only the first
    ``n_rows`` data rows (all when ``None``) are read, so memory stays bounded by what is
    used (8 bytes per value and per line number), whatever the file's size. Records end
    only at ``\\r``, ``\\n`` or ``\\r\\n`` (quoted cells may hold line breaks); blank
    records are skipped; the first non-blank record is the header.

    Returns ``(values, times, time_column, line_numbers, exog)``: ``values`` maps each
    column read (targets, then ``exog``) to its floats (NaN for missing cells), ``times``
    is a ``datetime64`` array or ``None``, the line number is that of the record's first
    line, ``exog`` the exogenous columns' names.

    The time stamps' format is decided by the whole column
    (:func:`sklearn_orfit.cli._timestamps.parse_time_column`; ``date_order`` for
    ``a/b/YYYY`` dates). ``report``, a dict, receives ``time_info`` (the format, whether
    converted to UTC) and ``not_time`` (why each text column looked at is not a time
    column, when detecting).
    """
    if not os.path.exists(path):
        raise CLIError(f"file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"{path} is a directory, not a CSV file")
    numbers = array.array("q")
    line_no = 0
    header = None
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
            for row in reader:
                start, line_no = line_no + 1, reader.line_num
                if not any(c.strip() for c in row):
                    continue
                if header is None:
                    header = [c.strip() for c in row]
                    plan = _plan_columns(header, columns, exog, time_column, path)
                    required, optional, time_candidates, exog_names, mode = plan
                    values = {j: array.array("d") for j in (*required, *sorted(optional))}
                    stamps = {j: [] for j in time_candidates}
                    # numbers as time stamps: in --time-column, or epoch seconds in a
                    # column named like a time column
                    numeric_times = {j: True if time_column is not None else
                                     "epoch" if _ts.epoch_name(header[j]) else False
                                     for j in time_candidates}
                    not_time = {}
                    continue
                for j in list(values):
                    cell = row[j].strip() if j < len(row) else ""
                    x = _float_cell(cell)
                    if x is None:
                        if j in optional:  # --column all: not a numeric column
                            del values[j]
                            optional.discard(j)
                            continue
                        raise CLIError(f"column {header[j]!r} of {path} is not numeric: "
                                       f"line {start} has {cell!r}")
                    values[j].append(x)
                for j in list(stamps):
                    cell = row[j].strip() if j < len(row) else ""
                    if _ts.cell_format(cell, numbers=numeric_times[j]) is None:
                        if time_column is not None:
                            raise CLIError(f"--time-column {header[j]!r} of {path} does "
                                           f"not hold time stamps: line {start} has "
                                           f"{cell!r} ({_ts.HINT})")
                        if numeric_times[j] or _float_cell(cell) is None:  # not data
                            not_time[j] = f"column {header[j]!r}: line {start} has {cell!r}"
                        del stamps[j]
                        continue
                    stamps[j].append(cell)
                numbers.append(start)
                if n_rows is not None and len(numbers) >= n_rows:
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
    times, time_name, lines = None, None, np.frombuffer(numbers, dtype=np.int64)
    for j, cells in stamps.items():
        if len(cells) != len(numbers) or not cells:
            continue
        what = (f"--time-column {header[j]!r} of {path}" if time_column is not None
                else f"column {header[j]!r} of {path}")
        try:
            times, info = _ts.parse_time_column(
                cells, name=header[j], lines=lines, date_order=date_order,
                numbers=numeric_times[j], what=what)
        except _ts.TimeStampError as exc:
            if time_column is not None or exc.ambiguous:
                other = ("" if time_column is not None else " (or name the time column "
                         "with --time-column)")
                raise CLIError(f"{exc}{other}") from None
            if j not in values:  # a text (or epoch-named) column, not a numeric one
                not_time[j] = str(exc).replace(f" of {path}", "")
            continue
        time_name = header[j]
        if report is not None:
            report["time_info"] = info
        if j in optional:  # epoch seconds: a time column, not a series
            optional.discard(j)
            values.pop(j, None)
        break
    if report is not None:
        report["not_time"] = [] if times is not None else [
            not_time[j] for j in sorted(not_time) if j not in values]
    if mode == "one" and len(optional) != 1:
        raise CLIError(f"{path} has {len(header)} columns ({_listing(header)}); choose "
                       "one with --column (several: --column a,b or --column all)")
    if mode == "all" and not optional:
        raise CLIError(f"--column all: {path} has no numeric column to forecast besides "
                       f"the time and --exog columns (columns: {_listing(header)})")
    if time_column is not None and times is None:
        times, time_name = np.array([], dtype="datetime64[s]"), time_column
    return ({header[j]: np.frombuffer(v, dtype=np.float64) for j, v in values.items()},
            times, time_name, np.frombuffer(numbers, dtype=np.int64), exog_names)


def _listing(header):
    return ", ".join(repr(c) for c in header)


def _resolve_names(text, header, flag):
    """A column name, or names separated by commas (a header name holding a comma is one
    name); a list passes through."""
    if text is None or isinstance(text, list):
        return text
    if text.strip() in header:
        return [text.strip()]
    return _names(text, flag)


def _plan_columns(header, columns, exog, time_column, path):
    """Column indices ``(required numeric, optional numeric, time-stamp candidates)``, the
    exog names and the mode: ``"all"`` (every numeric column, ``--column all``),
    ``"one"`` (the only numeric one, no ``--column``) or ``"named"``."""
    def index(name, what):
        if name not in header:
            raise CLIError(f"{what}column {name!r} not found in {path} (columns: "
                           f"{_listing(header)})")
        _refuse_duplicate(name)
        return header.index(name)

    def _refuse_duplicate(name):
        where = [j + 1 for j, h in enumerate(header) if h == name]
        if len(where) > 1:
            raise CLIError(f"{path} has {len(where)} columns named {name!r} (columns "
                           f"{', '.join(map(str, where))}): the name does not say which; "
                           "rename them")

    exog = _resolve_names(exog, header, "--exog") or []
    all_columns = isinstance(columns, str) and columns.strip() == "all" \
        and "all" not in header
    columns = "all" if all_columns else _resolve_names(columns, header, "--column")
    exog_j = [index(name, "--exog ") for name in exog]
    time_j = None if time_column is None else index(time_column, "--time-column ")
    if columns is None and len(header) == 1:
        columns = [header[0]]
    mode = "one" if columns is None else "all" if columns == "all" else "named"
    if mode != "named":
        target_j = []
        optional = {j for j in range(len(header)) if j not in exog_j and j != time_j}
        for j in optional:  # each series is written and reported under its name
            _refuse_duplicate(header[j])
    else:
        target_j = [index(name, "") for name in columns]
        optional = set()
    for j in target_j:
        if j == time_j:
            raise CLIError(f"column {header[j]!r} is both forecast and --time-column")
        if j in exog_j:
            raise CLIError(f"column {header[j]!r} is both forecast and --exog")
    if time_j is not None and time_j in exog_j:
        raise CLIError(f"column {header[time_j]!r} is both --exog and --time-column")
    if time_j is not None:
        candidates = [time_j]
    else:
        used = set(target_j) | set(exog_j)
        candidates = [j for j in range(len(header)) if j not in used]
    return [*target_j, *exog_j], optional, candidates, exog, mode


def _read_csv_column(path, column, n_rows=None):
    """Values of ``column`` of a CSV file as floats (NaN for missing cells).

    Returns ``(values, column, line_numbers)``; see :func:`_read_csv_table`.
    """
    values, _, _, numbers, _ = _read_csv_table(
        path, columns=None if column is None else [column], time_column=None,
        n_rows=n_rows)
    (name, got), = values.items()
    return got, name, numbers


def _names(text, flag):
    """``a,b`` → ``["a", "b"]``: names separated by commas, each given once."""
    names = [c.strip() for c in text.split(",")]
    if any(not c for c in names):
        raise CLIError(f"{flag} {text!r} has an empty column name")
    repeated = sorted({c for c in names if names.count(c) > 1})
    if repeated:
        raise CLIError(f"{flag} names {_listing(repeated)} more than once")
    return names


@dataclasses.dataclass
class _Input:
    """What a forecast run reads: one or more series, optional exog columns and times."""

    series: dict  # name → values
    times: object  # datetime64 array or None
    time_column: object
    exog: object  # (n, n_exog) array or None
    exog_names: list
    source: str  # "electricity" or the CSV's stem
    description: str
    units: str
    where: object  # _Where
    time_notes: list = dataclasses.field(default_factory=list)  # format, order, gaps
    n_future_exog: int = 0  # the last exog columns are known in advance
    future_exog: object = None  # (F, n_future_exog): their values after the data
    future_times: object = None  # the time stamps of those rows (or None)


def _load_input(args):
    """The input of a forecast: bundled series or CSV columns (first ``--n-rows`` values).

    A CSV file is streamed and not read further than needed.
    """
    if args.csv is not None and args.dataset is not None:
        raise CLIError("give either --csv or --dataset, not both")
    for flag, value in (("--column", args.column), ("--exog", args.exog),
                        ("--time-column", args.time_column),
                        ("--date-order", getattr(args, "date_order", None)),
                        ("--sort-time", getattr(args, "sort_time", False) or None)):
        if args.csv is None and value is not None:
            raise CLIError(f"{flag} needs --csv")
    if args.csv is None and args.exog_future is not None:
        raise CLIError("--exog-future needs --csv")
    n = args.n_rows
    if args.csv is not None:
        time_column = args.time_column.strip() if args.time_column is not None else None
        report = {}
        past = _exog_list(args.exog, "--exog")
        future = _exog_list(args.exog_future, "--exog-future")
        both = [c for c in future if c in past]
        if both:
            raise CLIError(f"column(s) {_listing(both)} given to both --exog and "
                           "--exog-future: a column is known either up to the forecast "
                           "origin or in advance")
        values, times, time_name, line_numbers, exog = _read_csv_table(
            args.csv, columns=args.column, exog=(past + future) or None,
            time_column=time_column, n_rows=n, date_order=getattr(args, "date_order", None),
            report=report)
        stem = os.path.splitext(os.path.basename(args.csv))[0]
        series = {k: v for k, v in values.items() if k not in exog}
        exog_values = (np.column_stack([values[k] for k in exog]) if exog else None)
        names = ", ".join(repr(c) for c in series)
        data = _Input(series, times, time_name, exog_values, exog, stem,
                      f"column{'s' if len(series) > 1 else ''} {names} of {args.csv}", "",
                      _Where("line", line_numbers), n_future_exog=len(future))
        data = _checked_times(data, args, report, args.csv)
        return _split_future_rows(data, future) if future else data
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
    return _Input({dataset: values}, times, None, None, [], dataset, _DATASETS[dataset],
                  units, where)


def _checked_times(data, args, report, path):
    """``data`` with its time stamps checked: rows out of time order or repeating a
    time stamp refused (or, with ``--sort-time``, sorted, keeping the last row of each
    time stamp), and ``time_notes`` on the format, UTC, the rows dropped and the gaps
    (or, without time stamps, on the columns looked at)."""
    notes = []
    times, name = data.times, data.time_column
    if times is None:
        looked = report.get("not_time") or []
        if looked:
            more = f"; {len(looked) - 3} more" if len(looked) > 3 else ""
            notes.append("no time stamps: the columns looked at are not time columns ("
                         + "; ".join(looked[:3]) + more + f"); {_ts.HINT}; --time-column "
                         "NAME says why a column is not read")
        return dataclasses.replace(data, time_notes=notes)
    if not len(times):
        return data
    info = report.get("time_info") or {}
    if info.get("format") not in (None, "ISO 8601"):
        notes.append(f"time column {name!r} read as {info['format']}"
                     + (" (UTC)" if info["format"] == "epoch seconds" else ""))
    elif info.get("utc"):
        notes.append(f"time column {name!r}: the UTC offsets are converted, the time "
                     "stamps are in UTC")
    order = _ts.check_order(times)
    where = data.where
    repeated = ""
    if order["n_repeated"]:
        i, j = order["first_repeated"]
        n = order["n_repeated"]
        repeated = (f"{n} row{'s' if n > 1 else ''} repeat{'' if n > 1 else 's'} an "
                    f"earlier time stamp, first {_ts.format_stamp(times[j])} ({where[i]} "
                    f"and {where[j]})")
    if order["n_backwards"] or order["n_repeated"]:
        if not args.sort_time:
            problems = []
            if order["n_backwards"]:
                k = order["first_backwards"]
                problems.append(
                    f"is not in time order: {where[k]} has {_ts.format_stamp(times[k])}, "
                    f"earlier than {where[k - 1]} ({_ts.format_stamp(times[k - 1])}); "
                    f"{order['n_backwards']} step(s) back in all")
            if repeated:
                problems.append(repeated)
            fix = ("sort the rows by time" if not repeated else "sort the rows by time "
                   "and keep the last row of each time stamp" if order["n_backwards"]
                   else "keep the last row of each time stamp")
            raise CLIError(f"time column {name!r} of {path} " + "; ".join(problems)
                           + f"; give --sort-time to {fix}, or fix the file")
        keep = _ts.sort_order(times)
        series = {k: v[keep] for k, v in data.series.items()}
        exog = None if data.exog is None else data.exog[keep]
        data = dataclasses.replace(data, series=series, exog=exog, times=times[keep],
                                   where=_Where(where.label, where.numbers[keep]))
        times = data.times
        sorted_text = (f"the rows are sorted by time ({order['n_backwards']} step(s) "
                       "back in the file)" if order["n_backwards"] else "")
        dropped = (f"{repeated}: dropped, the last row of each time stamp is kept"
                   if repeated else "")
        notes.append("--sort-time: " + "; ".join(t for t in (sorted_text, dropped) if t))
    gaps = _ts.gap_note(times, name)
    if gaps:
        notes.append(gaps)
    return dataclasses.replace(data, time_notes=notes)


def _exog_list(text, flag):
    if text is None:
        return []
    return list(text) if isinstance(text, list) else _names(text, flag)


def _split_future_rows(data, future):
    """Move the CSV's trailing rows whose series are all empty (the future rows of
    ``--exog-future``) out of the data: their known-future values (and time stamps) feed
    the forecast of the future."""
    n = data.exog.shape[0]
    empty = np.all(np.column_stack([np.isnan(v) for v in data.series.values()]), axis=1)
    k = n
    while k > 0 and empty[k - 1]:
        k -= 1
    if k == n:
        return data
    fut = data.exog[k:, data.exog.shape[1] - len(future):]
    bad = ~np.isfinite(fut)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise CLIError(f"--exog-future column {future[j]!r} is missing at "
                       f"{data.where[k + i]}, a future row (the series are empty there): "
                       "a future row needs every --exog-future value")
    times = data.times
    future_times = None
    if times is not None and len(times) == n:
        future_times, times = times[k:], times[:k]
    return dataclasses.replace(
        data, series={name: v[:k] for name, v in data.series.items()},
        exog=data.exog[:k], times=times, where=data.where[:k], future_exog=fut,
        future_times=future_times)


def _check_values(values, name, where, *, what="series"):
    """Finite values within the magnitude the scores can hold (``what``: how to name
    the column in a message)."""
    bad = ~np.isfinite(values)
    if bad.any():
        first = int(np.argmax(bad))
        kind = "missing or NaN" if np.isnan(values[first]) else "infinite"
        raise CLIError(f"{what} {name!r} has {int(bad.sum())} missing, NaN or infinite "
                       f"value(s), the first ({kind}) at {where[first]}; fill or drop "
                       "them before forecasting")
    beyond = _beyond_scored_range(values)
    if beyond is not None:
        first, message = beyond
        raise CLIError(f"{what} {name!r} " + message.format(
            where=where[first], what="column", doing="forecasting"))


def _check_series(values, name, where, *, args, transform, continuing=False):
    if values.shape[0] == 0:
        raise CLIError(f"series {name!r} has no values")
    _check_values(values, name, where)
    if transform == "logdiff" and np.any(values <= 0):
        raise CLIError(f"series {name!r} has values <= 0; --transform logdiff needs "
                       "positive values")
    if continuing:  # the saved stream holds the lags and the warm-up
        return
    # the first --window-size steps are not scored, for every model: a windowed model
    # fills its window there, the others (orfit, ewrls) warm up
    window = args.window_size
    horizon = getattr(args, "horizon", 1)
    need = ex.min_series_length(n_lags=args.n_lags, window_size=window, transform=transform,
                                horizon=horizon)
    if values.shape[0] < need:
        role = ("" if args.model not in ("orfit", "ewrls")
                else f" (--model {args.model}: the unscored warm-up)")
        with_h = f", --horizon {horizon}" if horizon > 1 else ""
        raise CLIError(
            f"series {name!r} has {values.shape[0]} values; with --n-lags {args.n_lags}"
            f"{with_h} and --window-size {window}{role} the forecast needs at least {need}"
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
    D, N, L = n_components, args.window_size or _DEFAULT_WINDOW, args.n_lags
    c = min(args.chunk_size, max(n_values, 1))
    rows = max(n_values - L, 0)
    inputs = L * (1 + getattr(args, "n_exog", 0)) + getattr(args, "n_future_exog", 0)
    terms = [(8 * rows * (inputs + 4), "the lagged rows", "--n-lags")]
    model = args.model
    if model in ("abo", "orfit", "ewrls", "ensemble"):
        terms.append((8 * D * (inputs + 1), "the random features' frequencies",
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
    elif model == "aggregate":
        grid = _parse_experts(getattr(args, "experts", None)) or ex.DEFAULT_EXPERTS
        n_sig = len(grid["sigmas"]) * len(grid.get("abo_alphas", (0.0,))) * len(
            grid.get("forgetting_factors", (1.0,)))
        abo = sum(8 * 3 * n * d * n_sig + 8 * 3 * (min(n, d) + c) ** 2 * n_sig
                  for n in grid.get("abo_windows", ()) for d in grid["n_components"])
        n_scales = len(grid.get("krls_length_scales") or grid["sigmas"]) * len(
            grid.get("krls_alphas", (1e-2,)))
        krls = sum(8 * 4 * (n + c) ** 2 * n_scales for n in grid.get("krls_windows", ()))
        terms.append((abo + krls, "the experts' windows and factorisations", "--experts"))
        terms.append((8 * 4 * c * max(grid["n_components"]) * len(grid["sigmas"]),
                      "the features of one chunk", "--experts and --chunk-size"))
    elif model == "sw-krls":
        terms.append((8 * 4 * (N + c) ** 2, "the window's kernel matrices",
                      "--window-size"))
        terms.append((8 * 2 * N * inputs, "the window of lagged rows",
                      "--window-size and --n-lags"))
    else:  # qrd-rls
        terms.append((8 * 2 * N * inputs, "the window of lagged rows",
                      "--window-size and --n-lags"))
        terms.append((8 * 4 * inputs * inputs, "the triangular factor", "--n-lags"))
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
              "--memory-size": args.memory_size,
              "--experts": repr(getattr(args, "experts", None) or "(the default grid)")}
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
        "aggregate": _aggregate_description(args),
    }[args.model]


def _aggregate_description(args):
    grid = _parse_experts(getattr(args, "experts", None)) or ex.DEFAULT_EXPERTS
    sig = ", ".join(f"{x:g}" for x in grid["sigmas"])
    n_abo = (len(grid.get("abo_windows", ())) * len(grid["sigmas"])
             * len(grid["n_components"]) * len(grid.get("abo_alphas", (0.0,)))
             * len(grid.get("forgetting_factors", (1.0,))))
    scales = grid.get("krls_length_scales") or grid["sigmas"]
    n_krls = (len(grid.get("krls_windows", ())) * len(scales)
              * len(grid.get("krls_alphas", (1e-2,))))
    parts = []
    if n_abo:
        parts.append(f"{n_abo} ABO (N ∈ {{{', '.join(map(str, grid['abo_windows']))}}}, "
                     f"σ ∈ {{{sig}}}, D ∈ {{{', '.join(map(str, grid['n_components']))}}})")
    if n_krls:
        parts.append(f"{n_krls} SW-KRLS (N ∈ "
                     f"{{{', '.join(map(str, grid['krls_windows']))}}}, s = "
                     + ("1/σ" if not grid.get("krls_length_scales") else
                        "{" + ", ".join(f"{x:g}" for x in scales) + "}") + ")")
    return f"AggregatingRegressor(BOA over {n_abo + n_krls} experts: {', '.join(parts)})"


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


def _write_predictions(path, result, times, time_offset=0):
    """The predictions CSV: one row per forecast value (``time``: its time stamp)."""
    with _replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        writer.writerow(["position", "time", "actual", "forecast", "error", "scored"])
        for i, pos in enumerate(result.index):
            k = int(pos) - time_offset
            writer.writerow([
                int(pos), "" if times is None or not 0 <= k < len(times) else str(times[k]),
                repr(float(result.actual[i])), repr(float(result.forecast[i])),
                repr(float(result.actual[i] - result.forecast[i])), int(result.scored[i]),
            ])


def _write_future(path, future, times, levels, first_position):
    """The future-forecast CSV: one row per step ahead, with its intervals."""
    with _replacing(path) as tmp, open(tmp, "w", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        bounds = [f"{side}_{level:g}" for level in levels for side in ("lower", "upper")]
        writer.writerow(["step", "position", "time", "forecast", *bounds])
        for k, f in enumerate(future["forecast"]):
            cells = [repr(float(x)) for x in future["intervals"][k].ravel()]
            writer.writerow([k + 1, first_position + k,
                             "" if times is None else str(times[k]), repr(float(f)),
                             *cells])


def _time_step(times):
    """The step of increasing time stamps: the most common spacing of the last ones."""
    if not _increasing(times):
        return None
    d = np.diff(times[-1001:])
    values, counts = np.unique(d, return_counts=True)
    return values[int(np.argmax(counts))]


def _parse_step(text):
    value, unit = str(text).split()
    return np.timedelta64(int(value), "s" if unit.startswith("second") else unit)


# ----------------------------------------------------------------------- model files
_MODEL_FORMATS = ("sklearn-orfit forecast model", "sklearn-orfit forecast stream")
# 3: a SavedForecast object (joblib.load returns it), with one StreamForecaster per
# series; 2: a header dict, then the stream states (RecursiveStandardScaler statistics);
# 1: running sums
_MODEL_FORMAT_VERSION = _model.MODEL_FILE_FORMAT
# the settings a saved stream fixes: given again, they must agree with the file
_STREAM_SETTINGS = ("model", "n_lags", "horizon", "transform", "window_size",
                    "n_components", "sigma", "forgetting_factor", "alpha", "length_scale",
                    "memory_size", "memory_policy", "delta", "n_partitions",
                    "random_state", "chunk_size", "levels", "calibration", "experts")


def _output_paths(args, data, names):
    """``{series: (predictions CSV, figure PNG, future-forecast CSV)}``, distinct paths
    for each series.

    A name is made safe for a file name by replacing what is not a letter, a digit,
    ``-`` or ``.`` with ``_``; series whose safe names coincide (``a b``, ``a_b`` and
    ``a/b``) get their column's position appended, so no file is written twice.
    """
    stems = {}
    for name in names:
        full = name if args.csv is None else f"{data.source}:{name}"
        safe = "".join(c if c.isalnum() or c in "-." else "_" for c in full)
        stems[name] = f"forecast_{safe}_{args.model}"
    counts = {}
    for stem in stems.values():
        counts[stem.lower()] = counts.get(stem.lower(), 0) + 1  # case-insensitive file systems
    paths = {}
    for k, (name, stem) in enumerate(stems.items(), start=1):
        if counts[stem.lower()] > 1:
            stem = f"{stem}_series{k}"
        paths[name] = tuple(os.path.join(args.output_dir, stem + ext)
                            for ext in (".csv", ".png", "_future.csv"))
    return paths


def _same_file(a, b):
    a, b = os.path.realpath(a), os.path.realpath(b)
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.normcase(a) == os.path.normcase(b)


def _check_model_path_is_free(args, outputs):
    """``--save-model`` never replaces the input data or another output of the run."""
    # (the --load-model file may be saved back: the continued stream replaces it)
    taken = [] if args.csv is None else [("--csv", args.csv)]
    for name, (csv_path, png_path, future_path) in outputs.items():
        taken.append((f"the predictions of {name!r}", csv_path))
        taken.append((f"the future forecast of {name!r}", future_path))
        if not args.no_plot:
            taken.append((f"the figure of {name!r}", png_path))
    for what, path in taken:
        if _same_file(args.save_model, path):
            raise CLIError(f"--save-model {args.save_model} is {what}; saving the model "
                           "there would replace it: give another file name")


def _check_save_path(path):
    """Refuse an unwritable ``--save-model`` before any computation."""
    folder = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise CLIError(f"--save-model {path} is a directory; give a file name")
    if not os.path.isdir(folder):
        raise CLIError(f"--save-model {path}: the directory {folder} does not exist")
    try:
        fd, probe = tempfile.mkstemp(prefix=".sklearn-orfit-probe-", dir=folder)
        os.close(fd)
        os.remove(probe)
    except OSError as exc:
        raise CLIError(f"--save-model {path}: {folder} is not writable: "
                       f"{exc.strerror or exc}") from None


def _save_model(path, header, streams):
    """Write the model file whole or not at all: a :class:`SavedForecast` (joblib).

    Its pickle starts with a plain header (formats, versions; builtins only), read
    before anything else is unpickled, so a file of another format is refused without
    running its code; ``joblib.load`` returns the object.
    """
    import joblib

    forecasters = {name: state.pop("forecaster") for name, state in streams.items()}
    metadata = {k: v for k, v in header.items() if k != "settings"}
    saved = _model.SavedForecast(forecasters, settings=header["settings"],
                                 metadata=metadata, streams=streams)
    with _replacing(path) as tmp, open(tmp, "wb") as fh:
        joblib.dump(saved, fh)


def _load_model(path):
    """``(header, streams)`` of a model file saved with ``--save-model``.

    Only ``path`` (named by the user) is read. A file whose header is not a model
    file's, or whose model file format or state format is not this version's, is refused
    before its content is unpickled; the package version that saved it does not matter.
    ``header`` holds the saved settings and metadata; each stream, its ``forecaster``.
    """
    from .. import __version__

    if not os.path.exists(path):
        raise CLIError(f"--load-model: file not found: {path}")
    if os.path.isdir(path):
        raise CLIError(f"--load-model {path} is a directory, not a model file")
    not_model = (f"--load-model {path} is not a sklearn-orfit model file (one written by "
                 "--save-model)")
    try:
        with open(path, "rb") as fh:
            header, payload, damaged = _model.read_header(fh)
    except OSError as exc:
        raise CLIError(f"cannot read --load-model {path}: {exc.strerror or exc}") from None
    if damaged:
        raise CLIError(f"--load-model {path} is damaged: its header cannot be read")
    if not (isinstance(header, dict) and header.get("format") in _MODEL_FORMATS):
        raise CLIError(not_model)
    saved_by = header.get("package_version")
    # the file's layout and its estimators' state layout decide, not the version
    # number: a release that keeps both reads the files of another
    if (header.get("format_version") != _MODEL_FORMAT_VERSION or payload is None
            or header.get("state_format") != STATE_FORMAT):
        raise CLIError(
            f"--load-model {path} was saved by sklearn-orfit {saved_by} in model "
            f"file format {header.get('format_version')} with state format "
            f"{header.get('state_format')}; this is sklearn-orfit {__version__}, "
            f"which reads model file format {_MODEL_FORMAT_VERSION} with state "
            f"format {STATE_FORMAT} only: run the stream again with this version")
    try:
        saved = _model.load_payload(header, payload)
    except (MemoryError, KeyboardInterrupt):
        raise
    except Exception as exc:
        raise CLIError(f"--load-model {path} is damaged: its models cannot be "
                       f"read ({type(exc).__name__}: {exc})") from None
    streams = getattr(saved, "_streams", None)
    forecasters = getattr(saved, "forecasters", None)
    names = getattr(saved, "series", None)
    meta = getattr(saved, "metadata", None)
    if not (isinstance(streams, dict) and isinstance(names, list) and names
            and isinstance(forecasters, dict) and isinstance(meta, dict)
            and list(streams) == names and list(forecasters) == names and all(
                isinstance(s, dict) and {"model", "tail", "next_row", "n_rows"} <= set(s)
                for s in streams.values())):
        raise CLIError(f"--load-model {path} is damaged: its content does not match its "
                       "header")
    for name in names:
        fc, seen = forecasters[name], streams[name].get("forecaster_seen")
        if getattr(fc, "n_samples_seen_", None) != seen:
            raise CLIError(
                f"--load-model {path}: the forecaster of {name!r} has learned "
                f"{getattr(fc, 'n_samples_seen_', 0)} values, not the {seen} it was saved "
                "with (updated from Python?): the command line continues only a file as "
                "--save-model wrote it, beside the backtest's state")
    header = {**meta, "settings": dict(saved.settings), "series": list(names)}
    streams = {name: {**streams[name], "forecaster": forecasters[name]} for name in names}
    return header, streams


def _flag(name):
    return "--" + name.replace("_", "-")


def _inputs_phrase(n_lags, exog):
    extra = f" and {len(exog)} --exog column{'s' * (len(exog) != 1)}" if exog else ""
    return f"{n_lags * (1 + len(exog))} inputs (--n-lags {n_lags} of the series{extra})"


def _adopt_saved_settings(args, header, given, path):
    """Take the saved stream's settings; a flag given now must agree with the file."""
    saved = header["settings"]
    exog_now = None if args.exog is None else _names(args.exog, "--exog")
    saved_exog = list(header.get("exog", []))
    for key in _STREAM_SETTINGS:
        now, then = getattr(args, key), saved[key]
        if key in given and not (key == "transform" and now == "auto") and now != then:
            if key == "n_lags":
                raise CLIError(
                    f"--load-model {path} was saved with another number of inputs: "
                    f"{_inputs_phrase(then, saved_exog)}; --n-lags {now} gives "
                    f"{_inputs_phrase(now, exog_now if exog_now is not None else saved_exog)}")
            if key == "transform":
                raise CLIError(f"--load-model {path} was saved with another transform: "
                               f"--transform {then}, not {now}")
            raise CLIError(f"{_flag(key)} {now} conflicts with --load-model {path}, saved "
                           f"with {_flag(key)} {then}; leave it out to continue the stream")
        setattr(args, key, then)
    if exog_now is not None and exog_now != saved_exog:
        if len(exog_now) != len(saved_exog):
            raise CLIError(
                f"--load-model {path} was saved with another number of inputs: "
                f"{_inputs_phrase(saved['n_lags'], saved_exog)}; --exog {args.exog} gives "
                f"{_inputs_phrase(saved['n_lags'], exog_now)}")
        raise CLIError(f"--exog {args.exog} conflicts with --load-model {path}, saved with "
                       f"--exog {','.join(saved_exog)}")
    if saved_exog and args.exog is None:
        args.exog = list(saved_exog)
    saved_future = list(header.get("exog_future", []))
    future_now = None if args.exog_future is None else _names(args.exog_future,
                                                              "--exog-future")
    if future_now is not None and future_now != saved_future:
        raise CLIError(f"--exog-future {args.exog_future} conflicts with --load-model "
                       f"{path}, saved with "
                       + (f"--exog-future {','.join(saved_future)}" if saved_future
                          else "no --exog-future"))
    if saved_future and args.exog_future is None:
        args.exog_future = list(saved_future)
    if args.csv is None:
        raise CLIError("--load-model continues a stream on new values: give them with --csv "
                       "(the values after those the model was saved with)")
    if args.column is None and header.get("source_kind") == "csv":
        args.column = list(header["series"])
    if args.season is None and header.get("season"):
        args.season = header["season"]


def _drop_seen_rows(args, data, header, notes):
    """``--load-model``: refuse the rows at or before the saved model's last time stamp
    (they were learned), or skip them with a note (``--skip-seen``)."""
    last = header.get("last_time")
    if last is None or data.times is None or not len(data.times):
        return data
    last = np.datetime64(last)
    seen = np.asarray(data.times <= last)
    n_seen = int(seen.sum())
    if not n_seen:
        return data
    path = args.load_model
    first = data.where[int(np.argmax(seen))]
    if not args.skip_seen:
        raise CLIError(f"--load-model {path} has learned the values up to {last}; "
                       f"{n_seen} row(s) of the input are at or before it (the first at "
                       f"{first}): give only the new rows, or --skip-seen to skip those")
    if np.all(seen):
        raise CLIError(f"--load-model {path} has learned the values up to {last}: every "
                       f"row of the input ({n_seen}) is at or before it; there is nothing "
                       "new to learn")
    k = int(np.argmin(seen))  # the first new row
    if np.any(seen[k:]):
        later = data.where[k + int(np.argmax(seen[k:]))]
        raise CLIError(f"--skip-seen: the row at {later} is at or before the saved "
                       f"model's last time stamp {last} but comes after a new row; only "
                       "rows at the start of the input can be skipped")
    k = n_seen
    notes.append(f"--skip-seen: skipped the first {k} row(s) (up to {data.where[k - 1]}), "
                 f"at or before the saved model's last time stamp {last}")
    return dataclasses.replace(
        data, series={name: v[k:] for name, v in data.series.items()},
        exog=None if data.exog is None else data.exog[k:], times=data.times[k:],
        where=data.where[k:])


def _match_saved_series(names, header, streams, path):
    """The saved stream of each series to continue (one series continues one)."""
    saved = header["series"]
    if len(saved) == 1 and len(names) == 1:
        return {names[0]: streams[saved[0]]}
    if sorted(saved) != sorted(names):
        raise CLIError(f"--load-model {path} holds the series {_listing(saved)}; this input "
                       f"has {_listing(names)}")
    return {name: streams[name] for name in names}


# ----------------------------------------------------------------------- parallel runs
@contextlib.contextmanager
def _workers(args):
    """joblib's parallel configuration for ``--backend`` (and the dask client)."""
    backend = args.backend
    if args.scheduler is not None:
        if backend not in (None, "dask"):
            raise CLIError(f"--scheduler is for --backend dask, not --backend {backend}")
        backend = "dask"
    if backend != "dask" and getattr(args, "timeout", None) is not None:
        raise CLIError("--timeout is for --backend dask (the joblib backends on this "
                       "machine do not lose their workers)")
    if backend is None:
        yield
        return
    import joblib

    if backend != "dask":
        with joblib.parallel_config(backend=backend):
            yield
        return
    if args.scheduler is None:
        raise CLIError("--backend dask needs --scheduler ADDRESS, the address of a running "
                       "dask scheduler (e.g. tcp://127.0.0.1:8786)")
    try:
        import distributed
    except ImportError:
        raise CLIError("--backend dask needs the optional packages dask and distributed "
                       "(pip install 'dask[distributed]')") from None
    client = _dask_client(distributed, args.scheduler)
    args._dask_client = client  # for _run_tasks' watch on the cluster
    # a lost scheduler or worker makes distributed log tracebacks on stderr: the run
    # reports the loss in one line instead
    logging_was = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with joblib.parallel_config(backend="dask", client=client):
            yield
    finally:
        args._dask_client = None
        with contextlib.suppress(Exception):
            client.close(timeout=_SCHEDULER_TIMEOUT)
        logging.disable(logging_was)


_SCHEDULER_TIMEOUT = 5  # seconds
_DASK_TIMEOUT = 60  # seconds without a worker before a dask run is stopped (--timeout)
_DASK_POLL = 1.0  # seconds between two looks at the cluster


def _dask_client(distributed, address):
    """A client of the dask scheduler at ``address``, or a one-line error within
    ``_SCHEDULER_TIMEOUT`` seconds (a bad address, nothing listening, no scheduler)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location) if scheme != "inproc" else (None, None)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"--scheduler {address!r} is not a dask scheduler address (e.g. "
                       f"tcp://127.0.0.1:8786): {exc}") from None
    unreachable = f"cannot reach the dask scheduler at {address} within " \
                  f"{_SCHEDULER_TIMEOUT} s"
    if scheme in ("tcp", "tls", "ws", "wss"):  # a plain connection first: fails fast
        try:
            socket.create_connection((host, port), timeout=_SCHEDULER_TIMEOUT).close()
        except OSError as exc:
            raise CLIError(f"{unreachable}: {exc.strerror or exc}") from None
    client = distributed.Client.__new__(distributed.Client)
    outcome = {}

    def connect():
        try:
            client.__init__(address, timeout=_SCHEDULER_TIMEOUT, set_as_default=False)
            outcome["ok"] = True
        except Exception as exc:  # reported below
            outcome["error"] = exc

    # a server that accepts the connection but never answers (not a dask scheduler) can
    # keep the client waiting past its timeout: the wait is bounded here. The warnings
    # are silenced from this thread (the connecting thread may never return, and would
    # never restore the filters)
    thread = threading.Thread(target=connect, name="sklearn-orfit-dask-connect",
                              daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thread.start()
        thread.join(_SCHEDULER_TIMEOUT + 1)
    if outcome.get("ok"):
        return client
    # a client that never connected would otherwise wait at exit to close
    with contextlib.suppress(Exception):
        client.status = "closed"
        client._loop_runner.stop()
    exc = outcome.get("error")
    detail = (str(exc) or type(exc).__name__
              if isinstance(exc, (OSError, TimeoutError, ValueError))
              else "no valid answer (is it a dask scheduler?)")
    raise CLIError(f"{unreachable}: {detail}")


def _cluster_size(client, wait):
    """The number of workers the dask scheduler has, or ``None`` when it does not answer
    within ``wait`` seconds."""
    try:
        info = client.sync(client.scheduler.identity, n_workers=0, callback_timeout=wait)
        return int(info["n_workers"])
    except Exception:  # lost connection, timeout, closed client: no answer
        return None


def _on_dask(run, client, address, timeout):
    """``run()`` (joblib calls on the dask ``client``), stopped with a one-line error
    when the cluster has had no worker, or the scheduler has not answered, for
    ``timeout`` seconds.

    Without this, a run whose workers are all lost waits for ever: the scheduler keeps
    the tasks for workers that may join later. ``run`` goes in a daemon thread (with the
    dask backend, which joblib configures per thread); this thread looks at the cluster
    every ``_DASK_POLL`` seconds. A stopped run's thread is left to end when the client
    closes (its tasks are cancelled then).
    """
    import joblib

    box = {}

    def target():
        try:
            with joblib.parallel_config(backend="dask", client=client):
                box["result"] = run()
        except BaseException as exc:  # re-raised in the calling thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="sklearn-orfit-dask-run", daemon=True)
    thread.start()
    clock = time.monotonic
    last_seen = clock()  # a worker or, below, an answer
    while True:
        thread.join(_DASK_POLL)
        if not thread.is_alive():
            break
        n_workers = _cluster_size(client, min(timeout, _SCHEDULER_TIMEOUT))
        if thread.is_alive() and n_workers:
            last_seen = clock()
        elif thread.is_alive() and clock() - last_seen >= timeout:
            what = ("has had no worker" if n_workers == 0 else
                    "has not answered (the scheduler is lost?)")
            raise CLIError(
                f"the dask cluster at {address} {what} for {timeout:g} s (--timeout): "
                "the run is stopped unfinished, nothing was written; start workers (or "
                "the scheduler) and run again, or give a larger --timeout")
    if "error" in box:
        exc = box["error"]
        if type(exc).__name__ == "KilledWorker" or \
                type(exc).__module__.startswith("distributed"):
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise CLIError(f"the dask run on {address} failed: {detail}") from None
        raise exc
    return box["result"]


def _warning_text(w):
    return f"{w.category.__name__}: {str(w.message).splitlines()[0]}"


def _run_tasks(tasks, args):
    """Run the per-series forecasts: in this process, or through joblib's workers.

    Warnings (numpy's RuntimeWarnings included) are counted and summarised in one note,
    never printed raw: recorded here for the tasks run by this process (its threads
    too), and by each task itself in loky's worker processes (one task at a time per
    process; ``catch_warnings`` is not thread-safe, so threads never record their own).
    """
    sequential = len(tasks) == 1 or (args.n_jobs in (None, 1) and args.backend is None
                                     and args.scheduler is None)
    in_processes = not sequential and args.backend in (None, "loky") \
        and args.scheduler is None
    tasks = [{**t, "record_warnings": in_processes, "threads": args.threads} for t in tasks]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if sequential:
            def run():
                return [_forecast_task(t) for t in tasks]
        else:
            import joblib

            n_jobs = args.n_jobs if args.n_jobs is not None else (
                -1 if (args.backend == "dask" or args.scheduler) else None)

            def run():
                return joblib.Parallel(n_jobs=n_jobs)(
                    joblib.delayed(_forecast_task)(t) for t in tasks)
        # watched when the cluster computes: the series, or an ensemble's partitions
        client = getattr(args, "_dask_client", None) if (
            not sequential or args.model == "ensemble") else None
        timeout = _DASK_TIMEOUT if getattr(args, "timeout", None) is None else args.timeout
        outcomes = (run() if client is None else
                    _on_dask(run, client, args.scheduler, timeout))
    n_warn = len(caught) + sum(o[2] for o in outcomes)
    first = _warning_text(caught[0]) if caught else next(
        (o[3] for o in outcomes if o[2]), "")
    return outcomes, n_warn, first


def _forecast_task(task):
    """One series: its own model (new or continued), predicted then learned row by row.

    Returns ``(result, state, n_warnings, first_warning)``; ``state`` (when saving) is
    what the stream needs to continue: the model at the last chunk boundary, the rows
    after it and the bounded past of the series.
    """
    s = task["settings"]
    d = s["horizon"] - 1
    record = task.get("record_warnings", False)
    threads, _ = ex.blas_threads(task.get("threads", 1))
    with threads, (warnings.catch_warnings(record=True) if record
                   else contextlib.nullcontext()) as caught:
        if record:
            warnings.simplefilter("always")
        saved = task["state"]
        if saved is None:
            model = _new_model(s, task["n_jobs"])
            tail, start, report = ex.StreamTail(), 0, task.get("report_from", 0)
        else:
            model, tail = saved["model"], saved["tail"]
            start, report = saved["next_row"], saved["n_rows"]
        first_row = max(0, start - d)
        frame = ex.extend_tail(tail, task["values"], task["exog"], transform=s["transform"])
        problem = ex.problem_from_tail(frame, n_lags=s["n_lags"], transform=s["transform"],
                                       horizon=s["horizon"], first_row=first_row,
                                       n_future_exog=task["n_future_exog"])
        result = ex.run_forecast(
            model, problem, skip=task["skip"], chunk_size=s["chunk_size"],
            quiet=task["quiet"], desc=task["desc"], start_row=start, report_from=report,
            season=task["season"], checkpoint=task["save"])
        forecaster, future = _future_forecast(task, saved)
        experts = _experts_report(model) if s["model"] == "aggregate" else None
    state = None
    if task["save"]:
        ckpt_model, next_row = result.checkpoint
        keep = (ex.first_origin(n_lags=s["n_lags"], transform=s["transform"])
                + max(0, next_row - d) - s["n_lags"] + 1)
        state = {"model": ckpt_model, "tail": frame.cut(keep), "next_row": next_row,
                 "n_rows": problem.first_row + problem.y.shape[0],
                 "forecaster": forecaster, "forecaster_seen": forecaster.n_samples_seen_}
        result = dataclasses.replace(result, checkpoint=None)
    result = dataclasses.replace(result, future=future, experts=experts)
    caught = caught or []
    return result, state, len(caught), _warning_text(caught[0]) if caught else ""


_STREAM_TRANSFORM = {"none": None, "diff": "diff", "logdiff": "log_diff"}


def _make_forecaster(s, n_past, n_future, n_jobs):
    """The :class:`~sklearn_orfit.forecasting.StreamForecaster` of the future forecast:
    the run's model behind a running standardisation of its rows, the run's lags,
    transform and horizon, direct (one row, ``horizon`` targets), ACI intervals at
    ``--level``."""
    from ..compose._pipeline import StreamingPipeline, make_streaming_pipeline
    from ..forecasting import StreamForecaster
    from ..preprocessing import RecursiveStandardScaler

    model = _new_model(s, n_jobs)
    steps = ([step for _, step in model.steps] if isinstance(model, StreamingPipeline)
             else [model])
    return StreamForecaster(
        make_streaming_pipeline(RecursiveStandardScaler(), *steps), n_lags=s["n_lags"],
        transform=_STREAM_TRANSFORM[s["transform"]],
        future_exog=list(range(n_past, n_past + n_future)) or None,
        exog_lags=s["n_lags"], horizon=s["horizon"], strategy="direct",
        coverage=tuple(level / 100.0 for level in s["levels"]),
        conformal_window=max(s["calibration"], 20))


_EXPERT_INTS = ("abo_windows", "n_components", "krls_windows")
_EXPERT_FLOATS = ("sigmas", "abo_alphas", "forgetting_factors", "krls_length_scales",
                  "krls_alphas")


def _parse_experts(text):
    """``--experts 'abo_windows=50,200;krls_windows='`` → make_expert_grid's keywords
    (``None`` → the default grid)."""
    if text is None:
        return None
    out = {}
    for part in (p.strip() for p in str(text).split(";")):
        if not part:
            continue
        key, eq, values = (x.strip() for x in part.partition("="))
        if not eq or key not in _EXPERT_INTS + _EXPERT_FLOATS:
            raise CLIError(f"--experts {text!r}: {part!r} is not 'name=v1,v2' with a name "
                           f"among {', '.join(_EXPERT_INTS + _EXPERT_FLOATS)}")
        if key in out:
            raise CLIError(f"--experts {text!r} gives {key} twice")
        cast = int if key in _EXPERT_INTS else float
        try:
            vals = tuple(cast(v) for v in values.split(",") if v.strip())
        except ValueError:
            raise CLIError(f"--experts {text!r}: {key} needs "
                           f"{'integers' if cast is int else 'numbers'}, got "
                           f"{values!r}") from None
        if any(not math.isfinite(v) or v <= 0 for v in vals if key != "abo_alphas"
               and key != "krls_alphas") or any(v < 0 for v in vals):
            raise CLIError(f"--experts {text!r}: {key} needs positive values")
        if key == "forgetting_factors" and any(v > 1 for v in vals):
            raise CLIError(f"--experts {text!r}: forgetting factors are in (0, 1]")
        if key in ("sigmas", "n_components") and not vals:
            raise CLIError(f"--experts {text!r}: {key} needs at least one value")
        out[key] = vals
    grid = {**ex.DEFAULT_EXPERTS, **out}
    if not grid.get("abo_windows") and not grid.get("krls_windows"):
        raise CLIError(f"--experts {text!r} has no expert: give abo_windows or "
                       "krls_windows")
    return grid


def _expert_grid(s):
    return _parse_experts(s.get("experts")) or dict(ex.DEFAULT_EXPERTS)


def _new_model(s, n_jobs):
    return ex.make_forecast_model(
        s["model"], n_components=s["n_components"], sigma=s["sigma"],
        window_size=s["window_size"], forgetting_factor=s["forgetting_factor"],
        alpha=s["alpha"], length_scale=s["length_scale"],
        memory_size=s["memory_size"], memory_policy=s["memory_policy"],
        delta=s["delta"], n_partitions=s["n_partitions"], n_jobs=n_jobs,
        random_state=s["random_state"],
        experts=_expert_grid(s) if s["model"] == "aggregate" else None,
    )


def _experts_report(model):
    """The aggregate's final weights and each family's share of the weight over the
    stream (the mean over each quarter of the rows it learned)."""
    names = [name for name, _ in model.estimators]
    weights = np.asarray(model.weights_, dtype=np.float64)
    history = np.asarray(model.weights_history_, dtype=np.float64)
    family = np.array(["abo" if n.startswith("abo") else "sw-krls" for n in names])
    shares = {}
    for fam in ("abo", "sw-krls"):
        mask = family == fam
        if not mask.any():
            continue
        per_row = history[:, mask].sum(axis=1) if history.shape[0] else np.empty(0)
        quarters = [float(q.mean()) for q in np.array_split(per_row, 4) if q.size]
        shares[fam] = {"quarters": quarters, "final": float(weights[mask].sum())}
    return {"weights": dict(zip(names, weights.tolist())), "family_share": shares,
            "n_rows": int(history.shape[0])}


def _future_forecast(task, saved):
    """Learn (or continue) the future forecaster and forecast the next ``horizon``
    values: ``(forecaster, {"forecast", "intervals", "coverage", "n_calibration",
    "n_learned"})``.

    A new stream's forecaster learns the last values of the series (the lags, the
    window, the horizon and ``--calibration`` forecasts whose residuals calibrate the
    intervals); a continued one learns every new value. The coverage is the share of
    the values of the run that fell inside the intervals issued for them (last step).
    """
    s = task["settings"]
    values, exog = task["values"], task["exog"]
    h = s["horizon"]
    n_future = task["n_future_exog"]
    n_past = 0 if exog is None else exog.shape[1] - n_future
    if saved is None:
        fc = _make_forecaster(s, n_past, n_future, task["n_jobs"])
        window = s["window_size"]
        if s["model"] == "aggregate":  # the experts' longest window
            grid = _expert_grid(s)
            window = max((*grid.get("abo_windows", ()), *grid.get("krls_windows", ())))
        m = s["n_lags"] + 3 + window + h + s["calibration"]
        values, exog = values[-m:], None if exog is None else exog[-m:]
        fc._validate_params()
        fc._start(values, exog)
        first = True
    else:
        fc = saved["forecaster"]
        fc._check_params_unchanged()
        first = False
    yv, Xv, index = fc._check_chunk(values, exog, first=first)
    F, Q = fc._run(yv, Xv, record=True)
    fc._set_index(index)
    X_future = task["future_exog"]
    if n_future:
        if X_future is None or X_future.shape[0] < h:
            got = 0 if X_future is None else X_future.shape[0]
            raise CLIError(f"--exog-future: the forecast of the next {h} values needs the "
                           f"known-future columns at those times: {got} future row(s) "
                           f"after the data hold them (rows whose series are empty); "
                           f"give {h}")
        X_future = X_future[:h]
    forecast = np.asarray(fc.predict(h, X_future), dtype=np.float64)
    intervals = np.asarray(fc.predict_interval(h, X_future=X_future), dtype=np.float64)
    # the intervals ACI issued for the run's values (step h): the share inside
    half = Q[:, h - 1, 0]  # (n, n_levels): ACI's half-widths
    ok = np.isfinite(F[:, h - 1])[:, None] & np.isfinite(half)
    inside = np.abs(yv[:, None] - F[:, h - 1, None]) <= half
    n_cal = ok.sum(axis=0)
    coverage = [float(inside[:, j][ok[:, j]].mean()) if n_cal[j] else None
                for j in range(half.shape[1])]
    return fc, {"forecast": forecast, "intervals": intervals, "coverage": coverage,
                "n_calibration": int(n_cal.min()) if n_cal.size else 0,
                "n_learned": int(yv.shape[0])}


# ----------------------------------------------------------------------- forecast
def _jsonable(x):
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, (int, np.integer)):
        return int(x)
    if isinstance(x, (float, np.floating)):
        return float(x) if math.isfinite(x) else None
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


_METRICS = ("rmse", "mae", "mase", "skill_last_value", "skill_seasonal_naive", "res_mse",
            "res_var")


def _series_report(name, result, n_values):
    s = result.scores
    return {
        "name": name, "n_values": int(n_values), "n_forecasts": int(result.y_pred.shape[0]),
        "n_scored": int(np.sum(result.scored)),
        "first_position": int(result.index[0]) if result.index.shape[0] else None,
        "rmse": s.get("rmse"), "mae": s.get("mae"), "mase": s.get("mase"),
        "skill_last_value": s.get("skill_last_value"),
        "skill_seasonal_naive": s.get("skill_seasonal_naive"),
        "beats_last_value": s.get("beats_last_value"),
        "beats_seasonal_naive": s.get("beats_seasonal_naive"),
        "summary": s.get("summary"),
        "res_mse": result.res_mse, "res_var": result.res_var,
        "res_mse_standardised": result.res_mse_std,
        "res_var_standardised": result.res_var_std,
        "persistence_res_mse": result.persistence_mse,
        "persistence_res_var": result.persistence_var,
        "seconds": result.seconds, "us_per_update": result.seconds_per_update * 1e6,
    }


def _aggregate(reports):
    """The mean of each metric over the series where it is defined."""
    out = {"method": "mean of the per-series metrics (each series has its own model)"}
    for key in _METRICS:
        vals = [r[key] for r in reports
                if r[key] is not None and math.isfinite(r[key])]
        out[key] = float(np.mean(vals)) if vals else None
        out[f"{key}_n_series"] = len(vals)
    return out


def _value(x, fmt="{:.4g}"):
    if x is None:
        return "n/a"
    return fmt.format(x) if math.isfinite(x) else str(x)


def _resolve_settings(args, name):
    """Fill the defaults that depend on the input and the model (transform, D)."""
    if args.transform == "auto":
        args.transform = _DEFAULT_TRANSFORM.get(name, "logdiff" if name.startswith("eur")
                                                and args.csv is None else "none")
    if args.n_components is None:
        args.n_components = _DEFAULT_D.get(args.model, 4096)


_TUNED = ("transform", "window_size", "sigma", "alpha", "n_components", "model")


def _tune(args, data, given):
    """``--tune``: choose the settings not given explicitly on the first part of the
    series (:func:`sklearn_orfit.forecasting.tune_forecast`), set them in ``args`` and
    return what the report says about the tuning."""
    import time

    from ..forecasting import tune_forecast

    if len(data.series) > 1:
        raise CLIError(f"--tune chooses the settings of one series; --column names "
                       f"{len(data.series)}: tune them one at a time")
    (name, values), = data.series.items()
    _check_values(values, name, data.where)
    left = values.shape[0] - math.floor(args.tune_fraction * values.shape[0])
    if left < 2:
        raise CLIError(f"--tune-fraction {args.tune_fraction} leaves {left} value(s) of "
                       f"{values.shape[0]} after the tuning part to report on; give a "
                       "smaller --tune-fraction or a longer series")
    if data.exog is not None:
        for k, col in enumerate(data.exog_names):
            _check_values(data.exog[:, k], col, data.where, what="--exog column")
    fixed = [k for k in _TUNED if k in given and not (k == "transform"
                                                      and args.transform == "auto")]
    models = (args.model,) if "model" in fixed else (
        tuple(_names(args.tune_models, "--tune-models")) if args.tune_models
        else _TUNE_MODELS)
    unknown = [m for m in models if m not in ex.MODELS]
    if unknown:
        raise CLIError(f"--tune-models: unknown model(s) {_listing(unknown)}; choose among "
                       f"{_listing(ex.MODELS)}")
    transforms = (args.transform,) if "transform" in fixed else ex.TRANSFORMS
    params = {k: getattr(args, k) for k in (
        "forgetting_factor", "alpha", "length_scale", "memory_size", "memory_policy",
        "delta", "n_partitions")}
    if "length_scale" not in given:  # given, it fixes sw-krls's kernel (1/σ otherwise)
        params.pop("length_scale")
    if "alpha" not in fixed:  # searched
        params.pop("alpha")
    t0 = time.perf_counter()
    try:
        tuned = tune_forecast(
            values, horizon=args.horizon, n_lags=args.n_lags, exog=data.exog,
            transforms=transforms,
            window_sizes=(args.window_size,) if "window_size" in fixed else _TUNE_WINDOWS,
            sigmas=(args.sigma,) if "sigma" in fixed else _TUNE_SIGMAS, models=models,
            alphas=None if "alpha" in fixed else _TUNE_ALPHAS,
            n_components=(args.n_components if "n_components" in fixed
                          else _TUNE_DIMS),
            model_params=params, search="staged", refit=False,
            tune_fraction=args.tune_fraction, n_splits=_TUNE_SPLITS, n_jobs=args.n_jobs,
            threads=args.threads, random_state=args.random_state)
    except ValueError as exc:
        raise CLIError(f"--tune: {exc}") from None
    seconds = time.perf_counter() - t0
    args.transform, args.model = tuned.transform, tuned.model
    if tuned.window_size is not None:
        args.window_size = tuned.window_size
    if tuned.sigma is not None:
        args.sigma = tuned.sigma
    if tuned.alpha is not None:
        args.alpha = tuned.alpha
    if tuned.n_components is not None:
        args.n_components = tuned.n_components
    return {
        "n_tune": tuned.n_tune, "tune_fraction": args.tune_fraction,
        "report_from_position": tuned.n_tune,
        "validation_positions": list(tuned.validation_positions),
        "n_splits": tuned.n_splits, "fold_size": tuned.fold_size,
        "warmup_size": tuned.warmup_size,
        "choice": {k: tuned[k] for k in _TUNED}, "fixed": fixed,
        "validation_rmse": tuned.rmse, "last_value_rmse": tuned.last_value_rmse,
        "seconds": seconds, "table": tuned.table,
    }


def _say_tuning(tuning, say, units):
    """The validation table (the best candidates of each transform) and the choice."""
    u = f" ({units})" if units else ""
    a, b = tuning["validation_positions"]
    say(f"\ntuning: on the first {tuning['n_tune']} values only (--tune-fraction "
        f"{tuning['tune_fraction']}), {tuning['n_splits']} prequential folds of "
        f"{tuning['fold_size']} forecasts (positions {a}..{b - 1}); "
        f"{sum(r['std_rmse'] is not None for r in tuning['table'])} candidates in "
        f"{tuning['seconds']:.1f} s")
    say(f"{'stage':<6}{'transform':10}{'model':>9}{'N':>6}{'σ':>6}{'α':>6}{'D':>6}"
        f"{'std. RMSE':>11}{'rank':>6}{'RMSE' + u:>14}")
    shown = 0
    for r in tuning["table"]:
        if r["std_rmse"] is None and r["rank"] is None:
            say(f"{r.get('stage', 1):<6}{r['transform'] or '':10} {r['note']}")
            continue
        if r["rank"] > 3:
            continue
        shown += 1
        say(f"{r.get('stage', 1):<6}{r['transform']:10}{r['model']:>9}"
            f"{_value(r['window_size'], '{}'):>6}{_value(r['sigma'], '{:g}'):>6}"
            f"{_value(r.get('alpha'), '{:g}'):>6}{_value(r.get('n_components'), '{}'):>6}"
            f"{_value(r['std_rmse']):>11}{r['rank']:>6}"
            f"{_value(r['rmse']):>14}" + ("  <- chosen" if r["chosen"] else ""))
    more = sum(r["rank"] is not None for r in tuning["table"]) - shown
    say("(stage 1: transforms, windows and σ at the first α and D; stage 2: α and D of "
        "the chosen one; std. RMSE: of the standardised rows, ranks the candidates of a "
        "transform and stage; RMSE: the best of each replayed on the same folds, in the "
        "series' units, chooses" + (f"; {more} more candidates in --json" if more else "")
        + ")")
    c = tuning["choice"]
    flags = " ".join(f"{_flag(k)} {c[k]}" for k in _TUNED if c[k] is not None)
    fixed = (f"; kept as given: {', '.join(_flag(k) for k in tuning['fixed'])}"
             if tuning["fixed"] else "")
    say(f"chosen: {flags} (validation RMSE {_value(tuning['validation_rmse'])}, last "
        f"value {_value(tuning['last_value_rmse'])}){fixed}")


def _infer_season(times):
    if times is None or len(times) < 3:
        return None, "no time stamps"
    try:
        from ..metrics import infer_season
    except ImportError:  # pragma: no cover
        return None, "no time stamps"
    try:
        season = infer_season(times)
    except ValueError:
        return None, "unreadable time stamps"
    if season is None:
        return None, "no natural cycle for the time stamps' spacing"
    return int(season), "from the time stamps"


def _increasing(times):
    return times is not None and len(times) > 1 and bool(np.all(np.diff(times) > 
                                                                np.timedelta64(0)))


def _forecast(args, out, given=frozenset()):
    from .. import __version__

    as_json = args.json
    say = (lambda *a, **k: None) if as_json else (lambda *a, **k: print(*a, file=out, **k))
    notes = []
    header = streams = None
    for flag in ("tune_fraction", "tune_models"):
        if flag in given and not args.tune:
            raise CLIError(f"{_flag(flag)} needs --tune")
    if args.tune and args.load_model is not None:
        raise CLIError("--tune cannot continue a stream: --load-model's settings are fixed "
                       "by the saved model (tune on a new stream, then --save-model)")
    args.levels = sorted({float(x) for x in args.level})
    if "level" in given:
        given = given | {"levels"}
    if args.skip_seen and args.load_model is None:
        raise CLIError("--skip-seen needs --load-model (it skips the rows the saved "
                       "model has already learned)")
    if args.load_model is not None:
        header, streams = _load_model(args.load_model)
        _adopt_saved_settings(args, header, given, args.load_model)
    data = _load_input(args)
    notes.extend(data.time_notes)
    args.n_future_exog = data.n_future_exog
    args.n_exog = len(data.exog_names) - data.n_future_exog
    names = list(data.series)
    if header is not None:
        data = _drop_seen_rows(args, data, header, notes)
    if args.window_size is None:  # not given, not saved: the default, or what fits
        longest = max(v.shape[0] for v in data.series.values())
        room = longest - ex.min_series_length(n_lags=args.n_lags, window_size=0,
                                              transform="diff", horizon=args.horizon)
        args.window_size = max(20, min(_DEFAULT_WINDOW, room // 2))
    if args.alpha is None and args.model == "abo" and not (args.tune and
                                                           args.tune_models):
        args.alpha = _DEFAULT_ABO_ALPHA
    tuning = _tune(args, data, given) if args.tune else None
    _resolve_settings(args, data.source)
    if args.experts is not None and args.model != "aggregate":
        raise CLIError(f"--experts is the expert grid of --model aggregate, not of "
                       f"--model {args.model}")
    _parse_experts(args.experts)  # refused before any computation
    continuing = header is not None
    saved_by_series = (_match_saved_series(names, header, streams, args.load_model)
                       if continuing else {})
    transform = args.transform
    for name, values in data.series.items():
        _check_series(values, name, data.where, args=args, transform=transform,
                      continuing=continuing)
    for k, name in enumerate(data.exog_names):
        _check_values(data.exog[:, k], name, data.where, what="--exog column")
    if data.time_column is not None and data.times is not None and not len(data.times):
        raise CLIError(f"--time-column {data.time_column!r} has no time stamps")
    n_values = max(v.shape[0] for v in data.series.values())
    _check_memory(args, args.n_components, n_values)
    if not args.no_save:
        _check_output_dir(args.output_dir)
    outputs = {} if args.no_save else _output_paths(args, data, names)
    if args.save_model is not None:
        _check_save_path(args.save_model)
        _check_model_path_is_free(args, outputs)
    if args.season is not None:
        season, season_how = args.season, "given" if "season" in given else "saved"
    else:
        season, season_how = (_infer_season(data.times) if _increasing(data.times) else
                              (None, "no time stamps" if data.times is None
                               else "time stamps not increasing"))
    settings = {key: getattr(args, key) for key in _STREAM_SETTINGS}
    if continuing:
        skip = header["skip"]
        time_offset = next(iter(saved_by_series.values()))["tail"].end
    else:
        n_rows = n_values - ex.first_origin(n_lags=args.n_lags, transform=transform) \
            - args.horizon
        skip = min(args.window_size, n_rows - 2)
        time_offset = 0
    report_from = 0
    if tuning is not None:  # report only the rows whose target lies after the tuning part
        report_from = tuning["n_tune"] - ex.first_origin(
            n_lags=args.n_lags, transform=transform) - args.horizon
        if n_rows - report_from < 2:
            raise CLIError(f"--tune-fraction {args.tune_fraction} leaves "
                           f"{max(n_rows - report_from, 0)} forecast(s) after the tuning "
                           "part to report on; give a smaller --tune-fraction or a longer "
                           "series")
    several = len(names) > 1
    tasks = [{
        "settings": settings, "values": values, "exog": data.exog,
        "state": saved_by_series.get(name), "skip": skip, "season": season,
        "quiet": args.quiet or as_json or several, "save": args.save_model is not None,
        "desc": f"{args.model} on {name}", "n_jobs": args.n_jobs,
        "report_from": report_from, "n_future_exog": data.n_future_exog,
        "future_exog": data.future_exog,
    } for name, values in data.series.items()]
    label = (data.source if args.csv is None or several
             else f"{data.source}:{names[0]}")
    h = args.horizon
    modelled = {"none": "values", "diff": "first differences",
                "logdiff": "log returns"}[transform]
    if h > 1:
        modelled = {"none": f"values {h} steps ahead",
                    "diff": f"changes over {h} steps (inputs: first differences)",
                    "logdiff": f"log changes over {h} steps (inputs: log returns)"
                    }[transform]
    # the workers (a dask cluster: connected) before anything is printed
    with _workers(args):
        say(f"{PROG} forecast: {label} — {data.description}; {n_values} values"
            + (f", continuing {args.load_model}" if continuing else ""))
        say(f"model: {args.model} = {_model_description(args, args.n_components)}"
            + (f", one per series ({len(names)} series)" if several else ""))
        exog_text = (f" + {', '.join(data.exog_names)} ({len(data.exog_names)} exog, "
                     "standardised levels)" if data.exog_names else "")
        ahead = "one step" if h == 1 else f"{h} steps"
        n_steps = (n_values if continuing else n_rows) * len(names)
        say(f"rows: {modelled}, standardised with past mean/std, {args.n_lags} lags"
            f"{exog_text} → {n_steps} predict-then-update steps"
            + ("" if continuing else f" (first {skip} not scored)" if tuning is None else
               f"; reported and scored only from position {tuning['n_tune']} on, after "
               f"the {tuning['n_tune']} values the tuning saw"))
        if data.time_column is not None:
            say(f"time: column {data.time_column!r}")
        if tuning is not None:
            _say_tuning(tuning, say, data.units)
        if data.times is not None and not _increasing(data.times):
            notes.append("the time stamps are not increasing: the figure uses positions and "
                         "no season is inferred from them")
        outcomes, n_warn, first_warning = _run_tasks(tasks, args)
        results = {name: o[0] for name, o in zip(names, outcomes)}
        if report_from:  # the rows of the tuning part were learned (and timed) too
            results = {name: dataclasses.replace(r, seconds_per_update=r.seconds / max(
                r.y_pred.shape[0] + report_from, 1)) for name, r in results.items()}
        reports = [_series_report(name, results[name], data.series[name].shape[0])
                   for name in names]
        units = data.units
        u1 = f" ({units})" if units else ""
        u2, u4 = (f" ({units}²)", f" ({units}⁴)") if units else ("", "")
        season_text = (f"season {season}, {season_how}" if season else
                       f"no seasonal-naive comparison: {season_how}; give --season")
        if not several:
            (result,) = results.values()
            r = reports[0]
            say(f"\n{'':16}{'ResMSE' + u2:>16}{'ResVAR' + u4:>16}")
            say(f"{'forecast':16}{_fmt(result.res_mse):>16}{_fmt(result.res_var):>16}")
            say(f"{'persistence':16}{_fmt(result.persistence_mse):>16}"
                f"{_fmt(result.persistence_var):>16}")
            say(f"{'standardised':16}{_fmt(result.res_mse_std):>16}"
                f"{_fmt(result.res_var_std):>16}")
            say("(persistence: the last value as forecast; standardised: errors of the "
                "standardised rows the model learns)")
            say(f"\nin the series' units{u1}: RMSE {_value(r['rmse'])}, MAE {_value(r['mae'])}, "
                f"MASE {_value(r['mase'], '{:.4g}')} ({r['n_scored']} forecasts scored; "
                f"{season_text})")
            say(f"MSE skill vs the last value {_value(r['skill_last_value'], '{:.3g}')}, vs the "
                f"seasonal naive {_value(r['skill_seasonal_naive'], '{:.3g}')}")
            if r["summary"]:
                say(r["summary"])
            say(f"\ntime per update: {result.seconds_per_update * 1e6:.1f} µs "
                f"(features + predict + update; {result.y_pred.shape[0] + report_from} "
                f"updates in "
                f"{result.seconds:.2f} s)")
        else:
            width = max(12, *(len(n) + 2 for n in names))
            say(f"\n{'series':{width}}" + "".join(f" {h:>11}" for h in (
                "RMSE", "MAE", "MASE", "skill last", "skill seas.", "ResMSE", "ResVAR")))
            agg = _aggregate(reports)
            for r in [*reports, {**agg, "name": "mean"}]:
                say(f"{r['name']:{width}}" + "".join(
                    f" {_value(r[k], '{:.4g}'):>11}" for k in (
                        "rmse", "mae", "mase", "skill_last_value", "skill_seasonal_naive",
                        "res_mse", "res_var")))
            say(f"(mean: the mean of the per-series metrics, each series with its own model; "
                f"skills: MSE skill vs the last value and the seasonal naive, {season_text})")
            for r in reports:
                if r["summary"]:
                    say(f"{r['name']}: {r['summary']}")
            total = sum(res.seconds for res in results.values())
            say(f"\ntime: {total:.2f} s of model time over {len(names)} series")
        for name, result in results.items():
            who = f"{name}: " if several else ""
            if not np.all(np.isfinite(result.forecast)):
                notes.append(f"{who}{int(np.sum(~np.isfinite(result.forecast)))} forecasts "
                             "are not finite: the model diverged on this stream")
            elif not all(np.isfinite(x) for x in (result.res_mse, result.res_var,
                                                   result.res_mse_std, result.res_var_std)):
                notes.append(f"{who}some scores overflow float64 (inf/nan above): the "
                             "forecasts are far from the series (the model diverged on this "
                             "stream)")
        for name, result in results.items():
            if result.experts is None:
                continue
            rep = result.experts
            who = f"{name}: " if several else ""
            top = sorted(rep["weights"].items(), key=lambda kv: -kv[1])
            say(f"\n{who}aggregate: final weights ({len(top)} experts): "
                + ", ".join(f"{k} {w:.3f}" for k, w in top))
            for fam, sh in rep["family_share"].items():
                say(f"  {who}{'ABO' if fam == 'abo' else 'SW-KRLS'} share of the weight "
                    f"over the {rep['n_rows']} rows learned (mean per quarter): "
                    + ", ".join(f"{q:.2f}" for q in sh["quarters"])
                    + f"; final {sh['final']:.2f}")
        # the future: the next h values after the data, with their intervals
        step = _time_step(data.times)
        if step is None and continuing and header.get("time_step") and \
                data.times is not None and len(data.times):
            step = _parse_step(header["time_step"])
        if data.future_times is not None and len(data.future_times) >= h:
            future_times = data.future_times[:h]
        elif step is not None:
            future_times = data.times[-1] + step * np.arange(1, h + 1)
        else:
            future_times = None
        levels = settings["levels"]
        future_docs = {}
        for name, result in results.items():
            fut = result.future
            first_position = time_offset + data.series[name].shape[0]
            future_docs[name] = {
                "first_position": first_position,
                "times": None if future_times is None else [str(t) for t in future_times],
                "forecast": fut["forecast"].tolist(),
                "intervals": {f"{level:g}": fut["intervals"][:, j, :].tolist()
                              for j, level in enumerate(levels)},
                "empirical_coverage": {f"{level:g}": c
                                       for level, c in zip(levels, fut["coverage"])},
                "n_calibration": fut["n_calibration"],
                "n_learned": fut["n_learned"],
            }
        after = (f"after {data.times[-1]}" + (f" (step {_ts.spacing_text(step)})" if step
                                              is not None else "")
                 if data.times is not None and len(data.times) else
                 f"after position {time_offset + n_values - 1}")
        say(f"\nfuture: the next {h} value{'s' * (h > 1)} {after}, by a StreamForecaster "
            f"with these settings (direct, {h} target{'s' * (h > 1)} per row) that "
            + ("continued the saved stream" if continuing else
               "learned the last values of the series")
            + "; intervals: adaptive conformal (ACI) from its own prequential residuals")
        for name, result in results.items():
            fut, doc = result.future, future_docs[name]
            who = f"{name}: " if several else ""
            for k in sorted({0, h - 1}):
                when = (f"{doc['times'][k]}" if doc["times"] else
                        f"position {doc['first_position'] + k}")
                bands = ", ".join(
                    f"{level:g} % [{_value(fut['intervals'][k, j, 0], '{:.6g}')}, "
                    f"{_value(fut['intervals'][k, j, 1], '{:.6g}')}]"
                    for j, level in enumerate(levels))
                say(f"  {who}step {k + 1} ({when}): {_value(fut['forecast'][k], '{:.6g}')}{u1}; "
                    f"{bands}")
            cov = ", ".join(f"{level:g} %: " + ("n/a" if c is None else f"{100 * c:.1f} %")
                            for level, c in zip(levels, fut["coverage"]))
            say(f"  {who}coverage of the step-{h} intervals over the {doc['n_calibration']} "
                f"values they were issued for while learning: {cov}")
            if not np.all(np.isfinite(fut["intervals"])):
                notes.append(f"{who}some intervals of the future forecast are not defined "
                             "yet (too few residuals for their level): a longer series or "
                             "a larger --calibration")
        if n_warn:
            notes.append(f"{n_warn} warning(s) during the run; first: {first_warning}")
        for note in notes:
            say(f"note: {note}")
        files = {}
        if args.save_model is not None:
            last_times = data.times if data.times is not None and len(data.times) else None
            _save_model(args.save_model, {
                "format": _MODEL_FORMATS[0], "format_version": _MODEL_FORMAT_VERSION,
                "package_version": __version__, "state_format": STATE_FORMAT,
                "settings": settings, "series": names,
                "exog": list(data.exog_names[:args.n_exog]),
                "exog_future": list(data.exog_names[args.n_exog:]),
                "n_inputs": args.n_lags * (1 + args.n_exog) + args.n_future_exog,
                "skip": int(skip), "season": None if season is None else int(season),
                "source_kind": "csv" if args.csv is not None else "dataset",
                "last_time": None if last_times is None else str(last_times[-1]),
                "time_step": None if step is None else str(step.astype("timedelta64[s]")),
                "time_column": data.time_column,
            }, {name: o[1] for name, o in zip(names, outcomes)})
            say(f"model: {args.save_model}")
            files["model"] = args.save_model
        per_series = {}
        if not args.no_save:
            times = data.times
            plot_times = times if _increasing(times) else None
            plot_last = args.plot_last
            if plot_last is None:
                week = np.timedelta64(7, "D")
                plot_last = (int(max(2, week // step)) if step is not None
                             and step > np.timedelta64(0) else 336)
            for name, result in results.items():
                full = name if args.csv is None else f"{data.source}:{name}"
                csv_path, png_path, future_path = outputs[name]
                _write_predictions(csv_path, result, times, time_offset)
                say(f"predictions: {csv_path}")
                _write_future(future_path, result.future, future_times, levels,
                              future_docs[name]["first_position"])
                say(f"future forecast: {future_path}")
                per_series[name] = {"predictions": csv_path, "future": future_path}
                if args.no_plot:
                    continue
                k = result.index - time_offset
                fut = result.future
                with _replacing(png_path) as tmp:
                    drawn = ex.plot_forecast(
                        result, tmp,
                        title=f"{data.description if not several else full}\n{args.model}, "
                              f"{ahead} ahead, last {plot_last} values and the next "
                              + ("one " if h == 1 else f"{h} ") +
                              f"(ResMSE {result.res_mse:.4g}; persistence "
                              f"{result.persistence_mse:.4g})",
                        times=None if plot_times is None else plot_times[k],
                        rolling=args.rolling, last=plot_last, units=units,
                        horizon=h,
                        future={"x": (None if plot_times is None or future_times is None
                                      else future_times),
                                "forecast": fut["forecast"], "levels": levels,
                                "intervals": fut["intervals"]},
                    )
                say(f"figure: {png_path}" if drawn else
                    "figure: not drawn (matplotlib is not installed)")
                if drawn:
                    per_series[name]["figure"] = png_path
        if as_json:
            for r in reports:
                r.update(per_series.get(r["name"], {}))
                r["future"] = future_docs[r["name"]]
                if results[r["name"]].experts is not None:
                    r["aggregate"] = results[r["name"]].experts
            doc = {
                "command": "forecast", "version": __version__, "source": data.source,
                "description": data.description, "units": units,
                "continued_from": args.load_model,
                "settings": {**settings, "exog": list(data.exog_names[:args.n_exog]),
                             "exog_future": list(data.exog_names[args.n_exog:]),
                             "time_column": data.time_column, "season": season,
                             "season_from": season_how if season else None, "skip": skip,
                             "n_jobs": args.n_jobs, "backend": args.backend or (
                                 "dask" if args.scheduler else None)},
                "series": reports,
                "aggregate": _aggregate(reports),
                "tuning": tuning,
                "notes": notes, "files": files,
            }
            print(json.dumps(_jsonable(doc), allow_nan=False), file=out)  # ASCII: any terminal
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


def _given_flags(argv):
    """The ``forecast`` options given on the command line (not left to their default)."""
    parser = build_parser()
    for action in parser.forecast_parser._actions:
        action.default = argparse.SUPPRESS
    given = vars(parser.parse_args(argv))
    return frozenset(k for k in given if k not in ("command", "_given_once"))


def _main(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    # no subcommand (or only options): forecast
    if not argv or (argv[0] not in COMMANDS and argv[0] not in ("-h", "--help", "--version")):
        argv = ["forecast", *argv]
    try:
        args = build_parser().parse_args(argv)
        if args.command == "forecast":
            return _forecast(args, sys.stdout, _given_flags(argv))
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
