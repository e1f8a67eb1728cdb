"""ORFit: one-pass learning by orthogonal updates with an incremental-PCA memory,
for linear models and multilayer perceptrons."""

from ._orfit import ORFitRegressor
from ._orfit_mlp import ORFitMLPRegressor

__all__ = ["ORFitMLPRegressor", "ORFitRegressor"]
