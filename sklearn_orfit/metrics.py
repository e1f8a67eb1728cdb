"""Error measures of prequential (predict-then-update) evaluation (ABO paper §3.3).

All functions take the targets and the *prequential* predictions of a stream (for
example from :func:`sklearn_orfit.prequential_predict`) and reduce the errors
``e_t = y_t − ŷ_t``.
"""

import numpy as np
from sklearn.utils import check_consistent_length

__all__ = ["res_mse", "res_var", "residual_statistics"]


def _errors(y_true, y_pred):
    y_true = np.asarray(y_true, dtype=np.float64)
    y_pred = np.asarray(y_pred, dtype=np.float64)
    check_consistent_length(y_true, y_pred)
    if y_true.shape != y_pred.shape:
        raise ValueError(
            f"y_true has shape {y_true.shape} but y_pred has shape {y_pred.shape}."
        )
    if y_true.ndim not in (1, 2):
        raise ValueError(f"y_true must be 1-D or 2-D, got shape {y_true.shape}.")
    e = y_true - y_pred
    if not np.all(np.isfinite(e)):
        raise ValueError("y_true or y_pred contains NaN or infinity.")
    return e


def _reduce(values, multioutput):
    if values.ndim == 0 or multioutput == "raw_values":
        return values if values.ndim else float(values)
    if multioutput == "uniform_average":
        return float(np.mean(values))
    raise ValueError(
        f"multioutput must be 'uniform_average' or 'raw_values', got {multioutput!r}."
    )


def res_mse(y_true, y_pred, *, multioutput="uniform_average"):
    """Residual mean squared error: the mean of ``(y_t − ŷ_t)²`` over the stream.

    Parameters
    ----------
    y_true : array-like of shape (n_samples,) or (n_samples, n_outputs)
        Targets, in stream order.
    y_pred : array-like of the same shape
        Prequential predictions.
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        With several outputs: average the per-output values, or return them all.

    Returns
    -------
    loss : float or ndarray of shape (n_outputs,)
        ``mean_t e_t²`` (lower is better).

    See Also
    --------
    res_var : Sample variance of the squared errors.
    sklearn_orfit.model_selection.make_prequential_scorer : The scorer built on it.

    Notes
    -----
    For 1-D inputs this is :func:`sklearn.metrics.mean_squared_error`; the name follows
    the ABO paper (ResMSE), where the predictions are prequential.

    Examples
    --------
    >>> from sklearn_orfit.metrics import res_mse
    >>> res_mse([1.0, 2.0, 3.0], [1.0, 1.0, 1.0])
    1.6666666666666667
    """
    e = _errors(y_true, y_pred)
    return _reduce(np.mean(e * e, axis=0), multioutput)


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
    multioutput : {"uniform_average", "raw_values"}, default="uniform_average"
        With several outputs: average the per-output values, or return them all.

    Returns
    -------
    loss : float or ndarray of shape (n_outputs,)
        ``var(e_t², ddof=1)`` (lower is better).

    See Also
    --------
    res_mse : Mean of the squared errors.

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
