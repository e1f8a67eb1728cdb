"""The arguments of ``sklearn-orfit``: the parser, its argument types and the
defaults the subcommands share."""

import argparse
import math

from .. import _forecast_models as fm
from .. import forecasting as fp


PROG = "sklearn-orfit"
COMMANDS = ("forecast", "benchmark", "double-descent")
_NA = {"", "nan", "na", "n/a", "null", "none", "-", "?"}


class CLIError(Exception):
    """A problem with the user's input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line instead of usage + message
        raise CLIError(f"{message} (see '{self.prog} --help')")


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
_DASK_TIMEOUT = 60  # seconds without a worker before a dask run is stopped (--timeout)


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
        "learn it (prequential evaluation, no look-ahead), with a StreamForecaster: "
        "the series is optionally differenced and turned into lagged rows, "
        "standardised with the running mean and standard deviation of the rows before "
        "them; forecasts are reported in the series' "
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
                     help="exogenous columns of --csv: levels (not differenced), lagged "
                     "like the series (--n-lags values up to the forecast origin)")
    src.add_argument("--exog-future", metavar="NAME[,NAME...]", default=None, action=_Once,
                     help="exogenous columns of --csv known in advance for the target time "
                     "(a calendar, a temperature forecast): a row holds their "
                     "values at the times it forecasts, not their lags. The CSV may end with "
                     "future rows that hold only these columns (and the time): the series "
                     "left empty; their values feed the forecast of the future (at least "
                     "--horizon such rows are needed)")
    src.add_argument("--n-rows", type=_int_at_least(1), default=None, metavar="N",
                     help="use only the first N values of the series")
    src.add_argument("--transform", choices=("auto", *fp.TRANSFORMS), default="auto",
                     help="model the values, their changes (diff) or log changes (logdiff) "
                     "(auto: diff for electricity, logdiff for exchange rates, none "
                     "otherwise). With --horizon H, diff targets the change over the "
                     "horizon, v[t+H] - v[t], and the forecast is v[t] + the predicted "
                     "change (logdiff: log v[t+H] - log v[t], forecast v[t]·exp(...))")
    m = f.add_argument_group("model")
    m.add_argument("--model", choices=fm.MODELS, default="abo",
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
                              for k, v in fm.DEFAULT_EXPERTS.items())
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
                   help="values per block: one-step forecasts are learned a block at a "
                   "time (by one prequential call per block, blocks ending on the "
                   "stream's multiples of the size, wherever a saved stream stopped); the progress bar moves per block "
                   "(default 250)")
    o.add_argument("--save-model", metavar="PATH", default=None, action=_Once,
                   help="save the fitted forecaster(s) and the settings to PATH (joblib: "
                   "joblib.load(PATH) returns a sklearn_orfit.cli.SavedForecast, the "
                   "StreamForecaster of each series, with predict, predict_interval and "
                   "update), written whole or not at all; for --load-model, each is also "
                   "kept as of the last --chunk-size boundary with the values after it, "
                   "learned again when the stream continues, so that it continues "
                   "exactly")
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
                   help="residuals that calibrate the intervals: the last C of each "
                   "step (default 500)")
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

