"""Checkpoints that always hold the latest state, and the random state a resumed run needs to continue exactly."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.utilities.exceptions import SIGTERMException


def stopped_by_sigterm(stopped: SIGTERMException) -> str:
    """What a run stopped by SIGTERM says, in one line: where ``ForecastCheckpoint`` saved the current step (the
    ``latest_checkpoint`` it noted on the exception), or that no checkpoint holds it."""
    saved = getattr(stopped, "latest_checkpoint", None)
    resume = f"; {saved} holds the current step; continue with --ckpt_path last" if saved else ""
    return f"stopped by SIGTERM{resume or '; no checkpoint holds the current step'}"


class ForecastCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose ``last.ckpt`` is the latest state, not the latest *best* one.

    Lightning writes ``last.ckpt`` only at a step where it also saved a top-k checkpoint, so resuming from it could
    silently repeat work. Here ``save_last`` writes it after every validation, at the end of every training epoch
    and of ``fit``, and when the run is stopped by SIGTERM (a scheduler's pre-emption), at the step where the run
    stands. It is written with the Trainer's public ``save_checkpoint``, so nothing here depends on
    ``ModelCheckpoint``'s private members; the top-k checkpoints are ``ModelCheckpoint``'s own. The arguments are
    ``ModelCheckpoint``'s.
    """

    keep_latest: bool | None = None  # save_last as given; Lightning's own last-checkpoint logic is switched off
    _latest_step: int | None = None

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if self.keep_latest is None:  # setup runs again for the test after fit: take save_last once
            self.keep_latest, self.save_last = bool(self.save_last), False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_validation_end(trainer, pl_module)  # a best checkpoint first, then the latest state
        self._save_latest(trainer)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_epoch_end(trainer, pl_module)
        self._save_latest(trainer)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        self._save_latest(trainer)

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        super().on_exception(trainer, pl_module, exception)
        if isinstance(exception, SIGTERMException):
            self._save_latest(trainer)
            if self.keep_latest and self.last_model_path:  # for the one-line message that says where to resume
                exception.latest_checkpoint = self.last_model_path

    def _save_latest(self, trainer: L.Trainer) -> None:
        if (
            not self.keep_latest
            or trainer.fast_dev_run
            or trainer.sanity_checking
            or trainer.state.fn != "fit"
            or self._latest_step == trainer.global_step
        ):
            return
        path = Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}"
        trainer.save_checkpoint(path, weights_only=self.save_weights_only)  # as ModelCheckpoint saves its own
        self.last_model_path, self._latest_step = str(path), trainer.global_step


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
