"""What the tools that read a checkpoint share: ``--trust CLASS_PATH …`` (classes outside this project the checkpoint
may name, see ``project.imports``), the checkpoint's data module, and an output folder checked before the work."""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from pathlib import Path

from project.checkpoints import recorded_class
from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.files import Inputs, check_name_lengths, check_output
from project.imports import CLI_TRUST, trust

TOOL_TRUST = dict.fromkeys(CLI_TRUST, "--trust")


class TrustAction(argparse.Action):
    """Trusts the class paths as soon as they are parsed."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        trust(values, TOOL_TRUST)
        setattr(namespace, self.dest, values)


def trust_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust`` to a tool's parser; a refusal then names it."""
    trust([], TOOL_TRUST)
    parser.add_argument(
        "--trust",
        nargs="*",
        default=[],
        metavar="CLASS_PATH",
        action=TrustAction,
        help="classes outside this project that the checkpoint names (its network, distribution, model or data "
        "class) and that may be imported: importing runs the module's code",
    )


def datamodule_from_checkpoint(checkpoint: dict, path: str | Path, overrides: dict | None = None) -> WindowDataModule:
    """The data module (the class it was trained with) with the checkpoint's data settings, its source included,
    and scaling, ``overrides`` aside."""
    trained = checkpoint.get("datamodule_hyper_parameters", {})
    settings = {k: v for k, v in trained.items() if not k.startswith("_")}
    settings.update(overrides or {})
    state = checkpoint.get(WindowDataModule.__qualname__, {})
    if state.get("from_dataframe") and settings.get("source") is None:
        raise InputError(f"{path}: the checkpoint was trained on a DataFrame, which it does not store; pass the data")
    datamodule = recorded_class(trained, WindowDataModule, path)(**settings)
    if state:
        datamodule.load_state_dict(state)
    return datamodule


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
