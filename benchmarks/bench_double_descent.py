"""Double descent of ABO on the paper's synthetic series (ABO paper §3.7, Tables 2–4).

Setting: ``x_t = 2x_{t−1}/(1 + 0.8x_{t−1}²) + ε_t`` (``make_abo_series``), recursively
standardised (each value with the mean and standard deviation of the values before it),
7 lags (``make_lagged``), random Fourier features ``RandomFourierFeatures(D, sigma=1)``,
``QREWRLSRegressor(window_size=20, forgetting_factor=λ)`` for ``λ ∈ {1, 0.9}`` and
``D ∈ {2¹ … 2¹⁴} ∪ {N = 20}``. The rows before the last ``--n-updates`` ones warm the
window up; the last ``--n-updates`` rows are learned prequentially
(``sklearn_orfit.prequential_predict``).

Reported per ``(λ, D)``:

* test — ``|y_t − ŷ_t|`` of the prequential predictions: mean and sample variance;
* train — ``|y_i − z_iᵀβ_t|`` for the 20 rows ``i`` of the window after each update
  ``t`` (pooled over rows and updates): mean and sample variance;
* κ — the condition number ``σ_max/σ_min`` of the weighted window ``W½Z_t`` after each
  update: mean and sample variance (and the median, which the heavy tail near
  ``D = N`` makes more telling).

Train residuals and κ are recomputed from each window in this script (SVD of the window
for ``D ≤ 64``, around the threshold; eigen-decomposition of its ``20×20`` Gram matrix
above, where the windows are well conditioned: the ``κ max`` column bounds the squaring
of the condition number by the Gram route). The last window is
cross-checked against the estimator's ``coef_`` and ``condition_number_``.

Regenerate with ``python benchmarks/bench_double_descent.py`` (full, 10,000 updates,
``D`` up to ``2¹⁴``) or ``python benchmarks/bench_double_descent.py --quick`` (2,000
updates, ``D`` up to ``2¹¹``). The figure goes to ``benchmarks/out/double_descent.png``
when matplotlib is installed.
"""

import argparse
import os
import time

import numpy as np

from sklearn_orfit import (
    QREWRLSRegressor, RandomFourierFeatures, RecursiveStandardScaler, prequential_predict,
)
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, pyplot, save_figure, write_results,
)
from sklearn_orfit.datasets import make_abo_series, make_lagged

N_LAGS = 7
WINDOW = 20
SIGMA = 1.0
LAMBDAS = (1.0, 0.9)
CHUNK = 1000  # rows per feature-map chunk (bounds memory to CHUNK × D numbers)
SVD_MAX_D = 64


def window_stats(Z, y, *, lam):
    """Train residuals and condition numbers of every window of ``Z`` (rows oldest first).

    Window ``j`` is rows ``j .. j+N−1``; returns ``(abs_residuals (n_win, N), kappa
    (n_win,), last_beta (D,))``.
    """
    n_win, D = Z.shape[0] - WINDOW + 1, Z.shape[1]
    sw = np.sqrt(lam) ** np.arange(WINDOW - 1, -1, -1)
    res = np.empty((n_win, WINDOW))
    kappa = np.empty(n_win)
    last_beta = None
    step = 256
    for j0 in range(0, n_win, step):
        j1 = min(j0 + step, n_win)
        rows = j0 + np.arange(j1 - j0)[:, None] + np.arange(WINDOW)[None, :]  # (b, N)
        yw = y[rows] * sw  # W½ y
        if D <= SVD_MAX_D:
            A = Z[rows] * sw[None, :, None]  # W½ Z, (b, N, D)
            U, s, Vt = np.linalg.svd(A, full_matrices=False)
        else:
            # G = W½ Z Zᵀ W½ from the local Gram of the rows involved
            lo, hi = j0, j1 + WINDOW - 1
            Gl = Z[lo:hi] @ Z[lo:hi].T
            loc = rows - lo
            G = Gl[loc[:, :, None], loc[:, None, :]] * np.outer(sw, sw)[None]
            ev, V = np.linalg.eigh(G)
            order = np.argsort(ev, axis=1)[:, ::-1]
            ev = np.take_along_axis(ev, order, axis=1)
            U = np.take_along_axis(V, order[:, None, :], axis=2)
            s = np.sqrt(np.clip(ev, 0.0, None))
        # numpy.linalg.lstsq's cut-off for the minimum-norm solution
        cut = np.finfo(np.float64).eps * max(WINDOW, D) * s[:, :1]
        keep = s > cut
        Uk = U * keep[:, None, :]
        fitted = np.einsum("bnk,bk->bn", Uk, np.einsum("bnk,bn->bk", Uk, yw))
        res[j0:j1] = np.abs(yw - fitted) / sw
        kappa[j0:j1] = s[:, 0] / np.where(s[:, -1] > 0, s[:, -1], np.nan)
        if j1 == n_win:
            A_last = Z[rows[-1]] * sw[:, None]
            last_beta = np.linalg.lstsq(A_last, yw[-1], rcond=None)[0]
    return res, kappa, last_beta


def run(n_updates, dims, seed):
    series = make_abo_series(n_updates + 500, random_state=seed)
    # each value standardised with the values before it; the first two only feed the
    # statistics (a standard deviation needs two values)
    z = RecursiveStandardScaler().prequential_transform(series[:, None])[:, 0]
    X, y = make_lagged(z[2:], N_LAGS)
    n_warm = X.shape[0] - n_updates
    rows = []
    preds = {}
    for D in dims:
        rff = RandomFourierFeatures(n_components=D, sigma=SIGMA, random_state=seed).fit(X[:1])
        regs = {lam: QREWRLSRegressor(window_size=WINDOW, forgetting_factor=lam) for lam in LAMBDAS}
        Z_warm = rff.transform(X[:n_warm])
        for reg in regs.values():
            reg.partial_fit(Z_warm, y[:n_warm])
        tail = Z_warm[-(WINDOW - 1) :]  # the rows a window ending in the next chunk needs
        stats = {lam: {"test": [], "train": [], "kappa": [], "time": 0.0} for lam in LAMBDAS}
        for c0 in range(n_warm, X.shape[0], CHUNK):
            c1 = min(c0 + CHUNK, X.shape[0])
            Zc = rff.transform(X[c0:c1])
            Zext = np.concatenate([tail, Zc])
            yext = y[c0 - (WINDOW - 1) : c1]
            for lam, reg in regs.items():
                t0 = time.perf_counter()
                y_pred = prequential_predict(reg, Zc, y[c0:c1])
                stats[lam]["time"] += time.perf_counter() - t0
                stats[lam]["test"].append(np.abs(y[c0:c1] - y_pred))
                preds.setdefault((lam, D), []).append(y_pred)
                res, kappa, last_beta = window_stats(Zext, yext, lam=lam)
                stats[lam]["train"].append(res.ravel())
                stats[lam]["kappa"].append(kappa)
                stats[lam]["last_beta"] = last_beta
            tail = Zext[-(WINDOW - 1) :]
        for lam, reg in regs.items():
            last_beta = stats[lam].pop("last_beta")
            st = {k: np.concatenate(v) if k != "time" else v for k, v in stats[lam].items()}
            # cross-checks against the estimator's own state (last window)
            coef_dev = np.linalg.norm(reg.coef_ - last_beta) / np.linalg.norm(last_beta)
            kappa_dev = abs(reg.condition_number_ - st["kappa"][-1]) / st["kappa"][-1]
            rows.append(dict(
                lam=lam, D=D,
                train_mean=st["train"].mean(), train_var=st["train"].var(ddof=1),
                test_mean=st["test"].mean(), test_var=st["test"].var(ddof=1),
                kappa_mean=np.nanmean(st["kappa"]), kappa_var=np.nanvar(st["kappa"], ddof=1),
                kappa_median=np.nanmedian(st["kappa"]), kappa_max=np.nanmax(st["kappa"]),
                us_per_update=1e6 * st["time"] / n_updates,
                n_orth=reg.n_orthogonal_windows_, coef_dev=coef_dev, kappa_dev=kappa_dev,
            ))
            print(f"  λ={lam:<4} D={D:<6} test mean {rows[-1]['test_mean']:.4g}  "
                  f"κ median {rows[-1]['kappa_median']:.3g}  "
                  f"{rows[-1]['us_per_update']:.0f} µs/update", flush=True)
    preds = {k: np.concatenate(v) for k, v in preds.items()}
    return rows, preds


def print_tables(rows, preds, dims):
    """Print the tables; returns the largest relative difference between the λ's
    predictions for D > N (NaN without such D)."""
    for lam in LAMBDAS:
        print(f"\nλ = {lam}  (N = {WINDOW}, σ = {SIGMA})")
        print("| D | train mean | train var | test mean | test var | κ mean | κ var | "
              "κ median | κ max | µs/update | orth. windows | ‖β−β*‖/‖β*‖ (last) |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for r in sorted((r for r in rows if r["lam"] == lam), key=lambda r: r["D"]):
            mark = "**" if r["D"] == WINDOW else ""
            print(f"| {mark}{r['D']}{mark} | {r['train_mean']:.3g} | {r['train_var']:.3g} | "
                  f"{r['test_mean']:.4g} | {r['test_var']:.4g} | {r['kappa_mean']:.3g} | "
                  f"{r['kappa_var']:.3g} | {r['kappa_median']:.3g} | {r['kappa_max']:.3g} | "
                  f"{r['us_per_update']:.0f} | {r['n_orth']} | {r['coef_dev']:.1e} |")
    over = [D for D in dims if D > WINDOW]
    if over:
        dev = max(
            np.max(np.abs(preds[(1.0, D)] - preds[(0.9, D)])) / np.max(np.abs(preds[(1.0, D)]))
            for D in over
        )
        print(f"\nλ-independence for D > N (min-norm identity): max relative |ŷ(λ=1) − ŷ(λ=0.9)| "
              f"= {dev:.2e} over D ∈ {over[0]}…{over[-1]}")
        return float(dev)
    return float("nan")


def plot(rows, path):
    plt = pyplot()
    if plt is None:
        print("matplotlib not installed: no figure")
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for lam, style in zip(LAMBDAS, ("o-", "s--")):
        rs = sorted((r for r in rows if r["lam"] == lam), key=lambda r: r["D"])
        D = [r["D"] for r in rs]
        axes[0].loglog(D, [r["test_mean"] for r in rs], style, label=f"λ={lam}")
        axes[1].loglog(D, [r["kappa_median"] for r in rs], style, label=f"median κ, λ={lam}")
    for ax in axes:
        ax.axvline(WINDOW, color="k", ls=":", label=f"interpolation threshold D = N = {WINDOW}")
        ax.set_xlabel("number of random features D")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel("mean |y_t − ŷ_t| (prequential, test)")
    axes[0].set_title("ABO series: test error (train error: see the table)")
    axes[1].set_ylabel("condition number of W½Z (window)")
    axes[1].set_title("window conditioning")
    axes[0].legend(fontsize=7)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    print(f"figure: {save_figure(fig, path, dpi=120)}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="2,000 updates, D up to 2^11 (≤ 2 minutes)")
    parser.add_argument("--n-updates", type=int, default=None)
    parser.add_argument("--max-log2-d", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    parser.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "out"))
    args = parser.parse_args(argv)
    n_updates = args.n_updates or (2000 if args.quick else 10_000)
    max_log2 = args.max_log2_d or (11 if args.quick else 14)
    dims = sorted({2**k for k in range(1, max_log2 + 1)} | {WINDOW})
    ctx, _ = blas_threads(args.threads)
    t0 = time.perf_counter()
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(f"{n_updates} prequential updates, D ∈ {dims}, seed {args.seed}")
        rows, preds = run(n_updates, dims, args.seed)
    identity = print_tables(rows, preds, dims)
    name = "bench_double_descent_quick" if args.quick else "bench_double_descent"
    plot(rows, os.path.join(args.out, name[6:] + ".png"))
    settings = {"n_updates": n_updates, "dims": dims, "seed": args.seed, "window_size": WINDOW,
                "n_lags": N_LAGS, "sigma": SIGMA, "lambdas": LAMBDAS,
                "blas_threads": args.threads, "quick": args.quick}
    write_results(name, {"settings": settings, "rows": rows, "lambda_identity": identity},
                  args.out, header=header)
    print(f"total {time.perf_counter() - t0:.0f} s")
    return rows

if __name__ == "__main__":
    main()
