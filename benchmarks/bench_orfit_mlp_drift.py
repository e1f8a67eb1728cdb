"""The drift of past fits of ORFit-MLP on the rotated-digits stream, step by step.

The stream of ``bench_orfit_digits.py`` (images of the digit 2 from
:func:`sklearn.datasets.load_digits`, resized to ``--size``² pixels, rotated by
``θ ~ U[0, π]``, ``--n-train`` of them streamed once by increasing angle, one row per
call; the target is ``θ``; the other images of 2s at ``--test-rotations`` random angles
are the test set), learned by ``ORFitMLPRegressor((--hidden,))`` with every memory policy
(``m = --memory-size`` directions as incremental PCA, latest or random, unlimited, and
``memory_size=0``) and by linear ``ORFitRegressor`` on the pixels with the same memories.

After every step ``t`` (row ``t`` learned, parameters ``w_{t−1} → w_t``) it measures, on
the points seen before (``i < t``):

* ``err seen``: the mean ``|f(x_i; w_t) − y_i|`` (each was fitted exactly, to first order,
  when learned: this is the drift of the past fits);
* ``span``: the mean fraction ``‖B g_i‖ / ‖g_i‖`` of each stored gradient
  ``g_i = ∇f_i(w_{i−1})`` that the memory ``B`` (``components_``) still spans;
  ``err kept`` (``n kept``): the mean error on the *remembered* points, those with
  ``span ≥ 0.99``; the other points have been (partly) dropped by a bounded memory;
* ``cos``: the mean cosine between the stored gradient ``∇f_i(w_{i−1})`` and the current
  one ``∇f_i(w_t)`` (1: the linearisation is still fresh);
* the change of every past prediction by the step, ``f_i(w_t) − f_i(w_{t−1})``, split as

  - ``lost = ∇f_i(w_{i−1})ᵀ Δw``: zero while the memory spans the stored gradient
    (first order in the step: what a bounded memory gives up),
  - ``stale = (∇f_i(w_{t−1}) − ∇f_i(w_{i−1}))ᵀ Δw``: the staleness of the stored
    linearisation (second order: the parameters moved since the point was learned),
  - ``curv``: the rest, the curvature within the step;

  summed over the stream per point; the columns give the mean ``|·|`` of each sum over the
  seen points (the three add up, point by point, to the drift of its prediction since it
  was learned).

At the end, per method: the test RMSE, against predicting the stream's mean; the standard
deviation of the test predictions (a network that predicts one value for every input has
0) and the mean test prediction minus the last training angle. For reference, four steps
that *store the rows* instead of a memory of gradients (see :func:`relinearised`): the
gradients of the last ``m`` rows, or of all, taken afresh at the current parameters.

Regenerate: ``python benchmarks/bench_orfit_mlp_drift.py`` (about two minutes for 3
seeds on one core; ``--steps`` prints the step-by-step tables of the first seed,
``--seeds 10`` the 10-seed summary, ``--damping 0.1`` scales every ORFit-MLP step by a
tenth, ``--standardise`` learns the targets standardised by the whole stream's mean and
deviation).
"""

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.base import clone
from sklearn.datasets import load_digits

from sklearn_orfit import ORFitMLPRegressor, ORFitRegressor
from sklearn_orfit.exceptions import SpannedBatchWarning

sys.path.insert(0, str(Path(__file__).parent))
from bench_orfit_digits import make_split  # noqa: E402  (the stream of the linear benchmark)

KEPT = 0.99  # a point is remembered while the memory spans this much of its stored gradient


class _MLP:
    """``f``, ``∇f`` and the parameters of an ORFitMLPRegressor (one output)."""

    def __init__(self, est):
        self.est = est

    def initial(self, X):
        """The parameters the stream starts from (those ``fit`` would draw)."""
        # a copy started on the same stream: its network evaluates f and ∇f at any w
        self.net = clone(self.est)
        self.net._init_state(X.shape[1], 1, True)
        return self.net.params_.copy()

    def params(self):
        return self.est.params_.copy()

    def predict(self, X, w):
        return self.net._forward(X, w)[-1][:, 0]

    def grad(self, X, w):
        return self.net._jacobian(self.net._forward(X, w), w)


class _Linear(_MLP):
    """The same for ORFitRegressor: ``f(x; w) = xᵀw`` from ``w₀ = 0``, ``∇f = x``."""

    def initial(self, X):
        return np.zeros(X.shape[1])

    def params(self):
        return np.ravel(self.est.coef_).copy()

    def predict(self, X, w):
        return X @ w

    def grad(self, X, w):
        return X


class _DampedMLP(ORFitMLPRegressor):
    """ORFit-MLP with every step scaled by ``_damping`` (the memory is updated as usual):
    the new row is then fitted only in part, and the rest of its residual is left to the
    next steps. ``_damping = 1`` is ORFitMLPRegressor's step, bit for bit."""

    _damping = 1.0

    def _direction(self, Xb, Yb):
        dw, J, P, step = super()._direction(Xb, Yb)
        return self._damping * dw, J, P, step


def methods(seed, *, hidden, m, damping=1.0):
    mlp = dict(hidden_layer_sizes=(hidden,), random_state=seed)
    tag = "" if damping == 1 else f" ×{damping:g}"

    def net(**params):
        est = _DampedMLP(**mlp, **params)
        est._damping = damping
        return _MLP(est)

    return {
        f"MLP pca m={m}{tag}": net(memory_size=m),
        f"MLP latest m={m}{tag}": net(memory_size=m, memory_policy="latest"),
        f"MLP random m={m}{tag}": net(memory_size=m, memory_policy="random"),
        f"MLP unlimited{tag}": net(),
        f"MLP m=0{tag}": net(memory_size=0),
        f"linear pca m={m}": _Linear(ORFitRegressor(memory_size=m)),
        f"linear latest m={m}": _Linear(ORFitRegressor(memory_size=m, memory_policy="latest")),
        f"linear random m={m}": _Linear(ORFitRegressor(memory_size=m, memory_policy="random",
                                                       random_state=seed)),
        "linear unlimited": _Linear(ORFitRegressor()),
    }


def stream(model, X, y):
    """Learn ``X`` one row per call; the drift measurements after every step."""
    n, est = len(y), model.est
    w_old = model.initial(X)
    G0 = np.empty((n, w_old.size))  # ∇f_i(w_{i−1}): the gradient stored for point i
    lost, stale, curv = np.zeros(n), np.zeros(n), np.zeros(n)
    f_learned = np.empty(n)  # f_i(w_i), right after point i was learned
    steps = []
    for t in range(n):
        G_old = model.grad(X[: t + 1], w_old)  # ∇f_i(w_{t−1}), i ≤ t
        f_old = model.predict(X[:t], w_old)
        G0[t] = G_old[t]  # the gradient the step uses, and the memory stores
        est.partial_fit(X[t : t + 1], y[t : t + 1])
        w = model.params()
        dw = w - w_old
        w_old = w
        f_learned[t] = model.predict(X[t : t + 1], w)[0]
        if not t:
            continue
        f = model.predict(X[:t], w)
        lin_lost = G0[:t] @ dw
        lin_now = G_old[:t] @ dw
        lost[:t] += lin_lost
        stale[:t] += lin_now - lin_lost
        curv[:t] += (f - f_old) - lin_now
        B = est.components_
        norms = np.linalg.norm(G0[:t], axis=1)
        span = (np.linalg.norm(G0[:t] @ B.T, axis=1) / norms if B.shape[0]
                else np.zeros(t))
        kept = span >= KEPT
        G_now = model.grad(X[:t], w)
        cos = np.einsum("ij,ij->i", G0[:t], G_now) / (norms * np.linalg.norm(G_now, axis=1))
        err = np.abs(f - y[:t])
        steps.append(dict(
            t=t, step=float(np.linalg.norm(dw)), err_seen=float(err.mean()),
            span=float(span.mean()), n_kept=int(kept.sum()),
            err_kept=float(err[kept].mean()) if kept.any() else np.nan,
            cos=float(cos.mean()), lost=float(np.abs(lost[:t]).mean()),
            stale=float(np.abs(stale[:t]).mean()), curv=float(np.abs(curv[:t]).mean()),
            # the three parts add up to each point's drift since it was learned
            check=float(np.abs(lost[:t] + stale[:t] + curv[:t] - (f - f_learned[:t])).max()),
        ))
    return steps


def run(args):
    digits = load_digits()
    twos = digits.images[digits.target == 2] / 16.0
    per_seed = []
    tables = {}
    for seed in range(args.seeds):
        X, y, Xt, yt, _ = make_split(twos, seed, n_train=args.n_train,
                                     test_rotations=args.test_rotations, size=args.size)
        row = {"mean predictor": _rmse(np.full_like(yt, y.mean()), yt)}
        # --standardise: learn (y − ȳ)/s (the whole stream's mean and deviation, known
        # in advance: more than a stream can know), predict back in radians
        mu, sd = (y.mean(), y.std()) if args.standardise else (0.0, 1.0)
        y_fit = (y - mu) / sd

        def record(name, pred):
            pred = pred * sd + mu
            row[name] = _rmse(pred, yt)
            row[name + " | std of test predictions"] = float(pred.std())
            row[name + " | mean test prediction - last angle"] = float(pred.mean() - y[-1])

        for name, model in methods(seed, hidden=args.hidden, m=args.memory_size,
                                   damping=args.damping).items():
            steps = stream(model, X, y_fit)
            record(name, model.est.predict(Xt))
            row[name + " | end"] = steps[-1]
            if seed == 0:
                tables[name] = steps
        for name, window, correct in _references(args.memory_size):
            record(name, relinearised(X, y_fit, Xt, seed=seed, hidden=args.hidden,
                                      window=window, correct=correct))
        per_seed.append(row)
    return per_seed, tables


def _references(m):
    return [
        (f"relin. last {m} rows", m, False),
        (f"relin.+fix last {m}", m, True),
        ("relin. all rows", None, False),
        ("relin.+fix all rows", None, True),
    ]


def relinearised(X, y, Xt, *, seed, hidden, window, correct):
    """Reference steps that *store the rows* (not ORFit's memory): before each step the
    gradients of the stored rows (the ``window`` latest, or all) are taken afresh at the
    current parameters, and the minimum-norm step keeps their current predictions to first
    order (``correct=False``: the re-linearised ORFit step) or brings them back to their
    targets (``correct=True``: a Gauss–Newton step on the stored rows and the new one).
    Test predictions at the end."""
    net = ORFitMLPRegressor((hidden,), random_state=seed)
    net._init_state(X.shape[1], 1, True)
    w = net.params_.copy()
    for t in range(len(y)):
        rows = slice(0 if window is None else max(0, t - window), t + 1)
        acts = net._forward(X[rows], w)
        J, r = net._jacobian(acts, w), acts[-1][:, 0] - y[rows]
        if not correct:
            r[:-1] = 0.0
        w = w - J.T @ np.linalg.lstsq(J @ J.T, r, rcond=None)[0]
    return net._forward(Xt, w)[-1][:, 0]


def _rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)))


_STEP_COLUMNS = [("t", "t", "{:4d}", 4), ("|Δw|", "step", "{:7.3f}", 7),
                 ("err seen", "err_seen", "{:9.3f}", 9), ("span", "span", "{:6.3f}", 6),
                 ("n kept", "n_kept", "{:7d}", 7), ("err kept", "err_kept", "{:9.3f}", 9),
                 ("cos", "cos", "{:6.3f}", 6), ("lost", "lost", "{:7.3f}", 7),
                 ("stale", "stale", "{:7.3f}", 7), ("curv", "curv", "{:7.3f}", 7)]


def _mean(per_seed, key):
    return float(np.mean([r[key] for r in per_seed]))


def report(per_seed, tables, args):
    print(f"Rotated digits {args.size}×{args.size}, {args.n_train} training images by "
          f"increasing angle, one row per call; hidden ({args.hidden},) tanh, "
          f"m = {args.memory_size}; {args.seeds} seed(s), RMSE in radians"
          + ("" if args.damping == 1 else f"; ORFit-MLP steps × {args.damping:g}")
          + ("; standardised targets" if args.standardise else ""))
    if args.steps:
        for name, steps in tables.items():
            print(f"\n{name} (seed 0): after step t, on the points seen before")
            print(" ".join(f"{head:>{width}}" for head, _, _, width in _STEP_COLUMNS))
            for s in steps:
                if s["t"] % args.every == 0 or s["t"] == len(steps):
                    print(" ".join(fmt.format(s[key]) for _, key, fmt, _ in _STEP_COLUMNS))
    print("\nEnd of the stream, mean over seeds (test RMSE per seed in brackets); the drift "
          "columns on the seen points")
    print(f"{'method':<22} {'test RMSE':>9} {'pred std':>8} {'mean-last':>9} "
          f"{'err seen':>8} {'span':>6} {'cos':>6} {'lost':>6} {'stale':>6} {'curv':>6}")
    for name in [k for k in per_seed[0] if "|" not in k]:
        line = f"{name:<22} {_mean(per_seed, name):9.3f}"
        if name != "mean predictor":
            line += (f" {_mean(per_seed, name + ' | std of test predictions'):8.3f}"
                     f" {_mean(per_seed, name + ' | mean test prediction - last angle'):9.3f}")
        if name + " | end" in per_seed[0]:
            for key in ("err_seen", "span", "cos", "lost", "stale", "curv"):
                width = 8 if key == "err_seen" else 6
                line += f" {np.mean([r[name + ' | end'][key] for r in per_seed]):{width}.3f}"
        line = f"{line:<97}"
        print(line + " [" + " ".join(f"{r[name]:.2f}" for r in per_seed) + "]")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--memory-size", type=int, default=10)
    parser.add_argument("--n-train", type=int, default=100)
    parser.add_argument("--test-rotations", type=int, default=3)
    parser.add_argument("--size", type=int, default=28)
    parser.add_argument("--damping", type=float, default=1.0,
                        help="scale every ORFit-MLP step by this factor (1: ORFit)")
    parser.add_argument("--standardise", action="store_true",
                        help="learn the targets standardised by the stream's mean and "
                             "deviation (drift columns then in units of the deviation)")
    parser.add_argument("--steps", action="store_true",
                        help="print the step-by-step table of every method (first seed)")
    parser.add_argument("--every", type=int, default=10, help="print every k-th step")
    parser.add_argument("--json", default=None, help="also write the results to this file")
    args = parser.parse_args(argv)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        per_seed, tables = run(args)
    report(per_seed, tables, args)
    print(f"\n({time.perf_counter() - t0:.0f} s)")
    if args.json:
        Path(args.json).write_text(json.dumps(
            {"settings": vars(args), "per_seed": per_seed, "steps_seed0": tables}, indent=1))
    return per_seed, tables


if __name__ == "__main__":
    main()
