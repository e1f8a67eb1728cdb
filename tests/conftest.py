import sys
from pathlib import Path

import pytest
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    # the oracles run many small LAPACK calls: threads only contend for two cores
    with threadpool_limits(limits=1):
        yield


@pytest.fixture(scope="session")
def dask_client():
    """A client of a two-process local dask cluster (one thread a worker), for joblib's
    dask backend; skipped without the optional packages dask and distributed."""
    pytest.importorskip("dask")
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address=None,
    ) as cluster, distributed.Client(cluster) as client:
        yield client
