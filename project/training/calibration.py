"""Split-conformal calibration of a distribution's prediction intervals, as a callback."""

from __future__ import annotations

import math

import lightning as L
import torch
from torchmetrics import CatMetric

from project.training.metrics import central_interval


class IntervalCalibration(L.Callback):
    """After every validation, rescales the spread of the model's sample paths around their point forecast so that
    its central ``interval`` would have held that share of the validation's targets (split conformal): a model that
    learned too narrow or too wide intervals is corrected without looking at test data.

    The scale is the model's ``interval_scale`` buffer, which checkpoints keep; logged as ``val/interval_scale``. A
    model without a distribution is left as it is.

    Args:
        enabled: Calibrate after every validation; false (``--interval_calibration.enabled=false``) draws the paths
            as the model predicts them (a new model's scale stays 1, a loaded checkpoint's stays its own).
    """

    def __init__(self, enabled: bool = True) -> None:
        self.enabled = enabled
        # Every process's values, gathered when computed: the quantile is exact under DDP.
        self.needed_scale = CatMetric()

    def state_dict(self) -> dict:  # in the checkpoint, so that a refit (backtest) calibrates as the fit did
        return {"enabled": self.enabled}

    @staticmethod
    def enabled_in(checkpoint: dict) -> bool:
        """Whether the fit that wrote ``checkpoint`` calibrated its intervals (yes, the default, without its state)."""
        return bool(checkpoint.get("callbacks", {}).get(IntervalCalibration.__qualname__, {}).get("enabled", True))

    def on_validation_epoch_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.needed_scale = self.needed_scale.to(pl_module.device)

    def on_validation_batch_end(
        self, trainer: L.Trainer, pl_module: L.LightningModule, outputs, batch: dict, batch_idx: int, dataloader_idx=0
    ) -> None:
        forecast = outputs  # the model's forecast of the batch (Forecaster.validation_step)
        if not self.enabled or trainer.sanity_checking or getattr(forecast, "samples", None) is None:
            return
        lower, upper = central_interval(forecast.samples, pl_module.hparams.interval)
        point, target = forecast.point, batch["target"]
        # Per target value, the scale at which the central interval, drawn at the current scale, would just cover it.
        gap = torch.where(target < point, point - lower, upper - point).clamp_min(1e-12)
        self.needed_scale.update((pl_module.interval_scale * (target - point).abs() / gap).flatten())

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self.needed_scale.update_count:
            needed = self.needed_scale.compute()
            rank = max(1, math.ceil(pl_module.hparams.interval * needed.numel()))
            pl_module.interval_scale.fill_(needed.float().kthvalue(rank).values.clamp(1e-3, 1e3))
            pl_module.log("val/interval_scale", pl_module.interval_scale)
        self.needed_scale.reset()
