"""
Feature-partition ensemble on a dask cluster
============================================

:class:`~sklearn_orfit.FeaturePartitionEnsemble` splits one draw of random Fourier
features into blocks and fits one :class:`~sklearn_orfit.QREWRLSRegressor` per block;
the blocks run in parallel through joblib. The same code runs on one process, on local
processes, on threads, or on a dask cluster through joblib's ``"dask"`` backend — and
gives the same predictions.

This example starts a small :class:`distributed.LocalCluster` with in-process workers
(``processes=False``: the scheduler and two single-threaded workers live in this
process and talk over dask's in-process transport, no network), which starts in about a
second and keeps the documentation build fast. For worker processes use
``LocalCluster(processes=True, host="127.0.0.1")`` (as the test suite does), or pass the
address of a remote scheduler to :class:`distributed.Client`; nothing else changes. Without
``dask[distributed]`` installed it falls back to joblib's threading backend.
"""

# %%
# Data and model
# --------------
import time

import matplotlib.pyplot as plt
import numpy as np
from joblib import parallel_config

from sklearn_orfit import (
    FeaturePartitionEnsemble,
    QREWRLSRegressor,
    RandomFourierFeatures,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit.datasets import make_abo_series, make_lagged
from sklearn_orfit.metrics import res_mse

X, y = make_lagged(make_abo_series(2000, random_state=0), n_lags=7)
N, D, P = 20, 2048, 4


def ensemble(n_jobs):
    return FeaturePartitionEnsemble(
        RandomFourierFeatures(D, sigma=1.0, random_state=0),
        QREWRLSRegressor(window_size=N),
        n_partitions=P,
        n_jobs=n_jobs,
    )


def run(model):
    """Predict-then-update in chunks of 500 rows (one task per partition per chunk)."""
    return np.concatenate([prequential_predict(model, X[i:i + 500], y[i:i + 500])
                           for i in range(0, len(y), 500)])


# %%
# One process, then the dask backend
# ----------------------------------
t0 = time.perf_counter()
serial = run(ensemble(n_jobs=1))
print(f"n_jobs=1: {time.perf_counter() - t0:.2f} s")

try:
    from dask.distributed import Client, LocalCluster
except ImportError:  # no dask: the threading backend, same code path through joblib
    with parallel_config(backend="threading", n_jobs=2):
        t0 = time.perf_counter()
        parallel = run(ensemble(n_jobs=2))
    backend = "threading"
else:
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, \
            Client(cluster) as client, parallel_config(backend="dask"):
        t0 = time.perf_counter()
        parallel = run(ensemble(n_jobs=2))
        n_workers = len(client.scheduler_info()["workers"])
    print(f"dask cluster with {n_workers} workers")
    backend = "dask"
print(f"{backend}: {time.perf_counter() - t0:.2f} s")
print("largest difference between the two runs:", np.max(np.abs(parallel - serial)))

# %%
# Accuracy: the ensemble, one full-width model, one partition alone
# --------------------------------------------------------------------------
full = run(make_streaming_pipeline(RandomFourierFeatures(D, sigma=1.0, random_state=0),
                                   QREWRLSRegressor(window_size=N)))
one = run(make_streaming_pipeline(RandomFourierFeatures(D // P, sigma=1.0, random_state=0),
                                  QREWRLSRegressor(window_size=N)))
scores = {f"ensemble, {P} × {D // P}": res_mse(y[N:], serial[N:]),
          f"one model, D = {D}": res_mse(y[N:], full[N:]),
          f"one partition, D = {D // P}": res_mse(y[N:], one[N:])}
for name, score in scores.items():
    print(f"{name:26s} ResMSE {score:.4f}")

fig, ax = plt.subplots(figsize=(6, 3))
ax.barh(list(scores), list(scores.values()), color=["tab:orange", "tab:blue", "0.6"])
ax.set_xlabel("prequential ResMSE")
ax.set_title("ABO synthetic series, N = 20")
fig.tight_layout()
