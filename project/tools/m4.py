"""Reproduce the README's M4 Hourly table: the free-running model and seasonal naive on the same 414 windows.

    python -m project.tools.datasets m4_hourly      # data/m4_hourly.csv
    python -m project.tools.m4                      # trains, forecasts the 48 test hours of every series, scores them

One model for all 414 series (``configs/m4_hourly.yaml``), trained by ``python -m project.cli fit``; its best
checkpoint (by validation loss on the 48 hours before the test hours) forecasts each series' test hours from the
two weeks before them. Scores are M4's: sMAPE and MASE (seasonality 24, scaled by each series' in-sample
seasonal-naive error), averaged over the series. Seasonal naive on the same windows must reproduce M4's published
13.912 / 1.193: that checks the metric code. The table is printed and written to ``--output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from project.checkpoints import read_checkpoint
from project.data import WindowDataModule
from project.errors import reported_in_one_line
from project.files import check_output
from project.tools.results import (
    best_checkpoint,
    best_epoch,
    clock,
    fit,
    forecast_split,
    hardware,
    markdown_table,
    preset_datamodule,
    run_seconds,
    without_point_loss,
    write_table,
)
from project.training.baselines import repeat_last, seasonal_naive
from project.training.regimes import REGIMES, regime_name, regime_settings

CONFIG = Path("configs/m4_hourly.yaml")
SEASON, HORIZON = 24, 48
PUBLISHED = {  # the M4 competition's hourly results (sMAPE, MASE)
    "best hourly entry, Doornik, Castle & Hendry": (8.913, 0.801),
    "ES-RNN, Smyl (M4 winner)": (9.328, 0.893),
    "seasonal naive (sNaive)": (13.912, 1.193),
    "Naive2": (18.383, 2.395),
}


def smape(forecast: np.ndarray, actual: np.ndarray) -> float:
    """Symmetric MAPE in percent as the M4 competition defines it: 200 · mean |y − ŷ| / (|y| + |ŷ|)."""
    return float(np.mean(200 * np.abs(actual - forecast) / (np.abs(actual) + np.abs(forecast))))


def mase(forecast: np.ndarray, actual: np.ndarray, insample: np.ndarray, seasonality: int) -> float:
    """Mean absolute scaled error (M4): the forecast's MAE over the in-sample MAE of the seasonal naive forecast."""
    scale = np.mean(np.abs(insample[seasonality:] - insample[:-seasonality]))
    return float(np.mean(np.abs(actual - forecast)) / scale)


def datamodule(data: Path, **overrides) -> WindowDataModule:
    """The data of the training runs (base.yaml and the M4 preset), set up for testing."""
    return preset_datamodule(CONFIG, data, **overrides)


def scores(forecast: np.ndarray, actual: np.ndarray, insample: list[np.ndarray]) -> tuple[float, float]:
    """M4's sMAPE and MASE, each averaged over the series: forecast and actual (series, 48)."""
    return (
        float(np.mean([smape(f, a) for f, a in zip(forecast, actual)])),
        float(np.mean([mase(f, a, i, SEASON) for f, a, i in zip(forecast, actual, insample)])),
    )


def insample_values(windows: WindowDataModule, series: torch.Tensor) -> list[np.ndarray]:
    """Each series' training hours (everything before its 48 test hours), in original units."""
    panel = windows.panel
    return [
        np.asarray(panel.values[panel.rows(int(s))][: int(panel.observed[int(s)]) - HORIZON, 0], dtype=np.float64)
        for s in series
    ]


def measure_baselines(windows: WindowDataModule) -> list[dict]:
    test = windows.split("test")
    if len(test) != windows.panel.n_series:
        raise ValueError(f"expected one test window per series; got {len(test)} for {windows.panel.n_series}")
    batches = list(DataLoader(test, batch_size=512))
    scaled_context, scaled_actual = (torch.cat([b[key] for b in batches]) for key in ("context", "target"))
    loc, scale = (torch.cat([b[key] for b in batches]) for key in ("loc", "scale"))
    actual = scaled_actual * scale + loc
    insample = insample_values(windows, torch.cat([b["series"] for b in batches]))
    rows = []
    for name, baseline in (
        ("seasonal naive (measured)", lambda context: seasonal_naive(context, HORIZON, SEASON)),
        ("repeat-last (measured)", lambda context: repeat_last(context, HORIZON)),
    ):
        forecast = baseline(scaled_context * scale + loc)
        row = _row(name, *scores(forecast[..., 0].double().numpy(), actual[..., 0].double().numpy(), insample))
        row["crps"] = float((baseline(scaled_context) - scaled_actual).abs().mean())  # a point forecast's CRPS: MAE
        rows.append(row)
    return rows


def train_and_score(regime: str, data: Path, windows: WindowDataModule, logs: Path, extra: list[str]) -> dict:
    settings = [f"--model.{key}={value}" for key, value in regime_settings(regime).items()]
    run, seconds = fit([CONFIG], [f"--data.source={data}", *settings, *extra], logs, f"m4_hourly_{regime}")
    return score_checkpoint(best_checkpoint(run), windows, seconds)


def score_checkpoint(checkpoint: Path, windows: WindowDataModule, seconds: float | None = None) -> dict:
    """sMAPE and MASE (and, with a distribution, CRPS, coverage and width) of a checkpoint on the test windows."""
    settings = read_checkpoint(checkpoint)["hyper_parameters"]
    regime = regime_name(settings["training_mode"], settings["feedback"])
    forecasts = forecast_split(checkpoint, windows, "test")
    smape_, mase_ = scores(
        forecasts["point"][..., 0].double().numpy(),
        forecasts["target"][..., 0].double().numpy(),
        insample_values(windows, forecasts["series"]),
    )
    name = regime.replace("_", " ")
    if settings["distribution"] != "none":
        name += f", {settings['distribution'].replace('_', '-')} distribution"
    row = _row(f"{name} (this template)", smape_, mase_, seconds, best_epoch(checkpoint))
    if "crps" in forecasts:
        row.update({name: float(forecasts[name].mean()) for name in ("crps", "covered", "width")})
    return row


def markdown(rows: list[dict], hardware_name: str) -> str:
    """The table; with a probabilistic model also CRPS, coverage and width of the central 80% interval, on values
    scaled per series (a point forecast's CRPS is its mean absolute error)."""
    probabilistic = any("covered" in row for row in rows)
    header = ["model", "sMAPE", "MASE"]
    header += ["CRPS (scaled)", "80% coverage", "80% width (scaled)"] if probabilistic else []
    cells = []
    for row in rows:
        line = [row["model"], f"{row['smape']:.3f}", f"{row['mase']:.3f}"]
        if probabilistic:
            line += [f"{row[k]:.3f}" if k in row else "–" for k in ("crps", "covered", "width")]
        cells.append([*line, clock(row)])
    caption = (
        f"M4 Hourly, 414 series, horizon 48, sMAPE and MASE (seasonality 24) averaged over series; {hardware_name}."
    )
    return markdown_table(caption, [*header, "wall-clock (train + test)"], cells)


def _row(name: str, smape_: float, mase_: float, seconds: float | None = None, epoch: int | None = None) -> dict:
    return {"model": name, "smape": smape_, "mase": mase_, "seconds": seconds, "best_epoch": epoch}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.m4", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/m4_hourly.csv"), help="from project.tools.datasets")
    parser.add_argument("--regimes", nargs="*", default=["free_running_detach"], choices=list(REGIMES))
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument("--output", type=Path, default=Path("results/m4_hourly.md"), help="Markdown table to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--ckpt_path", type=Path, nargs="*", default=None, help="score these checkpoints instead of training"
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    extra = without_point_loss(extra)
    if not args.data.is_file():
        parser.error(f"{args.data}: not found; run python -m project.tools.datasets m4_hourly")
    with reported_in_one_line():
        check_output(args.output, [args.data, *(args.ckpt_path or [])], args.overwrite)  # before training, not after
        for checkpoint in args.ckpt_path or []:  # a bad checkpoint is refused before the data is read
            read_checkpoint(checkpoint)
        windows = datamodule(args.data)
        rows = measure_baselines(windows)
        if args.ckpt_path:  # timed by the events its run logged, from training to test
            rows += [score_checkpoint(c, windows, run_seconds(c.parent.parent)) for c in args.ckpt_path]
        else:
            rows += [train_and_score(regime, args.data, windows, args.logs, extra) for regime in args.regimes]
        rows += [_row(f"{name} (published)", *values) for name, values in PUBLISHED.items()]
        write_table(args.output, markdown(rows, hardware()))


if __name__ == "__main__":
    main()
