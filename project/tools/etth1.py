"""Reproduce the README's ETTh1 tables end to end: baselines, then every training regime; or OT with covariates.

    python -m project.tools.datasets etth1                 # data/ETTh1.csv
    python -m project.tools.etth1                          # the multivariate table: every regime against the baselines
    python -m project.tools.etth1 --experiment covariates  # OT alone against OT with the six loads and the calendar
    python -m project.tools.etth1 --experiment probabilistic --model.distribution=quantile   # intervals: CRPS, coverage

ETTh1 (Zhou et al. 2021, CC BY-ND 4.0) is not part of this repository. The protocol is the long-horizon
benchmarks' (configs/etth1.yaml): look-back 336, horizon 96, 12/4/4-month split, scaling fitted on the training
months, MSE/MAE on scaled values over every test window (stride 1). Each run is trained with the same model and
budget by ``python -m project.cli fit``, which then tests the best checkpoint (by validation loss); the baselines
are measured on the same windows. The table is printed and written to ``--output``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from torch.utils.data import DataLoader

from project.data import WindowDataModule
from project.errors import reported_in_one_line
from project.files import check_output
from project.runs import find_runs, read_scalars
from project.tools.linear_baseline import LinearBaseline
from project.tools.results import (
    best_checkpoint,
    best_epoch,
    clock,
    fit,
    hardware,
    markdown_table,
    preset_datamodule,
    run_seconds,
    without_point_loss,
    write_table,
)
from project.training.baselines import repeat_last
from project.training.regimes import REGIMES, regime_settings

CONFIG = Path("configs/etth1.yaml")  # a preset on configs/base.yaml
PUBLISHED = {  # multivariate ETTh1, horizon 96, as reported by the papers (MSE, MAE)
    "PatchTST/64 (Nie et al. 2023)": (0.370, 0.400),
    "DLinear (Zeng et al. 2023)": (0.375, 0.399),
    "FEDformer (Zhou et al. 2022)": (0.376, 0.419),
    "Autoformer (Wu et al. 2021)": (0.449, 0.459),
    "Informer (Zhou et al. 2021)": (0.865, 0.713),
    "repeat-last": (1.295, 0.713),
}
LOADS = ["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL"]
COVARIATE_RUNS = {  # table row → (run name, data settings): OT is the only target of every run
    "OT alone": ("ot_alone", {"target_columns": ["OT"], "calendar_features": False}),
    "OT with the calendar (future)": ("ot_calendar", {"target_columns": ["OT"], "calendar_features": True}),
    "OT with the six loads (past)": (
        "ot_loads",
        {"target_columns": ["OT"], "past_covariates": LOADS, "calendar_features": False},
    ),
    "OT with the six loads (past) and the calendar (future)": (
        "ot_covariates",
        {"target_columns": ["OT"], "past_covariates": LOADS, "calendar_features": True},
    ),
}


def datamodule(data: Path, **overrides) -> WindowDataModule:
    """The data of the training runs (base.yaml and the ETTh1 preset), set up for testing."""
    return preset_datamodule(CONFIG, data, **overrides)


def measure_baselines(windows: WindowDataModule, suffix: str = "") -> list[dict]:
    test = windows.split("test")
    baselines = {  # name → how to get the forecast function (fitting, when there is any, is timed too)
        "repeat-last": lambda: lambda context: repeat_last(context, windows.horizon),
        "least-squares linear map, shared across channels": lambda: LinearBaseline().fit(windows.split("train")),
    }
    rows = []
    for name, fitted in baselines.items():
        mse, mae = errors(fitted(), test)
        row = _row(f"{name} (measured{suffix})", mse, mae)
        row["crps"] = mae  # a point forecast's CRPS is its absolute error
        rows.append(row)
    return rows


def errors(forecast, windows) -> tuple[float, float]:
    """Mean squared and mean absolute error of ``forecast(context)`` over every window, on scaled values."""
    squared = absolute = count = 0.0
    for batch in DataLoader(windows, batch_size=512):
        error = forecast(batch["context"]).float() - batch["target"]
        squared, absolute, count = squared + error.pow(2).sum(), absolute + error.abs().sum(), count + error.numel()
    return float(squared / count), float(absolute / count)


def train_and_test(name: str, title: str, data: Path, logs: Path, arguments: list[str], trained: bool) -> dict:
    """Train the run ``name`` and read its test scores; with ``trained``, read those of its latest run in ``logs``."""
    if trained:
        run = find_runs(logs / name)[-1]
        seconds = run_seconds(run)
    else:
        run, seconds = fit([CONFIG], [f"--data.source={data}", *arguments], logs, name)
    tested = read_scalars(run)
    epoch = best_epoch(best_checkpoint(run))
    row = _row(title, tested["test/mse"].iloc[-1], tested["test/mae"].iloc[-1], seconds, epoch)
    for score in ("crps", "coverage", "width"):  # logged by models with a distribution
        if f"test/{score}" in tested:
            row[score] = float(tested[f"test/{score}"].iloc[-1])
    return row


def _row(name: str, mse, mae, seconds: float | None = None, best_epoch: int | None = None) -> dict:
    return {"model": name, "mse": float(mse), "mae": float(mae), "seconds": seconds, "best_epoch": best_epoch}


def markdown(rows: list[dict], hardware_name: str, what: str = "") -> str:
    """The table; with a probabilistic model also CRPS, coverage and width of the central 80% interval (scaled
    values; a point forecast's CRPS is its MAE)."""
    probabilistic = any("coverage" in row for row in rows)
    header = ["model", "test MSE", "test MAE"] + (["CRPS", "80% coverage", "80% width"] if probabilistic else [])
    cells = []
    for row in rows:
        line = [row["model"], f"{row['mse']:.3f}", f"{row['mae']:.3f}"]
        if probabilistic:
            scores = (row.get("crps"), row.get("coverage"), row.get("width"))
            line += [f"{v:.3f}" if v is not None else "–" for v in scores]
        cells.append([*line, clock(row)])
    caption = f"ETTh1{what}, horizon 96, look-back 336, test scores on scaled values; {hardware_name}."
    return markdown_table(caption, [*header, "wall-clock (train + test)"], cells)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.etth1", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/ETTh1.csv"), help="path to ETTh1.csv")
    parser.add_argument("--experiment", choices=["regimes", "covariates", "probabilistic"], default="regimes")
    parser.add_argument("--regimes", nargs="*", default=list(REGIMES), choices=list(REGIMES), metavar="REGIME")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument("--output", type=Path, default=None, help="Markdown table (default: results/etth1_*.md)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--trained", action="store_true", help="tabulate the runs already in --logs, do not train")
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    if not args.data.is_file():
        parser.error(f"{args.data}: ETTh1.csv not found; run python -m project.tools.datasets etth1")
    output = args.output or Path(f"results/etth1_{args.experiment}.md")
    with reported_in_one_line():
        check_output(output, [args.data], args.overwrite)  # before hours of training, not after
        if args.experiment == "regimes":
            rows = measure_baselines(datamodule(args.data))
            for regime in args.regimes:
                settings = [f"--model.{key}={value}" for key, value in regime_settings(regime).items()]
                title = regime.replace("_", " ")
                rows.append(train_and_test(regime, title, args.data, args.logs, settings + extra, args.trained))
            rows += [_row(f"{name} (published)", mse, mae) for name, (mse, mae) in PUBLISHED.items()]
            table = markdown(rows, hardware())
        elif args.experiment == "probabilistic":
            rows = measure_baselines(datamodule(args.data))
            distribution = next(
                (a.split("=", 1)[1] for a in extra if a.startswith("--model.distribution=")), "quantile"
            )
            given = {argument.split("=", 1)[0] for argument in extra}
            settings = [] if "--model.distribution" in given else [f"--model.distribution={distribution}"]
            title = f"free-running detach, {distribution.replace('_', '-')} distribution (this template)"
            name = f"probabilistic_{distribution}"
            settings = without_point_loss(settings + extra)
            rows.append(train_and_test(name, title, args.data, args.logs, settings, args.trained))
            table = markdown(rows, hardware(), ", probabilistic")
        else:
            rows = measure_baselines(datamodule(args.data, target_columns=["OT"], calendar_features=False), ", OT")
            for title, (name, data) in COVARIATE_RUNS.items():
                settings = [f"--data.{key}={value}".replace("'", "") for key, value in data.items()]
                title = f"{title} (this template)"
                rows.append(train_and_test(name, title, args.data, args.logs, settings + extra, args.trained))
            table = markdown(rows, hardware(), ", target OT only")
        write_table(output, table)


if __name__ == "__main__":
    main()
