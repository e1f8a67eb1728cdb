"""Error measures of prequential (predict-then-update) evaluation and forecast scores.

All error functions take the targets and the *prequential* predictions of a stream (for
example from :func:`sklearn_orfit.prequential_predict`) and reduce the errors
``e_t = y_t − ŷ_t``: ResMSE and ResVAR of the ABO paper (§3.3), RMSE, MAE, the mean
absolute scaled error (MASE, Hyndman & Koehler 2006) and skill scores against naive
reference forecasts (:func:`naive_forecast`). :func:`forecast_scores` gathers them for a
report, with a one-sentence verdict; :func:`infer_season` guesses the season length
from time stamps.

References
----------
ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning in
Non-stationary Time-series", §3.3 (ResMSE, ResVAR).

R. J. Hyndman and A. B. Koehler, "Another look at measures of forecast accuracy",
International Journal of Forecasting 22(4), 679–688, 2006 (MASE).
"""

import math

import numpy as np

from ._docstrings import fill_doc
from ._streaming._validation import check_int, check_numeric

__all__ = [
    "forecast_scores",
    "infer_season",
    "mean_absolute_error",
    "mean_absolute_scaled_error",
    "naive_forecast",
    "res_mse",
    "res_var",
    "residual_statistics",
    "root_mean_squared_error",
    "skill_score",
]

_MULTIOUTPUT = ("uniform_average", "raw_values")

# the docstring blocks the error functions share (see fill_doc)
_Y_TRUE_Y_PRED = """\
y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
    Targets, in stream order.
y_pred : array-like of the same shape
    Prequential predictions."""
# the Parameters of the weighted means, root_mean_squared_error and mean_absolute_error
_WEIGHTED_PARAMETERS = "Parameters\n----------\n" + _Y_TRUE_Y_PRED + """
sample_weight : array-like of shape (n_samples,), default=None
    Weights of the rows (finite, >= 0, not all zero): the mean over the rows of a
    row's term ``a_t`` (``(y_t − ŷ_t)²`` or ``|y_t − ŷ_t|``) is
    ``Σ_t w_t a_t / Σ_t w_t``. ``None``: every row weighs 1.
multioutput : {"uniform_average", "raw_values"} or array-like of shape \
        (n_outputs,), default="uniform_average"
    With several outputs: average the per-output values ``L_j``, return them all, or
    average them with these weights ``v_j`` (``Σ_j v_j L_j / Σ_j v_j``; 2-D input
    only)."""
# the references: the ABO paper (its scores) and Hyndman & Koehler (the naive forecast
# and the scaled errors)
_ABO_REFERENCE = """\
ABO: "Adaptive Benign Overfitting (ABO): Overparameterized RLS for Online Learning
in Non-stationary Time-series", §3.3."""
_HYNDMAN_KOEHLER = """\
R. J. Hyndman and A. B. Koehler, "Another look at measures of forecast accuracy",
International Journal of Forecasting 22(4), 679–688, 2006."""
_REFERENCES = "References\n----------\n"

_fill_doc = fill_doc(
    y_true_y_pred=_Y_TRUE_Y_PRED,
    multioutput="""\
multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
    With several outputs: average the per-output values, or return them all.""",
    weighted_parameters=_WEIGHTED_PARAMETERS,
    # the Returns section of an error measure, up to the description of ``loss``, which
    # follows the placeholder, indented under it
    loss_returns="""\
Returns
-------
loss : float or ndarray of shape (n_outputs,)""",
    # the References section: one of the two, or both
    abo_references=_REFERENCES + _ABO_REFERENCE,
    hyndman_koehler_references=_REFERENCES + _HYNDMAN_KOEHLER,
    both_references=f"{_REFERENCES}{_ABO_REFERENCE}\n\n{_HYNDMAN_KOEHLER}",
)

# Scores are reported in the series' units squared (ResMSE) and to the fourth power
# (ResVAR); beyond this magnitude the fourth powers of the errors leave float64.
_MAX_SCORED_MAGNITUDE = 1e75


def _beyond_scored_range(values):
    """``(position, value)`` of the first value beyond :data:`_MAX_SCORED_MAGNITUDE` in
    magnitude, or ``None``; and the sentence that says why and what to do."""
    big = np.abs(values) > _MAX_SCORED_MAGNITUDE
    if not big.any():
        return None
    first = int(np.argmax(big))
    return first, (
        f"has values beyond {_MAX_SCORED_MAGNITUDE:.0e} in magnitude (the first, "
        f"{values[first]:.6g}, at {{where}}): the scores, in the series' units squared "
        "and to the fourth power, would overflow float64; divide the {what} by a power "
        "of ten before {doing}")


def _as_float(a, name):
    """``a`` as a float64 array; strings, complex numbers and ragged input refused."""
    check_numeric(a, name)
    try:
        return np.asarray(a, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"{name} must be an array of real numbers; got {exc}"
        ) from None


def _check_ndim(a, name):
    if a.ndim not in (1, 2):
        raise ValueError(f"{name} must be 1-D or 2-D, got shape {a.shape}.")
    if a.shape[0] == 0:
        raise ValueError(f"{name} is empty: at least one sample is needed.")


def _errors(y_true, y_pred):
    y_true = _as_float(y_true, "y_true")
    y_pred = _as_float(y_pred, "y_pred")
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true has shape {y_true.shape} but y_pred has shape {y_pred.shape}."
        )
    _check_ndim(y_true, "y_true")
    e = y_true - y_pred
    if not np.all(np.isfinite(e)):
        raise ValueError("y_true or y_pred contains NaN or infinity.")
    return e


def _check_multioutput(multioutput, *, weights=False):
    if not (isinstance(multioutput, str) and multioutput in _MULTIOUTPUT):
        allowed = "'uniform_average' or 'raw_values'"
        if weights:
            allowed = "'uniform_average', 'raw_values' or an array of output weights"
        raise ValueError(f"multioutput must be {allowed}, got {multioutput!r}.")


def _reduce(values, multioutput):
    _check_multioutput(multioutput)
    if values.ndim == 0 or multioutput == "raw_values":
        return values if values.ndim else float(values)
    return float(np.mean(values))


def _check_weights(w, n, name):
    """``w`` as a float64 array of shape ``(n,)``: finite, >= 0, with a positive sum."""
    if isinstance(w, (bool, np.bool_)):
        raise ValueError(f"{name} must be an array of real numbers, got {w!r}.")
    w = _as_float(w, name)
    if w.shape != (n,):
        raise ValueError(f"{name} has shape {w.shape}, expected ({n},).")
    if not np.all(np.isfinite(w)):
        raise ValueError(f"{name} contains NaN or infinity.")
    if np.any(w < 0):
        raise ValueError(f"{name} contains negative values; weights must be >= 0.")
    if not w.sum() > 0:
        raise ValueError(f"{name} sums to zero: the weighted average is undefined.")
    return w


def _weighted_average(values, sample_weight):
    """Per-output mean of ``values`` over the rows, weighted by ``sample_weight``."""
    if sample_weight is None:
        return np.mean(values, axis=0)
    w = _check_weights(sample_weight, values.shape[0], "sample_weight")
    return np.average(values, axis=0, weights=w)


def _reduce_outputs(values, multioutput):
    """``multioutput`` as scikit-learn's regression metrics take it: "raw_values",
    "uniform_average" or an array of weights of the outputs (2-D input only)."""
    if isinstance(multioutput, str):
        return _reduce(values, multioutput)
    if multioutput is None or np.ndim(multioutput) != 1:
        _check_multioutput(multioutput, weights=True)  # neither a known string nor weights
    n_outputs = values.shape[0] if values.ndim else 1
    if n_outputs == 1:
        raise ValueError(
            "multioutput weights are useful only in multi-output cases (2-D y with "
            "several columns)."
        )
    weights = _as_float(multioutput, "multioutput")
    if weights.shape[0] != n_outputs:
        raise ValueError(
            f"There must be equally many multioutput weights ({weights.shape[0]}) as "
            f"outputs ({n_outputs})."
        )
    weights = _check_weights(weights, n_outputs, "multioutput")
    return float(np.average(values, weights=weights))


def _output_losses(y_true, y_pred, multioutput, loss):
    """``loss(e)`` (one value per output) of the errors ``e``, reduced over the outputs
    as ``multioutput`` says; a name is checked before ``loss`` runs, weights after."""
    e = _errors(y_true, y_pred)
    if isinstance(multioutput, str):
        _check_multioutput(multioutput, weights=True)
    return _reduce_outputs(loss(e), multioutput)


@_fill_doc
def res_mse(y_true, y_pred, *, multioutput="uniform_average"):
    """Residual mean squared error: the mean of ``(y_t − ŷ_t)²`` over the stream.

    Parameters
    ----------
    {y_true_y_pred}
    {multioutput}

    {loss_returns}
        ``mean_t e_t²`` (lower is better).

    See Also
    --------
    res_var : Sample variance of the squared errors.
    sklearn_orfit.model_selection.make_prequential_scorer : The scorer built on it.

    Notes
    -----
    For 1-D inputs this is :func:`sklearn.metrics.mean_squared_error`; the name follows
    the ABO paper (ResMSE, §3.3), where the predictions are prequential. Cost:
    O(n_samples · n_outputs) time, one temporary array of the input's size.

    {abo_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import res_mse
    >>> res_mse([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    1.6666666666666667
    """
    e = _errors(y_true, y_pred)
    return _reduce(np.mean(e * e, axis=0), multioutput)


@_fill_doc
def res_var(y_true, y_pred, *, multioutput="uniform_average"):
    """Residual variance: the sample variance (``n − 1``) of the squared errors.

    Measures how uneven the squared prequential errors ``(y_t − ŷ_t)²`` are along the
    stream (the ABO paper's ResVAR).

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Targets, in stream order; at least two rows.
    y_pred : array-like of the same shape
        Prequential predictions.
    {multioutput}

    {loss_returns}
        ``var(e_t², ddof=1)`` (lower is better).

    See Also
    --------
    res_mse : Mean of the squared errors.

    Notes
    -----
    ResVAR of the ABO paper (§3.3). Cost: O(n_samples · n_outputs) time, temporaries
    of the input's size.

    {abo_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import res_var
    >>> res_var([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])  # squared errors 0, 1, 4
    4.333333333333333
    """
    e = _errors(y_true, y_pred)
    if e.shape[0] < 2:
        raise ValueError("res_var needs at least two samples (sample variance, n - 1).")
    return _reduce(np.var(e * e, axis=0, ddof=1), multioutput)


@_fill_doc
def residual_statistics(y_true, y_pred):
    """Mean and sample variance of the absolute residuals ``r_t = |y_t − ŷ_t|``.

    The residual statistics of the ABO paper (§3.3), together with ResMSE and ResVAR.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Targets, in stream order; at least two rows.
    y_pred : array-like of the same shape
        Predictions (prequential ones for "test" statistics, in-window fits for
        "train" statistics).

    Returns
    -------
    stats : dict
        ``{"res_mse", "res_var", "abs_mean", "abs_var", "n_samples"}``; ``abs_mean`` and
        ``abs_var`` are the mean and sample variance (``n − 1``) of ``r_t``, averaged over
        outputs.

    Notes
    -----
    Cost: O(n_samples · n_outputs) time, temporaries of the input's size.

    {abo_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import residual_statistics
    >>> stats = residual_statistics([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    >>> stats["abs_mean"], stats["abs_var"], stats["n_samples"]
    (1.0, 1.0, 3)
    """
    e = _errors(y_true, y_pred)
    if e.shape[0] < 2:
        raise ValueError("residual_statistics needs at least two samples.")
    r = np.abs(e)
    return {
        "res_mse": float(np.mean(np.mean(r * r, axis=0))),
        "res_var": float(np.mean(np.var(r * r, axis=0, ddof=1))),
        "abs_mean": float(np.mean(np.mean(r, axis=0))),
        "abs_var": float(np.mean(np.var(r, axis=0, ddof=1))),
        "n_samples": int(e.shape[0]),
    }


@_fill_doc
def root_mean_squared_error(
    y_true, y_pred, *, sample_weight=None, multioutput="uniform_average"
):
    """Root mean squared error: ``sqrt(mean_t (y_t − ŷ_t)²)``, per output.

    {weighted_parameters}

    {loss_returns}
        The RMSE (lower is better), in the units of the target.

    See Also
    --------
    res_mse : Its square (for one output).
    mean_absolute_error : Mean of the absolute errors.

    Notes
    -----
    Equal to :func:`sklearn.metrics.root_mean_squared_error` on finite input, with the
    same ``sample_weight`` and ``multioutput``: with several outputs the (weighted)
    RMSE of each output is taken first, then averaged. A 1-D input gives a float for
    either ``multioutput`` (scikit-learn returns a one-element array for
    ``"raw_values"``). The inputs are checked as in :func:`res_mse` (equal shapes, 1-D
    or 2-D, at least one row, finite); negative weights, and weights that sum to zero,
    are refused. Cost: O(n_samples · n_outputs) time, one temporary array of the
    input's size.

    Examples
    --------
    >>> from sklearn_orfit.metrics import root_mean_squared_error
    >>> root_mean_squared_error([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])  # sqrt(5 / 3)
    1.2909944487358056
    >>> root_mean_squared_error([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], sample_weight=[1, 1, 0])
    0.7071067811865476
    """
    return _output_losses(y_true, y_pred, multioutput,
                          lambda e: np.sqrt(_weighted_average(e * e, sample_weight)))


@_fill_doc
def mean_absolute_error(y_true, y_pred, *, sample_weight=None, multioutput="uniform_average"):
    """Mean absolute error: ``mean_t |y_t − ŷ_t|``, per output.

    {weighted_parameters}

    {loss_returns}
        The MAE (lower is better), in the units of the target.

    See Also
    --------
    root_mean_squared_error : Root of the mean squared error.
    mean_absolute_scaled_error : The MAE relative to a naive forecast's.

    Notes
    -----
    Equal to :func:`sklearn.metrics.mean_absolute_error` on finite input, with the same
    ``sample_weight`` and ``multioutput``. A 1-D input gives a float for either
    ``multioutput`` (scikit-learn returns a one-element array for ``"raw_values"``).
    The inputs are checked as in :func:`res_mse`; negative weights, and weights that
    sum to zero, are refused. Cost: O(n_samples · n_outputs) time, one temporary array
    of the input's size.

    Examples
    --------
    >>> from sklearn_orfit.metrics import mean_absolute_error
    >>> mean_absolute_error([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    1.0
    >>> mean_absolute_error([1.0, 2.0, 3.0], [1.0, 1.0, 1.0], sample_weight=[0, 1, 3])
    1.75
    """
    return _output_losses(y_true, y_pred, multioutput,
                          lambda e: _weighted_average(np.abs(e), sample_weight))


def _lag(season, horizon):
    """The lag of the seasonal-naive forecast: ``season · ceil(horizon / season)``."""
    return season * (-(-horizon // season))


@_fill_doc
def naive_forecast(series, *, season=1, horizon=1):
    """Seasonal-naive forecast of each value of a series, made ``horizon`` steps earlier.

    ``f[t] = series[t − season · ceil(horizon / season)]``: the last value of the same
    season phase as ``t`` that was already known ``horizon`` steps before ``t``. With
    ``season=1`` this is the last-value (random walk) forecast ``series[t − horizon]``.

    Parameters
    ----------
    series : array-like of shape (n_samples,) or (n_samples, n_outputs)
        The observed series, in time order (finite). A 2-D series is forecast column by
        column.
    season : int, default=1
        Number of steps in one seasonal cycle (e.g. 48 for half-hourly data with a
        daily cycle, see :func:`infer_season`).
    horizon : int, default=1
        How many steps ahead each forecast is made.

    Returns
    -------
    forecast : ndarray of float64, of the same shape as ``series``
        ``forecast[t]``; NaN for the first ``season · ceil(horizon / season)`` rows,
        whose forecast would reach before the start of the series (all rows when the
        series is that short).

    See Also
    --------
    skill_score : Compares a model's forecasts with these (NaN rows left out).
    mean_absolute_scaled_error : Scales errors by the one-step forecast's MAE.

    Notes
    -----
    These are the reference forecasts of Hyndman & Koehler (2006): the naive (random
    walk) forecast and its seasonal form. Cost: O(n_samples · n_outputs) time and one
    output array; no other memory.

    {hyndman_koehler_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import naive_forecast
    >>> naive_forecast([1.0, 2.0, 3.0, 4.0, 5.0])  # last value
    array([nan,  1.,  2.,  3.,  4.])
    >>> naive_forecast([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], season=2, horizon=3)  # lag 4
    array([nan, nan, nan, nan,  1.,  2.])
    """
    season = check_int(season, "season", minimum=1)
    horizon = check_int(horizon, "horizon", minimum=1)
    x = _as_float(series, "series")
    if x.ndim not in (1, 2):
        raise ValueError(f"series must be 1-D or 2-D, got shape {x.shape}.")
    if not np.all(np.isfinite(x)):
        raise ValueError("series contains NaN or infinity.")
    lag = _lag(season, horizon)
    forecast = np.full(x.shape, np.nan)
    if lag < x.shape[0]:
        forecast[lag:] = x[:-lag]
    return forecast


def _mase(y_true, e, season, y_train):
    """Per-output MASE, or ``(None, reason)`` when its scale is undefined or zero."""
    if y_train is None:
        ref, name = y_true, "y_true"
    else:
        ref, name = _as_float(y_train, "y_train"), "y_train"
        if ref.ndim != y_true.ndim or ref.shape[1:] != y_true.shape[1:]:
            raise ValueError(
                f"y_train has shape {ref.shape} but y_true has shape {y_true.shape}: "
                "they need the same number of outputs."
            )
        if not np.all(np.isfinite(ref)):
            raise ValueError("y_train contains NaN or infinity.")
    n = ref.shape[0]
    if n <= season:
        return None, (
            f"too few values: the MASE scale mean |y_t - y_(t-{season})| needs more "
            f"than season={season} values of {name}, got {n}"
        )
    with np.errstate(over="ignore", invalid="ignore"):
        scale = np.mean(np.abs(ref[season:] - ref[:-season]), axis=0)
    if not np.all(np.isfinite(scale)):
        raise ValueError(f"The MASE scale of {name} overflows float64.")
    if np.any(scale == 0):
        what = (
            "constant" if season == 1 else f"constant or repeats with period {season}"
        )
        return None, (
            f"the MASE scale mean |y_t - y_(t-{season})| of {name} is 0 (the series is "
            f"{what}), so MASE is undefined"
        )
    return np.mean(np.abs(e), axis=0) / scale, None


@_fill_doc
def mean_absolute_scaled_error(
    y_true, y_pred, *, season=1, y_train=None, multioutput="uniform_average"
):
    """Mean absolute scaled error (MASE): the MAE relative to a naive forecast's.

    ``MASE = mean_t |y_t − ŷ_t| / q`` with the scale
    ``q = mean_{t > season} |z_t − z_{t−season}|``, the in-sample MAE of the one-step
    seasonal-naive forecast on the series ``z`` = ``y_train`` if given, else ``y_true``.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Targets, in stream order.
    y_pred : array-like of the same shape
        Forecasts of ``y_true`` (e.g. prequential predictions).
    season : int, default=1
        Season length of the naive forecast of the scale (1: last value).
    y_train : array-like of shape (n_train,) or (n_train, n_outputs), default=None
        The in-sample series the scale is computed on (e.g. the training part of a
        train/test split). ``None`` computes it on ``y_true`` itself: in prequential
        evaluation each value is forecast before it is learned, so the stream is its
        own in-sample data.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        With several outputs: average the per-output values (each output has its own
        scale), or return them all.

    {loss_returns}
        MASE (lower is better); below 1 the forecasts have a smaller MAE than the
        in-sample one-step seasonal-naive forecast.

    Raises
    ------
    ValueError
        If the scale series has ``season`` values or fewer, or its scale is 0 (a
        constant series, or one repeating exactly with period ``season``), or for
        invalid input (as in :func:`res_mse`).

    See Also
    --------
    naive_forecast : The seasonal-naive forecast.
    mean_absolute_error : The numerator.

    Notes
    -----
    Hyndman & Koehler (2006) define the scale on the training data (their eq. for
    ``q_t``; seasonal form with period ``season``). Unlike relative errors, MASE is
    defined for zero targets and compares across series of different scales.
    Cost: O((n_samples + n_train) · n_outputs) time, temporaries of the inputs' size.

    {hyndman_koehler_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import mean_absolute_scaled_error
    >>> y = [1.0, 2.0, 3.0, 4.0, 5.0]  # scale: mean |y_t - y_(t-1)| = 1
    >>> mean_absolute_scaled_error(y, [1.5, 2.5, 3.5, 4.5, 5.5])
    0.5
    >>> mean_absolute_scaled_error(y, [1.5, 2.5, 3.5, 4.5, 5.5], y_train=[0.0, 2.0])
    0.25
    """
    e = _errors(y_true, y_pred)
    _check_multioutput(multioutput)
    season = check_int(season, "season", minimum=1)
    values, reason = _mase(_as_float(y_true, "y_true"), e, season, y_train)
    if values is None:
        raise ValueError(reason[0].upper() + reason[1:] + ".")
    return _reduce(values, multioutput)


_SKILL_METRICS = {"mse": np.square, "mae": np.abs}


def _skill(y_true, e, y_reference, metric):
    """``(skill, None)``, or ``(None, "no_rows" | "zero_reference")`` when undefined."""
    ref = _as_float(y_reference, "y_reference")
    if ref.shape != y_true.shape:
        raise ValueError(
            f"y_reference has shape {ref.shape} but y_true has shape {y_true.shape}."
        )
    if np.any(np.isinf(ref)):
        raise ValueError("y_reference contains infinity.")
    missing = np.isnan(ref)
    keep = ~(missing if missing.ndim == 1 else missing.any(axis=1))
    if not keep.any():
        return None, "no_rows"
    loss = _SKILL_METRICS[metric]
    with np.errstate(over="ignore", invalid="ignore"):
        model = float(np.mean(loss(e[keep])))
        reference = float(np.mean(loss(y_true[keep] - ref[keep])))
    if not (math.isfinite(model) and math.isfinite(reference)):
        raise ValueError(f"The {metric.upper()} overflows float64.")
    if reference == 0.0:
        return None, "zero_reference"
    return 1.0 - model / reference, None


@_fill_doc
def skill_score(y_true, y_pred, y_reference, *, metric="mse"):
    """Skill of forecasts relative to reference forecasts: ``1 − metric / metric_ref``.

    ``skill = 1 − metric(y_true, y_pred) / metric(y_true, y_reference)``, both terms over
    the rows where ``y_reference`` is not NaN.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Targets, in stream order (finite).
    y_pred : array-like of the same shape
        The model's forecasts (finite).
    y_reference : array-like of the same shape
        Reference forecasts, e.g. :func:`naive_forecast` of ``y_true``. Rows holding a
        NaN (such as the start of a naive forecast) are left out of BOTH terms, so the
        model and the reference are compared on the same rows.
    metric : {"mse", "mae"}, default="mse"
        Mean squared or mean absolute error (averaged over all outputs).

    Returns
    -------
    skill : float
        1 for perfect forecasts, 0 for forecasts as good as the reference, > 0 when the
        model beats the reference, < 0 when it does worse (unbounded below).

    Raises
    ------
    ValueError
        If no row remains (``y_reference`` NaN everywhere), the reference has zero error
        on the remaining rows (the skill is undefined), ``metric`` is unknown, or the
        input is invalid (NaN in ``y_true``/``y_pred``, infinity, mismatched shapes).

    See Also
    --------
    naive_forecast : The usual reference forecasts.
    forecast_scores : Skill against the last-value and seasonal-naive forecasts.

    Notes
    -----
    With ``metric="mse"`` this is the MSE skill score (``1 − MSE / MSE_ref``), the
    forecast-verification analogue of R²; Hyndman & Koehler (2006) discuss such
    relative measures. Cost: O(n_samples · n_outputs) time, temporaries of the input's
    size.

    {hyndman_koehler_references}

    Examples
    --------
    >>> from sklearn_orfit.metrics import naive_forecast, skill_score
    >>> y = [1.0, 2.0, 3.0, 4.0, 5.0]
    >>> y_ref = naive_forecast(y)  # [nan, 1, 2, 3, 4]: MSE 1 on rows 1..4
    >>> skill_score(y, [1.5, 2.5, 3.5, 4.5, 5.5], y_ref)  # MSE 0.25 on rows 1..4
    0.75
    """
    if not (isinstance(metric, str) and metric in _SKILL_METRICS):
        raise ValueError(f"metric must be 'mse' or 'mae', got {metric!r}.")
    e = _errors(y_true, y_pred)
    skill, reason = _skill(_as_float(y_true, "y_true"), e, y_reference, metric)
    if reason == "no_rows":
        raise ValueError(
            "No rows left: y_reference is NaN in every row (e.g. a naive forecast "
            "whose lag reaches before the start of a series this short)."
        )
    if reason == "zero_reference":
        raise ValueError(
            f"The reference forecast has zero {metric.upper()} on the rows compared: "
            "the skill score is undefined."
        )
    return skill


_DAY = 86400  # seconds


def infer_season(times):
    """Number of steps in the natural cycle of regularly spaced time stamps.

    The spacing is the median of the differences of consecutive time stamps (the lower
    median for an even count, so it is always an observed spacing). Then:

    * a spacing that divides a day (1 h, 30 min, 15 min, 1 s, ...): the steps per day
      (24, 48, 96, 86400, ...);
    * daily: 7 (a week);
    * weekly: 52 (a year);
    * monthly (28 to 31 days): 12 (a year);
    * anything else (e.g. 7 min, 2 days, quarterly): ``None``.

    Parameters
    ----------
    times : array-like of shape (n_samples,)
        Time stamps in time order: ``datetime64`` values or anything
        ``numpy.asarray(times, dtype="datetime64[s]")`` accepts (e.g. ISO 8601
        strings); they are read at one-second resolution.

    Returns
    -------
    season : int or None
        The season length (e.g. for :func:`naive_forecast`), or ``None`` when there is
        no natural cycle for the spacing, fewer than 3 time stamps, or the time stamps
        are not strictly increasing (at one-second resolution).

    Raises
    ------
    ValueError
        If ``times`` cannot be read as date-times, is not 1-D or contains NaT.

    Notes
    -----
    Only the median spacing is used, so a few gaps or clock changes do not change the
    answer; the calendar (e.g. a daily series that skips weekends) is not looked at.
    Cost: O(n log n) time (the median by sorting) and O(n) memory.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.metrics import infer_season
    >>> infer_season(["2024-01-01T00:00", "2024-01-01T00:30", "2024-01-01T01:00"])
    48
    >>> infer_season(np.arange("2024-01", "2024-07", dtype="datetime64[M]"))  # monthly
    12
    >>> print(infer_season(["2024-01-01", "2024-01-02"]))  # too few
    None
    """
    try:
        t = np.asarray(times, dtype="datetime64[s]")
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(
            f"times must be date-times (datetime64 values or ISO 8601 strings); got {exc}"
        ) from None
    if t.ndim != 1:
        raise ValueError(f"times must be 1-D, got shape {t.shape}.")
    if np.any(np.isnat(t)):
        raise ValueError("times contains NaT (a missing date-time).")
    if t.shape[0] < 3:
        return None
    steps = np.diff(t.astype(np.int64))
    if np.any(steps <= 0):
        return None
    step = int(np.sort(steps)[(steps.shape[0] - 1) // 2])
    if step < _DAY and _DAY % step == 0:
        return _DAY // step
    if step == _DAY:
        return 7
    if step == 7 * _DAY:
        return 52
    if 28 * _DAY <= step <= 31 * _DAY:
        return 12
    return None


def _format_skill(skill):
    text = f"{skill:.2f}"
    if skill != 0 and float(text) == 0:  # would read 0.00 (or -0.00)
        text = f"{skill:.1e}"
    return text


_UNDEFINED_SKILL = {
    "no_rows": "the series is too short for it",
    "zero_reference": "that forecast is exact on this series",
}
_VERBS = {
    "beat": "beats",
    "not": "does NOT beat",
    "undefined": "cannot be compared with",
}


def _clause(name, skill, reason):
    """``(verdict, "the <name> (<detail>)")`` for the summary sentence."""
    if skill is None:
        return "undefined", f"the {name} ({_UNDEFINED_SKILL[reason]})"
    verdict = "beat" if skill > 0 else "not"
    return verdict, f"the {name} (MSE skill {_format_skill(skill)})"


def _summary(last, last_reason, season, seasonal, seasonal_reason):
    """One sentence: does the model beat the last-value and seasonal-naive forecasts?"""
    v1, c1 = _clause("last-value forecast", last, last_reason)
    if season is None:
        return (
            f"The model {_VERBS[v1]} {c1}; there is no seasonal-naive comparison (no "
            "season given)."
        )
    name = f"seasonal-naive forecast with season {season}"
    v2, c2 = _clause(name, seasonal, seasonal_reason)
    if v1 == v2:
        joiner = "and" if v1 == "beat" else "or"
        return f"The model {_VERBS[v1]} {c1} {joiner} {c2}."
    return f"The model {_VERBS[v1]} {c1} but {_VERBS[v2]} {c2}."


@_fill_doc
def forecast_scores(y_true, y_pred, *, season=None, horizon=1, y_train=None):
    """Forecast accuracy of one target, against naive forecasts, with a verdict.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,)
        Targets, in stream order; at least two.
    y_pred : array-like of shape (n_samples,)
        The model's forecasts of ``y_true``, each made ``horizon`` steps ahead (e.g.
        prequential predictions: ``horizon=1``).
    season : int or None, default=None
        Season length (e.g. from :func:`infer_season`). ``None``: no seasonal-naive
        comparison, and MASE uses ``season=1``.
    horizon : int, default=1
        Forecast horizon of ``y_pred``; the naive forecasts are made as far ahead.
    y_train : array-like of shape (n_train,), default=None
        In-sample series for the MASE scale (see
        :func:`mean_absolute_scaled_error`); ``None``: ``y_true`` itself.

    Returns
    -------
    scores : dict
        * ``"rmse"``, ``"mae"``, ``"res_mse"``, ``"res_var"`` : float —
          :func:`root_mean_squared_error`, :func:`mean_absolute_error`,
          :func:`res_mse`, :func:`res_var`;
        * ``"mase"`` : float or None — :func:`mean_absolute_scaled_error` with
          ``season`` (1 if ``None``); ``None`` where it is undefined (scale 0, or too
          few values);
        * ``"skill_last_value"`` : float or None — :func:`skill_score` (MSE) against
          ``naive_forecast(y_true, season=1, horizon=horizon)``;
        * ``"skill_seasonal_naive"`` : float or None — the same against
          ``naive_forecast(y_true, season=season, horizon=horizon)``; ``None`` when
          ``season`` is ``None``;
        * ``"beats_last_value"``, ``"beats_seasonal_naive"`` : bool or None — whether
          the skill is > 0; ``None`` where the skill is ``None``;
        * ``"summary"`` : str — one English sentence, e.g. "The model beats the
          last-value forecast (MSE skill 0.42) and the seasonal-naive forecast with
          season 48 (MSE skill 0.31)." or "The model does NOT beat the last-value
          forecast (MSE skill -0.08) but beats ..."; with ``season=None`` it ends
          "there is no seasonal-naive comparison (no season given)". Skills are
          printed with two decimals (in scientific notation when that would read
          0.00).

        A skill is ``None`` (and the sentence says the model "cannot be compared with"
        that forecast) when the naive forecast has no row (series shorter than its
        lag) or has zero error (e.g. a series repeating exactly with period
        ``season``).

    Raises
    ------
    ValueError
        For 2-D input (score each output separately), fewer than two samples, or any
        input :func:`res_mse` or :func:`mean_absolute_scaled_error` rejects.

    See Also
    --------
    infer_season : A season length from time stamps.

    Notes
    -----
    Each skill score compares the model and the naive forecast on the rows where the
    naive forecast exists (all but the first ``season · ceil(horizon / season)``).
    ResMSE and ResVAR are those of the ABO paper (§3.3); MASE and the naive references
    follow Hyndman & Koehler (2006). Cost: O(n_samples + n_train) time and a few
    temporaries of the input's size.

    {both_references}

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn_orfit.metrics import forecast_scores
    >>> t = np.arange(96)
    >>> y = np.sin(2 * np.pi * t / 24) + 0.01 * t  # daily cycle of hourly data
    >>> scores = forecast_scores(y, y + 0.3 * np.cos(t), season=24)
    >>> round(scores["rmse"], 3), round(scores["mase"], 3)
    (0.213, 0.802)
    >>> scores["beats_last_value"], scores["beats_seasonal_naive"]
    (False, True)
    >>> print(scores["summary"])  # doctest: +NORMALIZE_WHITESPACE
    The model does NOT beat the last-value forecast (MSE skill -0.33) but beats the
    seasonal-naive forecast with season 24 (MSE skill 0.22).
    """
    season = check_int(season, "season", minimum=1, allow_none=True)
    horizon = check_int(horizon, "horizon", minimum=1)
    e = _errors(y_true, y_pred)
    if e.ndim != 1:
        raise ValueError(
            f"forecast_scores takes 1-D y_true and y_pred (one target), got shape "
            f"{e.shape}; score each output separately."
        )
    if e.shape[0] < 2:
        raise ValueError("forecast_scores needs at least two samples.")
    y = _as_float(y_true, "y_true")
    mase, _ = _mase(y, e, 1 if season is None else season, y_train)
    last, last_reason = _skill(y, e, naive_forecast(y, horizon=horizon), "mse")
    seasonal = seasonal_reason = None
    if season is not None:
        reference = naive_forecast(y, season=season, horizon=horizon)
        seasonal, seasonal_reason = _skill(y, e, reference, "mse")
    mse = float(np.mean(e * e))
    return {
        "rmse": math.sqrt(mse),
        "mae": float(np.mean(np.abs(e))),
        "mase": None if mase is None else float(mase),
        "res_mse": mse,
        "res_var": float(np.var(e * e, ddof=1)),
        "skill_last_value": last,
        "skill_seasonal_naive": seasonal,
        "beats_last_value": None if last is None else bool(last > 0),
        "beats_seasonal_naive": None if seasonal is None else bool(seasonal > 0),
        "summary": _summary(last, last_reason, season, seasonal, seasonal_reason),
    }
