"""``sklearn-orfit forecast`` on CSV time stamps (issue 25): formats, ambiguity, zones,
epoch seconds, order, repeats and gaps. The parsing itself: tests/test_timestamps.py.
"""

import numpy as np
import pytest
from test_cli_forecasting import (  # noqa: F401 (must_not_compute: a fixture)
    SMALL,
    TIMES,
    N,
    make_columns,
    must_not_compute,
    one_line_error,
    read_predictions,
    run,
    run_json,
    write_csv,
)

LATER = TIMES + np.timedelta64(9, "D")  # 10 to 20 January: days past the 12th

# --calibration 20 (its least): after the scored run the future forecaster learns the
# last lags + window + horizon + C values row by row, 9/10 of a run's time with the
# default C = 500; the tests here are of the time column, the scored run's notes,
# settings and predictions, none of the future forecast
TS_SMALL = [*SMALL, "--calibration", 20]


def stamps(fmt, times=LATER):
    """``times`` as text in another format."""
    return np.array([fmt(t.astype(object)) for t in times], dtype=object)


def forecast(tmp_path, capsys, name, times, *flags, column="a"):
    path = write_csv(tmp_path / name, make_columns(), times=times)
    argv = ["--csv", path, "--column", column, *TS_SMALL, "--output-dir", tmp_path / "o",
            *flags]
    return argv, run_json(argv, capsys)


ISO = [str(t) for t in TIMES]  # 2024-01-01T00:00 ...


@pytest.mark.parametrize("fmt, name", [
    (lambda t: t.strftime("%m/%d/%Y %H:%M"), "MM/DD/YYYY"),
    (lambda t: t.strftime("%d/%m/%Y %H:%M"), "DD/MM/YYYY"),
    (lambda t: t.strftime("%d.%m.%Y %H:%M"), "DD.MM.YYYY"),
    (lambda t: f"{t.month}/{t.day}/{t.year} {(t.hour - 1) % 12 + 1}:{t.minute:02d} "
               f"{'AM' if t.hour < 12 else 'PM'}", "MM/DD/YYYY"),
])
def test_day_month_formats_are_time_stamps(tmp_path, capsys, fmt, name):
    """Issue 25: MM/DD/YYYY was not recognised ("no time stamps", season none)."""
    _, doc = forecast(tmp_path, capsys, "s.csv", stamps(fmt))
    assert doc["settings"]["time_column"] == "time"
    assert doc["settings"]["season"] == 24  # hourly, from the stamps
    assert f"time column 'time' read as {name}" in doc["notes"]
    pred = read_predictions(tmp_path / "o" / "forecast_s_a_abo.csv")
    positions = pred["position"].astype(int)
    np.testing.assert_array_equal(pred["time"], [str(LATER[k]) for k in positions])


@pytest.mark.usefixtures("must_not_compute")
def test_ambiguous_dates_are_an_error_naming_the_column_and_both_readings(tmp_path,
                                                                          capsys):
    cells = [f"{k % 12 + 1:02d}/{(k // 20) % 12 + 1:02d}/2024" for k in range(N)]
    path = write_csv(tmp_path / "s.csv", make_columns(), times=np.array(cells, object),
                     time_name="day")
    status, _, err = run(["--csv", path, "--column", "a", *TS_SMALL], capsys)
    one_line_error(status, err, "column 'day' of", "is ambiguous", "'02/01/2024'",
                   "2024-02-01 (MM/DD/YYYY)", "2024-01-02 (DD/MM/YYYY)", "--date-order",
                   "(or name the time column with --time-column)")


def test_date_order_reads_an_ambiguous_column(tmp_path, capsys):
    cells = np.array([t.astype(object).strftime("%d/%m/%Y") for t in
                      np.datetime64("2024-01-01") + np.arange(N)], dtype=object)
    # 240 days from 1 January: the days after the 12th decide: DD/MM
    _, doc = forecast(tmp_path, capsys, "s.csv", cells)
    assert "time column 'time' read as DD/MM/YYYY" in doc["notes"]
    assert doc["settings"]["season"] == 7  # daily
    ambiguous = cells[:12 * 1]  # 1 to 12 January: both readings fit
    path = write_csv(tmp_path / "a.csv", {k: v[:12] for k, v in make_columns().items()},
                     times=ambiguous)
    argv = ["--csv", path, "--column", "a", "--n-lags", 2, "--window-size", 3,
            "--n-components", 16, "--quiet", "--no-plot", "--output-dir", tmp_path / "a"]
    one_line_error(*run(argv, capsys)[::2], "is ambiguous")
    run_json([*argv, "--date-order", "day-first"], capsys)
    pred = read_predictions(tmp_path / "a" / "forecast_a_a_abo.csv")
    assert pred["time"][-1] == "2024-01-12"
    run_json([*argv, "--date-order", "month-first"], capsys)
    pred = read_predictions(tmp_path / "a" / "forecast_a_a_abo.csv")
    assert pred["time"][-1] == "2024-12-01"


def test_utc_offsets_are_converted_to_utc(tmp_path, capsys):
    """Local times with their offsets across the spring change of clocks (+01:00, then
    +02:00): one UTC axis, hourly, in the predictions."""
    local = []
    for t in TIMES:
        offset = 1 if t < np.datetime64("2024-01-05T01:00") else 2
        local.append((t + np.timedelta64(offset, "h")).astype(object)
                     .strftime("%Y-%m-%d %H:%M") + f"+0{offset}:00")
    _, doc = forecast(tmp_path, capsys, "s.csv", np.array(local, dtype=object))
    assert any("UTC offsets are converted" in n for n in doc["notes"])
    assert not any("missing" in n for n in doc["notes"])  # no gap at the change
    pred = read_predictions(tmp_path / "o" / "forecast_s_a_abo.csv")
    np.testing.assert_array_equal(pred["time"],
                                  [ISO[k] for k in pred["position"].astype(int)])


@pytest.mark.usefixtures("must_not_compute")
def test_a_column_mixing_offsets_and_local_times(tmp_path, capsys):
    cells = np.array(ISO, dtype=object)
    cells[5] = cells[5] + "Z"
    path = write_csv(tmp_path / "s.csv", make_columns(), times=cells)
    status, _, err = run(["--csv", path, "--column", "a", "--time-column", "time",
                          *TS_SMALL], capsys)
    one_line_error(status, err, "--time-column 'time'", "with and without a UTC offset",
                   "line 7 has '2024-01-01T05:00Z'")


def test_epoch_seconds(tmp_path, capsys):
    """A column named like a time column holding epoch seconds is the time column, not
    a series (--column all does not forecast it); elsewhere numbers are data."""
    epoch = (TIMES - np.datetime64("1970-01-01T00:00")) // np.timedelta64(1, "s")
    path = write_csv(tmp_path / "e.csv", make_columns(), times=epoch,
                     time_name="timestamp")
    doc = run_json(["--csv", path, "--column", "all", *TS_SMALL, "--output-dir",
                    tmp_path / "o"], capsys)
    assert [s["name"] for s in doc["series"]] == ["a", "b", "temp"]
    assert doc["settings"]["time_column"] == "timestamp"
    assert doc["settings"]["season"] == 24
    assert "time column 'timestamp' read as epoch seconds (UTC)" in doc["notes"]
    pred = read_predictions(tmp_path / "o" / "forecast_e_a_abo.csv")
    assert pred["time"][0] == str(TIMES[int(pred["position"][0])].astype("datetime64[s]"))
    # the same numbers under another name are a series
    path = write_csv(tmp_path / "n.csv", make_columns(), times=epoch, time_name="count")
    doc = run_json(["--csv", path, "--column", "all", *TS_SMALL, "--no-save"], capsys)
    assert [s["name"] for s in doc["series"]] == ["count", "a", "b", "temp"]
    assert doc["settings"]["time_column"] is None
    # named by --time-column: read whatever its name
    doc = run_json(["--csv", path, "--column", "a", "--time-column", "count", *TS_SMALL,
                    "--no-save"], capsys)
    assert doc["settings"]["season"] == 24


@pytest.mark.usefixtures("must_not_compute")
def test_epoch_milliseconds_are_refused_with_a_hint(tmp_path, capsys):
    ms = (TIMES - np.datetime64("1970-01-01T00:00")) // np.timedelta64(1, "ms")
    path = write_csv(tmp_path / "e.csv", make_columns(), times=ms, time_name="t")
    status, _, err = run(["--csv", path, "--column", "a", "--time-column", "t", *TS_SMALL],
                         capsys)
    one_line_error(status, err, "--time-column 't'", "outside the range read as epoch "
                   "seconds", "line 2 has '1704067200000'", "epoch milliseconds?")


def test_no_time_stamps_names_the_column_looked_at(tmp_path, capsys):
    """Issue 25: "no time stamps" without the column it looked at."""
    cells = np.array([t.astype(object).strftime("%m/%d/%Y") for t in
                      np.datetime64("2024-01-01") + np.arange(N)], dtype=object)
    cells[50] = "02/30/2024"
    path = write_csv(tmp_path / "s.csv", make_columns(), times=cells, time_name="date")
    doc = run_json(["--csv", path, "--column", "a", *TS_SMALL, "--no-save"], capsys)
    assert doc["settings"]["time_column"] is None
    (note,) = [n for n in doc["notes"] if n.startswith("no time stamps")]
    assert "column 'date'" in note and "'02/30/2024'" in note and "line 52" in note
    assert "--time-column" in note
    status, out, err = run(["--csv", path, "--column", "a", *TS_SMALL, "--no-save"], capsys)
    assert status == 0, err
    assert "note: no time stamps: " in out and "column 'date'" in out


def test_repeated_time_stamps_are_refused_or_the_last_kept(tmp_path, capsys):
    times = TIMES.copy()
    times[31] = times[30]
    times[61] = times[60]
    path = write_csv(tmp_path / "s.csv", make_columns(), times=times)
    argv = ["--csv", path, "--column", "a", *TS_SMALL, "--no-save"]
    status, out, err = run(argv, capsys)
    assert out == ""
    one_line_error(status, err, "time column 'time' of", "2 rows repeat an earlier time "
                   "stamp, first 2024-01-02 06:00 (line 32 and line 33)",
                   "--sort-time to keep the last row of each time stamp")
    assert "not in time order" not in err
    doc = run_json([*argv, "--sort-time"], capsys)
    assert any("2 rows repeat" in n and "dropped" in n for n in doc["notes"])
    assert any("2 missing steps" in n for n in doc["notes"])


def test_gaps_are_reported(tmp_path, capsys):
    """Issue 25: ten missing hours were accepted without a note."""
    keep = np.r_[0:52, 62:N]
    columns = {k: v[keep] for k, v in make_columns().items()}
    path = write_csv(tmp_path / "g.csv", columns, times=TIMES[keep])
    argv = ["--csv", path, "--column", "a", *TS_SMALL, "--no-save"]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    assert ("note: time column 'time': 10 missing steps (spacing 1 h), first after "
            "2024-01-03 03:00; the lags and --season count rows, not time") in out
    doc = run_json(argv, capsys)
    assert doc["settings"]["season"] == 24  # still hourly


def test_sort_time_on_shuffled_rows_equals_the_sorted_file(tmp_path, capsys):
    rng = np.random.default_rng(1)
    perm = rng.permutation(N)
    columns = make_columns()
    shuffled = write_csv(tmp_path / "x.csv", {k: v[perm] for k, v in columns.items()},
                         times=TIMES[perm])
    argv = ["--csv", shuffled, "--column", "a", *TS_SMALL, "--output-dir", tmp_path / "o"]
    status, _, err = run(argv, capsys)
    one_line_error(status, err, "is not in time order", "--sort-time to sort the rows")
    doc = run_json([*argv, "--sort-time"], capsys)
    assert not any("dropped" in n for n in doc["notes"])
    write_csv(tmp_path / "y.csv", columns)
    run_json(["--csv", tmp_path / "y.csv", "--column", "a", *TS_SMALL, "--output-dir",
              tmp_path / "o"], capsys)
    x = read_predictions(tmp_path / "o" / "forecast_x_a_abo.csv")
    y = read_predictions(tmp_path / "o" / "forecast_y_a_abo.csv")
    for key in ("position", "time", "actual", "forecast"):
        np.testing.assert_array_equal(x[key], y[key])


@pytest.mark.parametrize("flag", [["--sort-time"], ["--date-order", "day-first"]])
@pytest.mark.usefixtures("must_not_compute")
def test_time_flags_need_csv(capsys, flag):
    status, _, err = run(["--dataset", "abo", *TS_SMALL, *flag], capsys)
    one_line_error(status, err, f"{flag[0]} needs --csv")
