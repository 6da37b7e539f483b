"""Reference forecasts every result is compared with, measured on the same windows as the model."""

from __future__ import annotations

from torch import Tensor


def repeat_last(context: Tensor, horizon: int) -> Tensor:
    """(N, S, F) → (N, horizon, F): the last context value of each channel, repeated."""
    return context[:, -1:].expand(-1, horizon, -1)


def seasonal_naive(context: Tensor, horizon: int, season: int) -> Tensor:
    """(N, S, F) → (N, horizon, F): the last ``season`` context values, repeated over the horizon (M4's sNaive)."""
    return context[:, -season:].repeat(1, -(-horizon // season), 1)[:, :horizon]
