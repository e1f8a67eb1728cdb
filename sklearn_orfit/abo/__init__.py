"""ABO: random Fourier features feeding QR-EWRLS, the sliding-window, exponentially
weighted, minimum-norm recursive least squares, with its window solvers and kernels."""

from ._qr_ewrls import QREWRLSRegressor
from ._rff import RandomFourierFeatures

__all__ = ["QREWRLSRegressor", "RandomFourierFeatures"]
