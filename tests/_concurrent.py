"""Readers during a concurrent write: every prediction is that of a call boundary."""

import sys
import threading

import numpy as np

from _hostile import learn, output


def assert_reads_are_call_boundaries(make, X, y, *, chunk=2, probe_rows=5):
    """Stream ``X, y`` through ``make()``'s ``partial_fit`` in calls of ``chunk`` rows
    in one thread while another calls ``predict`` (``transform``) on fixed probe rows;
    every concurrent output must equal, exactly, the output of the state after some
    call (never new state read with old state).

    Returns the number of concurrent predictions checked.
    """
    probe = X[:probe_rows]
    starts = range(chunk, X.shape[0], chunk)
    seq = learn(make(), X[:chunk], y[:chunk])
    boundaries = [output(seq, probe)]
    for s in starts:
        learn(seq, X[s:s + chunk], y[s:s + chunk])
        boundaries.append(output(seq, probe))

    est = learn(make(), X[:chunk], y[:chunk])
    done = threading.Event()
    seen = []

    def write():
        try:
            for s in starts:
                learn(est, X[s:s + chunk], y[s:s + chunk])
        finally:
            done.set()

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often: interleave reads and writes
    try:
        writer = threading.Thread(target=write)
        writer.start()
        while not done.is_set():
            seen.append(output(est, probe))
        writer.join()
    finally:
        sys.setswitchinterval(interval)
    torn = [i for i, p in enumerate(seen)
            if not any(np.array_equal(p, b) for b in boundaries)]
    assert not torn, f"{len(torn)} of {len(seen)} concurrent predictions match no call boundary"
    return len(seen)
