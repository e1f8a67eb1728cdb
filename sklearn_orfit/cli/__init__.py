"""The ``sklearn-orfit`` command line, and the model object its ``--save-model`` writes."""

from ._main import main
from ._model import SavedForecast

__all__ = ["SavedForecast", "main"]
