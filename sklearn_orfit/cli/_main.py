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
import codecs
import contextlib
import os
import sys

from ._parser import CLIError, COMMANDS, PROG, build_parser
from ._run import _RUN, _forecast

__all__ = ["main"]


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
