"""How the decoder is driven in training: teacher forcing, free running, scheduled sampling.

Every regime returns the forecast parameters (N, T, F, n_parameters) whose loss against the target has the
regime's gradient. ``start`` (N, P, F) is the first decoder input, the last observed patch of the context
(``model.start_of``); P = ``model.patch_length`` is 1 unless the model decodes patches.

Why ``free_running_detach`` is exact: in the detached loop, the forecast at step j is the decoder's output at
position j given inputs [start, ŷ_0, …, ŷ_{j-1}] that carry no gradient. A causal decoder's output at
position j depends on inputs 0..j only, so one parallel pass over [start, ŷ_0, …, ŷ_{T-2}] computes every
step's forecast as the same function of the parameters, hence the same loss and gradient, while storing
activations for one T-long pass, as teacher forcing does. The ŷ come from a cached rollout under no_grad.
"""

from __future__ import annotations

import json
import math
from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, Literal

import torch
from torch import Tensor

from project.domains import PositiveInt, Probability
from project.errors import InputError
from project.model.decoding import rollout
from project.model.distributions import Distribution
from project.model.network import ForecastNetwork, component_spec

FeedbackValue = Literal["mean", "sample"]
GradientMode = Literal["detach", "bptt"]
TeacherForcingSchedule = Literal["linear", "exponential", "inverse_sigmoid"]


@dataclass(frozen=True)
class RegimeOptions:
    """Settings a regime's ``forecast`` reads (``rollout_dropout``: see ``FreeRunning``). ``generator`` draws sampled
    feedback and scheduled sampling's coins."""

    feedback_value: FeedbackValue = "mean"
    teacher_forcing_probability: float = 0.5
    rollout_dropout: bool = True
    generator: torch.Generator | None = None
    cuda_graph: bool = False  # decode the no-grad rollouts with fixed shapes (project.model.decoding.rollout)


def teacher_forcing(
    model: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
) -> Tensor:
    """The decoder sees the true previous value at every position: one parallel pass."""
    return model.decode(torch.cat([start, target[:, : -model.patch_length]], dim=1), encoded)


class Regime(ABC):
    """A way of driving the decoder in training: a component given by class_path, as the distribution is
    (``model.regime: {class_path: project.training.FreeRunning, init_args: {gradient: detach}}``). Your own is a
    subclass in your own module (``tests/training/test_regimes.py`` trains one from a temporary module).

    Attributes:
        scheduled: Whether its share of true previous values follows a schedule over the run (then logged as
            ``train/teacher_forcing_probability``).
        init_args: The constructor's arguments, recorded in checkpoints so that they can rebuild it.
    """

    scheduled: bool = False

    @property
    def init_args(self) -> dict[str, Any]:
        return {}

    def check(self, distribution: Distribution) -> None:  # noqa: B027 (optional: most regimes need nothing)
        """Refuse, in one line (``InputError``), a network distribution a regime of yours cannot train with (the
        template's regimes' rules are in ``project.rules``: ``feedback=sample`` needs a distribution, …)."""

    def check_fade(self, known: bool) -> None:  # noqa: B027 (optional: only a regime that fades)
        """Refuse, when fit starts, a run whose fade clock is not ``known`` (``Forecaster.fade_done``: a run of unknown
        length without a decaying schedule) where this regime needs it."""

    def teacher_forcing_probability(self, step: int, fade: float | None = None) -> float:
        """The share of true previous values at optimizer step ``step``; ``fade`` is how far the run's fade clock has
        gone there, from 0 to 1 (``Forecaster.fade_done``; None outside fit)."""
        return 0.0

    def options(self, step: int = 0, fade: float | None = None, cuda_graph: bool = False) -> RegimeOptions:
        """The settings ``forecast`` reads at optimizer step ``step``."""
        probability = self.teacher_forcing_probability(step, fade)
        return RegimeOptions(teacher_forcing_probability=probability, cuda_graph=cuda_graph)

    @abstractmethod
    def forecast(
        self, network: ForecastNetwork, encoded: Any, start: Tensor, target: Tensor, options: RegimeOptions
    ) -> Tensor:
        """Forecast parameters (N, T, F, n_parameters) whose loss against ``target`` has this regime's gradient."""

    def __repr__(self) -> str:
        arguments = ", ".join(f"{name}={value!r}" for name, value in self.init_args.items())
        return f"{type(self).__name__}({arguments})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.init_args == self.init_args

    def __hash__(self) -> int:
        return hash((type(self), tuple(sorted(self.init_args.items()))))


class TeacherForcing(Regime):
    """True previous values in, one parallel pass."""

    def teacher_forcing_probability(self, step: int, fade: float | None = None) -> float:
        return 1.0

    def forecast(self, network, encoded, start, target, options):
        return teacher_forcing(network, encoded, start, target, options)


class _FeedsBack(Regime):
    """What free running and scheduled sampling share: what they feed back, and the rollout's dropout."""

    def __init__(self, feedback: FeedbackValue = "mean", rollout_dropout: bool = True) -> None:
        _check_choice(self, "feedback", feedback, ("mean", "sample"))
        self.feedback, self.rollout_dropout = feedback, rollout_dropout

    def options(self, step=0, fade=None, cuda_graph=False) -> RegimeOptions:
        options = super().options(step, fade, cuda_graph)
        return replace(options, feedback_value=self.feedback, rollout_dropout=self.rollout_dropout)


class FreeRunning(_FeedsBack):
    """The model's own predictions fed back, as at prediction time.

    Args:
        gradient: ``detach``: no gradient through fed-back predictions (a no-grad rollout plus one parallel pass, at
            teacher-forcing memory); ``bptt``: gradient through every one (a differentiable cached unroll).
        feedback: ``mean``: the point forecast (the mean, or the median of a quantile head); ``sample``: a draw from
            the predicted distribution.
        rollout_dropout: Keep dropout on in ``detach``'s no-grad rollout, so that training feeds back what the naive
            training loop would (and ``detach`` equals it exactly); false feeds back the dropout-free predictions
            that ``predict`` makes. ``bptt`` has no such rollout (its unroll is the training pass).
    """

    def __init__(
        self, gradient: GradientMode = "detach", feedback: FeedbackValue = "mean", rollout_dropout: bool = True
    ) -> None:
        super().__init__(feedback, rollout_dropout)
        _check_choice(self, "gradient", gradient, ("detach", "bptt"))
        if gradient == "bptt" and not rollout_dropout:
            raise InputError(
                f"{type(self).__name__}: rollout_dropout=false applies to the no-grad rollout of gradient=detach; "
                "with gradient=bptt the unroll is the training pass itself"
            )
        self.gradient = gradient

    @property
    def init_args(self) -> dict[str, Any]:
        return {"gradient": self.gradient, "feedback": self.feedback, "rollout_dropout": self.rollout_dropout}

    def forecast(self, network, encoded, start, target, options):
        if self.gradient == "bptt":
            return rollout(network, encoded, start, target.shape[1], options.feedback_value, options.generator)[0]
        fed_back = _no_grad_rollout(network, encoded, start, target.shape[1], options)
        return network.decode(torch.cat([start, fed_back], dim=1), encoded)


class ScheduledSampling(_FeedsBack):
    """A per-position coin between the true value and the rolled-out prediction (Bengio et al. 2015).

    In the two-pass form of Mihaylova & Martins (2019): a no-grad rollout, then one parallel pass whose inputs are, per
    sample and position, the true previous value (with the teacher-forcing probability, which decays over the run
    from 1 to ``minimum``) or the rolled-out prediction. Probability 1 is teacher forcing, 0 is free running detach.

    Args:
        schedule: ``linear``, ``exponential`` or ``inverse_sigmoid`` decay of the teacher-forcing probability.
        steps: Optimizer steps over which the probability decays; empty: over the learning rate's decay, where the
            schedule decays when validation stops improving (``WarmupStableDecay``), else over half the run's optimizer
            steps (a run of unknown length, ``max_epochs: -1`` without ``max_steps``, must then set it).
        minimum: Floor of the teacher-forcing probability.
        feedback: What is fed back where the coin says so, as ``FreeRunning``'s.
        rollout_dropout: Keep dropout on in the no-grad rollout, as ``FreeRunning``'s.
    """

    scheduled = True

    def __init__(
        self,
        schedule: TeacherForcingSchedule = "inverse_sigmoid",
        steps: PositiveInt | None = None,
        minimum: Probability = 0.0,
        feedback: FeedbackValue = "mean",
        rollout_dropout: bool = True,
    ) -> None:
        super().__init__(feedback, rollout_dropout)
        _check_choice(self, "schedule", schedule, ("linear", "exponential", "inverse_sigmoid"))
        self.schedule, self.steps, self.minimum = schedule, steps, minimum

    @property
    def init_args(self) -> dict[str, Any]:
        arguments = {"schedule": self.schedule, "steps": self.steps, "minimum": self.minimum}
        return {**arguments, "feedback": self.feedback, "rollout_dropout": self.rollout_dropout}

    def check_fade(self, known: bool) -> None:
        if self.steps is None and not known:
            raise InputError(
                f"{type(self).__name__}: steps is empty, which fades over the learning rate's decay or else half the "
                "run's optimizer steps, and this run has neither (max_epochs=-1 without max_steps); set steps"
            )

    def teacher_forcing_probability(self, step: int, fade: float | None = None) -> float:
        if self.steps is not None:
            return teacher_forcing_probability(step, self.schedule, self.steps, self.minimum)
        return teacher_forcing_probability(fade or 0.0, self.schedule, 1, self.minimum)  # over the fade's share

    def forecast(self, network, encoded, start, target, options):
        if options.teacher_forcing_probability >= 1.0:
            return teacher_forcing(network, encoded, start, target, options)
        predictions = _no_grad_rollout(network, encoded, start, target.shape[1], options)
        (batch, horizon, _), patch = target.shape, network.patch_length
        coin = torch.rand(batch, horizon // patch, 1, generator=options.generator, device=target.device)
        use_truth = (coin < options.teacher_forcing_probability).repeat_interleave(patch, dim=1)[:, :-patch]
        fed_back = torch.where(use_truth, target[:, :-patch], predictions)
        return network.decode(torch.cat([start, fed_back], dim=1), encoded)


def _check_choice(regime: Regime, name: str, value: object, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise InputError(f"{type(regime).__name__}: {name} must be one of {', '.join(choices)}; got {value!r}")


# One name per regime, used by the benchmark, the depth study, the ETTh1 and M4 scripts, their tables and the tests.
REGIMES: dict[str, Regime] = {
    "teacher_forcing": TeacherForcing(),
    "free_running_detach": FreeRunning(),
    "free_running_bptt": FreeRunning(gradient="bptt"),
    "scheduled_sampling": ScheduledSampling(),
}


def regime_name(spec: dict) -> str | None:
    """The ``REGIMES`` name of a regime as a checkpoint records it (``{"class_path": ..., "init_args": {...}}``), by its
    class's name and the arguments that tell that class's entries apart; None for another class. Nothing is imported."""
    class_name = str(spec.get("class_path", "")).rpartition(".")[2]
    given = spec.get("init_args") or {}
    candidates = {name: r.init_args for name, r in REGIMES.items() if type(r).__name__ == class_name}
    differing = {
        k
        for args in candidates.values()
        for k, v in args.items()
        if any(other.get(k) != v for other in candidates.values())
    }
    matches = (name for name, args in candidates.items() if all(given.get(k, args[k]) == args[k] for k in differing))
    return next(matches, None)


def regime_arguments(name: str) -> list[str]:
    """The ``fit`` option that selects the regime ``name``: ``--model.regime={"class_path": ..., "init_args": ...}``."""
    return [f"--model.regime={json.dumps(component_spec(REGIMES[name]))}"]


@torch.no_grad()
def _no_grad_rollout(
    model: ForecastNetwork, encoded: Any, start: Tensor, horizon: int, options: RegimeOptions
) -> Tensor:
    """The values fed back at decoder positions 1..T-1, (N, horizon - P, F): a rollout one patch short of the
    horizon, because the last forecast is never fed back. Without ``rollout_dropout``, in eval mode for its duration."""
    steps = horizon - model.patch_length
    if steps <= 0:
        return start[:, :0]
    dropout_off = model.training and not options.rollout_dropout
    if dropout_off:
        model.eval()
    try:
        return rollout(model, encoded, start, steps, options.feedback_value, options.generator, options.cuda_graph)[1]
    finally:
        if dropout_off:
            model.train()


def teacher_forcing_probability(
    step: int, schedule: TeacherForcingSchedule, decay_steps: int, minimum: float = 0.0
) -> float:
    """Probability of feeding the true value at optimizer step ``step``: 1 at the start, decaying to ``minimum``.

    The curves of Bengio et al. (2015), parameterised by the steps they take to decay (``decay_steps``; a share of a
    decay with ``decay_steps`` 1): ``linear``
    reaches the minimum there; ``exponential`` is k^step, 1% there; ``inverse_sigmoid`` is k / (k + exp(step / k)),
    logistic, centred on ``decay_steps / 2``: 99% at the start and 1% at ``decay_steps``.
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
