"""The networks (an encoder–decoder transformer and a GRU), the contract they follow, the distributions their heads
predict and the decoding they share."""

from project.model.cache import KVCache
from project.model.distributions import Distribution, Normal, PointForecast, Quantiles, StudentT
from project.model.gru import GRUForecaster
from project.model.network import ForecastNetwork, InputSizes
from project.model.transformer import ForecastTransformer, auto_patch_length, resolved_patch_length

__all__ = [
    "Distribution",
    "ForecastNetwork",
    "ForecastTransformer",
    "GRUForecaster",
    "InputSizes",
    "KVCache",
    "Normal",
    "PointForecast",
    "Quantiles",
    "StudentT",
    "auto_patch_length",
    "resolved_patch_length",
]
