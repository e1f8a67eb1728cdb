"""The streaming base: the update template every estimator shares, input validation
and prequential evaluation."""
