"""What the tools that read a checkpoint share: ``--trust CLASS_PATH …`` (import paths outside this project that the
checkpoint may name, see ``project.imports``), the checkpoint's model and data module, and an output folder checked
before the work."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from project.checkpoints import built_from_checkpoint, read_checkpoint
from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.files import Inputs, check_name_lengths, check_output
from project.training.module import Forecaster

HOW_TO_TRUST = "pass --trust {path}"  # how a tool's refusal says to trust an import path


def trust_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust`` to a tool's parser: the import paths it passes to ``load_checkpoint``."""
    parser.add_argument(
        "--trust",
        nargs="*",
        default=[],
        metavar="CLASS_PATH",
        help="classes outside this project that the checkpoint names (its network, distribution, model or data "
        "class) and that may be imported: importing runs the module's code",
    )


def load_checkpoint(path: str | Path, trusted: Iterable[str] = ()) -> tuple[dict, Forecaster]:
    """The checkpoint at ``path`` and its model (the class it records, CPU, eval mode) with its weights, as the tools
    and scripts open one: read once, built by ``project.checkpoints.built_from_checkpoint``. ``trusted``: the import
    paths outside this project it may name (a tool's ``--trust``)."""
    checkpoint = read_checkpoint(path)
    model = built_from_checkpoint(Forecaster, checkpoint, path, trusted, how_to_trust=HOW_TO_TRUST)
    return checkpoint, model.eval()


def datamodule_from_checkpoint(
    checkpoint: dict, path: str | Path, overrides: dict | None = None, trusted: Iterable[str] = ()
) -> WindowDataModule:
    """The data module (the class it was trained with) with the checkpoint's data settings, its source included,
    and scaling, ``overrides`` aside."""
    state = checkpoint.get(WindowDataModule.__qualname__, {})
    source = (overrides or {}).get("source") or checkpoint.get("datamodule_hyper_parameters", {}).get("source")
    if state.get("from_dataframe") and source is None:
        raise InputError(f"{path}: the checkpoint was trained on a DataFrame, which it does not store; pass the data")
    return built_from_checkpoint(WindowDataModule, checkpoint, path, trusted, overrides, HOW_TO_TRUST)


def check_output_folder(folder: str | Path, names: Iterable[str], inputs: Inputs = (), overwrite: bool = False) -> Path:
    """``folder`` as a Path, after checking each of the files ``names`` that will be written into it as
    ``project.files.check_output`` does. The folder may exist and hold other files: they are left as they are."""
    folder = check_name_lengths(folder)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{folder} is a file; expected a folder to write {', '.join(names)} into")
    inputs = list(inputs)
    for name in names:
        check_output(folder / name, inputs, overwrite)
    return folder
