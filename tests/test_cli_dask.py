"""``sklearn-orfit forecast --backend dask --scheduler ADDRESS``: the series of a
several-column forecast on an existing dask cluster give the sequential run's results.

Skipped when the optional packages dask and distributed are not installed.
"""

import json
import warnings

import numpy as np
import pytest

from sklearn_orfit.cli import _main as _cli
from sklearn_orfit.cli import _workers

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
    # --calibration 20 (its least): after the scored run the future forecaster learns
    # the series' last values one row at a time, each row a predict and a partial_fit
    # sent to the workers (about 70 ms a row here); with the default 500 it learned all
    # 240 values, 19 s of this test's 23 s. The scored run, whose res_mse is compared,
    # is the same.
    argv = ["--csv", tmp_path / "all.csv", "--column", "a", "--model", "ensemble",
            "--n-partitions", 2, *SMALL, "--calibration", 20, "--no-save"]
    sequential = run_json([*argv, "--json"], capsys)
    before = set(cluster.scheduler.task_prefixes)
    on_dask = run_json([*argv, "--json", "--n-jobs", 2, "--scheduler",
                        cluster.scheduler_address], capsys)
    assert on_dask["settings"]["backend"] == "dask"
    assert set(cluster.scheduler.task_prefixes) - before  # the partitions ran there
    assert sequential["series"][0]["res_mse"] == on_dask["series"][0]["res_mse"]


def _worker_processes(address, n):
    """``n`` dask workers in processes of their own (no nanny, so a killed worker is not
    restarted), importing this tree's package."""
    import os
    import subprocess
    import sys

    import sklearn_orfit

    root = os.path.dirname(os.path.dirname(os.path.abspath(sklearn_orfit.__file__)))
    env = {**os.environ,
           "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    return [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address,
                              "--no-nanny", "--nthreads", "1", "--no-dashboard"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(n)]


def test_every_worker_killed_mid_run_fails_within_the_timeout(tmp_path, capsys):
    """Issue 25: with every worker killed mid-run, the run waited for ever (300 s
    watched) and printed nothing. Now: a one-line error, exit status 2, about --timeout
    seconds after the last worker was lost."""
    import threading
    import time

    n = 3000  # the tasks run a second or more each
    times = np.datetime64("2024-01-01T00:00") + np.arange(n) * np.timedelta64(1, "h")
    write_csv(tmp_path / "long.csv", make_columns(n), times=times)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp",
                                      host="127.0.0.1", dashboard_address=None) as c:
            procs = _worker_processes(c.scheduler_address, 2)
            try:
                deadline = time.monotonic() + 60
                while len(c.scheduler.workers) < 2:
                    assert time.monotonic() < deadline, "the workers did not start"
                    time.sleep(0.1)
                killed = {}

                def kill_when_running():
                    while not any(ts.state == "processing"
                                  for ts in c.scheduler.tasks.values()):
                        if time.monotonic() > deadline:
                            return
                        time.sleep(0.02)
                    time.sleep(0.2)  # the tasks are running on the workers
                    for p in procs:
                        p.kill()
                    killed["at"] = time.monotonic()

                threading.Thread(target=kill_when_running, daemon=True).start()
                outcome = {}
                argv = ["--csv", tmp_path / "long.csv", "--column", "all",
                        "--n-components", 256, "--window-size", 50, "--n-lags", 4,
                        "--quiet", "--no-plot", "--output-dir", tmp_path / "o",
                        "--save-model", tmp_path / "m", "--scheduler",
                        c.scheduler_address, "--timeout", 2]
                run = threading.Thread(target=lambda: outcome.update(
                    status=_cli.main([str(a) for a in argv])), daemon=True)
                run.start()
                run.join(60)  # the old code never returned
                assert not run.is_alive(), "the run did not return within 60 s"
                waited = time.monotonic() - killed["at"]
            finally:
                for p in procs:
                    p.kill()
                    p.wait()
    _, err = capsys.readouterr()
    assert outcome["status"] == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sklearn-orfit: error: "), err
    assert f"the dask cluster at {c.scheduler_address} has had no worker for 2 s" in err
    assert "--timeout" in err
    # about --timeout after the loss (the last look that saw a worker was up to one
    # poll before it), plus the time the cluster takes to notice
    assert 2 - _workers._DASK_POLL - 0.5 <= waited <= 2 + _workers._DASK_POLL + 3, waited
    assert not (tmp_path / "m").exists()  # nothing written
    # the stopped run's thread ends once its client is closed (no thread left behind)
    for _ in range(100):
        if not any(t.name == "sklearn-orfit-dask-run" for t in threading.enumerate()):
            break
        time.sleep(0.1)
    else:
        raise AssertionError("the stopped run's thread is still running")
    assert not (tmp_path / "o").exists() or not list((tmp_path / "o").iterdir())


def test_timeout_needs_dask(tmp_path, capsys):
    write_csv(tmp_path / "all.csv", make_columns())
    status = _cli.main([str(a) for a in ["--csv", tmp_path / "all.csv", "--column", "a",
                                         *SMALL, "--no-save", "--timeout", 5]])
    _, err = capsys.readouterr()
    assert status == 2 and "--timeout is for --backend dask" in err, err


def test_timeout_must_be_positive(capsys):
    assert _cli.main(["--timeout", "0"]) == 2
    assert "--timeout: must be in (0.0, inf]" in capsys.readouterr().err


def test_scheduler_killed_mid_run_is_one_line(tmp_path, capfd):
    """The scheduler lost mid-run: exit status 2 and one line on stderr (distributed's
    client logged the lost connection's traceback there)."""
    import socket
    import subprocess
    import sys
    import threading
    import time

    n = 3000
    times = np.datetime64("2024-01-01T00:00") + np.arange(n) * np.timedelta64(1, "h")
    write_csv(tmp_path / "long.csv", make_columns(n), times=times)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    scheduler = subprocess.Popen(
        [sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
         "--port", str(port), "--dashboard-address", ":0"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    procs = [scheduler]
    try:
        deadline = time.monotonic() + 60
        while True:  # the scheduler listening
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the scheduler did not start"
                time.sleep(0.1)
        procs += _worker_processes(address, 2)
        with distributed.Client(address, timeout=30) as client:
            client.wait_for_workers(2, timeout=60)
        capfd.readouterr()

        def kill_when_running():
            time.sleep(1.5)  # the series are being computed (a run takes several s)
            scheduler.kill()

        threading.Thread(target=kill_when_running, daemon=True).start()
        outcome = {}
        argv = ["--csv", tmp_path / "long.csv", "--column", "all", "--n-components", 256,
                "--window-size", 50, "--n-lags", 4, "--quiet", "--no-save",
                "--scheduler", address, "--timeout", 5]
        run = threading.Thread(target=lambda: outcome.update(
            status=_cli.main([str(a) for a in argv])), daemon=True)
        run.start()
        run.join(60)
        assert not run.is_alive(), "the run did not return within 60 s"
    finally:
        for p in procs:
            p.kill()
            p.wait()
    _, err = capfd.readouterr()
    assert outcome["status"] == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("sklearn-orfit: error: "), err
    assert address in lines[0] and "Traceback" not in err


def test_a_run_the_cluster_does_not_compute_is_not_stopped(tmp_path, capsys,
                                                           monkeypatch):
    """One series (not an ensemble) is computed in this process: a cluster without
    workers does not stop it, however short --timeout."""
    import time

    monkeypatch.setattr(_workers, "_DASK_POLL", 0.05)
    n = 5000
    times = np.datetime64("2024-01-01T00:00") + np.arange(n) * np.timedelta64(1, "h")
    write_csv(tmp_path / "long.csv", make_columns(n), times=times)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with distributed.LocalCluster(n_workers=0, processes=False, protocol="tcp",
                                      host="127.0.0.1", dashboard_address=None) as c:
            start = time.monotonic()
            doc = run_json(["--csv", tmp_path / "long.csv", "--column", "a",
                            "--n-components", 256, "--window-size", 20, "--n-lags", 4,
                            "--quiet", "--no-save", "--json", "--scheduler",
                            c.scheduler_address, "--timeout", 0.1, "--chunk-size", 10],
                           capsys)
            elapsed = time.monotonic() - start
    assert elapsed > 0.3  # several looks at the cluster would have stopped it
    assert doc["series"][0]["n_scored"] > 4000
