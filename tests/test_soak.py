"""Long streams stay exact (slow: ``python -m pytest -m slow``)."""

import importlib.util
from pathlib import Path

import pytest


def load_bench(name):
    path = Path(__file__).parents[1] / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_million_step_stream_stays_exact():
    worst = load_bench("bench_soak").main(["--steps", "1000000", "--check", "1000"])
    assert worst <= 1e-9


@pytest.mark.slow
def test_million_step_stream_stays_exact_with_a_long_window():
    worst = load_bench("bench_soak").main(["--steps", "1000000", "--check", "500", "--window", "200", "--features", "64,256"])
    assert worst <= 1e-9


@pytest.mark.slow
def test_short_soak_with_a_long_window_is_exact_at_every_checked_step():
    # 200 steps compared with the oracle at each of the 10 checkpoints: 8,000 lstsq on
    # 200 x 256 windows, 88 % of the test's time
    worst = load_bench("bench_soak").main(["--steps", "3000", "--check", "200", "--window", "200", "--features", "64,256"])
    assert worst <= 1e-9


def test_short_soak_with_a_long_window_is_exact():
    # the same stream and calls (long-window block solvers, D < N and D > N, lambda = 1
    # and 0.99), the last 20 steps of each of the 10 calls compared with the oracle
    worst = load_bench("bench_soak").main(["--steps", "3000", "--check", "20", "--window", "200", "--features", "64,256"])
    assert worst <= 1e-9


def test_short_soak_runs_and_is_exact():
    worst = load_bench("bench_soak").main(["--steps", "3000", "--check", "100"])
    assert worst <= 1e-9
