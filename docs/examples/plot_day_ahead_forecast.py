"""
Day-ahead forecasting with delayed labels
=========================================

Forecast the bundled England & Wales electricity demand **48 half-hours ahead** (one
day), as a forecaster would: every forecast is made at time ``t`` from what is known
at ``t``, and its label only arrives 48 steps later, so the model learns it then — not
at once (:func:`~sklearn_orfit.prequential_predict` with ``delay = horizon − 1``).

* Target: the change from the same half-hour one week earlier (a *seasonal
  difference*); the forecast of the demand is the weekly seasonal-naive forecast plus
  the model's forecast of that change.
* Inputs: the last 48 seasonal differences (lags up to ``t``) and one exogenous input,
  the time of day of the target (a calendar input, known in advance). The bundled data
  has no temperature column; a calendar input is the real, honest exogenous input here.
* Tuning: ``GridSearchCV`` with :class:`~sklearn_orfit.model_selection.PrequentialSplit`
  and :func:`~sklearn_orfit.model_selection.make_prequential_scorer`, both with
  ``delay=47``, on the **first part** of the series only; the report is on the rest.
* Comparison: RMSE, MAE, MASE and the MSE skill against the seasonal-naive forecasts
  (:func:`~sklearn_orfit.metrics.forecast_scores`).
"""

# %%
# Data: seasonal differences, lagged, with a calendar input
# ---------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np
from sklearn.model_selection import GridSearchCV
from threadpoolctl import threadpool_limits

from sklearn_orfit import (
    QREWRLSRegressor,
    RandomFourierFeatures,
    RecursiveStandardScaler,
    StreamingTransformedTargetRegressor,
    make_streaming_pipeline,
    prequential_predict,
)
from sklearn_orfit.datasets import load_electricity_demand, make_lagged
from sklearn_orfit.metrics import forecast_scores
from sklearn_orfit.model_selection import PrequentialSplit, make_prequential_scorer

bunch = load_electricity_demand()
demand, times = bunch.data, bunch.timestamps.astype("datetime64[m]")
H, WEEK, N_LAGS = 48, 336, 48  # horizon, season, lags (half-hours)

d = demand[WEEK:] - demand[:-WEEK]  # d[k] = demand[k + WEEK] − demand[k]
# time of day of the *target* (t + H), on the unit circle: known when forecasting at t
minutes = (times - times.astype("datetime64[D]")).astype(float)
target_time = np.roll(minutes[WEEK:], -H)
exog = np.column_stack([np.sin(2 * np.pi * target_time / 1440),
                        np.cos(2 * np.pi * target_time / 1440)])
X, y = make_lagged(d, N_LAGS, horizon=H, exog=exog)
X = np.column_stack([X[:, :N_LAGS], X[:, N_LAGS::N_LAGS]])  # the calendar's latest lag
# row i is made at time t = i + N_LAGS − 1 of d, i.e. of demand at t + WEEK
t = np.arange(len(y)) + N_LAGS - 1 + WEEK
actual = demand[t + H]
seasonal_naive = demand[t + H - WEEK]  # the same half-hour one week before the target
assert np.array_equal(actual - seasonal_naive, y)
print(X.shape, "rows; forecasts for", times[t[0] + H], "…", times[t[-1] + H])

# %%
# Tune on the first part of the series only
# -----------------------------------------
# Three validation folds of one week inside the first 1,600 rows; each fold is warmed up
# on everything before it. With ``delay=47`` the splitter hands the scorer the 47 rows
# before each fold as well: it learns them as their labels come due and does not score
# them.
n_tune = 1600
# one BLAS thread: a streaming update is a few small matrix products, which more threads
# only slow down (badly so on a busy machine)
threadpool_limits(1, user_api="blas")
model = StreamingTransformedTargetRegressor(make_streaming_pipeline(
    RecursiveStandardScaler(),
    RandomFourierFeatures(512, random_state=0),
    QREWRLSRegressor(),
))
search = GridSearchCV(
    model,
    {"regressor__qrewrlsregressor__window_size": [100, 336],
     "regressor__randomfourierfeatures__sigma": [0.5, 1.0]},
    cv=PrequentialSplit(3, test_size=WEEK, delay=H - 1),
    scoring=make_prequential_scorer("mse", delay=H - 1),
    error_score="raise",
).fit(X[:n_tune], y[:n_tune])
for params, score in zip(search.cv_results_["params"], search.cv_results_["mean_test_score"]):
    print({k.split("__")[-1]: v for k, v in params.items()}, f"RMSE {np.sqrt(-score):.0f} MW")
print("chosen:", {k.split("__")[-1]: v for k, v in search.best_params_.items()})

# %%
# Forecast the whole series, labels 47 rows late; report on the rest
# ------------------------------------------------------------------
tuned = model.set_params(**search.best_params_)
y_pred = prequential_predict(tuned, X, y, delay=H - 1)
forecast = seasonal_naive + y_pred
report = slice(n_tune, None)  # never used for tuning
scores = forecast_scores(actual[report], forecast[report], season=WEEK, horizon=H)
for key in ("rmse", "mae", "mase", "skill_seasonal_naive"):
    print(f"{key:>22}: {scores[key]:.3f}")
print(scores["summary"])
print("seasonal-naive RMSE:",
      f"{np.sqrt(np.mean((actual[report] - seasonal_naive[report]) ** 2)):.0f} MW")

# %%
# The last week of forecasts
# --------------------------
last = slice(len(y) - WEEK, len(y))
fig, ax = plt.subplots(figsize=(9, 3.5))
ax.plot(times[t[last] + H], actual[last], color="black", lw=1, label="demand")
ax.plot(times[t[last] + H], forecast[last], lw=1, label="day-ahead forecast")
ax.plot(times[t[last] + H], seasonal_naive[last], lw=1, ls="--",
        label="same half-hour last week")
ax.set_ylabel("MW")
ax.legend(loc="upper right", fontsize=8)
fig.autofmt_xdate()
fig.tight_layout()
