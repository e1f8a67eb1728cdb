"""Compare the whole learned state of an estimator, solver objects included."""

import numpy as np


def flat_state(obj, prefix=""):
    """``{path: value}`` over an object's attributes, recursing into helper objects."""
    out = {}
    items = obj.items() if isinstance(obj, dict) else vars(obj).items()
    for k, v in items:
        path = f"{prefix}{k}"
        if callable(v) and not isinstance(v, np.ndarray):
            continue  # bound methods of helper objects
        if hasattr(v, "__dict__") and not isinstance(v, (np.ndarray, type)) and type(v).__module__.startswith("sklearn_orfit"):
            out.update(flat_state(v, path + "."))
        elif isinstance(v, (tuple, list)):
            out.update(flat_state({str(i): x for i, x in enumerate(v)}, path + "."))
        else:
            out[path] = v
    return out


def assert_same_state(before, after):
    """``before`` and ``after`` (estimators or attribute dicts) hold equal state."""
    a, b = flat_state(before), flat_state(after)
    assert a.keys() == b.keys(), set(a) ^ set(b)
    for k, v in a.items():
        w = b[k]
        if isinstance(v, np.ndarray) or isinstance(w, np.ndarray):
            assert np.array_equal(np.asarray(v), np.asarray(w)), k
        else:
            assert v == w or (v != v and w != w), k
