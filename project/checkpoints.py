"""Reading a checkpoint before anything trusts it, and rebuilding the data it was trained on.

Every problem is one line: a missing, truncated or foreign file, a diverged run's non-finite weights.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.model.network import build_network
from project.training.module import Forecaster, check_finite_weights


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path``, checked to be a finite ``Forecaster`` checkpoint of this template whose weights
    fit the settings it records. Unpickled with ``weights_only=True``: a file cannot run code by being read.

    Every command and script opens checkpoints through this function, ``load_forecaster`` or ``load_checkpoint``.
    """
    return load_checkpoint(path)[0]


def load_forecaster(path: str | Path) -> Forecaster:
    """The ``Forecaster`` of the checkpoint at ``path`` (read by ``read_checkpoint``), on the CPU, in eval mode."""
    return load_checkpoint(path)[1]


def load_checkpoint(path: str | Path) -> tuple[dict, Forecaster]:
    """The checked checkpoint at ``path`` and its ``Forecaster`` (CPU, eval mode), for a command that needs both:
    checking the weights builds the model anyway, so it is read and built once."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: checkpoint not found")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a truncated, foreign or code-carrying file
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        raise InputError(
            f"{path}: cannot read the checkpoint; is it truncated or not a checkpoint? ({reason})"
        ) from None
    if (
        not isinstance(checkpoint, dict)
        or not isinstance(checkpoint.get("state_dict"), dict)
        or not isinstance(checkpoint.get("hyper_parameters"), dict)
        or not checkpoint["hyper_parameters"]
    ):
        raise InputError(
            f"{path}: not a checkpoint written by `python -m project.cli fit` (it has no state_dict and "
            "hyper_parameters)"
        )
    settings = {k: v for k, v in checkpoint["hyper_parameters"].items() if not k.startswith("_")}
    unknown = sorted(set(settings) - set(inspect.signature(Forecaster.__init__).parameters))
    if unknown:
        raise InputError(f"{path}: written for another model; its settings {', '.join(unknown)} are not Forecaster's")
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    try:
        module = Forecaster(**{**settings, "network": build_network(settings.get("network"), f"{path}: ")})
    except (InputError, TypeError, ValueError) as error:
        raise InputError(f"{path}: its settings do not build a Forecaster ({str(error).splitlines()[0]})") from None
    state = dict(checkpoint["state_dict"])
    module.on_load_checkpoint({"state_dict": state})
    try:
        module.load_state_dict(state)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise InputError(
            f"{path}: its weights do not fit the settings it records ({' '.join(lines[1:3])[:200]})"
        ) from None
    return checkpoint, module.eval()


def datamodule_from_checkpoint(checkpoint: dict, path: str | Path, overrides: dict | None = None) -> WindowDataModule:
    """The data module with the checkpoint's data settings (its source included) and scaling, ``overrides`` aside."""
    settings = {k: v for k, v in checkpoint.get("datamodule_hyper_parameters", {}).items() if not k.startswith("_")}
    settings.update(overrides or {})
    state = checkpoint.get(WindowDataModule.__qualname__, {})
    if state.get("from_dataframe") and settings.get("source") is None:
        raise InputError(f"{path}: the checkpoint was trained on a DataFrame, which it does not store; pass the data")
    datamodule = WindowDataModule(**settings)
    if state:
        datamodule.load_state_dict(state)
    return datamodule


def find_last_checkpoint(log_dir: str | Path) -> Path | None:
    """The ``last.ckpt`` of the newest ``version_N`` run under ``log_dir`` (a logger's save_dir/name folder)."""
    runs = sorted(
        (p for p in Path(log_dir).glob("version_*/checkpoints/last.ckpt") if p.parts[-3].split("_")[-1].isdigit()),
        key=lambda p: int(p.parts[-3].split("_")[-1]),
    )
    return runs[-1] if runs else None
