"""sklearn-orfit: streaming overparameterised linear models for scikit-learn.

* :class:`RandomFourierFeatures` and :class:`QREWRLSRegressor` — ABO: random Fourier
  features feeding a sliding-window, exponentially weighted, minimum-norm RLS.
* :func:`prequential_predict` — predict-then-update evaluation of any streaming estimator.
"""

from ._prequential import prequential_predict
from ._qr_ewrls import QREWRLSRegressor
from ._rff import RandomFourierFeatures

__version__ = "0.1.0"

__all__ = [
    "QREWRLSRegressor",
    "RandomFourierFeatures",
    "prequential_predict",
]
