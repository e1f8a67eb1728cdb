"""ORFit for a multilayer perceptron (the ORFit paper's §6) against linear ORFit and SGD.

Two streams, each learned in one pass, one row per step, in a drifting order:

* **rotated digits** — the stream of ``bench_orfit_digits.py``: images of the digit 2
  from :func:`sklearn.datasets.load_digits`, resized to ``--size``² pixels, rotated by
  ``θ ~ U[0, π]``, streamed by increasing angle; the target is ``θ``; the other images
  of 2s at ``--test-rotations`` random angles are the test set;
* **nonlinear synthetic** — ``x ~ N(0, I₅)``, ``y = sin(2 x·a) + (x·b)²/2 + 0.05 ε``,
  ``--n-synth`` rows streamed by increasing ``x₀`` (covariate drift), 2,000 i.i.d. test
  rows.

Methods: ``ORFitMLPRegressor`` (one hidden tanh layer) with the memory ``m`` as
incremental PCA, latest or random directions, unlimited, and ``memory_size=0`` (One-step
SGD); ``ORFitRegressor`` on the raw inputs (linear ORFit, ``m`` and unlimited);
scikit-learn's ``MLPRegressor`` (same architecture and initial network, Adam) by
``partial_fit`` one row at a time, for one pass and for ``--epochs`` passes.

Reported per method (mean over seeds): the test RMSE at the end of the stream, the
"forgetting" — the absolute error on an early training point (the 11th) at the end —
and the time per learned row. The floor is one Jacobian of the network plus one
``P × (m + 1)`` product, timed in the same run: what any method that computes the
gradient and touches an ``m``-direction memory must pay. One BLAS thread
(threadpoolctl).

Regenerate: ``python benchmarks/bench_orfit_mlp.py`` (about 2 minutes on one core;
``--quick`` for one seed).
"""

import argparse
import os
import time
import warnings

import numpy as np
from sklearn.datasets import load_digits
from sklearn.exceptions import ConvergenceWarning
from sklearn.neural_network import MLPRegressor

from sklearn_orfit import ORFitMLPRegressor, ORFitRegressor
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, time_calls, write_results,
)
from sklearn_orfit.exceptions import SpannedBatchWarning

try:  # the digits stream of the linear benchmark
    from bench_orfit_digits import make_split
except ImportError:  # run from the repository root
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).parent))
    from bench_orfit_digits import make_split

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")

TRACKED = 10  # the early training point whose error is tracked (the 11th)


def digits_stream(seed, args):
    digits = load_digits()
    twos = digits.images[digits.target == 2] / 16.0
    X, y, Xt, yt, _ = make_split(twos, seed, n_train=args.n_train,
                                 test_rotations=args.test_rotations, size=args.size)
    return X, y, Xt, yt


def synthetic_stream(seed, args):
    rng = np.random.default_rng(1000 + seed)
    a, b = rng.normal(size=5) / np.sqrt(5), rng.normal(size=5) / np.sqrt(5)

    def target(X):
        return np.sin(2 * X @ a) + 0.5 * (X @ b) ** 2

    X = rng.normal(size=(args.n_synth, 5))
    X = X[np.argsort(X[:, 0])]  # drifting order
    y = target(X) + 0.05 * rng.normal(size=len(X))
    Xt = rng.normal(size=(2000, 5))
    return X, y, Xt, target(Xt)


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


def one_pass(est, X, y):
    """Learn one row per call; return the time per row."""

    def learn():
        for i in range(len(y)):
            est.partial_fit(X[i : i + 1], y[i : i + 1])

    return time_calls(learn, 1)[0] / len(y)


def sklearn_mlp(hidden, seed):
    return MLPRegressor(hidden_layer_sizes=hidden, activation="tanh", random_state=seed,
                        learning_rate_init=1e-3)


def floor_per_row(est, X, m):
    """One Jacobian of one row plus one ``P × (m + 1)`` product, at the final network."""
    B = np.random.default_rng(0).normal(size=(m + 1, est.params_.size))
    reps = min(len(X), 200)

    def rows():
        for i in range(reps):
            x = X[i : i + 1]
            J = est._jacobian(est._forward(x, est.params_), est.params_)
            B @ J[0]

    return time_calls(rows, 1)[0] / reps


def run_stream(make, args):
    m, hidden = args.memory_size, (args.hidden,)
    rows = {}
    for seed in range(args.seeds):
        X, y, Xt, yt = make(seed, args)
        models = {
            f"ORFit-MLP pca (m={m})": ORFitMLPRegressor(hidden, memory_size=m, random_state=seed),
            f"ORFit-MLP latest (m={m})": ORFitMLPRegressor(
                hidden, memory_size=m, memory_policy="latest", random_state=seed),
            f"ORFit-MLP random (m={m})": ORFitMLPRegressor(
                hidden, memory_size=m, memory_policy="random", random_state=seed),
            "ORFit-MLP unlimited": ORFitMLPRegressor(hidden, random_state=seed),
            "ORFit-MLP one-step (m=0)": ORFitMLPRegressor(hidden, memory_size=0,
                                                          random_state=seed),
            f"linear ORFit (m={m})": ORFitRegressor(memory_size=m),
            "linear ORFit unlimited": ORFitRegressor(),
            "MLPRegressor.partial_fit, 1 pass": sklearn_mlp(hidden, seed),
        }
        for name, est in models.items():
            t = one_pass(est, X, y)
            rows.setdefault(name, []).append(
                (_rmse(est.predict(Xt), yt), abs(est.predict(X[TRACKED : TRACKED + 1])[0]
                                                 - y[TRACKED]), t))
        many = sklearn_mlp(hidden, seed)
        t = sum(one_pass(many, X, y) for _ in range(args.epochs))
        rows.setdefault(f"MLPRegressor.partial_fit, {args.epochs} passes", []).append(
            (_rmse(many.predict(Xt), yt), abs(many.predict(X[TRACKED : TRACKED + 1])[0]
                                              - y[TRACKED]), t))
        floor = floor_per_row(models[f"ORFit-MLP pca (m={m})"], X, m)
        rows.setdefault("floor: Jacobian + P×(m+1) product", []).append((np.nan, np.nan, floor))
        n_params = models["ORFit-MLP unlimited"].params_.size
        baseline = _rmse(np.full_like(yt, y.mean()), yt)
    return rows, n_params, X.shape, baseline


def report(title, rows, n_params, shape, baseline):
    """Print the table; returns it as JSON-ready rows (means over the seeds)."""
    table = []
    print(f"\n{title}: {shape[0]} rows × {shape[1]} features, network P = {n_params} "
          f"parameters; predicting the stream's mean: test RMSE {baseline:.3f}")
    print(f"{'method':42s} {'test RMSE':>10s} {'|error| on 11th':>16s} {'time/row':>10s}")
    for name, vals in rows.items():
        v = np.array(vals, dtype=float)
        rmse, forget, t = np.nanmean(v, axis=0) if not np.isnan(v[:, 0]).all() else (
            np.nan, np.nan, v[:, 2].mean())
        rm = "" if np.isnan(rmse) else f"{rmse:10.3f}"
        fg = "" if np.isnan(forget) else f"{forget:16.3f}"
        print(f"{name:42s} {rm:>10s} {fg:>16s} {t * 1e3:8.3f}ms")
        table.append({"method": name, "test_rmse": rmse, "error_on_11th": forget,
                      "ms_per_row": t * 1e3})
    return {"title": title, "n_rows": shape[0], "n_features": shape[1],
            "n_params": n_params, "baseline_rmse": baseline, "rows": table}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one seed, 20 passes")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--memory-size", type=int, default=10)
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--test-rotations", type=int, default=3)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--n-synth", type=int, default=200)
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs = 1, 20
    print(f"ORFit-MLP benchmark: hidden ({args.hidden},) tanh, m = {args.memory_size}, "
          f"{args.seeds} seeds, one BLAS thread")
    t0 = time.perf_counter()
    ctx, _ = blas_threads(1)
    with ctx, warnings.catch_warnings():
        header = machine_header()
        print(header_line(header))
        warnings.simplefilter("ignore", SpannedBatchWarning)
        warnings.simplefilter("ignore", ConvergenceWarning)
        tables = [
            report(f"Rotated digits ({args.size}×{args.size})",
                   *run_stream(digits_stream, args)),
            report("Nonlinear synthetic (5 features, drifting order)",
                   *run_stream(synthetic_stream, args)),
        ]
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_results("bench_orfit_mlp", {"settings": settings, "tables": tables}, args.out,
                  header=header)
    return tables


if __name__ == "__main__":
    main()
