"""The networks (an encoder–decoder transformer and a GRU), the contract they follow and the decoding they share."""

from project.model.cache import KVCache
from project.model.gru import GRUForecaster
from project.model.network import ForecastNetwork
from project.model.transformer import ForecastTransformer

__all__ = ["ForecastNetwork", "ForecastTransformer", "GRUForecaster", "KVCache"]
