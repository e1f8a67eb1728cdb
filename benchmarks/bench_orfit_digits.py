"""ORFit on rotated digits (the ORFit paper's §5 experiment on scikit-learn data).

Images of the digit 2 from :func:`sklearn.datasets.load_digits`, rotated by an angle
``θ ~ U[0, π]`` with :func:`scipy.ndimage.rotate`; the target is ``θ`` (radians); the
model is linear on the pixels, ``f(x) = xᵀw``, from a random initial ``w₀``. For each
seed, 100 training images are streamed once, in order of increasing angle; the other
images of 2s, each rotated at ``--test-rotations`` random angles, are the test set.

* Memory ``m = 10``: ORFit (incremental-PCA memory), ORFit-latest, ORFit-random,
  One-step SGD (no memory) and greedy (predicts the last label) — the test RMSE after
  every step, and the error on one early training image (the 11th) as more are learned.
* No memory limit: ORFit's one pass against plain SGD (fixed step) run for many epochs
  from the same ``w₀`` (Theorem 4.2: SGD's limit is ORFit's one-pass solution).

The bundled images are 8×8 (64 pixels), fewer than the 100 training images; the paper
is about the overparameterised regime (MNIST, 784 pixels), so by default each image is
first resized to 28×28 (bilinear, :func:`scipy.ndimage.zoom`), then rotated. Pass
``--size 8`` for the raw resolution (underparameterised: the unlimited memory fills up
after 64 images).

Regenerate: ``python benchmarks/bench_orfit_digits.py`` (``--quick``: 3 seeds, 100
SGD epochs). Writes ``benchmarks/out/orfit_digits.png`` when matplotlib is installed.
"""

import argparse
import os
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import ndimage
from sklearn.datasets import load_digits

from sklearn_orfit import ORFitRegressor
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, pyplot, save_figure, write_results,
)
from sklearn_orfit.exceptions import SpannedBatchWarning

OUT = Path(__file__).parent / "out"
METHODS = ["ORFit (PCA)", "ORFit-latest", "ORFit-random", "One-step SGD", "Greedy"]
TRACKED = 10  # index of the training image whose error is tracked (the 11th)


def rotated_twos(images, angles, size):
    """Resize each 8×8 image to ``size×size`` and rotate it by its angle (radians)."""
    out = np.empty((len(images), size * size))
    for i, (img, a) in enumerate(zip(images, angles)):
        big = ndimage.zoom(img, size / 8, order=1) if size != 8 else img
        out[i] = ndimage.rotate(big, np.degrees(a), reshape=False, order=1).ravel()
    return out


def make_split(twos, seed, *, n_train, test_rotations, size):
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(twos))
    train_img, test_img = twos[order[:n_train]], twos[order[n_train:]]
    y_train = np.sort(rng.uniform(0, np.pi, n_train))  # streamed by increasing angle
    test_img = np.repeat(test_img, test_rotations, axis=0)
    y_test = rng.uniform(0, np.pi, len(test_img))
    X_train = rotated_twos(train_img, y_train, size)
    X_test = rotated_twos(test_img, y_test, size)
    p = X_train.shape[1]
    w0 = rng.uniform(-1, 1, p) / np.sqrt(p)  # the usual uniform init of a linear layer
    return X_train, y_train, X_test, y_test, w0


def stream(est, X, y, X_test, y_test):
    """Learn one row at a time; test RMSE and tracked-image error after every step."""
    n = len(y)
    rmse, tracked = np.empty(n), np.empty(n)
    est.partial_fit(X[:1], y[:1])
    for t in range(n):
        if t:
            est.learn_one(X[t], y[t])
        rmse[t] = np.sqrt(np.mean((X_test @ est.coef_ - y_test) ** 2))
        tracked[t] = abs(X[TRACKED] @ est.coef_ - y[TRACKED])
    return rmse, tracked


def greedy(y, y_test):
    rmse = np.sqrt(np.mean((y[:, None] - y_test[None, :]) ** 2, axis=1))
    return rmse, np.abs(y - y[TRACKED])


def sgd_epochs(X, y, w0, *, epochs, checkpoints, X_test, y_test):
    """Plain SGD, fixed step ``0.5 / max‖x‖²``, cyclic order; metrics at checkpoints."""
    eta = 0.5 / np.max(np.einsum("ij,ij->i", X, X))
    w = w0.copy()
    out = {}
    for e in range(1, epochs + 1):
        for x_i, y_i in zip(X, y):
            w -= (eta * (x_i @ w - y_i)) * x_i
        if e in checkpoints:
            out[e] = (w.copy(), _rmse(X @ w, y), _rmse(X_test @ w, y_test))
    return eta, out


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


def run(args):
    digits = load_digits()
    twos = digits.images[digits.target == 2] / 16.0
    checkpoints = sorted({10**k for k in range(7) if 10**k <= args.epochs} | {args.epochs})
    curves = {name: [] for name in METHODS}
    tracked = {name: [] for name in METHODS}
    unlimited = {k: [] for k in ["ORFit", "One-step SGD", *[f"SGD {e}" for e in checkpoints]]}
    sgd_test_curve = []
    n_spanned_warnings = 0
    for seed in range(args.seeds):
        X, y, Xt, yt, w0 = make_split(
            twos, seed, n_train=args.n_train, test_rotations=args.test_rotations, size=args.size
        )
        m = args.memory_size
        models = {
            "ORFit (PCA)": ORFitRegressor(memory_size=m, coef_init=w0),
            "ORFit-latest": ORFitRegressor(memory_size=m, memory_policy="latest", coef_init=w0),
            "ORFit-random": ORFitRegressor(
                memory_size=m, memory_policy="random", coef_init=w0, random_state=seed
            ),
            "One-step SGD": ORFitRegressor(memory_size=0, coef_init=w0),
        }
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", SpannedBatchWarning)
            for name, est in models.items():
                c, e = stream(est, X, y, Xt, yt)
                curves[name].append(c)
                tracked[name].append(e)
            full = ORFitRegressor(coef_init=w0).fit(X, y)
        n_spanned_warnings += len(caught)
        c, e = greedy(y, yt)
        curves["Greedy"].append(c)
        tracked["Greedy"].append(e)

        w_orfit = full.coef_
        unlimited["ORFit"].append((0.0, _rmse(X @ w_orfit, y), _rmse(Xt @ w_orfit, yt)))
        w_one = models["One-step SGD"].coef_
        unlimited["One-step SGD"].append(
            (_dist(w_one, w_orfit, w0), _rmse(X @ w_one, y), _rmse(Xt @ w_one, yt))
        )
        eta, res = sgd_epochs(
            X, y, w0, epochs=args.epochs, checkpoints=set(checkpoints), X_test=Xt, y_test=yt
        )
        for ep, (w, tr, te) in res.items():
            unlimited[f"SGD {ep}"].append((_dist(w, w_orfit, w0), tr, te))
        sgd_test_curve.append([res[ep][2] for ep in checkpoints])
    return dict(
        curves={k: np.array(v) for k, v in curves.items()},
        tracked={k: np.array(v) for k, v in tracked.items()},
        unlimited={k: np.array(v) for k, v in unlimited.items()},
        checkpoints=checkpoints,
        sgd_test_curve=np.array(sgd_test_curve),
        n_pixels=X.shape[1],
        n_test=len(yt),
        n_spanned_warnings=n_spanned_warnings,
        eta=eta,
    )


def _dist(w, w_ref, w0):
    """Distance to ORFit's solution, relative to how far that solution moved from w₀."""
    return float(np.linalg.norm(w - w_ref) / np.linalg.norm(w_ref - w0))


def summary(res):
    """The printed tables as JSON-ready rows: mean and std over the seeds."""

    def ms(v):
        return {"mean": float(np.mean(v)), "std": float(np.std(v))}

    memory = []
    for name in METHODS:
        c, e = res["curves"][name], res["tracked"][name]
        memory.append({"method": name, "test_rmse_end": ms(c[:, -1]),
                       "test_rmse_mean": ms(c.mean(axis=1)), "img11_end": ms(e[:, -1]),
                       "img11_max_after": ms(e[:, TRACKED:].max(axis=1))})
    unlimited = [{"method": name, "dist_to_orfit": ms(v[:, 0]), "train_rmse": ms(v[:, 1]),
                  "test_rmse": ms(v[:, 2])} for name, v in res["unlimited"].items()]
    return {"memory": memory, "unlimited": unlimited, "n_pixels": res["n_pixels"],
            "n_test": res["n_test"], "n_spanned_warnings": res["n_spanned_warnings"]}


def report(res, args):
    curves, tracked = res["curves"], res["tracked"]
    print(
        f"Rotated 2s from load_digits: {args.size}×{args.size} = {res['n_pixels']} pixels, "
        f"{args.n_train} training images streamed by increasing angle, "
        f"{res['n_test']} test images, memory m = {args.memory_size}, {args.seeds} seeds "
        f"(mean ± std over seeds; RMSE in radians)"
    )
    print()
    head = (
        f"{'method':<15}{'test RMSE end':>18}{'mean over stream':>18}"
        f"{'img-11 err end':>18}{'img-11 max after':>18}"
    )
    print(head)
    for name in METHODS:
        c, e = curves[name], tracked[name]
        after = e[:, TRACKED:].max(axis=1)
        print(
            f"{name:<15}{_ms(c[:, -1]):>18}{_ms(c.mean(axis=1)):>18}"
            f"{_ms(e[:, -1]):>18}{_ms(after):>18}"
        )
    print()
    print("No memory limit: one pass of ORFit vs plain SGD for many epochs from the same w₀")
    print(f"(SGD step {res['eta']:.3g} = 0.5 / max‖x‖², last seed; "
          "‖w − w_ORFit‖ relative to ‖w_ORFit − w₀‖)")
    print(f"{'method':<15}{'dist to ORFit':>18}{'train RMSE':>18}{'test RMSE':>18}")
    for name, v in res["unlimited"].items():
        label = name if not name.startswith("SGD") else f"SGD {name[4:]} ep."
        print(f"{label:<15}{_ms(v[:, 0]):>18}{_ms(v[:, 1]):>18}{_ms(v[:, 2]):>18}")
    if res["n_spanned_warnings"]:
        print(f"\n{res['n_spanned_warnings']} SpannedBatchWarning(s) raised")


def _ms(v):
    return f"{np.mean(v):.3f} ± {np.std(v):.3f}"


def plot(res, args):
    plt = pyplot()
    if plt is None:
        print("matplotlib not installed: no figure")
        return None
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    steps = np.arange(1, res["curves"][METHODS[0]].shape[1] + 1)
    for name in METHODS:
        for ax, data in ((axes[0], res["curves"][name]), (axes[1], res["tracked"][name])):
            mu, sd = data.mean(axis=0), data.std(axis=0)
            ax.plot(steps, mu, label=name)
            ax.fill_between(steps, mu - sd, mu + sd, alpha=0.2)
    axes[0].set(xlabel="training images learned", ylabel="test RMSE (rad)",
                title=f"(a) test error, m = {args.memory_size}")
    axes[1].axvline(TRACKED + 1, color="k", lw=0.5, ls=":")
    axes[1].set(xlabel="training images learned", ylabel="|error| (rad)",
                title="(b) error on the 11th training image")
    axes[0].legend()
    ep = res["checkpoints"]
    sgd = res["sgd_test_curve"]
    axes[2].errorbar(ep, sgd.mean(axis=0), yerr=sgd.std(axis=0), marker="o", label="SGD")
    orfit = res["unlimited"]["ORFit"][:, 2].mean()
    one = res["unlimited"]["One-step SGD"][:, 2].mean()
    axes[2].axhline(orfit, color="C0", ls="--", label="ORFit, one pass")
    axes[2].axhline(one, color="C3", ls=":", label="One-step SGD, one pass")
    axes[2].set(xscale="log", xlabel="SGD epochs", ylabel="test RMSE (rad)",
                title="(c) no memory limit: ORFit vs multi-pass SGD")
    axes[2].legend()
    fig.tight_layout()
    path = save_figure(fig, os.path.join(args.out, "orfit_digits.png"), dpi=110)
    print(f"figure: {path}")
    return path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--memory-size", type=int, default=10)
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--test-rotations", type=int, default=5)
    parser.add_argument("--size", type=int, default=28, help="image side after resizing")
    parser.add_argument("--epochs", type=int, default=1000)
    parser.add_argument("--quick", action="store_true", help="3 seeds, 100 SGD epochs")
    parser.add_argument("--out", default=str(OUT) if __name__ == "__main__" else None,
                        help="folder of the figure and the results' JSON (default "
                             "benchmarks/out)")
    args = parser.parse_args(argv)
    if args.quick:
        args.seeds, args.epochs = 3, 100
    t0 = time.perf_counter()
    ctx, _ = blas_threads(1)
    with ctx:
        header = machine_header()
        print(header_line(header))
        res = run(args)
    report(res, args)
    if args.out:
        plot(res, args)
    settings = {k: v for k, v in vars(args).items() if k != "out"}
    write_results("bench_orfit_digits", {"settings": settings, **summary(res)}, args.out,
                  header=header)
    print(f"({time.perf_counter() - t0:.1f} s)")
    return res


if __name__ == "__main__":
    main()
