"""The series of one ``sklearn-orfit`` run in parallel: joblib's backends and a dask
cluster, with a bound on how long a cluster that has lost its workers is waited for."""

import contextlib
import logging
import socket
import threading
import time
import warnings

from ._parser import CLIError


@contextlib.contextmanager
def _workers(args):
    """joblib's parallel configuration for ``--backend`` (and the dask client)."""
    backend = args.backend
    if args.scheduler is not None:
        if backend not in (None, "dask"):
            raise CLIError(f"--scheduler is for --backend dask, not --backend {backend}")
        backend = "dask"
    if backend != "dask" and getattr(args, "timeout", None) is not None:
        raise CLIError("--timeout is for --backend dask (the joblib backends on this "
                       "machine do not lose their workers)")
    if backend is None:
        yield
        return
    import joblib

    if backend != "dask":
        with joblib.parallel_config(backend=backend):
            yield
        return
    if args.scheduler is None:
        raise CLIError("--backend dask needs --scheduler ADDRESS, the address of a running "
                       "dask scheduler (e.g. tcp://127.0.0.1:8786)")
    try:
        import distributed
    except ImportError:
        raise CLIError("--backend dask needs the optional packages dask and distributed "
                       "(pip install 'dask[distributed]')") from None
    client = _dask_client(distributed, args.scheduler)
    args._dask_client = client  # for _run_tasks' watch on the cluster
    # a lost scheduler or worker makes distributed log tracebacks on stderr: the run
    # reports the loss in one line instead
    logging_was = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with joblib.parallel_config(backend="dask", client=client):
            yield
    finally:
        args._dask_client = None
        with contextlib.suppress(Exception):
            client.close(timeout=_SCHEDULER_TIMEOUT)
        logging.disable(logging_was)


_SCHEDULER_TIMEOUT = 5  # seconds

_DASK_POLL = 1.0  # seconds between two looks at the cluster


def _dask_client(distributed, address):
    """A client of the dask scheduler at ``address``, or a one-line error within
    ``_SCHEDULER_TIMEOUT`` seconds (a bad address, nothing listening, no scheduler)."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location) if scheme != "inproc" else (None, None)
    except (ValueError, TypeError) as exc:
        raise CLIError(f"--scheduler {address!r} is not a dask scheduler address (e.g. "
                       f"tcp://127.0.0.1:8786): {exc}") from None
    unreachable = f"cannot reach the dask scheduler at {address} within " \
                  f"{_SCHEDULER_TIMEOUT} s"
    if scheme in ("tcp", "tls", "ws", "wss"):  # a plain connection first: fails fast
        try:
            socket.create_connection((host, port), timeout=_SCHEDULER_TIMEOUT).close()
        except OSError as exc:
            raise CLIError(f"{unreachable}: {exc.strerror or exc}") from None
    client = distributed.Client.__new__(distributed.Client)
    outcome = {}

    def connect():
        try:
            client.__init__(address, timeout=_SCHEDULER_TIMEOUT, set_as_default=False)
            outcome["ok"] = True
        except Exception as exc:  # reported below
            outcome["error"] = exc

    # a server that accepts the connection but never answers (not a dask scheduler) can
    # keep the client waiting past its timeout: the wait is bounded here. The warnings
    # are silenced from this thread (the connecting thread may never return, and would
    # never restore the filters)
    thread = threading.Thread(target=connect, name="sklearn-orfit-dask-connect",
                              daemon=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        thread.start()
        thread.join(_SCHEDULER_TIMEOUT + 1)
    if outcome.get("ok"):
        return client
    # a client that never connected would otherwise wait at exit to close
    with contextlib.suppress(Exception):
        client.status = "closed"
        client._loop_runner.stop()
    exc = outcome.get("error")
    detail = (str(exc) or type(exc).__name__
              if isinstance(exc, (OSError, TimeoutError, ValueError))
              else "no valid answer (is it a dask scheduler?)")
    raise CLIError(f"{unreachable}: {detail}")


def _cluster_size(client, wait):
    """The number of workers the dask scheduler has, or ``None`` when it does not answer
    within ``wait`` seconds."""
    try:
        info = client.sync(client.scheduler.identity, n_workers=0, callback_timeout=wait)
        return int(info["n_workers"])
    except Exception:  # lost connection, timeout, closed client: no answer
        return None


def _on_dask(run, client, address, timeout):
    """``run()`` (joblib calls on the dask ``client``), stopped with a one-line error
    when the cluster has had no worker, or the scheduler has not answered, for
    ``timeout`` seconds.

    Without this, a run whose workers are all lost waits for ever: the scheduler keeps
    the tasks for workers that may join later. ``run`` goes in a daemon thread (with the
    dask backend, which joblib configures per thread); this thread looks at the cluster
    every ``_DASK_POLL`` seconds. A stopped run's thread is left to end when the client
    closes (its tasks are cancelled then).
    """
    import joblib

    box = {}

    def target():
        try:
            with joblib.parallel_config(backend="dask", client=client):
                box["result"] = run()
        except BaseException as exc:  # re-raised in the calling thread
            box["error"] = exc

    thread = threading.Thread(target=target, name="sklearn-orfit-dask-run", daemon=True)
    thread.start()
    clock = time.monotonic
    last_seen = clock()  # a worker or, below, an answer
    while True:
        thread.join(_DASK_POLL)
        if not thread.is_alive():
            break
        n_workers = _cluster_size(client, min(timeout, _SCHEDULER_TIMEOUT))
        if thread.is_alive() and n_workers:
            last_seen = clock()
        elif thread.is_alive() and clock() - last_seen >= timeout:
            what = ("has had no worker" if n_workers == 0 else
                    "has not answered (the scheduler is lost?)")
            raise CLIError(
                f"the dask cluster at {address} {what} for {timeout:g} s (--timeout): "
                "the run is stopped unfinished, nothing was written; start workers (or "
                "the scheduler) and run again, or give a larger --timeout")
    if "error" in box:
        exc = box["error"]
        if type(exc).__name__ == "KilledWorker" or \
                type(exc).__module__.startswith("distributed"):
            detail = " ".join(str(exc).split()) or type(exc).__name__
            raise CLIError(f"the dask run on {address} failed: {detail}") from None
        raise exc
    return box["result"]


def _warning_text(w):
    return f"{w.category.__name__}: {str(w.message).splitlines()[0]}"
