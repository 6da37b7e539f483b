"""The networks (an encoder–decoder transformer and a GRU), the contract they follow, the distributions their heads
predict, the baseline paths they forecast the residual over and the decoding they share."""

from project.model.cache import KVCache
from project.model.distributions import Distribution, Normal, PointForecast, Quantiles, StudentT
from project.model.gru import GRUForecaster
from project.model.network import ForecastNetwork, InputSizes
from project.model.paths import BaselinePath, LinearPath, NoPath, SeasonalNaivePath
from project.model.transformer import ForecastTransformer, auto_patch_length, resolved_patch_length

__all__ = [
    "BaselinePath",
    "Distribution",
    "ForecastNetwork",
    "ForecastTransformer",
    "GRUForecaster",
    "InputSizes",
    "KVCache",
    "LinearPath",
    "NoPath",
    "Normal",
    "PointForecast",
    "Quantiles",
    "SeasonalNaivePath",
    "StudentT",
    "auto_patch_length",
    "resolved_patch_length",
]
