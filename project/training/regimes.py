"""How the decoder is driven in training: teacher forcing, free running, scheduled sampling.

Each function returns the forecasts (N, T, F) whose loss against the target has the regime's gradient.
``start`` (N, P, F) is the first decoder input: the last observed patch of the context (``model.start_of``);
P = ``model.patch_length`` is 1 unless the model decodes patches.

Why ``free_running_detached`` is exact: in the detached loop, the forecast at step j is the decoder's output at
position j given inputs [start, ŷ_0, …, ŷ_{j-1}] that carry no gradient. A causal decoder's output at
position j depends on inputs 0..j only, so one parallel pass over [start, ŷ_0, …, ŷ_{T-2}] computes every
step's forecast as the same function of the parameters, hence the same loss and gradient, while storing
activations for one T-long pass, as teacher forcing does. The ŷ come from a cached rollout under no_grad.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
from torch import Tensor

from project.model.transformer import ForecastTransformer


def teacher_forced(model: ForecastTransformer, memory: Tensor, start: Tensor, target: Tensor) -> Tensor:
    """The decoder sees the true previous value at every position: one parallel pass."""
    return model.decode(torch.cat([start, target[:, : -model.patch_length]], dim=1), memory)


def free_running_detached(model: ForecastTransformer, memory: Tensor, start: Tensor, horizon: int) -> Tensor:
    """The model's own predictions are fed back without gradient: no-grad cached rollout + one parallel pass."""
    with torch.no_grad():
        predictions = model.rollout(memory, start, horizon)
    return model.decode(torch.cat([start, predictions[:, : -model.patch_length]], dim=1), memory)


def free_running_bptt(model: ForecastTransformer, memory: Tensor, start: Tensor, horizon: int) -> Tensor:
    """The model's own predictions are fed back with gradient: a differentiable cached unroll."""
    return model.rollout(memory, start, horizon)


def scheduled_sampling(
    model: ForecastTransformer,
    memory: Tensor,
    start: Tensor,
    target: Tensor,
    teacher_forcing_probability: float,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Scheduled sampling (Bengio et al. 2015) in the two-pass form of Mihaylova & Martins (2019).

    Pass one is the free-running cached rollout without gradient; then, for every sample and decoder position,
    a coin picks the true previous value (with ``teacher_forcing_probability``) or the rolled-out prediction as
    the decoder input of one parallel pass. Probability 1 is teacher forcing, 0 is ``free_running_detached``.
    """
    if teacher_forcing_probability >= 1.0:
        return teacher_forced(model, memory, start, target)
    with torch.no_grad():
        predictions = model.rollout(memory, start, target.shape[1])
    batch, horizon, _ = target.shape
    patch = model.patch_length
    coin = torch.rand(batch, horizon // patch, 1, generator=generator, device=target.device)
    use_truth = (coin < teacher_forcing_probability).repeat_interleave(patch, dim=1)[:, :-patch]
    fed_back = torch.where(use_truth, target[:, :-patch], predictions[:, :-patch])
    return model.decode(torch.cat([start, fed_back], dim=1), memory)


TeacherForcingSchedule = Literal["linear", "exponential", "inverse_sigmoid"]


def teacher_forcing_probability(
    step: int, schedule: TeacherForcingSchedule, decay_steps: int, minimum: float = 0.0
) -> float:
    """Probability of feeding the true value at optimizer step ``step``: 1 at the start, decaying to ``minimum``.

    The three curves of Bengio et al. (2015), parameterised by the steps they take to decay:
    ``linear`` reaches the minimum at ``decay_steps``; ``exponential`` is k^step with k chosen so that the
    probability is 1% at ``decay_steps``; ``inverse_sigmoid`` is k / (k + exp(step / k)), a logistic curve, here
    centred on ``decay_steps / 2``: 99% at the start and 1% at ``decay_steps``.
    """
    progress = step / decay_steps
    if schedule == "linear":
        probability = 1.0 - progress
    elif schedule == "exponential":
        probability = 0.01**progress
    elif schedule == "inverse_sigmoid":
        probability = 1.0 / (1.0 + math.exp(min(50.0, math.log(99.0) * (2.0 * progress - 1.0))))
    else:
        raise ValueError(f"schedule must be linear, exponential or inverse_sigmoid; got {schedule!r}")
    return max(minimum, min(1.0, probability))
