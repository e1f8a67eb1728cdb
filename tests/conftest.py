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
