"""sklearn-orfit: streaming overparameterised linear models for scikit-learn.

* :class:`RandomFourierFeatures` and :class:`QREWRLSRegressor` — ABO: random Fourier
  features feeding a sliding-window, exponentially weighted, minimum-norm RLS.
* :func:`prequential_predict` — predict-then-update evaluation of any streaming estimator.
* :class:`StreamingPipeline`, :class:`PrequentialSplit`, :func:`make_prequential_scorer` —
  streaming chains and prequential model selection with stock scikit-learn tools.
"""

from ._aggregating import AggregatingRegressor, make_expert_grid
from ._ensemble import FeaturePartitionEnsemble
from ._ewrls import EWRLSRegressor
from ._forecaster import StreamForecaster
from ._orfit import ORFitRegressor
from ._orfit_mlp import ORFitMLPRegressor
from ._pipeline import StreamingPipeline, make_streaming_pipeline
from ._prequential import prequential_predict
from ._qr_ewrls import QREWRLSRegressor
from ._qrd_rls import QRDRLSRegressor
from ._rff import RandomFourierFeatures
from ._sw_krls import SlidingWindowKRLSRegressor
from ._target import StreamingTransformedTargetRegressor
from .model_selection import PrequentialSplit, make_prequential_scorer
from .preprocessing import LagTransformer, RecursiveStandardScaler

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
    "make_expert_grid",
    "make_prequential_scorer",
    "make_streaming_pipeline",
    "prequential_predict",
]
