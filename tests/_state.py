"""Compare the whole learned state of an estimator, solver objects included.

The one state-comparison helper of the test suite: every test that checks "exactly as
it was" or "bit for bit as an untouched model" goes through :func:`assert_same_state`
(or compares pickle bytes).
"""

import pickle

import numpy as np

def canonical_pickle(est):
    """The pickled state in a canonical form (buffers trimmed as after a round trip):
    equal bytes, equal state."""
    return pickle.dumps(pickle.loads(pickle.dumps(est)))


# a lock held for concurrent calls is not state (created on first use), nor whether the
# orthogonal factors may be written in place (False once a checkpoint holds them), nor the
# buffer whose leading columns are their Q (its spare columns are scratch; Q is compared)
_NOT_STATE = frozenset({"_stream_lock", "owned", "_Qspare"})


def _is_object(v):
    return (
        hasattr(v, "__dict__")
        and not isinstance(v, (np.ndarray, type))
        and (not callable(v) or hasattr(v, "get_params"))
    )


def _attributes(obj, pickled):
    if pickled:
        state = obj.__getstate__()
        if isinstance(state, dict):
            return state
    return vars(obj)


def flat_state(obj, prefix="", *, params=True, pickled=False, _path=frozenset()):
    """``{path: value}`` over an object's attributes, recursing into helper objects.

    Recurses into dicts, lists, tuples and every object with attributes (solver
    objects, fitted sub-estimators, foreign estimators); a function or bound method is
    recorded by its qualified name. ``params=False`` leaves out the top-level object's
    own constructor parameters (its learned state only). ``pickled=True`` takes each
    object's state as pickled (``__getstate__``: scratch buffers and caches left out).
    """
    if id(obj) in _path:
        return {}  # a reference cycle
    _path = _path | {id(obj)}
    if isinstance(obj, dict):
        items = obj.items()
    elif isinstance(obj, (list, tuple)):
        items = enumerate(obj)
    else:
        items = _attributes(obj, pickled).items()
        if not params and hasattr(obj, "get_params"):
            own = set(obj.get_params(deep=False))
            items = [(k, v) for k, v in items if k not in own]
    out = {}
    for k, v in items:
        path = f"{prefix}{k}"
        if k in _NOT_STATE:
            continue
        if callable(v) and not isinstance(v, np.ndarray) and not hasattr(v, "get_params"):
            out[path] = getattr(v, "__qualname__", type(v).__qualname__)
        elif isinstance(v, (dict, list, tuple)) or _is_object(v):
            out.update(flat_state(v, path + ".", pickled=pickled, _path=_path))
        else:
            out[path] = v
    return out


def assert_same_state(before, after, *, params=True, pickled=False):
    """``before`` and ``after`` (estimators or attribute dicts) hold equal state: the
    same attributes, arrays of the same dtype and values (NaN equal to NaN), other
    values equal or of equal pickled state (random generators).

    ``params=False`` compares the learned state only (the top-level objects may differ
    in constructor parameters, e.g. ``n_jobs``); ``pickled=True`` compares the state
    as pickled (scratch buffers and caches left out).
    """
    a = flat_state(before, params=params, pickled=pickled)
    b = flat_state(after, params=params, pickled=pickled)
    assert a.keys() == b.keys(), set(a) ^ set(b)
    for k, v in a.items():
        w = b[k]
        if isinstance(v, np.ndarray) or isinstance(w, np.ndarray):
            v, w = np.asarray(v), np.asarray(w)
            assert v.dtype == w.dtype, (k, v.dtype, w.dtype)
            assert np.array_equal(v, w, equal_nan=v.dtype.kind in "fc"), k
        else:
            assert _same_value(v, w), k


def _same_value(v, w):
    try:
        if v == w or (v != v and w != w):
            return True
    except (TypeError, ValueError):
        pass
    # objects without attributes of their own (e.g. numpy's random Generator): their
    # pickled state
    try:
        return pickle.dumps(v) == pickle.dumps(w)
    except Exception:
        return False
