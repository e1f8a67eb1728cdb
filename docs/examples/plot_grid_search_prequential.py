"""
Tuning with GridSearchCV and PrequentialSplit
=============================================

Stock scikit-learn model selection, scored predict-then-update: each fold of
:class:`~sklearn_orfit.model_selection.PrequentialSplit` warms the model up on the rows
just before it (``fit``), then :func:`~sklearn_orfit.model_selection.make_prequential_scorer`
predicts and learns the fold's rows one by one. Validation folds choose the window and
the kernel width; later test folds, never seen during tuning, report the result — the
ABO paper's protocol, on a small slice of the bundled electricity demand.
"""

# %%
# Data: first differences of the demand, standardised recursively, 20 lags
# ------------------------------------------------------------------------
import numpy as np
from sklearn.model_selection import GridSearchCV, cross_validate

from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    make_streaming_pipeline,
)
from sklearn_orfit.datasets import load_electricity_demand, make_lagged
from sklearn_orfit.model_selection import (
    make_prequential_scorer,
    validation_test_splits,
)

demand = load_electricity_demand().data[:1500]
z = RecursiveStandardScaler().prequential_transform(np.diff(demand)[:, None]).ravel()
X, y = make_lagged(z[2:], n_lags=20)
print(X.shape)

# %%
# Validation folds, then test folds
# ---------------------------------
val_cv, test_cv = validation_test_splits(
    4, 2, validation_size=96, test_size=192, warmup_size=60)
for train, test in val_cv.split(X):
    print(f"warm-up rows {train[0]}..{train[-1]}, scored rows {test[0]}..{test[-1]}")

# %%
# Grid search on the validation folds
# -----------------------------------
pipe = make_streaming_pipeline(
    RandomFourierFeatures(n_components=512, random_state=0),
    QREWRLSRegressor(),
)
grid = GridSearchCV(
    pipe,
    {"qrewrlsregressor__window_size": [20, 50],
     "randomfourierfeatures__sigma": [0.25, 0.5, 1.0]},
    cv=val_cv,
    scoring=make_prequential_scorer(["mse", "var"]),
    refit="mse",
)
grid.fit(X, y)
for params, mse in zip(grid.cv_results_["params"], grid.cv_results_["mean_test_mse"]):
    print(params, f"ResMSE {-mse:.4f}")
print("best:", grid.best_params_)

# %%
# Report on the later test folds
# ------------------------------
best = grid.best_estimator_
res = cross_validate(best, X, y, cv=test_cv, scoring=make_prequential_scorer(["mse", "var"]))
zero = cross_validate(best, X, y, cv=test_cv,
                      scoring=make_prequential_scorer(lambda yt, yp: float(np.mean(yt**2))))
print("test ResMSE per fold:", np.round(-res["test_mse"], 4))
print("test ResVAR per fold:", np.round(-res["test_var"], 4))
print("zero forecast ResMSE:", np.round(-zero["test_score"], 4))
