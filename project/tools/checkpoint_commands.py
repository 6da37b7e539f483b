"""What the tools that read a checkpoint share: ``--trust CLASS_PATH …`` (import paths outside this project that the
checkpoint may name: ``project.checkpoints.imports``), the checkpoint's model and data module, several checkpoints'
models as one ``Ensemble``, a Trainer that writes nothing of its own, and an output folder checked before the work."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path

import lightning as L

from project.checkpoints import checkpoint_inputs, data_state, load_from_checkpoint, read_checkpoint
from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.files import Inputs, check_name_lengths, check_output
from project.tools.ensemble_model import Ensemble
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
    and scripts open one: read once, built by ``project.checkpoints.load_from_checkpoint``. ``trusted``: the import
    paths outside this project it may name (a tool's ``--trust``)."""
    checkpoint = read_checkpoint(path)
    model = load_from_checkpoint(Forecaster, path, trusted, checkpoint=checkpoint, how_to_trust=HOW_TO_TRUST)
    return checkpoint, model.eval()


def load_ensemble(paths: Sequence[str | Path], trusted: Iterable[str] = ()) -> tuple[list[dict], Ensemble]:
    """The checkpoints at ``paths`` and their models as one ``Ensemble``, which forecasts from the batches of the first
    one's data module (``datamodule_from_checkpoint``). Refused in one line: fewer than two paths, a path given twice,
    a member that forecasts other values (``project.tools.ensemble_model.check_members``), or one trained on other
    columns or scaling than the first (``check_same_data``)."""
    if len(paths) < 2:
        raise InputError(
            f"--ckpt_path: an ensemble needs at least two checkpoints; got {len(paths)} ({', '.join(map(str, paths))})"
        )
    resolved = [Path(path).resolve() for path in paths]
    for position, path in enumerate(paths):
        if resolved[position] in resolved[:position]:
            raise InputError(f"--ckpt_path: {path} is given twice; each member of an ensemble is one checkpoint")
    checkpoints, members = zip(*(load_checkpoint(path, trusted) for path in paths), strict=True)
    ensemble = Ensemble(members, names=[str(path) for path in paths])
    check_same_data(paths, checkpoints)
    return list(checkpoints), ensemble


def check_same_data(paths: Sequence[str | Path], checkpoints: Sequence[dict]) -> None:
    """Refuse in one line a checkpoint whose data module recorded other columns (targets, covariates, categories) or
    other scaling than the first's: its model would read the first's batches as other values."""
    # Members of an ensemble (runs of several seeds) differ in their training order and still read the same batches.
    first = data_state(checkpoints[0], training_order=False)
    for path, checkpoint in zip(paths[1:], checkpoints[1:], strict=True):
        state = data_state(checkpoint, training_order=False)
        differing = sorted(key for key in first.keys() | state.keys() if first.get(key) != state.get(key))
        if differing:
            said = ", ".join(
                "scaler (other scaling statistics)"
                if key == "scaler"
                else f"{key} {state.get(key)!r} ({first.get(key)!r})"
                for key in differing
            )
            raise InputError(
                f"{path} was trained on other data than {paths[0]} (in brackets): {said}; an ensemble's members read "
                "the same batches"
            )


def inputs_of_checkpoints(paths: Sequence[str | Path], checkpoints: Sequence[dict], *sources: str | None) -> list:
    """What a command that reads the checkpoints at ``paths`` reads, which its outputs may never replace: each
    checkpoint and its training data (``project.checkpoints.checkpoint_inputs``), and ``sources``."""
    inputs = list(sources)
    for path, checkpoint in zip(paths, checkpoints, strict=True):
        inputs += checkpoint_inputs(path, checkpoint)
    return inputs


def datamodule_from_checkpoint(
    checkpoint: dict, path: str | Path, source: str | None = None, trusted: Iterable[str] = ()
) -> WindowDataModule:
    """The data module (the class it was trained with) with the checkpoint's data settings and scaling, reading
    ``source`` (a tool's ``--source``: a file with the same columns) or else the checkpoint's own source."""
    state = data_state(checkpoint)
    overrides = {"source": source} if source else {}
    source = source or checkpoint.get("datamodule_hyper_parameters", {}).get("source")
    if state.get("from_dataframe") and source is None:
        raise InputError(f"{path}: the checkpoint was trained on a DataFrame, which it does not store; pass the data")
    return load_from_checkpoint(
        WindowDataModule, path, trusted, overrides, checkpoint=checkpoint, how_to_trust=HOW_TO_TRUST
    )


def quiet_trainer(**settings) -> L.Trainer:
    """A Trainer for a tool's own loops that writes nothing of its own: no logs, no checkpoints, no progress bar."""
    return L.Trainer(
        logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False, **settings
    )


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
