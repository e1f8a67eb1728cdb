"""The model file of ``sklearn-orfit forecast --save-model``: a forecaster object.

``joblib.load(path)`` returns a :class:`SavedForecast`, which holds one fitted
:class:`~sklearn_orfit.forecasting.StreamForecaster` per series (``forecasters``) and
forecasts from Python as the command line did. The command line reads the same file
(``--load-model``) through :func:`read_model_file`, which checks the file's formats
before anything but a plain header is unpickled.
"""

import pickle

import numpy as np

from .._streaming._base import STATE_FORMAT

__all__ = ["MODEL_FILE_FORMAT", "SavedForecast"]

#: The layout of a model file this version writes and reads (1 and 2: a header dict
#: followed by the command line's stream states, no forecaster object; 3: the
#: forecasters beside a separate backtest model).
MODEL_FILE_FORMAT = 4


def _rebuild(header, payload):
    """Unpickling a :class:`SavedForecast`: the header (builtins only), then its state."""
    obj = SavedForecast.__new__(SavedForecast)
    obj.__dict__.update(pickle.loads(payload))
    obj.format_version = header.get("format_version")
    obj.state_format = header.get("state_format")
    obj.package_version = header.get("package_version")
    return obj


class SavedForecast:
    """What ``sklearn-orfit forecast --save-model`` writes: one forecaster per series.

    Load it with :func:`joblib.load` and forecast past the end of the saved stream::

        import joblib
        model = joblib.load("model.joblib")
        model.predict()                 # the next --horizon values (one series)
        model.predict_interval()        # their intervals, (horizon, levels, 2)
        model.forecasters["a"].update(new_values)   # continue the stream of series "a"

    Parameters
    ----------
    forecasters : dict of str to StreamForecaster
        The fitted forecaster of each series, in the order of ``series``.
    settings : dict
        The command line's settings of the stream (model, lags, horizon, ...).
    metadata : dict
        What else the command line needs to continue the stream (time stamps, exogenous
        column names, season, ...).

    Attributes
    ----------
    format_version : int
        The model file format (:data:`MODEL_FILE_FORMAT` when written by this version).
    state_format : int
        The estimators' state format (``sklearn_orfit._streaming._base.STATE_FORMAT``).
    package_version : str
        The version of sklearn-orfit that wrote the file.
    series : list of str
        The series' names.
    last_time : str or None
        The last time stamp the stream learned (ISO 8601), None without time stamps.
    time_step : str or None
        The time step inferred from the time stamps (a ``numpy.timedelta64`` spelled as
        text, e.g. ``"1800 seconds"``), None without time stamps.
    exog, exog_future : list of str
        The past-only and the known-future exogenous columns, in the order of the
        forecasters' ``X`` (past-only first).

    Notes
    -----
    The file is a pickle: loading it runs code stored in it, as unpickling does; load
    only files you saved yourself or trust. The command line first reads the file's plain
    header (format numbers, versions) and refuses another format before unpickling the
    rest. Each forecaster learned its whole series: its forecasts were the run's backtest
    and it made the run's future forecast. Beside it, privately, the file keeps the same
    forecaster as it was at the last multiple of ``--chunk-size`` and the values after
    it, from which ``--load-model`` continues the stream exactly.
    """

    def __init__(self, forecasters, *, settings, metadata, streams=None):
        from .. import __version__

        self.forecasters = dict(forecasters)
        self.series = list(self.forecasters)
        self.settings = dict(settings)
        self.last_time = metadata.get("last_time")
        self.time_step = metadata.get("time_step")
        self.exog = list(metadata.get("exog", []))
        self.exog_future = list(metadata.get("exog_future", []))
        self.metadata = dict(metadata)
        self.format_version = MODEL_FILE_FORMAT
        self.state_format = STATE_FORMAT
        self.package_version = __version__
        self._streams = streams

    def _one(self, series):
        if series is None:
            if len(self.series) != 1:
                raise ValueError(f"the file holds {len(self.series)} series "
                                 f"{self.series}: name one (series=...).")
            series = self.series[0]
        if series not in self.forecasters:
            raise ValueError(f"no series {series!r}; the file holds {self.series}.")
        return self.forecasters[series]

    def predict(self, horizon=None, X_future=None, *, series=None):
        """The next ``horizon`` values of a series (see
        :meth:`StreamForecaster.predict <sklearn_orfit.forecasting.StreamForecaster.predict>`).

        Parameters
        ----------
        horizon : int or None, default=None
            Steps ahead (``None``: the saved ``--horizon``).
        X_future : array-like of shape (horizon, n_future), default=None
            The known-future columns (``exog_future``) at the next times.
        series : str or None, default=None
            The series (``None``: the only one).

        Returns
        -------
        y_pred : ndarray of shape (horizon,)
            The forecasts.
        """
        return self._one(series).predict(horizon, X_future)

    def predict_interval(self, horizon=None, coverage=None, X_future=None, *,
                         series=None):
        """Intervals of the next ``horizon`` values (see
        :meth:`StreamForecaster.predict_interval
        <sklearn_orfit.forecasting.StreamForecaster.predict_interval>`).

        Parameters
        ----------
        horizon : int or None, default=None
            Steps ahead.
        coverage : tuple of float or None, default=None
            Levels in ``(0, 1)`` (``None``: the saved ``--level`` values).
        X_future : array-like, default=None
            As in :meth:`predict`.
        series : str or None, default=None
            The series (``None``: the only one).

        Returns
        -------
        intervals : ndarray of shape (horizon, n_levels, 2)
            Lower and upper bounds.
        """
        return self._one(series).predict_interval(horizon, coverage, X_future)

    def future_times(self, horizon=None):
        """The time stamps of the next ``horizon`` values (None without time stamps).

        Parameters
        ----------
        horizon : int or None, default=None
            Steps ahead (``None``: the saved ``--horizon``).

        Returns
        -------
        times : ndarray of datetime64 or None
            ``last_time + k · time_step`` for ``k = 1 .. horizon``.
        """
        if self.last_time is None or self.time_step is None:
            return None
        h = self.settings["horizon"] if horizon is None else int(horizon)
        last = np.datetime64(self.last_time)
        value, unit = self.time_step.split()
        step = np.timedelta64(int(value), {"seconds": "s"}.get(unit, unit))
        return last + step * np.arange(1, h + 1)

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items()
                 if k not in ("format_version", "state_format", "package_version")}
        header = {"format": "sklearn-orfit forecast model",
                  "format_version": self.format_version, "state_format": self.state_format,
                  "package_version": self.package_version}
        return (_rebuild, (header, pickle.dumps(state, protocol=4)))

    def __repr__(self):
        return (f"SavedForecast(series={self.series}, model={self.settings.get('model')!r}, "
                f"horizon={self.settings.get('horizon')}, last_time={self.last_time!r})")


class _Header:
    """What :class:`_HeaderReader` found: the header and the state's bytes."""

    def __init__(self, header, payload):
        self.header, self.payload = header, payload


class _HeaderReader(pickle.Unpickler):
    """Reads a model file up to its state: only :func:`_rebuild` may be named, and it is
    replaced by :class:`_Header`, so nothing the file holds is run."""

    seen_rebuild = False

    def find_class(self, module, name):
        if module == __name__ and name == "_rebuild":
            self.seen_rebuild = True
            return _Header
        raise pickle.UnpicklingError(f"the file refers to {module}.{name}")


def read_header(fh):
    """``(header, payload, damaged)`` of an open model file; ``header`` is None when the
    file is not one (``damaged``: it started as one)."""
    reader = _HeaderReader(fh)
    try:
        found = reader.load()
    except Exception:  # any byte string: text, another pickle, a truncated file
        return None, None, reader.seen_rebuild
    if isinstance(found, dict):  # formats 1 and 2: a plain header dict came first
        return found, None, False
    if not isinstance(found, _Header) or not isinstance(found.header, dict):
        return None, None, False
    return found.header, found.payload, False


def load_payload(header, payload):
    """The :class:`SavedForecast` of a header whose formats were checked."""
    return _rebuild(header, payload)

