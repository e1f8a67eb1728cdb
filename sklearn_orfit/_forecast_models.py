"""The streaming models of the forecasting chain, by name.

:func:`make_forecast_model` builds one of :data:`MODELS` (ABO, ORFit, the feature-partition
ensemble, the ABO paper's baselines, BOA aggregation) with the settings the
``sklearn-orfit forecast`` command and :func:`~sklearn_orfit.forecasting.tune_forecast`
take; the rows it learns are those of a :class:`~sklearn_orfit.StreamForecaster`, behind
a running standardisation (:func:`sklearn_orfit.forecasting._forecaster_regressor`).
"""

from .abo._qr_ewrls import QREWRLSRegressor
from .abo._rff import RandomFourierFeatures
from .baselines._ewrls import EWRLSRegressor
from .baselines._qrd_rls import QRDRLSRegressor
from .baselines._sw_krls import SlidingWindowKRLSRegressor
from .compose._pipeline import make_streaming_pipeline
from .orfit._orfit import ORFitRegressor

__all__ = ["DEFAULT_ALPHA", "DEFAULT_EXPERTS", "MODELS", "make_forecast_model"]

MODELS = ("abo", "orfit", "ensemble", "sw-krls", "qrd-rls", "ewrls", "aggregate")
# the expert grid of model "aggregate" when none is given (make_expert_grid's
# parameters): chosen by measurement on the bundled series (README, "The command line")
DEFAULT_EXPERTS = {"abo_windows": (50, 200), "sigmas": (0.5, 1.0), "n_components": (1024,),
                   "krls_windows": (50, 200)}
#: the ridge of each model with one when ``alpha=None`` (make_forecast_model): none for
#: ABO (the minimum-norm solution), the baselines' own default otherwise
DEFAULT_ALPHA = {"abo": 0.0, "ensemble": 0.0, "sw-krls": 1e-2, "qrd-rls": 1e-2}


def make_forecast_model(
    name,
    *,
    n_components=4096,
    sigma=0.5,
    window_size=50,
    forgetting_factor=1.0,
    alpha=None,
    length_scale=None,
    memory_size=32,
    memory_policy="pca",
    delta=1e-2,
    n_partitions=4,
    n_jobs=None,
    random_state=0,
    experts=None,
):
    """The streaming model ``name`` (one of :data:`MODELS`) on lagged inputs.

    ``aggregate``: :class:`~sklearn_orfit.AggregatingRegressor` (BOA) over the experts
    of :func:`~sklearn_orfit.make_expert_grid` with the parameters ``experts`` (a dict;
    ``None``: :data:`DEFAULT_EXPERTS`).

    ``abo``: random Fourier features → :class:`QREWRLSRegressor`; ``orfit`` and ``ewrls``:
    random Fourier features → :class:`ORFitRegressor` / :class:`EWRLSRegressor`;
    ``ensemble``: :class:`FeaturePartitionEnsemble` of ``abo`` sub-models;
    ``sw-krls`` and ``qrd-rls``: the baselines on the lags themselves. ``alpha=None``
    is :data:`DEFAULT_ALPHA` (0 for ``abo``: minimum norm; the baselines' ``1e-2``);
    ``length_scale=None`` is ``1/sigma`` (the kernel the features approximate).
    """
    if name not in MODELS:
        raise ValueError(f"model must be one of {MODELS}, got {name!r}.")

    def features():
        return RandomFourierFeatures(n_components, sigma=sigma, random_state=random_state)

    if alpha is None and name in DEFAULT_ALPHA:
        alpha = DEFAULT_ALPHA[name]
    if name == "aggregate":
        from .compose._aggregating import AggregatingRegressor, make_expert_grid

        grid = make_expert_grid(**{**(DEFAULT_EXPERTS if experts is None else experts),
                                   "random_state": random_state})
        if not grid:
            raise ValueError("the expert grid is empty: give ABO or SW-KRLS windows.")
        return AggregatingRegressor(grid, history_size=None, n_jobs=n_jobs)
    if name == "abo":
        reg = QREWRLSRegressor(
            window_size, forgetting_factor=forgetting_factor, alpha=alpha
        )
        return make_streaming_pipeline(features(), reg)
    if name == "orfit":
        reg = ORFitRegressor(memory_size=memory_size, memory_policy=memory_policy,
                             random_state=random_state)
        return make_streaming_pipeline(features(), reg)
    if name == "ewrls":
        reg = EWRLSRegressor(forgetting_factor=forgetting_factor, delta=delta)
        return make_streaming_pipeline(features(), reg)
    if name == "sw-krls":
        return SlidingWindowKRLSRegressor(
            window_size,
            length_scale=1.0 / sigma if length_scale is None else length_scale,
            alpha=alpha,
        )
    if name == "qrd-rls":
        return QRDRLSRegressor(window_size, alpha=alpha,
                               forgetting_factor=forgetting_factor)
    # ensemble (imported here: the class is optional in this layer)
    try:
        from .compose._ensemble import FeaturePartitionEnsemble
    except ImportError:
        raise ValueError(
            "model 'ensemble' needs sklearn_orfit.FeaturePartitionEnsemble, which this "
            "installation does not provide."
        ) from None
    reg = QREWRLSRegressor(window_size, forgetting_factor=forgetting_factor,
                           alpha=alpha)
    return FeaturePartitionEnsemble(features(), reg, n_partitions=n_partitions, n_jobs=n_jobs)

