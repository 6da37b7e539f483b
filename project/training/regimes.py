"""How the decoder is driven in training: teacher forcing, free running, scheduled sampling.

Every regime returns the forecast parameters (N, T, F, n_parameters) whose loss against the target has the
regime's gradient, and is registered once in ``REGIMES`` under the name the module, the benchmark, the ETTh1 and
M4 scripts and the tests all use. ``start`` (N, P, F) is the first decoder input: the last observed patch of the
context (``model.start_of``); P = ``model.patch_length`` is 1 unless the model decodes patches. What a free-running
decoder feeds back is the point forecast (``feedback_value: mean``; the median of a quantile head) or a draw
from the predicted distribution (``sample``).

Why ``free_running_detach`` is exact: in the detached loop, the forecast at step j is the decoder's output at
position j given inputs [start, ŷ_0, …, ŷ_{j-1}] that carry no gradient. A causal decoder's output at
position j depends on inputs 0..j only, so one parallel pass over [start, ŷ_0, …, ŷ_{T-2}] computes every
step's forecast as the same function of the parameters, hence the same loss and gradient, while storing
activations for one T-long pass, as teacher forcing does. The ŷ come from a cached rollout under no_grad.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal

import torch
from torch import Tensor

from project.model.decoding import rollout
from project.model.network import ForecastNetwork

FeedbackValue = Literal["mean", "sample"]
TeacherForcingSchedule = Literal["linear", "exponential", "inverse_sigmoid"]


@dataclass(frozen=True)
class RegimeOptions:
    """Settings a regime may read. ``rollout_dropout``: keep dropout on in the no-grad rollouts of ``detach`` and
    scheduled sampling (as in the naive training loop), or feed back the dropout-free predictions that
    ``predict`` makes. ``generator`` draws sampled feedback and scheduled sampling's coins. ``cuda_graph``: see
    ``project.model.decoding.rollout``."""

    feedback_value: FeedbackValue = "mean"
    teacher_forcing_probability: float = 0.5
    rollout_dropout: bool = True
    generator: torch.Generator | None = None
    cuda_graph: bool = False  # decode the no-grad rollouts with fixed shapes (CUDA graphs on a GPU)


def teacher_forcing(
    model: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
) -> Tensor:
    """The decoder sees the true previous value at every position: one parallel pass."""
    return model.decode(torch.cat([start, target[:, : -model.patch_length]], dim=1), encoded)


def free_running_detach(
    model: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
) -> Tensor:
    """The model's own predictions are fed back without gradient: no-grad cached rollout + one parallel pass."""
    fed_back = _no_grad_rollout(model, encoded, start, target.shape[1], options)
    return model.decode(torch.cat([start, fed_back], dim=1), encoded)


def free_running_bptt(
    model: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
) -> Tensor:
    """The model's own predictions are fed back with gradient: a differentiable cached unroll."""
    return rollout(model, encoded, start, target.shape[1], options.feedback_value, options.generator)[0]


def scheduled_sampling(
    model: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
) -> Tensor:
    """Scheduled sampling (Bengio et al. 2015) in the two-pass form of Mihaylova & Martins (2019).

    Pass one is the free-running cached rollout without gradient; then, for every sample and decoder position,
    a coin picks the true previous value (with ``teacher_forcing_probability``) or the rolled-out prediction as
    the decoder input of one parallel pass. Probability 1 is teacher forcing, 0 is ``free_running_detach``.
    """
    if options.teacher_forcing_probability >= 1.0:
        return teacher_forcing(model, encoded, start, target, options)
    predictions = _no_grad_rollout(model, encoded, start, target.shape[1], options)
    batch, horizon, _ = target.shape
    patch = model.patch_length
    coin = torch.rand(batch, horizon // patch, 1, generator=options.generator, device=target.device)
    use_truth = (coin < options.teacher_forcing_probability).repeat_interleave(patch, dim=1)[:, :-patch]
    fed_back = torch.where(use_truth, target[:, :-patch], predictions)
    return model.decode(torch.cat([start, fed_back], dim=1), encoded)


RegimeFunction = Callable[[ForecastNetwork, Any, Tensor, Tensor, RegimeOptions], Tensor]


@dataclass(frozen=True)
class Regime:
    """A way of driving the decoder in training, and the ``Forecaster`` settings that select it.

    ``training_mode`` and ``feedback_gradient`` are the settings (their choices in ``--help`` are read from this
    registry); ``teacher_forcing`` is the share of true previous values the regime is given as
    ``RegimeOptions.teacher_forcing_probability``: a constant, or None for the decaying schedule of scheduled
    sampling (``teacher_forcing_probability`` below, logged as ``train/teacher_forcing_probability``);
    ``gradient_through_feedback`` says that its unroll is the training pass (no no-grad rollout). The option rules
    (``project.rules``) read these attributes, never the regime's name: what options apply follows from them.
    """

    forecast: RegimeFunction
    description: str
    training_mode: str
    feedback_gradient: str = "detach"
    teacher_forcing: float | None = 0.0
    gradient_through_feedback: bool = False

    @property
    def feeds_back(self) -> bool:
        """Whether it feeds the model's own predictions back (everything but teacher forcing)."""
        return self.teacher_forcing != 1.0

    @property
    def scheduled(self) -> bool:
        """Whether its share of true values follows the teacher-forcing schedule."""
        return self.teacher_forcing is None


# A new regime is one entry here: its function and the settings that select it.
REGIMES: dict[str, Regime] = {
    "teacher_forcing": Regime(
        teacher_forcing, "true previous values in, one parallel pass", "teacher_forcing", teacher_forcing=1.0
    ),
    "free_running_detach": Regime(
        free_running_detach,
        "own predictions fed back without gradient: no-grad cached rollout + one parallel pass",
        "free_running",
    ),
    "free_running_bptt": Regime(
        free_running_bptt,
        "own predictions fed back with gradient: a differentiable cached unroll",
        "free_running",
        "bptt",
        gradient_through_feedback=True,
    ),
    "scheduled_sampling": Regime(
        scheduled_sampling,
        "a per-position coin between the true value and the rolled-out prediction",
        "scheduled_sampling",
        teacher_forcing=None,
    ),
}
TRAINING_MODES = tuple(dict.fromkeys(regime.training_mode for regime in REGIMES.values()))
FEEDBACK_GRADIENTS = tuple(dict.fromkeys(regime.feedback_gradient for regime in REGIMES.values()))


def regime_name(training_mode: str, feedback_gradient: str) -> str | None:
    """The registry name of a ``Forecaster``'s ``training_mode`` and ``feedback_gradient`` settings (None when no
    regime has them: a start-up error of ``project.rules``)."""
    selected = (training_mode, feedback_gradient)
    return next((name for name, r in REGIMES.items() if (r.training_mode, r.feedback_gradient) == selected), None)


def regime_settings(name: str) -> dict[str, str]:
    """The ``Forecaster`` settings that select the regime ``name`` (the inverse of ``regime_name``)."""
    regime = REGIMES[name]
    return {"training_mode": regime.training_mode, "feedback_gradient": regime.feedback_gradient}


def _no_grad_rollout(
    model: ForecastNetwork, encoded: Any, start: Tensor, horizon: int, options: RegimeOptions
) -> Tensor:
    """The values fed back at decoder positions 1..T-1, (N, horizon - P, F): a rollout one patch short of the
    horizon, because the last forecast is never fed back."""
    steps = horizon - model.patch_length
    if steps <= 0:
        return start[:, :0]
    with torch.no_grad(), _dropout(model, options.rollout_dropout):
        return rollout(model, encoded, start, steps, options.feedback_value, options.generator, options.cuda_graph)[1]


@contextlib.contextmanager
def _dropout(model: ForecastNetwork, enabled: bool) -> Iterator[None]:
    """Dropout as the model's mode has it, or off for the duration (eval mode, restored afterwards)."""
    if enabled or not model.training:
        yield
        return
    model.eval()
    try:
        yield
    finally:
        model.train()


# An empty ``schedule_steps`` decays over this share of the run's optimizer steps: about what the decoder-depth
# study's scheduled-sampling cells used (project/tools/depth.py: ETTh1 100 of 212 steps, M4 Hourly 140 of about 280).
DECAY_SHARE_OF_RUN = 0.5


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
