"""RandomFourierFeatures against scikit-learn's RBFSampler: speed of transform and fit.

``RandomFourierFeatures(D, sigma=s, random_state=r)`` draws its map through
``RBFSampler`` and its output is bit-identical to ``RBFSampler(gamma=s**2 / 2,
n_components=D, random_state=r)`` (fitted on data of the same dtype); this script checks
that on every configuration and times both, in one process, one BLAS thread
(threadpoolctl), alternating the implementations call by call so that load drifts hit all
of them alike.

Grid: input features ``d`` in {7, 64}, ``D`` in {256, 4096}, rows per call in {1, 1000},
float64. For each configuration it prints the median per-call time of ``transform`` and
``fit`` (fresh estimator, ``random_state=0``) and the median of the paired per-round
ratios ``RandomFourierFeatures / RBFSampler``.

``--old PATH`` also times another version of the class, e.g. the previous commit's::

    git worktree add /tmp/old_rff HEAD~1
    python benchmarks/bench_rff.py --old /tmp/old_rff/sklearn_orfit/abo/_rff.py

adding the ratios new/old and checking that both versions give the same bytes.
``--quick`` runs fewer rounds.
"""

import argparse
import importlib.util
import os
import sys

import numpy as np
import sklearn
from sklearn.kernel_approximation import RBFSampler

import sklearn_orfit
from sklearn_orfit import RandomFourierFeatures
from sklearn_orfit.utils.benchmarking import (
    blas_threads, header_line, machine_header, time_calls, write_results,
)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "out")


def _load_old(path):
    """Import another version of ``_rff.py`` as a submodule of the installed package
    (so that its relative imports resolve)."""
    spec = importlib.util.spec_from_file_location("sklearn_orfit._rff_bench_old", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.RandomFourierFeatures


def _per_call(fn, reps):
    """Seconds per call of ``fn``, over one round of ``reps`` calls."""

    def calls():
        for _ in range(reps):
            fn()

    return time_calls(calls, 1)[0] / reps


def _alternate(fns, rounds, budget=2e-3):
    """Per-call times, shape (rounds, len(fns)).

    Each round times every function once (``reps`` calls, chosen so that a round of the
    slowest takes about ``budget`` seconds), the order rotating between rounds.
    """
    for fn in fns:  # warm up (first-call allocations, BLAS initialisation)
        fn()
    reps = max(1, int(budget / max(_per_call(fn, 1) for fn in fns)))
    times = np.empty((rounds, len(fns)))
    for r in range(rounds):
        order = np.roll(np.arange(len(fns)), r)
        for k in order:
            times[r, k] = _per_call(fns[k], reps)
    return times


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", help="path of another version's sklearn_orfit/abo/_rff.py")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--quick", action="store_true", help="5 rounds")
    parser.add_argument("--out", default=OUT if __name__ == "__main__" else None,
                        help="folder of the results' JSON (default benchmarks/out)")
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else args.rounds
    Old = _load_old(args.old) if args.old else None

    ctx, _ = blas_threads(1)
    results = []
    with ctx:
        header = machine_header()
        print(header_line(header))
        print(
            f"sklearn-orfit {sklearn_orfit.__version__}, scikit-learn {sklearn.__version__}; "
            f"one BLAS thread; median of {rounds} alternating rounds"
        )
        head = (
            f"{'d':>3} {'D':>5} {'rows':>5} | {'op':9} | {'new µs':>9} {'RBFS µs':>9} "
        )
        head += f"{'new/RBFS':>8}" + (f" | {'old µs':>9} {'new/old':>7}" if Old else "")
        head += " | same bytes"
        print(head)
        print("-" * len(head))
        rng = np.random.default_rng(0)
        for d in (7, 64):
            for D in (256, 4096):
                for rows in (1, 1000):
                    X = rng.uniform(-1, 1, size=(rows, d))
                    new = RandomFourierFeatures(D, sigma=1.3, random_state=0).fit(X)
                    ref = RBFSampler(
                        gamma=1.3**2 / 2, n_components=D, random_state=0
                    ).fit(X)
                    Z = new.transform(X)
                    same = Z.tobytes() == ref.transform(X).tobytes()
                    fns = [lambda: new.transform(X), lambda: ref.transform(X)]
                    fits = [
                        lambda: RandomFourierFeatures(D, sigma=1.3, random_state=0).fit(
                            X
                        ),
                        lambda: RBFSampler(
                            gamma=1.3**2 / 2, n_components=D, random_state=0
                        ).fit(X),
                    ]
                    if Old is not None:
                        old = Old(D, sigma=1.3, random_state=0).fit(X)
                        same = same and Z.tobytes() == old.transform(X).tobytes()
                        fns.insert(1, lambda: old.transform(X))
                        fits.insert(1, lambda: Old(D, sigma=1.3, random_state=0).fit(X))
                    for op, group in (("transform", fns), ("fit", fits)):
                        times = _alternate(group, rounds)
                        med = np.median(times, axis=0)
                        # ratios paired within a round (same load), then the median
                        rbfs = np.median(times[:, 0] / times[:, -1])
                        line = (
                            f"{d:>3} {D:>5} {rows:>5} | {op:9} | {med[0] * 1e6:9.1f} "
                        )
                        line += f"{med[-1] * 1e6:9.1f} {rbfs:8.3f}"
                        if Old is not None:
                            vs_old = np.median(times[:, 0] / times[:, 1])
                            line += f" | {med[1] * 1e6:9.1f} {vs_old:7.3f}"
                        print(line + f" | {same}")
                        results.append({
                            "d": d, "D": D, "rows": rows, "op": op, "new_us": med[0] * 1e6,
                            "rbfsampler_us": med[-1] * 1e6, "new_over_rbfsampler": rbfs,
                            "old_us": med[1] * 1e6 if Old is not None else None,
                            "same_bytes": same})
    settings = {"rounds": rounds, "quick": args.quick, "old": args.old, "blas_threads": 1,
                "scikit_learn": sklearn.__version__}
    write_results("bench_rff", {"settings": settings, "rows": results}, args.out,
                  header=header)
    return results


if __name__ == "__main__":
    main()
