"""Checkpoints that always hold the latest state, the random state a resumed run needs to continue exactly, and a
Ctrl-C that stops a fit only between two optimizer steps."""

from __future__ import annotations

import inspect
import math
import os
import shlex
import signal
import sys
import threading
from pathlib import Path
from typing import NoReturn

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.utilities.exceptions import SIGTERMException

from project.errors import InputError
from project.files import NAME_MAX, check_name_lengths
from project.training.schedules import decaying_schedule

EXIT_SIGTERM = 143  # 128 + SIGTERM's number: what schedulers expect of a terminated job
EXIT_SIGINT = 130  # 128 + SIGINT's number: what a shell reports of a job stopped by Ctrl-C


def exit_after_signal(stopped: BaseException, signal_name: str, code: int) -> NoReturn:
    """End a run stopped by a signal (SIGTERM's ``SIGTERMException``, Ctrl-C's ``KeyboardInterrupt``) with one line and
    ``code``: how to continue from where ``ForecastCheckpoint`` saved the current step (the ``resume`` it noted on the
    exception), or that no checkpoint holds it."""
    resume = getattr(stopped, "resume", None) or "no checkpoint holds the current step"
    print(f"error: stopped by {signal_name}; {resume}", file=sys.stderr)
    raise SystemExit(code) from None


def find_last_checkpoint(log_dir: str | Path) -> Path | None:
    """The ``last.ckpt`` of the newest ``version_N`` run under ``log_dir`` (a logger's save_dir/name folder)."""
    runs = [path for path in Path(log_dir).glob("version_*/checkpoints/last.ckpt") if run_version(path) is not None]
    return max(runs, key=run_version, default=None)


def run_version(last: Path) -> int | None:
    """N of ``version_N/checkpoints/last.ckpt``; None for a folder not named so."""
    number = last.parts[-3].removeprefix("version_")
    return int(number) if number.isdigit() else None


def _resume(trainer: L.Trainer, latest_checkpoint: str, step: int | None = None) -> str:
    """Where the current step is (or, ``step``, the last whole one, when the run stopped inside a step) and the command
    line option that continues from it: ``--ckpt_path last`` where it finds this checkpoint (the newest run of a logger
    with versioned run folders), else the checkpoint's path."""
    logger, last = trainer.logger, None
    if len(trainer.loggers) == 1 and "version" in inspect.signature(type(logger)).parameters and logger.save_dir:
        last = find_last_checkpoint(Path(logger.save_dir) / logger.name)
    found = last is not None and last.resolve() == Path(latest_checkpoint).resolve()
    option = "last" if found else shlex.quote(latest_checkpoint)
    holds = "the current step" if step is None else f"step {step}, the last whole one"
    return f"{latest_checkpoint} holds {holds}; continue with --ckpt_path {option}"


def how_the_fit_ended(trainer: L.Trainer, monitor: str, best_step: int, last_validation: int) -> str | None:
    """What the end of a fit says of why it ended, in its schedule's terms: converged (validation stopped improving and
    the learning rate then decayed to zero), or ended by a limit while the model was still improving, with the option
    that raises the limit; None when early stopping ended a run without a decaying schedule."""
    if trainer.max_steps != -1 and trainer.global_step >= trainer.max_steps:
        limit = f"trainer.max_steps={trainer.max_steps}"
    elif trainer.max_epochs not in (None, -1) and trainer.current_epoch >= trainer.max_epochs:
        limit = f"trainer.max_epochs={trainer.max_epochs}"
    else:
        limit = "trainer.max_time"
    schedule = decaying_schedule(trainer)
    if schedule is not None and schedule.decayed():
        start, length = (round(step) for step in schedule.decay_steps())
        if schedule.decay_start is not None:
            return (
                f"converged: {monitor} stopped improving, so the learning rate decayed to zero over steps "
                f"{start}–{start + length}; the best checkpoint is step {best_step}'s"
            )
        return (
            f"{limit} ended the run before {monitor} stopped improving (its best at step {best_step}): the learning "
            f"rate decayed to zero over the last {length} steps; raise {limit} to train longer"
        )
    if best_step != last_validation:
        return None
    groups = trainer.optimizers[0].param_groups if trainer.optimizers else []
    rate = (
        f" at {groups[0]['lr'] / groups[0]['initial_lr']:.0%} of the peak learning rate"
        if groups and groups[0].get("initial_lr")
        else ""
    )
    return (
        f"the best {monitor} came at the last validation (step {best_step}){rate}, so the model may still be "
        f"improving; raise {limit} to train longer"
    )


class ValidateEachEpochAtLeast(L.Callback):
    """Where validation counts ``trainer.val_check_interval`` batches across epochs (base.yaml's budget), an epoch
    shorter than that is validated at its end, and early stopping's patience counts as many batches as before: a short
    series is checked as often as an epoch budget checked it (its best checkpoint may come in the first epochs) and is
    stopped after as many steps without a better score as a panel of longer epochs, checked every
    ``val_check_interval`` batches."""

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # After Lightning sized the data (val_check_batch) and before the first batch, on a resumed fit too (whose
        # early stopping took its patience from the config).
        epoch, interval = trainer.num_training_batches, trainer.val_check_batch
        if trainer.check_val_every_n_epoch is None and isinstance(interval, int) and epoch < interval:
            trainer.val_check_batch = int(epoch)
            for stopping in trainer.early_stopping_callbacks:
                stopping.patience = math.ceil(stopping.patience * interval / epoch)


class AnnealThenStop(EarlyStopping):
    """Early stopping that anneals before it stops: when the monitored score has not improved for ``patience``
    validations, the model goes back to its weights of the best validation and the learning-rate schedule's decay
    starts (a schedule with ``start_decay``, as the default ``WarmupStableDecay``); the run stops when the rate reaches
    zero, after a last validation. The best weights are annealed, not the ones training drifted to since; the best
    checkpoint is kept either way. With another schedule, or none, it stops at once, as ``EarlyStopping`` does.

    Args:
        monitor: The score early stopping watches (``val/loss``).
        restore_best: Go back to the weights of the best validation when the decay starts (kept in memory and in
            checkpoints); false: decay from the weights the run has.
        **kwargs: ``EarlyStopping``'s other arguments (``patience``, ``min_delta``, …).
    """

    def __init__(self, monitor: str, restore_best: bool = True, **kwargs) -> None:
        super().__init__(monitor, **kwargs)
        self.restore_best = restore_best
        self.best_weights: dict[str, torch.Tensor] | None = None  # the model at the best validation
        self._schedule: object | None = None  # the run's decaying schedule, found when training starts
        self._module: L.LightningModule | None = None

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._schedule, self._module = decaying_schedule(trainer), pl_module

    def _evaluate_stopping_criteria(self, current: torch.Tensor) -> tuple[bool, str | None]:
        best = self.best_score
        should_stop, reason = super()._evaluate_stopping_criteria(current)
        schedule = self._schedule
        improved = not torch.equal(best.to(self.best_score.device), self.best_score)  # a CPU start, a GPU score
        if schedule is not None and self.restore_best and improved:
            self.best_weights = {name: value.detach().clone() for name, value in self._module.state_dict().items()}
        if not (should_stop and self.stopping_reason == EarlyStoppingReason.PATIENCE_EXHAUSTED and schedule):
            return should_stop, reason
        self.stopping_reason = EarlyStoppingReason.NOT_STOPPED  # the decay's end stops the run
        if schedule.decay_start is not None:
            return False, None
        schedule.start_decay()
        if self.best_weights is not None:
            self._module.load_state_dict(self.best_weights)
        back = " The model is back at its best weights, and" if self.best_weights is not None else ""
        steps = schedule.decay_steps()[1]
        return False, f"{reason.split(' Signaling')[0]}{back} the learning rate decays to zero over {steps} steps."

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        if self._schedule is not None and self._schedule.decayed() and not trainer.should_stop:
            trainer.should_stop = True  # Lightning validates once more before it stops
            self.stopped_epoch = trainer.current_epoch

    def state_dict(self) -> dict:
        return {**super().state_dict(), "best_weights": self.best_weights}

    def load_state_dict(self, state_dict: dict) -> None:
        super().load_state_dict(state_dict)
        self.best_weights = state_dict.get("best_weights")


class StoppedBetweenSteps(KeyboardInterrupt):
    """Ctrl-C, raised by ``CtrlCBetweenSteps`` where the state is whole: after an optimizer step, or when training
    ends. Any other ``KeyboardInterrupt`` (a second Ctrl-C) stopped the run inside a step."""


class ForecastCheckpoint(ModelCheckpoint):
    """``ModelCheckpoint`` whose ``last.ckpt`` is the latest state, not the latest *best* one.

    Lightning writes ``last.ckpt`` only at a step where it also saved a top-k checkpoint, so resuming from it could
    silently repeat work. Here ``save_last`` (``true`` or ``false``; ``link`` is refused) writes it after every
    validation, at the end of every training epoch and of ``fit``, and when SIGTERM or Ctrl-C stops the run, with
    the Trainer's public ``save_checkpoint``. The end of ``fit`` says in one line why it ended
    (``how_the_fit_ended``): converged, or a limit reached while the model was improving, with the option to raise.
    The arguments are ``ModelCheckpoint``'s.
    """

    # save_last as the user gave it; save_last itself is set to False at setup so that Lightning's own last.ckpt
    # (written only beside a top-k checkpoint) never replaces ours.
    keep_latest: bool | None = None
    _latest_saved: tuple[int, str] | None = None  # the step and best checkpoint of the latest state saved
    _resumed_from: tuple[str, int] | None = None  # the checkpoint a resumed fit started from, and its step
    _validated_at: int | None = None  # the step of this fit's latest validation
    _best_at: int | None = None  # the step of the validation that saved this fit's best checkpoint

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        super().setup(trainer, pl_module, stage)
        if self.keep_latest is None:  # setup runs again for the test after fit: take save_last once
            if self.save_last == "link":
                raise InputError(
                    "checkpoint.save_last=link would make last.ckpt a link to the newest top-k checkpoint, not the "
                    "latest state ForecastCheckpoint keeps; use save_last: true (the latest state) or false (none)"
                )
            # A name too long for the file system is refused now, not when the first checkpoint is saved: the
            # template expanded as for a long run (epoch 10**6, step 10**9, a metric of many digits).
            check_name_lengths(f"{self.filename or 'checkpoint'}{self.FILE_EXTENSION}", "checkpoint.filename")
            sample = {"epoch": 10**6, "step": 10**9}
            if self.monitor:
                sample[self.monitor] = torch.tensor(-1.2345678e-10)
            try:
                expanded = Path(self.format_checkpoint_name(sample))
            except (KeyError, IndexError, TypeError, ValueError) as error:
                raise InputError(f"checkpoint.filename={self.filename} cannot be filled in ({error})") from None
            longest = max(len(os.fsencode(part)) for part in expanded.parts[len(Path(self.dirpath or "").parts) :])
            if longest > NAME_MAX:
                raise InputError(
                    f"checkpoint.filename={(self.filename or '')[:60]}… expands to a name of {longest} bytes (at epoch "
                    f"{10**6}, step {10**9}); a file name has at most {NAME_MAX}"
                )
            self.keep_latest, self.save_last = bool(self.save_last), False

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        best = self.best_model_path
        super().on_validation_end(trainer, pl_module)  # a best checkpoint first, then the latest state
        if trainer.state.fn == "fit" and not trainer.sanity_checking:
            self._validated_at = trainer.global_step
        self._save_latest(trainer, best)

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        best = self.best_model_path
        super().on_train_epoch_end(trainer, pl_module)  # where a run validating every epoch saves its best
        self._save_latest(trainer, best)

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_end(trainer, pl_module)
        self._save_latest(trainer)
        if not trainer.is_global_zero or trainer.fast_dev_run or not self.monitor:
            return
        if self._validated_at is not None and self._best_at is not None:
            said = how_the_fit_ended(trainer, self.monitor, self._best_at, self._validated_at)
            if said is not None:
                print(f"note: {said}", file=sys.stderr)
        elif self._validated_at is None and trainer.limit_val_batches:  # a run shorter than its first validation
            print(
                f"note: no validation ran in this fit's {trainer.global_step} steps (one every "
                f"trainer.val_check_interval={trainer.val_check_interval} training batches), so no best checkpoint "
                "was kept; lower it",
                file=sys.stderr,
            )

    def on_exception(self, trainer: L.Trainer, pl_module: L.LightningModule, exception: BaseException) -> None:
        inside_a_step = isinstance(exception, KeyboardInterrupt) and not isinstance(exception, StoppedBetweenSteps)
        if not inside_a_step:  # Lightning's save_on_exception too saves nothing of a state no run continues exactly
            super().on_exception(trainer, pl_module, exception)
        if not isinstance(exception, (SIGTERMException, KeyboardInterrupt)) or trainer.state.fn != "fit":
            return
        if not inside_a_step:  # SIGTERM, or Ctrl-C between steps: the state is whole, and saved
            self._save_latest(trainer)
            if self.keep_latest and self.last_model_path:  # for the one-line message
                exception.resume = _resume(trainer, self.last_model_path)
            return
        # A second Ctrl-C, inside a step: the last whole state is this run's latest save, or the one it resumed from.
        if self._latest_saved:  # saved with last_model_path (_save_latest)
            whole = f"; {_resume(trainer, self.last_model_path, self._latest_saved[0])}"
        elif self._resumed_from:
            whole = f"; {_resume(trainer, *self._resumed_from)}"
        else:
            whole = "; this run saved no step before it"
        exception.resume = f"the step it stopped inside is not saved{whole}"

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        super().on_train_start(trainer, pl_module)
        self._resumed_from = (str(trainer.ckpt_path), trainer.global_step) if trainer.ckpt_path else None

    def _save_latest(self, trainer: L.Trainer, best_before: str | None = None) -> None:
        fitting = trainer.state.fn == "fit" and not (trainer.fast_dev_run or trainer.sanity_checking)
        if fitting and best_before is not None and self.best_model_path != best_before:
            self._best_at = trainer.global_step  # a new best checkpoint was saved at this step
        # Saved again at the same step when a best checkpoint came since (Lightning writes the epoch's best at its
        # end, after the validation that saved the latest state): a resumed run must know the best to replace it.
        saved = (trainer.global_step, self.best_model_path)
        if not self.keep_latest or not fitting or self._latest_saved == saved:
            return
        path = Path(self.dirpath) / f"{self.CHECKPOINT_NAME_LAST}{self.FILE_EXTENSION}"
        trainer.save_checkpoint(path, weights_only=self.save_weights_only)  # as ModelCheckpoint saves its own
        self.last_model_path, self._latest_saved = str(path), saved


class RandomState(L.Callback):
    """Saves the random number generators' state in every checkpoint and restores it when training resumes, so
    that a resumed run draws the same dropout masks (and sampled feedback) as one that was never interrupted."""

    _restored: dict | None = None  # the state a resumed run loaded, until training starts

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


class CtrlCBetweenSteps(L.Callback):
    """Ctrl-C during a fit stops it at the end of an optimizer step, never inside one, so that ``last.ckpt`` holds a
    state a resumed run continues from bit for bit.

    Pressed inside a training step (its forward or backward, between the micro-batches of an accumulated step, while
    the next batch is read), the run finishes that step and stops after it; pressed during validation, after the next
    step, or at the end of training. A second Ctrl-C stops at once wherever the run is and saves nothing: ``last.ckpt``
    keeps the last whole step (``ForecastCheckpoint``), which a resumed run continues exactly. Only the main thread can
    take signals, and only a run whose Ctrl-C is Python's own (not ignored, not handled by the caller) is changed.
    """

    def __init__(self) -> None:
        self._previous_handler = None
        self._requested = False
        self._step_at_batch_start = -1

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._requested = False
        main_thread = threading.current_thread() is threading.main_thread()
        if main_thread and signal.getsignal(signal.SIGINT) is signal.default_int_handler:
            self._previous_handler = signal.signal(signal.SIGINT, self._on_ctrl_c)

    def _on_ctrl_c(self, signum: int, frame: object) -> None:
        self._requested = True
        signal.signal(signal.SIGINT, self._previous_handler)  # a second Ctrl-C stops at once

    def on_train_batch_start(self, trainer: L.Trainer, *args) -> None:
        self._step_at_batch_start = trainer.global_step

    def on_train_batch_end(self, trainer: L.Trainer, *args) -> None:
        # The optimizer stepped in this batch (the last micro-batch of an accumulated step): the state is whole.
        if self._requested and trainer.global_step > self._step_at_batch_start:
            raise StoppedBetweenSteps

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        requested = self._requested
        self.teardown(trainer, pl_module, "fit")
        if requested:  # pressed during the last step or the last validation: the run ends here, not in a test
            raise StoppedBetweenSteps

    def teardown(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        if self._previous_handler is not None:
            signal.signal(signal.SIGINT, self._previous_handler)
        self._previous_handler, self._requested = None, False
