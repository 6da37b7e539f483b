"""The network: a pure-PyTorch encoder–decoder transformer and its key/value cache."""

from project.model.cache import KVCache
from project.model.transformer import ForecastTransformer

__all__ = ["ForecastTransformer", "KVCache"]
