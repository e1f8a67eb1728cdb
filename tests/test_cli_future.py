"""``sklearn-orfit forecast`` forecasts the future: the next ``--horizon`` values after
the data, with time stamps and prediction intervals, known-future exogenous columns
(``--exog-future``), the saved model as a forecaster object, and ``--load-model``'s
check of the rows it has already learned.

In-process runs on small synthetic CSV files with small models.
"""

import csv
import json

import joblib
import numpy as np
import pytest

from sklearn_orfit import _forecast_models as fm
from sklearn_orfit import forecasting as fp
from sklearn_orfit.cli import _experiments as ex
from sklearn_orfit.cli import _main as _cli
from sklearn_orfit.cli import _run
from sklearn_orfit.cli._model import SavedForecast

SMALL = ["--n-components", 64, "--window-size", 20, "--n-lags", 4, "--quiet", "--no-plot",
         "--chunk-size", 50, "--calibration", 100]
N = 240
STEP = np.timedelta64(1, "h")
TIMES = np.datetime64("2024-01-01T00:00") + np.arange(N + 48) * STEP


def columns(n=N, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n)
    return {"a": 100.0 + 10.0 * np.sin(2 * np.pi * t / 24) + rng.normal(scale=0.5, size=n),
            "temp": 20.0 + rng.normal(scale=3.0, size=n)}


def write(path, cols, *, rows=None, times=TIMES, future=None):
    """A CSV of ``cols`` (positions ``rows``), then optional ``future`` rows: a dict of
    the known-future columns' values, the other columns left empty."""
    names = list(cols)
    n = len(cols[names[0]])
    rows = range(n) if rows is None else rows
    with open(path, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["time", *names])
        for i in rows:
            w.writerow([str(times[i]), *(repr(float(cols[c][i])) for c in names)])
        if future:
            k = len(next(iter(future.values())))
            for j in range(k):
                w.writerow([str(times[rows[-1] + 1 + j]),
                            *(repr(float(future[c][j])) if c in future else ""
                              for c in names)])
    return path


def run(argv, capsys):
    status = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def one_line_error(status, err, *fragments):
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sklearn-orfit: error: "), err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@pytest.fixture
def series_csv(tmp_path):
    return write(tmp_path / "s.csv", {"a": columns()["a"]})


# ------------------------------------------------------------------ the future CSV
def test_future_csv_has_the_next_h_values_with_times_and_intervals(tmp_path, series_csv,
                                                                   capsys):
    status, out, err = run(["--csv", series_csv, *SMALL, "--horizon", 6, "--output-dir",
                            tmp_path / "o"], capsys)
    assert status == 0, err
    rows = read_rows(tmp_path / "o" / "forecast_s_a_abo_future.csv")
    assert [r["step"] for r in rows] == [str(k) for k in range(1, 7)]
    # the time stamps continue the input's (step inferred: one hour)
    assert [r["time"] for r in rows] == [str(t) for t in TIMES[N:N + 6]]
    assert [int(r["position"]) for r in rows] == list(range(N, N + 6))
    f = np.array([float(r["forecast"]) for r in rows])
    lo80, hi80 = (np.array([float(r[k]) for r in rows]) for k in ("lower_80", "upper_80"))
    lo95, hi95 = (np.array([float(r[k]) for r in rows]) for k in ("lower_95", "upper_95"))
    assert np.all(np.isfinite(f)) and np.all(lo95 <= lo80) and np.all(lo80 < f)
    assert np.all(f < hi80) and np.all(hi80 <= hi95)
    # a forecast of this series' daily cycle: closer to it than its mean is
    truth = 100.0 + 10.0 * np.sin(2 * np.pi * np.arange(N, N + 6) / 24)
    assert np.sqrt(np.mean((f - truth) ** 2)) < 0.75 * np.sqrt(np.mean((100 - truth) ** 2))
    assert "future: the next 6 values after 2024-01-10T23:00 (step 1 h)" in out
    assert "future forecast: " in out and "_future.csv" in out
    assert "coverage of the step-6 intervals" in out


def test_level_flag_sets_the_intervals(tmp_path, series_csv, capsys):
    status, out, err = run(["--csv", series_csv, *SMALL, "--level", 90, 50, "--json",
                            "--output-dir", tmp_path / "o"], capsys)
    assert status == 0, err
    doc = json.loads(out)
    fut = doc["series"][0]["future"]
    assert sorted(fut["intervals"]) == ["50", "90"]
    (lo50, hi50), = fut["intervals"]["50"]
    (lo90, hi90), = fut["intervals"]["90"]
    assert lo90 < lo50 < fut["forecast"][0] < hi50 < hi90
    assert doc["series"][0]["future"]["times"] == [str(TIMES[N])]
    header = list(read_rows(tmp_path / "o" / "forecast_s_a_abo_future.csv")[0])
    assert header == ["step", "position", "time", "forecast", "lower_50", "upper_50",
                      "lower_90", "upper_90"]
    status, _, err = run(["--csv", series_csv, *SMALL, "--level", 100], capsys)
    one_line_error(status, err, "--level")


def test_the_intervals_cover_about_their_level(tmp_path, capsys):
    """On a stationary noisy series the intervals' coverage over the values they were
    issued for is near the nominal levels (not 100 %: they are not just wide)."""
    rng = np.random.default_rng(3)
    n = 700
    t = np.arange(n)
    y = 50.0 + 5.0 * np.sin(2 * np.pi * t / 24) + rng.normal(size=n)
    times = np.datetime64("2024-01-01T00:00") + np.arange(n) * STEP
    write(tmp_path / "s.csv", {"a": y}, times=times)
    status, out, err = run(["--csv", tmp_path / "s.csv", *SMALL[:-1], "500", "--json",
                            "--no-save"], capsys)
    assert status == 0, err
    fut = json.loads(out)["series"][0]["future"]
    assert fut["n_calibration"] > 400
    assert abs(fut["empirical_coverage"]["80"] - 0.8) < 0.06
    assert abs(fut["empirical_coverage"]["95"] - 0.95) < 0.04


def test_no_time_stamps_gives_positions(tmp_path, capsys):
    path = tmp_path / "p.csv"
    with open(path, "w", encoding="utf-8") as fh:
        fh.write("a\n" + "\n".join(repr(float(v)) for v in columns()["a"]) + "\n")
    status, out, err = run(["--csv", path, *SMALL, "--horizon", 2, "--output-dir",
                            tmp_path / "o"], capsys)
    assert status == 0, err
    rows = read_rows(tmp_path / "o" / "forecast_p_a_abo_future.csv")
    assert [r["time"] for r in rows] == ["", ""]
    assert [r["position"] for r in rows] == [str(N), str(N + 1)]
    assert f"after position {N - 1}" in out


def test_figure_shows_the_last_week_and_the_future_band(tmp_path, series_csv, capsys,
                                                        monkeypatch):
    seen = {}

    def capture(result, path, **kwargs):
        seen.update(kwargs)

    monkeypatch.setattr(ex, "plot_forecast", capture)
    argv = [a for a in SMALL if a != "--no-plot"]
    status, _, err = run(["--csv", series_csv, *argv, "--horizon", 5, "--output-dir",
                          tmp_path / "o"], capsys)
    assert status == 0, err
    assert seen["last"] == 7 * 24  # a week of hourly values
    fut = seen["future"]
    np.testing.assert_array_equal(fut["x"], TIMES[N:N + 5])
    assert fut["forecast"].shape == (5,) and fut["intervals"].shape == (5, 2, 2)
    assert fut["levels"] == [80.0, 95.0]


def test_figure_is_drawn_with_the_band(tmp_path, series_csv, capsys):
    pytest.importorskip("matplotlib")
    argv = [a for a in SMALL if a != "--no-plot"]
    status, _, err = run(["--csv", series_csv, *argv, "--horizon", 3, "--output-dir",
                            tmp_path / "o"], capsys)
    assert status == 0, err
    png = tmp_path / "o" / "forecast_s_a_abo.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# ------------------------------------------------------------------ --exog-future
def known_future_series(n=N, seed=0):
    """``a`` is mostly 4 · temp at the same time (temp itself is noise): only a model
    that sees temp at the target time can forecast it."""
    rng = np.random.default_rng(seed)
    temp = rng.normal(scale=3.0, size=n + 10)
    a = 100.0 + 4.0 * temp + rng.normal(scale=0.3, size=n + 10)
    return a, temp


def test_exog_future_uses_the_value_at_the_target_time(tmp_path, capsys):
    a, temp = known_future_series()
    write(tmp_path / "k.csv", {"a": a[:N], "temp": temp[:N]},
          future={"temp": temp[N:N + 3]})
    write(tmp_path / "data.csv", {"a": a[:N], "temp": temp[:N]})
    common = ["--column", "a", *SMALL, "--horizon", 3, "--model", "qrd-rls", "--json",
              "--no-save"]
    past = run(["--csv", tmp_path / "data.csv", *common, "--exog", "temp"], capsys)
    future = run(["--csv", tmp_path / "k.csv", *common, "--exog-future", "temp"], capsys)
    assert past[0] == 0 and future[0] == 0, (past[2], future[2])
    rmse_past = json.loads(past[1])["series"][0]["rmse"]
    doc = json.loads(future[1])
    rmse_future = doc["series"][0]["rmse"]
    assert rmse_future < 0.3 * rmse_past  # the backtest's rows hold temp at t + 3
    assert doc["settings"]["exog_future"] == ["temp"] and doc["settings"]["exog"] == []
    # the forecast of the future follows the future rows' temp
    fut = doc["series"][0]["future"]
    np.testing.assert_allclose(fut["forecast"], 100.0 + 4.0 * temp[N:N + 3], atol=3.0)
    assert fut["times"] == [str(t) for t in TIMES[N:N + 3]]
    assert doc["series"][0]["n_values"] == N  # the future rows are not data


def test_exog_future_rows_change_the_forecast(tmp_path, capsys):
    a, temp = known_future_series()
    outs = []
    for shift in (0.0, 5.0):
        write(tmp_path / "k.csv", {"a": a[:N], "temp": temp[:N]},
              future={"temp": temp[N:N + 2] + shift})
        status, out, err = run(["--csv", tmp_path / "k.csv", "--column", "a", *SMALL,
                                "--horizon", 2, "--model", "qrd-rls", "--exog-future",
                                "temp", "--json", "--no-save"], capsys)
        assert status == 0, err
        outs.append(np.array(json.loads(out)["series"][0]["future"]["forecast"]))
    np.testing.assert_allclose(outs[1] - outs[0], 20.0, rtol=0.2)  # 4 × 5


def test_exog_future_errors(tmp_path, capsys):
    a, temp = known_future_series()
    write(tmp_path / "k.csv", {"a": a[:N], "temp": temp[:N]},
          future={"temp": temp[N:N + 2]})
    common = ["--csv", tmp_path / "k.csv", "--column", "a", *SMALL, "--no-save"]
    status, _, err = run([*common, "--exog-future", "temp", "--horizon", 3], capsys)
    one_line_error(status, err, "--exog-future", "next 3 values", "2 future row(s)")
    status, _, err = run([*common, "--exog-future", "temp", "--exog", "temp"], capsys)
    one_line_error(status, err, "both --exog and --exog-future")
    status, _, err = run(["--exog-future", "temp", "--quiet", "--no-save"], capsys)
    one_line_error(status, err, "--exog-future needs --csv")
    # a future row without its known-future value
    with open(tmp_path / "k.csv", "a", encoding="utf-8") as fh:
        fh.write(f"{TIMES[N + 2]},,\n")
    status, _, err = run([*common, "--exog-future", "temp"], capsys)
    one_line_error(status, err, "--exog-future column 'temp' is missing", "future row")


# ------------------------------------------------------------------ the saved model
def test_saved_model_is_a_forecaster_usable_from_python(tmp_path, series_csv, capsys):
    model = tmp_path / "m.joblib"
    status, _, err = run(["--csv", series_csv, *SMALL, "--horizon", 4, "--output-dir",
                          tmp_path / "o", "--save-model", model], capsys)
    assert status == 0, err
    rows = read_rows(tmp_path / "o" / "forecast_s_a_abo_future.csv")
    saved = joblib.load(model)
    assert isinstance(saved, SavedForecast) and saved.series == ["a"]
    # predict from Python: the command line's future forecast, exactly
    np.testing.assert_array_equal(saved.predict(), [float(r["forecast"]) for r in rows])
    intervals = saved.predict_interval()
    assert intervals.shape == (4, 2, 2)
    np.testing.assert_array_equal(intervals[:, 1, 1], [float(r["upper_95"]) for r in rows])
    np.testing.assert_array_equal(saved.future_times(), TIMES[N:N + 4])
    assert saved.predict(2).shape == (2,)
    # the forecaster continues in Python
    fc = saved.forecasters["a"]
    before = fc.n_samples_seen_
    fc.update(columns(seed=5)["a"][:10])
    assert fc.n_samples_seen_ == before + 10 and np.all(np.isfinite(fc.predict()))


def test_load_model_continues_the_saved_forecaster(tmp_path, capsys):
    """The continued run's future forecast is that of the saved forecaster updated in
    Python with the new values (the stream continues; it is not learned afresh)."""
    cols = columns()
    write(tmp_path / "p1.csv", cols, rows=range(200))
    write(tmp_path / "p2.csv", cols, rows=range(200, N))
    model = tmp_path / "m.joblib"
    common = ["--column", "a", "--exog", "temp", "--horizon", 2]
    status, _, err = run(["--csv", tmp_path / "p1.csv", *common, *SMALL, "--no-save",
                          "--save-model", model], capsys)
    assert status == 0, err
    expected = joblib.load(model).forecasters["a"]
    expected.update(cols["a"][200:], cols["temp"][200:, None])
    status, out, err = run(["--csv", tmp_path / "p2.csv", "--load-model", model,
                            "--quiet", "--no-plot", "--output-dir", tmp_path / "o"],
                           capsys)
    assert status == 0, err
    assert "continued the saved stream" in out
    rows = read_rows(tmp_path / "o" / "forecast_p2_a_abo_future.csv")
    np.testing.assert_array_equal([float(r["forecast"]) for r in rows],
                                  expected.predict())
    assert [r["time"] for r in rows] == [str(t) for t in TIMES[N:N + 2]]


def test_load_model_refuses_or_skips_the_rows_it_has_learned(tmp_path, capsys):
    cols = columns()
    write(tmp_path / "p1.csv", cols, rows=range(200))
    write(tmp_path / "overlap.csv", cols, rows=range(150, N))
    write(tmp_path / "p2.csv", cols, rows=range(200, N))
    model = tmp_path / "m.joblib"
    status, _, err = run(["--csv", tmp_path / "p1.csv", "--column", "a", *SMALL,
                          "--no-save", "--save-model", model], capsys)
    assert status == 0, err
    status, _, err = run(["--csv", tmp_path / "overlap.csv", "--load-model", model,
                          "--quiet", "--no-save"], capsys)
    one_line_error(status, err, f"has learned the values up to {TIMES[199]}",
                   "50 row(s)", "--skip-seen")
    # skipped: the same forecasts as a file holding only the new rows
    outs = {}
    for name, extra in (("overlap", ["--skip-seen"]), ("p2", [])):
        status, out, err = run(["--csv", tmp_path / f"{name}.csv", "--load-model", model,
                                "--quiet", "--no-plot", *extra, "--output-dir",
                                tmp_path / name], capsys)
        assert status == 0, err
        outs[name] = out
        rows = read_rows(tmp_path / name / f"forecast_{name}_a_abo.csv")
        outs[name, "forecasts"] = [r["forecast"] for r in rows]
        outs[name, "future"] = [r["forecast"] for r in read_rows(
            tmp_path / name / f"forecast_{name}_a_abo_future.csv")]
    assert "note: --skip-seen: skipped the first 50 row(s)" in outs["overlap"]
    assert outs["overlap", "forecasts"] == outs["p2", "forecasts"]
    assert outs["overlap", "future"] == outs["p2", "future"]
    # nothing new
    status, _, err = run(["--csv", tmp_path / "p1.csv", "--load-model", model, "--quiet",
                          "--no-save", "--skip-seen"], capsys)
    one_line_error(status, err, "every row of the input (200)", "nothing new")
    status, _, err = run(["--csv", tmp_path / "p1.csv", "--quiet", "--no-save",
                          "--skip-seen"], capsys)
    one_line_error(status, err, "--skip-seen needs --load-model")


def test_load_model_refuses_a_forecaster_updated_elsewhere(tmp_path, series_csv, capsys):
    model = tmp_path / "m.joblib"
    status, _, err = run(["--csv", series_csv, *SMALL, "--no-save", "--save-model", model],
                         capsys)
    assert status == 0, err
    saved = joblib.load(model)
    saved.forecasters["a"].update(np.ones(3) * 100.0)
    joblib.dump(saved, model)
    write(tmp_path / "new.csv", {"a": columns(seed=2)["a"]},
          times=TIMES + 1000 * STEP)
    status, _, err = run(["--csv", tmp_path / "new.csv", "--load-model", model, "--quiet",
                          "--no-save"], capsys)
    one_line_error(status, err, "has learned", "values, not the", "updated from Python")


def test_saved_exog_future_and_levels_are_kept(tmp_path, capsys):
    a, temp = known_future_series()
    write(tmp_path / "k1.csv", {"a": a[:200], "temp": temp[:200]})
    write(tmp_path / "k2.csv", {"a": a[200:N], "temp": temp[200:N]}, rows=range(40),
          times=TIMES[200:], future={"temp": temp[N:N + 2]})
    model = tmp_path / "m.joblib"
    status, _, err = run(["--csv", tmp_path / "k1.csv", "--column", "a", *SMALL,
                          "--model", "qrd-rls", "--exog-future", "temp", "--level", 70,
                          "--horizon", 2, "--no-save", "--save-model", model], capsys)
    # the first piece has no future rows: its future forecast cannot be made
    one_line_error(status, err, "--exog-future", "0 future row(s)")
    write(tmp_path / "k1.csv", {"a": a[:200], "temp": temp[:200]},
          future={"temp": temp[200:202]})
    status, _, err = run(["--csv", tmp_path / "k1.csv", "--column", "a", *SMALL,
                          "--model", "qrd-rls", "--exog-future", "temp", "--level", 70,
                          "--horizon", 2, "--no-save", "--save-model", model], capsys)
    assert status == 0, err
    saved = joblib.load(model)
    assert saved.exog_future == ["temp"] and saved.settings["levels"] == [70.0]
    assert saved.predict_interval(X_future=temp[200:202, None]).shape == (2, 1, 2)
    status, out, err = run(["--csv", tmp_path / "k2.csv", "--load-model", model, "--json",
                            "--no-save"], capsys)
    assert status == 0, err
    fut = json.loads(out)["series"][0]["future"]
    assert list(fut["intervals"]) == ["70"]
    np.testing.assert_allclose(fut["forecast"], 100.0 + 4.0 * temp[N:N + 2], atol=3.0)
    status, _, err = run(["--csv", tmp_path / "k2.csv", "--load-model", model, "--level",
                          80, "--no-save", "--quiet"], capsys)
    one_line_error(status, err, "--levels [80.0] conflicts", "--levels [70.0]")


# ------------------------------------------------------------------ --model aggregate
EXPERTS = "abo_windows=20,60;sigmas=1;n_components=32;krls_windows=20"


def test_aggregate_prints_weights_and_family_shares(tmp_path, series_csv, capsys):
    argv = ["--csv", series_csv, *SMALL, "--model", "aggregate", "--experts", EXPERTS,
            "--no-save"]
    status, out, err = run(argv, capsys)
    assert status == 0, err
    assert "AggregatingRegressor(BOA over 3 experts: 2 ABO (N ∈ {20, 60}" in out
    assert "aggregate: final weights (3 experts): " in out
    assert "ABO share of the weight over the" in out and "SW-KRLS share" in out
    doc = json.loads(run([*argv, "--json"], capsys)[1])
    rep = doc["series"][0]["aggregate"]
    assert sorted(rep["weights"]) == ["abo-N20-s1-D32", "abo-N60-s1-D32", "krls-N20-l1"]
    assert abs(sum(rep["weights"].values()) - 1.0) < 1e-9
    abo, krls = rep["family_share"]["abo"], rep["family_share"]["sw-krls"]
    assert len(abo["quarters"]) == 4
    np.testing.assert_allclose(np.add(abo["quarters"], krls["quarters"]), 1.0)
    assert abs(abo["final"] + krls["final"] - 1.0) < 1e-9
    # (a row is learned once its target is known: the last value's row, not forecast
    # by the backtest, is learned too)
    assert rep["n_rows"] == doc["series"][0]["n_forecasts"] + 1
    assert doc["settings"]["experts"] == EXPERTS


def test_aggregate_forecasts_are_the_aggregating_regressors(tmp_path, series_csv, capsys):
    """The backtest of --model aggregate is AggregatingRegressor over make_expert_grid
    on the forecaster's rows (behind its running standardisation), run prequentially."""
    from sklearn_orfit import AggregatingRegressor, make_expert_grid, prequential_predict

    status, out, err = run(["--csv", series_csv, *SMALL, "--model", "aggregate",
                            "--experts", EXPERTS, "--output-dir", tmp_path / "o"], capsys)
    assert status == 0, err
    rows = read_rows(tmp_path / "o" / "forecast_s_a_aggregate.csv")
    problem = fp._Problem(columns()["a"], None, transform="none", n_lags=4, horizon=1)
    grid = make_expert_grid(abo_windows=(20, 60), sigmas=(1.0,), n_components=(32,),
                            krls_windows=(20,), random_state=0)
    agg = fp._forecaster_regressor(AggregatingRegressor(grid, history_size=None))
    y_pred = prequential_predict(agg, problem.X, problem.y)
    # the first row is learned before the first forecast, of the second row's target
    assert int(rows[0]["position"]) == problem.index[1]
    np.testing.assert_allclose([float(r["forecast"]) for r in rows],
                               problem.to_units(y_pred[1:], slice(1, None)), rtol=1e-9)


def test_aggregate_default_grid_and_errors(tmp_path, series_csv, capsys):
    from argparse import Namespace

    text = _run._aggregate_description(Namespace(experts=None))
    assert "8 experts: 4 ABO (N ∈ {50, 200}, σ ∈ {0.5, 1}, D ∈ {1024})" in text
    assert "4 SW-KRLS (N ∈ {50, 200}, s = 1/σ)" in text
    agg = fm.make_forecast_model("aggregate")
    assert [name for name, _ in agg.estimators] == [
        "abo-N50-s0.5-D1024", "abo-N200-s0.5-D1024", "abo-N50-s1-D1024",
        "abo-N200-s1-D1024", "krls-N50-l2", "krls-N50-l1", "krls-N200-l2",
        "krls-N200-l1"]
    for experts, fragment in (("abo_window=20", "is not 'name=v1,v2'"),
                              ("abo_windows=a", "needs integers"),
                              ("abo_windows=;krls_windows=", "has no expert"),
                              ("sigmas=-1", "positive values")):
        status, _, err = run(["--csv", series_csv, *SMALL, "--model", "aggregate",
                              "--experts", experts, "--no-save"], capsys)
        one_line_error(status, err, "--experts", fragment)
    status, _, err = run(["--csv", series_csv, *SMALL, "--experts", EXPERTS, "--no-save"],
                         capsys)
    one_line_error(status, err, "--experts is the expert grid of --model aggregate")


def test_aggregate_saved_and_loaded(tmp_path, series_csv, capsys):
    model = tmp_path / "m.joblib"
    status, _, err = run(["--csv", series_csv, *SMALL, "--model", "aggregate", "--experts",
                          EXPERTS, "--no-save", "--save-model", model], capsys)
    assert status == 0, err
    saved = joblib.load(model)
    assert saved.settings["model"] == "aggregate" and saved.settings["experts"] == EXPERTS
    assert np.all(np.isfinite(saved.predict()))
    write(tmp_path / "new.csv", {"a": columns(seed=4)["a"]}, rows=range(0, 30),
          times=TIMES + N * STEP)
    status, out, err = run(["--csv", tmp_path / "new.csv", "--load-model", model,
                            "--quiet", "--no-save"], capsys)
    assert status == 0, err
    assert "aggregate: final weights (3 experts)" in out
