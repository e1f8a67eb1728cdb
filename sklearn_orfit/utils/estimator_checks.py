"""scikit-learn's estimator checks and the estimators of this package.

Some of scikit-learn's checks (:func:`~sklearn.utils.estimator_checks.check_estimator`,
:func:`~sklearn.utils.estimator_checks.parametrize_with_checks`) assume what a model of
a stream does not do: that integer sample weights equal repeated rows, or that a
transform works row by row. :func:`expected_failed_checks` gives, for an estimator of the
package, the checks it is expected to fail and why, in the form scikit-learn's
``expected_failed_checks`` parameters take.
"""

__all__ = ["expected_failed_checks"]


def expected_failed_checks(estimator):
    """The scikit-learn estimator checks ``estimator`` is expected to fail, with why.

    Parameters
    ----------
    estimator : estimator instance
        An estimator of this package (or any estimator: one that declares nothing has no
        expected failure).

    Returns
    -------
    expected_failed_checks : dict of str to str
        Check name (as in :func:`~sklearn.utils.estimator_checks.check_estimator`) to
        the reason the estimator fails it. Empty when every check is expected to pass.
        A new dict: changing it changes nothing in the estimator.

    See Also
    --------
    sklearn.utils.estimator_checks.parametrize_with_checks : Takes this function as its
        ``expected_failed_checks``.
    sklearn.utils.estimator_checks.check_estimator : Takes its result for one estimator.

    Notes
    -----
    The answer depends on the estimator's parameters, not only on its class: for
    example integer sample weights equal repeated rows for
    :class:`~sklearn_orfit.EWRLSRegressor` without forgetting, not with it. Each
    estimator declares its own expected failures (a private ``_expected_failed_checks``
    method returning the dict); composites (such as
    :class:`~sklearn_orfit.FeaturePartitionEnsemble`) declare those of the model they
    are built from. The failures are those of the estimator's mathematics (a window, a
    forgetting factor, a transform of a sequence), not errors; each is listed in the
    estimator's documentation and tested in the package's test suite.

    Examples
    --------
    >>> from sklearn_orfit import EWRLSRegressor, LagTransformer, QREWRLSRegressor
    >>> from sklearn_orfit.utils.estimator_checks import expected_failed_checks
    >>> sorted(expected_failed_checks(QREWRLSRegressor()))
    ['check_sample_weight_equivalence_on_dense_data']
    >>> expected_failed_checks(EWRLSRegressor())  # no forgetting: weights are repeats
    {}
    >>> expected_failed_checks(EWRLSRegressor(forgetting_factor=0.9)) != {}
    True
    >>> for name in sorted(expected_failed_checks(LagTransformer())):  # lags of a sequence
    ...     print(name)
    check_methods_sample_order_invariance
    check_methods_subset_invariance
    check_transformer_data_not_an_array
    check_transformer_general

    In a test module, scikit-learn's checks on the package's estimators, each expected
    failure marked ``xfail`` with its reason:

    >>> from sklearn.utils.estimator_checks import parametrize_with_checks
    >>> @parametrize_with_checks(
    ...     [QREWRLSRegressor(), LagTransformer(n_lags=3)],
    ...     expected_failed_checks=expected_failed_checks,
    ... )
    ... def test_sklearn_compatible(estimator, check):
    ...     check(estimator)

    Or for one estimator:

    >>> from sklearn.utils.estimator_checks import check_estimator
    >>> lags = LagTransformer(n_lags=2)
    >>> results = check_estimator(
    ...     lags, expected_failed_checks=expected_failed_checks(lags), on_fail=None,
    ...     on_skip=None,
    ... )
    >>> sorted({result["status"] for result in results} - {"skipped"})
    ['passed', 'xfail']
    """
    method = getattr(estimator, "_expected_failed_checks", None)
    return dict(method()) if callable(method) else {}
