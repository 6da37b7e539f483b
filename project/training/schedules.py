"""Learning-rate schedules: warm-up, then a decay to zero that starts when validation stops improving (the default),
or a cosine over a run of known length."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Literal

import torch

from project.domains import Fraction, NonNegativeInt, PositiveInt

if TYPE_CHECKING:
    import lightning as L


def decaying_schedule(trainer: L.Trainer) -> object | None:
    """The run's learning-rate schedule that decays when told to (``start_decay``: ``WarmupStableDecay``), or None."""
    configs = trainer.lr_scheduler_configs if trainer.lightning_module is not None else []
    return next((c.scheduler for c in configs if hasattr(c.scheduler, "start_decay")), None)


class WarmupCosine(torch.optim.lr_scheduler.LambdaLR):
    """Linear warm-up, then cosine decay to zero at the run's last optimizer step (or a constant rate), stepped once
    per optimizer step. Outside a run, or in one of unknown length, the rate stays at its peak after warm-up.

    Args:
        optimizer: The optimizer whose rate it scales (given by ``configure_optimizers``, not by a config).
        warmup_steps: Optimizer steps of linear warm-up from zero.
        decay: After warm-up: ``cosine`` decay to zero at the run's last step, or ``constant``.
        run_steps: The run's optimizer steps; empty: set by the ``Forecaster`` when fit starts.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        warmup_steps: NonNegativeInt = 100,
        decay: Literal["cosine", "constant"] = "cosine",
        run_steps: PositiveInt | None = None,
    ) -> None:
        # Plain numbers (the parser gives its types): the state_dict is every attribute, read back with weights_only.
        self.warmup_steps, self.decay = int(warmup_steps), decay
        self.run_steps: float | None = None if run_steps is None else int(run_steps)
        # A function, not the bound method: LambdaLR's state_dict skips functions.
        super().__init__(optimizer, lambda step: self.factor(step))

    def set_run_steps(self, run_steps: float) -> None:
        """The run's optimizer steps (``inf``: unknown) unless ``run_steps`` was given; set by ``Forecaster`` at fit."""
        if self.run_steps is None:
            self.run_steps = run_steps

    def factor(self, step: int) -> float:
        """The share of the peak learning rate at optimizer step ``step``."""
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.decay == "constant" or self.run_steps is None or not math.isfinite(self.run_steps):
            return 1.0
        progress = min(1.0, (step - self.warmup_steps) / max(1, self.run_steps - self.warmup_steps))
        return 0.5 * (1.0 + math.cos(math.pi * progress))


class WarmupStableDecay(torch.optim.lr_scheduler.LambdaLR):
    """Linear warm-up, the peak rate for as long as the model improves, then a cosine decay to zero over a fifth
    (``decay_share``) of the steps trained before it (warmup-stable-decay; Hägele et al., 2024), stepped once per
    optimizer step.

    The decay starts when validation stops improving (``start_decay``, called by ``AnnealThenStop``, the CLI's early
    stopping, which then ends the run when the rate reaches zero), or where a run of known length (``max_steps``) has
    just room for it, whichever comes first: a run ends annealed, and the schedule needs no budget. Where the decay
    started is the schedule's progress, kept in checkpoints; its settings are the config's.

    Args:
        optimizer: The optimizer whose rate it scales (given by ``configure_optimizers``, not by a config).
        warmup_steps: Optimizer steps of linear warm-up from zero.
        decay_share: The decay's length, as a share of the optimizer steps before it.
    """

    # What a resumed fit takes from a checkpoint beside the step (project.checkpoints.restore); settings: the config's.
    progress = ("decay_start",)

    def __init__(
        self, optimizer: torch.optim.Optimizer, warmup_steps: NonNegativeInt = 100, decay_share: Fraction = 0.2
    ) -> None:
        # Plain numbers (the parser gives its types): the state_dict is every attribute, read back with weights_only.
        self.warmup_steps, self.decay_share = int(warmup_steps), float(decay_share)
        self.decay_start: int | None = None  # the step the decay started at, once validation stopped improving
        self.run_steps: float = math.inf  # the run's optimizer steps, where known (set_run_steps)
        # A function, not the bound method: LambdaLR's state_dict skips functions.
        super().__init__(optimizer, lambda step: self.factor(step))

    def set_run_steps(self, run_steps: float) -> None:
        """The run's optimizer steps (``inf``: unknown), set by ``Forecaster`` when fit starts: the decay ends there
        at the latest."""
        self.run_steps = run_steps

    def start_decay(self) -> None:
        """Start the decay at the current step, unless it has started."""
        if self.decay_start is None:
            self.decay_start = self.last_epoch

    def decay_steps(self) -> tuple[float, float]:
        """The first step of the decay and its length: from where validation stopped improving, else from where the
        run's last step ends it (``inf`` for a run of unknown length)."""
        start = self.run_steps / (1 + self.decay_share)
        start = start if self.decay_start is None else min(self.decay_start, start)
        return start, max(1, round(self.decay_share * start)) if math.isfinite(start) else math.inf

    def decayed(self) -> bool:
        """Whether the rate has reached zero: the run has nothing left to learn."""
        return self.decay_done(self.last_epoch) >= 1.0

    def decay_done(self, step: int) -> float:
        """The share of the decay done at optimizer step ``step``: 0 before it starts, 1 at its end (what scheduled
        sampling's fade follows by default)."""
        start, length = self.decay_steps()
        return min(1.0, max(0.0, (step - start) / length)) if math.isfinite(start) else 0.0

    def factor(self, step: int) -> float:
        """The share of the peak learning rate at optimizer step ``step``."""
        warmed = min(1.0, (step + 1) / self.warmup_steps) if self.warmup_steps else 1.0
        return warmed * 0.5 * (1.0 + math.cos(math.pi * self.decay_done(step)))
