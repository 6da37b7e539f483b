"""The learning-rate schedule of the default optimiser setup: linear warm-up, then cosine decay to zero."""

from __future__ import annotations

import math
from typing import Literal

import torch

from project.domains import NonNegativeInt, PositiveInt


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
