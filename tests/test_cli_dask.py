"""``sklearn-orfit forecast --backend dask --scheduler ADDRESS``: the series of a
several-column forecast on an existing dask cluster give the sequential run's results.

Skipped when the optional packages dask and distributed are not installed.
"""

import json
import warnings

import numpy as np
import pytest

from sklearn_orfit.cli import _main as _cli

distributed = pytest.importorskip("distributed")

from test_cli_forecasting import SMALL, make_columns, write_csv  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded workers in this process, reached over TCP like a remote
    cluster (in-process workers start in a fraction of a second; worker processes would
    cost seconds and are not what is being tested)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                      protocol="tcp", host="127.0.0.1",
                                      dashboard_address=None) as c:
            yield c


def run_json(argv, capsys):
    status = _cli.main([str(a) for a in argv])
    out, err = capsys.readouterr()
    assert status == 0, err
    return json.loads(out)


def test_dask_equals_sequential(tmp_path, capsys, cluster):
    write_csv(tmp_path / "all.csv", make_columns())
    argv = ["--csv", tmp_path / "all.csv", "--column", "all", "--horizon", 2, *SMALL,
            "--output-dir", tmp_path / "seq", "--json"]
    sequential = run_json(argv, capsys)
    on_dask = run_json([*argv[:-3], "--output-dir", tmp_path / "dask", "--json",
                        "--backend", "dask", "--scheduler", cluster.scheduler_address],
                       capsys)
    assert on_dask["settings"]["backend"] == "dask"
    # the series were computed by the cluster's workers
    assert any("_forecast_task" in k for k in cluster.scheduler.task_prefixes)
    assert [s["name"] for s in on_dask["series"]] == ["a", "b", "temp"]
    for a, b in zip(sequential["series"], on_dask["series"]):
        for key in ("rmse", "mae", "mase", "skill_last_value", "skill_seasonal_naive",
                    "res_mse", "res_var", "summary"):
            assert a[key] == b[key], key
        # the forecasts themselves, bit for bit
        fa = np.loadtxt(a["predictions"], delimiter=",", skiprows=1, usecols=(0, 3))
        fb = np.loadtxt(b["predictions"], delimiter=",", skiprows=1, usecols=(0, 3))
        np.testing.assert_array_equal(fa, fb)


def test_scheduler_implies_dask_and_the_ensemble_uses_it(tmp_path, capsys, cluster):
    """--scheduler alone selects dask; the ensemble's partitions (--n-jobs, the same
    workers) run there too and give the sequential forecasts."""
    write_csv(tmp_path / "all.csv", make_columns())
    argv = ["--csv", tmp_path / "all.csv", "--column", "a", "--model", "ensemble",
            "--n-partitions", 2, *SMALL, "--no-save"]
    sequential = run_json([*argv, "--json"], capsys)
    before = set(cluster.scheduler.task_prefixes)
    on_dask = run_json([*argv, "--json", "--n-jobs", 2, "--scheduler",
                        cluster.scheduler_address], capsys)
    assert on_dask["settings"]["backend"] == "dask"
    assert set(cluster.scheduler.task_prefixes) - before  # the partitions ran there
    assert sequential["series"][0]["res_mse"] == on_dask["series"][0]["res_mse"]
