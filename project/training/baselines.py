"""Reference forecasts every result is compared with, measured on the same windows as the model.

- ``repeat_last``: the last observed value, held for the whole horizon.
- ``seasonal_naive``: the last ``season`` values, repeated (M4's sNaive with season 24 for hourly data).
"""

from __future__ import annotations

from torch import Tensor


def repeat_last(context: Tensor, horizon: int) -> Tensor:
    """(N, S, F) → (N, horizon, F): the last context value of each channel, repeated."""
    return context[:, -1:].expand(-1, horizon, -1)


def seasonal_naive(context: Tensor, horizon: int, season: int) -> Tensor:
    """(N, S, F) → (N, horizon, F): the last ``season`` context values, repeated over the horizon."""
    last_season = context[:, -season:]
    repeats = -(-horizon // season)
    return last_season.repeat(1, repeats, 1)[:, :horizon]
