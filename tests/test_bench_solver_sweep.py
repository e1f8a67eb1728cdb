"""Smoke test of benchmarks/bench_solver_sweep.py: the quick sweep end to end, its JSON,
its README table, and its copy of the oracle against the test suite's."""

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from _oracle import window_lstsq

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "bench_solver_sweep.py"


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def quick_doc(tmp_path_factory):
    out = tmp_path_factory.mktemp("sweep") / "sweep_quick.json"
    # --oracle-budget 0.1: the oracle checks its least (20 steps a point, or every step
    # of a short cheap stream) instead of up to 60; the checks below are of the run and
    # its records, not of the solver's accuracy (tests/test_window_solvers.py and
    # others), and take the oracle's records as they come
    result = subprocess.run([sys.executable, str(SCRIPT), "--quick", "--budget", "1",
                             "--oracle-budget", "0.1", "--out", str(out)],
                            capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "target: worst ratio after the fill" in result.stdout
    assert "points outside the bound:" in result.stdout
    return json.loads(out.read_text(encoding="utf-8"))


def finite(x):
    return isinstance(x, (int, float)) and math.isfinite(x)


def test_quick_sweep_json(quick_doc):
    doc = quick_doc
    assert set(doc) == {"name", "command", "header", "results"}
    assert doc["name"] == "sweep_quick" and "--quick" in doc["command"]
    res = doc["results"]
    assert set(res) == {"settings", "summary", "rows", "pruned"}
    assert res["settings"]["sweep"] == "quick" and res["settings"]["blas_threads"] == 1
    summary = res["summary"]
    for key in ("points", "pruned", "stopped", "exceptions", "outside_bound", "seconds",
                "worst_ratio_full", "worst_ratio_fill", "worst_error", "exception_kinds",
                "outside_bound_points", "targets"):
        assert key in summary, key
    rows = res["rows"]
    assert len(rows) == summary["points"] > 20
    # every data kind, the threshold D = N − 1, N, N + 1, and every (λ, α)
    assert {r["data"] for r in rows} == set(res["settings"]["data"])
    assert {r["D"] - r["N"] for r in rows if r["N"] == 20} >= {-1, 0, 1}
    assert len({(r["lam"], r["alpha"]) for r in rows}) == 15
    for r in rows:
        for key in ("N", "D", "lam", "alpha", "data", "us_fill", "us_full", "floor_us",
                    "ratio_fill", "ratio_full", "fill_rows_timed", "full_rows_timed", "error",
                    "outside_bound", "route", "exception", "stopped", "warnings"):
            assert key in r, key
        assert finite(r["floor_us"]) and r["floor_us"] > 0
        if r["exception"] is not None:
            assert r["exception"]["type"] and "message" in r["exception"]
            continue
        # finite timings (no full-phase figure only when the budget stopped the fill)
        assert finite(r["us_fill"]) and r["fill_rows_timed"] > 0, r
        if not (r["stopped"] and r["stopped"]["phase"] == "fill"):
            assert finite(r["us_full"]) and r["full_rows_timed"] > 0, r
            assert finite(r["ratio_full"])
        if r["oracle_exception"] is None:
            assert r["oracle_steps"] >= min(20, r["rows_fed"])
            assert r["error"] == "inf" or finite(r["error"])
    assert summary["exceptions"] == sum(r["exception"] is not None for r in rows)
    assert summary["outside_bound"] == sum(bool(r["outside_bound"]) for r in rows)
    assert [t["bound"] for t in summary["targets"]] == [5.0, 10.0, 0, 0]


def test_quick_sweep_readme_table(quick_doc):
    tool = load(ROOT / "tools" / "benchmark_tables.py", "benchmark_tables")
    filename, render = tool.TABLES["solver-sweep"]
    assert filename == "bench_solver_sweep.json"
    text = render(quick_doc)
    assert text.startswith("| N | D | points |")
    assert "target worst ratio after the fill" in text and "no exception" in text


def test_design_covers_the_grid():
    bench = load(SCRIPT, "bench_solver_sweep")
    pts = bench.design("default")
    keys = {(p["N"], p["D"], p["lam"], p["alpha"], p["data"]) for p in pts}
    assert len(keys) == len(pts)
    for N in bench.WINDOWS:  # every (N, D) with every data kind at the defaults
        for D in bench.grid_dims(N):
            for data in bench.DATA:
                assert (N, D, 1.0, 0.0, data) in keys
    threshold = [(N, N + k, data) for N in (20, 100) for k in (-1, 0, 1)
                 for data in ("gaussian", "rff")] + [(500, 500, "rff")]
    for N, D, data in threshold:  # every (λ, α) at the threshold
        for lam in bench.LAMBDAS:
            for alpha in bench.ALPHAS:
                assert (N, D, lam, alpha, data) in keys
    assert sum(p["alpha"] > 0 and p["lam"] < 1 for p in pts) > 100
    for D in bench.WIDTHS_D:  # part D: widths between the grid's, every (λ, α) and λ = 0.99
        for lam in bench.LAMBDAS + (0.99,):
            for alpha in bench.ALPHAS:
                assert (bench.WIDTHS_N, D, lam, alpha, "rff") in keys
    assert len(bench.design("full")) == sum(len(bench.grid_dims(N)) for N in bench.WINDOWS) * 90


@pytest.mark.parametrize("alpha", [0.0, 1e-6, 0.1])
@pytest.mark.parametrize("shape", [(30, 5), (30, 50)])
def test_oracle_copy_matches_the_test_oracle(alpha, shape):
    bench = load(SCRIPT, "bench_solver_sweep")
    rng = np.random.default_rng(1)
    Z = rng.normal(size=shape)
    y = rng.normal(size=shape[0])
    w = (rng.random(shape[0]) > 0.2).astype(float)
    for t in (0, 1, 7, 12, 30):
        for sw in (None, w):
            params = dict(window_size=12, forgetting_factor=0.9, alpha=alpha, sample_weight=sw)
            beta, kappa = bench.window_lstsq(Z, y, t, **params)
            ref, ref_kappa = window_lstsq(Z, y[:, None], t, **params)
            np.testing.assert_allclose(beta, ref[:, 0], rtol=1e-12, atol=1e-12)
            assert kappa == pytest.approx(ref_kappa, rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, 0.1])
def test_oracle_spread_of_a_point_outside_the_bound(alpha):
    # a step outside the bound is solved by other exact LAPACK routes too: on an ordinary
    # window they agree with the oracle far inside the bound, so the spread reported is
    # theirs, not the error's; steps inside the bound report none
    bench = load(SCRIPT, "bench_solver_sweep")
    rng = np.random.default_rng(2)
    Z, y = rng.normal(size=(40, 8)), rng.normal(size=40)
    w = (rng.random(40) > 0.2).astype(float)
    for sw in (None, w):
        steps = [5, 20, 39]
        pred = np.array([Z[t] @ bench.window_lstsq(Z, y, t, window_size=12, forgetting_factor=0.9, alpha=alpha,
                                                   sample_weight=sw)[0] for t in range(40)])
        exact = bench.oracle_error(Z, y, sw, pred, steps, N=12, lam=0.9, alpha=alpha)
        assert exact["error"] < 1e-3 and "oracle_spread" not in exact
        alt = bench.other_exact_predictions(Z, y, sw, 20, N=12, lam=0.9, alpha=alpha)
        assert alt.shape == ((2,) if alpha else (3,))
        np.testing.assert_allclose(alt, pred[20], rtol=1e-10)
        wrong = pred.copy()
        wrong[20] += 1e-3
        off = bench.oracle_error(Z, y, sw, wrong, steps, N=12, lam=0.9, alpha=alpha)
        assert off["error"] > 1 and off["error_step"] == 20
        assert 0 <= off["oracle_spread"] < 1e-2
