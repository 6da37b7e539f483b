"""What the decoder's head predicts for each target value, and how it is trained: a component given by class_path.

The network owns its distribution (it sizes the head), given in a config as
``model.network.init_args.distribution: {class_path: project.model.Quantiles, init_args: {levels: [0.1, 0.5, 0.9]}}``;
yours is a subclass of ``Distribution`` in your own module, with no edit here. Parameters have shape
(…, n_parameters); values have the shape of (…). Draws take an optional ``torch.Generator`` so that a rollout and a
hand-written loop with the same generator draw exactly the same paths.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Literal

import torch
from torch import Tensor
from torch.nn import functional as F

from project.domains import PositiveFloat, UnitLevels
from project.errors import InputError

PointLoss = Literal["mse", "mae", "huber"]
_MIN_SCALE = 1e-3  # in scaled units: keeps the likelihood finite when a window is nearly constant
DEFAULT_QUANTILES = (0.1, 0.5, 0.9)  # the 80% interval and the median
# The most head outputs per target value: far above a quantile head of 99 levels, far below what takes the memory.
MAX_PARAMETERS = 1024


def check_distribution(distribution: object, owner: str) -> None:
    """Refuse in one line, before any layer is allocated, a distribution that cannot size the head."""
    if not isinstance(distribution, Distribution):
        raise InputError(
            f"{owner}'s distribution is a {type(distribution).__name__}, not a project.model.distributions.Distribution"
        )
    count = distribution.n_parameters
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PARAMETERS:
        raise InputError(
            f"{type(distribution).__name__}.n_parameters must be an integer in 1..{MAX_PARAMETERS} (the head's outputs "
            f"per target value); got {count!r}"
        )
    index = distribution.point_index
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
        raise InputError(
            f"{type(distribution).__name__}.point_index must be an integer in 0..{count - 1} (one of its "
            f"n_parameters={count} parameters); got {index!r}"
        )


class Distribution(ABC):
    """The contract of an output head's distribution: valid parameters from the head's raw outputs (``constrain``),
    the training loss, the point forecast, draws (``sample``) and undoing a scaling (``affine``).

    Attributes:
        n_parameters: Head outputs per target value.
        probabilistic: Whether it predicts a distribution to draw sample paths from (``False``: a point forecast,
            and the ``Forecaster``'s sampling and interval options do not apply).
        reparameterised: Whether ``sample`` is differentiable in the parameters (needed by ``bptt`` with
            ``feedback: sample``).
        point_index: The parameter that is the point forecast (``point``'s default), which an exported decoder feeds
            back (``project.tools.export``).
        init_args: The constructor's arguments, recorded in checkpoints so that they can rebuild it.
    """

    n_parameters: int = 1
    probabilistic: bool = True
    reparameterised: bool = True
    point_index: int = 0

    @property
    def init_args(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def constrain(self, raw: Tensor) -> Tensor:
        """Raw head outputs (…, n_parameters) → valid parameters (positive scales, ordered quantiles)."""

    @abstractmethod
    def loss(self, parameters: Tensor, target: Tensor) -> Tensor:
        """The mean training loss of ``parameters`` (…, n_parameters) for ``target`` (…)."""

    def point(self, parameters: Tensor) -> Tensor:
        """The point forecast (…) of each value: what ``feedback: mean`` feeds back."""
        return parameters[..., self.point_index]

    @abstractmethod
    def sample(self, parameters: Tensor, generator: torch.Generator | None = None) -> Tensor:
        """One draw (…) per value, reproducible with ``generator``."""

    def affine(self, parameters: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
        """The parameters of ``value * scale + loc`` (``loc``, ``scale`` of shape (…)); this default suits
        parameters that are all values (a point, quantiles)."""
        return parameters * scale.unsqueeze(-1) + loc.unsqueeze(-1)

    def shift(self, parameters: Tensor, values: Tensor) -> Tensor:
        """The parameters of ``value + values`` (``values`` of shape (…)): the location moved, what a network's
        baseline path adds (``project.model.paths``). This default is ``affine`` with scale 1, exact for any
        distribution whose ``affine`` is right."""
        return self.affine(parameters, values, torch.ones_like(values))

    def point_of_paths(self, samples: Tensor) -> Tensor:
        """The point forecast of sample paths (N, K, T, F) → (N, T, F): their mean."""
        return samples.mean(dim=1)

    def __repr__(self) -> str:
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.init_args.items())
        return f"{type(self).__name__}({arguments})"


class PointForecast(Distribution):
    """No distribution: the head predicts the value itself, trained with ``loss``.

    Args:
        loss: ``mse``, ``mae`` or ``huber``.
        huber_delta: Threshold between the quadratic and linear parts of the Huber loss (``loss: huber`` only).
    """

    probabilistic = False

    def __init__(self, loss: PointLoss = "mse", huber_delta: PositiveFloat = 1.0) -> None:
        if loss != "huber" and huber_delta != 1.0:
            raise InputError(f"huber_delta applies to loss=huber; got loss={loss}")
        self.point_loss, self.huber_delta = loss, huber_delta

    @property
    def init_args(self) -> dict[str, Any]:
        return {"loss": self.point_loss, "huber_delta": self.huber_delta}

    def constrain(self, raw: Tensor) -> Tensor:
        return raw

    def loss(self, parameters: Tensor, target: Tensor) -> Tensor:
        value = parameters[..., 0]
        if self.point_loss == "mae":
            return F.l1_loss(value, target)
        if self.point_loss == "huber":
            return F.huber_loss(value, target, delta=self.huber_delta)
        return F.mse_loss(value, target)

    def sample(self, parameters: Tensor, generator: torch.Generator | None = None) -> Tensor:
        return parameters[..., 0]

    def shift(self, parameters: Tensor, values: Tensor) -> Tensor:
        return parameters + values.unsqueeze(-1)


class Normal(Distribution):
    """Gaussian with mean and standard deviation; trained by negative log-likelihood."""

    n_parameters = 2

    def constrain(self, raw: Tensor) -> Tensor:
        return torch.stack([raw[..., 0], F.softplus(raw[..., 1]) + _MIN_SCALE], dim=-1)

    def loss(self, parameters: Tensor, target: Tensor) -> Tensor:
        loc, scale = parameters.unbind(-1)
        return -torch.distributions.Normal(loc, scale, validate_args=False).log_prob(target).mean()

    def sample(self, parameters: Tensor, generator: torch.Generator | None = None) -> Tensor:
        # Not torch.distributions.Normal.rsample: it takes no generator, and paths must be reproducible.
        loc, scale = parameters.unbind(-1)
        noise = torch.randn(loc.shape, generator=generator, dtype=loc.dtype, device=loc.device)
        return loc + scale * noise

    def affine(self, parameters: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
        return torch.stack([parameters[..., 0] * scale + loc, parameters[..., 1] * scale], dim=-1)

    def shift(self, parameters: Tensor, values: Tensor) -> Tensor:
        return torch.stack([parameters[..., 0] + values, parameters[..., 1]], dim=-1)


class StudentT(Distribution):
    """Student's t with location, scale and degrees of freedom (> 2, so the mean and variance exist): heavier
    tails than the Gaussian; trained by negative log-likelihood."""

    n_parameters = 3

    def constrain(self, raw: Tensor) -> Tensor:
        return torch.stack([raw[..., 0], F.softplus(raw[..., 1]) + _MIN_SCALE, 2.0 + F.softplus(raw[..., 2])], dim=-1)

    def loss(self, parameters: Tensor, target: Tensor) -> Tensor:
        loc, scale, df = parameters.unbind(-1)
        return -torch.distributions.StudentT(df, loc, scale, validate_args=False).log_prob(target).mean()

    def sample(self, parameters: Tensor, generator: torch.Generator | None = None) -> Tensor:
        loc, scale, df = parameters.unbind(-1)
        normal = torch.randn(loc.shape, generator=generator, dtype=loc.dtype, device=loc.device)
        # t = Z / sqrt(V / df) with V ~ chi²(df) = 2·Gamma(df / 2); torch's gamma sampler is reparameterised (it is
        # what torch.distributions.Gamma.rsample uses) and, unlike torch.distributions, takes a generator.
        gamma = torch._standard_gamma(df / 2, generator=generator)
        return loc + scale * normal * torch.sqrt(df / (2 * gamma))

    def affine(self, parameters: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
        return torch.stack([parameters[..., 0] * scale + loc, parameters[..., 1] * scale, parameters[..., 2]], dim=-1)

    def shift(self, parameters: Tensor, values: Tensor) -> Tensor:
        return torch.stack([parameters[..., 0] + values, parameters[..., 1], parameters[..., 2]], dim=-1)


class Quantiles(Distribution):
    """A fixed set of quantiles of the predictive distribution, trained with the pinball (quantile) loss.

    The head predicts the median and the gaps between neighbouring quantiles (through a softplus), so quantiles
    never cross. Draws interpolate the quantile function linearly between levels (and extend its outer segments
    beyond them); they are not reparameterised, so BPTT with ``feedback: sample`` is refused. The point
    forecast is the median, of the head and of sample paths.

    Args:
        levels: The quantile levels the head predicts: increasing, in (0, 1), with the median 0.5.
    """

    reparameterised = False

    def __init__(self, levels: UnitLevels = DEFAULT_QUANTILES) -> None:
        levels = [float(level) for level in levels]
        if sorted(set(levels)) != levels or 0.5 not in levels or len(levels) < 2:
            raise InputError(f"levels must be increasing and include the median 0.5 and another level; got {levels}")
        self.levels = levels
        self.median_index = self.point_index = levels.index(0.5)
        self.n_parameters = len(levels)

    @property
    def init_args(self) -> dict[str, Any]:
        return {"levels": list(self.levels)}

    def constrain(self, raw: Tensor) -> Tensor:
        centre = raw[..., self.median_index : self.median_index + 1]
        gaps = F.softplus(raw) + _MIN_SCALE  # strictly increasing even where the softplus underflows
        above = centre + gaps[..., self.median_index + 1 :].cumsum(-1)
        below = centre - gaps[..., : self.median_index].flip(-1).cumsum(-1).flip(-1)
        return torch.cat([below, centre, above], dim=-1)

    def loss(self, parameters: Tensor, target: Tensor) -> Tensor:
        levels = parameters.new_tensor(self.levels)
        error = target.unsqueeze(-1) - parameters
        return torch.maximum(levels * error, (levels - 1) * error).mean()

    def sample(self, parameters: Tensor, generator: torch.Generator | None = None) -> Tensor:
        levels = parameters.new_tensor(self.levels)
        probability = torch.rand(parameters.shape[:-1], generator=generator, dtype=levels.dtype, device=levels.device)
        segment = (torch.searchsorted(levels, probability.contiguous()) - 1).clamp(0, len(self.levels) - 2)
        lower_level, upper_level = levels[segment], levels[segment + 1]
        lower = parameters.gather(-1, segment.unsqueeze(-1)).squeeze(-1)
        upper = parameters.gather(-1, (segment + 1).unsqueeze(-1)).squeeze(-1)
        return lower + (upper - lower) * (probability - lower_level) / (upper_level - lower_level)

    def shift(self, parameters: Tensor, values: Tensor) -> Tensor:
        return parameters + values.unsqueeze(-1)  # every level: the quantiles of value + values

    def point_of_paths(self, samples: Tensor) -> Tensor:
        return samples.median(dim=1).values


def value_to_feed_back(
    distribution: Distribution,
    parameters: Tensor,
    value: Literal["mean", "sample"],
    generator: torch.Generator | None = None,
) -> Tensor:
    """What a free-running decoder feeds back: the point forecast, or a draw from the predicted distribution."""
    return distribution.point(parameters) if value == "mean" else distribution.sample(parameters, generator)
