"""Rolling-origin evaluation: forecast from several origins in the test period, as forecasters evaluate.

    python -m project.tools.backtest --ckpt_path <checkpoint> --origins 6
    python -m project.tools.backtest --ckpt_path <checkpoint> --origins 6 --step 24 --refit --refit-epochs 2
    python -m project.tools.backtest --ckpt_path <seed 0's> <seed 1's> <seed 2's> --origins 6

Origin k of a series is the k-th forecast start in its test period: ``test start + k · step`` (``--step``, the
horizon by default), each forecast taking its context from the rows before its origin and covering ``horizon``
rows; a series whose test period is too short for an origin sits that origin out. The checkpoint's own data is
used unless ``--source`` names other data with the same columns. With ``--refit``, a fresh model with the
checkpoint's settings is trained for each origin on the rows before it (its last rows, as many as the
validation split had, validating), scaled by those rows alone: an expanding-window evaluation. With several
checkpoints, every origin is forecast by their ensemble (``project.tools.ensemble_model``: the mean of the point
forecasts, the members' sample paths pooled) on the first one's data; ``--refit`` takes one checkpoint.

Written to ``--output`` (default: ``backtest/`` in the checkpoint's run; ``ensemble_backtest/`` in the first one's
with several): ``metrics.csv`` (one row per origin and an overall row), ``forecasts.csv`` (every forecast step with
its truth, in original units) and ``backtest.png``.
"""

from __future__ import annotations

import argparse
import copy
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch.utils.data import DataLoader

from project.checkpoints import load_from_checkpoint
from project.data.datamodule import WindowDataModule
from project.data.windows import PanelWindows
from project.domains import PositiveInt
from project.errors import InputError, reported_in_one_line
from project.files import write_atomically
from project.tools.checkpoint_commands import (
    HOW_TO_TRUST,
    check_output_folder,
    datamodule_from_checkpoint,
    inputs_of_checkpoints,
    load_checkpoint,
    load_ensemble,
    quiet_trainer,
    trust_argument,
)
from project.tools.ensemble_model import Ensemble
from project.training.calibration import IntervalCalibration
from project.training.metrics import forecast_scores, unscale
from project.training.module import Forecaster

# The scores of a backtest table, as ``forecast_scores`` names them (the last two: models with a distribution).
BACKTEST_SCORES = ("mse", "mae", "mae_original_units", "smape_original_units", "crps", "coverage")


def origin_windows(datamodule: WindowDataModule, origin: int, step: int) -> PanelWindows:
    """One window per series whose target starts at its origin ``origin`` (0-based) in the test period."""
    test_start, test_end = datamodule.split_rows[:, 1], datamodule.split_rows[:, 2]
    first = test_start + origin * step
    fits = (first >= datamodule.context_length) & (first + datamodule.horizon <= test_end)
    return PanelWindows(
        datamodule.panel,
        datamodule.scaler,
        datamodule.context_length,
        datamodule.horizon,
        first_target=first,
        count=fits.astype(np.int64),
        stride=1,
    )


def evaluate(module: Forecaster | Ensemble, windows: PanelWindows, origin: int, datamodule: WindowDataModule):
    """Metrics of the forecasts from one origin (scaled and original units), and the forecasts as a table."""
    sums: dict[str, float] = {}
    count = 0
    rows = []
    with torch.no_grad():
        for batch in DataLoader(windows, batch_size=256):
            batch = {key: value.to(module.device) for key, value in batch.items()}
            forecast = module.forecast(batch, datamodule.horizon)
            target, loc, scale = batch["target"], batch["loc"], batch["scale"]
            scores = forecast_scores(forecast.point, target, loc, scale, forecast.samples, module.hparams.interval)
            for name in BACKTEST_SCORES:
                if name in scores:
                    _add(sums, name, scores[name].sum())
            predicted, actual = unscale(forecast.point, loc, scale).cpu(), unscale(target, loc, scale).cpu()
            count += target.numel()
            rows += _forecast_rows(batch, predicted, actual, origin, windows, datamodule)
    metrics = {"origin": origin, "windows": len(windows), **{k: float(v) / count for k, v in sums.items()}}
    return metrics, rows


def refit(
    args: argparse.Namespace,
    checkpoint: dict,
    datamodule: WindowDataModule,
    origin: int,
    step: int,
) -> tuple:
    """A fresh model of the checkpoint's class and settings (untrained: built without its weights), trained on the
    rows before ``origin`` of each series for ``args.refit_epochs``."""
    refitted = copy.copy(datamodule)
    rows = datamodule.split_rows.copy()
    cut = rows[:, 1] + origin * step  # each series' origin
    validation = rows[:, 1] - rows[:, 0]
    refitted.split_rows = np.stack([np.maximum(cut - validation, 0), cut, rows[:, 2]], axis=1)
    refitted.scaler, refitted._datasets = None, {}
    refitted.setup("fit")
    L.seed_everything(0)
    module = load_from_checkpoint(
        Forecaster, args.ckpt_path[0], args.trust, checkpoint=checkpoint, weights=False, how_to_trust=HOW_TO_TRUST
    )
    calibration = IntervalCalibration(IntervalCalibration.enabled_in(checkpoint))  # as the fit did
    trainer = quiet_trainer(max_epochs=args.refit_epochs, callbacks=[calibration])
    trainer.fit(module, refitted)
    return module.eval(), refitted


def backtest(
    args: argparse.Namespace, checkpoint: dict, module: Forecaster | Ensemble
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Metrics per origin and overall, and every forecast, of ``module``: the model of ``checkpoint`` (the first of
    ``args.ckpt_path``), or the ensemble of the checkpoints ``args.ckpt_path`` on the first one's data."""
    datamodule = datamodule_from_checkpoint(checkpoint, args.ckpt_path[0], args.source, args.trust)
    datamodule.setup("test")
    step = args.step or datamodule.horizon
    metrics, forecasts = [], []
    for origin in range(args.origins):
        if not len(origin_windows(datamodule, origin, step)):
            raise InputError(
                f"origin {origin} (test start + {origin} × {step} rows) leaves no series room for a forecast of "
                f"{datamodule.horizon} steps; use fewer --origins or a smaller --step"
            )
        model, data = refit(args, checkpoint, datamodule, origin, step) if args.refit else (module, datamodule)
        row, rows = evaluate(model, origin_windows(data, origin, step), origin, data)
        metrics.append(row)
        forecasts += rows
        print(", ".join(f"{k} {v:.4g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()), flush=True)
    table = pd.DataFrame(metrics)
    weights = table["windows"] / table["windows"].sum()
    overall = {"origin": "all", "windows": int(table["windows"].sum())}
    overall.update({name: float((table[name] * weights).sum()) for name in table.columns[2:]})
    return pd.concat([table, pd.DataFrame([overall])], ignore_index=True), pd.DataFrame(forecasts)


def figure(metrics: pd.DataFrame, forecasts: pd.DataFrame, target: str) -> Figure:
    """MAE by origin, and the first series' forecasts from every origin against its truth."""
    plot = Figure(figsize=(11, 3.6))
    by_origin, paths = plot.subplots(1, 2, gridspec_kw={"width_ratios": [1, 2.2]})
    per_origin = metrics[metrics["origin"] != "all"]
    by_origin.bar(per_origin["origin"].astype(str), per_origin["mae_original_units"], color="tab:blue")
    by_origin.set_xlabel("origin")
    by_origin.set_title("MAE, original units", fontsize=9)
    first = forecasts["series"] == forecasts["series"].iloc[0]
    for origin, part in forecasts[first].groupby("origin"):
        x = part["timestamp"] if "timestamp" in part else part["step"] + origin * part["step"].max()
        paths.plot(x, part[f"{target}_actual"], color="black", linewidth=1)
        paths.plot(x, part[target], color="tab:red", linewidth=1.2)
    paths.set_title(f"{target}: forecasts from every origin (red) and the truth", fontsize=9)
    plot.tight_layout()
    return plot


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.backtest", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--ckpt_path",
        type=Path,
        nargs="+",
        required=True,
        help="a checkpoint written by fit, or several, whose ensemble forecasts every origin",
    )
    parser.add_argument("--origins", type=PositiveInt, default=4, help="forecast origins K in the test period")
    parser.add_argument("--step", type=PositiveInt, default=None, help="rows between origins (default: the horizon)")
    parser.add_argument("--source", default=None, help="data file (default: the one the checkpoint was trained on)")
    parser.add_argument(
        "--refit", action="store_true", help="train a fresh model for each origin on the rows before it"
    )
    parser.add_argument("--refit-epochs", type=PositiveInt, default=1, help="epochs of each refit")
    parser.add_argument("--output", type=Path, default=None, help="folder (default: <run>/backtest)")
    parser.add_argument("--overwrite", action="store_true", help="replace files already in --output")
    trust_argument(parser)
    args = parser.parse_args(argv)
    several = len(args.ckpt_path) > 1
    output = args.output or args.ckpt_path[0].parent.parent / ("ensemble_backtest" if several else "backtest")
    with reported_in_one_line():
        # Origins step forward from the test period's start, so that no forecast is scored on training rows.
        if several and args.refit:
            raise InputError(
                f"--refit takes one checkpoint; got {len(args.ckpt_path)}: a refit trains a fresh model from seed 0, "
                "so every member of an ensemble of seeds would be the same model. Backtest each with --refit"
            )
        if several:
            checkpoints, module = load_ensemble(args.ckpt_path, args.trust)
        else:
            checkpoint, module = load_checkpoint(args.ckpt_path[0], args.trust)
            checkpoints = [checkpoint]
        inputs = inputs_of_checkpoints(args.ckpt_path, checkpoints, args.source)
        check_output_folder(output, ("metrics.csv", "forecasts.csv", "backtest.png"), inputs, args.overwrite)
        metrics, forecasts = backtest(args, checkpoints[0], module)
    target = next(c for c in forecasts.columns if c.endswith("_actual")).removesuffix("_actual")
    write_atomically(output / "metrics.csv", lambda temporary: metrics.to_csv(temporary, index=False))
    write_atomically(output / "forecasts.csv", lambda temporary: forecasts.to_csv(temporary, index=False))
    plot = figure(metrics, forecasts, target)
    write_atomically(output / "backtest.png", lambda temporary: plot.savefig(temporary, dpi=110, format="png"))
    print(metrics.to_string(index=False))
    print(f"Wrote {output}/metrics.csv, forecasts.csv and backtest.png")


def _add(sums: dict, name: str, value) -> None:
    sums[name] = sums.get(name, 0.0) + float(value)


def _forecast_rows(batch, predicted, actual, origin: int, windows: PanelWindows, datamodule) -> list[dict]:
    panel, names = datamodule.panel, datamodule.target_names
    rows = []
    for row in range(len(batch["window"])):
        window, series = int(batch["window"][row]), int(batch["series"][row])
        timestamps = windows.target_timestamps(window)
        ids = {column: panel.ids.iloc[series][column] for column in panel.roles.ids}
        for step in range(predicted.shape[1]):
            entry = {**ids, "series": series, "origin": origin, "step": step + 1}
            if timestamps is not None:
                entry["timestamp"] = timestamps[step]
            for channel, name in enumerate(names):
                entry[name] = float(predicted[row, step, channel])
                entry[f"{name}_actual"] = float(actual[row, step, channel])
            rows.append(entry)
    return rows


if __name__ == "__main__":
    main()
