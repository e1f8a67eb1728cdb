"""A forecaster object: forecasts past the end of a stream, with calibrated intervals.

:class:`StreamForecaster` turns a streaming regressor (by default random Fourier features
feeding :class:`~sklearn_orfit.QREWRLSRegressor`) into a forecaster of one series: it
builds the rows (lags of the transformed series, past-only exogenous lags, known-future
exogenous values), learns each row when its targets have arrived, forecasts the next
``horizon`` values after the last observation, and wraps the forecasts in online
conformal intervals (adaptive conformal inference) from its own prequential residuals.
"""

import copy
import math
import warnings
from numbers import Integral, Real

import numpy as np
from sklearn import config_context
from sklearn.base import BaseEstimator, clone
from sklearn.utils.validation import check_is_fitted

from ._compat import HasMethods, Interval, StrOptions, _fit_context
from ._streaming._base import StreamLockMixin, _held, rollback_on_error
from ._streaming._prequential import prequential_predict
from ._streaming._validation import as_float64, check_int
from .compose._pipeline import StreamingPipeline, make_streaming_pipeline
from .abo._qr_ewrls import QREWRLSRegressor
from .abo._rff import RandomFourierFeatures
from .preprocessing import RecursiveStandardScaler

__all__ = ["StreamForecaster"]

# rows each transform needs before its first value z_t (y_t − y_{t−1}: one)
_TRANSFORM_ORDER = {None: 0, "diff": 1, "log_diff": 1}


def default_regressor(n_features):
    """The default model for rows of ``n_features``: running standardisation → 512
    random Fourier features (σ = 1/√n_features: standardised rows are then about one
    length scale apart) → :class:`~sklearn_orfit.QREWRLSRegressor` (window 200, ridge
    0.1)."""
    return make_streaming_pipeline(
        RecursiveStandardScaler(),
        RandomFourierFeatures(512, sigma=1.0 / math.sqrt(n_features), random_state=0),
        QREWRLSRegressor(200, alpha=0.1),
    )


def _running_means(values, mean=0.0, count=0):
    """The running mean after each of ``values``, continuing the mean ``mean`` of
    ``count`` earlier values, one value at a time as the stream's time steps compute it
    (the same operations, so the same bits)."""
    out = np.empty(values.shape[0])
    for j in range(values.shape[0]):
        count += 1
        mean += (values[j] - mean) / count
        out[j] = mean
    return out


def _is_pandas(obj):
    return hasattr(obj, "iloc") and hasattr(obj, "index")


#: the state arrays the stream writes into (the others are replaced at each step)
_WRITTEN_IN_PLACE = ("_ring_origin", "_ring_f", "_ring_q", "_issued_origin", "_issued_q",
                     "_res", "_res_pos", "n_residuals_", "alpha_")


def _future_index(index, freq, n):
    """The ``n`` time stamps after ``index[-1]`` with step ``freq``."""
    import pandas as pd

    last = index[-1]
    if isinstance(index, pd.DatetimeIndex):
        offset = pd.tseries.frequencies.to_offset(freq) if isinstance(freq, str) else freq
        if isinstance(offset, pd.Timedelta):
            return pd.DatetimeIndex([last + offset * (k + 1) for k in range(n)],
                                    tz=index.tz)
        return pd.date_range(last, periods=n + 1, freq=offset, tz=index.tz)[1:]
    return pd.Index([last + freq * (k + 1) for k in range(n)])


def _infer_step(index):
    """The step of a pandas index: its ``freq``, :func:`pandas.infer_freq`, else the
    last difference (a ``ValueError`` when there is none)."""
    import pandas as pd

    if isinstance(index, pd.DatetimeIndex):
        if index.freq is not None:
            return index.freq
        if len(index) >= 3:
            with warnings.catch_warnings():
                # (pandas 3 warns that infer_freq will return an offset; either is used)
                warnings.simplefilter("ignore")
                freq = pd.infer_freq(index)
            if freq is not None:
                return freq
        if len(index) >= 2 and index[-1] > index[-2]:
            return index[-1] - index[-2]
        raise ValueError(
            "cannot infer the time step of the index (fewer than two increasing time "
            "stamps): give y a DatetimeIndex with a freq, or more than one row."
        )
    if len(index) >= 2 and np.issubdtype(np.asarray(index).dtype, np.number):
        step = index[-1] - index[-2]
        if step > 0:
            return step
    raise ValueError(
        "cannot infer the step of the index: it must be a DatetimeIndex or an "
        "increasing numeric index with at least two rows."
    )


class StreamForecaster(StreamLockMixin, BaseEstimator):
    """Forecast the next values of a stream, with online conformal intervals.

    The series ``y`` (and optional exogenous columns ``X``, one row per value of ``y``)
    is learned as a stream. At each time ``t`` (the *origin*) the row of features is

    * the ``n_lags`` most recent values of the transformed series ``z`` (``z_t``,
      ``z_{t−1}``, ...), where ``z`` is ``y`` (``transform=None``), ``y_t − y_{t−1}``
      (``"diff"``), ``y_t − y_{t−s}`` (``"seasonal_diff"``, ``s = season``) or
      ``log y_t − log y_{t−1}`` (``"log_diff"``);
    * the ``exog_lags`` most recent values of each *past-only* exogenous column (the
      columns of ``X`` not in ``future_exog``: known up to ``t``);
    * the values of each *known-future* column (``future_exog``) at the target times
      ``t + 1, ..., t + horizon`` (a calendar, a weather forecast).

    Its targets, for the steps ``k = 1, ..., horizon``, are ``y_{t+k}`` relative to a
    base known at ``t``: ``y_{t+k}`` minus the running mean of ``y`` up to ``t`` (no
    transform: an intercept for regressors without one), ``y_{t+k} − y_t``
    (``"diff"``), ``log(y_{t+k}/y_t)`` (``"log_diff"``) or ``y_{t+k}`` minus the last
    value of the same season (``"seasonal_diff"``: ``y_{t+k−s⌈k/s⌉}``).

    Parameters
    ----------
    regressor : estimator or None, default=None
        A streaming regressor with ``partial_fit`` and ``predict`` that accepts 2-D
        targets (``horizon`` of them with the direct strategy). It is cloned. ``None``:
        running standardisation → 512 random Fourier features (σ = 0.5) →
        :class:`~sklearn_orfit.QREWRLSRegressor` (window 200, ridge 0.1), the ABO model.
    n_lags : int, default=24
        Lags of the transformed series in a row.
    transform : {None, "diff", "seasonal_diff", "log_diff"}, default=None
        The target transform (see above). ``"log_diff"`` needs ``y > 0``.
    season : int or None, default=None
        The season ``s`` of ``"seasonal_diff"`` (required by it, ignored otherwise).
    exog_lags : int or None, default=None
        Lags of each past-only exogenous column (``None``: ``n_lags``; ``0``: those
        columns are not used).
    future_exog : list of str or int, or None, default=None
        Columns of ``X`` known in advance: their value at the target time enters the
        row. Names when ``X`` is a DataFrame, positions otherwise.
    horizon : int, default=1
        The largest number of steps ahead the forecaster will be asked for.
    strategy : {"auto", "direct", "recursive"}, default="auto"
        ``"auto"``: ``"recursive"``, or ``"direct"`` when past-only exogenous columns
        are used with ``horizon > 1`` (their values beyond the origin are unknown).
        ``"direct"``: one regressor with ``horizon`` targets (one row, one solve, all
        steps); a row is learned when its last target, ``horizon`` steps later, has
        arrived. ``"recursive"``: a one-step regressor (learned as soon as the next
        value arrives) applied ``horizon`` times, each forecast fed back as a lag; it
        cannot use past-only exogenous columns beyond one step.
    method : {"aci", "quantile"}, default="aci"
        Intervals: ``"aci"`` — adaptive conformal inference (the miscoverage level of
        each step and coverage is adapted online); ``"quantile"`` — the plain
        empirical quantile of the recent absolute residuals at the nominal level.
    coverage : tuple of float, default=(0.8, 0.95)
        The coverage levels whose conformal state is tracked (each in ``(0, 1)``).
    gamma : float, default=0.005
        ACI's step size ``γ``: ``α_{t+1} = α_t + γ (α − err_t)``.
    conformal_window : int, default=1000
        Absolute residuals kept per horizon step (the most recent ones).
    chunk_size : int, default=256
        With ``horizon=1`` and a regressor of this package (one with a vectorised
        ``prequential_predict``), the values are learned in blocks of at most
        ``chunk_size`` rows, aligned on the stream's positions (multiples of
        ``chunk_size``): one vectorised prequential call per block gives the block's
        forecasts and learns its rows. ``1``: one value at a time (the regressor's
        one-row update). Other settings always learn one value at a time.

    Attributes
    ----------
    regressor_ : estimator
        The fitted clone of ``regressor``.
    n_samples_seen_ : int
        Values of ``y`` learned since the last :meth:`fit`.
    n_rows_learned_ : int
        Rows (forecast origins with all their targets) the regressor has learned.
    n_exog_ : int
        Number of exogenous columns (0 without ``X``).
    alpha_ : ndarray of shape (horizon, n_levels)
        The current miscoverage level ``α_t`` of each step and coverage, adapted by
        ACI (kept under both methods; ``method="quantile"`` uses ``1 − coverage``).
    n_residuals_ : ndarray of shape (horizon,)
        Residuals in each step's conformal window.

    See Also
    --------
    sklearn_orfit.prequential_predict : One-step evaluation of a regressor on rows.
    sklearn_orfit.forecasting.tune_forecast : Choose a model's settings on a series.

    Notes
    -----
    **Timing.** Everything is causal: the value ``y_t`` is learned by the state when it
    arrives; the row of origin ``t`` is learned once ``y_{t+horizon}`` (direct) or
    ``y_{t+1}`` (recursive) has arrived, after the forecast of the origin whose state
    must not know it has been made; a forecast made at origin ``t`` uses only values up
    to ``t`` (and the known-future columns). With ``future_exog``, the forecast of
    origin ``t`` needs ``X`` up to ``t + horizon``: it is made when those rows have
    arrived, with the state that had not learned past ``t`` (the rows' learning waits
    for it), and its residuals reach the conformal state then. :meth:`predict` learns
    the rows that are due on a copy of the regressor first, so it forecasts with every
    target that has arrived.

    **Intervals.** For step ``k`` the interval is ``ŷ ± q``, ``q`` the
    ``⌈(1 − α_t)(n + 1)⌉``-th smallest of the ``n`` most recent absolute residuals of
    step ``k`` (split-conformal rank). The residual of a forecast made at origin ``t``
    for step ``k`` becomes available at ``t + k`` (never earlier). With
    ``method="aci"``, each arrival updates ``α_t ← α_t + γ (α − err_t)``, ``err_t = 1``
    when the value fell outside the interval that was issued for it (Gibbs & Candès
    2021), separately for every step and coverage, so coverage recovers after a level
    shift; when ``α_t ≤ 0`` the interval is the largest residual in the window. An
    interval is NaN until a step has ``⌈(1 − α)/α⌉`` residuals.

    **Exactness.** The conformal state moves one time step at a time whatever the
    chunking. With one value at a time (``horizon > 1``, ``chunk_size=1``, or a
    regressor without a vectorised ``prequential_predict``), ``fit(y[:a])`` then
    ``update(y[a:])`` equals ``fit(y)`` bit for bit. One step ahead in blocks, the
    blocks end on multiples of ``chunk_size`` whatever the calls, so streams whose calls
    differ only by cuts on those multiples are bit-equal, and a cut inside a block
    changes the forecasts by rounding only (the regressor's vectorised and one-row
    updates agree to rounding, each within its exactness bound). An update is
    validated completely (finite values, ``y > 0`` for ``"log_diff"``, the exogenous
    width) before anything is learned; a rejected or interrupted update leaves the
    state unchanged.

    **Cost.** Per update step: one ``partial_fit`` of one row (the regressor's cost:
    ``O(N·D + N²)`` for the default model), one or, recursive, ``horizon`` one-row
    predictions, and the conformal quantiles of each step
    (``O(horizon · conformal_window · log conformal_window)``). One step ahead in
    blocks, the rows of a block are built at once and learned by one vectorised
    prequential call (the regressor's amortised cost per row; for the default model
    about five times less than one-row updates at ``N = 500``, ``D = 2048``), plus one
    prediction for the block's last origin. :meth:`predict`: the rows due (on a copy of
    the regressor, ``O(N·D)`` to copy) and one (direct) or ``horizon`` (recursive)
    predictions. The state is bounded: a few rows of history, the conformal windows,
    and the regressor's own state.

    This is not a scikit-learn regressor on ``(X, y)`` rows: ``fit`` takes the series
    first, so :func:`~sklearn.utils.estimator_checks.check_estimator` does not apply;
    clone, ``get_params``/``set_params``, pickling and ``GridSearchCV`` with
    :class:`~sklearn_orfit.model_selection.PrequentialSplit` work (``score`` continues
    a copy of the stream over the fold and returns minus the mean squared error of the
    forecasts made in it, over all steps).

    References
    ----------
    I. Gibbs and E. Candès (2021), "Adaptive conformal inference under distribution
    shift", Advances in Neural Information Processing Systems 34.

    ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning in
    Non-stationary Time-series".

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit import StreamForecaster
    >>> t = np.arange(300)
    >>> y = 10 + np.sin(2 * np.pi * t / 24) + 0.1 * np.random.default_rng(0).normal(size=300)
    >>> fc = StreamForecaster(n_lags=24, horizon=3, transform="seasonal_diff", season=24)
    >>> fc.fit(y[:250]).predict().shape
    (3,)
    >>> fc.update(y[250:]).n_samples_seen_
    300
    >>> fc.predict_interval().shape  # (horizon, coverage levels, lower/upper)
    (3, 2, 2)
    >>> bool(np.all(np.abs(fc.predict() - y[-24:-21]) < 1.0))  # a day later, same hour
    True
    """

    _parameter_constraints: dict = {
        "regressor": [HasMethods(["partial_fit", "predict"]), None],
        "n_lags": [Interval(Integral, 1, None, closed="left")],
        "transform": [StrOptions({"diff", "seasonal_diff", "log_diff"}), None],
        "season": [Interval(Integral, 1, None, closed="left"), None],
        "exog_lags": [Interval(Integral, 0, None, closed="left"), None],
        "future_exog": ["array-like", None],
        "horizon": [Interval(Integral, 1, None, closed="left")],
        "strategy": [StrOptions({"auto", "direct", "recursive"})],
        "method": [StrOptions({"aci", "quantile"})],
        "coverage": ["array-like"],
        "gamma": [Interval(Real, 0, None, closed="left")],
        "conformal_window": [Interval(Integral, 1, None, closed="left")],
        "chunk_size": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, regressor=None, *, n_lags=24, transform=None, season=None,
                 exog_lags=None, future_exog=None, horizon=1, strategy="auto",
                 method="aci", coverage=(0.8, 0.95), gamma=0.005, conformal_window=1000,
                 chunk_size=256):
        self.regressor = regressor
        self.n_lags = n_lags
        self.transform = transform
        self.season = season
        self.exog_lags = exog_lags
        self.future_exog = future_exog
        self.horizon = horizon
        self.strategy = strategy
        self.method = method
        self.coverage = coverage
        self.gamma = gamma
        self.conformal_window = conformal_window
        self.chunk_size = chunk_size

    # ------------------------------------------------------------------ public API
    @_fit_context(prefer_skip_nested_validation=False)
    def fit(self, y, X=None):
        """Reset, then learn the whole series as a stream.

        Parameters
        ----------
        y : array-like of shape (n_samples,) or pandas Series
            The series, oldest first.
        X : array-like of shape (n_samples, n_exog) or DataFrame, default=None
            Exogenous columns, one row per value of ``y``.

        Returns
        -------
        self : StreamForecaster
            The fitted forecaster.
        """
        # all or nothing: a rejected (or interrupted) fit keeps the previous stream
        with rollback_on_error(self):
            self._start(y, X)
            yv, Xv, index = self._check_chunk(y, X, first=True)
            self._run(yv, Xv, record=False)
            self._set_index(index)
        return self

    def update(self, y_new, X_new=None):
        """Continue the stream with new values (as if they had been given to ``fit``).

        Parameters
        ----------
        y_new : array-like of shape (n_new,) or pandas Series
            The values after the last one learned.
        X_new : array-like of shape (n_new, n_exog) or DataFrame, default=None
            Their exogenous rows (required when ``fit`` had ``X``).

        Returns
        -------
        self : StreamForecaster
            The updated forecaster.
        """
        check_is_fitted(self)
        # all or nothing: a rejected or interrupted update (an error or Ctrl-C inside a
        # step) leaves the forecaster, its regressor included, as it was
        with rollback_on_error(self):
            self._check_params_unchanged()
            yv, Xv, index = self._check_chunk(y_new, X_new, first=False)
            # the arrays the steps write into are this call's own copies: restoring the
            # attributes restores them
            for name in _WRITTEN_IN_PLACE:
                setattr(self, name, getattr(self, name).copy())
            self._run(yv, Xv, record=False)
            self._set_index(index)
        return self

    def backtest(self, y, X=None, *, return_interval=False):
        """Fit on ``y`` and return the forecasts made along the way (no look-ahead).

        Parameters
        ----------
        y : array-like of shape (n_samples,) or pandas Series
            The series.
        X : array-like of shape (n_samples, n_exog) or DataFrame, default=None
            Exogenous columns.
        return_interval : bool or {"aci", "quantile", "all"}, default=False
            Also return the intervals issued with the forecasts: ``True``, those of
            ``method``; a method's name, that method's; ``"all"``, a dict of both (they
            are computed from the same residuals in every run, so they can be compared
            on one backtest).

        Returns
        -------
        forecasts : ndarray of shape (n_samples, horizon) or DataFrame
            ``forecasts[i, k − 1]``: the forecast of ``y[i]`` made ``k`` steps before
            (at origin ``i − k``); NaN where none could be made (cold start, or, with
            ``future_exog``, an origin whose known-future rows lie past the data).
            DataFrame (columns ``h1, h2, ...``, the index of ``y``) for pandas input.
        intervals : ndarray of shape (n_samples, horizon, n_levels, 2) or dict
            Lower and upper bounds for each coverage (only with ``return_interval``;
            ``{"aci": ..., "quantile": ...}`` with ``"all"``).
        """
        self._start(y, X)
        yv, Xv, index = self._check_chunk(y, X, first=True)
        if return_interval not in (False, True, "aci", "quantile", "all"):
            raise ValueError('return_interval must be False, True, "aci", "quantile" or '
                             f'"all", got {return_interval!r}.')
        F, Q = self._run(yv, Xv, record=True)
        self._set_index(index)

        def bounds(j):
            return np.stack([F[:, :, None] - Q[:, :, j], F[:, :, None] + Q[:, :, j]],
                            axis=-1)

        if return_interval == "all":
            intervals = {"aci": bounds(0), "quantile": bounds(1)}
        else:
            method = self.method if return_interval is True else return_interval
            intervals = bounds(0 if method == "aci" else 1)
        if self._pandas:
            import pandas as pd

            F = pd.DataFrame(F, index=index,
                             columns=[f"h{k}" for k in range(1, self.horizon + 1)])
        return (F, intervals) if return_interval else F

    def predict(self, horizon=None, X_future=None):
        """Forecast the next ``horizon`` values after the last observation.

        Parameters
        ----------
        horizon : int or None, default=None
            Steps ahead (at most the ``horizon`` parameter; ``None``: that).
        X_future : array-like of shape (horizon, n) or DataFrame, default=None
            The known-future columns for the next ``horizon`` times (required with
            ``future_exog``): either only those columns, in ``future_exog`` order, or
            full exogenous rows (the other columns are ignored).

        Returns
        -------
        y_pred : ndarray of shape (horizon,) or pandas Series
            The forecasts (Series with the future time stamps for pandas input); NaN
            when no forecast can be made yet.
        """
        h = self._check_horizon(horizon)
        with _held(self):  # the state of one call boundary (an update may be running)
            f = self._forecast_now(h, X_future)
        return self._wrap(f, h)

    def predict_interval(self, horizon=None, coverage=None, X_future=None):
        """Forecasts' intervals for the next ``horizon`` values.

        Parameters
        ----------
        horizon : int or None, default=None
            Steps ahead (at most the ``horizon`` parameter).
        coverage : tuple of float or None, default=None
            Levels (``None``: the ``coverage`` parameter). With ``method="aci"`` they
            must be tracked levels; ``"quantile"`` takes any level in ``(0, 1)``.
        X_future : array-like or DataFrame, default=None
            As in :meth:`predict`.

        Returns
        -------
        intervals : ndarray of shape (horizon, n_levels, 2) or DataFrame
            Lower and upper bounds; for pandas input a DataFrame indexed by the future
            time stamps with columns ``lower_80, upper_80, ...`` (the coverage in %).
        """
        h = self._check_horizon(horizon)
        levels = self._levels if coverage is None else tuple(float(c) for c in coverage)
        with _held(self):  # the state of one call boundary (an update may be running)
            f = self._forecast_now(h, X_future)
            Q = self._quantiles(levels)[:h]
        out = np.stack([f[:, None] - Q, f[:, None] + Q], axis=-1)
        if self._pandas:
            import pandas as pd

            cols, data = [], []
            for j, c in enumerate(levels):
                cols += [f"lower_{100 * c:g}", f"upper_{100 * c:g}"]
                data += [out[:, j, 0], out[:, j, 1]]
            return pd.DataFrame(np.column_stack(data), columns=cols,
                                index=_future_index(self._index_tail, self._step, h))
        return out

    def score(self, y, X=None):
        """Minus the mean squared error of the forecasts made while continuing (a copy
        of) the stream over ``y``, over all steps whose target lies in ``y``.

        Parameters
        ----------
        y : array-like of shape (n_samples,)
            The values that follow the learned ones.
        X : array-like of shape (n_samples, n_exog), default=None
            Their exogenous rows.

        Returns
        -------
        score : float
            ``−MSE`` (greater is better), NaN when no forecast was made.
        """
        check_is_fitted(self)
        with _held(self):
            work = copy.deepcopy(self)
        yv, Xv, _ = work._check_chunk(y, X, first=False)
        F, _ = work._run(yv, Xv, record=True)
        err = (F - yv[:, None]) ** 2
        return -float(np.nanmean(err)) if np.isfinite(err).any() else float("nan")

    def __sklearn_is_fitted__(self):
        return "n_samples_seen_" in self.__dict__

    # ------------------------------------------------------------------ set-up
    def _start(self, y, X):
        """A fresh stream: the parameters checked, the regressor cloned, state reset."""
        h = self.horizon
        if self.transform == "seasonal_diff":
            if self.season is None:
                raise ValueError('transform="seasonal_diff" needs season (an int >= 1).')
            self._order = int(self.season)
        else:
            self._order = _TRANSFORM_ORDER[self.transform]
        levels = tuple(float(c) for c in np.atleast_1d(np.asarray(self.coverage, float)))
        if not levels or not all(0.0 < c < 1.0 for c in levels):
            raise ValueError(f"coverage must be levels in (0, 1), got {self.coverage!r}.")
        if len(set(levels)) != len(levels):
            raise ValueError(f"coverage has repeated levels: {self.coverage!r}.")
        self._levels = levels
        self._pandas = _is_pandas(y)
        # exogenous columns: which are known in advance
        n_exog = 0 if X is None else (1 if np.ndim(X) == 1 else np.shape(X)[1])
        self._columns = list(X.columns) if hasattr(X, "columns") else None
        fut = [] if self.future_exog is None else list(np.atleast_1d(self.future_exog))
        if fut and X is None:
            raise ValueError("future_exog names columns of X, but X is None.")
        pos = []
        for c in fut:
            if self._columns is not None and not isinstance(c, (Integral, np.integer)):
                if c not in self._columns:
                    raise ValueError(f"future_exog column {c!r} is not in X's columns "
                                     f"{self._columns}.")
                pos.append(self._columns.index(c))
            elif isinstance(c, (Integral, np.integer)) and 0 <= int(c) < n_exog:
                pos.append(int(c))
            else:
                raise ValueError(f"future_exog column {c!r} is not a column of X "
                                 f"({n_exog} columns).")
        if len(set(pos)) != len(pos):
            raise ValueError(f"future_exog repeats a column: {self.future_exog!r}.")
        self._future_cols = pos
        self._past_cols = [j for j in range(n_exog) if j not in pos]
        self._exog_lags = self.n_lags if self.exog_lags is None else int(self.exog_lags)
        if not self._past_cols:
            self._exog_lags = 0
        # "auto": recursive (its forecasts use the rows the direct model still waits for:
        # smaller errors on every bundled series, benchmarks/bench_intervals.py), direct
        # when past-only exogenous columns have no values beyond the origin to feed back
        self._strategy = self.strategy
        if self._strategy == "auto":
            self._strategy = "direct" if (h > 1 and self._exog_lags > 0) else "recursive"
        self._reach = 1 if self._strategy == "recursive" else h  # target completes after
        if self._strategy == "recursive" and h > 1 and self._exog_lags > 0:
            raise ValueError(
                'strategy="recursive" cannot use past-only exogenous columns for more '
                "than one step (their future values are unknown): give them in "
                "future_exog, set exog_lags=0, or use strategy=\"direct\"."
            )
        self._defer = h if pos else 0  # a forecast waits for its known-future rows
        self.n_exog_ = n_exog
        n_features = (self.n_lags + self._exog_lags * len(self._past_cols)
                      + len(pos) * self._reach)
        self.regressor_ = (clone(self.regressor) if self.regressor is not None
                           else default_regressor(n_features))
        self._fast = None
        # the first origin with a full row
        self._t0 = max(self.n_lags - 1 + self._order, self._exog_lags - 1, 0)
        s = self._order if self.transform == "seasonal_diff" else 0
        self._keep = (2 * h + self._defer + self.n_lags + self._order + self._exog_lags
                      + (s * math.ceil(h / s) if s else 0) + 2)
        self._y_hist = np.empty(0)
        self._m_hist = np.empty(0)  # the running mean of y at the same times
        self._mean_y, self._n_mean = 0.0, 0
        self._X_hist = np.empty((0, n_exog))
        self.n_samples_seen_ = 0
        self.n_rows_learned_ = 0
        self._next_learn = self._t0  # next origin to learn
        self._next_forecast = 0  # next origin to forecast
        # pending forecasts and the intervals issued with them, a ring over origins
        R = h + self._defer + 2
        nl = len(levels)
        self._ring_origin = np.full(R, -1, dtype=np.int64)
        self._ring_f = np.full((R, h), np.nan)
        # (ACI's and the nominal quantile's half-widths, from the same residuals)
        self._ring_q = np.full((R, 2, h, nl), np.nan)
        # the intervals issued at each recent origin (before its forecast is made)
        self._issued_origin = np.full(R, -1, dtype=np.int64)
        self._issued_q = np.full((R, 2, h, nl), np.nan)
        # conformal state: the recent absolute residuals of each step, α_t per level
        W = self.conformal_window
        self._res = np.full((h, W), np.inf)
        self._res_pos = np.zeros(h, dtype=np.int64)
        self.n_residuals_ = np.zeros(h, dtype=np.int64)
        self._alpha_nominal = 1.0 - np.asarray(levels)
        self.alpha_ = np.tile(self._alpha_nominal, (h, 1))
        self._index_tail = None
        self._step = None
        self._stream_params = self._param_record()

    def _param_record(self):
        return {k: repr(v) for k, v in self.get_params(deep=False).items()}

    def _check_params_unchanged(self):
        now = self._param_record()
        changed = sorted(k for k in now if now[k] != self._stream_params[k])
        if changed:
            raise ValueError(
                f"{', '.join(changed)} changed (set_params) since the stream started; "
                "call fit to start a new stream with the new values."
            )

    def _check_chunk(self, y, X, *, first):
        """``(y, X, index)`` as float arrays, fully validated; nothing is changed."""
        index = y.index if _is_pandas(y) else None
        if not first and self._pandas != (index is not None):
            raise ValueError("update with the same kind of y as fit (pandas or numpy).")
        yv = as_float64(y, "y cannot be converted to float64 numbers")
        if yv.ndim == 2 and yv.shape[1] == 1:
            yv = yv[:, 0]
        if yv.ndim != 1:
            raise ValueError(f"y must be one series (1-D), got shape {yv.shape}.")
        if first and yv.shape[0] == 0:
            raise ValueError("y is empty.")
        if not np.all(np.isfinite(yv)):
            raise ValueError("y contains NaN or infinity: a stream needs every value.")
        if self.transform == "log_diff" and np.any(yv <= 0):
            raise ValueError('transform="log_diff" needs y > 0.')
        n = yv.shape[0]
        if self.n_exog_ == 0:
            if X is not None and np.size(X):
                raise ValueError("X given, but the stream was started without X.")
            Xv = np.empty((n, 0))
        else:
            if X is None:
                raise ValueError(f"X is required: the stream has {self.n_exog_} "
                                 "exogenous columns.")
            if hasattr(X, "columns") and self._columns is not None \
                    and list(X.columns) != self._columns:
                raise ValueError(f"X's columns {list(X.columns)} are not those of the "
                                 f"stream {self._columns}.")
            Xv = as_float64(X, "X cannot be converted to float64")
            if Xv.ndim == 1:
                Xv = Xv[:, None]
            if Xv.ndim != 2 or Xv.shape[1] != self.n_exog_:
                raise ValueError(f"X has shape {Xv.shape}; expected ({n}, {self.n_exog_}).")
            if Xv.shape[0] != n:
                raise ValueError(f"X has {Xv.shape[0]} rows but y has {n}.")
            if not np.all(np.isfinite(Xv)):
                raise ValueError("X contains NaN or infinity.")
        if index is not None and n:
            if not index.is_monotonic_increasing or index.has_duplicates:
                raise ValueError("y's index must be increasing without duplicates.")
            if not first and self._index_tail is not None and index[0] <= self._index_tail[-1]:
                raise ValueError(
                    f"the new values start at {index[0]}, not after the last learned "
                    f"time stamp {self._index_tail[-1]}."
                )
        return yv, Xv, index

    def _set_index(self, index):
        if index is None or len(index) == 0:
            return
        tail = index if self._index_tail is None else self._index_tail.append(index)
        tail = tail[-5:]
        try:
            step = _infer_step(index if len(index) >= 3 else tail)
        except ValueError:
            step = self._step
        self._index_tail, self._step = tail, step

    def _check_horizon(self, horizon):
        check_is_fitted(self)
        h = self.horizon if horizon is None else horizon
        return check_int(h, "horizon", minimum=1, maximum=self.horizon,
                         note=" (the horizon the forecaster was built for)")

    def _wrap(self, f, h):
        if not self._pandas:
            return f
        import pandas as pd

        if self._step is None:
            raise ValueError(
                "cannot infer the time step of y's index (fewer than two time stamps): "
                "give a DatetimeIndex with a freq or more rows."
            )
        return pd.Series(f, index=_future_index(self._index_tail, self._step, h))

    # ------------------------------------------------------------------ the stream
    def _row(self, t, ys, Xs, start, fut_rows):
        """Features of origin ``t`` from the values ``ys`` (absolute times from
        ``start``), exogenous rows ``Xs`` and the known-future rows ``fut_rows``
        (shape ``(steps, n_future)``): :meth:`_past_rows` of one origin, then
        ``fut_rows``."""
        x = self._past_rows(np.array([t]), ys, Xs, start)[0]
        if self._future_cols:
            return np.concatenate([x, fut_rows.T.ravel()])
        return x

    def _base(self, ys, i, k, origin=None, means=None):
        """The base of step ``k`` at position ``i`` of ``ys`` (see the class doc; ``i``
        may be an array of positions); for no transform, the running mean at ``origin``
        (default ``i``) of ``means`` (default: the kept running means)."""
        if self.transform in ("diff", "log_diff"):
            return ys[i]
        if self.transform == "seasonal_diff":
            s = self._order
            return ys[i + k - s * math.ceil(k / s)]
        means = self._m_hist if means is None else means
        return means[i if origin is None else origin]

    def _to_target(self, y, base):
        if self.transform == "log_diff":
            return np.log(y / base)
        return y - base

    def _from_target(self, p, base):
        if self.transform == "log_diff":
            return base * np.exp(p)
        return p + base

    def _learn_row(self, x, Y):
        reg = self.regressor_
        if self.n_rows_learned_ == 0:
            reg.partial_fit(x[None, :], Y[None, :])
            self._fast = self._fast_steps(reg)
        elif self._fast is not None:
            transformers, final = self._fast
            xt = x
            for tr in transformers:
                xt = (tr.prequential_transform(xt[None, :])[0]
                      if hasattr(tr, "prequential_transform") else tr.transform_one(xt))
            final.learn_one(xt, Y)
        else:
            reg.partial_fit(x[None, :], Y[None, :])
        self.n_rows_learned_ += 1

    def _predict_row(self, reg, fast, x):
        if fast is not None:
            transformers, final = fast
            xt = x
            for tr in transformers:
                xt = tr.transform_one(xt)
            return np.atleast_1d(final.predict_one(xt))
        return np.asarray(reg.predict(x[None, :]), dtype=np.float64).reshape(-1)

    @staticmethod
    def _fast_steps(reg):
        """The fitted steps of a :class:`StreamingPipeline` of the package's scaler,
        lags or random features and a final step with ``learn_one``/``predict_one``,
        to be driven one row at a time as the pipeline's ``partial_fit`` would (without
        its per-call copies of the state), else None."""
        if not isinstance(reg, StreamingPipeline):
            return None
        steps = list(reg.named_steps_.values())
        *transformers, final = steps
        ok = all(isinstance(tr, (RecursiveStandardScaler, RandomFourierFeatures))
                 for tr in transformers)
        if not ok or not (hasattr(final, "learn_one") and hasattr(final, "predict_one")):
            return None
        return transformers, final

    def _future_rows(self, Xs, start, t, steps):
        """Known-future rows ``t + 1, ..., t + steps`` from ``Xs``."""
        i = t - start
        return Xs[i + 1 : i + 1 + steps][:, self._future_cols]

    def _point_forecast(self, reg, fast, ys, Xs, start, t, steps, fut_rows):
        """Forecasts of ``y_{t+1..t+steps}`` from the values up to ``t``."""
        if self._strategy == "direct":
            x = self._row(t, ys, Xs, start, fut_rows)
            p = self._predict_row(reg, fast, x)[:steps]
            i = t - start
            base = np.array([self._base(ys, i, k) for k in range(1, steps + 1)])
            return self._from_target(p, base)
        # recursive: each forecast appended to the values, then the next step
        ext = np.concatenate([ys[: t - start + 1], np.empty(steps)])
        out = np.empty(steps)
        for j in range(steps):
            tj = t + j
            fr = fut_rows[j : j + 1] if self._future_cols else None
            x = self._row(tj, ext, Xs, start, fr)
            p = self._predict_row(reg, fast, x)[0]
            i = tj - start
            out[j] = self._from_target(p, self._base(ext, i, 1, origin=t - start))
            ext[i + 1] = out[j]
        return out

    def _run(self, yv, Xv, *, record):
        # the rows are validated here once: the steps need not check each one again
        with config_context(assume_finite=True, skip_parameter_validation=True):
            return self._run_steps(yv, Xv, record=record)

    def _run_steps(self, yv, Xv, *, record):
        """Learn the values one time step at a time; with ``record``, the forecasts
        of each value (``F[i, k−1]``: of ``yv[i]`` from ``k`` steps before, made in this
        call or an earlier one) and the interval half-widths issued with them
        (``Q[i, k−1]``: ACI's and the nominal quantile's, ``(2, n_levels)``).

        With :meth:`_vectorised`, the values come in blocks aligned on the stream's
        positions; each block's forecasts are computed and its rows learned first, by one
        vectorised prequential call (:meth:`_learn_block`), and the time steps then only
        move the forecasts into the conformal state, in the same order as one value at a
        time.
        """
        n, h = yv.shape[0], self.horizon
        nl = len(self._levels)
        first = self.n_samples_seen_
        F = np.full((n, h), np.nan) if record else None
        Q = np.full((n, h, 2, nl), np.nan) if record else None
        ks = np.arange(1, h + 1)
        R = self._ring_origin.shape[0]
        C = int(self.chunk_size) if self._vectorised() else 1
        a = 0
        while a < n:
            b = min(n, a + C - (first + a) % C)  # the block ends on a multiple of C
            block = self._learn_block(yv[a:b], Xv[a:b]) if C > 1 else None
            for i in range(a, b):
                self._y_hist = np.append(self._y_hist, yv[i])[-self._keep :]
                # the running mean of y (one value at a time, whatever the chunking)
                self._n_mean += 1
                self._mean_y += (yv[i] - self._mean_y) / self._n_mean
                self._m_hist = np.append(self._m_hist, self._mean_y)[-self._keep :]
                self._X_hist = np.concatenate([self._X_hist, Xv[i : i + 1]])[-self._keep :]
                self.n_samples_seen_ += 1
                T = self.n_samples_seen_ - 1
                # the residuals of the forecasts that target T: origin T − k, step k
                origins = T - ks
                slots = origins % R
                have = (self._ring_origin[slots] == origins) & (origins >= 0)
                if have.any():
                    k_idx = np.flatnonzero(have)
                    self._residuals(k_idx, yv[i] - self._ring_f[slots[k_idx], k_idx],
                                    self._ring_q[slots[k_idx], :, k_idx])
                    if record:  # (forecasts made in an earlier call included)
                        F[i, k_idx] = self._ring_f[slots[k_idx], k_idx]
                        Q[i, k_idx] = self._ring_q[slots[k_idx], :, k_idx]
                # the intervals issued at origin T (from the residuals known at T), kept
                # for its forecast (made now, or when its known-future rows have arrived)
                self._issued_origin[T % R] = T
                self._issued_q[T % R] = self._quantiles_both()
                # forecasts and rows that are due, in the order the timing allows
                made = self._advance(T, block)
                # record: the forecasts made now of targets already seen (deferred
                # forecasts); the others are recorded when their target arrives
                if record:
                    for o, f in made:
                        q = self._ring_q[o % R]
                        for k in range(1, min(h, T - o) + 1):
                            r = o + k - first
                            if r >= 0:
                                F[r, k - 1] = f[k - 1]
                                Q[r, k - 1] = q[:, k - 1]
            a = b
        return F, Q

    def _vectorised(self):
        """Whether blocks of values are learned by one vectorised prequential call: one
        step ahead (a row is learned one step after its origin, the next origin's
        forecast is one prediction), a regressor with ``prequential_predict``."""
        return (self.horizon == 1 and self.chunk_size > 1
                and hasattr(self.regressor_, "prequential_predict"))

    def _past_rows(self, origins, ys, Xs, start):
        """The lags of the transformed series and of the past-only exogenous columns
        at each of ``origins`` (absolute times; values ``ys`` and rows ``Xs`` held
        from time ``start``): one row per origin, newest lag first."""
        i = origins - start
        L, d = self.n_lags, self._order
        idx = i[:, None] - np.arange(L)[None, :]  # newest lag first
        if self.transform is None:
            z = ys[idx]
        elif self.transform == "log_diff":
            v = np.log(ys)
            z = v[idx] - v[idx - 1]
        else:
            z = ys[idx] - ys[idx - d]
        if not self._exog_lags:
            return z
        e_idx = i[:, None] - np.arange(self._exog_lags)[None, :]
        e = Xs[:, self._past_cols][e_idx]  # (rows, lags, columns)
        return np.concatenate([z, e.transpose(0, 2, 1).reshape(i.shape[0], -1)], axis=1)

    def _rows(self, origins, ys, Xs, start, *, steps):
        """:meth:`_row` of each of ``origins`` at once, the known-future rows of
        ``steps`` steps read from ``Xs``."""
        x = self._past_rows(origins, ys, Xs, start)
        if not self._future_cols:
            return x
        f_idx = (origins - start)[:, None] + np.arange(1, steps + 1)[None, :]
        fut = Xs[:, self._future_cols][f_idx]  # (rows, steps, columns)
        return np.concatenate([x, fut.transpose(0, 2, 1).reshape(x.shape[0], -1)], axis=1)

    def _learning_problem(self, yv, Xv):
        """The rows this forecaster learns from a whole series, at once (after
        :meth:`_start`; nothing is changed): ``(X, Y, origins, bases)``.

        ``X[j]`` is the row of origin ``origins[j]`` (every origin from the first full
        row whose targets lie within ``yv``), ``Y[j, k−1]`` its target of step ``k``
        (``k = 1 .. horizon`` for the direct strategy, 1 for the recursive one) and
        ``bases[j, k−1]`` the base that target is relative to, so that a prediction ``p``
        of it is the forecast :meth:`_from_target` ``(p, base)`` of
        ``yv[origins[j] + k]``. A regressor that predicts row ``j`` after learning the
        rows before ``j − (horizon − 1)`` (``prequential_predict(..., delay=horizon − 1)``)
        makes the stream's forecasts.
        """
        g = self._reach
        means = _running_means(yv)
        origins = np.arange(self._t0, yv.shape[0] - g)
        X = self._rows(origins, yv, Xv, 0, steps=g)
        ks = np.arange(1, g + 1)
        bases = np.column_stack([self._base(yv, origins, k, means=means) for k in ks])
        with np.errstate(divide="ignore", invalid="ignore"):
            Y = self._to_target(yv[origins[:, None] + ks], bases)
        return X, Y, origins, bases

    def _learn_block(self, yb, Xb):
        """One step ahead: the forecasts of the origins the block's time steps will
        forecast, and the block's rows learned, by one prequential call.

        Returns ``(first_origin, forecasts)`` for :meth:`_advance` (``forecasts[j]``:
        of origin ``first_origin + j``, shape ``(n, 1)``). The forecast of origin ``o``
        is the regressor's prediction of row ``o`` after it has learned the rows before
        it (origins ``t0 .. o − 1``): the prequential prediction of row ``o``, or, for
        the block's last origin, a prediction after the call.
        """
        m = yb.shape[0]
        ys = np.concatenate([self._y_hist, yb])
        Xs = np.concatenate([self._X_hist, Xb])
        start = self.n_samples_seen_ - self._y_hist.shape[0]
        T2 = self.n_samples_seen_ + m - 1  # the block's last time
        # the running mean at each time, as the time steps compute it
        ms = np.concatenate([self._m_hist, _running_means(yb, self._mean_y, self._n_mean)])
        o0, o1 = self._next_forecast, T2 - self._defer  # origins forecast in the block
        l0, l1 = self._next_learn, T2 - 1  # origins learned in the block
        f = np.full((max(o1 - o0 + 1, 0), 1), np.nan)
        if o1 < o0:
            return o0, f

        def base(o):  # of step 1 at origins o
            return self._base(ys, o - start, 1, means=ms)

        reg = self.regressor_
        p = np.full(o1 - o0 + 1, np.nan)  # predictions (target units) of the origins
        if l1 >= l0:
            learn = np.arange(l0, l1 + 1)
            X = self._rows(learn, ys, Xs, start, steps=1)
            Y = self._to_target(ys[learn - start + 1], base(learn))[:, None]
            P = np.asarray(prequential_predict(reg, X, Y), dtype=np.float64)
            P = P.reshape(P.shape[0], -1)[:, 0]
            if self.n_rows_learned_ == 0:
                P[0] = np.nan  # learned nothing before it
            lo, hi = max(o0, l0), min(o1, l1)
            if hi >= lo:
                p[lo - o0 : hi - o0 + 1] = P[lo - l0 : hi - l0 + 1]
            self._fast = self._fast_steps(reg)
        # (the time steps count the rows learned, as they pass them)
        learned = self.n_rows_learned_ + max(l1 - l0 + 1, 0)
        if o1 > l1 and o1 >= self._t0 and learned > 0:
            # the last origin: after every row before it
            x = self._rows(np.array([o1]), ys, Xs, start, steps=1)[0]
            p[o1 - o0] = self._predict_row(reg, self._fast, x)[0]
        origins = np.arange(o0, o1 + 1)
        ok = origins >= self._t0
        f[ok, 0] = self._from_target(p[ok], base(origins[ok]))
        return o0, f

    def _advance(self, T, block=None):
        """Make the forecasts and learn the rows that are due at time ``T``; ``block``:
        the forecasts of :meth:`_learn_block`, whose rows it has learned."""
        made = []
        g, h = self._reach, self.horizon
        start = self.n_samples_seen_ - self._y_hist.shape[0]
        R = self._ring_origin.shape[0]
        while True:
            o = self._next_forecast
            if o + self._defer <= T and self._next_learn > o - g:
                # forecast origin o with the state that has learned rows <= o − g
                slot = o % R
                self._ring_origin[slot] = o
                # the intervals issued at o: the conformal state at time o
                qslot = self._issued_origin[slot] == o
                self._ring_q[slot] = self._issued_q[slot] if qslot else np.nan
                if block is not None:  # computed by the block's prequential call
                    f = block[1][o - block[0]]
                elif o >= self._t0 and self.n_rows_learned_ > 0:
                    fut = (self._future_rows(self._X_hist, start, o, h)
                           if self._future_cols else None)
                    f = self._point_forecast(self.regressor_, self._fast, self._y_hist,
                                             self._X_hist, start, o, h, fut)
                else:
                    f = np.full(h, np.nan)
                self._ring_f[slot] = f
                self._next_forecast += 1
                made.append((o, f))
                # residuals of targets already seen (a deferred forecast)
                k_idx = np.flatnonzero(o + np.arange(1, h + 1) <= T)
                if k_idx.size and np.isfinite(f).any():
                    ys = self._y_hist[o + k_idx + 1 - start]
                    self._residuals(k_idx, ys - f[k_idx],
                                    self._ring_q[slot][:, k_idx].transpose(1, 0, 2))
                continue
            t = self._next_learn
            if t + g <= T and self._next_forecast > t + g - 1:
                if block is None:
                    self._learn_origin(t, start)
                else:  # learned by the block's prequential call
                    self._next_learn += 1
                    self.n_rows_learned_ += 1
                continue
            return made

    def _learn_origin(self, t, start):
        g = self._reach
        i = t - start
        fut = self._future_rows(self._X_hist, start, t, g) if self._future_cols else None
        x = self._row(t, self._y_hist, self._X_hist, start, fut)
        ys = self._y_hist[i + 1 : i + 1 + g]
        base = np.array([self._base(self._y_hist, i, k) for k in range(1, g + 1)])
        self._learn_row(x, self._to_target(ys, base))
        self._next_learn += 1

    def _residuals(self, k_idx, r, q):
        """Absolute residuals ``|r|`` of steps ``k_idx + 1`` reach their windows; ACI's
        levels move by ``γ (α − err)`` where an interval ``q`` had been issued."""
        ok = np.isfinite(r)
        k_idx, r, q = k_idx[ok], np.abs(r[ok]), q[ok][:, 0]  # ACI's intervals
        if not k_idx.size:
            return
        issued = np.isfinite(q)
        err = (r[:, None] > q).astype(np.float64)
        # α_{t+1} = α_t + γ (α − err_t)
        step = self.gamma * (self._alpha_nominal[None, :] - err)
        self.alpha_[k_idx] += np.where(issued, step, 0.0)
        W = self.conformal_window
        pos = self._res_pos[k_idx]
        self._res[k_idx, pos] = r
        self._res_pos[k_idx] = (pos + 1) % W
        self.n_residuals_[k_idx] = np.minimum(self.n_residuals_[k_idx] + 1, W)

    def _quantiles_both(self):
        """ACI's and the nominal quantile's half-widths ``(2, horizon, n_levels)``."""
        S = np.sort(self._res, axis=1)  # +inf beyond each step's count
        nominal = self._alpha_nominal
        return np.stack([self._half_widths(S, self.alpha_, nominal),
                         self._half_widths(S, np.tile(nominal, (self.horizon, 1)),
                                           nominal)])

    def _quantiles(self, levels, method=None):
        """Half-widths ``(horizon, n_levels)`` of ``method`` (default: the
        ``method`` parameter) from the current conformal state."""
        method = self.method if method is None else method
        if tuple(levels) == self._levels:
            return self._quantiles_both()[0 if method == "aci" else 1]
        if method == "aci":
            raise ValueError(
                f"coverage {tuple(levels)} is not tracked: method=\"aci\" adapts the "
                f"levels {self._levels} (the coverage parameter) only."
            )
        nominal = 1.0 - np.asarray(levels, dtype=np.float64)
        if not np.all((nominal > 0) & (nominal < 1)):
            raise ValueError(f"coverage must be in (0, 1), got {levels!r}.")
        S = np.sort(self._res, axis=1)
        return self._half_widths(S, np.tile(nominal, (self.horizon, 1)), nominal)

    def _half_widths(self, S, alpha, nominal):
        """The ``⌈(1 − α)(n + 1)⌉``-th smallest residual of each step (sorted ``S``)
        at each level ``α`` (``alpha``, one per step and level): the largest when
        ``α ≤ 0``, 0 when ``α ≥ 1``, NaN before ``⌈(1 − α)/α⌉`` residuals."""
        n = self.n_residuals_[:, None]
        rank = np.ceil((1.0 - alpha) * (n + 1)).astype(np.int64)  # 1-based
        enough = n >= np.ceil((1.0 - nominal) / nominal)[None, :]
        rank = np.clip(rank, 1, np.maximum(n, 1))  # α_t ≤ 0: the largest residual
        q = np.take_along_axis(S, rank - 1, axis=1)
        q = np.where(alpha >= 1.0, 0.0, q)
        return np.where(enough & (n > 0), q, np.nan)

    def _forecast_now(self, h, X_future):
        """Forecasts at the last origin, after learning (on a copy) the rows due."""
        T = self.n_samples_seen_ - 1
        fut = None
        if self._future_cols:
            if X_future is None:
                raise ValueError(
                    f"X_future is required: the forecaster uses known-future columns "
                    f"{self.future_exog!r}; give their values for the next {h} times."
                )
            if hasattr(X_future, "columns") and self._columns is not None:
                names = [self._columns[j] for j in self._future_cols]
                missing = [c for c in names if c not in X_future.columns]
                if missing:
                    raise ValueError(f"X_future lacks the columns {missing}.")
                Xf = np.asarray(X_future[names], dtype=np.float64)
            else:
                Xf = np.asarray(X_future, dtype=np.float64)
                if Xf.ndim == 1:
                    Xf = Xf[:, None]
                if Xf.shape[1] == self.n_exog_ and self.n_exog_ != len(self._future_cols):
                    Xf = Xf[:, self._future_cols]
                elif Xf.shape[1] != len(self._future_cols):
                    raise ValueError(
                        f"X_future has {Xf.shape[1]} columns; expected "
                        f"{len(self._future_cols)} (future_exog) or {self.n_exog_}.")
            if Xf.shape[0] < h or not np.all(np.isfinite(Xf[:h])):
                raise ValueError(f"X_future needs {h} finite rows, got {Xf.shape[0]}.")
            # the direct model's row has all its horizon's future values
            need = self.horizon if self._strategy == "direct" else h
            if Xf.shape[0] < need:
                raise ValueError(
                    f"X_future needs {need} rows (the direct model's rows hold the "
                    f"known-future values of all {self.horizon} steps).")
            fut = Xf[:need]
        if T < self._t0:
            return np.full(h, np.nan)
        g = self._reach
        start = self.n_samples_seen_ - self._y_hist.shape[0]
        reg, fast = self.regressor_, self._fast
        due = range(self._next_learn, T - g + 1)
        if len(due):
            work = copy.deepcopy(self)
            with config_context(assume_finite=True, skip_parameter_validation=True):
                for t in due:
                    work._learn_origin(t, start)
            reg, fast = work.regressor_, work._fast
            learned = work.n_rows_learned_
        else:
            learned = self.n_rows_learned_
        if learned == 0:
            return np.full(h, np.nan)
        with config_context(assume_finite=True, skip_parameter_validation=True):
            return self._point_forecast(reg, fast, self._y_hist, self._X_hist, start, T,
                                        h, fut)
