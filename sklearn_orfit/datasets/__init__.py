"""Data sets: the ABO synthetic series, a lag builder and bundled real series."""

from ._real import load_electricity_demand, load_exchange_rates
from ._synthetic import make_abo_series, make_lagged

__all__ = [
    "load_electricity_demand",
    "load_exchange_rates",
    "make_abo_series",
    "make_lagged",
]
