"""Time stamps of a CSV column for the command line: formats, order, gaps.

Pure functions (no I/O): the command line (:mod:`sklearn_orfit.cli._input`) reads the
cells, these decide what they mean. The format is decided by the whole column, never
row by row, so ``03/04/2020`` cannot mean March in one row and April in the next.

Formats read (one per column; dates with and without a time of day may mix):

* ISO 8601: ``2024-01-31``, ``2024-01``, ``2024-01-31T12:00``, ``2024-01-31 12:00:05.5``,
  with an optional UTC offset (``Z``, ``UTC``, ``+01:00``, ``+0100``, ``-05``). A column
  whose stamps all carry an offset is converted to UTC (the offsets may differ, e.g.
  across a daylight-saving change); a column mixing stamps with and without an offset is
  refused (local times cannot be put on one axis with UTC ones). A 4-digit year
  (``2024``) is a date only in a column named by ``--time-column``.
* ``MM/DD/YYYY`` or ``DD/MM/YYYY`` (``YYYY/MM/DD`` too), optionally followed by a time
  ``HH:MM[:SS[.fff]]`` and ``AM``/``PM``: the order is the one every value fits; when
  both fit every value and differ for some, the column is ambiguous (an error naming the
  two readings) unless the order is given (``date_order``).
* ``DD.MM.YYYY`` (day first), optionally with a time.
* Epoch seconds (UTC): a column of numbers, all in [10^8, 10^10) seconds (1973-03-03 to
  2286-11-20), when it is named by ``--time-column`` or, when detecting, its name holds
  ``time``, ``date``, ``epoch``, ``stamp`` or ``unix`` or is ``ts`` (any case). Numbers
  in other columns are data, never time stamps.
"""

import calendar
import re

import numpy as np

__all__ = [
    "EPOCH_RANGE", "HINT", "TimeStampError", "cell_format", "check_order", "epoch_name",
    "find_gaps", "format_stamp", "gap_note", "parse_time_column", "sort_order", "spacing_text",
]

HINT = ("time stamps are read as ISO 8601 (2024-01-31, 2024-01-31T12:00, 2024-01-31 "
        "12:00+01:00), MM/DD/YYYY or DD/MM/YYYY, DD.MM.YYYY (each optionally with a time "
        "HH:MM[:SS]) or epoch seconds")
EPOCH_RANGE = (10**8, 10**10)  # seconds: 1973-03-03 to 2286-11-20 (UTC)
_EPOCH_NAME = re.compile(r"time|date|epoch|stamp|unix|^ts$", re.IGNORECASE)

_TIME = (r"(?P<hh>\d{1,2}):(?P<mi>\d{2})(?::(?P<ss>\d{2})(?:[.,](?P<frac>\d{1,9}))?)?"
         r"(?:\s*(?P<ampm>[AaPp][Mm]))?")
_ISO = re.compile(
    r"(?P<date>\d{4}-\d{2}(?:-\d{2})?)"
    r"(?:[T ](?P<time>\d{2}(?::\d{2}(?::\d{2}(?:[.,]\d{1,9})?)?)?))?"
    r"\s*(?P<zone>Z|UTC|[+-]\d{2}(?::?\d{2})?)?")
_SLASH = re.compile(r"(?P<a>\d{1,2})/(?P<b>\d{1,2})/(?P<y>\d{4})(?:[ T]" + _TIME + ")?")
_YMD = re.compile(r"(?P<y>\d{4})/(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:[ T]" + _TIME + ")?")
_DOT = re.compile(r"(?P<a>\d{1,2})\.(?P<b>\d{1,2})\.(?P<y>\d{4})(?:[ T]" + _TIME + ")?")
_EPOCH = re.compile(r"\d{1,16}(?:\.\d{1,6})?")
_YEAR = re.compile(r"\d{4}")

_NAMES = {
    "iso": "ISO 8601", "slash": "MM/DD/YYYY or DD/MM/YYYY", "ymd": "YYYY/MM/DD",
    "dot": "DD.MM.YYYY", "epoch": "epoch seconds", "year": "ISO 8601",
}
_ORDERS = {"month-first": "MM/DD/YYYY", "day-first": "DD/MM/YYYY"}


class TimeStampError(ValueError):
    """A column that is not, or not unambiguously, a column of time stamps.

    ``message`` says why (naming the column, a line and its cell); ``ambiguous`` is
    true when the cells are dates in an order that cannot be decided (an error even
    when the column was not named: it is a date column).
    """

    def __init__(self, message, *, ambiguous=False):
        super().__init__(message)
        self.ambiguous = ambiguous


def cell_format(cell, *, numbers=False):
    """The format family of one cell (``"iso"``, ``"slash"``, ``"ymd"``, ``"dot"``,
    ``"epoch"``, ``"year"``), or ``None`` when it has the shape of none.

    ``numbers``: whether a number may be a time stamp: ``True``, epoch seconds or, for
    a 4-digit integer, a year; ``"epoch"``, epoch seconds only. Only the shape is looked at (``2024-13-45`` is ``"iso"``);
    :func:`parse_time_column` checks the values.

    Examples
    --------
    >>> cell_format("2024-01-31 12:00+01:00"), cell_format("3/4/2020 1:05 PM")
    ('iso', 'slash')
    >>> cell_format("1700000000"), cell_format("1700000000", numbers=True)
    (None, 'epoch')
    """
    if not cell:
        return None
    if numbers:
        if numbers is True and _YEAR.fullmatch(cell):
            return "year"
        if _EPOCH.fullmatch(cell):
            return "epoch"
    for family, pattern in (("iso", _ISO), ("slash", _SLASH), ("ymd", _YMD),
                            ("dot", _DOT)):
        if pattern.fullmatch(cell):
            return family
    return None


def epoch_name(name):
    """Whether a column's name says it may hold epoch seconds (see the module notes)."""
    return bool(_EPOCH_NAME.search(name))


def _at(lines, i):
    return f"line {int(lines[i])}" if lines is not None else f"value {i + 1}"


def _valid(y, m, d):
    return 1 <= m <= 12 and 1 <= d <= calendar.monthrange(y, m)[1]


def _clock(match):
    """``"THH:MM[:SS[.fff]]"`` of a matched time (12-hour clock converted), ``""``
    without a time, ``None`` for an impossible time."""
    hh = match.group("hh")
    if hh is None:
        return ""
    h, mi, ss, frac, ampm = (int(hh), match.group("mi"), match.group("ss"),
                             match.group("frac"), match.group("ampm"))
    if ampm is not None:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm.lower() == "pm" else 0)
    if h > 23 or int(mi) > 59 or (ss is not None and int(ss) > 59):
        return None
    text = f"T{h:02d}:{mi}"
    if ss is not None:
        text += f":{ss}" + (f".{frac}" if frac else "")
    return text


def _stamp(text):
    try:
        stamp = np.datetime64(text)
    except (ValueError, OverflowError):
        return None
    return None if np.isnat(stamp) else stamp


def _offset(zone):
    """A UTC offset (``Z``, ``UTC``, ``+01:00``, ``+0100``, ``-05``) as minutes."""
    if zone in ("Z", "UTC"):
        return 0
    digits = zone[1:].replace(":", "")
    minutes = int(digits[:2]) * 60 + (int(digits[2:]) if len(digits) > 2 else 0)
    return -minutes if zone[0] == "-" else minutes


def parse_time_column(cells, *, name, lines=None, date_order=None, numbers=False,
                      what=None):
    """The time stamps of a whole column, its format decided by all of its cells.

    Parameters
    ----------
    cells : sequence of str
        The column's cells (stripped).
    name : str
        The column's name, for the messages.
    lines : sequence of int, optional
        The line number of each cell, for the messages (default: value numbers).
    date_order : {"month-first", "day-first"} or None
        How to read ``a/b/YYYY`` dates; ``None``: the order every value fits.
    numbers : bool or "epoch"
        Whether numbers are time stamps: ``True`` (a column named by
        ``--time-column``), epoch seconds and, for a 4-digit integer, a year;
        ``"epoch"`` (a detected column named like a time column), epoch seconds only.
    what : str, optional
        How to name the column in a message (default ``"time column 'NAME'"``).

    Returns
    -------
    times : ndarray of datetime64
        One per cell, in UTC when the cells carry UTC offsets or are epoch seconds; the
        unit is the finest the cells give (``2024-01-31`` is a day, ``2024-01-31T12:00``
        a minute).
    info : dict
        ``format`` (the format's name, e.g. ``"DD/MM/YYYY"``) and ``utc`` (whether
        UTC offsets were converted).

    Raises
    ------
    TimeStampError
        For a cell in none of the formats, an impossible date or time, a column mixing
        formats or stamps with and without a UTC offset, epoch seconds out of range, or
        (``ambiguous`` set) dates that read both as ``MM/DD/YYYY`` and ``DD/MM/YYYY``.

    Notes
    -----
    One pass to classify the cells, one to build the stamps: O(n) time, the stamps
    plus a small record per cell of memory.

    Examples
    --------
    >>> times, info = parse_time_column(["03/04/2020", "03/14/2020"], name="date")
    >>> times, info["format"]
    (array(['2020-03-04', '2020-03-14'], dtype='datetime64[D]'), 'MM/DD/YYYY')
    >>> parse_time_column(["2020-03-01T00:30+01:00"], name="t")[0]
    array(['2020-02-29T23:30'], dtype='datetime64[m]')
    """
    what = what or f"time column {name!r}"
    n = len(cells)
    if n == 0:
        raise TimeStampError(f"{what} has no time stamps (no rows)")
    kinds = {"year": "iso"}
    first = first_kind = None
    for i, cell in enumerate(cells):
        family = cell_format(cell, numbers=numbers)
        if family is None:
            raise TimeStampError(f"{what} does not hold time stamps: {_at(lines, i)} has "
                                 f"{cell!r} ({HINT})")
        if first is None:
            first, first_kind = family, kinds.get(family, family)
        elif kinds.get(family, family) != first_kind:
            raise TimeStampError(
                f"{what} mixes time stamp formats: {_at(lines, 0)} has {cells[0]!r} "
                f"({_NAMES[first]}), {_at(lines, i)} has {cell!r} ({_NAMES[family]}); one "
                "format per column")
    if first_kind == "epoch":
        return _epoch(cells, what, lines), {"format": "epoch seconds", "utc": True}
    if first_kind == "iso":
        return _iso(cells, what, lines)
    pattern = {"slash": _SLASH, "ymd": _YMD, "dot": _DOT}[first_kind]
    parts = np.empty((n, 3), dtype=np.int32)  # year, a, b: 12 bytes a value
    for i, cell in enumerate(cells):
        m = pattern.fullmatch(cell)
        parts[i] = int(m.group("y")), int(m.group("a")), int(m.group("b"))
    if first_kind == "slash":
        order = date_order or _date_order(parts, cells, what, lines)
        fmt = _ORDERS[order]
    else:
        order, fmt = ("month-first", "YYYY/MM/DD") if first_kind == "ymd" else \
            ("day-first", "DD.MM.YYYY")
    out = []
    for i, cell in enumerate(cells):
        y, a, b = (int(x) for x in parts[i])
        m, d = (a, b) if order == "month-first" else (b, a)
        clock = _clock(pattern.fullmatch(cell))
        stamp = (_stamp(f"{y:04d}-{m:02d}-{d:02d}{clock}")
                 if _valid(y, m, d) and clock is not None else None)
        if stamp is None:
            raise TimeStampError(f"{what} ({fmt}) has an impossible date or time: "
                                 f"{_at(lines, i)} has {cell!r}")
        out.append(stamp)
    return np.array(out), {"format": fmt, "utc": False}


def _valid_dates(y, m, d):
    """Whether each (year, month, day) is a date (vectorised)."""
    leap = (y % 4 == 0) & ((y % 100 != 0) | (y % 400 == 0))
    length = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31])
    ok_month = (m >= 1) & (m <= 12)
    days = length[np.where(ok_month, m, 0)] + (leap & (m == 2))
    return ok_month & (d >= 1) & (d <= days)


def _date_order(parts, cells, what, lines):
    """``"month-first"`` or ``"day-first"``: the order every ``a/b/YYYY`` date fits."""
    y, a, b = parts.T
    bad = np.flatnonzero(~_valid_dates(y, a, b))
    bad_md = int(bad[0]) if bad.size else None
    bad = np.flatnonzero(~_valid_dates(y, b, a))
    bad_dm = int(bad[0]) if bad.size else None
    if bad_md is None and bad_dm is None:
        differ = np.flatnonzero(a != b)
        if not differ.size:  # day = month everywhere: both readings are the same
            return "month-first"
        differ = int(differ[0])
        y, a, b = (int(x) for x in parts[differ])
        raise TimeStampError(
            f"{what} is ambiguous: every value reads both as MM/DD/YYYY and as "
            f"DD/MM/YYYY, e.g. {_at(lines, differ)} {cells[differ]!r} is "
            f"{y:04d}-{a:02d}-{b:02d} (MM/DD/YYYY) or {y:04d}-{b:02d}-{a:02d} "
            "(DD/MM/YYYY); say which with --date-order month-first or --date-order "
            "day-first", ambiguous=True)
    if bad_md is None:
        return "month-first"
    if bad_dm is None:
        return "day-first"
    raise TimeStampError(
        f"{what} fits neither MM/DD/YYYY ({_at(lines, bad_md)} has {cells[bad_md]!r}) nor "
        f"DD/MM/YYYY ({_at(lines, bad_dm)} has {cells[bad_dm]!r})")


def _iso(cells, what, lines):
    out = []
    zoned = local = None  # the first cell with an offset, and without
    for i, cell in enumerate(cells):
        match = _ISO.fullmatch(cell)
        zone = None if match is None else match.group("zone")
        if zone is None and local is None:
            local = i
        elif zone is not None and zoned is None:
            zoned = i
        if zoned is not None and local is not None:
            raise TimeStampError(
                f"{what} mixes time stamps with and without a UTC offset ("
                f"{_at(lines, zoned)} has {cells[zoned]!r}, {_at(lines, local)} has "
                f"{cells[local]!r}): local times cannot be put on one time axis with UTC "
                "ones; give every stamp its offset, or none")
        if match is None:  # a 4-digit year
            stamp = _stamp(cell)
        else:
            time = match.group("time")
            if zone is not None and time is None:
                stamp = None  # an offset needs a time of day
            else:
                stamp = _stamp(match.group("date") + ("" if time is None else
                                                      "T" + time.replace(",", ".")))
            if stamp is not None and zone is not None:
                stamp = stamp - np.timedelta64(_offset(zone), "m")
        if stamp is None:
            raise TimeStampError(f"{what} (ISO 8601) has an impossible date or time: "
                                 f"{_at(lines, i)} has {cell!r}")
        out.append(stamp)
    return np.array(out), {"format": "ISO 8601", "utc": zoned is not None}


def _epoch(cells, what, lines):
    values = np.array([float(c) for c in cells])
    low, high = EPOCH_RANGE
    outside = np.flatnonzero((values < low) | (values >= high))
    if outside.size:
        i = int(outside[0])
        ms = " (epoch milliseconds? give seconds)" if 1e11 <= values[i] < 1e13 else ""
        raise TimeStampError(
            f"{what} holds numbers outside the range read as epoch seconds (10^8 to "
            f"10^10 s: 1973-03-03 to 2286-11-20): {_at(lines, i)} has {cells[i]!r}{ms}")
    if all("." not in c for c in cells):
        return values.astype(np.int64).astype("datetime64[s]")
    micro = np.array([round(float(c) * 1e6) for c in cells], dtype=np.int64)
    return micro.astype("datetime64[us]")


# ----------------------------------------------------------------------- order, gaps
def format_stamp(stamp):
    """A time stamp for a message: ``2020-01-03 04:00`` (seconds only when not zero,
    the date alone for a day)."""
    stamp = np.datetime64(stamp)
    if np.datetime_data(stamp.dtype)[0] == "h":
        stamp = stamp.astype("datetime64[m]")
    text = str(stamp).replace("T", " ")
    if text.endswith(":00") and text.count(":") == 2:
        text = text[:-3]
    return text


def check_order(times):
    """Where ``times`` is not strictly increasing.

    Returns
    -------
    report : dict
        ``n_backwards`` (steps to an earlier stamp), ``first_backwards`` (index ``i``
        of the first: ``times[i] < times[i - 1]``, or ``None``), ``n_repeated``
        (stamps equal to an earlier one, anywhere in the column), ``first_repeated``
        (``(i, j)``: the first ``j`` whose stamp an earlier ``i`` has, or ``None``).

    Examples
    --------
    >>> t = np.array(["2020-01-01", "2020-01-03", "2020-01-02", "2020-01-03"],
    ...              dtype="datetime64[D]")
    >>> r = check_order(t)
    >>> r["n_backwards"], r["first_backwards"], r["n_repeated"], r["first_repeated"]
    (1, 2, 1, (1, 3))
    """
    times = np.asarray(times)
    step = np.diff(times)
    back = np.flatnonzero(step < np.timedelta64(0)) + 1
    order = np.argsort(times, kind="stable")
    same = np.flatnonzero(times[order][1:] == times[order][:-1]) + 1
    first_repeated = None
    if same.size:
        # the repeat that comes first in the file, and the row it repeats
        later = order[same]
        k = int(np.argmin(later))
        j = int(later[k])
        i = int(order[same[k] - 1])
        while True:  # the earliest row with that stamp
            prev = np.flatnonzero(times[:i] == times[j])
            if not prev.size:
                break
            i = int(prev[0])
        first_repeated = (i, j)
    return {"n_backwards": int(back.size),
            "first_backwards": int(back[0]) if back.size else None,
            "n_repeated": int(same.size), "first_repeated": first_repeated}


def sort_order(times):
    """Indices that sort ``times`` stably and keep, of rows sharing a time stamp, the
    last in the file (a later row corrects an earlier one).

    Examples
    --------
    >>> t = np.array([3, 1, 2, 1], dtype="datetime64[h]")
    >>> sort_order(t).tolist()
    [3, 2, 0]
    """
    times = np.asarray(times)
    order = np.argsort(times, kind="stable")
    s = times[order]
    last = np.ones(s.shape[0], dtype=bool)
    last[:-1] = s[1:] != s[:-1]
    return order[last]


def find_gaps(times):
    """Missing steps of increasing ``times``, against their usual spacing.

    The spacing is the lower median of the differences (an observed one, as
    :func:`sklearn_orfit.metrics.infer_season` takes it); a difference of ``k``
    spacings (rounded) is ``k - 1`` missing steps, so months of 28 to 31 days have none.

    Returns
    -------
    n_missing : int
    first : int or None
        Index of the stamp after which the first gap starts.
    spacing : numpy.timedelta64 or None

    Examples
    --------
    >>> t = np.array(["2020-01-03T02", "2020-01-03T03", "2020-01-03T04",
    ...               "2020-01-03T08"], dtype="datetime64[h]")
    >>> find_gaps(t)
    (3, 2, np.timedelta64(1,'h'))
    """
    times = np.asarray(times)
    if times.shape[0] < 3:
        return 0, None, None
    diff = np.diff(times)
    spacing = np.sort(diff)[(diff.shape[0] - 1) // 2]
    if spacing <= np.timedelta64(0):
        return 0, None, None
    steps = np.rint(diff / spacing).astype(np.int64)
    missing = np.maximum(steps - 1, 0)
    where = np.flatnonzero(missing)
    if not where.size:
        return 0, None, spacing
    return int(missing.sum()), int(where[0]), spacing


def spacing_text(spacing):
    """A time step as text: ``"15 min"``, ``"1 h"``, ``"2 days"``, ``"0.5 s"``."""
    seconds = spacing / np.timedelta64(1, "s")
    for unit, size in (("day", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size and seconds % size == 0:
            k = int(seconds // size)
            return f"{k} {unit}{'s' if unit == 'day' and k > 1 else ''}"
    return f"{seconds:g} s"


def gap_note(times, name):
    """The note on the gaps of increasing ``times`` (``None`` without gaps).

    Examples
    --------
    >>> t = np.datetime64("2020-01-01T00", "h") + np.r_[np.arange(76), 86 + np.arange(5)]
    >>> print(gap_note(t, "time"))  # doctest: +NORMALIZE_WHITESPACE
    time column 'time': 10 missing steps (spacing 1 h), first after 2020-01-04 03:00; the
    lags and --season count rows, not time, so a lag or season spans more time across a gap
    """
    n, first, spacing = find_gaps(times)
    if not n:
        return None
    return (f"time column {name!r}: {n} missing step{'s' if n > 1 else ''} (spacing "
            f"{spacing_text(spacing)}), first after {format_stamp(times[first])}; the "
            "lags and --season count rows, not time, so a lag or season spans more time "
            "across a gap")
