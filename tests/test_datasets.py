import numpy as np
import pytest

from sklearn_orfit.datasets import make_abo_series, make_lagged


def test_abo_series_follows_its_recursion():
    x = make_abo_series(500, random_state=3)
    eps = x[1:] - 2 * x[:-1] / (1 + 0.8 * x[:-1] ** 2)
    assert x.shape == (500,) and abs(x[0]) < 1
    assert np.all(np.abs(eps) < 1) and abs(eps.mean()) < 0.1
    assert np.array_equal(x, make_abo_series(500, random_state=3))


def test_make_lagged_most_recent_first():
    X, y = make_lagged(np.arange(10.0), 3)
    assert X.shape == (7, 3)
    assert np.array_equal(X[0], [2.0, 1.0, 0.0]) and y[0] == 3.0
    assert np.array_equal(X[-1], [8.0, 7.0, 6.0]) and y[-1] == 9.0
    with pytest.raises(ValueError, match="n_lags"):
        make_lagged(np.arange(3.0), 3)


# ------------------------------------------------------------ horizon and exog
def _make_lagged_before_horizon(series, n_lags):
    """make_lagged as it was before ``horizon`` / ``exog`` (the regression reference)."""
    series = np.asarray(series, dtype=np.float64)
    windows = np.lib.stride_tricks.sliding_window_view(series[:-1], n_lags)
    return np.ascontiguousarray(windows[:, ::-1]), series[n_lags:].copy()


def _lagged_oracle(series, n_lags, horizon=1, exog=None):
    """Plain loops: one row per time t of its most recent lag, target series[t + h]."""
    n = len(series)
    cols = [] if exog is None else [list(c) for c in np.asarray(exog, float).reshape(n, -1).T]
    X, y = [], []
    for t in range(n_lags - 1, n - horizon):
        row = [series[t - j] for j in range(n_lags)]
        for col in cols:
            row += [col[t - j] for j in range(n_lags)]
        X.append(row)
        y.append(series[t + horizon])
    return np.array(X, dtype=float), np.array(y, dtype=float)


@pytest.mark.parametrize("n_lags", [1, 2, 5])
@pytest.mark.parametrize("n", [7, 20, 41])
def test_make_lagged_horizon_one_is_the_previous_output_bit_for_bit(n_lags, n):
    series = np.random.default_rng(n * 10 + n_lags).normal(size=n) * 1e3
    X, y = make_lagged(series, n_lags, horizon=1)
    X_old, y_old = _make_lagged_before_horizon(series, n_lags)
    assert X.tobytes() == X_old.tobytes() and X.shape == X_old.shape
    assert y.tobytes() == y_old.tobytes() and y.shape == y_old.shape
    assert X.flags.c_contiguous and X.dtype == np.float64
    X_def, y_def = make_lagged(series, n_lags)  # the default is horizon=1
    assert X_def.tobytes() == X.tobytes() and y_def.tobytes() == y.tobytes()


@pytest.mark.parametrize(
    "n_lags, horizon, exog_shape",
    [(1, 1, None), (3, 2, None), (2, 5, None), (1, 3, (30,)), (3, 1, (30,)),
     (2, 2, (30, 1)), (3, 4, (30, 3)), (4, 7, (30, 2)), (1, 1, (30, 4))],
)
def test_make_lagged_matches_loop_oracle(n_lags, horizon, exog_shape):
    rng = np.random.default_rng(n_lags * 100 + horizon)
    series = rng.normal(size=30)
    exog = None if exog_shape is None else rng.normal(size=exog_shape)
    X, y = make_lagged(series, n_lags, horizon=horizon, exog=exog)
    X_ref, y_ref = _lagged_oracle(series, n_lags, horizon, exog)
    n_exog = 0 if exog is None else (1 if exog.ndim == 1 else exog.shape[1])
    assert X.shape == (30 - n_lags - horizon + 1, n_lags * (1 + n_exog))
    assert y.shape == (30 - n_lags - horizon + 1,)
    np.testing.assert_array_equal(X, X_ref)
    np.testing.assert_array_equal(y, y_ref)


def test_make_lagged_layout_by_hand():
    series = np.arange(8.0)
    exog = np.column_stack([100.0 + np.arange(8.0), 200.0 + np.arange(8.0)])
    X, y = make_lagged(series, 2, horizon=3, exog=exog)
    # first row: t = 1; target series[4]; exog column 0's lags, then column 1's
    np.testing.assert_array_equal(X[0], [1.0, 0.0, 101.0, 100.0, 201.0, 200.0])
    np.testing.assert_array_equal(X[-1], [4.0, 3.0, 104.0, 103.0, 204.0, 203.0])
    np.testing.assert_array_equal(y, [4.0, 5.0, 6.0, 7.0])
    # exog as a list and a 1-D exog equal a one-column exog
    X1, _ = make_lagged(series, 2, horizon=3, exog=list(exog[:, 0]))
    X2, _ = make_lagged(series, 2, horizon=3, exog=exog[:, :1])
    np.testing.assert_array_equal(X1, X2)
    np.testing.assert_array_equal(X1, X[:, :4])


def test_make_lagged_does_not_alias_its_inputs():
    series, exog = np.arange(10.0), np.arange(10.0)[:, None] * 2
    X, y = make_lagged(series, 3, horizon=2, exog=exog)
    X[:] = -1.0
    y[:] = -1.0
    np.testing.assert_array_equal(series, np.arange(10.0))
    np.testing.assert_array_equal(exog[:, 0], np.arange(10.0) * 2)


@pytest.mark.parametrize("n_lags, horizon", [(1, 1), (3, 1), (1, 4), (3, 4)])
def test_make_lagged_shortest_series(n_lags, horizon):
    n = n_lags + horizon
    X, y = make_lagged(np.arange(float(n)), n_lags, horizon=horizon)
    assert X.shape == (1, n_lags) and y.tolist() == [n - 1.0]
    with pytest.raises(ValueError, match=f"has {n - 1} values; at least n_lags \\+ horizon "
                                         f"= {n} are needed"):
        make_lagged(np.arange(float(n - 1)), n_lags, horizon=horizon)


def test_make_lagged_accepts_numpy_integer_horizon():
    series = np.arange(12.0)
    X, y = make_lagged(series, 2, horizon=np.int64(3))
    X_ref, y_ref = make_lagged(series, 2, horizon=3)
    np.testing.assert_array_equal(X, X_ref)
    np.testing.assert_array_equal(y, y_ref)


@pytest.mark.parametrize("horizon", [0, -1, True, False, np.True_, 1.0, 2.5, "2", None])
def test_make_lagged_rejects_bad_horizon(horizon):
    with pytest.raises(ValueError, match="horizon must be an int >= 1"):
        make_lagged(np.arange(20.0), 2, horizon=horizon)


@pytest.mark.parametrize(
    "exog, match",
    [
        (np.zeros(19), "exog has 19 rows but series has 20"),
        (np.zeros((21, 2)), "exog has 21 rows but series has 20"),
        (np.zeros((20, 2, 1)), "exog must be 1-D or 2-D"),
        (np.float64(1.0), "exog must be 1-D or 2-D"),
        (np.where(np.arange(20) == 7, np.nan, 0.0), "NaN or infinite"),
        (np.where(np.arange(40).reshape(20, 2) == 39, np.inf, 0.0), "NaN or infinite"),
        (np.where(np.arange(20) == 0, -np.inf, 0.0), "NaN or infinite"),
        (np.array(["a"] * 20), "exog must be numeric"),
    ],
)
def test_make_lagged_rejects_bad_exog(exog, match):
    with pytest.raises(ValueError, match=match):
        make_lagged(np.arange(20.0), 2, horizon=2, exog=exog)


def test_make_lagged_rejects_bad_series():
    with pytest.raises(ValueError, match="series must be 1-D"):
        make_lagged(np.zeros((10, 2)), 2)
    with pytest.raises(ValueError, match=r"'n_lags' parameter of make_lagged must be an int "
                                         r"in the range \[1, inf\)\. Got 0"):
        make_lagged(np.zeros(10), 0, horizon=2)


@pytest.mark.parametrize("n_lags", [2.5, 2.0, "2", None])
def test_make_lagged_refuses_a_non_integer_n_lags(n_lags):
    # was int(n_lags): 2.5 silently gave 2 lags, "2" two lags
    with pytest.raises(ValueError, match="'n_lags' parameter of make_lagged must be an int"):
        make_lagged(np.arange(10.0), n_lags)


@pytest.mark.parametrize("n_lags, horizon", [(1, 1), (3, 2), (2, 5)])
def test_make_lagged_has_no_look_ahead(n_lags, horizon):
    # row i's features are known at t = i + n_lags - 1: changing series[j] or exog[j]
    # for any j > t leaves them unchanged (the target, series[t + horizon], may change)
    rng = np.random.default_rng(horizon)
    n = 25
    series, exog = rng.normal(size=n), rng.normal(size=(n, 2))
    X, y = make_lagged(series, n_lags, horizon=horizon, exog=exog)
    for j in range(n):
        s2, e2 = series.copy(), exog.copy()
        s2[j] += 10.0
        e2[j] -= 10.0
        X2, y2 = make_lagged(s2, n_lags, horizon=horizon, exog=e2)
        for i in range(X.shape[0]):
            t = i + n_lags - 1
            if j > t or j <= t - n_lags:
                np.testing.assert_array_equal(X2[i], X[i])
            else:  # a lag of row i: the change is seen
                assert not np.array_equal(X2[i], X[i])
            assert (y2[i] != y[i]) == (j == t + horizon)
