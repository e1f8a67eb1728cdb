"""Streaming composites: pipelines, feature-partition ensembles, a target transformer
and the aggregation of experts."""

from ._aggregating import AggregatingRegressor, aggregate_expert_predictions, make_expert_grid
from ._ensemble import FeaturePartitionEnsemble
from ._pipeline import StreamingPipeline, make_streaming_pipeline
from ._target import StreamingTransformedTargetRegressor

__all__ = [
    "AggregatingRegressor",
    "FeaturePartitionEnsemble",
    "StreamingPipeline",
    "StreamingTransformedTargetRegressor",
    "aggregate_expert_predictions",
    "make_expert_grid",
    "make_streaming_pipeline",
]
