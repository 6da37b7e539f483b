"""Reproduce the ETTh1 tables end to end: in-run baselines, then each regime over seeds; or OT with covariates.

    python -m project.tools.datasets etth1                 # data/ETTh1.csv
    python -m experiments.etth1 --jobs 2                 # the regimes table: 3 seeds each, 2 runs at a time
    python -m experiments.etth1 --experiment covariates  # OT alone against OT with the six loads and the calendar
    python -m experiments.etth1 --experiment probabilistic  # a Quantiles head: CRPS, coverage, width

ETTh1 (Zhou et al. 2021, CC BY-ND 4.0) is not part of this repository. The protocol is the long-horizon benchmarks'
(experiments/configs/etth1.yaml): look-back 336, horizon 96, 12/4/4-month split, scaling fitted on the training
months, MSE/MAE on scaled values over every test window (stride 1). Each regime trains with the settings its own
search chose on the validation months (experiments/configs/search/etth1.yaml), once per seed, by ``python -m
project.cli fit``, which then tests the checkpoint its validation chose (``checkpoint.monitor``: val/mse): the test
months are read once per seed, here. Every row is scored on the validation windows too, where the settings were
chosen. The baselines (repeat-last, seasonal naive, least-squares linear maps fitted on the training windows) are
measured on the same windows, with the same ``--data.*`` options the runs are given. Each table has a second part:
every row again, beside AutoETS and AutoTheta (``experiments.statistical``, the ``baselines`` extra; each channel
fitted on the training months, forecasting every origin from the hours before it without refitting), on every 24th
validation and test window (``--statistical_stride``): AutoTheta's state update costs about 70 ms a window and
channel, too slow for all 5,570. The covariates table's second part forecasts OT alone, each run scored again with
its own inputs. The table is printed and written to ``--output``, stamped with this command and the commit."""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.utils.data import DataLoader

from experiments.linear_baseline import LinearBaseline
from experiments.results import (
    DISTRIBUTION_OPTION,
    best_checkpoint,
    best_epoch,
    check_seeds,
    clock,
    data_options,
    distribution_name,
    fit_seeds,
    forecast_split,
    markdown_table,
    mean_forecast,
    mean_std,
    opened,
    per_seed_lines,
    preset_datamodule,
    seed_runs,
    seeds_column,
    study_config,
    tested_scalars,
    write_table,
)
from experiments.statistical import STATISTICAL_MODELS, split_forecasts, statistical_label, statistical_model
from project.data import WindowDataModule
from project.errors import reported_in_one_line
from project.files import check_output
from project.tools.checkpoint_commands import trust_argument
from project.tools.stamp import hardware, run_commit
from project.training.baselines import repeat_last, seasonal_naive
from project.training.metrics import forecast_scores
from project.training.regimes import REGIMES, regime_arguments

CONFIG = study_config("etth1.yaml")  # a preset on configs/base.yaml: free-running detach's settings
# Each regime's own settings, chosen by its own search on validation (experiments/configs/search/etth1.yaml),
# stacked on CONFIG.
REGIME_CONFIGS = {"teacher_forcing": study_config("etth1_teacher_forcing.yaml")}
SEARCHED_REGIMES = ["teacher_forcing", "free_running_detach"]
SEASON = 24
SPLITS = ("val", "test")
PUBLISHED = {  # multivariate ETTh1, horizon 96 (MSE, MAE): each paper's own figures at its own look-back, except
    # Autoformer and Informer, whose rows are FEDformer's reruns of them (Zhou et al. 2022) at look-back 96
    "PatchTST/42 (Nie et al. 2023), look-back 336": (0.375, 0.399),
    "PatchTST/64 (Nie et al. 2023), look-back 512": (0.370, 0.400),
    "DLinear (Zeng et al. 2023), look-back 336": (0.375, 0.399),
    "NLinear (Zeng et al. 2023), look-back 336": (0.374, 0.394),
    "FEDformer (Zhou et al. 2022), look-back 96": (0.376, 0.419),
    "Autoformer as rerun by FEDformer (Zhou et al. 2022), look-back 96": (0.449, 0.459),
    "Informer as rerun by FEDformer (Zhou et al. 2022), look-back 96": (0.865, 0.713),
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


def datamodule(data: Path, extra: list[str] = (), **overrides) -> WindowDataModule:
    """The data of the training runs (base.yaml and the ETTh1 preset, the ``--data.*`` options of ``extra`` that
    every run is given, then ``overrides``), set up for testing."""
    return preset_datamodule(CONFIG, data, **{**data_options(extra), **overrides})


def measure_baselines(windows: WindowDataModule, suffix: str = "") -> list[dict]:
    """The deterministic baselines on the validation and test windows: naive forecasts, and linear maps fitted on
    the training windows (fitted once, as a user would)."""
    train = windows.split("train")
    baselines = {  # name → how to get the forecast function
        "repeat-last": lambda: lambda context: repeat_last(context, windows.horizon),
        f"seasonal naive (season {SEASON})": lambda: lambda context: seasonal_naive(context, windows.horizon, SEASON),
        "least-squares linear map, shared across channels": lambda: LinearBaseline().fit(train),
        "NLinear form: least squares on the look-back minus its last value": lambda: LinearBaseline(
            relative_to_last=True
        ).fit(train),
    }
    rows = []
    for name, fitted in baselines.items():
        forecast = fitted()
        row = _row(f"{name} (measured{suffix})")
        for split in SPLITS:
            mse, mae = errors(forecast, windows.split(split))
            row[f"{split}_mse"], row[f"{split}_mae"] = [mse], [mae]
        row["crps"] = row["test_mae"]  # a point forecast's CRPS is its absolute error
        rows.append(row)
    return rows


def errors(forecast, windows) -> tuple[float, float]:
    """Mean squared and mean absolute error of ``forecast(context)`` over every window, on scaled values."""
    sums, count = {"mse": 0.0, "mae": 0.0}, 0
    for batch in DataLoader(windows, batch_size=512):
        scores = forecast_scores(forecast(batch["context"]).float(), batch["target"])
        sums = {name: total + float(scores[name].sum()) for name, total in sums.items()}
        count += batch["target"].numel()
    return sums["mse"] / count, sums["mae"] / count


def statistical_row(name: str, windows: WindowDataModule, suffix: str = "") -> dict:
    """``name`` (e.g. AutoETS) fitted once per target channel on the training months (in original units), then
    forecasting every validation and test window from the hours before it, scored on scaled values."""
    splits = {split: windows.split(split) for split in SPLITS}
    points, seconds = split_forecasts(name, splits, windows.split_rows[:, 0], SEASON)
    row = _row(f"{statistical_label(name, SEASON)}, statsforecast, per channel (measured{suffix})", [seconds])
    for split, dataset in splits.items():
        batches = list(DataLoader(dataset, batch_size=512))
        loc, scale, target = (torch.cat([b[key] for b in batches]) for key in ("loc", "scale", "target"))
        scores = forecast_scores(((points[split] - loc) / scale).float(), target)
        row[f"{split}_mse"], row[f"{split}_mae"] = [float(scores["mse"].mean())], [float(scores["mae"].mean())]
    return row


def rescored(model_rows: list[dict], windows: WindowDataModule, ensembles: bool = True) -> list[dict]:
    """The trained rows (and, with ``ensembles``, their seeds' mean) again, their checkpoints scored on ``windows``
    (e.g. a subset)."""
    rows = []
    for trained in model_rows:
        row = {**_row(trained["model"], trained["seconds"]), "seeds": trained["seeds"]}
        row["best_epoch"] = trained["best_epoch"]
        members = {
            split: [forecast_split(best_checkpoint(r), windows, split) for r in trained["runs"]] for split in SPLITS
        }
        for split in SPLITS:
            for forecasts in members[split]:
                mse, mae = forecast_errors(forecasts)
                row[f"{split}_mse"].append(mse)
                row[f"{split}_mae"].append(mae)
        rows.append(row)
        if ensembles and len(trained["runs"]) > 1:
            ensemble = _row(f"{trained['model']}, mean of the {len(trained['runs'])} seeds' forecasts")
            ensemble["seconds"], ensemble["members"] = [sum(trained["seconds"])], len(trained["runs"])
            for split in SPLITS:
                mse, mae = forecast_errors(mean_forecast(members[split]))
                ensemble[f"{split}_mse"], ensemble[f"{split}_mae"] = [mse], [mae]
            rows.append(ensemble)
    return rows


def forecast_errors(forecasts: dict) -> tuple[float, float]:
    """Mean squared and mean absolute error on scaled values of ``forecast_split``'s forecasts (original units)."""
    scale = forecasts["scale"]  # the data's loc cancels in the error
    scores = forecast_scores(forecasts["point"] / scale, forecasts["target"] / scale)
    return float(scores["mse"].mean()), float(scores["mae"].mean())


def train_and_test(
    name: str, title: str, configs: list[Path], arguments: list[str], args: argparse.Namespace, windows
) -> dict:
    """Train the run ``name`` once per seed (one row, over seeds): the test scores its ``fit`` logged, and the
    validation scores of the checkpoint it chose (by validation); with ``--trained``, those of the latest runs
    already in ``--logs``."""
    if args.trained:
        runs = seed_runs(args.logs, name, args.seeds)
    else:
        arguments = [f"--data.source={args.data}", *arguments]
        runs = fit_seeds(configs, arguments, args.logs, name, args.seeds, args.jobs)
    row = _row(title, [seconds for _, seconds in runs])
    row["seeds"], row["best_epoch"] = args.seeds, [best_epoch(best_checkpoint(run)) for run, _ in runs]
    row["runs"] = [run for run, _ in runs]
    settings = opened(best_checkpoint(row["runs"][0]))[0]["hyper_parameters"]
    row["interval"] = settings.get("interval") if distribution_name(settings) else None
    for run, _ in runs:
        if row["interval"] is not None:  # the factor validation calibrated the intervals by (1: not calibrated)
            state = opened(best_checkpoint(run))[0]["state_dict"]
            row.setdefault("interval_scale", []).append(float(state["interval_scale"]))
        mse, mae = forecast_errors(forecast_split(best_checkpoint(run), windows, "val"))
        row["val_mse"].append(mse)
        row["val_mae"].append(mae)
        tested = tested_scalars(run)
        for score in ("mse", "mae", "crps", "coverage", "width"):  # the last three: models with a distribution
            if f"test/{score}" in tested:
                row.setdefault(score if score not in ("mse", "mae") else f"test_{score}", []).append(
                    float(tested[f"test/{score}"].iloc[-1])
                )
    return row


def ensemble_row(regime_row: dict, windows: WindowDataModule) -> dict:
    """The mean of the regime's seeds' forecasts as one more row: validation and test MSE and MAE on scaled
    values (whether the mean of the seeds does better is read on validation like any other choice)."""
    runs = regime_row["runs"]
    row = _row(f"{regime_row['model']}, mean of the {len(runs)} seeds' forecasts", [sum(regime_row["seconds"])])
    for split in SPLITS:
        mse, mae = forecast_errors(
            mean_forecast([forecast_split(best_checkpoint(run), windows, split) for run in runs])
        )
        row[f"{split}_mse"], row[f"{split}_mae"] = [mse], [mae]
    row["members"] = len(runs)
    return row


def floor_table(
    trained: list[dict], args: argparse.Namespace, extra: list[str], what: str, inputs: list[dict], **data
) -> str:
    """The statistical floor in the same run: the baselines and ``args.statistical`` (fitted per channel on the
    training months) on every ``args.statistical_stride``-th validation and test window, beside the ``trained``
    rows scored again there, each with its own ``inputs`` (``data`` overrides); the seeds' mean where the main table
    has one."""
    stride, ensembles = args.statistical_stride, args.experiment == "regimes"
    subset = datamodule(args.data, extra, eval_stride=stride, **data)
    suffix = ", OT" if data.get("target_columns") == ["OT"] else ""
    rows = measure_baselines(subset, suffix) + [statistical_row(name, subset, suffix) for name in args.statistical]
    for row, own in zip(trained, inputs):
        windows = datamodule(args.data, extra, eval_stride=stride, **{**data, **own}) if own else subset
        rows += rescored([row], windows, ensembles)
    what = f"{what}, every {stride}th validation and test window ({len(subset.split('test'))} test windows)"
    return "\n" + markdown(rows, hardware(), what)


def published_row(name: str, mse: float, mae: float) -> dict:
    return {**_row(f"{name} (published)"), "test_mse": [mse], "test_mae": [mae]}


def _row(name: str, seconds: list[float] | None = None) -> dict:
    return {"model": name, "val_mse": [], "val_mae": [], "test_mse": [], "test_mae": [], "seconds": seconds}


def markdown(rows: list[dict], hardware_name: str, what: str = "") -> str:
    """The table, each trained row the mean ± standard deviation over its seeds, validation (what settings are
    chosen by) beside test; with a probabilistic model also CRPS, coverage and width of its central interval
    (scaled values; a point forecast's CRPS is its MAE) and the factor by which validation calibrated the
    intervals (1: not calibrated)."""
    interval = next((row["interval"] for row in rows if row.get("interval")), None)
    probabilistic = interval is not None and any("coverage" in row for row in rows)
    header = ["model", "validation MSE", "validation MAE", "test MSE", "test MAE"]
    if probabilistic:
        header += ["CRPS", f"{interval:.0%} coverage", f"{interval:.0%} width", "interval scale"]
    cells = []
    for row in rows:
        line = [row["model"], *(mean_std(row[k]) if row[k] else "–" for k in ("val_mse", "val_mae"))]
        line += [mean_std(row["test_mse"]), mean_std(row["test_mae"])]
        if probabilistic:
            line += [mean_std(row[k]) if k in row else "–" for k in ("crps", "coverage", "width", "interval_scale")]
        cells.append([*line, seeds_column(row), clock(row)])
    caption = f"ETTh1{what}, horizon 96, look-back 336, scores on scaled values; {hardware_name}."
    table = markdown_table(caption, [*header, "seeds", "wall-clock (train + test)"], cells)
    columns = {"val_mse": "validation MSE", "val_mae": "validation MAE", "test_mse": "test MSE", "test_mae": "test MAE"}
    return table + per_seed_lines(rows, columns)


def regime_configs(regime: str) -> list[Path]:
    """The presets a regime trains with: CONFIG, and the regime's own search result when it has one."""
    return [CONFIG, *([REGIME_CONFIGS[regime]] if regime in REGIME_CONFIGS else [])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.etth1", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/ETTh1.csv"), help="path to ETTh1.csv")
    parser.add_argument("--experiment", choices=["regimes", "covariates", "probabilistic"], default="regimes")
    parser.add_argument(
        "--regimes",
        nargs="*",
        default=SEARCHED_REGIMES,
        choices=list(REGIMES),
        metavar="REGIME",
        help="regimes of the regimes table (default: the two with a search of their own)",
    )
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one training run per seed")
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time (each gets a share of the CPU)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument(
        "--output", type=Path, default=None, help="Markdown table (default: experiments/results/etth1_*.md)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--trained", action="store_true", help="tabulate the runs already in --logs, do not train")
    parser.add_argument(
        "--statistical",
        nargs="*",
        default=["AutoETS", "AutoTheta"],
        choices=list(STATISTICAL_MODELS),
        help="statsforecast models per channel (the baselines extra) in a second table; none: --statistical alone",
    )
    parser.add_argument(
        "--statistical_stride",
        type=int,
        default=24,
        help="the second table: every row, the statistical ones too, again on every Nth validation and test window",
    )
    trust_argument(parser)  # a network outside the project, passed on to every fit, read back from its checkpoints
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    if not args.data.is_file():
        parser.error(f"{args.data}: ETTh1.csv not found; run python -m project.tools.datasets etth1")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    output = args.output or Path(f"experiments/results/etth1_{args.experiment}.md")
    run_commit()  # what the stamp names: the code at the start
    with reported_in_one_line():
        check_seeds(args.seeds)
        check_output(output, [args.data], args.overwrite)  # before hours of training, not after
        if args.statistical:
            statistical_model(args.statistical[0], SEASON)  # the extra is missing: say so before training
        if args.experiment == "regimes":
            windows = datamodule(args.data, extra)
            rows = measure_baselines(windows)
            for regime in args.regimes:
                settings = regime_arguments(regime)
                title = regime.replace("_", " ") + ("" if regime in SEARCHED_REGIMES else " (detach's settings)")
                rows.append(train_and_test(regime, title, regime_configs(regime), settings + extra, args, windows))
                if len(args.seeds) > 1:
                    rows.append(ensemble_row(rows[-1], windows))
            trained = [row for row in rows if row.get("runs")]
            rows += [published_row(name, mse, mae) for name, (mse, mae) in PUBLISHED.items()]
            table = markdown(rows, hardware())
            if args.statistical:
                table += floor_table(trained, args, extra, "", [{}] * len(trained))
        elif args.experiment == "probabilistic":
            windows = datamodule(args.data, extra)
            rows = measure_baselines(windows)
            distribution = next(
                (a.split("=", 1)[1] for a in extra if a.startswith(f"{DISTRIBUTION_OPTION}=")), "Quantiles"
            )
            given = {argument.split("=", 1)[0] for argument in extra}
            settings = [] if DISTRIBUTION_OPTION in given else [f"{DISTRIBUTION_OPTION}={distribution}"]
            distribution = distribution.rpartition(".")[2]
            title = f"free-running detach, {distribution} distribution (this template)"
            settings += extra
            rows.append(train_and_test(f"probabilistic_{distribution}", title, [CONFIG], settings, args, windows))
            table = markdown(rows, hardware(), ", probabilistic")
            if args.statistical:
                point = "the median" if distribution == "Quantiles" else "the paths' mean"
                table += floor_table(rows[-1:], args, extra, f", probabilistic (the point forecast: {point})", [{}])
        else:
            rows = measure_baselines(
                datamodule(args.data, extra, target_columns=["OT"], calendar_features=False), ", OT"
            )
            for title, (name, data) in COVARIATE_RUNS.items():
                settings = [f"--data.{key}={value}".replace("'", "") for key, value in data.items()]
                windows = datamodule(args.data, extra, **data)  # each run's own inputs, the same OT windows
                run = train_and_test(name, f"{title} (this template)", [CONFIG], settings + extra, args, windows)
                rows.append(run)
            table = markdown(rows, hardware(), ", target OT only")
            if args.statistical:
                trained, inputs = [row for row in rows if row.get("runs")], [d for _, d in COVARIATE_RUNS.values()]
                table += floor_table(trained, args, extra, ", target OT only", inputs, **COVARIATE_RUNS["OT alone"][1])
        write_table(output, table, argv)


if __name__ == "__main__":
    main()
