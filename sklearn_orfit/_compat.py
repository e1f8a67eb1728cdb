"""The private scikit-learn names the package uses, imported in this one place.

scikit-learn keeps no compatibility promise for names that start with an underscore or
live in a private module (``sklearn.utils._param_validation``, ...): a release may move
or change one. Every module of the package imports them from here, so that such a
release breaks this file only (``tests/test_compat.py`` asserts that no other module
imports a private scikit-learn module or name, and that each name here works).

The package supports scikit-learn 1.6 to 1.9 (``tools/check_sklearn_versions.sh`` runs
the tests against the oldest and the newest). For each name: where it lives in
scikit-learn 1.6.1 (the oldest supported) and 1.9.1 (the newest tested), and what is
used if it is not found there.

* ``_fit_context``: ``sklearn.base`` in 1.6.1 and 1.9.1. Missing:
  :func:`_fit_context_fallback` (validate the parameters, then fit with nested
  validation skipped).
* ``Interval``, ``StrOptions``, ``HasMethods``, ``Hidden``, ``validate_params``:
  ``sklearn.utils._param_validation`` in 1.6.1 and 1.9.1. Missing: no fallback (the
  constraint objects are read by scikit-learn's own ``_validate_params``, so a copy
  would not do); the ImportError names this file. ``validate_params`` checks a
  function's arguments against such constraints (``InvalidParameterError``, a
  ``ValueError``). ``Interval(Integral, ...)`` takes ``True`` and ``False`` as 1 and 0:
  an argument that must refuse booleans (a function's ``delay``, ``horizon``, ``season``,
  a splitter's sizes) goes through the one ``_streaming._validation.check_int``.
* ``_MetadataRequester``, ``_routing_enabled``: re-exported by the public
  ``sklearn.utils.metadata_routing`` in 1.6.1 and 1.9.1 (defined in
  ``sklearn.utils._metadata_requests``). Missing: the defining module; for
  ``_routing_enabled`` then :func:`_routing_enabled_fallback` (the public
  ``get_config()["enable_metadata_routing"]``).
* ``_safe_set_output``, ``_wrap_data_with_container``: ``sklearn.utils._set_output`` in
  1.6.1 and 1.9.1. Missing: no fallback (``set_output``'s own machinery).
* ``_name_estimators``: ``sklearn.pipeline`` in 1.6.1 and 1.9.1. Missing:
  :func:`_name_estimators_fallback` (the same names).
* ``_safe_indexing``: re-exported by ``sklearn.utils`` in 1.6.1 and 1.9.1 (defined in
  ``sklearn.utils._indexing``). Missing: the defining module.
* ``_num_samples``: ``sklearn.utils.validation`` in 1.6.1 and 1.9.1. Missing:
  :func:`_num_samples_fallback`.
* ``_check_sample_weight``: ``sklearn.utils.validation`` in 1.6.1 and 1.9.1, wrapped:
  its ``allow_all_zero_weights`` keyword is new in 1.9 (1.6 to 1.8 have none and
  accept all-zero weights), so before 1.9 :func:`_check_sample_weight` refuses
  all-zero weights itself unless they are allowed. Missing: no fallback.
* ``_BaseComposition``: ``sklearn.utils.metaestimators`` in 1.6.1 and 1.9.1 (the
  ``get_params``/``set_params`` of a list of named estimators). Missing: no fallback.
* ``_threadpool_controller_decorator``: ``sklearn.utils.parallel`` in 1.6.1 and 1.9.1.
  Missing: :func:`_threadpool_controller_decorator_fallback` (threadpoolctl's
  ``ThreadpoolController.limit``, which it calls).

``MetadataRequest`` and ``get_routing_for_object`` are public
(``sklearn.utils.metadata_routing``) and are imported from there directly.
"""

import functools
import inspect
import numbers

import numpy as np
import sklearn

__all__ = [
    "HasMethods",
    "_BaseComposition",
    "Hidden",
    "Interval",
    "StrOptions",
    "_MetadataRequester",
    "_check_sample_weight",
    "_fit_context",
    "_name_estimators",
    "_num_samples",
    "_routing_enabled",
    "_safe_indexing",
    "_safe_set_output",
    "_threadpool_controller_decorator",
    "_wrap_data_with_container",
    "validate_params",
]

_MOVED = (
    "scikit-learn {version} has no {name} where sklearn_orfit/_compat.py looks for it "
    "({where}): this scikit-learn is newer than the package supports; update "
    "sklearn_orfit/_compat.py."
)


def _missing(name, where):
    return ImportError(_MOVED.format(version=sklearn.__version__, name=name, where=where))


# ---------------------------------------------------------------- fitting and params
def _fit_context_fallback(*, prefer_skip_nested_validation):
    """``sklearn.base._fit_context`` as scikit-learn 1.6-1.9 define it.

    Validates the estimator's parameters (unless parameter validation is switched off
    globally), then runs the method with nested validation skipped when
    ``prefer_skip_nested_validation``. (scikit-learn's also skips re-validating a
    ``partial_fit`` of a fitted estimator; validating again is only slower.)
    """

    def decorator(fit_method):
        @functools.wraps(fit_method)
        def wrapper(estimator, *args, **kwargs):
            global_skip = sklearn.get_config().get("skip_parameter_validation", False)
            if not global_skip:
                estimator._validate_params()
            with sklearn.config_context(
                skip_parameter_validation=prefer_skip_nested_validation or global_skip
            ):
                return fit_method(estimator, *args, **kwargs)

        return wrapper

    return decorator


try:
    from sklearn.base import _fit_context
except ImportError:  # pragma: no cover - only on a scikit-learn without it
    _fit_context = _fit_context_fallback

try:
    from sklearn.utils._param_validation import (
        HasMethods, Hidden, Interval, StrOptions, validate_params,
    )
except ImportError:  # pragma: no cover - only on a scikit-learn that moved them
    raise _missing(
        "Interval, StrOptions, HasMethods, Hidden, validate_params",
        "sklearn.utils._param_validation",
    ) from None


# ------------------------------------------------------------------ metadata routing
def _routing_enabled_fallback():
    """Whether metadata routing is on: the public configuration flag."""
    return bool(sklearn.get_config().get("enable_metadata_routing", False))


try:
    from sklearn.utils.metadata_routing import _MetadataRequester
except ImportError:  # pragma: no cover
    try:
        from sklearn.utils._metadata_requests import _MetadataRequester
    except ImportError:
        raise _missing(
            "_MetadataRequester",
            "sklearn.utils.metadata_routing, sklearn.utils._metadata_requests",
        ) from None

try:
    from sklearn.utils.metadata_routing import _routing_enabled
except ImportError:  # pragma: no cover
    try:
        from sklearn.utils._metadata_requests import _routing_enabled
    except ImportError:
        _routing_enabled = _routing_enabled_fallback


# ------------------------------------------------------------------------ set_output
try:
    from sklearn.utils._set_output import _safe_set_output, _wrap_data_with_container
except ImportError:  # pragma: no cover
    raise _missing(
        "_safe_set_output, _wrap_data_with_container", "sklearn.utils._set_output"
    ) from None


# ------------------------------------------------------------------ pipelines, input
def _name_estimators_fallback(estimators):
    """``sklearn.pipeline._name_estimators``: lower-cased class names, numbered when
    they repeat (``"ridge-1"``, ``"ridge-2"``); a string step (``"passthrough"``) is
    named by itself."""
    names = [
        estimator if isinstance(estimator, str) else type(estimator).__name__.lower()
        for estimator in estimators
    ]
    counts = {}
    for name in names:
        counts[name] = counts.get(name, 0) + 1
    for name, count in list(counts.items()):
        if count == 1:
            del counts[name]
    for i in reversed(range(len(estimators))):
        name = names[i]
        if name in counts:
            names[i] += f"-{counts[name]}"
            counts[name] -= 1
    return list(zip(names, estimators))


try:
    from sklearn.utils.metaestimators import _BaseComposition
except ImportError:  # pragma: no cover
    raise _missing("_BaseComposition", "sklearn.utils.metaestimators") from None

try:
    from sklearn.pipeline import _name_estimators
except ImportError:  # pragma: no cover
    _name_estimators = _name_estimators_fallback

try:
    from sklearn.utils import _safe_indexing
except ImportError:  # pragma: no cover
    try:
        from sklearn.utils._indexing import _safe_indexing
    except ImportError:
        raise _missing("_safe_indexing", "sklearn.utils, sklearn.utils._indexing") from None


def _num_samples_fallback(x):
    """Number of rows of an array-like: an integer ``shape[0]``, else ``len``."""
    message = f"Expected sequence or array-like, got {type(x)}"
    if hasattr(x, "fit") and callable(x.fit):
        raise TypeError(message)  # an estimator, not data
    shape = getattr(x, "shape", None)
    if shape is not None:
        if len(shape) == 0:
            raise TypeError(
                "Input should have at least 1 dimension i.e. satisfy `len(x.shape) > 0`, "
                f"got scalar `{x!r}` instead."
            )
        if isinstance(shape[0], numbers.Integral):
            return shape[0]
    if not hasattr(x, "__len__") and hasattr(x, "__array__"):
        x = np.asarray(x)
    try:
        return len(x)
    except TypeError as exc:
        raise TypeError(message) from exc


try:
    from sklearn.utils.validation import _num_samples
except ImportError:  # pragma: no cover
    _num_samples = _num_samples_fallback

try:
    from sklearn.utils.validation import _check_sample_weight as _sklearn_check_sample_weight
except ImportError:  # pragma: no cover
    raise _missing("_check_sample_weight", "sklearn.utils.validation") from None

_HAS_ALL_ZERO_OPTION = (
    "allow_all_zero_weights" in inspect.signature(_sklearn_check_sample_weight).parameters
)


def _check_sample_weight(sample_weight, X, *, dtype=None, allow_all_zero_weights=False):
    """``sklearn.utils.validation._check_sample_weight``, the same on 1.6 to 1.9.

    ``allow_all_zero_weights`` is scikit-learn 1.9's keyword: with ``False``, weights
    that are all zero (or none at all) are a ``ValueError``, as in 1.9; before 1.9,
    which has no such check, this wrapper makes it. Only the keywords the package uses
    are forwarded.
    """
    if _HAS_ALL_ZERO_OPTION:
        return _sklearn_check_sample_weight(
            sample_weight, X, dtype=dtype, allow_all_zero_weights=allow_all_zero_weights
        )
    w = _sklearn_check_sample_weight(sample_weight, X, dtype=dtype)
    if not allow_all_zero_weights and np.all(w == 0):
        raise ValueError("Sample weights must contain at least one non-zero number.")
    return w


# ------------------------------------------------------------------------- threads
@functools.lru_cache(maxsize=None)
def _threadpool_controller():
    from threadpoolctl import ThreadpoolController  # a dependency of scikit-learn

    return ThreadpoolController()


def _threadpool_controller_decorator_fallback(limits=1, user_api="blas"):
    """Run the decorated function with its thread pools limited (threadpoolctl's
    ``ThreadpoolController.limit``; the libraries are looked up at the first call)."""

    def decorator(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with _threadpool_controller().limit(limits=limits, user_api=user_api):
                return func(*args, **kwargs)

        return wrapper

    return decorator


try:
    from sklearn.utils.parallel import _threadpool_controller_decorator
except ImportError:  # pragma: no cover
    _threadpool_controller_decorator = _threadpool_controller_decorator_fallback
