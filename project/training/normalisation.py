"""How each window is scaled before the network sees it: a location and a scale per window and channel, from the
look-back alone, subtracted and divided before encoding and undone on the forecast (``model.normalisation``)."""

from __future__ import annotations

from typing import Any

from torch import Tensor


class Normalisation:
    """A location and a scale per window and channel, computed from the context (the look-back) only, so that nothing
    of the future leaks into the inputs. Given by class_path; yours subclasses it and implements ``statistics``.

    Attributes:
        init_args: The constructor's arguments, recorded in checkpoints so that they can rebuild it.
    """

    @property
    def init_args(self) -> dict[str, Any]:
        return {}

    def statistics(self, context: Tensor) -> tuple[Tensor, Tensor]:
        """The location and the scale (N, 1, F) of a context (N, L, F); the scale must be positive."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.init_args == self.init_args

    def __hash__(self) -> int:
        return hash(type(self))


def look_back_spread(context: Tensor, eps: float = 1e-5) -> Tensor:
    """The look-back's per-channel standard deviation (N, 1, F), kept above zero on a flat window by ``eps``."""
    return (context.var(dim=1, keepdim=True, unbiased=False) + eps).sqrt()


class InstanceNorm(Normalisation):
    """The look-back's mean and standard deviation (RevIN without its affine part): the window's level over the
    whole look-back."""

    def statistics(self, context: Tensor) -> tuple[Tensor, Tensor]:
        return context.mean(dim=1, keepdim=True), look_back_spread(context)


class LastValueNorm(Normalisation):
    """The look-back's last value and its standard deviation: the level the forecast starts from, as NLinear
    subtracts it. A level that has just moved (a break, a trend) is followed at once, where the look-back's mean
    lags it by half the look-back."""

    def statistics(self, context: Tensor) -> tuple[Tensor, Tensor]:
        return context[:, -1:], look_back_spread(context)
