"""What a Trainer restores from a checkpoint: what ``TAKEN`` names, and nothing else (``CheckpointGuard``).

Lightning restores a checkpoint's whole state as the file has it: a callback's settings and file paths, an
optimizer's rates, a schedule's settings. Through the guard, validate, test and predict restore the weights and the
data module's state (its columns and scaling, which the data module checks); a resumed fit restores also

- the fit loop's counters, each an integer in 0..``MAX_COUNT`` (a negative or a huge one would train for ever);
- each callback's own state, but ``ModelCheckpoint``'s top-k checkpoints only as files of this run's checkpoint folder
  (a path elsewhere is never read or deleted) and ``EarlyStopping``'s progress under the config's patience (the best
  weights ``AnnealThenStop`` keeps, finite);
- the optimizer's per-parameter state, under the config's hyperparameters (rate, betas, weight decay, ``maximize``);
- the learning-rate schedule as the config builds it, stepped to the restored step (at most the run's steps); what
  else its rate depends on from the checkpoint: where ``WarmupStableDecay``'s decay started, ``ReduceLROnPlateau``'s
  counters, and the rates it lowered, each between its ``min_lr`` and the config's rate;
- the gradient scaler and the random generators, as saved (torch refuses what it cannot take).

What Lightning or torch refuse of a hand-edited entry (a counter of text, a moment of another shape) is left to their
own error: the run stops before its first step, with a non-zero exit.
"""

from __future__ import annotations

import math
import os
import warnings
from pathlib import Path

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.plugins.io import CheckpointIO

from project.checkpoints.reading import check_finite_weights, data_state, read_checkpoint
from project.checkpoints.settings import way_in
from project.errors import InputError

MAX_COUNT = 2**31 - 1  # a loop counter's bound: two billion batches or steps, beyond any run
# What every command restores: the weights and the settings Lightning reads back (the data module's state is added
# under its class's name).
WEIGHTS_AND_SETTINGS = (
    "state_dict",
    "pytorch-lightning_version",
    "hyper_parameters",
    "hparams_name",
    "datamodule_hyper_parameters",
    "datamodule_hparams_name",
)
# Early stopping's progress (AnnealThenStop's: the best weights too); its settings are the config's.
EARLY_STOPPING_PROGRESS = ("wait_count", "stopped_epoch", "best_score", "stopping_reason", "best_weights")
PLATEAU_PROGRESS = ("best", "num_bad_epochs", "cooldown_counter", "last_epoch")


class CheckpointGuard(L.Callback):
    """How a Trainer reads and restores a checkpoint: through ``project.checkpoints.read_checkpoint`` (a file on this
    machine, ``weights_only``, checked), taking only what ``TAKEN`` names. The CLI adds it; give it to a Trainer of
    your own for the same protection, ``L.Trainer(callbacks=[CheckpointGuard()]).fit(model, datamodule,
    ckpt_path=path)``. At ``setup`` it becomes the strategy's reader (what writes checkpoints is left as it was);
    when fit starts, the optimizers' saved hyperparameters give way to the config's; when training starts, the
    schedules are stepped to the restored step."""

    def __init__(self) -> None:
        self._handed_over: dict[Path, dict] = {}
        self._schedules: list | None = None  # a resumed fit's saved schedules, until training starts

    def hand_over(self, path: str | Path, checkpoint: dict) -> None:
        """A checkpoint read already (the CLI's): the Trainer restores from it rather than reading the file again."""
        self._handed_over[Path(path).resolve()] = checkpoint

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Before Lightning reads a checkpoint (it does after setup), and for every command.
        if not isinstance(trainer.strategy.checkpoint_io, GuardedReader):
            trainer.strategy.checkpoint_io = GuardedReader(trainer.strategy.checkpoint_io, self, trainer)

    def read(self, path: str | Path, trainer: L.Trainer) -> dict:
        """The checkpoint at ``path`` as ``trainer``'s command restores it."""
        checkpoint = self._handed_over.pop(Path(path).resolve(), None) if "://" not in str(path) else None
        restored, self._schedules = restorable(read_checkpoint(path) if checkpoint is None else checkpoint, trainer)
        return restored

    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        # The optimizers are built and their saved state not yet loaded.
        for optimizer in trainer.optimizers:
            optimizer.register_load_state_dict_pre_hook(with_the_configs_hyperparameters)

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if self._schedules is not None:
            # The run's steps bound the replay: a checkpoint's counter past them (up to MAX_COUNT) replays no more.
            steps = int(min(trainer.global_step, trainer.estimated_stepping_batches))
            for index, config in enumerate(trainer.lr_scheduler_configs):
                saved = self._schedules[index] if index < len(self._schedules) else None
                replay_schedule(config.scheduler, saved, steps)
            self._schedules = None


class GuardedReader(CheckpointIO):
    """The strategy's ``CheckpointIO`` while a ``CheckpointGuard`` is in use: reading is the guard's; writing and
    removing are the reader's it replaced (Lightning's, or a plugin of yours)."""

    def __init__(self, writer: CheckpointIO, guard: CheckpointGuard, trainer: L.Trainer) -> None:
        self.writer, self.guard, self.trainer = writer, guard, trainer

    def save_checkpoint(self, checkpoint: dict, path, storage_options=None) -> None:
        self.writer.save_checkpoint(checkpoint, path, storage_options)

    def remove_checkpoint(self, path) -> None:
        self.writer.remove_checkpoint(path)

    def load_checkpoint(self, path, map_location=None, weights_only=None) -> dict:
        return self.guard.read(path, self.trainer)

    def teardown(self) -> None:
        self.writer.teardown()


def restorable(checkpoint: dict, trainer: L.Trainer) -> tuple[dict, list | None]:
    """The checkpoint as ``trainer``'s command restores it (``TAKEN``), and for a fit the schedules' saved states,
    which the guard replays when training starts (Lightning is given none)."""
    taken = way_in(trainer.state.fn, weights=False)  # fit --weights loads its weights itself, not through a Trainer
    kept = {key: checkpoint[key] for key in WEIGHTS_AND_SETTINGS if key in checkpoint}
    name = type(trainer.datamodule).__qualname__
    if trainer.datamodule is not None and (state := data_state(checkpoint, name, taken.training_order)):
        kept[name] = state
    if taken.restored != "training":
        return kept, None
    if not isinstance(checkpoint.get("optimizer_states"), list):
        raise InputError(
            f"{trainer.ckpt_path} holds no optimizer state to resume (saved with save_weights_only?); start from its "
            "weights with fit --weights instead"
        )
    kept |= {key: checkpoint[key] for key in ("epoch", "global_step", "optimizer_states") if key in checkpoint}
    if (precision := type(trainer.precision_plugin).__qualname__) in checkpoint:  # the gradient scaler's
        kept[precision] = checkpoint[precision]
    loops = checkpoint.get("loops") if isinstance(checkpoint.get("loops"), dict) else {}
    where = f"{trainer.ckpt_path}: its fit loop"
    kept["loops"] = {"fit_loop": counters(trainer.fit_loop.state_dict(), loops.get("fit_loop"), where)}
    saved = checkpoint.get("callbacks") if isinstance(checkpoint.get("callbacks"), dict) else {}
    kept["callbacks"] = {
        callback.state_key: callback_state(callback, saved[callback.state_key], f"{trainer.ckpt_path}: its ")
        for callback in trainer.callbacks
        if isinstance(saved.get(callback.state_key), dict)
    }
    kept["lr_schedulers"] = []  # rebuilt from the config and replayed (replay_schedule)
    schedules = checkpoint.get("lr_schedulers")
    return kept, schedules if isinstance(schedules, list) else []


def counters(fresh: object, saved: object, where: str) -> object:
    """The fit loop's saved progress with the keys of this Lightning's fit loop (its ``fresh`` state: another loop's,
    or a loader's position, which the data module keeps, is dropped), each counter an integer in 0..MAX_COUNT."""
    if isinstance(fresh, dict):
        saved = saved if isinstance(saved, dict) else {}
        return {key: counters(value, saved.get(key, value), f"{where}.{key}") for key, value in fresh.items()}
    counter = isinstance(fresh, int) and not isinstance(fresh, bool)
    if counter and not (isinstance(saved, int) and not isinstance(saved, bool) and 0 <= saved <= MAX_COUNT):
        raise InputError(f"{where} must be an integer in 0..{MAX_COUNT}, a step count of a run; got {saved!r:.40}")
    return saved


def callback_state(callback: L.Callback, saved: dict, where: str = "") -> dict:
    """A callback's saved state as it restores it: ``ModelCheckpoint``'s top-k checkpoints as files of this run's
    folder (``checkpoint_progress``), ``EarlyStopping``'s progress with the config's settings, any other's as saved
    (its own ``load_state_dict`` takes it, as Lightning does)."""
    if isinstance(callback, ModelCheckpoint):
        return checkpoint_progress(callback, saved)
    if isinstance(callback, EarlyStopping):
        if isinstance(saved.get("best_weights"), dict):  # loaded into the model when AnnealThenStop's decay starts
            check_finite_weights(saved["best_weights"], f"{where}{type(callback).__name__}'s best weights: ")
        return {**callback.state_dict(), **{key: saved[key] for key in EARLY_STOPPING_PROGRESS if key in saved}}
    return saved


def checkpoint_progress(callback: ModelCheckpoint, saved: dict) -> dict:
    """The top-k checkpoints with their scores, each a file of this run's checkpoint folder: a recorded path is taken
    by its file name in the folder (a run folder moved, or resumed from another working directory, keeps its
    checkpoints), and one no file of the folder has (a URL, a file elsewhere) is dropped, so nothing outside is read
    or deleted. The best and the k-th follow from those kept, as Lightning derives them; the folder is the config's."""

    def ours(path: object) -> str | None:
        if not (isinstance(path, str) and path and callback.dirpath) or "://" in path:
            return None
        try:
            mine = Path(callback.dirpath) / Path(path).name
            return os.path.join(callback.dirpath, mine.name) if mine.is_file() and not mine.is_symlink() else None
        except (OSError, ValueError):  # a name no file system takes
            return None

    recorded = saved.get("best_k_models") if isinstance(saved.get("best_k_models"), dict) else {}
    top = {ours(path): score for path, score in recorded.items() if ours(path)}
    state = {**callback.state_dict(), "best_k_models": top, "current_score": saved.get("current_score")}
    if top:  # as ModelCheckpoint._update_best_and_save derives them
        best, worst = (min, max) if callback.mode == "min" else (max, min)
        state["best_model_path"], state["kth_best_model_path"] = best(top, key=top.get), worst(top, key=top.get)
        state["best_model_score"], state["kth_value"] = top[state["best_model_path"]], top[state["kth_best_model_path"]]
    elif best_path := ours(saved.get("best_model_path")):  # no top k (no monitor): the latest checkpoint saved
        state["best_model_path"], state["best_model_score"] = best_path, saved.get("best_model_score")
    if last := ours(saved.get("last_model_path")):
        state["last_model_path"] = last
    return state


def with_the_configs_hyperparameters(optimizer: torch.optim.Optimizer, saved: dict) -> dict:
    """An optimizer's saved state as a resumed fit loads it: each parameter's state as saved, each group's
    hyperparameters (rate, betas, weight decay, ``maximize``) this run's. A load state-dict pre-hook."""
    try:
        groups = [
            {**{key: value for key, value in own.items() if key != "params"}, "params": group["params"]}
            for own, group in zip(optimizer.param_groups, saved["param_groups"], strict=True)
        ]
    except (KeyError, TypeError, ValueError):  # not this optimizer's groups: torch refuses them
        return saved
    return {**saved, "param_groups": groups}


def replay_schedule(scheduler: object, saved: object, steps: int) -> None:
    """The schedule as this run's config builds it, at the restored step: stepped ``steps`` times from its start (a
    schedule's rate is what its steps make it, never read from the checkpoint). What else a schedule's rate depends on
    is its saved progress: the attributes its class names in ``progress`` (``WarmupStableDecay``: where its decay
    started); a ``ReduceLROnPlateau``'s counters, and the rates it lowered, each within its ``min_lr`` and the
    config's rate."""
    saved = saved if isinstance(saved, dict) else {}
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        scheduler.load_state_dict({**scheduler.state_dict(), **{k: saved[k] for k in PLATEAU_PROGRESS if k in saved}})
        rates = saved.get("_last_lr") if isinstance(saved.get("_last_lr"), list) else []
        for group, rate, low in zip(scheduler.optimizer.param_groups, rates, scheduler.min_lrs):
            initial = group.get("initial_lr", group["lr"])
            group["lr"] = initial if math.isnan(float(rate)) else min(max(float(rate), low), initial)
        scheduler._last_lr = [group["lr"] for group in scheduler.optimizer.param_groups]
        return
    for name in getattr(scheduler, "progress", ()):
        if name in saved:
            setattr(scheduler, name, saved[name])
    with warnings.catch_warnings():  # stepped before the optimizer: on purpose, the optimizer's steps are restored
        warnings.simplefilter("ignore")
        for _ in range(steps):
            scheduler.step()
