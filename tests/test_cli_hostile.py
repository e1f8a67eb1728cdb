"""The command line on hostile input: huge files, odd encodings, interruptions, odd cells.

Most tests call :func:`sklearn_orfit.cli._main.main` in-process (fast; lets a test replace a
step by one that fails); those about the process itself (memory, stdout encoding) run it
in a subprocess.
"""

import csv
import dataclasses
import os
import subprocess
import sys
import tempfile

import numpy as np
import pytest

from sklearn_orfit.cli import _input, _run
from sklearn_orfit.cli import _main as _cli
from sklearn_orfit import _forecast_models as fm
from sklearn_orfit import forecasting as fp
from sklearn_orfit import forecasting
from sklearn_orfit.cli import _experiments as ex


def write_csv(path, values, notes=None):
    """A two-column CSV ``x,note``; ``notes`` maps a row index to its note cell."""
    notes = notes or {}
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["x", "note"])
        for i, v in enumerate(values):
            w.writerow([repr(float(v)), notes.get(i, "ok")])


def wave(n=200, scale=1.0):
    rng = np.random.default_rng(0)
    t = np.arange(n)
    return scale * (100.0 + 10.0 * np.sin(t / 4) + rng.normal(scale=0.3, size=n))


def run(argv, capsys):
    """``main(argv)`` in-process: ``(status, stdout, stderr)``."""
    status = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(err, *fragments):
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("sklearn-orfit: error: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


SMALL = ["--n-lags", 4, "--window-size", 20, "--n-components", 32, "--quiet"]


@pytest.fixture
def must_not_compute(monkeypatch):
    """Steps that must not be reached: they fail the test if called."""

    def forbidden(*args, **kwargs):
        raise AssertionError("computation started")

    for module, names in ((fm, ("make_forecast_model",)),
                          (forecasting, ("make_forecast_model", "_stream_forecaster",
                                         "tune_forecast")),
                          (ex, ("run_stream", "double_descent_sweep"))):
        for name in names:
            monkeypatch.setattr(module, name, forbidden)


# --------------------------------------------------------- 11. bounded memory, streaming
def test_csv_is_streamed_with_n_rows(tmp_path):
    """--n-rows 1000 of a ~30 MB file: peak traced memory far below the file size.

    Before, the whole file was read and split (about 18 bytes of memory per byte of file);
    a row after the first 1000 that is not numeric was also an error.
    """
    block = "".join(f"{np.datetime64('2000-01-01') + i},{100 + 10 * np.sin(i / 4):.10f},"
                    f"{20 + i % 7},a note about this row\n" for i in range(10_000))
    path = tmp_path / "big.csv"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("date,load,temperature,note\n")
        while fh.tell() < 30_000_000:
            fh.write(block)
        fh.write("2024-02-01,not a number,20,beyond --n-rows\n")
    size = os.path.getsize(path)
    script = (
        "import sys, tracemalloc\n"
        "from sklearn_orfit.cli._main import main\n"
        "tracemalloc.start()\n"
        "status = main(sys.argv[1:])\n"
        "print('PEAK', tracemalloc.get_traced_memory()[1], 'STATUS', status)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, "forecast", "--csv", str(path), "--column", "load",
         "--n-rows", "1000", *map(str, SMALL), "--no-save"],
        capture_output=True, text=True, timeout=300, check=False,
    )
    assert "PEAK" in proc.stdout, proc.stderr
    peak = int(proc.stdout.split("PEAK")[1].split()[0])
    # measured: under 1 MB, whatever the file's size (before: 360 MB, 12 times the size)
    assert peak < size / 4 + 8 * 2**20, (peak, size)
    assert "STATUS 0" in proc.stdout, proc.stderr  # the bad row after --n-rows: unread
    assert "1000 values" in proc.stdout


def test_memory_error_has_a_clear_message(tmp_path, capsys, monkeypatch):
    write_csv(tmp_path / "s.csv", wave())

    def out_of_memory(*args, **kwargs):
        raise MemoryError()  # as Python raises it: no message

    monkeypatch.setattr(ex, "run_stream", out_of_memory)
    status, _, err = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x",
                          *SMALL, "--no-save"], capsys)
    assert status == 1
    line = one_line_error(err, "out of memory", "--n-rows", "--n-components")
    assert not line.rstrip().endswith(":")


@pytest.mark.parametrize(
    "argv, fragments",
    [
        (["--n-components", 10**12], ["--n-components 1000000000000", "PiB", "available"]),
        (["--model", "ewrls", "--n-components", 10**6],
         ["--n-components 1000000", "D × D", "TiB", "available"]),
    ],
)
def test_huge_problem_refused_before_allocation(tmp_path, capsys, must_not_compute, argv,
                                                fragments):
    """A model that cannot fit in memory: exit 2 naming the option and the memory needed."""
    write_csv(tmp_path / "s.csv", wave())
    status, out, err = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x",
                            "--quiet", "--no-save", *argv], capsys)
    assert status == 2
    one_line_error(err, *fragments)


def test_memory_estimate_against_a_small_machine(monkeypatch):
    """The estimate refuses what a 1 GiB machine cannot hold and lets the default run."""
    monkeypatch.setattr(_run, "_available_memory", lambda: 2**30)
    parse = _cli.build_parser().parse_args
    _run._check_memory(parse(["forecast"]), 2048, 4032)  # the default run: ~20 MB
    args = parse(["forecast", "--window-size", "10000"])
    with pytest.raises(_cli.CLIError, match=r"--window-size 10000 and --n-components "
                       r"20000 needs about .* GiB .* 1 GiB available"):
        _run._check_memory(args, 20_000, 50_000)
    # an estimate within a small factor of what a run allocates (measured with
    # tracemalloc: abo 75 MB for 179 MB estimated, ewrls 96 MB for 107 MB)
    terms = _run._memory_terms(parse(["forecast", "--model", "ewrls"]), 2000, 600)
    assert 8 * 2000**2 < sum(t[0] for t in terms) < 8 * 8 * 2000**2


# ------------------------------------------------------------- 12. stdout encodings
# two subprocesses each (~3 s of CPU). latin-1 runs with -m slow: the same path as cp1252
# (any stdout encoding not UTF gets the fallback handler), what it encodes natively is a
# subset of cp1252's (µ, ², ·, ± and ×: cp1252 adds the dashes and …), and what it does
# not is a subset of what ascii does not, whose every character the handler spells
@pytest.mark.parametrize("encoding", ["cp1252", "ascii",
                                      pytest.param("latin-1", marks=pytest.mark.slow)])
def test_output_degrades_to_ascii(tmp_path, encoding):
    """σ, λ, α, →, µ: spelled in ASCII when stdout cannot encode them, exit 0."""
    write_csv(tmp_path / "s.csv", wave())
    env = {**os.environ, "PYTHONIOENCODING": encoding, "MPLBACKEND": "Agg",
           "COLUMNS": "200"}
    proc = subprocess.run(
        [sys.executable, "-m", "sklearn_orfit", "forecast", "--csv", "s.csv", "--column",
         "x", *map(str, SMALL), "--no-save"],
        cwd=tmp_path, capture_output=True, env=env, timeout=300, check=False,
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode(encoding)  # valid in the stream's encoding
    assert "sigma=0.5" in out and "lambda=1.0" in out and "alpha=0.1" in out  # abo default
    assert "ResMSE" in out and "time per update" in out
    helped = subprocess.run([sys.executable, "-m", "sklearn_orfit", "forecast", "--help"],
                            capture_output=True, env=env, timeout=120, check=False)
    assert helped.returncode == 0, helped.stderr.decode(errors="replace")
    assert "lambda in (0, 1]" in helped.stdout.decode(encoding)


def test_utf8_output_keeps_its_symbols(tmp_path, capsys):
    """The fallback touches only streams that need it (and is undone afterwards)."""
    write_csv(tmp_path / "s.csv", wave())
    status, out, _ = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x",
                          *SMALL, "--no-save"], capsys)
    assert status == 0 and "σ=0.5" in out and "λ=1.0" in out


def test_ascii_fallback_handler():
    text = "σ=0.5, λ → 1, 3 µs, ∑"
    assert text.encode("ascii", _cli._ENCODE_ERRORS) == b"sigma=0.5, lambda -> 1, 3 us, \\u2211"
    assert "—".encode("cp1252", _cli._ENCODE_ERRORS) == "—".encode("cp1252")


# ---------------------------------------------------- 13. output files: whole or absent
class _InterruptingWriter:
    """A csv writer that is interrupted (Ctrl-C) after ``after`` rows."""

    def __init__(self, real, after):
        self.real, self.after = real, after

    def writerow(self, row):
        if self.after == 0:
            raise KeyboardInterrupt
        self.after -= 1
        self.real.writerow(row)

    def writerows(self, rows):
        for row in rows:
            self.writerow(row)


@pytest.mark.parametrize("old", [None, "an earlier run's predictions\n"])
def test_interrupted_csv_leaves_no_partial_file(tmp_path, capsys, monkeypatch, old):
    write_csv(tmp_path / "s.csv", wave())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    target = out_dir / "forecast_s_x_abo.csv"
    if old is not None:
        target.write_text(old)
    real = csv.writer
    monkeypatch.setattr(csv, "writer", lambda fh, *a, **k: _InterruptingWriter(
        real(fh, *a, **k), after=50))
    status, _, err = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL,
                          "--no-plot", "--output-dir", out_dir], capsys)
    assert status == 130
    one_line_error(err, "interrupted")
    if old is None:
        assert os.listdir(out_dir) == []
    else:
        assert os.listdir(out_dir) == [target.name]
        assert target.read_text() == old


def test_interrupted_figure_leaves_no_partial_file(tmp_path, capsys, monkeypatch):
    write_csv(tmp_path / "s.csv", wave())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    png = out_dir / "forecast_s_x_abo.png"
    png.write_bytes(b"an earlier figure")

    def interrupted_plot(result, path, **kwargs):
        with open(path, "wb") as fh:
            fh.write(b"\x89PNG\r\n\x1a\n half a figure")
        raise KeyboardInterrupt

    monkeypatch.setattr(ex, "plot_forecast", interrupted_plot)
    status, _, _ = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL,
                        "--output-dir", out_dir], capsys)
    assert status == 130
    assert png.read_bytes() == b"an earlier figure"
    assert sorted(os.listdir(out_dir)) == ["forecast_s_x_abo.csv", png.name,
                                           "forecast_s_x_abo_future.csv"]


def test_written_files_are_complete_and_readable(tmp_path, capsys):
    """The normal path still writes the CSV, with ordinary permissions, and no leftovers."""
    write_csv(tmp_path / "s.csv", wave())
    out_dir = tmp_path / "out"
    status, _, _ = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL,
                        "--no-plot", "--output-dir", out_dir], capsys)
    assert status == 0
    assert sorted(os.listdir(out_dir)) == ["forecast_s_x_abo.csv",
                                           "forecast_s_x_abo_future.csv"]
    path = out_dir / "forecast_s_x_abo.csv"
    with open(path, newline="", encoding="utf-8") as fh:
        # a header, then the forecasts from position 5 (4 lags; the first row learned
        # one step later)
        assert len(list(csv.reader(fh))) == 1 + 200 - 5
    umask = os.umask(0)
    os.umask(umask)
    assert os.stat(path).st_mode & 0o777 == 0o666 & ~umask


def _read_only_dir(tmp_path):
    ro = tmp_path / "read-only"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        fd, probe = tempfile.mkstemp(dir=ro)
    except OSError:
        return ro
    os.close(fd)
    os.remove(probe)  # root ignores the mode: try a directory nobody may write to
    for candidate in ("/sys", "/proc"):
        try:
            fd, probe = tempfile.mkstemp(dir=candidate)
        except OSError:
            return candidate
        os.close(fd)  # pragma: no cover
        os.remove(probe)  # pragma: no cover
    pytest.skip("no read-only directory on this machine")  # pragma: no cover


@pytest.mark.parametrize("command", ["forecast", "double-descent"])
@pytest.mark.parametrize("where", ["a file in the way", "read-only"])
def test_unwritable_output_dir_before_any_computation(tmp_path, capsys, must_not_compute,
                                                      command, where):
    if where == "read-only":
        out_dir = _read_only_dir(tmp_path)
        fragment = "not writable"
    else:
        (tmp_path / "taken").write_text("a file, not a directory")
        out_dir = tmp_path / "taken"
        fragment = "cannot create --output-dir"
    write_csv(tmp_path / "s.csv", wave())
    argv = (["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL]
            if command == "forecast" else ["double-descent", "--quick", "--quiet"])
    status, out, err = run([*argv, "--output-dir", out_dir], capsys)
    assert status == 2
    one_line_error(err, fragment, str(out_dir))
    assert out == ""


# ------------------------------------------------------- 14. line breaks inside cells
BREAKS = ["\u2028", "\u2029", "\x85", "\x0c", "\x0b", "\x1c", "\x1d", "\x1e"]


@pytest.mark.parametrize("char", BREAKS, ids=[f"U+{ord(c):04X}" for c in BREAKS])
def test_line_break_characters_stay_in_their_cell(tmp_path, capsys, char):
    """Only \\r, \\n and \\r\\n end a record: no phantom value, right line numbers."""
    values = wave()
    write_csv(tmp_path / "s.csv", values, notes={50: f"see{char}2", 120: f"a{char}b"})
    got, column, lines = _input._read_csv_column(str(tmp_path / "s.csv"), "x")
    assert column == "x"
    np.testing.assert_array_equal(got, values)  # 200 values, not 202
    np.testing.assert_array_equal(lines, np.arange(2, 202))
    # a later error cites the line the user sees
    with open(tmp_path / "s.csv", encoding="utf-8", newline="") as fh:
        text = fh.read()
    text = text.replace(f"{float(values[150])!r},ok", "oops,ok")
    (tmp_path / "t.csv").write_text(text, encoding="utf-8", newline="")
    status, _, err = run(["forecast", "--csv", tmp_path / "t.csv", "--column", "x"], capsys)
    assert status == 2
    one_line_error(err, "line 152", "'oops'")


def test_quoted_cell_with_newlines(tmp_path, capsys):
    """A quoted cell may hold line breaks; a record's line is the one it starts on."""
    values = wave()
    write_csv(tmp_path / "s.csv", values, notes={10: "two\nlines", 20: "cr\r\nlf"})
    got, _, lines = _input._read_csv_column(str(tmp_path / "s.csv"), "x")
    np.testing.assert_array_equal(got, values)
    assert lines[10] == 12 and lines[11] == 14 and lines[21] == 25 and lines[-1] == 203
    np.testing.assert_array_equal(
        _input._read_csv_column(str(tmp_path / "s.csv"), "x", n_rows=15)[0], values[:15])


def test_line_break_end_to_end(tmp_path, capsys):
    """The full run sees 200 values (it saw 201, with a phantom 2.0, before)."""
    write_csv(tmp_path / "s.csv", wave(), notes={50: "see\u20282"})
    status, out, _ = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL,
                          "--no-save"], capsys)
    assert status == 0
    assert "; 200 values" in out


# ---------------------------------------------------------------- 15. degenerate input
@pytest.mark.parametrize("text", [",,,", ",,,\n,,,\n", "\n\n ,\t, \n", "\ufeff,,\r\n"])
def test_only_blank_cells(tmp_path, capsys, text):
    (tmp_path / "e.csv").write_text(text, encoding="utf-8", newline="")
    status, _, err = run(["forecast", "--csv", tmp_path / "e.csv"], capsys)
    assert status == 2
    one_line_error(err, "e.csv", "empty")


def test_huge_values_refused_without_raw_warnings(tmp_path):
    """1e302: exit 2 naming the magnitude; no RuntimeWarning lines, no inf scores."""
    write_csv(tmp_path / "s.csv", wave(300, scale=1e300))
    proc = subprocess.run(
        [sys.executable, "-m", "sklearn_orfit", "forecast", "--csv", "s.csv", "--column",
         "x", *map(str, SMALL), "--no-save"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )
    assert proc.returncode == 2
    assert "RuntimeWarning" not in proc.stderr and "inf" not in proc.stdout
    one_line_error(proc.stderr, "1e+75 in magnitude", "line 2", "divide the column")


def test_large_but_representable_values_give_finite_scores(tmp_path, capsys):
    """1e70: well inside the limit; finite scores, the same forecasts as at scale 1."""
    write_csv(tmp_path / "s.csv", wave(scale=1e70))
    status, out, err = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x",
                            *SMALL, "--no-save"], capsys)
    assert status == 0, err
    assert "RuntimeWarning" not in err and "warning" not in out
    rows = [line.split() for line in out.splitlines()
            if line.split()[:1] in (["forecast"], ["persistence"])]
    assert len(rows) == 2
    assert all(np.isfinite(float(v)) for r in rows for v in r[1:])


def test_overflowing_scores_are_noted(tmp_path, capsys, monkeypatch):
    """A score that overflows (a diverged model with finite forecasts) is not silent."""
    real = ex.run_stream

    def overflowing(*args, **kwargs):
        return dataclasses.replace(real(*args, **kwargs), res_var=float("inf"))

    monkeypatch.setattr(ex, "run_stream", overflowing)
    write_csv(tmp_path / "s.csv", wave())
    status, out, _ = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x", *SMALL,
                          "--no-save"], capsys)
    assert status == 0
    assert "note: some scores overflow float64" in out


@pytest.mark.parametrize("model", ["orfit", "ewrls", "abo"])
def test_warm_up_longer_than_the_series(tmp_path, capsys, must_not_compute, model):
    """--window-size is the unscored warm-up of every model: longer than the series is an
    error (orfit scored 2 of 178 steps before)."""
    write_csv(tmp_path / "s.csv", wave())
    status, _, err = run(["forecast", "--csv", tmp_path / "s.csv", "--column", "x",
                          "--model", model, "--window-size", 10**12, "--quiet"], capsys)
    assert status == 2
    one_line_error(err, "200 values", "--window-size 1000000000000", "at least")


# ------------------------------------------------------------------ data never mixed up
def _write_columns(path, header, n=120):
    rng = np.random.default_rng(3)
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for i in range(n):
            w.writerow([repr(float(100 + 10 * np.sin(i / 4) + rng.normal() + k))
                        for k in range(len(header))])


@pytest.mark.parametrize("column", ["value", "all"])
def test_duplicate_column_names_are_an_error(tmp_path, capsys, must_not_compute, column):
    # two columns named "value": --column value forecast the first, --column all the
    # second under the same name
    path = tmp_path / "dup.csv"
    _write_columns(path, ["value", "other", "value"])
    status, _, err = run(["forecast", "--csv", path, "--column", column,
                          "--output-dir", tmp_path, *SMALL], capsys)
    assert status == 2
    one_line_error(err, "2 columns named 'value'", "columns 1, 3")


def test_colliding_output_names_get_one_file_each(tmp_path, capsys):
    # "a b", "a_b" and "a/b" all made forecast_c_a_b_abo.csv: one file survived
    path = tmp_path / "c.csv"
    _write_columns(path, ["a b", "a_b", "a/b"])
    status, out, err = run(["forecast", "--csv", path, "--column", "all", "--no-plot",
                          "--output-dir", tmp_path, "--n-lags", 4, "--window-size", 20,
                          "--n-components", 32], capsys)
    assert status == 0, err
    written = sorted(p.name for p in tmp_path.glob("forecast_*.csv"))
    assert len(written) == 6, written  # the predictions and the future forecast of each
    # stdout names each file once
    for what in ("predictions: ", "future forecast: "):
        listed = [line.split(": ", 1)[1] for line in out.splitlines()
                  if line.startswith(what)]
        assert len(listed) == len(set(listed)) == 3


@pytest.mark.parametrize("target", ["csv", "predictions", "figure", "future"])
def test_save_model_never_replaces_an_input_or_an_output(tmp_path, capsys, must_not_compute,
                                                          target):
    path = tmp_path / "x.csv"
    write_csv(path, wave())
    before = path.read_bytes()
    outputs = {"csv": path,  # the series x of x.csv: forecast_x_x_abo.*
               "predictions": tmp_path / "forecast_x_x_abo.csv",
               "figure": tmp_path / "forecast_x_x_abo.png",
               "future": tmp_path / "forecast_x_x_abo_future.csv"}
    status, _, err = run(["forecast", "--csv", path, "--column", "x", "--output-dir",
                          tmp_path, "--save-model", outputs[target], *SMALL], capsys)
    assert status == 2
    one_line_error(err, "--save-model", "would replace it")
    assert path.read_bytes() == before
    assert not outputs["predictions"].exists() or target == "csv"
