"""Random Fourier features (Rahimi & Recht 2007), the feature map of the ABO paper."""

from numbers import Integral, Real

import numpy as np
from sklearn.base import (
    BaseEstimator,
    ClassNamePrefixFeaturesOutMixin,
    TransformerMixin,
)
from sklearn.kernel_approximation import RBFSampler
from sklearn.utils.validation import check_is_fitted, validate_data

from .._compat import Interval, _fit_context
from .._docstrings import fill_doc
from .._streaming._base import StreamLockMixin, record_stream_params, stream_update
from .._streaming._validation import check_numeric, check_one_row, check_rows

__all__ = ["RandomFourierFeatures"]


@fill_doc()
class RandomFourierFeatures(
    StreamLockMixin, ClassNamePrefixFeaturesOutMixin, TransformerMixin, BaseEstimator
):
    """Random Fourier feature map approximating a Gaussian kernel.

    Maps ``x ∈ R^d`` to ``z(x) = sqrt(2/D) · cos(Aᵀx + b) ∈ R^D`` with
    ``A_ij ~ N(0, sigma²)`` and ``b_j ~ U[0, 2π)``, so that
    ``z(x)·z(x') ≈ exp(-sigma² ‖x − x'‖² / 2)``.

    The map depends on the data only through the number of input features: it is drawn
    once, from ``random_state``, by the first call to :meth:`fit` or :meth:`partial_fit`,
    and never changes afterwards (later :meth:`partial_fit` calls only check the number of
    features). This is what a streaming chain needs: the features of a row never depend on
    rows seen later.

    Parameters
    ----------
    n_components : int, default=100
        The number of random features ``D``.
    sigma : float, default=1.0
        Standard deviation of the random frequencies (the papers' convention). The kernel
        is ``exp(-sigma² ‖x − x'‖² / 2)``, i.e. scikit-learn's
        :class:`~sklearn.kernel_approximation.RBFSampler` with ``gamma = sigma² / 2``.
    random_state : int, RandomState instance or None, default=None
        Seed of the map. An integer gives the same map whichever of ``fit``,
        ``partial_fit`` or unpickling produced the fitted transformer.

    Attributes
    ----------
    random_weights_ : ndarray of shape (n_features_in_, n_components)
        The frequencies ``A``, float64.
    random_offset_ : ndarray of shape (n_components,)
        The phases ``b``, float64.
    n_features_in_ : int
        Number of input features ``d``.
    {input_feature_names_in}

    See Also
    --------
    sklearn.kernel_approximation.RBFSampler : The same map with ``gamma = sigma² / 2``.
    QREWRLSRegressor : The windowed minimum-norm least-squares learner it feeds in ABO.

    Notes
    -----
    Cost: ``O(d·D)`` multiply-adds and ``D`` cosines per row; drawing the map costs
    ``d·D`` normal and ``D`` uniform draws, once. The output keeps the input's floating
    dtype (float32 in, float32 out). Splitting the ``D`` columns into blocks gives
    independent sub-maps of the same draw.

    The map is drawn by :class:`~sklearn.kernel_approximation.RBFSampler` (with
    ``gamma = 1/2``, frequencies then scaled by ``sigma``), so that
    ``RandomFourierFeatures(D, sigma=s, random_state=r)`` equals
    ``RBFSampler(gamma=s**2 / 2, n_components=D, random_state=r)`` bit for bit: the same
    ``random_weights_`` and ``random_offset_`` (RBFSampler fitted on float64 data; fitted
    on float32 it keeps them rounded to float32), and the same ``transform`` output
    for float64 input and, for float32 input, the output of the RBFSampler fitted on
    float32 data. (For ``sigma`` outside about ``[2e-154, 1.3e154]``, ``s**2 / 2``
    overflows or loses bits and that RBFSampler differs; this map does not.) Unlike
    RBFSampler, a map fitted on float64 data maps float32 input to float32, the
    bandwidth is the frequencies' standard deviation ``sigma``, and the map never changes
    after the first :meth:`partial_fit`.

    References
    ----------
    A. Rahimi and B. Recht, "Random features for large-scale kernel machines", NeurIPS 2007.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import RandomFourierFeatures
    >>> X = np.random.default_rng(0).normal(size=(3, 2))
    >>> rff = RandomFourierFeatures(n_components=20000, sigma=1.0, random_state=0).fit(X)
    >>> Z = rff.transform(X)
    >>> Z.shape
    (3, 20000)
    >>> exact = np.exp(-0.5 * np.sum((X[0] - X[1]) ** 2))
    >>> bool(abs(Z[0] @ Z[1] - exact) < 0.02)
    True
    """

    # once drawn, the map never changes: a streaming chain may transform a whole chunk
    _stateless_after_fit = True

    _parameter_constraints: dict = {
        "n_components": [Interval(Integral, 1, None, closed="left")],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "random_state": ["random_state"],
    }

    def __init__(self, n_components=100, *, sigma=1.0, random_state=None):
        self.n_components = n_components
        self.sigma = sigma
        self.random_state = random_state

    @_fit_context(prefer_skip_nested_validation=True)
    def fit(self, X, y=None):
        """Draw the feature map for ``X.shape[1]`` input features.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Only the number of features is used.
        y : None
            Ignored.

        Returns
        -------
        self : RandomFourierFeatures
            The fitted transformer.
        """
        with stream_update(self, check_params=False):
            check_numeric(X, "X")
            X = validate_data(self, X, reset=True, dtype=[np.float64, np.float32])
            self._draw(X.shape[1])
            record_stream_params(self)
        return self

    @_fit_context(prefer_skip_nested_validation=True)
    def partial_fit(self, X, y=None):
        """Draw the map on the first call; later calls only check ``n_features_in_``.

        A later call after ``set_params`` changed ``n_components``, ``sigma`` or
        ``random_state`` raises ``ValueError``: the map was drawn with the old values
        (call :meth:`fit` to draw a new one). ``X`` and ``y`` are as in :meth:`fit`;
        returns the fitted transformer.
        """
        first_call = "random_weights_" not in self.__dict__
        with stream_update(self, check_params=not first_call):
            check_numeric(X, "X")
            X = validate_data(self, X, reset=first_call, dtype=[np.float64, np.float32])
            if first_call:
                self._draw(X.shape[1])
                record_stream_params(self)
        return self

    _stream_params = ("n_components", "sigma", "random_state")
    _atomic_updates = True  # fit and partial_fit run under stream_update

    def _draw(self, n_features):
        # scikit-learn's RBFSampler draws this map: A = sqrt(2·gamma)·N(0, 1) of shape
        # (d, D), then b ~ U[0, 2π), both float64 from one RandomState. With gamma = 1/2
        # (sqrt(2·gamma) = 1 exactly) its A is the unit-bandwidth draw; scaling it by sigma
        # gives the values RandomState.normal(scale=sigma) would, for every sigma > 0.
        # (gamma = sigma²/2 gives the same A only while sigma²/2 is a normal float,
        # 2^-510.5 < sigma < 2^512; outside, sigma² overflows or loses bits.) The dummy
        # row is float64 so that A and b stay float64 whatever the dtype of X.
        unit = RBFSampler(
            gamma=0.5, n_components=self.n_components, random_state=self.random_state
        ).fit(np.zeros((1, n_features)))
        weights = unit.random_weights_  # the local sampler's own array: scaled in place
        weights *= float(self.sigma)
        # RandomState.normal returns 0 + sigma·z: a product that underflows to -0
        # (sigma < 1e-300) is +0 there, so it is here
        weights += 0.0
        self.random_weights_ = weights
        self.random_offset_ = unit.random_offset_
        self._scale = np.sqrt(2.0 / self.n_components)
        self._n_features_out = self.n_components

    @fill_doc()
    def transform(self, X):
        """Apply the feature map.

        {rows_parameters}

        Returns
        -------
        Z : ndarray of shape (n_samples, n_components)
            ``sqrt(2/D) · cos(X A + b)``, in the dtype of ``X`` (float32 or float64).
        """
        X = check_rows(self, X, dtype=[np.float64, np.float32])
        return self._map(X)

    def _map(self, X):
        dtype = X.dtype
        Z = X @ self.random_weights_.astype(dtype, copy=False)
        Z += self.random_offset_.astype(dtype, copy=False)
        np.cos(Z, out=Z)
        Z *= dtype.type(self._scale)
        return Z

    def transform_one(self, x):
        """Map one row with only cheap checks (shape, dtype, finiteness).

        Parameters
        ----------
        x : array-like of shape (n_features,)
            One input row.

        Returns
        -------
        z : ndarray of shape (n_components,)
            Its random features, float64.
        """
        if "random_weights_" not in self.__dict__:
            check_is_fitted(self)  # raises NotFittedError with the usual message
        x = check_one_row(x, n_features=self.n_features_in_)
        z = x @ self.random_weights_
        z += self.random_offset_
        np.cos(z, out=z)
        z *= self._scale
        return z

    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.transformer_tags.preserves_dtype = ["float64", "float32"]
        return tags
