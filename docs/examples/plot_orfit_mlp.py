"""
ORFit for a neural network: one pass with orthogonal Jacobian updates
=====================================================================

:class:`~sklearn_orfit.ORFitMLPRegressor` learns a small tanh network from a stream, one
point at a time, each step orthogonal to the Jacobians of the points it remembers (the
ORFit paper's §6). The stream is a nonlinear function of two features, presented in a
**drifting order** (by increasing first feature), where plain gradient steps forget the
early points.

Compared, all in one pass from the same initial network: ORFit-MLP with unlimited memory,
with a PCA memory of 20 directions (the network has 257 parameters, more than
the 100 points), One-step SGD (``memory_size=0``), and scikit-learn's
:class:`~sklearn.neural_network.MLPRegressor` (Adam) by ``partial_fit``.
"""

# %%
# A drifting nonlinear stream
# ---------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.neural_network import MLPRegressor

from sklearn_orfit import ORFitMLPRegressor


def target(X):
    return np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2


rng = np.random.default_rng(0)
X = rng.normal(size=(100, 2))
X = X[np.argsort(X[:, 0])]  # streamed by increasing x₀
y = target(X) + 0.05 * rng.normal(size=100)
X_test = rng.normal(size=(1000, 2))
y_test = target(X_test)

# %%
# Stream the points once
# ----------------------
# After each point: the test RMSE, and the error on the 11th training point (learned
# early, at small x₀) to watch forgetting.
models = {
    "ORFit-MLP, unlimited memory": ORFitMLPRegressor((64,), random_state=0),
    "ORFit-MLP, m = 20 (PCA)": ORFitMLPRegressor((64,), memory_size=20, random_state=0),
    "One-step SGD (m = 0)": ORFitMLPRegressor((64,), memory_size=0, random_state=0),
    "MLPRegressor.partial_fit": MLPRegressor(hidden_layer_sizes=(64,), activation="tanh",
                                             random_state=0),
}
curves = {}
for name, model in models.items():
    test_rmse, early_err = [], []
    for i in range(len(y)):
        model.partial_fit(X[i:i + 1], y[i:i + 1])
        test_rmse.append(np.sqrt(np.mean((model.predict(X_test) - y_test) ** 2)))
        early_err.append(abs(model.predict(X[10:11])[0] - y[10]) if i >= 10 else np.nan)
    curves[name] = (test_rmse, early_err)
    print(f"{name:28s} final test RMSE {test_rmse[-1]:.3f}, "
          f"error on point 11: {early_err[-1]:.3f}")

# %%
# Test error and forgetting
# -------------------------
# The memory keeps each point's *linearised* prediction exactly; the network's actual
# prediction drifts to second order in the steps. Here the steps are large (each point
# is fitted exactly, and late points' Jacobians are nearly in the span of the memory), so
# the drift accumulates: ORFit-MLP reaches the lowest one-pass test error, but the early
# point is not kept better than by a single pass of Adam, which barely moves from the
# initial network. See the user guide (:ref:`orfit-mlp`) for when the Jacobian memory
# pays off.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for name, (test_rmse, early_err) in curves.items():
    axes[0].plot(np.arange(1, len(y) + 1), test_rmse, label=name)
    axes[1].plot(np.arange(1, len(y) + 1), early_err, label=name)
axes[0].set(xlabel="training points seen", ylabel="test RMSE", title="test error")
axes[1].set(xlabel="training points seen", ylabel="|error|", yscale="log",
            title="error on the 11th training point")
axes[0].legend(fontsize=8)
fig.tight_layout()

# %%
# The linearised guarantee, checked
# ---------------------------------
# Two more points, each 0.05 above the network's prediction (small steps): the
# linearised model fits the last one exactly, the linearised prediction on the one
# before (its Jacobian taken when it was learned) does not move, and its actual
# prediction moves by a second-order amount, far below the 0.05 correction.
model = models["ORFit-MLP, unlimited memory"]
x_prev = np.array([[2.4, 0.3]])
y_prev = model.predict(x_prev) + 0.05
J_prev = model.jacobian(x_prev)
model.partial_fit(x_prev, y_prev)
x_new = np.array([[2.5, 0.0]])
y_new = model.predict(x_new) + 0.05
w, J_new, f_new = model.params_.copy(), model.jacobian(x_new), model.predict(x_new)
model.partial_fit(x_new, y_new)
dw = model.params_ - w
print(f"new point: target {float(y_new[0]):.4f}, "
      f"linearised prediction {float((f_new + J_new @ dw)[0]):.4f}")
print(f"linearised change on the previous point: {float((J_prev @ dw)[0]):.1e}")
print(f"actual change on the previous point: {float((model.predict(x_prev) - y_prev)[0]):.1e}")
