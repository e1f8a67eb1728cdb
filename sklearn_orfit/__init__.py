"""sklearn-orfit: streaming overparameterised linear models for scikit-learn.

* :class:`RandomFourierFeatures` and :class:`QREWRLSRegressor` — ABO: random Fourier
  features feeding a sliding-window, exponentially weighted, minimum-norm RLS.
* :func:`prequential_predict` — predict-then-update evaluation of any streaming estimator.
* :class:`StreamingPipeline`, :class:`PrequentialSplit`, :func:`make_prequential_scorer` —
  streaming chains and prequential model selection with stock scikit-learn tools.

The subpackages follow the papers: :mod:`sklearn_orfit.abo` (the random features, the
estimator, its window and solver routes, the shared kernels), :mod:`sklearn_orfit.orfit`
(the memory, the linear model and the MLP), :mod:`sklearn_orfit.baselines` (the ABO
paper's baselines), :mod:`sklearn_orfit.compose` (pipeline, ensemble, target transformer,
aggregation), ``sklearn_orfit._streaming`` (the base every estimator shares: the update
template, validation, prequential evaluation) and ``sklearn_orfit.cli`` (the command
line).
"""

from ._forecaster import StreamForecaster
from .abo import QREWRLSRegressor, RandomFourierFeatures
from .baselines import EWRLSRegressor, QRDRLSRegressor, SlidingWindowKRLSRegressor
from .compose import (
    AggregatingRegressor,
    FeaturePartitionEnsemble,
    StreamingPipeline,
    StreamingTransformedTargetRegressor,
    aggregate_expert_predictions,
    make_expert_grid,
    make_streaming_pipeline,
)
from .model_selection import PrequentialSplit, make_prequential_scorer
from .orfit import ORFitMLPRegressor, ORFitRegressor
from .preprocessing import LagTransformer, RecursiveStandardScaler
from ._streaming._prequential import prequential_predict

__version__ = "0.1.0"

__all__ = [
    "AggregatingRegressor",
    "EWRLSRegressor",
    "FeaturePartitionEnsemble",
    "LagTransformer",
    "ORFitMLPRegressor",
    "ORFitRegressor",
    "PrequentialSplit",
    "QRDRLSRegressor",
    "QREWRLSRegressor",
    "RandomFourierFeatures",
    "RecursiveStandardScaler",
    "SlidingWindowKRLSRegressor",
    "StreamForecaster",
    "StreamingPipeline",
    "StreamingTransformedTargetRegressor",
    "aggregate_expert_predictions",
    "make_expert_grid",
    "make_prequential_scorer",
    "make_streaming_pipeline",
    "prequential_predict",
]
