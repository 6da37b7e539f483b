"""Reproduce the README's M4 Hourly table: the free-running model and seasonal naive on the same 414 windows.

    python -m project.tools.datasets m4_hourly      # data/m4_hourly.csv
    python -m project.tools.m4                      # trains, forecasts the 48 test hours of every series, scores them

One model for all 414 series (``configs/m4_hourly.yaml``), trained by ``python -m project.cli fit``; its best
checkpoint (by validation loss on the 48 hours before the test hours) forecasts each series' test hours from the
look-back before them (the config's ``context_length``). Scores are M4's: sMAPE and MASE (seasonality 24, scaled
by each series' in-sample seasonal-naive error), averaged over the series. Seasonal naive on the same windows must
reproduce M4's published 13.912 / 1.193: that checks the metric code. The table is printed and written to ``--output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from project.checkpoints import checkpoint_inputs, read_checkpoint
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.files import check_output
from project.imports import trust_argument
from project.tools.linear_baseline import LinearBaseline
from project.tools.results import (
    best_checkpoint,
    best_epoch,
    clock,
    fit_seeds,
    forecast_split,
    hardware,
    markdown_table,
    mean_forecast,
    mean_std,
    preset_datamodule,
    run_seconds,
    seeds_column,
    without_point_loss,
    write_table,
)
from project.training.baselines import repeat_last, seasonal_naive
from project.training.metrics import forecast_scores, symmetric_percentage_errors, unscale
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
    return float(symmetric_percentage_errors(torch.from_numpy(forecast), torch.from_numpy(actual)).mean())


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
    """The deterministic baselines on the test windows: naive forecasts, and linear maps on the look-back before
    them, fitted on every series' training windows (values scaled per series)."""
    test = windows.split("test")
    if len(test) != windows.panel.n_series:
        raise ValueError(f"expected one test window per series; got {len(test)} for {windows.panel.n_series}")
    batches = list(DataLoader(test, batch_size=512))
    scaled_context, scaled_actual = (torch.cat([b[key] for b in batches]) for key in ("context", "target"))
    loc, scale = (torch.cat([b[key] for b in batches]) for key in ("loc", "scale"))
    actual = unscale(scaled_actual, loc, scale)
    insample = insample_values(windows, torch.cat([b["series"] for b in batches]))
    train = windows.split("train")
    baselines = {  # name → forecast of scaled contexts (the naive ones commute with the scaling)
        "seasonal naive": lambda: lambda context: seasonal_naive(context, HORIZON, SEASON),
        "repeat-last": lambda: lambda context: repeat_last(context, HORIZON),
        "least-squares linear map on the look-back": lambda: LinearBaseline().fit(train),
        "NLinear form: least squares on the look-back minus its last value": lambda: LinearBaseline(
            relative_to_last=True
        ).fit(train),
    }
    rows = []
    for name, fitted in baselines.items():
        scaled_forecast = fitted()(scaled_context)
        forecast = unscale(scaled_forecast, loc, scale)
        row = _row(
            f"{name} (measured)", *scores(forecast[..., 0].double().numpy(), actual[..., 0].double().numpy(), insample)
        )
        # a point forecast's CRPS is its MAE
        row["crps"] = [float(forecast_scores(scaled_forecast, scaled_actual)["mae"].mean())]
        rows.append(row)
    return rows


def train_and_score(regime: str, windows: WindowDataModule, args: argparse.Namespace, extra: list[str]) -> list[dict]:
    """The regime trained once per seed, each best checkpoint scored on the test windows (one row over seeds), and
    with several seeds the mean of their forecasts (a second row)."""
    settings = [f"--model.{key}={value}" for key, value in regime_settings(regime).items()]
    arguments = [f"--data.source={args.data}", *settings, *extra]
    runs = fit_seeds([CONFIG], arguments, args.logs, f"m4_hourly_{regime}", args.seeds, args.jobs)
    return score_checkpoints([best_checkpoint(run) for run, _ in runs], windows, [s for _, s in runs], args.seeds)


def score_checkpoints(
    checkpoints: list[Path], windows: WindowDataModule, seconds: list[float], seeds: list[int] | None
) -> list[dict]:
    """sMAPE and MASE (and, with a distribution, CRPS, coverage, width and the interval scale calibrated on
    validation) of checkpoints of one configuration on the test windows: one row, over the checkpoints, and with
    several checkpoints a second row for the mean of their forecasts (each checkpoint forecasts once)."""
    settings = read_checkpoint(checkpoints[0])["hyper_parameters"]
    name = regime_name(settings["training_mode"], settings["feedback_gradient"]).replace("_", " ")
    if settings["distribution"] != "none":
        name += f", {settings['distribution'].replace('_', '-')} distribution"
    row = _row(f"{name} (this template)", [], [], seconds)
    row["seeds"] = seeds or [None] * len(checkpoints)  # checkpoints given by path: one seed each, unknown which
    row["best_epoch"] = [best_epoch(checkpoint) for checkpoint in checkpoints]
    row["interval"] = settings.get("interval") if settings["distribution"] != "none" else None
    members = [forecast_split(checkpoint, windows, "test") for checkpoint in checkpoints]
    for checkpoint, forecasts in zip(checkpoints, members):
        smape_, mase_ = m4_scores(forecasts, windows)
        row["smape"].append(smape_)
        row["mase"].append(mase_)
        if "crps" in forecasts:
            for score in ("crps", "covered", "width"):
                row.setdefault(score, []).append(float(forecasts[score].mean()))
            state = read_checkpoint(checkpoint)["state_dict"]
            row.setdefault("interval_scale", []).append(float(state["interval_scale"]))
    if len(members) == 1:
        return [row]
    title = f"{name}, mean of the {len(members)} seeds' forecasts"
    ensemble = _row(title, *m4_scores(mean_forecast(members), windows), [sum(seconds)])
    ensemble["members"] = len(members)
    return [row, ensemble]


def check_fits_m4(path: Path, checkpoint: dict, windows: WindowDataModule) -> None:
    """Refuse, in one line, a checkpoint that does not forecast these windows: one target, M4's horizon, the look-back
    of the windows."""
    settings = checkpoint["hyper_parameters"]
    trained = {
        "targets": settings.get("network", {}).get("init_args", {}).get("n_targets"),
        "horizon": settings.get("horizon"),
        "context_length": settings.get("context_length"),
    }
    expected = {"targets": 1, "horizon": HORIZON, "context_length": windows.context_length}
    differing = [f"{name} {trained[name]} (M4 Hourly here: {value})" for name, value in expected.items()
                 if trained[name] != value]  # fmt: skip
    if differing:
        raise InputError(
            f"{path} was not trained on these M4 Hourly windows: its {', '.join(differing)}; pass checkpoints of "
            "`python -m project.cli fit` with configs/m4_hourly.yaml"
        )


def m4_scores(forecasts: dict, windows: WindowDataModule) -> tuple[float, float]:
    """M4's sMAPE and MASE of ``forecast_split``'s forecasts (original units), averaged over the series."""
    return scores(
        forecasts["point"][..., 0].double().numpy(),
        forecasts["target"][..., 0].double().numpy(),
        insample_values(windows, forecasts["series"]),
    )


def markdown(rows: list[dict], hardware_name: str) -> str:
    """The table, each trained row the mean ± standard deviation over its seeds; with a probabilistic model also
    CRPS, coverage and width of its central interval, on values scaled per series (a point forecast's CRPS is
    its mean absolute error), and the factor by which validation calibrated the intervals (1: not calibrated)."""
    interval = next((row["interval"] for row in rows if row.get("interval")), None)
    probabilistic = interval is not None and any("covered" in row for row in rows)
    header = ["model", "sMAPE", "MASE"]
    scored = ("crps", "covered", "width", "interval_scale")
    if probabilistic:
        header += ["CRPS (scaled)", f"{interval:.0%} coverage", f"{interval:.0%} width (scaled)", "interval scale"]
    cells = []
    for row in rows:
        line = [row["model"], mean_std(row["smape"]), mean_std(row["mase"])]
        if probabilistic:
            line += [mean_std(row[k]) if k in row else "–" for k in scored]
        cells.append([*line, seeds_column(row), clock(row)])
    caption = (
        f"M4 Hourly, 414 series, horizon 48, sMAPE and MASE (seasonality 24) averaged over series; {hardware_name}."
    )
    return markdown_table(caption, [*header, "seeds", "wall-clock (train + test)"], cells)


def _row(name: str, smape_, mase_, seconds: list[float] | None = None) -> dict:
    as_list = lambda value: value if isinstance(value, list) else [value]  # noqa: E731
    return {"model": name, "smape": as_list(smape_), "mase": as_list(mase_), "seconds": seconds}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.m4", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/m4_hourly.csv"), help="from project.tools.datasets")
    parser.add_argument("--regimes", nargs="*", default=["free_running_detach"], choices=list(REGIMES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1], help="one training run per seed")
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time (each gets a share of the CPU)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument("--output", type=Path, default=Path("results/m4_hourly.md"), help="Markdown table to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--ckpt_path", type=Path, nargs="*", default=None,
        help="score these checkpoints (one configuration, e.g. one per seed) instead of training",
    )  # fmt: skip
    trust_argument(parser)
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    extra = without_point_loss(extra)
    if not args.data.is_file():
        parser.error(f"{args.data}: not found; run python -m project.tools.datasets m4_hourly")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    with reported_in_one_line():
        checkpoints = {path: read_checkpoint(path) for path in args.ckpt_path or []}  # before the data
        inputs = [args.data, *(i for path, c in checkpoints.items() for i in checkpoint_inputs(path, c))]
        check_output(args.output, inputs, args.overwrite)  # before training, not after
        windows = datamodule(args.data)
        for path, checkpoint in checkpoints.items():
            check_fits_m4(path, checkpoint, windows)
        rows = measure_baselines(windows)
        if args.ckpt_path:  # timed by the events its run logged, from training to test
            seconds = [run_seconds(c.parent.parent) for c in args.ckpt_path]
            rows += score_checkpoints(args.ckpt_path, windows, seconds, None)
        else:
            for regime in args.regimes:
                rows += train_and_score(regime, windows, args, extra)
        rows += [_row(f"{name} (published)", *values) for name, values in PUBLISHED.items()]
        write_table(args.output, markdown(rows, hardware()), argv)


if __name__ == "__main__":
    main()
