"""Proof that work ran on the test cluster's worker processes."""

import contextlib


@contextlib.contextmanager
def on_cluster(client):
    """Run the block under joblib's dask backend and check, on exit, that tasks ran on
    the cluster's workers.

    The check reads the scheduler's own record of the tasks run in the block (its task
    stream) and asks the scheduler, by a direct call, for its live workers.
    ``Client.scheduler_info()`` is not used: when its call to the scheduler fails it
    returns a cached answer, whose list of workers may be empty.
    """
    import distributed
    from joblib import parallel_config

    with distributed.get_task_stream(client=client) as tasks, parallel_config(backend="dask"):
        yield
    live = set(client.nthreads())  # raises when the scheduler cannot be reached
    assert len(live) == 2, live
    ran_on = {task["worker"] for task in tasks.data}
    assert ran_on, "no task ran on the cluster"
    assert ran_on <= live, (ran_on, live)
    assert sum(client.run(lambda: 1).values()) == 2  # both workers answer
