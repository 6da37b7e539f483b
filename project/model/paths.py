"""The baseline path a network forecasts the residual over: a component given by class_path, as the distribution is.

A network with a baseline path computes the path's forecast of the whole horizon from the context it is given (the
normalised context: the data module's scaling, and the model's ``normalisation`` when there is one) when it encodes,
keeps it with the encoded state, and adds the path's values of the positions it decodes to the location of its
distribution's parameters (``Distribution.shift``). So the network's output is the full forecast, path plus residual,
and everything that reads it (the regimes, the cache, sampling, predict, checkpoints) is unchanged: free running
feeds back the full forecast. In a config::

    model:
      network:
        init_args:
          baseline_path: {class_path: project.model.LinearPath}  # or SeasonalNaivePath with init_args: {season: 24}

Yours is a subclass of ``BaselinePath`` in your own module with one method, ``forecast`` (and, when its ``__init__``
takes arguments, an ``init_args`` property that returns them: a checkpoint rebuilds it from them); its
``context_length`` and ``horizon`` arguments, when it declares them, are linked from the data by ``python -m
project.cli``.

Shapes: N series (times K sample paths), S context length, F target channels, H horizon.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor, nn

from project.domains import PositiveInt
from project.errors import InputError


class BaselinePath(nn.Module, ABC):
    """The contract of a baseline path: ``forecast`` maps a context to the path's values over the next steps.

    It may hold parameters (they train with the network's, through the loss of the full forecast). ``init_args``
    returns its constructor's arguments, so that a checkpoint can rebuild it: override it when ``__init__`` takes
    any.
    """

    @property
    def init_args(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def forecast(self, context: Tensor, steps: int) -> Tensor | None:
        """The path's values (N, steps, F) over the ``steps`` steps after ``context`` (N, S, F), in the units of the
        context the network is given; None for no path (nothing is added)."""

    def extra_repr(self) -> str:
        return ", ".join(f"{name}={value!r}" for name, value in self.init_args.items())


class NoPath(BaselinePath):
    """No baseline path: the network forecasts the values themselves (the default; bit for bit the network without
    one, nothing is computed or added)."""

    def forecast(self, context: Tensor, steps: int) -> None:
        return None


class LinearPath(BaselinePath):
    """A linear map of the look-back, NLinear-style (Zeng et al., "Are transformers effective for time series
    forecasting?", AAAI 2023): the last context value subtracted, a linear layer from the ``context_length`` steps to
    the ``horizon`` steps, the last value added back; one map shared by every channel.

    NLinear rather than DLinear: it is one layer, its subtraction of the last value is what lets a linear map follow
    a level that moved (the shift between look-back and horizon that DLinear's moving-average split of trend and
    remainder addresses with a kernel size to choose and two layers), and in Zeng et al. neither is better across
    their datasets. The weights start at zero, so the path starts as repeat-last, the naive forecast, and learns from
    there. Steps beyond ``horizon`` (a forecast longer than the trained one) repeat the path's last value.

    Args:
        context_length: Time steps of the look-back it maps (linked from the data by ``python -m project.cli``).
        horizon: Time steps it maps them to (linked from the data by ``python -m project.cli``).
    """

    def __init__(self, context_length: PositiveInt = 12, horizon: PositiveInt = 12) -> None:
        super().__init__()
        self.context_length, self.horizon = context_length, horizon
        self.weight = nn.Parameter(torch.zeros(horizon, context_length))
        self.bias = nn.Parameter(torch.zeros(horizon))

    @property
    def init_args(self) -> dict[str, Any]:
        return {"context_length": self.context_length, "horizon": self.horizon}

    def forecast(self, context: Tensor, steps: int) -> Tensor:
        if context.shape[1] != self.context_length:
            raise ValueError(
                f"LinearPath maps a context of {self.context_length} steps; got {context.shape[1]} (its context_length "
                "is the data's)"
            )
        last = context[:, -1:]  # (N, 1, F)
        values = self.weight @ (context - last) + self.bias.unsqueeze(-1) + last  # (N, H, F)
        if steps <= self.horizon:
            return values[:, :steps]
        return torch.cat([values, values[:, -1:].expand(-1, steps - self.horizon, -1)], dim=1)


class SeasonalNaivePath(BaselinePath):
    """Seasonal naive (M4's sNaive), without parameters: the last ``season`` steps of the context, repeated.

    Args:
        season: Time steps of the data's season (24 for hourly data with a daily cycle); at most the context length.
        context_length: Time steps of the look-back (linked from the data by ``python -m project.cli``), which must
            hold a whole season.
    """

    def __init__(self, season: PositiveInt = 1, context_length: PositiveInt | None = None) -> None:
        super().__init__()
        if context_length is not None and season > context_length:
            raise InputError(
                f"SeasonalNaivePath: season={season} must be at most context_length={context_length} (the path repeats "
                "the context's last season)"
            )
        self.season, self.context_length = season, context_length

    @property
    def init_args(self) -> dict[str, Any]:
        return {"season": self.season, "context_length": self.context_length}

    def forecast(self, context: Tensor, steps: int) -> Tensor:
        if context.shape[1] < self.season:
            raise InputError(
                f"SeasonalNaivePath: season={self.season} must be at most the context's {context.shape[1]} steps (the "
                "path repeats the context's last season)"
            )
        return context[:, -self.season :].repeat(1, math.ceil(steps / self.season), 1)[:, :steps]


def check_baseline_path(path: object, owner: str) -> None:
    """Refuse in one line a baseline path that is not a ``BaselinePath``."""
    if not isinstance(path, BaselinePath):
        raise InputError(f"{owner}'s baseline_path is a {type(path).__name__}, not a project.model.paths.BaselinePath")
