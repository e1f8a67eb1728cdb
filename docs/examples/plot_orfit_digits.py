"""
ORFit on rotated digits: one pass, little forgetting
====================================================

A small version of the ORFit paper's experiment: images of the digit 2, rotated by a
random angle in :math:`[0, \\pi]`, and the target is the angle. A linear model on the
pixels learns 100 training images streamed **in order of increasing angle**, one at a
time — a stream whose distribution drifts, where plain one-step gradient updates forget
the early images. :class:`~sklearn_orfit.ORFitRegressor` with a memory of ``m = 10``
directions (incremental PCA) is compared with One-step SGD (``memory_size=0``) and with
unlimited memory.

The bundled 8×8 digits are upsampled to 16×16 (256 pixels, more than the 100 training
images) so that the stream stays in the overparameterised regime of the paper.
"""

# %%
# Data
# ----
import matplotlib.pyplot as plt
import numpy as np
from scipy import ndimage
from sklearn.datasets import load_digits

from sklearn_orfit import ORFitRegressor

rng = np.random.default_rng(0)
digits = load_digits()
twos = digits.images[digits.target == 2] / 16.0
twos = np.stack([ndimage.zoom(im, 2, order=1) for im in twos])  # 16×16


def rotated(images, angles):
    return np.stack([ndimage.rotate(im, np.degrees(a), reshape=False, order=1).ravel()
                     for im, a in zip(images, angles)])


order = rng.permutation(len(twos))
train_idx, test_idx = order[:100], order[100:]
theta_train = np.sort(rng.uniform(0, np.pi, 100))  # increasing angle
X_train = rotated(twos[train_idx], theta_train)
theta_test = rng.uniform(0, np.pi, len(test_idx))
X_test = rotated(twos[test_idx], theta_test)
print(X_train.shape, X_test.shape)

# %%
# Stream the images once
# ----------------------
# After each image: the test RMSE, and the error on the 11th training image (learned
# early, at a small angle) to watch forgetting.
models = {
    "ORFit, m = 10 (PCA memory)": ORFitRegressor(memory_size=10),
    "One-step SGD (m = 0)": ORFitRegressor(memory_size=0),
    "ORFit, unlimited memory": ORFitRegressor(memory_size=None),
}
curves = {}
for name, model in models.items():
    test_rmse, early_err = [], []
    for i in range(100):
        model.partial_fit(X_train[i:i + 1], theta_train[i:i + 1])
        test_rmse.append(np.sqrt(np.mean((model.predict(X_test) - theta_test) ** 2)))
        early_err.append(abs(model.predict(X_train[10:11])[0] - theta_train[10])
                         if i >= 10 else np.nan)
    curves[name] = (test_rmse, early_err)
    print(f"{name:28s} final test RMSE {test_rmse[-1]:.3f} rad, "
          f"error on image 11: {early_err[-1]:.3f} rad")

# %%
# Test error and forgetting
# -------------------------
# The unlimited memory keeps every learned image exactly (error 0 on image 11); the
# 10-direction PCA memory keeps most of it, One-step SGD forgets it.
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
for name, (test_rmse, early_err) in curves.items():
    axes[0].plot(np.arange(1, 101), test_rmse, label=name)
    axes[1].plot(np.arange(1, 101), early_err, label=name)
axes[0].set(xlabel="training images seen", ylabel="test RMSE (rad)", title="test error")
axes[1].set(xlabel="training images seen", ylabel="|error| (rad)",
            title="error on the 11th training image")
axes[0].legend(fontsize=8)
fig.tight_layout()
