"""A checkpoint read once, from a file on this machine, with ``weights_only=True`` (reading runs no code), and checked
before anything is built from it: its settings within a config's bounds, its tensors whole, its weights finite."""

from __future__ import annotations

from pathlib import Path

import torch

from project.errors import InputError
from project.files import check_name_lengths, check_settings_bounds

SECTIONS = {"model": "hyper_parameters", "data": "datamodule_hyper_parameters"}  # a config's section → a checkpoint's
# The data module's state that records how one run went through its data (a resumed fit's), not the data.
TRAINING_ORDER = ("shuffle_seed", "training_position")
# Values in a checkpoint's containers: far above a checkpoint's (a panel of 100,000 series records a few per series),
# far below what takes minutes to walk.
MAX_CHECKPOINT_ITEMS = 10_000_000


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path``: a file of this template's, read with ``weights_only=True``, its settings within the
    bounds of a config (``project.files``), each tensor stored whole, its weights finite."""
    if "://" in str(path):  # torch.hub would fetch it
        raise InputError(f"{path}: a checkpoint is read from a file on this machine, never from a URL")
    path = check_name_lengths(path)
    if not path.is_file():
        raise InputError(f"{path}: checkpoint not found")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a truncated, foreign or code-carrying file
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        raise InputError(
            f"{path}: cannot read the checkpoint; is it truncated or not a checkpoint? ({reason})"
        ) from None
    if not (
        isinstance(checkpoint, dict)
        and isinstance(checkpoint.get("state_dict"), dict)
        and isinstance(checkpoint.get("hyper_parameters"), dict)
        and checkpoint["hyper_parameters"]
    ):
        raise InputError(
            f"{path}: not a checkpoint written by `python -m project.cli fit` (no state_dict and settings)"
        )
    for key in SECTIONS.values():  # before the parser walks them
        check_settings_bounds(checkpoint.get(key, {}), f"{path}: its {key}")
    check_tensor_storage(checkpoint, f"{path}: ")
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    return checkpoint


def data_state(checkpoint: dict, class_name: str | None = None, training_order: bool = True) -> dict:
    """The data module's state a checkpoint records (its columns, scaling and, unless not ``training_order``, how the
    run went through its data), where Lightning keeps it: under the name of the data module's class (``class_name``;
    else the class its settings record), or, a class path edited since, under the template's data module's."""
    if class_name is None:
        recorded = checkpoint.get("datamodule_hyper_parameters", {}).get("_class_path") or "WindowDataModule"
        class_name = str(recorded).rsplit(".", 1)[-1]
    state = checkpoint.get(class_name) or checkpoint.get("WindowDataModule") or {}
    return state if training_order else {key: value for key, value in state.items() if key not in TRAINING_ORDER}


def checkpoint_inputs(path: str | Path | None, checkpoint: dict | None, *sources: str | Path | None) -> list:
    """What a command reads, for the output guards (``project.files``; a None is passed over): ``sources``, and with
    the checkpoint at ``path`` the checkpoint and its training data (never replaced, even by a run on other data)."""
    if checkpoint is None:
        return list(sources)
    return [path, checkpoint.get("datamodule_hyper_parameters", {}).get("source"), *sources]


def check_tensor_storage(value: object, where: str = "") -> None:
    """Refuse, anywhere in a checkpoint, a tensor that is not a dense CPU tensor whose stored bytes cover its shape (a
    view repeating a few stored values, a zero stride, would be expanded to its whole shape by the first operation on
    it), and containers past ``MAX_CHECKPOINT_ITEMS`` values (shared or self-containing lists, which unpickling allows,
    would be walked forever). Each container is walked once."""
    pending, seen, items = [value], set(), 0
    while pending:
        item = pending.pop()
        if isinstance(item, torch.Tensor):
            dense = item.layout == torch.strided and item.device.type == "cpu" and not item.is_quantized
            if not dense:
                raise InputError(f"{where}it holds a tensor that is not a dense one on the CPU ({item.layout})")
            if item.numel() * item.element_size() > item.untyped_storage().nbytes():
                raise InputError(
                    f"{where}a tensor of shape {tuple(item.shape)} is stored in {item.untyped_storage().nbytes()} "
                    "bytes (a view that repeats its values); a checkpoint stores each tensor whole"
                )
        elif isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            inner = item.values() if isinstance(item, dict) else item
            items += len(inner)
            if items > MAX_CHECKPOINT_ITEMS:
                raise InputError(f"{where}it holds more than {MAX_CHECKPOINT_ITEMS} values; is it a checkpoint?")
            pending.extend(inner)


def check_finite_weights(state: dict, where: str = "") -> None:
    """A diverged run's weights are refused wherever a checkpoint is loaded: they would forecast NaN."""
    tensors = [value for value in state.values() if isinstance(value, torch.Tensor) and torch.is_floating_point(value)]
    if not all(torch.isfinite(value).all() for value in tensors):
        raise InputError(f"{where}the checkpoint holds non-finite weights (a diverged run); use an earlier checkpoint")
