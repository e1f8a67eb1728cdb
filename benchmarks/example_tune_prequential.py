"""Tune ABO's window and σ on validation folds, report ResMSE / ResVAR on later test folds.

The ABO paper's real-data protocol (§4) with stock scikit-learn tools, on a series
bundled with the package:

1. the series (first differences of the half-hourly England & Wales demand, or daily
   EUR/USD log returns) is standardised recursively — each value with the mean and
   standard deviation of the values before it — and turned into 20 lags;
2. ``GridSearchCV`` over ``window_size × σ`` of
   ``RandomFourierFeatures → QREWRLSRegressor`` (λ = 1), with ``cv=`` the validation
   folds of :func:`~sklearn_orfit.model_selection.validation_test_splits` and
   ``scoring=make_prequential_scorer(["mse", "var"])``: every fold is warmed up on the
   rows before it, then predicted and learned row by row;
3. the best configuration is run the same way on the later, disjoint test folds
   (``cross_validate``), next to the zero forecast (the recursive mean) for scale.

Usage::

    python benchmarks/example_tune_prequential.py                       # electricity
    python benchmarks/example_tune_prequential.py --dataset eurusd
    python benchmarks/example_tune_prequential.py --n-components 8192   # the paper's D
"""

import argparse
import platform
import time

import numpy as np
import sklearn
from sklearn.model_selection import GridSearchCV, cross_validate

import sklearn_orfit
from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    make_prequential_scorer,
    make_streaming_pipeline,
)
from sklearn_orfit.datasets import load_electricity_demand, load_exchange_rates, make_lagged
from sklearn_orfit.metrics import res_mse, res_var
from sklearn_orfit.model_selection import validation_test_splits

N_LAGS = 20
WINDOWS = [21, 50, 100]
SIGMAS = [0.25, 0.5, 1.0, 2.0]
# (validation fold, test fold) sizes: half a week / a week of half-hours; 6 / 12 months
# of business days
FOLDS = {"electricity": (168, 336), "eurusd": (125, 250)}


def _blas():
    try:
        from threadpoolctl import threadpool_info

        info = [f"{p['internal_api']} ({p['num_threads']} threads)" for p in threadpool_info()]
        return ", ".join(info) or "unknown"
    except ImportError:
        return "unknown (threadpoolctl not installed)"


def load_series(name):
    if name == "electricity":
        x = load_electricity_demand().data
        return np.diff(x), "first differences of half-hourly England & Wales demand (MW)"
    rates = load_exchange_rates("USD").data
    return np.diff(np.log(rates)), "daily EUR/USD log returns (ECB reference rates)"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", choices=sorted(FOLDS), default="electricity")
    parser.add_argument("--n-components", type=int, default=2048)
    parser.add_argument("--n-validation", type=int, default=8)
    parser.add_argument("--n-test", type=int, default=5)
    args = parser.parse_args(argv)

    raw, description = load_series(args.dataset)
    # recursive standardisation: value t scaled with the values before it (no look-ahead)
    series = RecursiveStandardScaler().prequential_transform(raw[:, None])[:, 0]
    X, y = make_lagged(series, n_lags=N_LAGS)
    val_size, test_size = FOLDS[args.dataset]
    val_cv, test_cv = validation_test_splits(
        args.n_validation,
        args.n_test,
        validation_size=val_size,
        test_size=test_size,
        warmup_size=max(WINDOWS),  # ≥ every window: the warm-up fills the window
    )

    print(f"sklearn-orfit {sklearn_orfit.__version__}, scikit-learn {sklearn.__version__}, "
          f"numpy {np.__version__}, Python {platform.python_version()}")
    print(f"BLAS: {_blas()}")
    print(f"series: {description}; {len(raw)} values, recursively standardised, "
          f"{N_LAGS} lags -> X {X.shape}")
    v_bounds, t_bounds = val_cv.fold_bounds(len(y)), test_cv.fold_bounds(len(y))
    print(f"validation: {args.n_validation} folds x {val_size} rows "
          f"(rows {v_bounds[0][1]}..{v_bounds[-1][2] - 1}); "
          f"test: {args.n_test} folds x {test_size} rows "
          f"(rows {t_bounds[0][1]}..{t_bounds[-1][2] - 1}); warm-up {max(WINDOWS)} rows")
    print(f"model: RandomFourierFeatures(D={args.n_components}) -> "
          "QREWRLSRegressor(lambda=1)")

    pipe = make_streaming_pipeline(
        RandomFourierFeatures(args.n_components, random_state=0), QREWRLSRegressor()
    )
    grid = {"randomfourierfeatures__sigma": SIGMAS, "qrewrlsregressor__window_size": WINDOWS}
    t0 = time.perf_counter()
    search = GridSearchCV(
        pipe, grid, cv=val_cv, scoring=make_prequential_scorer(["mse", "var"]),
        refit=False,
    ).fit(X, y)
    t_search = time.perf_counter() - t0
    res = search.cv_results_
    n_steps = len(res["params"]) * args.n_validation * val_size
    print(f"\nvalidation grid ({len(res['params'])} configurations, {t_search:.1f} s, "
          f"{1e3 * t_search / n_steps:.3f} ms per prequential step incl. warm-ups):")
    print(f"{'window':>7} {'sigma':>6} {'ResMSE':>9} {'ResVAR':>9}")
    order = np.argsort(-res["mean_test_mse"])
    for j in order:
        p = res["params"][j]
        print(f"{p['qrewrlsregressor__window_size']:>7} {p['randomfourierfeatures__sigma']:>6} "
              f"{-res['mean_test_mse'][j]:>9.4f} {-res['mean_test_var'][j]:>9.4f}")
    best = res["params"][order[0]]
    print(f"best on validation: window={best['qrewrlsregressor__window_size']}, "
          f"sigma={best['randomfourierfeatures__sigma']}")

    tuned = pipe.set_params(**best)
    t0 = time.perf_counter()
    test = cross_validate(
        tuned, X, y, cv=test_cv, scoring=make_prequential_scorer(["mse", "var"])
    )
    t_test = time.perf_counter() - t0
    print(f"\ntest folds (never used for tuning; {t_test:.1f} s):")
    print(f"{'fold':>5} {'ResMSE':>9} {'ResVAR':>9} {'zero ResMSE':>12} {'zero ResVAR':>12}")
    zero_mse, zero_var = [], []
    for k, (_, rows) in enumerate(test_cv.split(X)):
        zero_mse.append(res_mse(y[rows], np.zeros(len(rows))))
        zero_var.append(res_var(y[rows], np.zeros(len(rows))))
        print(f"{k:>5} {-test['test_mse'][k]:>9.4f} {-test['test_var'][k]:>9.4f} "
              f"{zero_mse[-1]:>12.4f} {zero_var[-1]:>12.4f}")
    print(f"{'mean':>5} {-test['test_mse'].mean():>9.4f} {-test['test_var'].mean():>9.4f} "
          f"{np.mean(zero_mse):>12.4f} {np.mean(zero_var):>12.4f}")
    print(f"ABO / zero forecast, test ResMSE ratio: "
          f"{-test['test_mse'].mean() / np.mean(zero_mse):.3f}")


if __name__ == "__main__":
    main()
