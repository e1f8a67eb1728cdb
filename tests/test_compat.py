"""sklearn_orfit._compat: the one home of the private scikit-learn names the package uses.

The package's other modules must not import a private scikit-learn module or name
(checked on their source with ``ast``), and each name of ``_compat`` (and each of its
fallbacks, used when a scikit-learn release moves a name) must do what the package
relies on.
"""

import ast
import pathlib
from numbers import Integral, Real

import numpy as np
import pytest
import sklearn
from sklearn.base import BaseEstimator
from sklearn.linear_model import Ridge
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_info

import sklearn_orfit
from sklearn_orfit import _compat

PACKAGE = pathlib.Path(sklearn_orfit.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "_compat.py" or p.parent != PACKAGE)


def _is_sklearn(dotted):
    return dotted.split(".")[0] == "sklearn"


def _private(dotted):
    return any(part.startswith("_") for part in dotted.split("."))


def _attribute_chain(node):
    """``"a.b.c"`` for the expression ``a.b.c``, or None."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        return ".".join([node.id, *reversed(parts)])
    return None


def private_sklearn_uses(source):
    """(line, what) of every private scikit-learn module or name the source reaches."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_sklearn(node.module):
                for alias in node.names:
                    dotted = f"{node.module}.{alias.name}"
                    if _private(dotted):
                        found.append((node.lineno, dotted))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_sklearn(alias.name) and _private(alias.name):
                    found.append((node.lineno, alias.name))
        elif isinstance(node, ast.Attribute) and not isinstance(node.ctx, ast.Del):
            chain = _attribute_chain(node)
            if chain and _is_sklearn(chain) and _private(chain):
                found.append((node.lineno, chain))
    return found


def test_the_checker_finds_each_form():
    source = (
        "from sklearn.utils._param_validation import Interval\n"
        "from sklearn.base import _fit_context, clone\n"
        "import sklearn.utils._set_output\n"
        "import sklearn\n"
        "x = sklearn.utils.validation._num_samples\n"
        "from sklearn.base import clone\n"
        "from sklearn_orfit._streaming._base import stream_update\n"
        "from ._compat import _fit_context\n"
    )
    assert private_sklearn_uses(source) == [
        (1, "sklearn.utils._param_validation.Interval"),
        (2, "sklearn.base._fit_context"),
        (3, "sklearn.utils._set_output"),
        (5, "sklearn.utils.validation._num_samples"),
    ]


def test_the_package_reaches_private_sklearn_only_through_compat():
    assert len(MODULES) > 20  # the whole package, sub-packages included
    offenders = {
        str(path.relative_to(PACKAGE)): uses
        for path in MODULES
        if (uses := private_sklearn_uses(path.read_text(encoding="utf-8")))
    }
    assert offenders == {}


def test_compat_imports_private_sklearn_names():
    # the checker is not vacuous: _compat itself is where the private names come from
    uses = private_sklearn_uses((PACKAGE / "_compat.py").read_text(encoding="utf-8"))
    assert {what for _, what in uses} >= {
        "sklearn.base._fit_context",
        "sklearn.utils._param_validation.Interval",
        "sklearn.utils._set_output._safe_set_output",
        "sklearn.pipeline._name_estimators",
        "sklearn.utils.validation._num_samples",
        "sklearn.utils.validation._check_sample_weight",
        "sklearn.utils.parallel._threadpool_controller_decorator",
    }


# --------------------------------------------------------------- each name works
class _Toy(BaseEstimator):
    _parameter_constraints: dict = {
        "n": [_compat.Interval(Integral, 1, None, closed="left")],
        "rate": [_compat.Interval(Real, 0, 1, closed="right")],
        "kind": [_compat.StrOptions({"a", "b"})],
        "model": [_compat.HasMethods(["fit", "predict"]), None],
        "steps": [list, _compat.Hidden(tuple)],
    }

    def __init__(self, n=1, rate=0.5, kind="a", model=None, steps=()):
        self.n, self.rate, self.kind, self.model, self.steps = n, rate, kind, model, steps

    @_compat._fit_context(prefer_skip_nested_validation=True)
    def fit(self, X=None, y=None):
        # nested validation is skipped inside a fit with prefer_skip_nested_validation
        self.skipped_ = sklearn.get_config()["skip_parameter_validation"]
        return self


def _fitted_with(fit_context, **params):
    toy = _Toy(**params)
    method = fit_context(prefer_skip_nested_validation=True)(_Toy.fit.__wrapped__)
    return method(toy)


@pytest.mark.parametrize(
    "fit_context",
    [_compat._fit_context, _compat._fit_context_fallback],
    ids=["sklearn", "fallback"],
)
def test_fit_context_and_constraints(fit_context):
    assert _fitted_with(fit_context).skipped_ is True
    assert _fitted_with(fit_context, model=Ridge(), steps=[1]).skipped_ is True
    for bad in [{"n": 0}, {"n": 1.5}, {"rate": 0.0}, {"kind": "c"}, {"model": object()},
                {"steps": "ab"}]:
        with pytest.raises(ValueError, match=next(iter(bad))):
            _fitted_with(fit_context, **bad)
    with sklearn.config_context(skip_parameter_validation=True):
        assert _fitted_with(fit_context, n=0).skipped_ is True  # validation switched off


def test_hidden_constraint_is_left_out_of_the_message():
    with pytest.raises(ValueError) as info:
        _Toy(steps="ab").fit()
    assert "list" in str(info.value) and "tuple" not in str(info.value)


@pytest.mark.parametrize(
    "routing_enabled", [_compat._routing_enabled, _compat._routing_enabled_fallback],
    ids=["sklearn", "fallback"],
)
def test_routing_enabled(routing_enabled):
    assert routing_enabled() is False
    with sklearn.config_context(enable_metadata_routing=True):
        assert routing_enabled() is True


def test_metadata_requester():
    from sklearn.utils.metadata_routing import MetadataRequest

    class Scorer(_compat._MetadataRequester):
        def score(self, y, sample_weight=None):
            return 0.0

    request = Scorer()._get_metadata_request()
    assert isinstance(request, MetadataRequest)
    assert "sample_weight" in request.score.requests


def test_set_output_helpers():
    pd = pytest.importorskip("pandas")
    X = pd.DataFrame({"a": [1.0, 2.0, 3.0], "b": [0.0, 1.0, 5.0]})
    scaler = StandardScaler().fit(X)
    assert isinstance(scaler.transform(X), np.ndarray)
    _compat._safe_set_output(scaler, transform="pandas")
    out = scaler.transform(X)
    assert isinstance(out, pd.DataFrame) and list(out.columns) == ["a", "b"]
    wrapped = _compat._wrap_data_with_container("transform", np.zeros((3, 2)), X, scaler)
    assert isinstance(wrapped, pd.DataFrame) and list(wrapped.columns) == ["a", "b"]
    _compat._safe_set_output(scaler, transform="default")
    assert isinstance(scaler.transform(X), np.ndarray)
    # a step without set_output is left alone when no container is asked for
    _compat._safe_set_output(object(), transform=None)


@pytest.mark.parametrize(
    "steps",
    [
        [Ridge(), StandardScaler()],
        [Ridge(), Ridge(), StandardScaler(), Ridge()],
        ["passthrough", Ridge(), "passthrough"],
        [],
    ],
)
def test_name_estimators(steps):
    names = _compat._name_estimators(steps)
    assert names == _compat._name_estimators_fallback(steps)
    assert [est for _, est in names] == steps
    assert len({name for name, _ in names}) == len(steps)


def test_name_estimators_numbering():
    names = [name for name, _ in _compat._name_estimators([Ridge(), StandardScaler(), Ridge()])]
    assert names == ["ridge-1", "standardscaler", "ridge-2"]


def test_safe_indexing():
    X = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(_compat._safe_indexing(X, slice(1, 2)), X[1:2])
    assert _compat._safe_indexing([[1], [2], [3]], [2, 0]) == [[3], [1]]
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X, columns=list("abc"))
    row = _compat._safe_indexing(df, slice(2, 3))
    assert isinstance(row, pd.DataFrame) and row.index.tolist() == [2]


@pytest.mark.parametrize(
    "num_samples", [_compat._num_samples, _compat._num_samples_fallback],
    ids=["sklearn", "fallback"],
)
def test_num_samples(num_samples):
    assert num_samples(np.zeros((7, 2))) == 7
    assert num_samples([[1, 2], [3, 4], [5, 6]]) == 3
    pd = pytest.importorskip("pandas")
    assert num_samples(pd.DataFrame({"a": range(5)})) == 5
    with pytest.raises(TypeError):
        num_samples(np.float64(1.0))
    with pytest.raises(TypeError):
        num_samples(Ridge())
    with pytest.raises(TypeError):
        num_samples(3)


def test_check_sample_weight():
    X = np.zeros((4, 1))
    np.testing.assert_array_equal(_compat._check_sample_weight(None, X), np.ones(4))
    w = _compat._check_sample_weight([1, 2, 0, 3], X, dtype=np.float64)
    assert w.dtype == np.float64 and w.tolist() == [1.0, 2.0, 0.0, 3.0]
    np.testing.assert_array_equal(_compat._check_sample_weight(2.0, X), np.full(4, 2.0))
    with pytest.raises(ValueError, match="shape"):
        _compat._check_sample_weight([1.0, 2.0], X)
    # all-zero weights: refused unless allowed, on every supported scikit-learn
    with pytest.raises(ValueError, match="non-zero"):
        _compat._check_sample_weight(np.zeros(4), X)
    zeros = _compat._check_sample_weight(np.zeros(4), X, allow_all_zero_weights=True)
    np.testing.assert_array_equal(zeros, np.zeros(4))


def _blas_threads():
    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


@pytest.mark.parametrize(
    "decorator",
    [_compat._threadpool_controller_decorator,
     _compat._threadpool_controller_decorator_fallback],
    ids=["sklearn", "fallback"],
)
def test_threadpool_controller_decorator(decorator):
    np.dot(np.ones((2, 2)), np.ones((2, 2)))  # load BLAS

    @decorator(limits=1, user_api="blas")
    def inside(value):
        return value, _blas_threads()

    value, threads = inside(3)
    assert value == 3
    if not _blas_threads():
        pytest.skip("threadpoolctl sees no BLAS library")
    assert threads and all(n == 1 for n in threads)
