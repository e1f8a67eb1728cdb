"""Measuring the package: timing, the machine a figure ran on, results as JSON, figures.

The benchmark scripts of the repository (``benchmarks/``) and the command line's
``benchmark`` subcommand report their numbers through these functions, so that every
figure comes with the machine, the BLAS and its thread count, and the command that made
it. They are plain functions with no state; plots need matplotlib (an optional extra) and
BLAS limits need threadpoolctl (installed with scikit-learn).

* :func:`blas_threads` — a context limiting BLAS threads, and a description of the BLAS;
* :func:`machine_header`, :func:`header_line` — what a measurement ran on;
* :func:`time_calls`, :func:`best_of`, :func:`peak_rss_mib` — wall-clock times and peak
  memory;
* :func:`parse_rounds` — the command line of a benchmark timed in rounds of timed rows;
* :func:`write_results` — a benchmark's numbers with their settings and machine, as JSON;
* :func:`pyplot`, :func:`save_figure` — matplotlib on a file-only backend;
* :data:`TABLE5_CPP_MS`, :data:`TABLE5_SETTING`, :func:`timed_chunked`,
  :func:`timed_one_row` — the ABO paper's reference speed figures (ABO paper §3.8, Table
  5) and the two ways the package's are timed against them.

Examples
--------
>>> from sklearn_orfit.utils.benchmarking import best_of, blas_threads
>>> ctx, describe = blas_threads(1)
>>> with ctx:
...     seconds = best_of(lambda: sum(range(1000)), repeat=3)
>>> seconds >= 0
True
"""

import argparse
import contextlib
import math
import os
import time

import numpy as np

from .._streaming._prequential import prequential_predict

__all__ = [
    "TABLE5_CPP_MS",
    "TABLE5_SETTING",
    "best_of",
    "blas_description",
    "blas_threads",
    "header_line",
    "machine_header",
    "parse_rounds",
    "peak_rss_mib",
    "pyplot",
    "save_figure",
    "time_calls",
    "timed_chunked",
    "timed_one_row",
    "write_results",
]

#: ABO paper, Table 5 (§3.8): the authors' C++ (Google Benchmark, i7-1370P, one thread),
#: milliseconds per 1000 predict+update steps, ``N = 20``, 7 lags, by ``D``.
TABLE5_CPP_MS = {
    2: 6.11, 4: 6.25, 8: 7.59, 16: 9.22, 32: 13.25, 64: 19.79, 128: 36.00,
    256: 64.30, 512: 438.02, 1024: 887.13, 2048: 1495.53, 4096: 2699.60,
    8192: 5508.04, 16384: 11971.30,
}  # fmt: skip
#: the setting of those figures: window ``N``, lags, predict+update steps timed
TABLE5_SETTING = {"window_size": 20, "n_lags": 7, "n_steps": 1000}


def blas_description():
    """The BLAS libraries loaded in this process, with their thread counts (threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return "unknown (threadpoolctl not installed)"
    return ", ".join(
        f"{i['internal_api']} {i.get('version')} ({i['num_threads']} threads)"
        for i in threadpool_info() if i["user_api"] == "blas"
    ) or "unknown"


def blas_threads(threads):
    """``(context manager limiting BLAS to threads, describe())`` via threadpoolctl.

    ``describe`` is :func:`blas_description` (call it inside the context to see the
    limit). Without threadpoolctl the context does nothing.
    """
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        return contextlib.nullcontext(), blas_description
    return threadpool_limits(limits=threads, user_api="blas"), blas_description


def _cpu_name():
    """The processor's model name (``/proc/cpuinfo``), else what :mod:`platform` knows."""
    import platform

    try:
        with open("/proc/cpuinfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_header():
    """What a measurement ran on: machine, CPUs, load, Python, numpy, BLAS, UTC date.

    A dict of strings and numbers (JSON-ready); call it where the timings run (inside
    :func:`blas_threads`'s context) so that the BLAS thread counts are those used.
    """
    import datetime
    import platform

    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not on every platform
        load = None
    return {
        "machine": _cpu_name(),
        "arch": platform.machine(),
        "system": platform.system(),
        "cpus": os.cpu_count(),
        "load_average": load,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "blas": blas_description(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def header_line(header=None):
    """:func:`machine_header` as one printed line (``# machine, CPUs, …``)."""
    h = machine_header() if header is None else header
    load = "" if h.get("load_average") is None else (
        ", load average " + "/".join(f"{x:.1f}" for x in h["load_average"]))
    return (f"# {h['machine']}, {h['cpus']} CPUs{load}; Python {h['python']}, numpy "
            f"{h['numpy']}; BLAS: {h['blas']}; {h['date']}")


def time_calls(fn, repeat=3):
    """Wall-clock seconds of each of ``repeat`` calls of ``fn()`` (a list)."""
    times = []
    for _ in range(max(1, int(repeat))):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def best_of(fn, repeat=3):
    """Shortest wall-clock time of ``repeat`` calls of ``fn()``, in seconds.

    The minimum is the usual estimate on a shared machine: other processes only ever add
    time.
    """
    return min(time_calls(fn, repeat))


def parse_rounds(argv, description, out, *, repeat, rows, quick_rows):
    """The command line of a benchmark timed in rounds of timed rows.

    ``--quick`` (one round of ``quick_rows`` rows, nothing written), ``--repeat``
    (rounds, default ``repeat``), ``--rows`` (timed rows, default ``rows``) and ``--out``
    (the folder of the JSON results, default ``out``). Returns ``(repeat, rows, out)``,
    ``out`` None with ``--quick``.
    """
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--quick", action="store_true", help=f"one round, {quick_rows} timed rows")
    ap.add_argument("--repeat", type=int, default=repeat, help=f"rounds (default {repeat})")
    ap.add_argument("--rows", type=int, default=rows, help=f"timed rows (default {rows})")
    ap.add_argument("--out", default=out, help="folder of the JSON results")
    args = ap.parse_args(argv)
    if args.quick:
        return 1, quick_rows, None
    return args.repeat, args.rows, args.out


def peak_rss_mib():
    """Peak resident memory of this process so far, MiB (``None`` where unknown)."""
    try:
        import resource
    except ImportError:  # pragma: no cover - not on every platform
        return None
    import platform

    # Linux reports ru_maxrss in KiB, macOS in bytes
    scale = 1 / 2**20 if platform.system() == "Darwin" else 1 / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def _jsonable(obj):
    """``obj`` with numpy scalars and arrays as Python numbers and lists, NaN as ``None``
    and infinities as ``"inf"``/``"-inf"`` (strict JSON)."""
    if isinstance(obj, dict):
        return {str(k): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _jsonable(obj.tolist())
    if isinstance(obj, np.generic):
        obj = obj.item()
    if isinstance(obj, float) and not math.isfinite(obj):
        return None if math.isnan(obj) else ("inf" if obj > 0 else "-inf")
    return obj


def write_results(name, payload, directory, *, header=None, command=None):
    """Write a benchmark's results to ``directory/<name>.json``; returns the path.

    ``directory=None`` writes nothing (returns ``None``): a benchmark called from Python
    (a test) leaves the recorded results alone.

    The file holds ``{"name", "command", "header": machine_header(), "results":
    payload}``: the numbers with the settings and the machine they were measured on
    (numpy values become JSON numbers, NaN ``null``, infinities ``"inf"``/``"-inf"``). ``command`` is the
    command line that produced them (default: ``python <argv>``).
    """
    import json
    import sys

    if directory is None:
        return None
    if command is None:
        command = " ".join(["python", *sys.argv]) if sys.argv and sys.argv[0] else None
    doc = {"name": name, "command": command,
           "header": machine_header() if header is None else header,
           "results": _jsonable(payload)}
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, f"{name}.json")
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh, indent=1, ensure_ascii=False, allow_nan=False, default=str)
        fh.write("\n")
    return path


def pyplot():
    """``matplotlib.pyplot`` on the non-interactive Agg backend, or ``None`` (no
    matplotlib): figures are written to files only."""
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt



def save_figure(fig, path, *, dpi=100):
    """Write ``fig`` to ``path`` (creating its folder), close it; returns ``path``."""
    plt = pyplot()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def timed_chunked(rff, fresh_models, X, y):
    """A callable that streams ``X`` through the next fresh model in one call.

    The features ``rff.transform(X)`` are computed inside the call, then one
    :func:`~sklearn_orfit.prequential_predict` over the rows: the "chunked" figure of
    :data:`TABLE5_CPP_MS`'s comparison. ``fresh_models`` is a list of fitted models, one
    popped per call (time each on the same state).
    """

    def run():
        prequential_predict(fresh_models.pop(), rff.transform(X), y)

    return run


def timed_one_row(rff, fresh_models, X, y):
    """A callable that streams ``X`` through the next fresh model one row at a time.

    Each row is ``transform_one`` + ``predict_one`` + ``learn_one``: the per-row path of
    a live stream. ``fresh_models`` as in :func:`timed_chunked`.
    """

    def run():
        reg = fresh_models.pop()
        for xi, yi in zip(X, y):
            z = rff.transform_one(xi)
            reg.predict_one(z)
            reg.learn_one(z, yi)

    return run
