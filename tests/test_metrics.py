"""Forecast metrics of sklearn_orfit.metrics against from-scratch loop oracles."""

import math

import numpy as np
import pytest
import sklearn.metrics as skm

from sklearn_orfit.metrics import (
    forecast_scores,
    infer_season,
    mean_absolute_error,
    mean_absolute_scaled_error,
    naive_forecast,
    res_mse,
    res_var,
    root_mean_squared_error,
    skill_score,
)


# ----------------------------------------------------------------------- oracles
def _columns(a):
    """A list of columns (one for a 1-D array) of plain floats."""
    a = np.asarray(a, dtype=float)
    if a.ndim == 1:
        return [[float(v) for v in a]]
    return [[float(a[i, j]) for i in range(a.shape[0])] for j in range(a.shape[1])]


def oracle_rmse(y, p):
    out = []
    for col_y, col_p in zip(_columns(y), _columns(p)):
        total = 0.0
        for a, b in zip(col_y, col_p):
            total += (a - b) ** 2
        out.append(math.sqrt(total / len(col_y)))
    return out


def oracle_mae(y, p):
    out = []
    for col_y, col_p in zip(_columns(y), _columns(p)):
        total = 0.0
        for a, b in zip(col_y, col_p):
            total += abs(a - b)
        out.append(total / len(col_y))
    return out


def oracle_naive(series, season, horizon):
    """For each t, search back from t - horizon for the first index in t's phase."""
    x = np.asarray(series, dtype=float)
    out = np.full(x.shape, np.nan)
    for t in range(x.shape[0]):
        j = t - horizon
        while j >= 0:
            if (t - j) % season == 0:
                out[t] = x[j]
                break
            j -= 1
    return out


def oracle_mase(y, p, season, y_train=None):
    z_cols = _columns(y if y_train is None else y_train)
    out = []
    for col_y, col_p, col_z in zip(_columns(y), _columns(p), z_cols):
        num = sum(abs(a - b) for a, b in zip(col_y, col_p)) / len(col_y)
        diffs = [abs(col_z[t] - col_z[t - season]) for t in range(season, len(col_z))]
        out.append(num / (sum(diffs) / len(diffs)))
    return out


def oracle_skill(y, p, ref, metric):
    y, p, ref = (np.asarray(a, dtype=float) for a in (y, p, ref))
    if y.ndim == 1:
        y, p, ref = y[:, None], p[:, None], ref[:, None]
    loss = (lambda d: d * d) if metric == "mse" else abs
    model = reference = 0.0
    count = 0
    for i in range(y.shape[0]):
        if any(math.isnan(v) for v in ref[i]):
            continue
        for j in range(y.shape[1]):
            model += loss(y[i, j] - p[i, j])
            reference += loss(y[i, j] - ref[i, j])
            count += 1
    return float(1.0 - (model / count) / (reference / count))


@pytest.fixture
def rng():
    return np.random.default_rng(0)


# ------------------------------------------------------------------ RMSE and MAE
@pytest.mark.parametrize("shape", [(40,), (30, 3)])
def test_rmse_mae_against_oracle_and_sklearn(rng, shape):
    y, p = rng.normal(size=shape), rng.normal(size=shape)
    raw_rmse, raw_mae = oracle_rmse(y, p), oracle_mae(y, p)
    assert root_mean_squared_error(y, p) == pytest.approx(np.mean(raw_rmse), rel=1e-13)
    assert mean_absolute_error(y, p) == pytest.approx(np.mean(raw_mae), rel=1e-13)
    assert root_mean_squared_error(y, p) == pytest.approx(
        skm.root_mean_squared_error(y, p), rel=1e-13
    )
    assert mean_absolute_error(y, p) == pytest.approx(
        skm.mean_absolute_error(y, p), rel=1e-13
    )
    rmse = root_mean_squared_error(y, p, multioutput="raw_values")
    mae = mean_absolute_error(y, p, multioutput="raw_values")
    if len(shape) == 2:
        np.testing.assert_allclose(rmse, raw_rmse, rtol=1e-13)
        np.testing.assert_allclose(mae, raw_mae, rtol=1e-13)
        np.testing.assert_allclose(
            rmse,
            skm.root_mean_squared_error(y, p, multioutput="raw_values"),
            rtol=1e-13,
        )
        np.testing.assert_allclose(
            mae, skm.mean_absolute_error(y, p, multioutput="raw_values"), rtol=1e-13
        )
    else:  # 1-D: a float, as res_mse (scikit-learn gives a one-element array)
        assert isinstance(rmse, float) and isinstance(mae, float)
        assert rmse == pytest.approx(raw_rmse[0], rel=1e-13)
        assert mae == pytest.approx(raw_mae[0], rel=1e-13)
    if len(shape) == 1:
        assert root_mean_squared_error(y, p) ** 2 == pytest.approx(res_mse(y, p))


def test_rmse_mae_return_python_floats(rng):
    y, p = rng.normal(size=10), rng.normal(size=10)
    assert type(root_mean_squared_error(y, p)) is float
    assert type(mean_absolute_error(y, p)) is float
    assert root_mean_squared_error(y, y) == 0.0 and mean_absolute_error(y, y) == 0.0


BAD_PAIRS = [
    ([1.0, np.nan], [0.0, 0.0], "NaN"),
    ([1.0, 2.0], [0.0, np.inf], "NaN or infinity"),
    ([1.0, 2.0, 3.0], [0.0, 0.0], "shape"),
    ([1.0, 2.0], [[1.0], [2.0]], "shape"),
    (np.zeros((2, 2, 2)), np.zeros((2, 2, 2)), "1-D or 2-D"),
    (1.0, 1.0, "1-D or 2-D"),
    ([], [], "empty"),
    (["1.0", "2.0"], [0.0, 0.0], "strings"),
    ([1j, 2.0], [0.0, 0.0], "complex"),
    ([[1.0, 2.0], [3.0]], [0.0, 0.0], "real numbers"),
]


@pytest.mark.parametrize(
    "func", [root_mean_squared_error, mean_absolute_error, res_mse, res_var]
)
@pytest.mark.parametrize("y, p, match", BAD_PAIRS)
def test_bad_input_clear_value_error(func, y, p, match):
    # the scalar, empty, string, complex and ragged cases were a TypeError, a NaN with
    # a RuntimeWarning, a silent conversion or a raw numpy message before
    with pytest.raises(ValueError, match=match):
        func(y, p)


@pytest.mark.parametrize(
    "func", [root_mean_squared_error, mean_absolute_error, res_mse, res_var]
)
@pytest.mark.parametrize("shape", [(5,), (5, 2)])
def test_unknown_multioutput_refused(func, shape):
    # with 1-D input an unknown multioutput used to pass silently
    y = np.arange(10.0)[: shape[0] * (shape[1] if len(shape) > 1 else 1)].reshape(shape)
    bad_values = ["variance_weighted", None, [0.5, 0.5]]
    if func in (root_mean_squared_error, mean_absolute_error) and len(shape) == 2:
        # output weights, as scikit-learn's: refused when they do not match the outputs
        bad_values = ["variance_weighted", None, [0.5, 0.5, 0.5], [[0.5, 0.5]], 0.5]
    for bad in bad_values:
        with pytest.raises(ValueError, match="multioutput"):
            func(y, y + 1.0, multioutput=bad)


# ------------------------------------------------ RMSE and MAE: sample and output weights
_OURS_AND_SKLEARN = [
    (root_mean_squared_error, skm.root_mean_squared_error),
    (mean_absolute_error, skm.mean_absolute_error),
]


@pytest.mark.parametrize("ours, theirs", _OURS_AND_SKLEARN, ids=["rmse", "mae"])
@pytest.mark.parametrize("shape", [(40,), (30, 3)])
@pytest.mark.parametrize("weights", ["uniform", "integer", "with_zeros"])
def test_weighted_rmse_mae_equal_sklearn(rng, ours, theirs, shape, weights):
    y, p = rng.normal(size=shape), rng.normal(size=shape)
    n = shape[0]
    w = {
        "uniform": rng.uniform(0.1, 3.0, size=n),
        "integer": rng.integers(0, 4, size=n),
        "with_zeros": np.where(rng.random(n) < 0.3, 0.0, rng.exponential(size=n)),
    }[weights]
    assert ours(y, p, sample_weight=w) == pytest.approx(theirs(y, p, sample_weight=w), rel=1e-13)
    if len(shape) == 2:
        np.testing.assert_allclose(
            ours(y, p, sample_weight=w, multioutput="raw_values"),
            theirs(y, p, sample_weight=w, multioutput="raw_values"),
            rtol=1e-13,
        )
        v = rng.uniform(0.0, 2.0, size=shape[1])
        for sw in [None, w]:
            value = ours(y, p, sample_weight=sw, multioutput=v)
            assert isinstance(value, float)
            assert value == pytest.approx(
                theirs(y, p, sample_weight=sw, multioutput=v), rel=1e-13
            )


@pytest.mark.parametrize("ours", [root_mean_squared_error, mean_absolute_error])
def test_sample_weight_meaning(rng, ours):
    y, p = rng.normal(size=(12, 2)), rng.normal(size=(12, 2))
    # a weight 0 drops the row; an integer weight repeats it; weights scale freely
    w = np.array([0, 1, 2, 0, 3, 1, 1, 0, 2, 1, 1, 4])
    keep = np.repeat(np.arange(12), w)
    assert ours(y, p, sample_weight=w) == pytest.approx(ours(y[keep], p[keep]), rel=1e-13)
    assert ours(y, p, sample_weight=w) == pytest.approx(
        ours(y, p, sample_weight=7.5 * w), rel=1e-13
    )
    assert ours(y, p, sample_weight=np.ones(12)) == pytest.approx(ours(y, p), rel=1e-15)
    # output weights: one output only
    for j in range(2):
        e = np.zeros(2)
        e[j] = 1.0
        assert ours(y, p, multioutput=e) == pytest.approx(
            ours(y[:, j], p[:, j]), rel=1e-13
        )


@pytest.mark.parametrize("ours", [root_mean_squared_error, mean_absolute_error])
@pytest.mark.parametrize(
    "w, match",
    [
        ([1.0, 2.0], "shape"),
        ([[1.0, 2.0, 3.0]], "shape"),
        ([1.0, -1.0, 2.0], "negative"),
        ([1.0, np.nan, 2.0], "NaN"),
        ([1.0, np.inf, 2.0], "NaN or infinity"),
        ([0.0, 0.0, 0.0], "sums to zero"),
        (["a", "b", "c"], "strings"),
        (True, "real numbers"),
    ],
)
def test_bad_sample_weight_refused(ours, w, match):
    with pytest.raises(ValueError, match=match):
        ours([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], sample_weight=w)


@pytest.mark.parametrize("ours", [root_mean_squared_error, mean_absolute_error])
def test_bad_output_weights_refused(ours):
    y = np.arange(6.0).reshape(3, 2)
    for v, match in [([1.0, -1.0], "negative"), ([0.0, 0.0], "sums to zero"),
                     ([1.0, np.nan], "NaN")]:
        with pytest.raises(ValueError, match=match):
            ours(y, y + 1.0, multioutput=v)
    with pytest.raises(ValueError, match="multi-output"):
        ours(y[:, :1], y[:, :1] + 1.0, multioutput=[1.0])


# ---------------------------------------------------------------- naive_forecast
@pytest.mark.parametrize("season", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("horizon", [1, 2, 3, 4, 6, 8])
def test_naive_forecast_against_oracle(rng, season, horizon):
    x = rng.normal(size=23)
    np.testing.assert_array_equal(
        naive_forecast(x, season=season, horizon=horizon),
        oracle_naive(x, season, horizon),
    )
    X = rng.normal(size=(17, 3))
    got = naive_forecast(X, season=season, horizon=horizon)
    assert got.shape == X.shape
    for j in range(3):  # column by column
        np.testing.assert_array_equal(got[:, j], oracle_naive(X[:, j], season, horizon))


def test_naive_forecast_formula_examples():
    x = np.arange(10.0)
    # last value, h steps back
    np.testing.assert_array_equal(naive_forecast(x, horizon=3)[3:], x[:-3])
    assert np.isnan(naive_forecast(x, horizon=3)[:3]).all()
    # season 4, horizon 1..4: one season back; horizon 5: two seasons back
    for h in (1, 2, 3, 4):
        np.testing.assert_array_equal(
            naive_forecast(x, season=4, horizon=h)[4:], x[:-4]
        )
    np.testing.assert_array_equal(naive_forecast(x, season=4, horizon=5)[8:], x[:2])
    assert naive_forecast(x).dtype == np.float64
    assert naive_forecast(np.arange(5)).dtype == np.float64  # ints in, floats out


def test_naive_forecast_short_series_and_season_longer_than_series():
    assert np.isnan(naive_forecast([1.0, 2.0, 3.0], season=5)).all()
    assert np.isnan(naive_forecast([1.0, 2.0], horizon=2)).all()
    assert naive_forecast([4.0]).shape == (1,) and np.isnan(naive_forecast([4.0])[0])
    assert naive_forecast(np.empty(0)).shape == (0,)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"season": 0}, "season"),
        ({"season": -2}, "season"),
        ({"season": 1.5}, "season"),
        ({"season": 2.0}, "season"),
        ({"season": True}, "season"),
        ({"season": "2"}, "season"),
        ({"horizon": 0}, "horizon"),
        ({"horizon": None}, "horizon"),
    ],
)
def test_naive_forecast_bad_parameters(kwargs, match):
    with pytest.raises(ValueError, match=match):
        naive_forecast([1.0, 2.0, 3.0], **kwargs)


def test_naive_forecast_numpy_integers_accepted():
    x = np.arange(6.0)
    np.testing.assert_array_equal(
        naive_forecast(x, season=np.int64(2), horizon=np.int32(1)),
        oracle_naive(x, 2, 1),
    )


@pytest.mark.parametrize(
    "series, match",
    [
        ([1.0, np.nan, 3.0], "NaN"),
        ([1.0, np.inf], "NaN or infinity"),
        (np.zeros((2, 2, 2)), "1-D or 2-D"),
        (3.0, "1-D or 2-D"),
        (["a", "b"], "strings"),
        ([1j, 2j], "complex"),
    ],
)
def test_naive_forecast_bad_series(series, match):
    with pytest.raises(ValueError, match=match):
        naive_forecast(series)


# --------------------------------------------------------------------------- MASE
@pytest.mark.parametrize("season", [1, 2, 4])
def test_mase_against_oracle(rng, season):
    y = np.cumsum(rng.normal(size=50))
    p = y + rng.normal(scale=0.3, size=50)
    assert mean_absolute_scaled_error(y, p, season=season) == pytest.approx(
        oracle_mase(y, p, season)[0], rel=1e-13
    )
    train = np.cumsum(rng.normal(size=30))
    assert mean_absolute_scaled_error(
        y, p, season=season, y_train=train
    ) == pytest.approx(oracle_mase(y, p, season, train)[0], rel=1e-13)


def test_mase_multioutput_against_oracle(rng):
    Y = np.cumsum(rng.normal(size=(40, 3)), axis=0) * [1.0, 10.0, 0.1]
    P = Y + rng.normal(size=(40, 3))
    expected = oracle_mase(Y, P, 3)
    raw = mean_absolute_scaled_error(Y, P, season=3, multioutput="raw_values")
    np.testing.assert_allclose(raw, expected, rtol=1e-13)
    assert mean_absolute_scaled_error(Y, P, season=3) == pytest.approx(
        np.mean(expected), rel=1e-13
    )
    train = rng.normal(size=(12, 3))
    np.testing.assert_allclose(
        mean_absolute_scaled_error(
            Y, P, season=3, y_train=train, multioutput="raw_values"
        ),
        oracle_mase(Y, P, 3, train),
        rtol=1e-13,
    )


def test_mase_of_the_naive_forecast_itself_is_one(rng):
    y = np.cumsum(rng.normal(size=60))
    for season in (1, 5):
        ref = naive_forecast(y, season=season)
        rows = slice(season, None)
        assert mean_absolute_scaled_error(
            y[rows], ref[rows], season=season, y_train=y
        ) == pytest.approx(1.0, rel=1e-13)


def test_mase_constant_and_periodic_series_refused():
    with pytest.raises(ValueError, match="constant"):
        mean_absolute_scaled_error([3.0] * 5, [2.0] * 5)
    periodic = [1.0, 2.0] * 4  # scale 0 with season 2, not with season 1
    with pytest.raises(ValueError, match="constant or repeats with period 2"):
        mean_absolute_scaled_error(periodic, [0.0] * 8, season=2)
    assert mean_absolute_scaled_error(periodic, [0.0] * 8) == pytest.approx(1.5)
    with pytest.raises(ValueError, match="y_train is 0"):
        mean_absolute_scaled_error([1.0, 2.0], [1.0, 1.0], y_train=[5.0, 5.0, 5.0])
    # one constant output among several is enough
    Y = np.column_stack([np.arange(6.0), np.ones(6)])
    with pytest.raises(ValueError, match="constant"):
        mean_absolute_scaled_error(Y, Y + 1.0, multioutput="raw_values")


@pytest.mark.parametrize("n, season", [(1, 1), (3, 3), (4, 12)])
def test_mase_too_few_values(n, season):
    y = np.arange(float(n))
    with pytest.raises(ValueError, match="Too few values"):
        mean_absolute_scaled_error(y, y + 1.0, season=season)
    # a long enough y_train makes it defined
    train = np.arange(season + 2.0) ** 2
    assert mean_absolute_scaled_error(
        y, y + 1.0, season=season, y_train=train
    ) == pytest.approx(oracle_mase(y, y + 1.0, season, train)[0])
    with pytest.raises(ValueError, match="y_train"):
        mean_absolute_scaled_error(y, y + 1.0, season=season, y_train=train[:season])


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"y_train": [1.0, np.nan, 2.0]}, "y_train contains NaN"),
        ({"y_train": [[1.0], [2.0], [4.0]]}, "same number of outputs"),
        ({"y_train": ["a", "b", "c"]}, "strings"),
        ({"season": 0}, "season"),
        ({"multioutput": "bogus"}, "multioutput"),
    ],
)
def test_mase_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        mean_absolute_scaled_error([1.0, 2.0, 4.0], [1.0, 1.0, 1.0], **kwargs)


@pytest.mark.parametrize("y, p, match", BAD_PAIRS)
def test_mase_bad_pairs(y, p, match):
    with pytest.raises(ValueError, match=match):
        mean_absolute_scaled_error(y, p)


# ---------------------------------------------------------------------- skill_score
@pytest.mark.parametrize("metric", ["mse", "mae"])
@pytest.mark.parametrize("season, horizon", [(1, 1), (1, 3), (4, 1), (4, 6)])
def test_skill_score_against_oracle(rng, metric, season, horizon):
    y = np.cumsum(rng.normal(size=40))
    p = y + rng.normal(scale=0.5, size=40)
    ref = naive_forecast(y, season=season, horizon=horizon)
    assert skill_score(y, p, ref, metric=metric) == pytest.approx(
        oracle_skill(y, p, ref, metric), rel=1e-12
    )


def test_skill_score_leaves_nan_rows_out_of_both_terms():
    y = np.array([0.0, 1.0, 2.0, 3.0])
    ref = np.array([np.nan, 0.0, 1.0, 2.0])  # error 1 on rows 1..3
    p = np.array([100.0, 1.5, 2.5, 3.5])  # huge error on row 0 only
    # rows 1..3 only: 1 - 0.25 / 1; counting row 0 in the model term would be < 0
    assert skill_score(y, p, ref) == pytest.approx(0.75, rel=1e-14)
    assert skill_score(y, p, ref, metric="mae") == pytest.approx(0.5, rel=1e-14)


def test_skill_score_2d_drops_a_row_with_any_nan(rng):
    Y = rng.normal(size=(12, 2))
    P = Y + rng.normal(scale=0.2, size=(12, 2))
    R = Y + rng.normal(size=(12, 2))
    R[3, 1] = np.nan
    R[7, 0] = np.nan
    got = skill_score(Y, P, R)
    assert got == pytest.approx(oracle_skill(Y, P, R, "mse"), rel=1e-12)
    keep = np.ones(12, bool)
    keep[[3, 7]] = False
    assert got == pytest.approx(
        1 - res_mse(Y[keep], P[keep]) / res_mse(Y[keep], R[keep]), rel=1e-12
    )


def test_skill_score_sign_and_perfect():
    y = np.array([1.0, 3.0, 2.0, 5.0, 4.0])
    ref = naive_forecast(y)
    assert skill_score(y, y, ref) == 1.0
    assert skill_score(y, np.where(np.isnan(ref), 0.0, ref), ref) == 0.0
    worse = np.where(np.isnan(ref), 0.0, ref) + 3.0
    assert skill_score(y, worse, ref) < 0
    assert type(skill_score(y, y, ref)) is float


def test_skill_score_undefined_cases():
    y = np.array([1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="No rows left"):
        skill_score(y, y, naive_forecast(y, season=5))
    with pytest.raises(ValueError, match="No rows left"):
        skill_score(y, y, naive_forecast(y, horizon=3))
    with pytest.raises(ValueError, match="zero MSE"):
        skill_score(y, y + 1.0, np.array([np.nan, 2.0, 3.0]))
    with pytest.raises(ValueError, match="zero MAE"):
        skill_score([4.0] * 4, [3.0] * 4, naive_forecast([4.0] * 4), metric="mae")


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        (([1.0, 2.0], [1.0, 2.0], [np.nan, 1.0]), {"metric": "rmse"}, "metric"),
        (([1.0, 2.0], [1.0, 2.0], [np.nan, 1.0, 2.0]), {}, "y_reference has shape"),
        (([1.0, 2.0], [1.0, 2.0], [np.inf, 1.0]), {}, "infinity"),
        (([1.0, 2.0], [1.0, np.nan], [np.nan, 1.0]), {}, "NaN"),
        (([np.nan, 2.0], [1.0, 2.0], [np.nan, 1.0]), {}, "NaN"),
        (([1.0, 2.0], [1.0], [np.nan, 1.0]), {}, "shape"),
        (([1.0, 2.0], [1.0, 2.0], ["a", "b"]), {}, "strings"),
    ],
)
def test_skill_score_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        skill_score(*args, **kwargs)


def test_skill_score_overflow_is_a_value_error():
    y = np.array([0.0, 1e300, -1e300])
    with pytest.raises(ValueError, match="overflows"):
        skill_score(y, np.zeros(3), naive_forecast(y))


# --------------------------------------------------------------------- infer_season
def _regular(start, step, n):
    return np.datetime64(start) + np.arange(n) * np.timedelta64(*step)


@pytest.mark.parametrize(
    "step, season",
    [
        ((30, "m"), 48),
        ((1, "h"), 24),
        ((15, "m"), 96),
        ((10, "m"), 144),
        ((3, "h"), 8),
        ((1, "s"), 86400),
        ((1, "D"), 7),
        ((7, "D"), 52),
    ],
)
def test_infer_season_regular(step, season):
    times = _regular("2024-03-01T00:00", step, 30)
    assert infer_season(times) == season
    assert infer_season(times.astype(str)) == season  # ISO strings
    assert infer_season(list(times)) == season


def test_infer_season_monthly():
    month_starts = np.arange("2023-01", "2025-01", dtype="datetime64[M]")
    assert infer_season(month_starts) == 12
    month_ends = (month_starts + 1).astype("datetime64[D]") - 1  # 28..31 day steps
    assert infer_season(month_ends) == 12
    assert infer_season(["2024-01-31", "2024-02-29", "2024-03-31"]) == 12


def test_infer_season_half_hourly_dataset_and_gaps():
    times = _regular("2000-06-05T00:00", (30, "m"), 200)
    assert infer_season(np.delete(times, [5, 6, 50])) == 48  # a few gaps
    hourly = _regular("2024-03-30T00:00", (1, "h"), 72)
    assert infer_season(np.delete(hourly, 26)) == 24  # clock-change hole


@pytest.mark.parametrize(
    "times",
    [
        # irregular: 7 min does not divide a day; median 13 min neither
        _regular("2024-01-01", (7, "m"), 10),
        np.datetime64("2024-01-01T00:00")
        + np.array([0, 13, 20, 41, 54, 60, 79, 92], dtype="timedelta64[m]"),
        _regular("2024-01-01", (2, "D"), 10),  # every other day
        _regular("2024-01-01", (91, "D"), 8),  # quarterly
        _regular("2020-01-01", (365, "D"), 5),  # yearly
        ["2024-01-01", "2024-01-02"],  # fewer than 3
        [],
        ["2024-01-03", "2024-01-02", "2024-01-01"],  # decreasing
        ["2024-01-01", "2024-01-02", "2024-01-02", "2024-01-03"],  # repeated
        ["2024-01-01", "2024-01-03", "2024-01-02", "2024-01-04"],  # out of order
    ],
)
def test_infer_season_none(times):
    assert infer_season(times) is None


def test_infer_season_oracle_on_irregular(rng):
    # median spacing by a loop: the lower median of the sorted differences
    for _ in range(20):
        gaps = rng.choice([900, 1800, 3600, 7 * 60, 86400], size=9)
        times = np.datetime64("2024-01-01T00:00:00") + np.cumsum(gaps).astype(
            "timedelta64[s]"
        )
        diffs = sorted(
            int((times[i + 1] - times[i]) / np.timedelta64(1, "s"))
            for i in range(len(times) - 1)
        )
        step = diffs[(len(diffs) - 1) // 2]
        expected = {900: 96, 1800: 48, 3600: 24, 420: None, 86400: 7}[step]
        assert infer_season(times) == expected


def test_infer_season_pandas_index():
    pd = pytest.importorskip("pandas")
    idx = pd.date_range("2024-01-01", periods=50, freq="30min")
    assert infer_season(idx) == 48


@pytest.mark.parametrize(
    "times, match",
    [
        (["2024-01-01", "not a date", "2024-01-03"], "date-times"),
        (["2024-01-01", "NaT", "2024-01-03"], "NaT"),
        (np.array([["2024-01-01"] * 3] * 2), "1-D"),
        ("2024-01-01", "1-D"),
    ],
)
def test_infer_season_bad_input(times, match):
    with pytest.raises(ValueError, match=match):
        infer_season(times)


# ------------------------------------------------------------------ forecast_scores
KEYS = {
    "rmse",
    "mae",
    "mase",
    "res_mse",
    "res_var",
    "skill_last_value",
    "skill_seasonal_naive",
    "beats_last_value",
    "beats_seasonal_naive",
    "summary",
}


def _seasonal_series(rng, n=200, season=12):
    t = np.arange(n)
    return 3 * np.sin(2 * np.pi * t / season) + 0.02 * t + 0.3 * rng.normal(size=n)


@pytest.mark.parametrize("horizon", [1, 3])
def test_forecast_scores_against_oracle(rng, horizon):
    y = _seasonal_series(rng)
    p = y + rng.normal(scale=0.4, size=y.size)
    s = forecast_scores(y, p, season=12, horizon=horizon)
    assert set(s) == KEYS
    assert s["rmse"] == pytest.approx(oracle_rmse(y, p)[0], rel=1e-13)
    assert s["mae"] == pytest.approx(oracle_mae(y, p)[0], rel=1e-13)
    assert s["mase"] == pytest.approx(oracle_mase(y, p, 12)[0], rel=1e-13)
    assert s["res_mse"] == pytest.approx(res_mse(y, p), rel=1e-14)
    assert s["res_var"] == pytest.approx(res_var(y, p), rel=1e-14)
    last = oracle_skill(y, p, oracle_naive(y, 1, horizon), "mse")
    seasonal = oracle_skill(y, p, oracle_naive(y, 12, horizon), "mse")
    assert s["skill_last_value"] == pytest.approx(last, rel=1e-12)
    assert s["skill_seasonal_naive"] == pytest.approx(seasonal, rel=1e-12)
    assert s["beats_last_value"] is (last > 0)
    assert s["beats_seasonal_naive"] is (seasonal > 0)
    for key in KEYS - {"summary", "beats_last_value", "beats_seasonal_naive"}:
        assert type(s[key]) is float, key


def test_forecast_scores_without_season_and_with_y_train(rng):
    y = _seasonal_series(rng)
    p = y + rng.normal(scale=0.4, size=y.size)
    s = forecast_scores(y, p)
    assert set(s) == KEYS
    assert s["mase"] == pytest.approx(oracle_mase(y, p, 1)[0], rel=1e-13)
    assert s["skill_seasonal_naive"] is None and s["beats_seasonal_naive"] is None
    train = rng.normal(size=30)
    s = forecast_scores(y, p, season=12, y_train=train)
    assert s["mase"] == pytest.approx(oracle_mase(y, p, 12, train)[0], rel=1e-13)


def _scores_with_skills(rng, beat_last, beat_seasonal):
    """A daily cycle of hourly data, and forecasts with a constant squared error c²
    placed below, between or above the MSEs of the two naive forecasts."""
    t = np.arange(240)
    y = 3 * np.sin(2 * np.pi * t / 24) + 0.1 * rng.normal(size=t.size)
    mse_last = np.nanmean((y - naive_forecast(y)) ** 2)
    mse_seasonal = np.nanmean((y - naive_forecast(y, season=24)) ** 2)
    assert mse_seasonal < mse_last
    c2 = {
        (True, True): 0.5 * mse_seasonal,
        (True, False): math.sqrt(mse_seasonal * mse_last),
        (False, False): 2.0 * mse_last,
    }[beat_last, beat_seasonal]
    return y, y + math.sqrt(c2) * np.where(t % 2 == 0, 1.0, -1.0)


@pytest.mark.parametrize(
    "beat_last, beat_seasonal", [(True, True), (True, False), (False, False)]
)
def test_forecast_scores_summary_beat_and_not_beat(rng, beat_last, beat_seasonal):
    y, p = _scores_with_skills(rng, beat_last, beat_seasonal)
    s = forecast_scores(y, p, season=24)
    sl, ss = s["skill_last_value"], s["skill_seasonal_naive"]
    assert s["beats_last_value"] is beat_last and (sl > 0) is beat_last
    assert s["beats_seasonal_naive"] is beat_seasonal and (ss > 0) is beat_seasonal
    lv = f"the last-value forecast (MSE skill {sl:.2f})"
    sn = f"the seasonal-naive forecast with season 24 (MSE skill {ss:.2f})"
    expected = {
        (True, True): f"The model beats {lv} and {sn}.",
        (True, False): f"The model beats {lv} but does NOT beat {sn}.",
        (False, False): f"The model does NOT beat {lv} or {sn}.",
    }[beat_last, beat_seasonal]
    assert s["summary"] == expected


def test_forecast_scores_summary_not_last_but_seasonal(rng):
    # a random walk: the seasonal-naive forecast (7 steps back) is ~7x worse than the
    # last value; a forecast error c² between the two MSEs beats only the former
    y = np.cumsum(rng.normal(size=300))
    mse_last = np.nanmean((y - naive_forecast(y)) ** 2)
    mse_seasonal = np.nanmean((y - naive_forecast(y, season=7)) ** 2)
    assert mse_last < mse_seasonal
    c = math.sqrt(math.sqrt(mse_last * mse_seasonal))
    s = forecast_scores(y, y + c * np.where(np.arange(300) % 2, 1.0, -1.0), season=7)
    assert s["beats_last_value"] is False and s["beats_seasonal_naive"] is True
    assert s["summary"] == (
        f"The model does NOT beat the last-value forecast (MSE skill "
        f"{s['skill_last_value']:.2f}) but beats the seasonal-naive forecast with "
        f"season 7 (MSE skill {s['skill_seasonal_naive']:.2f})."
    )


def test_forecast_scores_summary_without_season(rng):
    y = np.cumsum(rng.normal(size=50))
    s = forecast_scores(y, y + 0.1)
    assert s["summary"] == (
        f"The model beats the last-value forecast (MSE skill "
        f"{s['skill_last_value']:.2f}); there is no seasonal-naive comparison (no "
        "season given)."
    )
    s = forecast_scores(y, y[::-1])
    assert s["summary"].startswith("The model does NOT beat the last-value forecast")
    assert s["summary"].endswith(
        "; there is no seasonal-naive comparison (no season given)."
    )


def test_forecast_scores_negative_skill_and_tiny_skill_formatting():
    y = np.array([0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0])
    ref = naive_forecast(y)  # error 1 everywhere after row 0
    p = np.where(np.isnan(ref), 0.0, ref) * 0.999 + 0.0005  # a hair better
    s = forecast_scores(y, p)
    assert 0 < s["skill_last_value"] < 0.005
    assert "(MSE skill 0.00)" not in s["summary"]
    assert f"(MSE skill {s['skill_last_value']:.1e})" in s["summary"]
    s = forecast_scores(y, np.full(8, 3.0))
    assert s["skill_last_value"] < 0
    assert "does NOT beat the last-value forecast (MSE skill -" in s["summary"]


def test_forecast_scores_undefined_skills(rng):
    # a series repeating exactly with period 4: the seasonal-naive forecast is exact
    y = np.tile([1.0, 3.0, 2.0, 5.0], 10)
    p = y + 0.1
    s = forecast_scores(y, p, season=4)
    assert s["skill_seasonal_naive"] is None and s["beats_seasonal_naive"] is None
    assert s["mase"] is None  # scale with season 4 is 0
    assert s["beats_last_value"] is True
    assert s["summary"].endswith(
        "but cannot be compared with the seasonal-naive forecast with season 4 (that "
        "forecast is exact on this series)."
    )
    # the seasonal-naive forecast reaches before the start everywhere
    y = np.cumsum(rng.normal(size=10))
    s = forecast_scores(y, y + 0.1, season=48)
    assert s["skill_seasonal_naive"] is None and s["mase"] is None
    assert "(the series is too short for it)" in s["summary"]
    # a constant series: both references exact, MASE undefined
    s = forecast_scores([2.0] * 6, [2.5] * 6, season=2)
    assert s["skill_last_value"] is None and s["skill_seasonal_naive"] is None
    assert s["summary"] == (
        "The model cannot be compared with the last-value forecast (that forecast is "
        "exact on this series) or the seasonal-naive forecast with season 2 (that "
        "forecast is exact on this series)."
    )


@pytest.mark.parametrize(
    "args, kwargs, match",
    [
        ((np.zeros((5, 2)), np.ones((5, 2))), {}, "1-D"),
        (([1.0], [2.0]), {}, "two samples"),
        (([1.0, np.nan, 2.0], [1.0, 2.0, 3.0]), {}, "NaN"),
        (([1.0, 2.0, 3.0], [1.0, 2.0]), {}, "shape"),
        (([1.0, 2.0, 3.0], [1.0, 2.0, 2.0]), {"season": 0}, "season"),
        (([1.0, 2.0, 3.0], [1.0, 2.0, 2.0]), {"horizon": 1.0}, "horizon"),
        (([1.0, 2.0, 3.0], [1.0, 2.0, 2.0]), {"y_train": [[1.0, 2.0]]}, "outputs"),
    ],
)
def test_forecast_scores_bad_input(args, kwargs, match):
    with pytest.raises(ValueError, match=match):
        forecast_scores(*args, **kwargs)
