"""The experiments layer shared by the command line and the benchmarks.

The command line's stream on awkward series, the timing / machine / results
helpers, and ``tools/benchmark_tables.py --check`` on the committed JSON and README (no
benchmark is run).
"""

import importlib.util
import json
import math
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sklearn_orfit import _forecast_models as fm
from sklearn_orfit import forecasting as fp
from sklearn_orfit.cli import _experiments as ex

ROOT = Path(__file__).resolve().parents[1]


def load_tool():
    path = ROOT / "tools" / "benchmark_tables.py"
    spec = importlib.util.spec_from_file_location("benchmark_tables", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ awkward series
SERIES = {
    "far from zero": np.random.default_rng(0).normal(size=2500) + 1e4,
    "constant start": np.r_[np.zeros(5), 5 * np.ones(5),
                            np.random.default_rng(1).normal(size=1100)],
    "small integers": np.random.default_rng(2).integers(0, 3, size=1100).astype(float),
    "zero at a zero mean": np.r_[1.0, -1.0, 0.0, 0.0,
                                 np.random.default_rng(3).normal(size=1100)],
    "zeros, then a step": np.r_[np.zeros(1500), np.ones(3), np.zeros(100)],
}


@pytest.mark.parametrize("transform", ["none", "diff"])
@pytest.mark.parametrize("name", list(SERIES))
def test_the_stream_forecasts_awkward_series(name, transform):
    """Series that start flat, sit far from zero, take few values or step once: every
    forecast the command line's chain makes is finite (the running standardisation of
    constant rows divides by no zero), the first one at first_forecast_position, and a
    stream cut at an odd position and continued from its checkpoint gives the forecasts
    of one uninterrupted run: bit for bit after the checkpoint, and before the cut up to
    the rounding of the last, shorter block (its prequential call is cut)."""
    x = SERIES[name]

    def forecaster():
        fc = fp._stream_forecaster(
            fm.make_forecast_model("abo", n_components=32, window_size=20, alpha=0.1),
            transform=transform, n_lags=4, horizon=1, chunk_size=64)
        fc._start(x, None)
        return fc

    whole = ex.run_stream(forecaster(), x)
    first = fp.first_forecast_position(n_lags=4, transform=transform)
    assert whole.index[0] == first and np.all(np.isfinite(whole.forecast))
    fc = forecaster()
    cut = ex.run_stream(fc, x[:1030], checkpoint=True)
    ckpt, position = cut.checkpoint
    assert position == 1024 and ckpt.n_samples_seen_ == 1024
    ckpt = pickle.loads(pickle.dumps(ckpt))
    rest = ex.run_stream(ckpt, x[position:], report_from=1030)
    k = 1030 - first
    np.testing.assert_array_equal(rest.forecast, whole.forecast[k:])
    np.testing.assert_array_equal(cut.forecast[:1024 - first], whole.forecast[:1024 - first])
    np.testing.assert_allclose(cut.forecast, whole.forecast[:k], rtol=1e-13,
                               atol=1e-13 * np.abs(x).max())


# ------------------------------------------------------------------ shared helpers
def test_best_of_and_time_calls():
    calls = []
    times = ex.time_calls(lambda: calls.append(1), 4)
    assert len(times) == 4 and len(calls) == 4 and all(t >= 0 for t in times)
    assert ex.best_of(lambda: calls.append(1), 3) >= 0 and len(calls) == 7
    assert len(ex.time_calls(lambda: None, 0)) == 1  # at least one call


def test_machine_header_and_line():
    h = ex.machine_header()
    assert {"machine", "cpus", "python", "numpy", "blas", "date"} <= set(h)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", h["date"])
    json.dumps(h)  # JSON-ready
    line = ex.header_line(h)
    assert line.startswith("# ") and h["numpy"] in line and h["blas"] in line


def test_blas_threads_limits_and_describes():
    pytest.importorskip("threadpoolctl")
    ctx, describe = ex.blas_threads(1)
    with ctx:
        text = describe()
    assert text == "unknown" or "(1 threads)" in text


def test_table5_constants():
    assert ex.TABLE5_CPP_MS[2] == 6.11 and ex.TABLE5_CPP_MS[16384] == 11971.30
    assert sorted(ex.TABLE5_CPP_MS) == [2**k for k in range(1, 15)]
    assert ex.TABLE5_SETTING == {"window_size": 20, "n_lags": 7, "n_steps": 1000}


def test_write_results(tmp_path):
    payload = {"a": np.float64(1.5), "b": np.arange(3), "nan": math.nan, "inf": -math.inf,
               "nested": [{"x": np.int64(2)}]}
    path = ex.write_results("demo", payload, tmp_path, command="python demo.py")
    assert Path(path) == tmp_path / "demo.json"
    doc = json.loads(Path(path).read_text(encoding="utf-8"))
    assert doc["name"] == "demo" and doc["command"] == "python demo.py"
    assert doc["results"] == {"a": 1.5, "b": [0, 1, 2], "nan": None, "inf": "-inf",
                              "nested": [{"x": 2}]}
    assert {"machine", "date", "blas"} <= set(doc["header"])
    assert ex.write_results("demo", payload, None) is None  # no folder: nothing written


def test_pyplot_and_save_figure(tmp_path):
    plt = ex.pyplot()
    if plt is None:
        pytest.skip("matplotlib not installed")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = ex.save_figure(fig, str(tmp_path / "sub" / "f.png"), dpi=20)
    assert Path(path).stat().st_size > 0


def test_benchmarks_import_no_private_module_of_the_package():
    """The benchmark scripts use the package's public names (the measurement helpers
    from the public ``sklearn_orfit.utils.benchmarking``), not its private modules."""
    private = re.compile(r"^\s*(from|import)\s+sklearn_orfit(\.\w+)*\._\w+", re.M)
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert not private.search(text), (path.name, private.search(text).group(0))


def test_no_benchmark_copies_the_shared_pieces():
    """The paper's figures, the timing helpers and the machine header live in the
    experiments layer only."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        assert "11971.3" not in text, path.name  # the C++ figures of Table 5
        assert not re.search(r"^def (_?best_of|_best|_cpu|_?peak_rss)", text, re.M), path.name
        assert "threadpool_info()\n" not in text or path.name == "bench_ensemble.py", path.name
        assert 'matplotlib.use("Agg")' not in text, path.name


# ------------------------------------------------------------------ README tables
def test_readme_tables_are_up_to_date():
    result = subprocess.run([sys.executable, str(ROOT / "tools" / "benchmark_tables.py"),
                             "--check"], capture_output=True, text=True, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr


def test_check_fails_on_a_stale_table(tmp_path):
    tool = load_tool()
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    names = [m.group("name") for m in tool.MARKER.finditer(readme)]
    assert names, "no generated table in the README"
    stale = readme.replace(f"<!-- table:{names[0]} -->\n", f"<!-- table:{names[0]} -->\n| x |\n")
    path = tmp_path / "README.md"
    path.write_text(stale, encoding="utf-8")
    assert tool.main(["--check", "--readme", str(path)]) == 1
    assert tool.main(["--readme", str(path)]) == 0  # rewrites it
    assert path.read_text(encoding="utf-8") == readme
    assert tool.main(["--check", "--readme", str(path)]) == 0


def test_every_generated_table_has_its_json_committed():
    tool = load_tool()
    readme = (ROOT / "benchmarks" / "README.md").read_text(encoding="utf-8")
    tracked = subprocess.run(["git", "ls-files", "benchmarks/out"], capture_output=True,
                             text=True, cwd=ROOT).stdout.split()
    names = [m.group("name") for m in tool.MARKER.finditer(readme)]
    assert len(names) >= 4
    for name in names:
        filename = tool.TABLES[name][0]
        assert (ROOT / "benchmarks" / "out" / filename).is_file(), filename
        if tracked or (ROOT / ".git").exists():
            ignored = subprocess.run(["git", "check-ignore", "-q",
                                      f"benchmarks/out/{filename}"], cwd=ROOT).returncode
            assert ignored == 1, f"{filename} is git-ignored"


def test_unknown_table_is_an_error(tmp_path):
    tool = load_tool()
    path = tmp_path / "README.md"
    path.write_text("<!-- table:nope -->\nx\n<!-- /table -->\n", encoding="utf-8")
    assert tool.main(["--check", "--readme", str(path)]) == 2
