"""The input of ``sklearn-orfit forecast``: CSV files (streamed, ``--n-rows``), the bundled
datasets, time stamps, and the checks of the values before anything is computed."""

import array
import csv
import dataclasses
import io
import math
import os

import numpy as np

from .. import forecasting as fp
from . import _timestamps as _ts
from ..datasets import load_electricity_demand, load_exchange_rates, make_abo_series
from ..metrics import _beyond_scored_range
from ._parser import CLIError, _DATASETS, _NA


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
    need = fp.min_series_length(n_lags=args.n_lags, window_size=window, transform=transform,
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


def _increasing(times):
    return times is not None and len(times) > 1 and bool(np.all(np.diff(times) > 
                                                                np.timedelta64(0)))
