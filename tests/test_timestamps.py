"""The command line's time stamp parsing (:mod:`sklearn_orfit.cli._timestamps`): pure
functions, tested directly. The command line's use of them: tests/test_cli_timestamps.py.
"""

import re

import numpy as np
import pytest

from sklearn_orfit.cli._timestamps import (
    TimeStampError,
    cell_format,
    check_order,
    find_gaps,
    format_stamp,
    gap_note,
    parse_time_column,
    sort_order,
)


def parse(cells, **kw):
    return parse_time_column(cells, name="when", **kw)


def dt(*texts):
    return np.array(texts, dtype="datetime64")


# ----------------------------------------------------------------------- ISO 8601
@pytest.mark.parametrize("cells, expected", [
    (["2024-01-31", "2024-02-01"], dt("2024-01-31", "2024-02-01")),
    (["2024-01-31T12:00", "2024-01-31 13:00"], dt("2024-01-31T12:00", "2024-01-31T13:00")),
    (["2024-01-31 12:00:05.5"], dt("2024-01-31T12:00:05.5")),
    (["2024-01", "2024-02"], dt("2024-01", "2024-02")),
    (["2024-01-31", "2024-01-31T06:00"], dt("2024-01-31T00:00", "2024-01-31T06:00")),
])
def test_iso(cells, expected):
    times, info = parse(cells)
    np.testing.assert_array_equal(times, expected)
    assert info == {"format": "ISO 8601", "utc": False}


def test_iso_unit_follows_the_text():
    """The unit is the text's precision (the predictions file writes str(stamp))."""
    assert parse(["2024-01-31T12:00"])[0].dtype == np.dtype("datetime64[m]")
    assert parse(["2024-01-31"])[0].dtype == np.dtype("datetime64[D]")


@pytest.mark.parametrize("zone, hours", [("Z", 0), (" UTC", 0), ("+01:00", 1),
                                         ("+0100", 1), ("-05", -5), ("+05:30", 5.5)])
def test_utc_offsets_are_converted_to_utc(zone, hours):
    times, info = parse([f"2024-03-10T12:00{zone}"])
    assert info["utc"]
    assert times[0] == np.datetime64("2024-03-10T12:00") - np.timedelta64(
        int(hours * 60), "m")


def test_offsets_across_a_daylight_saving_change_give_one_utc_axis():
    """Local 01:00+01:00, 03:00+02:00 (the clocks go forward): one hour apart in UTC."""
    cells = ["2024-03-31T01:00+01:00", "2024-03-31T03:00+02:00", "2024-03-31T04:00+02:00"]
    times, _ = parse(cells)
    np.testing.assert_array_equal(np.diff(times), np.timedelta64(1, "h"))


def test_offset_and_local_stamps_in_one_column_are_refused():
    with pytest.raises(TimeStampError, match=r"time column 'when' mixes time stamps "
                       r"with and without a UTC offset \(value 2 has '2024-01-01T01:00Z', "
                       r"value 1 has '2024-01-01T00:00'\)"):
        parse(["2024-01-01T00:00", "2024-01-01T01:00Z"])


@pytest.mark.parametrize("cell", ["2024-02-30", "2024-13-01", "2024-01-01T25:00",
                                  "2024-01-01+01:00"])
def test_impossible_iso_stamps(cell):
    with pytest.raises(TimeStampError, match=re.escape(f"line 12 has '{cell}'")):
        parse(["2024-01-02", cell], lines=[11, 12])
    with pytest.raises(TimeStampError, match=re.escape(f"line 11 has '{cell}'")):
        parse([cell], lines=[11])


# ----------------------------------------------------------------------- a/b/YYYY
def test_month_first_when_only_it_fits():
    times, info = parse(["03/04/2020", "03/14/2020 10:30"])
    np.testing.assert_array_equal(times, dt("2020-03-04T00:00", "2020-03-14T10:30"))
    assert info["format"] == "MM/DD/YYYY"


def test_decided_by_the_whole_column_not_row_by_row():
    """01/02/2020 is 1 February here, since 13/02/2020 fits only day first."""
    times, info = parse(["01/02/2020", "13/02/2020"])
    np.testing.assert_array_equal(times, dt("2020-02-01", "2020-02-13"))
    assert info["format"] == "DD/MM/YYYY"


def test_ambiguous_dates_name_the_column_and_both_readings():
    with pytest.raises(TimeStampError) as err:
        parse(["03/03/2020", "03/04/2020"], lines=[2, 3])
    message = str(err.value)
    assert err.value.ambiguous
    for fragment in ("time column 'when' is ambiguous", "line 3 '03/04/2020'",
                     "2020-03-04 (MM/DD/YYYY)", "2020-04-03 (DD/MM/YYYY)",
                     "--date-order"):
        assert fragment in message, message


@pytest.mark.parametrize("order, expected", [("month-first", "2020-03-04"),
                                             ("day-first", "2020-04-03")])
def test_date_order_settles_an_ambiguous_column(order, expected):
    times, _ = parse(["03/04/2020"], date_order=order)
    assert times[0] == np.datetime64(expected)


def test_same_day_and_month_everywhere_is_not_ambiguous():
    times, _ = parse(["01/01/2020", "02/02/2020"])
    np.testing.assert_array_equal(times, dt("2020-01-01", "2020-02-02"))


def test_dates_that_fit_neither_order():
    with pytest.raises(TimeStampError, match=r"fits neither MM/DD/YYYY \(value 1 has "
                       r"'13/01/2020'\) nor DD/MM/YYYY \(value 2 has '01/13/2020'\)"):
        parse(["13/01/2020", "01/13/2020"])


def test_twelve_hour_clock_and_year_first():
    times, _ = parse(["1/2/2020 12:05 AM", "1/2/2020 1:05 PM", "1/2/2020 12:00 pm"],
                     date_order="month-first")
    np.testing.assert_array_equal(times, dt("2020-01-02T00:05", "2020-01-02T13:05",
                                            "2020-01-02T12:00"))
    times, info = parse(["2020/01/31", "2020/02/01 06:00:30"])
    np.testing.assert_array_equal(times, dt("2020-01-31T00:00:00", "2020-02-01T06:00:30"))
    assert info["format"] == "YYYY/MM/DD"


def test_day_month_year_with_dots():
    times, info = parse(["31.01.2020 23:59", "01.02.2020"])
    np.testing.assert_array_equal(times, dt("2020-01-31T23:59", "2020-02-01T00:00"))
    assert info["format"] == "DD.MM.YYYY"
    with pytest.raises(TimeStampError, match="impossible date"):
        parse(["30.02.2020"])


def test_one_format_per_column():
    with pytest.raises(TimeStampError, match=r"mixes time stamp formats: value 1 has "
                       r"'2020-01-01' \(ISO 8601\), value 2 has '01/02/2020'"):
        parse(["2020-01-01", "01/02/2020"])


# ----------------------------------------------------------------------- epoch seconds
def test_epoch_seconds_only_when_numbers_may_be_time_stamps():
    assert cell_format("1700000000") is None  # a number is data
    assert cell_format("1700000000", numbers="epoch") == "epoch"
    assert cell_format("2024", numbers="epoch") == "epoch"  # years only when named
    assert cell_format("2024", numbers=True) == "year"
    times, info = parse(["1700000000", "1700003600"], numbers="epoch")
    np.testing.assert_array_equal(times, dt("2023-11-14T22:13:20", "2023-11-14T23:13:20"))
    assert info == {"format": "epoch seconds", "utc": True}
    times, _ = parse(["1700000000.25"], numbers="epoch")
    assert times[0] == np.datetime64("2023-11-14T22:13:20.250")


@pytest.mark.parametrize("cell, hint", [("12345", ""), ("1700000000000",
                                                        "epoch milliseconds")])
def test_epoch_seconds_out_of_range(cell, hint):
    with pytest.raises(TimeStampError, match=f"outside the range read as epoch seconds.*"
                       f"value 2 has '{cell}'.*{hint}"):
        parse(["1700000000", cell], numbers=True)


def test_not_a_time_stamp_names_the_column_and_the_line():
    with pytest.raises(TimeStampError, match=r"time column 'when' does not hold time "
                       r"stamps: line 5 has 'soon' \(.*ISO 8601.*MM/DD/YYYY.*epoch"):
        parse(["2020-01-01", "soon"], lines=[4, 5])


# ----------------------------------------------------------------------- order, gaps
def test_check_order_counts_and_first_examples():
    t = dt("2020-01-01", "2020-01-02", "2020-01-02", "2020-01-05", "2020-01-04",
           "2020-01-01")
    r = check_order(t)
    assert r == {"n_backwards": 2, "first_backwards": 4, "n_repeated": 2,
                 "first_repeated": (1, 2)}
    r = check_order(dt("2020-01-01", "2020-01-02"))
    assert r == {"n_backwards": 0, "first_backwards": None, "n_repeated": 0,
                 "first_repeated": None}


def test_first_repeat_is_the_first_in_the_file():
    # 01-03 repeats at index 3 (of index 0); 01-01 repeats only at index 4
    r = check_order(dt("2020-01-03", "2020-01-01", "2020-01-02", "2020-01-03",
                       "2020-01-01"))
    assert r["first_repeated"] == (0, 3)


def test_sort_order_is_stable_and_keeps_the_last_of_each_stamp():
    t = dt("2020-01-03", "2020-01-01", "2020-01-02", "2020-01-01", "2020-01-03")
    assert sort_order(t).tolist() == [3, 2, 4]


def test_gaps_in_steps_of_the_usual_spacing():
    t = np.datetime64("2020-01-01T00:00") + np.r_[np.arange(52), 62 + np.arange(30)] \
        * np.timedelta64(1, "h")
    n, first, spacing = find_gaps(t)
    assert (n, first, spacing) == (10, 51, np.timedelta64(1, "h"))
    note = gap_note(t, "time")
    assert "time column 'time': 10 missing steps (spacing 1 h), first after " \
           "2020-01-03 03:00" in note
    assert "count rows, not time" in note


def test_months_have_no_gaps_and_regular_series_no_note():
    months = np.arange("2020-01", "2022-01", dtype="datetime64[M]").astype("datetime64[D]")
    assert find_gaps(months)[0] == 0
    assert gap_note(np.arange(10).astype("datetime64[h]"), "t") is None
    assert find_gaps(months[[0, 1, 2, 5, 6]])[:2] == (2, 2)


def test_format_stamp():
    assert format_stamp(np.datetime64("2020-01-03T04:00:00")) == "2020-01-03 04:00"
    assert format_stamp(np.datetime64("2020-01-03T04", "h")) == "2020-01-03 04:00"
    assert format_stamp(np.datetime64("2020-01-03T04:00:05")) == "2020-01-03 04:00:05"
    assert format_stamp(np.datetime64("2020-01-03")) == "2020-01-03"
