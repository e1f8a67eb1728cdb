"""The ABO paper's baselines: sliding-window kernel RLS, QRD-RLS and covariance-form
exponentially weighted RLS."""

from ._ewrls import EWRLSRegressor
from ._qrd_rls import QRDRLSRegressor
from ._sw_krls import SlidingWindowKRLSRegressor

__all__ = ["EWRLSRegressor", "QRDRLSRegressor", "SlidingWindowKRLSRegressor"]
