"""How the network is trained: regimes, the LightningModule, its callbacks (checkpoints, interval calibration, the
naive comparison), metrics and baselines.

The learning-rate schedule is importable from here, as a config names it (``project.training.WarmupCosine``)."""

from project.training.schedules import WarmupCosine

__all__ = ["WarmupCosine"]
