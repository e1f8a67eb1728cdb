"""The update contract shared by every streaming estimator of the package.

Every call that learns (``fit``, ``partial_fit``, ``prequential_predict``, ``learn_one``,
and the pipelines' and the ensemble's) follows one template, :func:`stream_update`:

1. take the estimator's write lock (concurrent writes are serialised; a pickle or a
   ``copy.deepcopy`` taken during a write waits for it, so it is never torn);
2. check that no parameter the state depends on changed since the stream started
   (:func:`check_stream_params`: ``set_params`` mid-stream is an error, never ignored);
3. validate the whole input once (:func:`validate_stream`), before anything learns;
4. learn: the recursions work on copies of the state, or keep an undo record of what they
   overwrite in place, and assign the new state at the end;
5. on any exception (bad input, a numerical failure half-way, ``KeyboardInterrupt``) put
   the estimator's attributes back, so it is exactly as it was.
"""

import _thread
import contextvars
import copy
import functools
import inspect
import math
import operator
import weakref
from contextlib import contextmanager

import numpy as np
import sklearn
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import _check_sample_weight, _fit_context
from .._docstrings import fill_doc
from ._validation import check_fitted_fast, check_int, check_numeric, check_one_row, check_one_target
from ..utils.estimator_checks import expected_failed_checks

__all__ = [
    "LinearPredictMixin",
    "OneRowLearnMixin",
    "OneRowPredictMixin",
    "PredictMixin",
    "StreamLockMixin",
    "StreamingRegressorMixin",
    "STATE_FORMAT",
    "VALIDATION_ATTRIBUTES",
    "check_delay",
    "check_state_format",
    "check_stream_params",
    "same_param_value",
    "check_stream_sample_weight",
    "clear_fitted_state",
    "expected_failed_checks",
    "commit_copy",
    "detached",
    "learn_with_delay",
    "run_with_delay",
    "make_private",
    "make_private_once",
    "prequential_context",
    "needs_private",
    "on_rollback",
    "record_stream_params",
    "rollback_on_error",
    "stream_lock",
    "stream_update",
    "validate_stream",
]

class _StreamLock(_thread.RLock):
    """A re-entrant lock that is not state: copies and pickles of it are fresh locks,
    and all of them compare equal (so comparing two estimators' attributes ignores it)."""

    __slots__ = ()

    def __reduce__(self):
        return (_StreamLock, ())

    def __eq__(self, other):
        return isinstance(other, _StreamLock)

    def __hash__(self):
        return 0


def stream_lock(estimator):
    """The estimator's write lock (re-entrant), created on first use.

    Stored as ``estimator._stream_lock``; :class:`StreamLockMixin` leaves it out of the
    pickled state. A thread that writes while another writes waits for it.
    """
    lock = estimator.__dict__.get("_stream_lock")
    if lock is None:
        # dict.setdefault is atomic: of two threads racing here, both get the same lock
        # (no guard lock, which an interrupt could leave held)
        lock = estimator.__dict__.setdefault("_stream_lock", _StreamLock())
    return lock


@contextmanager
def _held(estimator):
    """Hold the lock if the estimator has one (readers never create it)."""
    lock = estimator.__dict__.get("_stream_lock")
    if lock is None:
        yield
    else:
        with lock:
            yield


#: The layout of the pickled state of every estimator of the package. A pickle records
#: it; loading a pickle of another layout is refused (:func:`check_state_format`) rather
#: than migrated: a state is only ever read by the layout that wrote it. 2: the
#: sliding-window baselines keep their rows in a RingBuffer. 3: StreamForecaster learns
#: one-step forecasts in blocks (its ``chunk_size``). 4: the window solvers' orthogonal
#: factors of a ridge-augmented window hold the ridge rows first. 5: a ridge with
#: forgetting may keep a tall window on the dual route (``dual_only``), whose orthogonal
#: factors of a window of more rows than features are then by rows.
STATE_FORMAT = 5
_FORMAT_KEY = "_sklearn_orfit_state_format"


def check_state_format(name, found):
    """Refuse a pickled state whose layout is not :data:`STATE_FORMAT`.

    Raises
    ------
    ValueError
        Saying which format was found (or that none was recorded) and that the model
        must be fitted again with this version.
    """
    if found != STATE_FORMAT:
        what = "no state format" if found is None else f"state format {found!r}"
        raise ValueError(
            f"this {name} was saved with {what}; this version of sklearn-orfit reads "
            f"state format {STATE_FORMAT} only. Fit the model again with this version."
        )


class StreamLockMixin:
    """Thread-safe writes: pickles and copies taken during a write wait for it.

    The state is snapshotted (deep-copied) under the lock, so a pickle or a
    ``copy.deepcopy`` made while another thread learns is the state at a call boundary,
    never a torn one; the price is one copy of the state per pickle. The lock itself is
    not state: it is left out of the pickle and recreated on the next write.
    """

    def __getstate__(self):
        with _held(self):
            # a copy: object.__getstate__ may return the instance's own __dict__
            state = dict(super().__getstate__())
            state.pop("_stream_lock", None)
            if "_stream_lock" in self.__dict__:  # it has learned: arrays may be written
                state = copy.deepcopy(state)
        state[_FORMAT_KEY] = STATE_FORMAT
        return state

    def __setstate__(self, state):
        state = dict(state)
        check_state_format(type(self).__name__, state.pop(_FORMAT_KEY, None))
        super().__setstate__(state)

    def __deepcopy__(self, memo):
        with _held(self):
            new = type(self).__new__(type(self))
            memo[id(self)] = new
            state = {k: v for k, v in self.__dict__.items() if k != "_stream_lock"}
            new.__dict__.update(copy.deepcopy(state, memo))
        return new


#: objects whose arrays :func:`make_private_once` has made private (by identity: a pickle
#: or a copy is another object, whose arrays may be mapped)
_KNOWN_PRIVATE = weakref.WeakSet()


def make_private_once(obj):
    """:func:`make_private` for an object that only its own code writes to: the walk over
    its state runs the first time only (its arrays are then its own; only unpickling or
    a copy, a new object, can give it mapped ones). Returns ``obj``."""
    if obj not in _KNOWN_PRIVATE:
        make_private(obj)
        _KNOWN_PRIVATE.add(obj)
    return obj


def make_private(obj):
    """Replace memory-mapped and read-only arrays in ``obj``'s state by plain, writable
    copies, in place (arrays already private are left alone).

    ``joblib.load(path, mmap_mode=...)`` and joblib's workers (for arrays above its 1 MB
    memmapping threshold) give such arrays; a stream learns on private copies, never into
    a file. Returns ``obj``.
    """
    _make_private(obj, set())
    return obj


def _private_array(a):
    """``a`` as a plain, writable array that maps no file (copied only if needed)."""
    if not a.flags.writeable or getattr(a, "_mmap", None) is not None:
        return np.array(a)  # a plain copy (np.array drops the memmap class)
    return a.view(np.ndarray) if isinstance(a, np.memmap) else a


def needs_private(a):
    """Whether ``a`` is an array that maps a file or is read-only (state must not be
    learned into it)."""
    return isinstance(a, np.ndarray) and (isinstance(a, np.memmap) or not a.flags.writeable)


_SCALARS = (int, float, str, bool, type(None), np.generic)


def _make_private(obj, seen):
    """Replace memory-mapped and read-only arrays in ``obj``'s state, in place.

    Recurses through lists, dicts, tuples and the attributes of scikit-learn-style
    objects (estimators, and the helper objects of this package and of scikit-learn).
    """
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        container, keys = obj, list(obj)
    elif isinstance(obj, list):
        container, keys = obj, range(len(obj))
    else:
        container = getattr(obj, "__dict__", None)
        if not isinstance(container, dict):
            return
        keys = list(container)
    for key in keys:
        value = container[key]
        if isinstance(value, _SCALARS):
            continue  # most of a solver's attributes: nothing to look into
        if needs_private(value):
            container[key] = _private_array(value)
        elif isinstance(value, tuple):
            if any(needs_private(v) for v in value):
                container[key] = value = tuple(
                    _private_array(v) if needs_private(v) else v for v in value
                )
            for v in value:
                if _walkable(v):
                    _make_private(v, seen)
        elif _walkable(value):
            _make_private(value, seen)


def _walkable(value):
    if isinstance(value, (dict, list)):
        return True
    if isinstance(value, (type, np.ndarray)):
        return False
    module = type(value).__module__ or ""
    return isinstance(value, BaseEstimator) or module.split(".")[0] in (
        "sklearn",
        "sklearn_orfit",
    )



def record_stream_params(estimator):
    """Remember the parameters a new stream's state is built with.

    ``estimator._stream_params`` (a class attribute) names them.
    """
    estimator._stream_param_values = tuple(
        getattr(estimator, name) for name in estimator._stream_params
    )


def same_param_value(a, b):
    """Whether a parameter's value equals the one a stream started with: the same object,
    or equal as Python values. A NumPy scalar counts by its exact value: under NumPy 2
    ``np.float32(0.9) == 0.9`` is computed in float32 and is true, although the value
    differs from 0.9 by 2.4e-8 (a stream started with 0.9 then went on with it while
    ``get_params`` said otherwise)."""
    if a is b:
        return True
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        # an array is the same value only as an array of the same shape and values (a 0-d
        # float32 array of 0.9 in place of 0.9 is another value, and another type)
        return (isinstance(a, np.ndarray) and isinstance(b, np.ndarray)
                and a.shape == b.shape and bool(np.array_equal(a, b)))
    a = a.item() if isinstance(a, np.generic) else a
    b = b.item() if isinstance(b, np.generic) else b
    try:
        return bool(a == b)
    except (TypeError, ValueError):
        return False


def check_stream_params(estimator):
    """Refuse to continue a stream whose parameters changed (``set_params``) since it started.

    Raises
    ------
    ValueError
        Naming the parameters that changed, and saying to call ``fit``.
    """
    saved = estimator.__dict__.get("_stream_param_values")
    if saved is None:
        return
    names = estimator._stream_params
    now = tuple(getattr(estimator, name) for name in names)
    if not all(map(operator.is_, now, saved)):
        changed = [k for k, a, b in zip(names, now, saved) if not same_param_value(a, b)]
        if changed:
            raise ValueError(
                f"{', '.join(changed)} changed (set_params) since this stream started; "
                "the state was built with the previous values. Call fit to start a new "
                "stream with the new parameters."
            )


#: What ``validate_data(..., reset=True)`` sets (the number and names of the features).
VALIDATION_ATTRIBUTES = ("n_features_in_", "feature_names_in_")


def clear_fitted_state(estimator, *, keep=(), private=()):
    """Forget a stream: delete the fitted attributes and the named private state.

    The fitted attributes are those whose names end in ``_`` (scikit-learn's convention;
    dunder names excluded), except ``keep`` (e.g. :data:`VALIDATION_ATTRIBUTES`, when
    the call that starts the new stream has already validated its input). Called inside
    a learning call's transaction, so a new stream that fails to start leaves the old
    one as it was.

    Parameters
    ----------
    estimator : estimator
        The estimator starting a new stream.
    keep : tuple of str, default=()
        Fitted attributes to keep.
    private : tuple of str, default=()
        Private attributes (``_name``) to delete too, where present.
    """
    state = estimator.__dict__
    for name in [k for k in state if k.endswith("_") and not k.startswith("__")]:
        if name not in keep:
            del state[name]
    for name in private:
        state.pop(name, None)


class _Transaction:
    """The undo actions of one learning call, run in reverse order if it fails."""

    __slots__ = ("undo", "open", "lock")

    def __init__(self, lock):
        self.undo = []
        self.open = True
        self.lock = lock  # the estimator's stream lock, held while the call runs

    def running(self):
        """Whether the call is still running in this thread: open, and its estimator's
        lock held by the thread. The lock is released by the ``with`` statement itself
        (compiled code), so a call whose cleanup lines an interrupt cut short is seen
        as ended; ask before taking a lock of one's own (it may be the same lock)."""
        is_owned = getattr(self.lock, "_is_owned", None)
        return self.open and (is_owned is None or is_owned())

    def rollback(self):
        undo, self.undo = self.undo, []
        for action in reversed(undo):
            action()


# the innermost learning call running in this thread (or task): nested calls (a pipeline's
# steps) register their own rollback with it, so that a failure of the outer call after
# an inner one committed undoes both
_ACTIVE = contextvars.ContextVar("sklearn_orfit_learning_call", default=None)


@contextmanager
def detached():
    """Run learning calls outside the enclosing one's transaction.

    For work on a private copy of an estimator whose state is committed by the caller
    in one statement at the end (:func:`learn_with_delay`):
    the copy's in-place writes need no undo record, so none is kept, however many calls
    the copy makes.
    """
    token = _ACTIVE.set(None)
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def check_delay(delay):
    """``delay`` as an int ``>= 0`` (labels arriving that many rows late), or a ValueError."""
    return check_int(delay, "delay", minimum=0)


def run_with_delay(X, Y, delay, *, predict, learn, sample_weight=None):
    """The schedule of labels ``delay`` rows late: a prediction per row, learning as
    labels come due.

    ``ŷ[i] = predict(X[i:i+1])`` is made once rows ``0 … i − 1 − delay`` of ``X`` have
    been learned (the rows after them wait in a queue until their label is due); the
    last ``delay + 1`` rows are learned after the last prediction, so every row is
    learned on return. ``learn(X_rows, Y_rows)`` learns validated rows (``Y`` 2-D); with
    validated weights ``sample_weight`` (see :func:`check_stream_sample_weight`),
    ``learn(X_rows, Y_rows, w_rows)``. Returns ``Y_pred`` (2-D).
    """
    n = X.shape[0]
    Y_pred = np.empty(Y.shape, dtype=np.float64)
    head = min(n, delay + 1)
    if head:
        # rows 0 … delay: no label of this call is due yet
        Y_pred[:head] = predict(X[:head])
    for i in range(head, n):
        j = i - 1 - delay  # the label that has just arrived
        _learn_rows(learn, X, Y, sample_weight, j, j + 1)
        # invariant: rows < i − delay have been learned
        Y_pred[i] = predict(X[i : i + 1])[0]
    rest = max(0, n - 1 - delay)
    if rest < n:
        _learn_rows(learn, X, Y, sample_weight, rest, n)
    return Y_pred


def learn_with_delay(estimator, X, Y, delay, *, learn, commit=True, sample_weight=None):
    """:func:`run_with_delay` on a private copy, for an estimator without one undo
    record for many learning calls.

    ``learn(work, X_rows, Y_rows[, w_rows])`` learns validated rows on ``work`` and
    ``work._predict_rows`` predicts (2-D). The rows are learned by a private copy of the
    estimator (one ``O(state)`` copy per call), outside the enclosing transaction
    (:func:`detached`), and the copy's state is committed in one statement at the end
    (or, with ``commit=False``, returned for the caller to commit): whatever fails
    half-way, the estimator is unchanged. Cost: one prediction and one single-row update
    per row.

    Returns ``Y_pred`` (2-D), or ``(Y_pred, work)`` when ``commit=False``.
    """
    work = copy.deepcopy(estimator)
    with detached():
        Y_pred = run_with_delay(
            X, Y, delay, predict=work._predict_rows, sample_weight=sample_weight,
            learn=lambda *rows: learn(work, *rows),
        )
    if not commit:
        return Y_pred, work
    commit_copy(estimator, work)
    return Y_pred


def _learn_rows(learn, X, Y, sample_weight, a, b):
    if sample_weight is None:
        learn(X[a:b], Y[a:b])
    else:
        learn(X[a:b], Y[a:b], sample_weight[a:b])


def check_stream_sample_weight(sample_weight, n_samples, *, estimator=None, reset=False):
    """Validate per-row weights once per call (``None`` stays ``None``).

    Parameters
    ----------
    sample_weight : None, float or array-like of shape (n_samples,)
        Non-negative finite numbers; a scalar is broadcast to every row (as
        scikit-learn does).
    n_samples : int
        Rows of the call.
    estimator : estimator, default=None
        When its class sets ``_sample_weight_unsupported`` (a message saying why
        per-row weights have no meaning for it), any weights are a ``ValueError``.
    reset : bool, default=False
        Whether the call starts a new stream (``fit``): then weights that are all zero
        are an error (there is nothing to fit), as in scikit-learn. Within a stream a
        chunk of zero-weight rows is legitimate: the rows take their window slots.

    Returns
    -------
    sample_weight : None or ndarray of shape (n_samples,)
        float64 weights.
    """
    if sample_weight is None:
        return None
    reason = getattr(type(estimator), "_sample_weight_unsupported", None)
    if reason:
        raise ValueError(f"{type(estimator).__name__} does not accept sample_weight: {reason}")
    try:
        kind = np.asarray(sample_weight).dtype.kind
    except (TypeError, ValueError):  # ragged: the check below says so
        kind = "O"
    if isinstance(sample_weight, (bool, np.bool_)) or kind in "bcUSV":
        raise ValueError(
            "sample_weight must be real numbers (a scalar or an array of shape "
            f"(n_samples,)), got {type(sample_weight).__name__} of dtype kind {kind!r}."
        )
    check_numeric(sample_weight, "sample_weight")
    try:
        w = _check_sample_weight(
            sample_weight, np.empty((n_samples, 0)), dtype=np.float64,
            allow_all_zero_weights=True,
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid sample_weight: {exc}") from None
    if not np.isfinite(w).all():
        raise ValueError("sample_weight contains NaN or infinity; weights must be finite.")
    if (w < 0).any():
        raise ValueError("sample_weight contains negative values; weights must be >= 0.")
    if reset and n_samples and not w.any():
        raise ValueError(
            "Sample weights must contain at least one non-zero number: fit with every "
            "weight zero has nothing to fit."
        )
    return w


def commit_copy(estimator, work):
    """Give ``estimator`` the state of its working copy ``work``, in one statement."""
    state = {k: v for k, v in work.__dict__.items() if k != "_stream_lock"}
    estimator.__dict__.update(state)
    for gone in [k for k in estimator.__dict__ if k not in state and k != "_stream_lock"]:
        del estimator.__dict__[gone]


def enclosing_call():
    """The learning call in progress in this thread (or task), or None.

    Call it before taking a lock: a call that an interrupt (Ctrl-C) stopped on the
    cleanup lines of :func:`stream_update` can stay set although it has ended; it is
    recognised (:meth:`_Transaction.running`) and forgotten here, so later calls do not
    hand it their undo records.
    """
    tx = _ACTIVE.get()
    if tx is not None and not tx.running():
        _ACTIVE.set(None)
        return None
    return tx


def on_rollback(action):
    """Run ``action()`` if the learning call in progress fails (e.g. restore a solver's
    arrays from an undo record after writing into them in place)."""
    tx = _ACTIVE.get()
    if tx is not None and tx.open:
        tx.undo.append(action)


@contextmanager
def stream_update(estimator, *, check_params=True):
    """The template of every call that learns: lock, parameter check, all or nothing.

    The body validates its input, then learns; if it raises (anything, including
    ``KeyboardInterrupt``), the estimator's attributes are put back, and so is every
    in-place write registered with :func:`on_rollback` (by this call or by the calls it
    made on inner estimators). A call made inside another learning call (a pipeline's
    step) is also undone if the outer call fails after it.
    """
    outer = enclosing_call()
    lock = stream_lock(estimator)
    with lock:
        tx = _Transaction(lock)
        saved = dict(estimator.__dict__)
        tx.undo.append(lambda: _restore_attributes(estimator, saved))
        if outer is not None:
            outer.undo.append(tx.rollback)
        token = None
        try:
            token = _ACTIVE.set(tx)
            if check_params:
                check_stream_params(estimator)
            yield
        except BaseException:
            tx.open = False
            tx.rollback()
            raise
        finally:
            # an interrupt (Ctrl-C) here can leave this call set as the thread's call in
            # progress; the next call sees that it has ended (enclosing_call)
            tx.open = False
            if token is not None:
                _ACTIVE.reset(token)


def _restore_attributes(estimator, saved):
    # shallow: exact because the recursions assign new state arrays rather than writing
    # into the old ones (or register an undo of their in-place writes)
    estimator.__dict__.clear()
    estimator.__dict__.update(saved)


@fill_doc()
def validate_stream(estimator, X, y, *, reset):
    """Validate one chunk of a stream.

    Parameters
    ----------
    estimator : estimator
        The streaming estimator; ``n_features_in_`` is set when ``reset`` and checked
        otherwise, and ``estimator._n_targets`` (``None`` for a 1-D target) is checked.
    {stream_rows}
    reset : bool
        Whether this chunk starts a new stream.

    Returns
    -------
    X : ndarray of shape (n_samples, n_features)
        float64 rows.
    Y : ndarray of shape (n_samples, n_targets)
        The targets as a 2-D float64 array (one column for a 1-D ``y``).
    y_ndim : int
        ``y.ndim`` (1 or 2), which fixes the shape of the predictions.
    """
    check_numeric(X, "X")
    check_numeric(y, "y")
    check_target_shape(estimator, y, reset=reset)
    if not reset and _plain_chunk(estimator, X, y):
        # what validate_data would return unchanged (the same arrays), without its fixed
        # cost per call (≈ 0.1-0.2 ms: a tenth of a 1000-row call of a narrow stream)
        return X, y.reshape(y.shape[0], -1), y.ndim
    X, y = validate_data(
        estimator, X, y, reset=reset, dtype=np.float64, multi_output=True, y_numeric=True
    )
    if not np.isfinite(y).all():  # e.g. None in an object array, converted to NaN
        raise ValueError("y contains NaN or infinity (or missing values such as None).")
    return X, y.reshape(y.shape[0], -1), y.ndim


def _plain_chunk(estimator, X, y):
    """Whether a continuing stream's chunk passes :func:`validate_stream` as it is.

    True for plain float64 arrays — 2-D rows of the stream's width, a 1-D or 2-D target
    of as many rows (its shape already checked), every number finite — given to an
    estimator fitted without feature names: ``validate_data`` returns such arrays
    unchanged. Anything else (other types or dtypes, feature names, a non-finite
    number, a sum that overflows) goes through ``validate_data``, which converts it or
    raises its own error.
    """
    if type(X) is not np.ndarray or type(y) is not np.ndarray:
        return False
    if X.dtype != np.float64 or y.dtype != np.float64 or X.ndim != 2:
        return False
    state = estimator.__dict__
    n_rows, n_features = X.shape
    if not (n_rows and n_features and y.shape[0] == n_rows
            and n_features == state.get("n_features_in_")
            and "feature_names_in_" not in state):
        return False
    # a finite sum: every number finite (NaN and ±inf propagate; an overflow is left to
    # validate_data, which checks the numbers one by one)
    with np.errstate(over="ignore", invalid="ignore"):
        return bool(np.isfinite(X.sum()) and np.isfinite(y.sum()))


def check_target_shape(estimator, y, *, reset):
    """The one check of ``y``'s shape against the stream (``estimator._n_targets``)."""
    if y is None:
        return  # scikit-learn's validation says that y is required
    shape = y.shape if hasattr(y, "shape") else np.asarray(y).shape
    if len(shape) not in (1, 2) or (len(shape) == 2 and shape[1] == 0):
        raise ValueError(
            f"y has shape {shape}; expected (n_samples,) or (n_samples, n_targets) with "
            "n_targets >= 1."
        )
    if reset:
        return
    n_targets = estimator.__dict__.get("_n_targets")
    if (len(shape) == 1) != (n_targets is None) or (
        n_targets is not None and shape[1] != n_targets
    ):
        expected = "a 1-D target" if n_targets is None else f"{n_targets} targets"
        raise ValueError(f"y has shape {shape} but this stream has {expected}.")


def rollback_on_error(estimator):
    """:func:`stream_update` without the parameter check (all or nothing, locked)."""
    return stream_update(estimator, check_params=False)


class PredictMixin:
    """``predict`` of every streaming regressor, written once.

    The estimator implements ``_predict_rows(X)`` (validated rows, 2-D predictions: the
    path the delayed-label schedule also uses) and, where parameters changed by
    ``set_params`` would change what its state means, ``_check_predict_params()``
    (raising the same ``ValueError`` as a continued stream: after a refused
    ``set_params``, ``predict`` uses the learned state or is refused, never a mix).
    """

    @fill_doc()
    def predict(self, X):
        """Predict with the current state (no learning).

        {rows_parameters}

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            The predictions of the state after the rows learned so far (the shape of
            the targets learned).
        """
        check_is_fitted(self)
        self._check_predict_params()
        X = validate_data(self, X, reset=False, dtype=np.float64)
        # the state of one call boundary: a call that learns holds the lock while it
        # writes (some estimators update their state arrays in place); the lock is
        # taken if it exists, never created by a reader (inline: cheaper than _held)
        lock = self.__dict__.get("_stream_lock")
        if lock is None:
            return self._predict_validated(X)
        with lock:
            return self._predict_validated(X)

    def _check_predict_params(self):
        """Refuse to predict after a ``set_params`` that changes what the state means."""

    def _predict_validated(self, X):
        Y_pred = self._predict_rows(X)
        return Y_pred[:, 0] if self.__dict__.get("_n_targets") is None else Y_pred


class LinearPredictMixin(PredictMixin):
    """``predict = X @ coef_``; multi-output targets."""

    def _predict_validated(self, X):
        return X @ self.coef_

    def _predict_rows(self, X):
        """Predictions of validated rows, 2-D (the delayed-label path)."""
        return X @ self.coef_.reshape(X.shape[1], -1)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags


class OneRowLearnMixin:
    """``learn_one``: the single-observation path of learning, written once.

    The estimator's ``_learn_one(x, y)`` does the work:
    :meth:`StreamingRegressorMixin._learn_one` (the update template with cheap checks), or
    an estimator's own faster path with the same contract (all or nothing, under the
    lock, undone with an enclosing learning call that fails).
    """

    def learn_one(self, x, y):
        """Learn one row with only cheap checks (shape, dtype, finiteness).

        Equivalent to ``partial_fit(x[None], [y])`` without scikit-learn's per-call
        validation overhead. The first row of a stream must go through :meth:`fit` or
        :meth:`partial_fit` (which fix ``n_features_in_`` and the target shape).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.
        y : float or array-like of shape (n_targets,)
            Its target(s).

        Returns
        -------
        self : object
            The updated estimator.
        """
        return self._learn_one(x, y)


class OneRowPredictMixin:
    """``predict_one``: the single-observation path of a linear model (``x @ coef_``)."""

    def predict_one(self, x):
        """Predict one row with only cheap checks (shape, dtype, finiteness).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One row.

        Returns
        -------
        y_pred : float or ndarray of shape (n_targets,)
            ``x @ coef_``.
        """
        # no lock (it would cost ~1 µs a row): a call that learns assigns a new coef_
        # at its commit and never writes into the old one, so the one read of coef_
        # here is the coefficients of one call boundary
        coef = self.__dict__.get("coef_")
        if (type(x) is np.ndarray and x.dtype == np.float64 and x.ndim == 1
                and coef is not None and coef.ndim == 1 and x.shape[0] == self.n_features_in_):
            # a float64 row of the right length: a NaN or ±inf in it makes x·β NaN or
            # ±inf, so a finite prediction needs no other check (a non-finite one is
            # checked below, and stays when the row is finite: an overflow)
            y_pred = x @ coef
            if math.isfinite(y_pred):
                return y_pred
        check_fitted_fast(self)
        x = check_one_row(x, n_features=self.n_features_in_)
        return x @ coef


#: scikit-learn's check that integer weights equal repeated rows, and why a model of a
#: stream with a window or forgetting fails it
SAMPLE_WEIGHT_EQUIVALENCE_REASON = (
    "integer weights equal repeated rows only for a model of the whole history without "
    "forgetting (λ = 1, and a window holding every row); the check repeats each row in "
    "place and shuffles the weighted rows: repeats take window slots (the window is "
    "the last N rows by count) and push older rows out, with λ < 1 the copies of a row "
    "get different ages, and a stream's solution depends on the order of its rows"
)


def _without_sample_weight(method):
    """A public learning call of :class:`StreamingRegressorMixin` for an estimator that
    takes no per-row weights: ``sample_weight`` left out of its signature and docstring.

    Weights passed anyway (by keyword) reach the template, whose
    :func:`check_stream_sample_weight` refuses them with the estimator's reason.
    """

    @functools.wraps(method)
    def call(self, X, y, **kwargs):
        return method(self, X, y, **kwargs)

    signature = inspect.signature(method)
    call.__signature__ = signature.replace(
        parameters=[p for p in signature.parameters.values() if p.name != "sample_weight"]
    )
    call.__doc__ = _without_parameter(method.__doc__, "sample_weight")
    return call


def _without_parameter(doc, name):
    """A numpydoc docstring without the entry of parameter ``name`` (its line and the
    more indented lines below it)."""
    lines, indent = [], None
    for line in doc.splitlines(keepends=True):
        depth = len(line) - len(line.lstrip())
        if line.lstrip().startswith(f"{name} :"):
            indent = depth
        elif indent is None or not line.strip() or depth <= indent:
            indent = None
            lines.append(line)
    return "".join(lines)


#: the parameter values each estimator's last validated prequential_predict saw (by
#: identity; see prequential_context), and each class's parameter names
_VALIDATED = weakref.WeakKeyDictionary()
_PARAM_NAMES = {}


def _param_values(estimator):
    """The estimator's parameter values (``get_params(deep=False)``'s, without its
    signature inspection: the names are cached by class)."""
    cls = type(estimator)
    names = _PARAM_NAMES.get(cls)
    if names is None:
        names = _PARAM_NAMES[cls] = tuple(cls._get_param_names())
    return tuple(getattr(estimator, n) for n in names)


def _params_unchanged(estimator):
    """Whether ``estimator``'s parameters are the very objects its last validated call
    saw (a ``set_params`` since, even to an equal value, is a change)."""
    try:
        seen = _VALIDATED.get(estimator)
    except TypeError:  # not weakly referable or not hashable: always validated
        return False
    return seen is not None and all(a is b for a, b in zip(_param_values(estimator), seen, strict=True))


def _remember_params(estimator):
    try:
        _VALIDATED[estimator] = _param_values(estimator)
    except TypeError:
        pass


def prequential_context(*, prefer_skip_nested_validation):
    """scikit-learn's ``_fit_context`` for ``prequential_predict``, validating the
    parameters when they may have changed: on the call that starts a stream and after
    any ``set_params``, not on every call of a stream whose parameters are the objects
    last validated (``_validate_params`` costs 44 µs, most of a one-row call's fixed cost
    on the short-window solver; scikit-learn's ``partial_fit`` of a fitted estimator
    never validates them again). The method runs with nested validation skipped when
    ``prefer_skip_nested_validation`` (as ``_fit_context``); the undecorated method is
    ``wrapper.__wrapped__``."""

    def decorator(method):
        validated = _fit_context(prefer_skip_nested_validation=prefer_skip_nested_validation)(method)

        @functools.wraps(method)
        def wrapper(estimator, *args, **kwargs):
            skip = sklearn.get_config().get("skip_parameter_validation", False)
            if "n_samples_seen_" not in estimator.__dict__ or not _params_unchanged(estimator):
                out = validated(estimator, *args, **kwargs)
                if not skip:  # (a call that passed validation, not one that skipped it)
                    _remember_params(estimator)
                return out
            with sklearn.config_context(skip_parameter_validation=prefer_skip_nested_validation or skip):
                return method(estimator, *args, **kwargs)

        return wrapper

    return decorator


class StreamingRegressorMixin(StreamLockMixin, PredictMixin):
    """``fit``, ``partial_fit``, ``prequential_predict``, ``learn_one`` and ``predict``.

    Every learning call goes through :meth:`_partial_fit`, the package's update template
    (see the module's docstring). The estimator implements:

    * ``_stream_params``: the names of the parameters its state is built with (or its
      own ``_check_stream_params()``);
    * ``_predict_rows(X)`` (see :class:`PredictMixin`; :class:`LinearPredictMixin` for
      ``X @ coef_``);
    * ``_check_new_stream()`` (optional): parameter checks before a new stream starts;
    * ``_init_state(n_features, n_targets, y_ndim)``: a fresh state for a new stream
      (``n_samples_seen_ = 0``);
    * ``_learn(X, Y, *, predict)``: learn validated rows in order (``Y`` 2-D), updating
      ``n_samples_seen_``, and return the prequential predictions (2-D) when ``predict``
      (else ``None``); it assigns new state arrays rather than writing into the old ones
      (or undoes its in-place writes itself before re-raising);
    * ``_learn_call(X, Y, sample_weight, *, predict, reset, delay)`` (optional): how the
      rows of one public call are handed to ``_learn`` (by default: the delayed-label
      schedule, then per-row weights); an estimator that cuts a call into steps of its
      own or reports on a call as a whole overrides it;
    * ``_sample_weight_unsupported`` (optional): why per-row weights have no meaning
      for it. Then ``fit``, ``partial_fit`` and ``prequential_predict`` are generated
      without ``sample_weight`` in their signatures and docstrings (scikit-learn's
      ``has_fit_parameter`` is False), and weights passed anyway are a ``ValueError``
      giving the reason.

    ``fit`` is ``_partial_fit`` with a reset, so ``fit`` and streaming ``partial_fit``
    cannot disagree.
    """

    _stream_params = ()

    #: Whether the public learning calls skip the parameter validation of the
    #: estimators they call (scikit-learn's ``prefer_skip_nested_validation``): a
    #: meta-estimator whose inner estimator validates its parameters when it learns sets
    #: it to False.
    _skip_nested_validation = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        skip = cls.__dict__.get("_skip_nested_validation", True)
        unweighted = bool(getattr(cls, "_sample_weight_unsupported", None))
        if skip and not unweighted:
            return
        for name in ("fit", "partial_fit", "prequential_predict"):
            if name not in cls.__dict__:
                method = getattr(StreamingRegressorMixin, name).__wrapped__
                if unweighted:
                    method = _without_sample_weight(method)
                context = prequential_context if name == "prequential_predict" else _fit_context
                setattr(cls, name, context(prefer_skip_nested_validation=skip)(method))

    def _check_stream_params(self):
        """Refuse to continue a stream whose parameters changed since it started."""
        check_stream_params(self)

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.target_tags.multi_output = True
        return tags

    def _check_new_stream(self):
        """Cross-parameter checks before a new stream starts (none by default)."""

    #: Why per-row weights have no meaning for a subclass (a message), or None: then
    #: any ``sample_weight`` is a ValueError saying so.
    _sample_weight_unsupported = None

    def _expected_failed_checks(self):
        """scikit-learn checks this model cannot pass, with the mathematical reason."""
        if self._sample_weight_unsupported:
            return {}
        return {"check_sample_weight_equivalence_on_dense_data": SAMPLE_WEIGHT_EQUIVALENCE_REASON}

    def _partial_fit(self, X, y, *, predict, reset, delay=0, sample_weight=None):
        """Validate the whole call, then learn it; on any error the state is unchanged."""
        first_call = reset or "n_samples_seen_" not in self.__dict__
        with stream_update(self, check_params=False):
            if first_call:
                self._check_new_stream()
            else:
                self._check_stream_params()
            X, Y, y_ndim = validate_stream(self, X, y, reset=first_call)
            sw = check_stream_sample_weight(sample_weight, X.shape[0], estimator=self,
                                            reset=reset)
            if first_call:
                self._init_state(X.shape[1], Y.shape[1], y_ndim)
                self._n_targets = None if y_ndim == 1 else Y.shape[1]
                record_stream_params(self)
            Y_pred = self._learn_call(X, Y, sw, predict=predict, reset=reset, delay=delay)
        if Y_pred is not None and y_ndim == 1:
            Y_pred = Y_pred[:, 0]
        return Y_pred

    def _learn_call(self, X, Y, sample_weight, *, predict, reset, delay):
        """Learn the validated rows of one public call (inside its transaction).

        ``reset``: the call is ``fit``; ``delay``: labels that many rows late (only when
        ``predict``). Returns the prequential predictions (2-D) when ``predict``, else
        ``None``.
        """
        if predict and delay:
            return self._learn_delayed(X, Y, delay, sample_weight)
        return self._learn_weighted(X, Y, sample_weight, predict=predict)

    def _learn_delayed(self, X, Y, delay, sample_weight):
        """Validated rows whose labels arrive ``delay`` rows late (:func:`run_with_delay`).

        An estimator that keeps one undo record for several ``_learn`` calls
        (:meth:`_begin_pieces`) learns the rows one by one in place, under one record;
        the others on a private copy committed at the end (:func:`learn_with_delay`).
        """
        piece = self._begin_pieces(X.shape[0])
        if piece:
            return run_with_delay(
                X, Y, delay, predict=self._predict_rows, sample_weight=sample_weight,
                learn=lambda Xr, Yr, wr=None: self._learn_weighted(
                    Xr, Yr, wr, predict=False, **piece),
            )
        return learn_with_delay(
            self, X, Y, delay, sample_weight=sample_weight,
            learn=lambda work, Xr, Yr, wr=None: work._learn_weighted(Xr, Yr, wr, predict=False),
        )

    def _begin_pieces(self, n_rows):
        """Before a call is learned in several ``_learn`` calls (of ``n_rows`` in all):
        the keyword arguments for them. An estimator that keeps an undo record per
        ``_learn`` call takes one record for all the rows here and returns the option
        that skips the others (:class:`QREWRLSRegressor`); by default nothing."""
        return {}

    #: whether ``_learn(..., inert=(mask, X))`` predicts the zero rows ``mask`` as the
    #: rows of ``X`` by the state before each, in the same pass (:meth:`_learn_weighted`)
    _learns_inert_rows = False

    def _learn_weighted(self, X, Y, sample_weight, *, predict, **piece):
        """``_learn`` with per-row weights: rows and targets scaled by ``√w``.

        The solvers minimise ``Σ λ^age (ỹ_i − z̃_iβ)²`` over the rows they are handed; with
        ``z̃_i = √w_i z_i`` and ``ỹ_i = √w_i y_i`` that is ``Σ λ^age w_i (y_i − z_iβ)²``.
        A prediction the solver makes for the scaled row is ``√w_i (z_i·β)``: divided by
        ``√w_i``. A zero-weight row is a zero row to the solver (it takes its window slot,
        contributes nothing) and gets its prediction ``z_i·β`` from the state before it:
        in the same pass when the estimator's ``_learn`` takes ``inert=(mask, X)``
        (``_learns_inert_rows``), else by splitting the call there (one extra ``_learn``
        call per zero-weight row).
        """
        if sample_weight is None:
            return self._learn(X, Y, predict=predict, **piece)
        root = np.sqrt(sample_weight)
        with np.errstate(over="ignore", under="ignore"):
            Xs = X * root[:, None]
            Ys = Y * root[:, None]
        if not (np.isfinite(Xs).all() and np.isfinite(Ys).all()):
            raise ValueError(
                "sample_weight is too large for these rows: √w·x or √w·y overflows "
                "float64. Rescale the weights (only their ratios and alpha's scale matter)."
            )
        if not predict:
            self._learn(Xs, Ys, predict=False, **piece)
            return None
        zero = root == 0.0
        if self._learns_inert_rows:
            Y_pred = self._learn(Xs, Ys, predict=True, inert=(zero, X), **piece)
            live = ~zero
            Y_pred[live] /= root[live, None]
            return Y_pred
        n = X.shape[0]
        Y_pred = np.empty(Y.shape)
        starts = np.flatnonzero(zero)
        bounds = [0, *[int(j) for j in starts if j > 0], n]
        # one undo record for the whole call, not one per piece (a call with many
        # zero-weight rows would otherwise keep one record per row until it ends)
        piece = self._begin_pieces(n) if len(bounds) > 2 else {}
        for a, b in zip(bounds[:-1], bounds[1:]):
            if root[a] == 0.0:
                # the prediction of the unscaled row by the state before it
                Y_pred[a] = self._predict_rows(X[a : a + 1])[0]
            P = self._learn(Xs[a:b], Ys[a:b], predict=True, **piece)
            live = root[a:b] > 0.0
            Y_pred[a:b][live] = P[live] / root[a:b][live, None]
        return Y_pred

    def _learn_one(self, x, y):
        """``learn_one`` through the same template, with only cheap checks."""
        check_fitted_fast(self, "n_samples_seen_")
        with stream_update(self, check_params=False):
            self._check_stream_params()
            x = check_one_row(x, n_features=self.n_features_in_)
            yv = check_one_target(y, n_targets=self._n_targets)
            self._learn(x[None, :], yv[None, :], predict=False)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @fill_doc()
    def fit(self, X, y, sample_weight=None):
        """Reset, then learn the rows of ``X`` in order.

        Parameters
        ----------
        {stream_rows}
        sample_weight : float or array-like of shape (n_samples,), default=None
            Per-row weights ``w_i >= 0`` (a scalar is broadcast), multiplying each row's
            term of the objective (see the class Notes; a composite model passes them to
            the models it holds); ``None``: 1.

        Returns
        -------
        self : object
            The fitted estimator.
        """
        self._partial_fit(X, y, predict=False, reset=True, sample_weight=sample_weight)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @fill_doc()
    def partial_fit(self, X, y, sample_weight=None):
        """Learn the rows of ``X`` in order, continuing the stream.

        Parameters
        ----------
        {stream_rows}
        sample_weight : float or array-like of shape (n_samples,), default=None
            Per-row weights ``w_i >= 0`` (see :meth:`fit`).

        Returns
        -------
        self : object
            The updated estimator.
        """
        self._partial_fit(X, y, predict=False, reset=False, sample_weight=sample_weight)
        return self

    @prequential_context(prefer_skip_nested_validation=True)
    @fill_doc()
    def prequential_predict(self, X, y, *, delay=0, sample_weight=None):
        """Predict each row from the state before it, then learn it (vectorised).

        Parameters
        ----------
        {stream_rows}
        delay : int, default=0
            Labels arrive ``delay`` rows late: ``y_pred[i]`` is made by the state that
            has learned rows ``< i − delay`` of this call (see
            :func:`~sklearn_orfit.prequential_predict`). Every row is learned on return.
        sample_weight : float or array-like of shape (n_samples,), default=None
            Per-row weights ``w_i >= 0`` (see :meth:`fit`). They change what is learned,
            not what is predicted: ``y_pred[i]`` is the prediction of the unweighted row
            ``X[i]`` (made also for a zero-weight row).

        Returns
        -------
        y_pred : ndarray of shape (n_samples,) or (n_samples, n_targets)
            ``y_pred[i]`` from the state after rows ``< i − delay`` (before the first
            row of a stream, the prediction of the model that has learned nothing: 0
            for a linear model started at zero).
        """
        delay = check_delay(delay)
        return self._partial_fit(X, y, predict=True, reset=False, delay=delay,
                                 sample_weight=sample_weight)
