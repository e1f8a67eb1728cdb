"""The ``sklearn-orfit`` command line, driven as a user would: in a subprocess."""

import csv
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def run_cli(*args, cwd, timeout=300):
    """``python -m sklearn_orfit ARGS`` in ``cwd``; returns the completed process."""
    return subprocess.run(
        [sys.executable, "-m", "sklearn_orfit", *map(str, args)],
        cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False,
        env={**os.environ, "MPLBACKEND": "Agg"},
    )


def has_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def read_predictions(path):
    with open(path, newline="", encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def scores(stdout):
    """``{"forecast": (ResMSE, ResVAR), ...}`` from the printed table."""
    out = {}
    for line in stdout.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] in ("forecast", "persistence"):
            out[parts[0]] = (float(parts[1]), float(parts[2]))
    return out


def write_series_csv(path, values, *, delimiter=",", extra=True):
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh, delimiter=delimiter)
        w.writerow(["date", "load", "temperature"] if extra else ["load"])
        for i, v in enumerate(values):
            w.writerow([str(np.datetime64("2024-01-01") + i), repr(float(v)), 20.0 + i % 7]
                       if extra else [repr(float(v))])


@pytest.fixture
def series():
    rng = np.random.default_rng(0)
    t = np.arange(400)
    return 100.0 + 10.0 * np.sin(2 * np.pi * t / 24) + rng.normal(scale=0.5, size=t.size)


def assert_one_line_error(proc, *fragments):
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("sklearn-orfit: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


# --------------------------------------------------------------------- the default run
def test_default_run_on_bundled_electricity(tmp_path):
    """No arguments: forecast of the bundled electricity demand, files written."""
    proc = run_cli(cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "electricity" in proc.stdout and "time per update" in proc.stdout
    s = scores(proc.stdout)
    # the model must beat the last-value forecast clearly on this strongly seasonal
    # series (measured: ResMSE about 1.1e5 MW² against 8.8e5)
    assert 0 < s["forecast"][0] < 0.3 * s["persistence"][0]
    out = tmp_path / "sklearn-orfit-output"
    pred = read_predictions(out / "forecast_electricity_abo.csv")
    # the first forecast: of position 22 (differencing, 20 lags, the first row learned
    # one step later)
    assert pred["actual"].size == 4032 - 22
    assert pred["time"][0] == "2000-06-05T11:00"
    if has_matplotlib():
        assert (out / "forecast_electricity_abo.png").read_bytes()[:8] == PNG_MAGIC


def test_default_run_short_variant(tmp_path):
    """The default command on the first rows only, quiet: same output shape, fast."""
    proc = run_cli("--n-rows", 500, "--quiet", "--output-dir", "o", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # --quiet: no progress bar
    pred = read_predictions(tmp_path / "o" / "forecast_electricity_abo.csv")
    assert pred["actual"].size == 500 - 22
    # first window not scored: the default window (500) halved for a series too short
    # for it, (500 - 24) // 2 = 238 (24: the first forecast's position, 2 scored ones)
    assert pred["scored"].astype(int).sum() == 500 - 22 - 238


def test_console_script_is_installed(tmp_path):
    script = shutil.which("sklearn-orfit", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("console script not installed next to this interpreter")
    proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60,
                          check=False)
    assert proc.returncode == 0
    for command in ("forecast", "benchmark", "double-descent"):
        assert command in proc.stdout


# --------------------------------------------------------------------- CSV input
def test_csv_input_with_chosen_column(tmp_path, series):
    write_series_csv(tmp_path / "load.csv", series)
    proc = run_cli("forecast", "--csv", "load.csv", "--column", "load", "--n-lags", 5,
                   "--window-size", 30, "--n-components", 256, "--sigma", 1.0,
                   "--quiet", "--output-dir", "out", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    pred = read_predictions(tmp_path / "out" / "forecast_load_load_abo.csv")
    offset = 5 + 1  # 5 lags, then the first row learned one step later
    np.testing.assert_array_equal(pred["position"].astype(int), np.arange(offset, 400))
    # the "actual" column is the chosen column (not the date or temperature), unchanged
    np.testing.assert_array_equal(pred["actual"].astype(float), series[offset:])
    forecast = pred["forecast"].astype(float)
    assert np.all(np.isfinite(forecast))
    scored = pred["scored"].astype(int) == 1
    mse = np.mean((series[offset:][scored] - forecast[scored]) ** 2)
    assert mse == pytest.approx(scores(proc.stdout)["forecast"][0], rel=1e-5)
    assert mse < 0.5 * np.var(series)  # it learned the daily cycle
    if has_matplotlib():
        assert (tmp_path / "out" / "forecast_load_load_abo.png").exists()


def test_csv_forecasts_do_not_look_ahead(tmp_path, series):
    """Changing a later value leaves every earlier forecast bit-for-bit unchanged."""
    changed = series.copy()
    changed[300:] += 50.0
    write_series_csv(tmp_path / "a.csv", series, delimiter=";")
    write_series_csv(tmp_path / "b.csv", changed, delimiter=";")
    common = ["--column", "load", "--n-lags", 4, "--window-size", 20, "--quiet",
              "--n-components", 128, "--no-plot", "--output-dir", "out"]
    for name in ("a.csv", "b.csv"):
        proc = run_cli("forecast", "--csv", name, *common, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    fa = read_predictions(tmp_path / "out" / "forecast_a_load_abo.csv")
    fb = read_predictions(tmp_path / "out" / "forecast_b_load_abo.csv")
    pos = fa["position"].astype(int)
    before = pos <= 300  # forecast of value 300 uses values < 300 only
    np.testing.assert_array_equal(fa["forecast"][before], fb["forecast"][before])
    assert not np.array_equal(fa["forecast"][~before], fb["forecast"][~before])


@pytest.mark.parametrize("model", ["orfit", "ensemble", "sw-krls", "qrd-rls", "ewrls"])
def test_other_models_run(tmp_path, series, model):
    write_series_csv(tmp_path / "s.csv", series, extra=False)  # one column: no --column
    proc = run_cli("forecast", "--csv", "s.csv", "--model", model, "--n-lags", 5,
                   "--window-size", 30, "--n-components", 128, "--n-partitions", 2,
                   "--quiet", "--no-save", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    s = scores(proc.stdout)
    assert np.isfinite(s["forecast"][0]) and s["forecast"][0] < np.var(series)


# --------------------------------------------------------------------- bad input
def test_missing_file(tmp_path):
    proc = run_cli("forecast", "--csv", "nope.csv", "--column", "x", cwd=tmp_path)
    assert_one_line_error(proc, "file not found", "nope.csv")


def test_unknown_column(tmp_path, series):
    write_series_csv(tmp_path / "s.csv", series)
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "demand", cwd=tmp_path)
    assert_one_line_error(proc, "'demand' not found", "'load'", "'temperature'")


def test_several_columns_and_none_chosen(tmp_path, series):
    write_series_csv(tmp_path / "s.csv", series)
    proc = run_cli("forecast", "--csv", "s.csv", cwd=tmp_path)
    assert_one_line_error(proc, "3 columns", "--column")


def test_non_numeric_column(tmp_path, series):
    write_series_csv(tmp_path / "s.csv", series)
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "date", cwd=tmp_path)
    assert_one_line_error(proc, "not numeric", "line 2", "'2024-01-01'")


def test_too_few_rows_for_lags_and_window(tmp_path, series):
    write_series_csv(tmp_path / "s.csv", series[:60])
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "load", "--n-lags", 10,
                   "--window-size", 50, cwd=tmp_path)
    assert_one_line_error(proc, "60 values", "--n-lags 10", "--window-size 50", "63")


@pytest.mark.parametrize("bad", ["", "nan", "NA"])
def test_nan_in_series(tmp_path, series, bad):
    write_series_csv(tmp_path / "s.csv", series)
    lines = (tmp_path / "s.csv").read_text().splitlines()
    fields = lines[41].split(",")
    fields[1] = bad
    lines[41] = ",".join(fields)
    (tmp_path / "s.csv").write_text("\n".join(lines) + "\n")
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "load", cwd=tmp_path)
    assert_one_line_error(proc, "NaN", "line 42")


def test_infinite_value(tmp_path, series):
    values = series.copy()
    values[10] = np.inf
    write_series_csv(tmp_path / "s.csv", values)
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "load", cwd=tmp_path)
    assert_one_line_error(proc, "infinite", "line 12")


@pytest.mark.parametrize(
    "args, fragment",
    [
        (["forecast", "--n-lags", "0"], "--n-lags"),
        (["forecast", "--forgetting-factor", "1.5"], "--forgetting-factor"),
        (["forecast", "--model", "lstm"], "invalid choice"),
        (["forecast", "--dataset", "electricity", "--n-rows", "40"], "40 values"),
        (["--no-such-option"], "unrecognized arguments"),
        (["forecast", "--csv", "."], "directory"),
    ],
)
def test_bad_options(tmp_path, args, fragment):
    assert_one_line_error(run_cli(*args, cwd=tmp_path), fragment)


def test_empty_file(tmp_path):
    (tmp_path / "e.csv").write_text("")
    assert_one_line_error(run_cli("forecast", "--csv", "e.csv", cwd=tmp_path), "empty")


# --------------------------------------------------------------------- other commands
def test_benchmark_quick(tmp_path):
    proc = run_cli("benchmark", "--quick", "--max-log2-d", 4, "--steps", 100, "--quiet",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    table = [line.split() for line in proc.stdout.splitlines()
             if line.split() and line.split()[0].isdigit()]
    assert [int(r[0]) for r in table] == [2, 4, 8, 16]
    assert all(float(r[1]) > 0 for r in table)
    assert [float(r[3]) for r in table] == [6.11, 6.25, 7.59, 9.22]  # the paper's C++


def test_double_descent_small(tmp_path):
    proc = run_cli("double-descent", "--n-updates", 400, "--max-log2-d", 7, "--quiet",
                   "--output-dir", "dd", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rows = {}
    for line in proc.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 6 and parts[0] in ("1.0", "0.9"):
            rows[(float(parts[0]), int(parts[1]))] = float(parts[2])
    # the test error peaks at the interpolation threshold D = N = 20
    for lam in (1.0, 0.9):
        peak = rows[(lam, 20)]
        assert all(err < peak for (lm, D), err in rows.items() if lm == lam and D != 20)
    # λ identity for D > N
    for D in (32, 64, 128):
        assert rows[(1.0, D)] == pytest.approx(rows[(0.9, D)], rel=1e-9)
    identity = next(line for line in proc.stdout.splitlines() if "identity" in line)
    assert float(identity.split("=")[-1]) < 1e-10
    if has_matplotlib():
        assert (tmp_path / "dd" / "double_descent.png").read_bytes()[:8] == PNG_MAGIC


def test_version_and_help(tmp_path):
    proc = run_cli("--version", cwd=tmp_path)
    assert proc.returncode == 0 and proc.stdout.startswith("sklearn-orfit ")
    proc = run_cli("forecast", "--help", cwd=tmp_path)
    assert proc.returncode == 0 and "--csv" in proc.stdout and "--model" in proc.stdout


def test_json_output_end_to_end(tmp_path, series):
    """--json in a real process: stdout is exactly one JSON object (no progress bar, no
    notes, no warnings), for scripts."""
    import json

    write_series_csv(tmp_path / "s.csv", series)
    proc = run_cli("forecast", "--csv", "s.csv", "--column", "load,temperature",
                   "--n-lags", 4, "--window-size", 20, "--n-components", 64, "--json",
                   "--no-plot", "--output-dir", "o", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert [s["name"] for s in doc["series"]] == ["load", "temperature"]
    assert doc["settings"]["time_column"] == "date"  # detected
    assert "mean of the per-series metrics" in doc["aggregate"]["method"]
    assert proc.stderr == ""


def test_json_output_survives_an_ascii_terminal(tmp_path, series):
    """Non-ASCII names stay exact in the JSON (escaped), whatever stdout's encoding."""
    import json

    with open(tmp_path / "s.csv", "w", encoding="utf-8") as fh:
        fh.write("σ-load\n" + "\n".join(repr(float(v)) for v in series[:120]) + "\n")
    proc = subprocess.run(
        [sys.executable, "-m", "sklearn_orfit", "--csv", "s.csv", "--n-lags", "4",
         "--window-size", "20", "--n-components", "32", "--json", "--no-save"],
        cwd=tmp_path, capture_output=True, timeout=300, check=False,
        env={**os.environ, "PYTHONIOENCODING": "ascii"},
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout.decode("ascii"))
    assert doc["series"][0]["name"] == "σ-load"
