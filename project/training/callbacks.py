"""Checkpoints that always hold the latest state, and the random state a resumed run needs to continue exactly."""

from __future__ import annotations

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException


class ForecastCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose ``last.ckpt`` is the latest state, not the latest *best* one.

    Lightning writes ``last.ckpt`` only when the monitored metric improves, so resuming from it could silently
    repeat work. Here it is also written after every validation, at the end of ``fit`` and when the run is
    stopped by SIGTERM (a scheduler's pre-emption), at the step where the run stands. The arguments are
    ``ModelCheckpoint``'s.
    """

    _latest_written_step: int | None = None

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)
        if not self._should_save_on_train_epoch_end(trainer):  # otherwise the best is chosen at the epoch's end
            self._save_latest(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self._save_latest(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._save_latest(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        if isinstance(exception, SIGTERMException):
            self._save_latest(trainer)
            if self.save_last and self.last_model_path:  # for the one-line message that says where to resume
                exception.latest_checkpoint = self.last_model_path

    def _save_last_checkpoint(self, trainer: L.Trainer, monitor_candidates: dict) -> None:
        super()._save_last_checkpoint(trainer, monitor_candidates)
        self._latest_written_step = trainer.global_step

    def _save_latest(self, trainer: L.Trainer) -> None:
        if (
            not self.save_last
            or trainer.fast_dev_run
            or trainer.sanity_checking
            or trainer.state.fn != "fit"
            or self._latest_written_step == trainer.global_step
        ):
            return
        saved_at = self._last_global_step_saved
        self._save_last_checkpoint(trainer, self._monitor_candidates(trainer))
        self._last_global_step_saved = saved_at  # the latest state is not a best one: a best may follow at this step


class RandomState(L.Callback):
    """Saves the random number generators' state in every checkpoint and restores it when training resumes, so
    that a resumed run draws the same dropout masks (and sampled feedback) as one that was never interrupted."""

    def __init__(self) -> None:
        self._restored: dict | None = None

    def state_dict(self) -> dict:
        state = {"torch": torch.get_rng_state()}
        if torch.cuda.is_available() and torch.cuda.is_initialized():
            state["cuda"] = torch.cuda.get_rng_state_all()
        return state

    def load_state_dict(self, state_dict: dict) -> None:
        self._restored = state_dict

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # Applied here, after the sanity check and data loading, right before the first resumed step draws.
        if self._restored is None:
            return
        torch.set_rng_state(self._restored["torch"])
        if "cuda" in self._restored and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(self._restored["cuda"])
        self._restored = None
