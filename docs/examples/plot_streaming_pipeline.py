"""
Streaming pipeline and prequential prediction
=============================================

A :class:`~sklearn_orfit.StreamingPipeline` chains streaming steps without look-ahead:
here recursive standardisation, random Fourier features and the windowed minimum-norm
least squares of ABO (:class:`~sklearn_orfit.QREWRLSRegressor`).
:func:`~sklearn_orfit.prequential_predict` predicts every row from the state that has
learned the rows before it, then learns it.
"""

# %%
# The ABO paper's synthetic series, 7 lags
# ----------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit.datasets import make_abo_series, make_lagged
from sklearn_orfit.metrics import res_mse, res_var

X, y = make_lagged(make_abo_series(1500, random_state=0), n_lags=7)
print(X.shape, y.shape)

# %%
# Predict-then-update with two widths: D < N and D > N
# ----------------------------------------------------
# With the window ``N = 20``, ``D = 16`` is the classical regime and ``D = 1024`` the
# overparameterised one, where each window is interpolated by the minimum-norm
# solution.
N = 20
preds = {}
for D in (16, 1024):
    pipe = make_streaming_pipeline(
        RecursiveStandardScaler(),
        RandomFourierFeatures(n_components=D, sigma=1.0, random_state=0),
        QREWRLSRegressor(window_size=N),
    )
    preds[D] = prequential_predict(pipe, X, y)
    print(f"D={D:5d}  ResMSE={res_mse(y[N:], preds[D][N:]):.4f}  "
          f"ResVAR={res_var(y[N:], preds[D][N:]):.4f}")

# %%
# The pipeline has learned every row; its fitted steps are in ``named_steps_``.
reg = pipe.named_steps_.qrewrlsregressor
print(reg.n_samples_seen_, reg.coef_.shape, f"window condition number {reg.condition_number_:.3g}")

# %%
# Chunks continue the stream
# --------------------------
# Calling :func:`~sklearn_orfit.prequential_predict` on consecutive chunks gives the
# predictions of one call over all rows: a live system can learn as data arrives.
pipe = make_streaming_pipeline(
    RecursiveStandardScaler(),
    RandomFourierFeatures(n_components=1024, sigma=1.0, random_state=0),
    QREWRLSRegressor(window_size=N),
)
chunked = np.concatenate([prequential_predict(pipe, X[i:i + 250], y[i:i + 250])
                          for i in range(0, len(y), 250)])
print("largest difference to the one-call predictions:", np.max(np.abs(chunked - preds[1024])))

# %%
# The last 150 steps
# ------------------
fig, ax = plt.subplots(figsize=(8, 3.5))
t = np.arange(len(y))[-150:]
ax.plot(t, y[-150:], color="0.2", lw=1.2, label="series")
ax.plot(t, preds[1024][-150:], lw=1, label="D = 1024 (D > N)")
ax.plot(t, preds[16][-150:], lw=1, ls="--", label="D = 16 (D < N)")
ax.set_xlabel("t")
ax.legend(fontsize=8)
ax.set_title("One-step-ahead prequential forecasts")
fig.tight_layout()
