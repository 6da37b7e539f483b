"""What a fit resumed from a checkpoint takes from it: the state named here, each entry checked, and nothing else.

Lightning restores a checkpoint's whole state as the file has it: its callbacks' settings and file paths, its
optimizer's rates, its loops' counters. A resumed fit (``fit --ckpt_path``) restores instead, and only:

- the weights, read and checked by ``project.checkpoints.read_checkpoint`` (shapes, storage, finite values);
- the fit loop's progress: the counters and flags of this Lightning's own fit loop, each counter an integer in
  0..``MAX_COUNT``, an event's stages in the order Lightning counts them (``fit_loop_state``);
- the optimizer's per-parameter state, each entry what its class keeps for the parameter (``kept_state``), finite,
  under this run's hyperparameters: the rate, betas, weight decay and ``maximize`` are the config's
  (``optimizer_state``);
- the learning-rate schedule as this run's config builds it, stepped to the restored step (``replay_schedule``); a
  ``ReduceLROnPlateau``'s counters and the rates it lowered, within the config's (Lightning steps a plateau schedule
  after the epoch's end hooks, where ``last.ckpt`` is saved, and not again when a resumed run restarts there: resumed
  from such a checkpoint, the schedule is one step behind an uninterrupted run's);
- the progress of the template's callbacks, their settings from this run's config (``callback_states``): the top-k
  checkpoints that are files of this run's checkpoint folder, with their scores (a path elsewhere is dropped, never
  read or deleted); early stopping's wait and best score; the random generators' state, which torch must accept; a
  callback of yours restores its state through a ``checked_state(saved, where)`` method (else a warning names it);
- the fp16 gradient scaler's scale and growth count, its factors from the config;
- the data module's state, which the data module checks (``WindowDataModule.load_state_dict``).

Validate, test and predict take the weights and the data module's state only. A fit from someone else's weights
(``fit --weights``) restores nothing through Lightning: the CLI loads the weights, and the data's scaling and
vocabularies they read (``project.checkpoints.load_data_state``). A value outside these is one line naming the
checkpoint and the entry. ``Forecaster`` applies this module: ``on_load_checkpoint`` (before Lightning restores
anything), an optimizer load hook, ``on_train_start``.
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.callbacks import EarlyStopping, ModelCheckpoint
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
from lightning.pytorch.utilities import rank_zero_warn

from project.errors import InputError
from project.training.callbacks import RandomState

MAX_COUNT = 2**31 - 1  # a loop counter's bound: two billion batches or steps, beyond any run
# What every command takes: the weights, the settings (parsed by the allowlist) and the Lightning version they were
# written with. The data module's state is added under its class's name.
SETTINGS_AND_WEIGHTS = (
    "state_dict",
    "pytorch-lightning_version",
    "hyper_parameters",
    "hparams_name",
    "datamodule_hyper_parameters",
    "datamodule_hparams_name",
)
# Lightning's order of an event's counters: a later stage never counts more than an earlier one.
STAGES = ("ready", "started", "processed", "completed")


def restorable(checkpoint: dict, trainer: L.Trainer, datamodule: object = None) -> tuple[dict, list | None]:
    """The checkpoint as this run restores it, and, for a fit, the schedules' saved states (``replay_schedule`` reads
    them once training starts; Lightning is given none). Refuses in one line a named entry that is malformed."""
    where = trainer.ckpt_path or "the checkpoint"
    kept = {key: checkpoint[key] for key in SETTINGS_AND_WEIGHTS if key in checkpoint}
    if datamodule is not None and (key := type(datamodule).__qualname__) in checkpoint:
        kept[key] = checkpoint[key]
    if trainer.state.fn != "fit":
        return kept, None
    optimizer_states = checkpoint.get("optimizer_states")
    if not (isinstance(optimizer_states, list) and optimizer_states and isinstance(optimizer_states[0], dict)):
        raise InputError(
            f"{where} holds no optimizer state to resume (saved with save_weights_only?); start from its weights with "
            "fit --weights instead"
        )
    schedules = checkpoint.get("lr_schedulers")
    kept |= {
        "epoch": _count(checkpoint.get("epoch", 0), f"{where}: epoch"),
        "global_step": _count(checkpoint.get("global_step", 0), f"{where}: global_step"),
        "loops": {"fit_loop": fit_loop_state(trainer, _entry(checkpoint, "loops", where).get("fit_loop"), where)},
        "callbacks": callback_states(trainer, _entry(checkpoint, "callbacks", where), where),
        "optimizer_states": optimizer_states,
        "lr_schedulers": [],  # rebuilt from the config (replay_schedule), never loaded
    }
    precision = trainer.precision_plugin
    if (fresh := precision.state_dict()) and type(precision).__qualname__ in checkpoint:
        saved = _entry(checkpoint, type(precision).__qualname__, where)
        kept[type(precision).__qualname__] = {
            **fresh,
            "scale": _number(saved.get("scale"), f"{where}: the gradient scaler's scale", low=0, open_low=True),
            "_growth_tracker": _count(saved.get("_growth_tracker"), f"{where}: the gradient scaler's growth count"),
        }
    return kept, schedules if isinstance(schedules, list) else []


def fit_loop_state(trainer: L.Trainer, saved: object, where: str) -> dict:
    """The fit loop's saved progress in the shape of this Lightning's own fit loop (its fresh ``state_dict``): each
    counter an integer in 0..MAX_COUNT, each flag a bool, an event's stages in the order Lightning counts them (ready ≥
    started ≥ processed ≥ completed); keys the fresh loop lacks (another loop's, a loader's position: the data module
    keeps that) dropped."""
    return _shaped_like(trainer.fit_loop.state_dict(), saved, f"{where}: its fit loop's progress")


def _shaped_like(fresh: object, saved: object, where: str) -> object:
    """``saved`` with the keys and kinds of ``fresh``: a mapping's keys, an integer counter, a bool."""
    if isinstance(fresh, dict):
        if not isinstance(saved, dict):
            raise InputError(f"{where} must be a mapping; got {type(saved).__name__}")
        missing = [key for key in fresh if key not in saved]
        if missing:
            raise InputError(f"{where} lacks {', '.join(map(str, missing[:3]))}")
        state = {key: _shaped_like(value, saved[key], f"{where}.{key}") for key, value in fresh.items()}
        stages = [stage for stage in STAGES if isinstance(state.get(stage), int)]
        counted = [state[stage] for stage in stages]
        if counted != sorted(counted, reverse=True):
            raise InputError(f"{where} counts {counted} for {', '.join(stages)}; each at most the last")
        return state
    if isinstance(fresh, bool):
        if not isinstance(saved, bool):
            raise InputError(f"{where} must be true or false; got {saved!r:.40}")
        return saved
    if isinstance(fresh, int):
        return _count(saved, where)
    return fresh  # nothing else of the loops is restored


def callback_states(trainer: L.Trainer, saved: dict, where: str) -> dict:
    """The saved state of each of this run's callbacks that ``RESTORED_CALLBACKS`` names, or that checks its own
    (a ``checked_state(saved, where) -> dict`` method: yours), merged into its fresh state (its settings, from the
    config). Every other callback's saved state is not restored, and a warning names it."""
    states, dropped = {}, []
    for callback in trainer.callbacks:
        if callback.state_key not in saved:
            continue
        if hasattr(callback, "checked_state"):
            check = type(callback).checked_state  # called as check(callback, state, where), as the table's are
        else:
            check = next((f for cls, f in RESTORED_CALLBACKS.items() if isinstance(callback, cls)), None)
        if check is None:  # named when it would have restored something (Lightning's default restores nothing)
            if type(callback).load_state_dict is not L.Callback.load_state_dict:
                dropped.append(type(callback).__name__)
            continue
        named = f"{where}: its {type(callback).__name__} state"
        state = saved[callback.state_key]
        if not isinstance(state, dict):
            raise InputError(f"{named} must be a mapping; got {type(state).__name__}")
        states[callback.state_key] = {**callback.state_dict(), **check(callback, state, named)}
    if dropped:
        rank_zero_warn(
            f"{where}: the saved state of {', '.join(dropped)} is not restored (a callback restores its state when it "
            "checks it: a checked_state method, project/training/resume.py)"
        )
    return states


def _checkpoint_progress(callback: ModelCheckpoint, saved: dict, where: str) -> dict:
    """The top-k checkpoints with their scores, each a file of this run's checkpoint folder: a recorded path is taken
    by its file name in the folder (a run folder moved, or resumed from another working directory, keeps its
    checkpoints), and one no file of the folder has (a URL, a file elsewhere) is dropped, so nothing outside is read
    or deleted. The best and the k-th follow from those kept, as Lightning derives them; the monitored metric and the
    folder are the config's."""

    def ours(path: object) -> str | None:
        if not (isinstance(path, str) and path and callback.dirpath) or "://" in path:
            return None
        try:
            mine = Path(callback.dirpath) / Path(path).name
            return os.path.join(callback.dirpath, mine.name) if mine.is_file() and not mine.is_symlink() else None
        except (OSError, ValueError):  # a name no file system takes
            return None

    saved_top = saved.get("best_k_models") or {}
    if not isinstance(saved_top, dict):
        raise InputError(f"{where}: best_k_models must be a mapping; got {type(saved_top).__name__}")
    top = {ours(path): _score(score, f"{where}: best_k_models") for path, score in saved_top.items() if ours(path)}
    state: dict[str, Any] = {
        "best_k_models": top,
        "current_score": _score(saved.get("current_score"), f"{where}: current_score"),
    }
    if top:  # as ModelCheckpoint._update_best_and_save derives them
        best, worst = (min, max) if callback.mode == "min" else (max, min)
        state["best_model_path"] = best(top, key=top.get)
        state["kth_best_model_path"] = worst(top, key=top.get)
        state["best_model_score"], state["kth_value"] = top[state["best_model_path"]], top[state["kth_best_model_path"]]
    elif best_path := ours(saved.get("best_model_path")):  # no top k (no monitor): the latest checkpoint saved
        state["best_model_path"] = best_path
        state["best_model_score"] = _score(saved.get("best_model_score"), f"{where}: best_model_score")
    if last := ours(saved.get("last_model_path")):
        state["last_model_path"] = last
    return state


def _early_stopping_progress(callback: EarlyStopping, saved: dict, where: str) -> dict:
    """The checks waited and the best score so far; the patience and the thresholds are the config's."""
    reason = saved.get("stopping_reason", 0)
    if reason not in {member.value for member in EarlyStoppingReason} or isinstance(reason, bool):
        raise InputError(f"{where}: stopping_reason must be one of Lightning's EarlyStoppingReason; got {reason!r:.40}")
    return {
        "wait_count": _count(saved.get("wait_count"), f"{where}: wait_count"),
        "stopped_epoch": _count(saved.get("stopped_epoch"), f"{where}: stopped_epoch"),
        "best_score": _score(saved.get("best_score"), f"{where}: best_score"),
        "stopping_reason": reason,
    }


def _random_state(callback: RandomState, saved: dict, where: str) -> dict:
    """The generators' states: the CPU's, as long as this machine's and accepted by torch (which checks its fields), and
    the CUDA devices' where this machine has as many."""
    fresh = callback.state_dict()
    state = {"torch": _bytes_like(saved.get("torch"), fresh["torch"], f"{where}: torch")}
    try:
        torch.Generator().set_state(state["torch"])
    except RuntimeError as error:
        raise InputError(f"{where}: torch refuses its generator state ({error})") from None
    if "cuda" in fresh and isinstance(saved.get("cuda"), list) and len(saved["cuda"]) == len(fresh["cuda"]):
        state["cuda"] = [_bytes_like(s, f, f"{where}: cuda") for s, f in zip(saved["cuda"], fresh["cuda"])]
    return state


# The template's callbacks whose progress a resumed fit takes (a callback of another class starts fresh).
RESTORED_CALLBACKS: dict[type, Callable[[Any, dict, str], dict]] = {
    ModelCheckpoint: _checkpoint_progress,
    EarlyStopping: _early_stopping_progress,
    RandomState: _random_state,
}


def optimizer_state(optimizer: torch.optim.Optimizer, saved: dict, where: str) -> dict:
    """``saved`` (an optimizer's ``state_dict``) as ``optimizer`` loads it: each parameter's saved state, checked
    against what this optimizer keeps for that parameter (``kept_state``), under ``optimizer``'s own parameter groups,
    whose hyperparameters are this run's config. Registered as the optimizer's ``load_state_dict`` pre-hook."""
    named = f"{where}: its optimizer state"
    groups, saved_groups = optimizer.param_groups, saved.get("param_groups")
    sizes = [len(group["params"]) for group in groups]
    if not (
        isinstance(saved_groups, list)
        and isinstance(saved.get("state"), dict)
        and all(isinstance(g, dict) and isinstance(g.get("params"), list) for g in saved_groups)
        and [len(g["params"]) for g in saved_groups] == sizes
    ):
        raise InputError(f"{named} does not have this optimizer's {len(groups)} parameter groups of {sizes} parameters")
    parameters = [p for group in groups for p in group["params"]]
    saved_ids = [i for group in saved_groups for i in group["params"]]
    kept, size = kept_state(optimizer), sum(parameter.numel() for parameter in parameters)
    state = {}
    for position, saved_id in enumerate(saved_ids):
        entry = saved["state"].get(saved_id) if isinstance(saved_id, int) else None
        if entry is not None:
            fresh = kept[position] if kept is not None else None
            state[position] = _parameter_state(entry, fresh, size, f"{named} of parameter {position}")
    positions = iter(range(len(parameters)))
    own_groups = [
        {**{k: v for k, v in group.items() if k != "params"}, "params": [next(positions) for _ in group["params"]]}
        for group in groups
    ]
    return {"state": state, "param_groups": own_groups}


def kept_state(optimizer: torch.optim.Optimizer) -> list[dict] | None:
    """What ``optimizer`` keeps for each parameter (its state's keys, and each tensor's shape), learned from one step of
    its class, with its settings, on the meta device: no memory, nothing of the real parameters touched. None where
    the class cannot step there (LBFGS, ASGD, an optimizer of yours that reads its values): ``_checked`` then takes
    finite values of at most the parameters' size."""
    groups = [
        {**group, "params": [torch.nn.Parameter(torch.empty_like(p, device="meta")) for p in group["params"]]}
        for group in optimizer.param_groups
    ]
    parameters = [p for group in groups for p in group["params"]]
    for parameter in parameters:
        parameter.grad = torch.empty_like(parameter)
    try:
        stepped = type(optimizer)(groups)
        stepped.step()
    except Exception:  # whatever the class raises there only means there is no template: the generic check applies
        return None
    return [stepped.state.get(parameter, {}) for parameter in parameters]


def _parameter_state(entry: object, fresh: dict | None, size: int, where: str) -> dict:
    """A parameter's saved optimizer state: the keys this optimizer keeps (``fresh``), each value of the kind and shape
    it keeps (``_checked``), a step count a non-negative whole number."""
    if not isinstance(entry, dict):
        raise InputError(f"{where} must be a mapping; got {type(entry).__name__}")
    if fresh is not None and set(entry) != set(fresh):
        raise InputError(f"{where} holds {', '.join(map(str, entry))}; this optimizer keeps {', '.join(fresh)}")
    for key, value in entry.items():
        _checked(value, fresh[key] if fresh is not None else _NO_TEMPLATE, size, f"{where}: {key}")
        if key == "step" and value is not None and not (float(value) >= 0 and float(value).is_integer()):
            raise InputError(f"{where}: step must be a non-negative whole number; got {float(value)}")
    return entry


_NO_TEMPLATE = object()  # an optimizer that cannot step on the meta device: no template of its state


def _checked(value: object, kept: object, size: int, where: str) -> None:
    """``value`` as the optimizer keeps it (``kept``): a finite tensor of its shape, a finite number, None. Without a
    template: None, a finite number, or a finite tensor of at most the parameters' ``size`` values, or lists of them."""
    if kept is _NO_TEMPLATE:
        if isinstance(value, (list, tuple)):
            for item in value:
                _checked(item, _NO_TEMPLATE, size, where)
            return
        fits = value is None or (isinstance(value, torch.Tensor) and value.numel() <= size)
        fits |= isinstance(value, (int, float)) and not isinstance(value, bool)
        kind = f"None, a number or a tensor of at most {size} values"
    elif isinstance(kept, torch.Tensor):
        fits = isinstance(value, torch.Tensor) and value.shape == kept.shape
        kind = f"a tensor of shape {tuple(kept.shape)}"
    else:
        fits, kind = type(value) is type(kept), type(kept).__name__
    if fits and isinstance(value, torch.Tensor) and value.is_floating_point():
        fits = bool(torch.isfinite(value).all())
    elif fits and isinstance(value, float):
        fits = math.isfinite(value)
    if not fits:
        got = f"a tensor of shape {tuple(value.shape)}" if isinstance(value, torch.Tensor) else f"{value!r:.40}"
        raise InputError(f"{where} must be {kind}, finite; got {got}")


def replay_schedule(scheduler: object, saved: object, steps: int, where: str) -> None:
    """The schedule as this run's config builds it, at the restored step: stepped ``steps`` times from its start (a
    schedule's rate at a step is what its own steps make it, so the rates are never read from the checkpoint). A
    ``ReduceLROnPlateau`` depends on the metrics it saw: its counters are restored, and the rates it lowered, each
    between its ``min_lr`` and the config's rate."""
    optimizer = scheduler.optimizer
    if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        named = f"{where}: its ReduceLROnPlateau state"
        if not isinstance(saved, dict):
            return
        rates = saved.get("_last_lr")
        initial = [group.get("initial_lr", group["lr"]) for group in optimizer.param_groups]
        if not (isinstance(rates, list) and len(rates) == len(initial)):
            raise InputError(f"{named}: _last_lr must list a rate for each of {len(initial)} parameter groups")
        for group, rate, top, low in zip(optimizer.param_groups, rates, initial, scheduler.min_lrs, strict=True):
            group["lr"] = _number(rate, f"{named}: _last_lr", low=low, high=top)
        scheduler.load_state_dict(
            {
                **scheduler.state_dict(),
                "best": _number(saved.get("best"), f"{named}: best", finite=False),
                "num_bad_epochs": _count(saved.get("num_bad_epochs"), f"{named}: num_bad_epochs"),
                "cooldown_counter": _count(saved.get("cooldown_counter"), f"{named}: cooldown_counter"),
                "last_epoch": _count(saved.get("last_epoch"), f"{named}: last_epoch"),
                "_last_lr": [group["lr"] for group in optimizer.param_groups],
            }
        )
        return
    with warnings.catch_warnings():  # stepped before the optimizer: on purpose, the optimizer's steps are restored
        warnings.simplefilter("ignore")
        for _ in range(steps):
            scheduler.step()


def _entry(checkpoint: dict, key: str, where: str) -> dict:
    value = checkpoint.get(key, {})
    if not isinstance(value, dict):
        raise InputError(f"{where}: its {key} must be a mapping; got {type(value).__name__}")
    return value


def _count(value: object, where: str) -> int:
    if not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_COUNT):
        raise InputError(f"{where} must be an integer in 0..{MAX_COUNT}; got {value!r:.40}")
    return value


def _number(
    value: object,
    where: str,
    low: float = -math.inf,
    high: float = math.inf,
    open_low: bool = False,
    finite: bool = True,
) -> float:
    one = isinstance(value, (int, float)) or (isinstance(value, torch.Tensor) and value.numel() == 1)
    number = float(value) if one and not isinstance(value, bool) else None
    inside = number is not None and (math.isfinite(number) or not finite) and not math.isnan(number)
    if not (inside and (low < number if open_low else low <= number) and number <= high):
        bounds = f"{'(' if open_low else '['}{low:g}, {high:g}]"
        raise InputError(f"{where} must be a {'finite ' if finite else ''}number in {bounds}; got {value!r:.40}")
    return number


def _score(value: object, where: str) -> torch.Tensor | None:
    """A monitored score: None (none yet) or a number, infinite allowed (the start of a search), never NaN; a tensor
    keeps its type, which the comparisons with later scores read."""
    if value is None:
        return None
    number = _number(value, where, finite=False)
    return value.detach().clone().reshape(()) if isinstance(value, torch.Tensor) else torch.tensor(number)


def _bytes_like(saved: object, fresh: torch.Tensor, where: str) -> torch.Tensor:
    """A generator's saved state: bytes, as many as this machine's generator holds."""
    if not (isinstance(saved, torch.Tensor) and saved.dtype == torch.uint8 and saved.shape == fresh.shape):
        shape = tuple(saved.shape) if isinstance(saved, torch.Tensor) else type(saved).__name__
        raise InputError(f"{where}: a generator's state is {tuple(fresh.shape)} bytes; got {shape}")
    return saved
