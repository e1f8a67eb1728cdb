"""The files of ``sklearn-orfit forecast``: output paths that never collide nor replace an
input, the predictions and future-forecast CSVs (written to a temporary name and moved
into place), and the model files of ``--save-model`` and ``--load-model``."""

import contextlib
import csv
import dataclasses
import os
import tempfile

import numpy as np

from . import _model
from .._streaming._base import STATE_FORMAT
from ._parser import CLIError
from ._input import _increasing, _listing, _names


def _probe_writable(folder):
    """Create and remove a file in ``folder`` (an ``OSError`` if it cannot be written)."""
    fd, probe = tempfile.mkstemp(prefix=".sklearn-orfit-probe-", dir=folder)
    os.close(fd)
    os.remove(probe)


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
        _probe_writable(path)
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


_MODEL_FORMATS = ("sklearn-orfit forecast model", "sklearn-orfit forecast stream")
# 4: a SavedForecast object (joblib.load returns it), with one StreamForecaster per
# series and its checkpoint; 3: the same with a separate backtest model; 2: a header dict, then the stream states (RecursiveStandardScaler statistics);
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
        _probe_writable(folder)
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
                isinstance(s, dict) and {"checkpoint", "pending", "n_values"} <= set(s)
                for s in streams.values())):
        raise CLIError(f"--load-model {path} is damaged: its content does not match its "
                       "header")
    for name in names:
        fc, seen = forecasters[name], streams[name]["n_values"]
        if getattr(fc, "n_samples_seen_", None) != seen:
            raise CLIError(
                f"--load-model {path}: the forecaster of {name!r} has learned "
                f"{getattr(fc, 'n_samples_seen_', 0)} values, not the {seen} it was saved "
                "with (updated from Python?): the command line continues only a file as "
                "--save-model wrote it")
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
