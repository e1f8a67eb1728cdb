"""Smoke test of benchmarks/bench_real_data.py on a tiny configuration."""

import importlib.util
import json
import math
from pathlib import Path


def load_bench(name):
    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_real_data_tiny_end_to_end(capsys, tmp_path):
    bench = load_bench("bench_real_data")
    results = bench.main([
        "--out", str(tmp_path),
        "--quick", "--n-rows", "500", "--n-components", "64",
        "--n-validation", "2", "--n-test", "2",
        "--validation-size", "30", "--test-size", "30",
        "--live-rows", "3", "--api-rows", "3", "--repeats", "1", "--no-figure",
    ])
    assert set(results) == {"electricity", "eurusd"}
    for name, res in results.items():
        for method in ("ABO", "SW-KRLS", "QRD-RLS"):
            r = res[method]
            assert math.isfinite(r["mse"]) and r["mse"] > 0, (name, method)
            assert math.isfinite(r["var"]) and r["var"] >= 0, (name, method)
            assert len(r["fold_mse"]) == 2
            assert r["ms_stream"] > 0 and r["ms_row"] > 0
            # the one-row paths reproduce the streamed predictions
            assert r["row_dev"] < 1e-8, (name, method, r["row_dev"])
        assert res["zero"]["mse"] > 0
    out = capsys.readouterr().out
    assert "| ABO |" in out and "| SW-KRLS |" in out and "| QRD-RLS |" in out
    # the results as JSON, with the settings and the machine (nothing else written)
    doc = json.loads((tmp_path / "bench_real_data_quick.json").read_text(encoding="utf-8"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_real_data_quick.json"]
    assert doc["results"]["settings"]["n_components"] == 64
    assert {"machine", "blas", "date"} <= set(doc["header"])
    saved = doc["results"]["datasets"]["electricity"]["ABO"]
    assert saved["fold_mse"] == results["electricity"]["ABO"]["fold_mse"]


def test_bench_real_data_writes_nothing_when_called_without_out(tmp_path, monkeypatch):
    """Called from Python without --out, a benchmark leaves benchmarks/out/ alone."""
    bench = load_bench("bench_real_data")
    written = []
    monkeypatch.setattr(bench, "write_results",
                        lambda name, payload, directory, **kw: written.append(directory))
    bench.main(["--quick", "--n-rows", "500", "--n-components", "16", "--datasets",
                "electricity", "--n-validation", "2", "--n-test", "2",
                "--validation-size", "20", "--test-size", "20", "--live-rows", "2",
                "--api-rows", "2", "--repeats", "1"])
    assert written == [None]
