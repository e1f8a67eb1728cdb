"""Numerical stability on a long overparameterised stream: covariance-form RLS vs QR-EWRLS.

Setting (ABO Appendix A and §3.3): ``D = 64`` features, inputs confined to a
generic rank-``r = 8`` subspace (``z_t = B c_t``, ``B`` a fixed Gaussian ``D×r`` matrix,
``c_t ~ N(0, I_r)``), targets ``y_t = sin(z_tᵀβ_a) + 0.5 z_tᵀβ_b + 0.05 ε_t``; window
``N = 20 < D``; forgetting factors ``λ ∈ {0.9, 0.99}``.

Estimators, each measured against its own from-scratch oracle at checkpoints:

* ``EWRLSRegressor(forgetting_factor=λ, delta=1e-2)`` — the covariance (``P``-matrix)
  form. Oracle: ``(Σ λ^(t−i) z_i z_iᵀ + λ^t δ I)⁻¹ Σ λ^(t−i) z_i y_i`` over the whole
  history, computed as ``lstsq([W½Z; √(λ^t δ) I], [W½y; 0])`` (rows with weight below
  ``1e-32`` dropped).
* ``QREWRLSRegressor(window_size=20, forgetting_factor=λ, solver="givens")`` — the ABO
  paper's recursion (Givens QR of the window, Greville/Cline pseudo-inverse updates).
* ``QREWRLSRegressor(window_size=20, forgetting_factor=λ)`` — the default ``"auto"``
  solver (each window solved afresh, nothing carried from one window to the next).
  Oracle of both: ``lstsq(W½Z_t, W½y_t)`` on the window (minimum norm: the window has
  rank ``r < N``).

Deviation = ``‖β_t − β_t*‖ / ‖β_t*‖``. In exact arithmetic the covariance form is exact;
in floating point its ``P`` grows like ``λ^(−t)/δ`` along the ``D − r`` unexcited
directions, and the rounding error of ``z_t`` outside the subspace (``~1e-16 ‖z_t‖``) is
amplified by it.

Regenerate with ``python benchmarks/bench_stability.py`` (20,000 rows) or
``python benchmarks/bench_stability.py --quick`` (3,000 rows). The figure goes to
``benchmarks/out/stability.png`` when matplotlib is installed.
"""

import argparse
import os
import time

import numpy as np

from sklearn_orfit import EWRLSRegressor, QREWRLSRegressor, prequential_predict
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, pyplot, save_figure, write_results,
)

D, RANK, WINDOW, DELTA = 64, 8, 20, 1e-2
LAMBDAS = (0.9, 0.99)
ESTIMATORS = {
    "EW-RLS (covariance form)": lambda lam: EWRLSRegressor(forgetting_factor=lam, delta=DELTA),
    "QR-EWRLS, Givens recursion": lambda lam: QREWRLSRegressor(
        WINDOW, forgetting_factor=lam, solver="givens"),
    "QR-EWRLS, auto": lambda lam: QREWRLSRegressor(WINDOW, forgetting_factor=lam),
}


def make_stream(n, seed):
    rng = np.random.default_rng(seed)
    B = rng.normal(size=(D, RANK))
    Z = rng.normal(size=(n, RANK)) @ B.T  # generic rows of a rank-r subspace of R^D
    beta_a, beta_b = rng.normal(size=(2, D)) / np.sqrt(D * RANK)
    y = np.sin(Z @ beta_a) + 0.5 * Z @ beta_b + 0.05 * rng.normal(size=n)
    return Z, y


def ewrls_oracle(Z, y, t, lam):
    """Closed-form EW-RLS after rows ``0 .. t−1``."""
    k = min(t, int(np.ceil(np.log(1e-32) / np.log(lam))))  # rows with weight ≥ 1e-32
    sw = np.sqrt(lam) ** np.arange(k - 1, -1, -1)
    ridge = np.sqrt(DELTA) * np.sqrt(lam) ** t
    A = np.vstack([Z[t - k : t] * sw[:, None], ridge * np.eye(D)])
    b = np.concatenate([y[t - k : t] * sw, np.zeros(D)])
    return np.linalg.lstsq(A, b, rcond=None)[0]


def window_oracle(Z, y, t, lam):
    """Minimum-norm weighted least squares on the window ending with row ``t−1``."""
    lo = max(0, t - WINDOW)
    sw = np.sqrt(lam) ** np.arange(t - lo - 1, -1, -1)
    return np.linalg.lstsq(Z[lo:t] * sw[:, None], y[lo:t] * sw, rcond=None)[0]


def run(n_rows, n_checkpoints, seed):
    Z, y = make_stream(n_rows, seed)
    checkpoints = np.unique(np.linspace(WINDOW, n_rows, n_checkpoints).astype(int))
    results = {}
    for lam in LAMBDAS:
        for name, make in ESTIMATORS.items():
            reg = make(lam)
            oracle = ewrls_oracle if name.startswith("EW-RLS") else window_oracle
            dev, err, p_norm = [], [], []
            t_prev, elapsed = 0, 0.0
            with np.errstate(over="ignore", invalid="ignore"):
                for t in checkpoints:
                    t0 = time.perf_counter()
                    try:
                        y_pred = prequential_predict(reg, Z[t_prev:t], y[t_prev:t])
                    except ValueError as exc:
                        # the recursion overflowed and refused the rows (the state stays
                        # at its last finite value): non-finite from here on
                        print(f"    refused at t ≤ {t}: {str(exc)[:70]}…", flush=True)
                        rest = checkpoints[checkpoints >= t]
                        dev += [np.inf] * rest.size
                        err.append(np.full(n_rows - t_prev, np.nan))
                        if hasattr(reg, "inverse_gram_"):
                            p_norm += [np.inf] * rest.size
                        break
                    elapsed += time.perf_counter() - t0
                    err.append(np.abs(y[t_prev:t] - y_pred))
                    beta_star = oracle(Z, y, t, lam)
                    dev.append(np.linalg.norm(reg.coef_ - beta_star) / np.linalg.norm(beta_star))
                    if hasattr(reg, "inverse_gram_"):
                        p_norm.append(np.max(np.abs(reg.inverse_gram_)))
                    t_prev = t
            dev = np.where(np.isfinite(dev), dev, np.inf)
            # how often the Givens recursion's drift probe recomputed R⁺ from R (a
            # safeguard that is not in the paper's Algorithm 1); private, so read defensively
            refreshes = getattr(getattr(getattr(reg, "_solver", None), "window", None), "n_refresh", None)
            results[(lam, name)] = dict(
                t=checkpoints, dev=dev, abs_err=np.concatenate(err), p_norm=np.array(p_norm),
                seconds=elapsed, refreshes=refreshes,
            )
            print(f"  λ={lam:<5} {name:<28} max deviation {np.max(dev):.2e}  "
                  f"({elapsed:.1f} s)", flush=True)
    return results


def first_exceeding(t, dev, level):
    idx = np.flatnonzero(dev > level)
    return str(t[idx[0]]) if idx.size else "never"


def summary(results):
    """One JSON-ready row per (λ, estimator): the numbers of the printed table."""
    rows = []
    for (lam, name), r in results.items():
        e = r["abs_err"][r["abs_err"].size // 2 :]
        rows.append({
            "lambda": lam, "estimator": name, "median_dev": float(np.median(r["dev"])),
            "max_dev": float(np.max(r["dev"])), "final_dev": float(r["dev"][-1]),
            "first_t_above_1e-6": first_exceeding(r["t"], r["dev"], 1e-6),
            "first_t_nonfinite": first_exceeding(r["t"], r["dev"], np.finfo(float).max),
            "mean_abs_err_last_half": float(np.mean(e)) if np.all(np.isfinite(e)) else None,
            "refreshes": r["refreshes"], "seconds": r["seconds"],
        })
    return rows


def print_table(results, n_rows):
    print(f"\n{n_rows} rows, D = {D}, rank {RANK}, N = {WINDOW}")
    print("| λ | estimator | median deviation | max deviation | final deviation | "
          "first t with deviation > 1e-6 | first t non-finite | prequential mean abs error "
          "(last half) | R⁺ refreshes |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for (lam, name), r in results.items():
        e = r["abs_err"][r["abs_err"].size // 2 :]
        mean_err = np.mean(e) if np.all(np.isfinite(e)) else float("nan")
        print(f"| {lam} | {name} | {np.median(r['dev']):.1e} | {np.max(r['dev']):.1e} | "
              f"{r['dev'][-1]:.1e} | {first_exceeding(r['t'], r['dev'], 1e-6)} | "
              f"{first_exceeding(r['t'], r['dev'], np.finfo(float).max)} | {mean_err:.3g} | "
              f"{'—' if r['refreshes'] is None else r['refreshes']} |")
    for lam in LAMBDAS:
        r = results[(lam, "EW-RLS (covariance form)")]
        n_finite = int(np.sum(np.isfinite(r["p_norm"])))
        if n_finite:
            t = r["t"][n_finite - 1]
            print(f"λ={lam}: EW-RLS max |P_ij| at t = {t} (last finite checkpoint): "
                  f"{r['p_norm'][n_finite - 1]:.2e}; λ^(−t)/δ = {lam ** -float(t) / DELTA:.2e}")


def plot(results, path):
    plt = pyplot()
    if plt is None:
        print("matplotlib not installed: no figure")
        return
    fig, axes = plt.subplots(1, len(LAMBDAS), figsize=(11, 4), sharey=True)
    for ax, lam in zip(axes, LAMBDAS):
        for name in ESTIMATORS:
            r = results[(lam, name)]
            dev = np.where(np.isfinite(r["dev"]), r["dev"], np.nan)
            ax.semilogy(r["t"], np.maximum(dev, 1e-17), label=name)
        ax.set_title(f"λ = {lam}: D = {D}, inputs of rank {RANK}, N = {WINDOW}")
        ax.set_xlabel("rows learned t")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("‖β_t − β_t*‖ / ‖β_t*‖ (own oracle)")
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    print(f"figure: {save_figure(fig, path, dpi=120)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3,000 rows (≤ 2 minutes)")
    parser.add_argument("--n-rows", type=int, default=None)
    parser.add_argument("--checkpoints", type=int, default=400)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    args = parser.parse_args(argv)
    n_rows = args.n_rows or (3000 if args.quick else 20_000)
    ctx, _ = blas_threads(args.threads)
    t0 = time.perf_counter()
    with ctx:
        header = machine_header()
        print(header_line(header))
        results = run(n_rows, args.checkpoints, args.seed)
    print_table(results, n_rows)
    name = "bench_stability_quick" if args.quick else "bench_stability"
    plot(results, os.path.join(args.out, name[6:] + ".png"))
    settings = {"n_rows": n_rows, "checkpoints": args.checkpoints, "seed": args.seed, "D": D,
                "rank": RANK, "window_size": WINDOW, "delta": DELTA, "lambdas": LAMBDAS,
                "blas_threads": args.threads, "quick": args.quick}
    write_results(name, {"settings": settings, "rows": summary(results)}, args.out,
                  header=header)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return results

if __name__ == "__main__":
    main()
