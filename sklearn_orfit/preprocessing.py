"""Streaming transformers without look-ahead: recursive z-scoring and lags.

See the user guide's chapter on prequential evaluation (``docs/user_guide/prequential.rst``).

Both transformers have, besides the usual ``fit`` / ``partial_fit`` / ``transform``, a
:meth:`prequential_transform` method: the transformer analogue of
:func:`~sklearn_orfit.prequential_predict`. It transforms each row of a chunk with the
state learned from the rows *before* it, then learns the row, in one vectorised call.
:class:`~sklearn_orfit.StreamingPipeline` uses it, which is what makes a chain such as
``RecursiveStandardScaler → RandomFourierFeatures → QREWRLSRegressor`` free of
look-ahead.
"""

import functools
from numbers import Integral, Real

import numpy as np
from sklearn.base import BaseEstimator, OneToOneFeatureMixin, TransformerMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from ._compat import Interval, _fit_context
from ._docstrings import fill_doc
from ._streaming._validation import check_one_row, check_rows
from ._streaming._base import (
    StreamLockMixin, _held, check_stream_params, record_stream_params, stream_update,
)

__all__ = ["LagTransformer", "RecursiveStandardScaler"]

_EPS = np.finfo(np.float64).eps


# Exponent of a column in which no non-zero value has been seen (below every float64's).
_NO_EXPONENT = -1100
# Values are handled in units 2^e of their column, e the exponent of the largest |x|
# seen: |x/2^e| < 1, so no square or sum of squares can overflow or underflow. In
# prequential_transform a block of rows keeps the units of its first row while its
# values stay below 2^_HEADROOM of them (squares below 2^802).
_HEADROOM = 400


def _all_or_nothing(method):
    """A learning call under the update template (:func:`~sklearn_orfit._streaming._base.
    stream_update`): thread-safe, and a call that raises (anything, ``KeyboardInterrupt``
    included) leaves the transformer exactly as it was — and is undone with the
    enclosing call (a pipeline's) if that fails later. The state arrays are never
    written in place, so restoring the attributes is exact."""

    @functools.wraps(method)
    def call(self, *args, **kwargs):
        with stream_update(self, check_params=False):
            return method(self, *args, **kwargs)

    return call


def _scale_from_var(var, mean, n_samples):
    """Standard deviations, with 1 where a feature is constant up to rounding.

    Same rule as :class:`sklearn.preprocessing.StandardScaler`: a variance within the
    rounding error of a running-mean computation over ``n_samples`` values counts as 0,
    and a zero scale is replaced by 1 (the feature is then only centred).
    """
    bound = n_samples * _EPS * var + (n_samples * mean * _EPS) ** 2
    scale = np.sqrt(var)
    return np.where(var <= bound, 1.0, scale)


def _constant(var, mean, n_samples):
    """:func:`_scale_from_var`'s rule: which features are constant up to rounding."""
    return var <= n_samples * _EPS * var + (n_samples * mean * _EPS) ** 2


def _standardise(Z, var_s, mean_s, n_samples, exponent):
    """``Z / scale`` for ``Z``, ``var`` and ``mean`` in units ``2^e`` (``Z``: ``x − mean``).

    :func:`_scale_from_var`'s rule is homogeneous (``var`` and ``mean²`` scale alike),
    so it is decided in the scaled units; a constant feature's scale is 1, so its output
    is ``Z`` in the units of ``X``, ``Z · 2^e``. Exact: the result is that of the
    formulas in the units of ``X``, bit for bit, barring subnormal numbers.
    """
    constant = _constant(var_s, mean_s, n_samples)
    with np.errstate(over="ignore"):
        return np.where(constant, _pow2(Z, exponent),
                        Z / np.where(constant, 1.0, np.sqrt(var_s)))


def _scaled_statistics(mean_s, m2s, exponent, n_samples):
    """``(u, mean, var)`` with the statistics in units ``2^u`` of each column.

    ``mean_s`` and ``m2s`` are the mean and ``Σ (x − mean)²`` in units ``2^exponent`` and
    ``4^exponent``; ``u`` is ``exponent`` except for columns that are all zeros so far
    (0).
    """
    u = _units(exponent)
    if u is exponent:
        return u, mean_s, m2s / n_samples
    return u, _pow2(mean_s, exponent - u), _pow2(m2s, 2 * (exponent - u)) / n_samples


def _exponents(m):
    """Exponent ``e`` of each ``m ≥ 0``, ``m`` in ``[2^(e−1), 2^e)``; ``_NO_EXPONENT`` for 0."""
    e = np.frexp(m)[1].astype(np.int64)
    e[m == 0.0] = _NO_EXPONENT
    return e


def _pow2(A, e):
    """``A · 2^e`` (``e`` an integer per column), exact barring subnormal results."""
    if not e.any():
        return A
    if A.size > 4 * e.size and -1000 < e.min() and e.max() < 1000:
        return A * np.ldexp(1.0, e)  # normal powers of two: the products are exact
    return np.ldexp(A, e)


def _units(exponent):
    """The exponent used to apply the statistics: 0 for a column never non-zero."""
    if exponent.min(initial=0) > _NO_EXPONENT:
        return exponent  # (the usual case: no column of zeros only)
    return np.where(exponent == _NO_EXPONENT, 0, exponent)


class _StreamingTransformerMixin(StreamLockMixin):
    """``fit``, ``partial_fit`` and ``prequential_transform`` of the streaming
    transformers, written once.

    Every call goes through the update template (:func:`_all_or_nothing`). The
    transformer implements:

    * ``_STATE_MARKER``: the attribute whose presence means that a stream has started;
    * ``_reset()``: forget the stream (before :meth:`fit`);
    * ``_init_state(n_features)``: a fresh state (``n_samples_seen_ = 0``);
    * ``_learn_rows(X)``: learn validated rows in order;
    * ``_prequential_rows(X)``: validated rows, each transformed with the state learned
      before it, then learned;
    * ``_stream_params`` (optional): the parameters the state is built with, which
      ``set_params`` may not change mid-stream.
    """

    _atomic_updates = True  # every learning call is all-or-nothing (_all_or_nothing)

    @_fit_context(prefer_skip_nested_validation=True)
    @_all_or_nothing
    @fill_doc()
    def fit(self, X, y=None):
        """Reset, then learn the rows of ``X`` as the start of a stream.

        Parameters
        ----------
        {stream_x}
        y : None
            Ignored.

        Returns
        -------
        self : object
            The fitted transformer.
        """
        self._reset()
        self._learn_rows(self._validate_chunk(X, first_call=True))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @_all_or_nothing
    def partial_fit(self, X, y=None):
        """Learn the rows of ``X``, continuing the stream (the first call starts it).

        ``X`` and ``y`` are as in :meth:`fit`; returns the transformer.
        """
        self._learn_rows(self._validate_chunk(X))
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    @_all_or_nothing
    def prequential_transform(self, X, y=None):
        """Transform each row with the state learned from the rows before it, then learn
        the rows: :meth:`transform` and :meth:`partial_fit` row after row, in one
        vectorised call (no look-ahead). ``X`` and ``y`` are as in :meth:`fit`.

        Returns
        -------
        X_out : ndarray of shape (n_samples, n_features_out)
            Row ``t`` as :meth:`transform` gives it once the rows before it are learned
            (see the class Notes for the first rows of a stream).
        """
        return self._prequential_rows(self._validate_chunk(X))

    def _validate_chunk(self, X, *, first_call=None):
        """Validate the rows of a learning call; a new stream's state is made here, a
        continued stream's parameters checked."""
        if first_call is None:
            first_call = self._STATE_MARKER not in self.__dict__
        if not first_call:
            self._check_stream_params()
        X = validate_data(self, X, reset=first_call, dtype=np.float64)
        if first_call:
            self._init_state(X.shape[1])
        return X

    def _check_stream_params(self):
        """The state was built with the parameters the stream started with."""
        check_stream_params(self)


@fill_doc()
class RecursiveStandardScaler(_StreamingTransformerMixin, OneToOneFeatureMixin,
                              TransformerMixin, BaseEstimator):
    """Streaming z-scoring: each row scaled with the mean and std of the stream before it.

    :meth:`partial_fit` keeps the running mean and (population, ``ddof=0``) variance of
    every feature over all rows learned since the last :meth:`fit`; :meth:`transform`
    applies the current statistics (a frozen map, as
    :class:`~sklearn.preprocessing.StandardScaler`). The streaming use is
    :meth:`prequential_transform`: row ``t`` of a chunk is scaled with the statistics of
    the rows learned before it — ``(x_t − mean_{<t}) / std_{<t}`` — and is learned
    afterwards, so its output never depends on later rows (see the user guide's
    chapter on prequential evaluation).

    Parameters
    ----------
    with_mean : bool, default=True
        Subtract the running mean.
    with_std : bool, default=True
        Divide by the running standard deviation.

    Attributes
    ----------
    mean_ : ndarray of shape (n_features_in_,)
        Mean of the rows learned since the last :meth:`fit` (kept even when
        ``with_mean=False``: the variance needs it).
    var_ : ndarray of shape (n_features_in_,)
        Their population variance (``ddof=0``). A square: it overflows to ``inf`` or
        underflows for features beyond about ``1e±154``, which ``scale_`` does not.
    scale_ : ndarray of shape (n_features_in_,)
        The standard deviation (``sqrt(var_)`` where that is representable), with 1 for
        constant features; all ones when ``with_std=False``.
    {samples_seen}
    n_features_in_ : int
        Number of features.
    {feature_names_in}

    See Also
    --------
    sklearn.preprocessing.StandardScaler : Same statistics, batch semantics.
    LagTransformer : Lagged copies of the input, the other streaming pre-step.
    StreamingPipeline : Chains it without look-ahead.

    Notes
    -----
    **What "so far" means.** In :meth:`prequential_transform`, "the stream so far" for
    row ``t`` is rows ``1 .. t−1``: the row is scaled with the past only, and learned
    after its transform, exactly as a model predicts a row before learning it. The very
    first row of a stream, which has no past, is scaled with its own statistics (mean
    ``x_1``, variance 0), so it maps to 0; the second maps to ``x_2 − x_1`` (a single
    past value has zero variance, so the scale is 1). This is also what a
    :class:`~sklearn.preprocessing.StandardScaler` driven one row at a time by
    :class:`StreamingPipeline` produces, up to rounding.

    **Updates.** :meth:`partial_fit` merges the statistics of a chunk (two-pass mean and
    sum of squared deviations) into the running ones with Chan, Golub and LeVeque's
    pairwise formulas::

        δ = mean_b − mean_a,  n = n_a + n_b
        mean = mean_a + δ · n_b / n
        M2   = M2_a + M2_b + δ² · n_a · n_b / n          (var = M2 / n)

    :meth:`prequential_transform` needs the statistics *before every row* of the chunk.
    It gets them without a Python loop from Welford's recursion written as prefix sums::

        mean_k = ref + cumsum(x − ref)_k / n_k            (ref: mean before the chunk)
        M2_k   = M2_0 + cumsum((n_j − 1)/n_j · (x_j − mean_{j−1})²)_k

    The increments of ``M2`` are non-negative, so the prefix sums never cancel (the
    naive ``E[x²] − E[x]²`` would, on series far from zero such as electricity load).
    Prefix sums run in row order, so row ``t``'s output depends on rows ``≤ t`` only,
    bit for bit. After the call the state is the one :meth:`partial_fit` on the same
    chunk leaves. Cost ``O(n_samples · n_features)``.

    **Scale.** Every feature is handled in units ``2^e``, ``e`` the exponent of the
    largest ``|x|`` seen in it: an exact rescaling, so the results are those of the
    formulas above, bit for bit, at ordinary scales, and no square overflows or
    underflows at any scale (``1e±300`` included; the variance of data near ``1e160``
    is not representable, its square root is). In :meth:`prequential_transform` the
    units of a row depend on the rows before it only.

    **Parameters.** ``with_mean`` and ``with_std`` are only read when rows are
    transformed (the statistics do not depend on them), so a change by ``set_params``
    mid-stream is honoured exactly: the output is that of a scaler that had the new
    values from the start.

    References
    ----------
    T. F. Chan, G. H. Golub and R. J. LeVeque, "Algorithms for computing the sample
    variance: analysis and recommendations", The American Statistician 37 (1983).
    B. P. Welford, "Note on a method for calculating corrected sums of squares and
    products", Technometrics 4 (1962).

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import RecursiveStandardScaler
    >>> X = np.array([[1.0], [3.0], [5.0], [3.0]])
    >>> scaler = RecursiveStandardScaler()
    >>> scaler.prequential_transform(X).ravel()  # row t with the rows before it
    array([0., 2., 3., 0.])
    >>> scaler.mean_, scaler.var_  # now the statistics of all four rows
    (array([3.]), array([2.]))
    """

    _parameter_constraints: dict = {
        "with_mean": ["boolean"],
        "with_std": ["boolean"],
    }

    def __init__(self, *, with_mean=True, with_std=True):
        self.with_mean = with_mean
        self.with_std = with_std

    # ------------------------------------------------------------------ learning
    # fit, partial_fit and prequential_transform: _StreamingTransformerMixin's
    _STATE_MARKER = "mean_"

    def _prequential_rows(self, X):
        """Each row scaled with the statistics of the rows before it, then learned."""
        b = X.shape[0]
        Xt = np.empty_like(X)
        if b == 0:
            return Xt
        # units 2^e per block of rows: e is the running exponent at the block's first row
        # (rows ≤ it only, so no look-ahead) and the block ends before a row that is
        # 2^_HEADROOM larger. Blocks are exact rescalings, so at ordinary scales there is
        # one block and the result does not depend on e, bit for bit.
        running_max = np.maximum.accumulate(np.abs(X), axis=0)  # max |x| of rows ≤ t
        n0, mean0, m2s0, exp0 = self.n_samples_seen_, self._mean_s, self._m2s, self._exp
        start = 0
        while start < b:
            e = np.maximum(self._exp, _exponents(running_max[start]))
            with np.errstate(over="ignore"):  # 2^(e + 400) beyond the range: inf
                beyond = np.any(running_max[start:] >= np.ldexp(1.0, e + _HEADROOM), axis=1)
            stop = start + int(np.argmax(beyond)) if beyond.any() else b
            n0, mean0, m2s0 = self._prequential_block(
                X[start:stop], Xt[start:stop], n0=n0, mean0s=_pow2(mean0, exp0 - e),
                m2s0=_pow2(m2s0, 2 * (exp0 - e)), e=e,
            )
            exp0, start = e, stop
        self._learn_rows(X)
        return Xt

    def _prequential_block(self, X, out, *, n0, mean0s, m2s0, e):
        """Rows scaled with the prefix statistics before each, in units ``2^e``.

        Writes the rows' output into ``out`` and returns the prefix statistics after the
        block: ``(n, mean in units 2^e, M2 in units 4^e)``.
        """
        b = X.shape[0]
        Xs = _pow2(X, -e)
        # the shift keeps the prefix sums small; before any row, the first row is used
        ref = mean0s if n0 > 0 else Xs[0]
        n_incl = (n0 + np.arange(1, b + 1, dtype=np.float64))[:, None]
        # mean_k = ref + Σ_{j≤k} (x_j − ref) / n_k       (n0·(mean0 − ref) = 0 either way)
        mean_incl = ref + np.cumsum(Xs - ref, axis=0) / n_incl
        mean_before = np.empty_like(Xs)
        mean_before[1:] = mean_incl[:-1]
        mean_before[0] = mean0s if n0 > 0 else Xs[0]
        # M2_k = M2_0 + Σ_{j≤k} (n_j − 1)/n_j · (x_j − mean_{j−1})²  (Welford; terms ≥ 0)
        dev = Xs - mean_before
        m2_incl = m2s0 + np.cumsum((n_incl - 1.0) / n_incl * dev * dev, axis=0)
        m2_before = np.empty_like(Xs)
        m2_before[1:] = m2_incl[:-1]
        m2_before[0] = m2s0
        # a fresh stream's first row is scaled with its own statistics (n = 1, var = 0)
        n_before = n_incl - 1.0
        if n0 == 0:
            n_before[0] = 1.0
        out[...] = self._apply_scaled(Xs, mean_before, m2_before / n_before, n_before, e)
        return n0 + b, mean_incl[-1], m2_incl[-1]

    # ------------------------------------------------------------------ applying
    @fill_doc()
    def transform(self, X):
        """Scale with the current statistics (no update).

        {rows_parameters}

        Returns
        -------
        X_scaled : ndarray of shape (n_samples, n_features)
            ``(X − mean_) / scale_`` (without the parts switched off).
        """
        X = check_rows(self, X)
        with _held(self):  # the statistics of one call boundary, not of a write under way
            # in units 2^e of each column (exact): X − mean_ cannot overflow needlessly
            e, mean_s, var_s = self._scaled_statistics()
            return self._apply_scaled(_pow2(X, -e), mean_s, var_s, self.n_samples_seen_, e)

    def transform_one(self, x):
        """Scale one row as :meth:`transform` does, checking only its width, dtype and
        finiteness (the single-observation path of a streaming pipeline).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            The row to scale.

        Returns
        -------
        x_scaled : ndarray of shape (n_features,)
            ``(x − mean_) / scale_`` (without the parts switched off).
        """
        if "_mean_s" not in self.__dict__:
            check_is_fitted(self)  # raises NotFittedError with the usual message
        x = check_one_row(x, n_features=self.n_features_in_)
        with _held(self):
            e, mean_s, var_s = self._scaled_statistics()
            return self._apply_scaled(_pow2(x[None, :], -e), mean_s, var_s,
                                      self.n_samples_seen_, e)[0]

    def inverse_transform(self, X):
        """Undo :meth:`transform` with the current statistics.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Scaled rows.

        Returns
        -------
        X_original : ndarray of shape (n_samples, n_features)
            ``X · scale_ + mean_`` (without the parts switched off).
        """
        X = check_rows(self, X)
        with _held(self), np.errstate(over="ignore"):  # one call boundary's statistics
            e, mean_s, _ = self._scaled_statistics()
            Xt = X * _pow2(self._scale, -e) if self.with_std else _pow2(X, -e)
            if self.with_mean:
                Xt += mean_s
            Xt = _pow2(Xt, e)
        return _check_output_finite(Xt)

    # ------------------------------------------------------------------ state
    @property
    def scale_(self):
        check_is_fitted(self)
        # read at every call, so with_std may be changed by set_params at any time
        return self._scale if self.with_std else np.ones_like(self._scale)

    def _reset(self):
        for name in ("mean_", "var_", "n_samples_seen_", "_mean_s", "_m2s", "_exp", "_scale"):
            self.__dict__.pop(name, None)

    def _init_state(self, n_features):
        self.mean_ = np.zeros(n_features)
        self.var_ = np.zeros(n_features)
        self._scale = np.ones(n_features)
        # the mean in units 2^_exp and Σ (x − mean)² over the learned rows in units
        # 4^_exp: _exp is the exponent of the largest |x| of each column (_NO_EXPONENT
        # while it has only zeros)
        self._mean_s = np.zeros(n_features)
        self._m2s = np.zeros(n_features)
        self._exp = np.full(n_features, _NO_EXPONENT, dtype=np.int64)
        self.n_samples_seen_ = 0

    def _learn_rows(self, X):
        """Chan et al.'s pairwise update with the chunk ``X`` (two-pass chunk stats).

        Computed in units ``2^e`` of each column (``e``: exponent of the largest ``|x|``
        seen), an exact rescaling: the result is that of the formulas in the units of
        ``X``, bit for bit, without their squares overflowing (``|x| ≳ 1e154``) or
        underflowing (``|x| ≲ 1e-154``).
        """
        n_a, n_b = self.n_samples_seen_, X.shape[0]
        if n_b == 0:
            return
        e = np.maximum(self._exp, _exponents(np.abs(X).max(axis=0)))
        Xs = _pow2(X, -e)
        mean_a = _pow2(self._mean_s, self._exp - e)
        m2_a = _pow2(self._m2s, 2 * (self._exp - e))
        mean_b = Xs.mean(axis=0)
        d = Xs - mean_b
        m2_b = np.einsum("ij,ij->j", d, d)
        n = n_a + n_b
        # δ = mean_b − mean_a;  mean = mean_a + δ n_b / n;  M2 = M2_a + M2_b + δ² n_a n_b / n
        delta = mean_b - mean_a
        mean = mean_a + delta * (n_b / n)
        m2 = m2_a + m2_b + delta * delta * (n_a * n_b / n)
        u, mean_s, var_s = _scaled_statistics(mean, m2, e, n)
        # var_ in the units of X² under- or overflows for |x| beyond about 1e±154;
        # scale_ comes from the scaled variance and stays exact
        if np.abs(u).max(initial=0) < 500:
            var = _pow2(var_s, 2 * u)
        else:
            with np.errstate(over="ignore", under="ignore"):
                var = np.ldexp(var_s, 2 * u)
        scale = np.where(_constant(var_s, mean_s, n), 1.0, _pow2(np.sqrt(var_s), u))
        # commit
        self._mean_s, self._m2s, self._exp, self.var_, self._scale = mean, m2, e, var, scale
        self.mean_ = _pow2(mean, e)
        self.n_samples_seen_ = n

    def _scaled_statistics(self):
        return _scaled_statistics(self._mean_s, self._m2s, self._exp, self.n_samples_seen_)

    def _apply_scaled(self, Xs, mean_s, var_s, n, e):
        """``(x − mean) / std`` from rows and statistics in units ``2^e`` (exact)."""
        Z = Xs - mean_s if self.with_mean else Xs
        if self.with_std:
            return _standardise(Z, var_s, mean_s, n, e)
        with np.errstate(over="ignore"):
            return _check_output_finite(_pow2(Z, e))

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = False
        return tags


def _check_output_finite(Xt):
    if not np.isfinite(Xt).all():
        raise ValueError(
            "the transformed values exceed the float64 range (≈1.8e308): X − mean_ "
            "(or X · scale_ + mean_) is not representable; rescale X."
        )
    return Xt


_CONTINUATION = (
    "fit(X).transform(X) takes X as the rows that follow X (the lags of its first "
    "n_lags + horizon - 1 rows reach the end of X), fit_transform(X) as the start of "
    "a stream (those lags are fill_value): the two agree from row n_lags + horizon - 1 "
    "on; making them agree before it would give fit_transform's first rows lags from "
    "the end of X, i.e. look-ahead"
)
_SEQUENCE = (
    "row t's output is made of the rows before it: a transform of a sequence, not row "
    "by row, so it depends on the order of the rows and on the rows given with it"
)
#: scikit-learn's checks LagTransformer is expected to fail (check name -> reason)
_LAG_EXPECTED_FAILURES = {
    "check_transformer_general": _CONTINUATION,
    "check_transformer_data_not_an_array": _CONTINUATION,
    "check_methods_sample_order_invariance": _SEQUENCE,
    "check_methods_subset_invariance": _SEQUENCE,
}


@fill_doc()
class LagTransformer(_StreamingTransformerMixin, TransformerMixin, BaseEstimator):
    """Past rows of the stream as features (``horizon`` steps back), kept across calls.

    Row ``t`` becomes ``[x_{t−h}, x_{t−h−1}, ..., x_{t−h−n_lags+1}]`` with
    ``h = horizon`` (each a full input row; most recent first; with the default
    ``horizon=1``, ``[x_{t−1}, ..., x_{t−n_lags}]``), where the past rows come from
    earlier rows of the same call and, before them, from the rows learned by
    :meth:`partial_fit` / :meth:`fit`. Rows before the start of the stream are
    ``fill_value``. With ``X = series[:, None]`` and ``y = series``, a regressor after it
    predicts each value ``y[t]`` from the ``n_lags`` values that end ``horizon`` steps
    before it — ``horizon=1`` is the univariate autoregressive setting of the ABO paper —
    with no need to drop rows. Exogenous inputs are extra columns of ``X``
    (``X = np.column_stack([series, exog])``): they are lagged the same way, so row
    ``t`` only sees exogenous values known ``horizon`` steps before its target.

    Parameters
    ----------
    n_lags : int, default=1
        Number of past rows per output row.
    horizon : int, default=1
        Lag of the most recent past row: row ``t`` starts at ``x_{t−horizon}``, so a
        target aligned with ``X`` is forecast ``horizon`` steps ahead.
    fill_value : float, default=0.0
        Value of the lags that reach before the first row of the stream.

    Attributes
    ----------
    history_ : ndarray of shape (n_lags + horizon - 1, n_features_in_)
        The last ``n_lags + horizon − 1`` rows learned, oldest first (``fill_value``
        where the stream is shorter): the rows the lags of the next rows can reach.
    {samples_seen}
    n_features_in_ : int
        Number of input features ``d``; the output has ``n_lags · d`` columns, the most
        recent lag (``horizon``) of every feature first.
    {feature_names_in}

    See Also
    --------
    sklearn_orfit.datasets.make_lagged : The same lags as a one-off pre-step (drops the
        first ``n_lags + horizon − 1`` rows instead of filling them: its row ``i`` is
        row ``i + n_lags + horizon − 1`` here).
    RecursiveStandardScaler : The other streaming pre-step.

    Notes
    -----
    Lags are a sequence operation: an output row depends on the rows before it, so
    :meth:`transform` treats ``X`` as the rows that *follow* the learned stream, and
    ``transform`` on a subset of rows is not the subset of ``transform`` — the four
    checks of :func:`~sklearn.utils.estimator_checks.check_estimator` that assume
    row-wise transforms, or ``fit(X).transform(X) == fit_transform(X)``, do not apply
    to it: :func:`sklearn_orfit.utils.estimator_checks.expected_failed_checks` lists
    them with the reasons. :meth:`prequential_transform` is ``transform``
    followed by :meth:`partial_fit` (the output uses strictly earlier rows, so there is
    no look-ahead); :meth:`fit_transform` is ``fit`` on nothing followed by
    :meth:`prequential_transform`, i.e. the lags *within* ``X``. Cost
    ``O(n_samples · n_lags · d)``; the state is ``n_lags + horizon − 1`` rows, whatever
    the length of the stream. ``n_lags``, ``horizon`` and ``fill_value`` are those the
    stream started with: changing one by ``set_params`` before the next
    :meth:`partial_fit`, :meth:`transform` or :meth:`prequential_transform` raises
    ``ValueError`` (call :meth:`fit` to start a stream with the new values).

    **Horizon and delayed labels.** With ``horizon = h > 1``, the label ``y[t]`` of row
    ``t`` is only known ``h`` steps after the row's most recent lag — when the lags of
    rows ``t + 1, ..., t + h − 1`` are already available. Evaluated prequentially, a
    model must not learn row ``t`` before it has predicted those rows: pass
    ``delay=horizon − 1`` to :func:`~sklearn_orfit.prequential_predict`,
    :func:`~sklearn_orfit.model_selection.make_prequential_scorer` and
    :class:`~sklearn_orfit.model_selection.PrequentialSplit` (with ``delay=0`` the
    model learns labels that were not yet observed when it predicts).

    When a chain is evaluated on a fold after a warm-up block (as
    :class:`~sklearn_orfit.model_selection.PrequentialSplit` does), the lags of the
    first rows of the fold come from the end of the warm-up block, as they should —
    unless a ``gap`` separates them.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import LagTransformer
    >>> series = np.arange(1.0, 6.0)[:, None]
    >>> lags = LagTransformer(n_lags=2)
    >>> lags.prequential_transform(series[:3])
    array([[0., 0.],
           [1., 0.],
           [2., 1.]])
    >>> lags.prequential_transform(series[3:])  # continues across calls
    array([[3., 2.],
           [4., 3.]])
    >>> ahead = LagTransformer(n_lags=2, horizon=2)  # y[t] from x_{t-2}, x_{t-3}
    >>> ahead.fit_transform(series)
    array([[0., 0.],
           [0., 0.],
           [1., 0.],
           [2., 1.],
           [3., 2.]])
    >>> ahead.history_.shape  # n_lags + horizon - 1 rows
    (3, 1)
    """

    _parameter_constraints: dict = {
        "n_lags": [Interval(Integral, 1, None, closed="left")],
        "horizon": [Interval(Integral, 1, None, closed="left")],
        "fill_value": [Real],
    }

    def __init__(self, n_lags=1, *, horizon=1, fill_value=0.0):
        self.n_lags = n_lags
        self.horizon = horizon
        self.fill_value = fill_value

    # fit, partial_fit and prequential_transform: _StreamingTransformerMixin's
    _STATE_MARKER = "history_"

    def transform(self, X):
        """Lags of the rows of ``X`` taken as the continuation of the learned stream.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows that follow the learned ones.

        Returns
        -------
        X_lagged : ndarray of shape (n_samples, n_lags * n_features)
            Row ``t``: ``[x_{t−horizon}, ..., x_{t−horizon−n_lags+1}]`` flattened
            (lag-major).
        """
        check_is_fitted(self)
        self._check_stream_params()
        X = validate_data(self, X, reset=False, dtype=np.float64)
        with _held(self):  # the ring of one call boundary, not of a write under way
            return self._lags(X)

    def _prequential_rows(self, X):
        """The lags of each row (from the rows before it), then the rows learned."""
        Xt = self._lags(X)
        self._learn_rows(X)
        return Xt

    @_all_or_nothing
    def fit_transform(self, X, y=None):
        """Reset, then return the lags within ``X`` (``fill_value`` before its start).

        ``X`` and ``y`` are as in :meth:`fit`.

        Returns
        -------
        X_lagged : ndarray of shape (n_samples, n_lags * n_features)
            As :meth:`prequential_transform` on a fresh transformer.
        """
        self._reset()
        self.__dict__.pop("n_features_in_", None)
        self.__dict__.pop("feature_names_in_", None)
        return self.prequential_transform(X)

    def get_feature_names_out(self, input_features=None):
        """Names ``"{feature}_lag{k}"``, ``k`` from ``horizon`` to ``horizon + n_lags − 1``.

        The most recent lag (``horizon``) of every feature comes first.

        Parameters
        ----------
        input_features : array-like of str or None, default=None
            Input feature names (``x0, x1, ...`` when unknown).

        Returns
        -------
        feature_names_out : ndarray of str objects
            The output names.
        """
        check_is_fitted(self)
        self._check_stream_params()
        if input_features is None:
            input_features = getattr(
                self, "feature_names_in_", [f"x{i}" for i in range(self.n_features_in_)]
            )
        h = self.horizon
        names = [f"{f}_lag{k}" for k in range(h, h + self.n_lags) for f in input_features]
        return np.asarray(names, dtype=object)

    def _expected_failed_checks(self):
        """scikit-learn checks a transform of a sequence cannot pass, with the reason
        (see :func:`sklearn_orfit.utils.estimator_checks.expected_failed_checks`)."""
        return dict(_LAG_EXPECTED_FAILURES)

    def _init_state(self, n_features):
        self.history_ = np.full((self._n_history(), n_features), float(self.fill_value))
        record_stream_params(self)
        self.n_samples_seen_ = 0

    _stream_params = ("n_lags", "horizon", "fill_value")

    def _n_history(self):
        """Rows the lags of the next rows can reach: ``n_lags + horizon − 1``."""
        return self.n_lags + self.horizon - 1

    def _reset(self):
        for name in ("history_", "_stream_param_values", "n_samples_seen_"):
            self.__dict__.pop(name, None)

    def _learn_rows(self, X):
        E = np.concatenate([self.history_, X])
        self.history_ = E[-self._n_history() :].copy()
        self.n_samples_seen_ += X.shape[0]

    def _lags(self, X):
        L, h, (b, d) = self.n_lags, self.horizon, X.shape
        # E = [history (M = L + h − 1 rows, oldest first); X]: row t of X is E[M + t] and
        # its lags k = h .. h + L − 1 are E[M + t − k], i.e. the window E[t : t + L]
        E = np.concatenate([self.history_, X])
        # (the last h rows are too recent for any row of X)
        windows = np.lib.stride_tricks.sliding_window_view(E[: len(E) - h], L, axis=0)  # (b, d, L)
        # most recent first, lag-major: [lag h of all d, lag h + 1 of all d, ...]
        return np.ascontiguousarray(windows[:, :, ::-1].transpose(0, 2, 1)).reshape(b, L * d)
