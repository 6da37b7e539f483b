"""Draw the test forecasts of a checkpoint, on the data it was trained on unless ``--source`` says otherwise:

    python -m project.tools.figure lightning_logs/synthetic_series/version_0/checkpoints/last.ckpt --output forecast.png

The same picture ``ForecastFigures`` logs to TensorBoard during training (``project.training.figures``).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from project.checkpoints import checkpoint_inputs
from project.errors import reported_in_one_line
from project.files import check_output, write_atomically
from project.tools.checkpoint_commands import datamodule_from_checkpoint, load_checkpoint, trust_argument
from project.training.figures import FigureWindows, forecast_figure


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m project.tools.figure", description="Plot test forecasts of a checkpoint."
    )
    parser.add_argument("checkpoint", type=Path, help="a .ckpt written by `python -m project.cli fit`")
    parser.add_argument("--source", default=None, help="data file (default: the one the checkpoint was trained on)")
    parser.add_argument(
        "--windows", type=FigureWindows, default=3, help="test windows to draw (1 to 50), spread over the test split"
    )
    parser.add_argument("--output", type=Path, default=Path("forecast.png"))
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    trust_argument(parser)
    args = parser.parse_args(argv)
    with reported_in_one_line():
        checkpoint, model = load_checkpoint(args.checkpoint, args.trust)
        inputs = checkpoint_inputs(args.checkpoint, checkpoint, args.source)
        check_output(args.output, inputs, args.overwrite)
        datamodule = datamodule_from_checkpoint(checkpoint, args.checkpoint, args.source, args.trust)
        figure = forecast_figure(model, datamodule, "test", args.windows)
        write_atomically(args.output, lambda temporary: figure.savefig(temporary, dpi=110, format="png"))
    print(f"Wrote {args.output}")


if __name__ == "__main__":
    main()
