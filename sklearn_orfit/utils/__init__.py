"""Utilities for developers of and around the package.

* :mod:`sklearn_orfit.utils.estimator_checks` — the scikit-learn estimator checks the
  package's estimators are expected to fail, with the reasons.
* :mod:`sklearn_orfit.utils.benchmarking` — timing, the machine a figure ran on, results
  as JSON and figures, shared by the benchmark scripts and the command line.
"""
