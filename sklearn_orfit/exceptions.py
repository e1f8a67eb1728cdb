"""The warnings issued by sklearn-orfit.

Filter or catch them by class, as scikit-learn's own (:mod:`sklearn.exceptions`)::

    import warnings
    from sklearn_orfit.exceptions import SpannedBatchWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SpannedBatchWarning)
        ...
"""

__all__ = ["SpannedBatchWarning"]


class SpannedBatchWarning(UserWarning):
    """A batch lies (partly) in the span of the memory and could not be fitted.

    Issued by :class:`~sklearn_orfit.ORFitRegressor` and
    :class:`~sklearn_orfit.ORFitMLPRegressor` when fitting the new rows would require
    changing predictions on the remembered directions (rows repeated with a different
    label, or more rows than features). The step then is the pseudo-inverse
    (least-squares) step: it keeps every prediction on the memory's span and leaves the
    rest of the batch's residual in place (user guide: :ref:`orfit-memory`). Turned into
    an error (``warnings.simplefilter("error", SpannedBatchWarning)``), it leaves the
    estimator as it was before the call.

    Examples
    --------
    >>> import warnings
    >>> import numpy as np
    >>> from sklearn_orfit import ORFitRegressor
    >>> from sklearn_orfit.exceptions import SpannedBatchWarning
    >>> X = np.ones((2, 3))
    >>> with warnings.catch_warnings(record=True) as caught:
    ...     warnings.simplefilter("always", SpannedBatchWarning)
    ...     _ = ORFitRegressor().fit(X, [0.0, 1.0])  # the same row, two labels
    >>> [w.category.__name__ for w in caught]
    ['SpannedBatchWarning']
    """
