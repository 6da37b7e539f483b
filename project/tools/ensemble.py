"""Forecast and test with several checkpoints at once (runs of several seeds, say) as one ensemble.

    python -m project.tools.ensemble predict --ckpt_path A.ckpt B.ckpt C.ckpt
    python -m project.tools.ensemble test --ckpt_path A.ckpt B.ckpt C.ckpt

The ensemble's point forecast is the mean of the members' point forecasts; for models with a distribution, its sample
paths are the members' paths pooled (the equal-weight mixture) and its quantiles are those of the pool
(``project.tools.ensemble_model``). Every member forecasts from the batches of the first checkpoint's data, or of
``--source`` (a file with the same columns); members trained on other columns or scaling, or forecasting other lengths,
are refused. ``predict`` writes the CSV that ``python -m project.cli predict`` writes for one model (default:
``ensemble_predictions.csv`` in the first checkpoint's run folder); ``test`` prints the test scores of each member and
of the ensemble, so that what the mean gained is in one table. ``python -m project.tools.backtest`` takes several
checkpoints too.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from project.errors import reported_in_one_line
from project.files import check_output
from project.tools.checkpoint_commands import (
    datamodule_from_checkpoint,
    inputs_of_checkpoints,
    load_ensemble,
    quiet_trainer,
    trust_argument,
)
from project.training.metrics import score_names
from project.training.predictions import ForecastWriter

DEFAULT_PREDICTIONS = "ensemble_predictions.csv"  # in the first checkpoint's run folder


def write_predictions(args: argparse.Namespace) -> None:
    """Write the ensemble's forecasts of the checkpoints ``args.ckpt_path`` to ``args.output`` (or the default)."""
    checkpoints, ensemble = load_ensemble(args.ckpt_path, args.trust)
    output = args.output or Path(args.ckpt_path[0]).parent.parent / DEFAULT_PREDICTIONS
    inputs = inputs_of_checkpoints(args.ckpt_path, checkpoints, args.source)
    check_output(output, inputs, args.overwrite)  # before any forecast: a refused output costs nothing
    writer = ForecastWriter(str(output), args.overwrite)
    writer.inputs = inputs
    datamodule = datamodule_from_checkpoint(checkpoints[0], args.ckpt_path[0], args.source, args.trust)
    quiet_trainer(callbacks=[writer]).predict(ensemble, datamodule=datamodule, return_predictions=False)


def scores_table(args: argparse.Namespace) -> pd.DataFrame:
    """The test scores of every member (a row named by its checkpoint) and of the ensemble (the last row), on the
    first checkpoint's test windows (or ``--source``'s), as ``python -m project.cli test`` scores them."""
    checkpoints, ensemble = load_ensemble(args.ckpt_path, args.trust)
    datamodule = datamodule_from_checkpoint(checkpoints[0], args.ckpt_path[0], args.source, args.trust)
    trainer = quiet_trainer()
    models = {str(path): member for path, member in zip(args.ckpt_path, ensemble.members, strict=True)}
    models["ensemble"] = ensemble
    names = score_names(ensemble.has_distribution)  # what both a member and the ensemble log
    rows = []
    for label, model in models.items():
        (logged,) = trainer.test(model, datamodule=datamodule, verbose=False)
        rows.append({"model": label, **{name: logged[f"test/{name}"] for name in names}})
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.ensemble", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, description in (
        ("predict", "write the ensemble's forecasts as a CSV, as `python -m project.cli predict` writes one model's"),
        ("test", "print the test scores of each member and of the ensemble"),
    ):
        command = commands.add_parser(name, help=description, description=description)
        command.add_argument(
            "--ckpt_path", type=Path, nargs="+", required=True, help="two or more checkpoints written by fit"
        )
        command.add_argument(
            "--source", default=None, help="data file (default: the one the first checkpoint was trained on)"
        )
        trust_argument(command)
        if name == "predict":
            command.add_argument(
                "--output", type=Path, default=None, help=f"CSV file (default: <first run>/{DEFAULT_PREDICTIONS})"
            )
            command.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        if args.command == "predict":
            write_predictions(args)
            return
        table = scores_table(args)
    print(table.to_string(index=False, float_format=lambda value: f"{value:.4g}"))


if __name__ == "__main__":
    main()
