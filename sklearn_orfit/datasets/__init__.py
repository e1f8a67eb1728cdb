"""Data sets: the ABO synthetic series and a lag builder."""

from ._synthetic import make_abo_series, make_lagged

__all__ = ["make_abo_series", "make_lagged"]
