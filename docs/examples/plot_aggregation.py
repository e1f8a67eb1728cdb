"""
Aggregating experts online: weights over time
=============================================

A stream whose best window changes mid-stream: for the first half the regression is
fixed (a long window averages the noise away), for the second half it is redrawn every
100 rows (only a short window keeps up). A window chosen on the first part of the
stream is the wrong one for the second.

:class:`~sklearn_orfit.AggregatingRegressor` (BOA, the default) runs a small grid of
ABO experts of :func:`~sklearn_orfit.make_expert_grid` in one prequential pass and
moves its weights to the window that works now.
"""

# %%
# The stream and the experts
# --------------------------
import matplotlib.pyplot as plt
import numpy as np

from sklearn_orfit import AggregatingRegressor, make_expert_grid

rng = np.random.default_rng(0)
n, d = 1200, 5
X = rng.normal(size=(n, d))
W = np.repeat(rng.normal(size=(1, d)), n, axis=0)
for a in range(n // 2, n, 100):  # a new regression every 100 rows in the second half
    W[a : a + 100] = rng.normal(size=d)
y = np.sin(1.3 * np.einsum("nd,nd->n", X, W)) + 0.3 * rng.normal(size=n)

grid = make_expert_grid(abo_windows=(20,), sigmas=(1.0,), n_components=(256,),
                        abo_alphas=(1e-2,), krls_windows=(20, 80, 300))
agg = AggregatingRegressor(grid, history_size=None)
y_pred = agg.prequential_predict(X, y)
print([name for name, _ in grid])

# %%
# Errors: the aggregate against each expert, before and after the switch
# ----------------------------------------------------------------------
P = agg.predictions_history_
for part, rows in (("first half", slice(200, n // 2)), ("second half", slice(n // 2, n))):
    experts = ((P[rows] - y[rows, None]) ** 2).mean(axis=0)
    print(f"{part}: aggregate {np.mean((y_pred[rows] - y[rows]) ** 2):.3f}, experts "
          + ", ".join(f"{k} {e:.3f}" for (k, _), e in zip(grid, experts)))

# %%
# Weights over time
# -----------------
fig, ax = plt.subplots(figsize=(7, 3.2))
ax.stackplot(np.arange(n), agg.weights_history_.T, labels=[k for k, _ in grid])
ax.axvline(n // 2, color="k", lw=1, ls="--")
ax.set(xlabel="row", ylabel="weight", xlim=(0, n), ylim=(0, 1),
       title="BOA weights of the experts")
ax.legend(loc="upper left", fontsize=8)
fig.tight_layout()
plt.show()
