"""Reproduce the M4 tables (Hourly, Weekly): the free-running model beside naive, linear and statistical baselines
on the same windows.

    python -m project.tools.datasets m4_hourly      # data/m4_hourly.csv (m4_weekly: data/m4_weekly.csv)
    python -m experiments.m4                      # trains, forecasts the 48 test hours of every series, scores them
    python -m experiments.m4 --frequency weekly   # the 359 weekly series, horizon 13

One model for all series of a frequency (``experiments/configs/m4_hourly.yaml``,
``experiments/configs/m4_weekly.yaml``), trained by ``python -m project.cli fit``; its best checkpoint (by
validation loss on the horizon before the test horizon) forecasts each series' validation and test horizons from the
look-back before them (the config's ``context_length``). Scores are M4's: sMAPE and MASE (scaled by each series'
in-sample seasonal-naive error, with M4's seasonality: 24 for hourly, 1 for weekly data), averaged over the series;
validation beside test, because every choice is made on validation. Hourly seasonal naive on the test windows must
reproduce M4's published 13.912 / 1.193: that checks the metric code. AutoETS and AutoTheta
(``experiments.statistical``, the ``baselines`` extra) are fitted per series on the training rows, as the model is,
with the data's season (24 hourly, 52 weekly: not MASE's seasonality), the seasonal naive's too; each row names it.
The table is printed and written to ``--output``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import DataLoader

from experiments.linear_baseline import LinearBaseline
from experiments.results import (
    best_checkpoint,
    best_epoch,
    check_seeds,
    clock,
    distribution_name,
    fit_seeds,
    forecast_split,
    markdown_table,
    mean_forecast,
    mean_std,
    opened,
    per_seed_lines,
    preset_datamodule,
    run_seconds,
    seeds_column,
    study_config,
    write_table,
)
from experiments.statistical import STATISTICAL_MODELS, split_forecasts, statistical_label, statistical_model
from project.checkpoints import checkpoint_inputs
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.files import check_output
from project.tools.checkpoint_commands import load_checkpoint, trust_argument
from project.tools.stamp import hardware, run_commit
from project.training.baselines import repeat_last, seasonal_naive
from project.training.metrics import forecast_scores, symmetric_percentage_errors, unscale
from project.training.regimes import REGIMES, regime_arguments, regime_name


@dataclass(frozen=True)
class Benchmark:
    """One frequency of M4: its preset, horizon, M4's seasonality (the MASE scale alone), the data's season (the
    seasonal naive's and the statistical models' ``season_length``), and the competition's published rows."""

    name: str
    config: Path
    horizon: int
    season: int
    data_season: int
    published: dict[str, tuple[float, float]] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return Path(f"data/m4_{self.name.lower()}.csv")


HOURLY = Benchmark(
    "Hourly",
    study_config("m4_hourly.yaml"),
    horizon=48,
    season=24,
    data_season=24,
    published={  # the M4 competition's hourly results (sMAPE, MASE)
        "best hourly entry, Doornik, Castle & Hendry": (8.913, 0.801),
        "ES-RNN, Smyl (M4 winner)": (9.328, 0.893),
        "seasonal naive (sNaive)": (13.912, 1.193),
        "Naive2": (18.383, 2.395),
    },
)
# Weekly: M4 scales MASE by the one-step naive error (seasonality 1); the data's season is a year of 52 weeks, which
# the seasonal naive repeats and AutoETS and AutoTheta are fitted with. No published weekly row is quoted: they are
# computed in the same run instead.
WEEKLY = Benchmark("Weekly", study_config("m4_weekly.yaml"), horizon=13, season=1, data_season=52)
BENCHMARKS = {"hourly": HOURLY, "weekly": WEEKLY}
CONFIG, SEASON, HORIZON, PUBLISHED = HOURLY.config, HOURLY.season, HOURLY.horizon, HOURLY.published
SPLITS = ("val", "test")
STATISTICAL = ("AutoETS", "AutoTheta")


def smape(forecast: np.ndarray, actual: np.ndarray) -> float:
    """Symmetric MAPE in percent as the M4 competition defines it: 200 · mean |y − ŷ| / (|y| + |ŷ|)."""
    return float(symmetric_percentage_errors(torch.from_numpy(forecast), torch.from_numpy(actual)).mean())


def mase(forecast: np.ndarray, actual: np.ndarray, insample: np.ndarray, seasonality: int) -> float:
    """Mean absolute scaled error (M4): the forecast's MAE over the in-sample MAE of the seasonal naive forecast."""
    scale = np.mean(np.abs(insample[seasonality:] - insample[:-seasonality]))
    return float(np.mean(np.abs(actual - forecast)) / scale)


def datamodule(data: Path, benchmark: Benchmark = HOURLY, **overrides) -> WindowDataModule:
    """The data of the training runs (base.yaml and the benchmark's preset), set up for testing."""
    return preset_datamodule(benchmark.config, data, **overrides)


def scores(
    forecast: np.ndarray, actual: np.ndarray, insample: list[np.ndarray], seasonality: int = SEASON
) -> tuple[float, float]:
    """M4's sMAPE and MASE, each averaged over the series: forecast and actual (series, horizon)."""
    return (
        float(np.mean([smape(f, a) for f, a in zip(forecast, actual)])),
        float(np.mean([mase(f, a, i, seasonality) for f, a, i in zip(forecast, actual, insample)])),
    )


def insample_values(windows: WindowDataModule, series: torch.Tensor, split: str = "test") -> list[np.ndarray]:
    """Each series' values before the ``split`` rows, in original units: everything before the test horizon (M4's
    in-sample), or the training rows for validation."""
    panel, end = windows.panel, {"val": 0, "test": 1}[split]
    return [
        np.asarray(panel.values[panel.rows(int(s))][: int(windows.split_rows[int(s), end]), 0], dtype=np.float64)
        for s in series
    ]


def split_windows_of(windows: WindowDataModule, split: str) -> dict[str, torch.Tensor]:
    """The one window per series of ``split``: scaled ``context`` and ``target``, ``loc``, ``scale``, ``series``."""
    dataset = windows.split(split)
    if len(dataset) != windows.panel.n_series:
        raise ValueError(f"expected one {split} window per series; got {len(dataset)} for {windows.panel.n_series}")
    batches = list(DataLoader(dataset, batch_size=512))
    return {key: torch.cat([b[key] for b in batches]) for key in ("context", "target", "loc", "scale", "series")}


def measure_baselines(
    windows: WindowDataModule, benchmark: Benchmark = HOURLY, statistical: tuple[str, ...] = ()
) -> list[dict]:
    """The baselines on the validation and test windows: naive forecasts, linear maps on the look-back before
    them, fitted on every series' training windows (values scaled per series), and the ``statistical`` models,
    fitted per series on its training rows."""
    train = windows.split("train")
    horizon, season = benchmark.horizon, benchmark.data_season
    baselines = {  # name → forecast of scaled contexts (the naive ones commute with the scaling)
        f"seasonal naive (season {season})": lambda: lambda context: seasonal_naive(context, horizon, season),
        "repeat-last": lambda: lambda context: repeat_last(context, horizon),
        "least-squares linear map on the look-back": lambda: LinearBaseline().fit(train),
        "NLinear form: least squares on the look-back minus its last value": lambda: LinearBaseline(
            relative_to_last=True
        ).fit(train),
    }
    found = {split: split_windows_of(windows, split) for split in SPLITS}
    rows = []
    for name, fitted in baselines.items():
        forecast, row = fitted(), _row(f"{name} (measured)", [], [])
        for split, window in found.items():
            scaled_forecast = forecast(window["context"])
            point = unscale(scaled_forecast, window["loc"], window["scale"])
            _add_scores(row, split, point, window, windows, benchmark)
        # a point forecast's CRPS is its MAE
        row["crps"] = [float(forecast_scores(scaled_forecast, found["test"]["target"])["mae"].mean())]
        rows.append(row)
    return rows + [statistical_row(name, windows, benchmark, found) for name in statistical]


def statistical_row(name: str, windows: WindowDataModule, benchmark: Benchmark, found: dict | None = None) -> dict:
    """``name`` (e.g. AutoETS) fitted once per series on the series' training rows, forecasting its validation
    horizon, and its test horizon from every value before it (the validation rows included, without refitting,
    as the model reads its look-back)."""
    found = found or {split: split_windows_of(windows, split) for split in SPLITS}
    splits = {split: windows.split(split) for split in SPLITS}
    points, seconds = split_forecasts(name, splits, windows.split_rows[:, 0], benchmark.data_season)
    label = statistical_label(name, benchmark.data_season)
    row = _row(f"{label}, statsforecast, per series (measured)", [], [], [seconds])
    for split in SPLITS:
        _add_scores(row, split, points[split], found[split], windows, benchmark)
    return row


def competition_scores(name: str, windows: WindowDataModule, benchmark: Benchmark) -> tuple[float, float]:
    """Test sMAPE and MASE of ``name`` as the M4 competition ran it: fitted per series on every value before the test
    horizon (its whole training series, the validation rows included) at the data's season, forecasting the test
    horizon. A check of the floor against figures computed outside this repository; the table's rows are fitted on
    the training rows alone, as the model is."""
    test = split_windows_of(windows, "test")
    points, _ = split_forecasts(
        name, {"test": windows.split("test")}, windows.split_rows[:, 1], benchmark.data_season, progress=None
    )
    actual = unscale(test["target"], test["loc"], test["scale"])
    return scores(
        points["test"][..., 0].double().numpy(),
        actual[..., 0].double().numpy(),
        insample_values(windows, test["series"], "test"),
        benchmark.season,
    )


def _add_scores(row: dict, split: str, point: torch.Tensor, window: dict, windows, benchmark: Benchmark) -> None:
    """Append sMAPE and MASE of ``point`` (original units, one window per series) on ``split`` to ``row``."""
    actual = unscale(window["target"], window["loc"], window["scale"])
    smape_, mase_ = scores(
        point[..., 0].double().numpy(),
        actual[..., 0].double().numpy(),
        insample_values(windows, window["series"], split),
        benchmark.season,
    )
    prefix = "val_" if split == "val" else ""
    row[f"{prefix}smape"].append(smape_)
    row[f"{prefix}mase"].append(mase_)


def train_and_score(
    regime: str, windows: WindowDataModule, args: argparse.Namespace, extra: list[str], benchmark: Benchmark = HOURLY
) -> list[dict]:
    """The regime trained once per seed, each best checkpoint scored on the test windows (one row over seeds), and
    with several seeds the mean of their forecasts (a second row)."""
    settings = regime_arguments(regime)
    arguments = [f"--data.source={args.data}", *settings, *extra]
    name = f"m4_{benchmark.name.lower()}_{regime}"
    runs = fit_seeds([benchmark.config], arguments, args.logs, name, args.seeds, args.jobs)
    checkpoints = [best_checkpoint(run) for run, _ in runs]
    return score_checkpoints(checkpoints, windows, [s for _, s in runs], args.seeds, benchmark)


def score_checkpoints(
    checkpoints: list[Path],
    windows: WindowDataModule,
    seconds: list[float],
    seeds: list[int] | None,
    benchmark: Benchmark = HOURLY,
) -> list[dict]:
    """sMAPE and MASE on the validation and test windows (and, with a distribution, CRPS, coverage, width and the
    interval scale calibrated on validation, on test) of checkpoints of one configuration: one row, over the
    checkpoints, and with several checkpoints a second row for the mean of their forecasts (each checkpoint
    forecasts once per split)."""
    settings = opened(checkpoints[0])[0]["hyper_parameters"]
    name = (regime_name(settings["regime"]) or settings["regime"]["class_path"]).replace("_", " ")
    distribution = distribution_name(settings)
    if distribution:
        name += f", {distribution} distribution"
    row = _row(f"{name} (this template)", [], [], seconds)
    row["seeds"] = seeds or [None] * len(checkpoints)  # checkpoints given by path: one seed each, unknown which
    row["best_epoch"] = [best_epoch(checkpoint) for checkpoint in checkpoints]
    row["interval"] = settings.get("interval") if distribution else None
    members = {split: [forecast_split(c, windows, split) for c in checkpoints] for split in SPLITS}
    for index, checkpoint in enumerate(checkpoints):
        for split in SPLITS:
            smape_, mase_ = m4_scores(members[split][index], windows, benchmark, split)
            prefix = "val_" if split == "val" else ""
            row[f"{prefix}smape"].append(smape_)
            row[f"{prefix}mase"].append(mase_)
        forecasts = members["test"][index]
        if "crps" in forecasts:
            for score in ("crps", "covered", "width"):
                row.setdefault(score, []).append(float(forecasts[score].mean()))
            state = opened(checkpoint)[0]["state_dict"]
            row.setdefault("interval_scale", []).append(float(state["interval_scale"]))
    if len(checkpoints) == 1:
        return [row]
    title = f"{name}, mean of the {len(checkpoints)} seeds' forecasts"
    ensemble = _row(title, [], [], [sum(seconds)])
    for split in SPLITS:
        smape_, mase_ = m4_scores(mean_forecast(members[split]), windows, benchmark, split)
        prefix = "val_" if split == "val" else ""
        ensemble[f"{prefix}smape"].append(smape_)
        ensemble[f"{prefix}mase"].append(mase_)
    ensemble["members"] = len(checkpoints)
    return [row, ensemble]


def check_fits_m4(path: Path, checkpoint: dict, windows: WindowDataModule, benchmark: Benchmark) -> None:
    """Refuse, in one line, a checkpoint that does not forecast these windows: one target, M4's horizon, the look-back
    of the windows."""
    settings = checkpoint["hyper_parameters"]
    trained = {
        "targets": (settings.get("network", {}).get("init_args", {}).get("sizes") or {}).get("n_targets"),
        "horizon": settings.get("horizon"),
        "context_length": settings.get("context_length"),
    }
    expected = {"targets": 1, "horizon": benchmark.horizon, "context_length": windows.context_length}
    here = f"M4 {benchmark.name}"
    differing = [
        f"{name} {trained[name]} ({here} here: {value})" for name, value in expected.items() if trained[name] != value
    ]
    if differing:
        raise InputError(
            f"{path} was not trained on these {here} windows: its {', '.join(differing)}; pass checkpoints of "
            f"`python -m project.cli fit` with experiments/configs/{benchmark.config.name}"
        )


def m4_scores(
    forecasts: dict, windows: WindowDataModule, benchmark: Benchmark = HOURLY, split: str = "test"
) -> tuple[float, float]:
    """M4's sMAPE and MASE of ``forecast_split``'s forecasts (original units), averaged over the series."""
    return scores(
        forecasts["point"][..., 0].double().numpy(),
        forecasts["target"][..., 0].double().numpy(),
        insample_values(windows, forecasts["series"], split),
        benchmark.season,
    )


def markdown(rows: list[dict], hardware_name: str, benchmark: Benchmark = HOURLY, n_series: int = 414) -> str:
    """The table, each trained row the mean ± standard deviation over its seeds (each seed's value listed too),
    validation (what every choice is made on) beside test; with a probabilistic model also CRPS, coverage and
    width of its central interval, on values scaled per series (a point forecast's CRPS is its mean absolute
    error), and the factor by which validation calibrated the intervals (1: not calibrated)."""
    interval = next((row["interval"] for row in rows if row.get("interval")), None)
    probabilistic = interval is not None and any("covered" in row for row in rows)
    header = ["model", "validation sMAPE", "validation MASE", "test sMAPE", "test MASE"]
    scored = ("crps", "covered", "width", "interval_scale")
    if probabilistic:
        header += ["CRPS (scaled)", f"{interval:.0%} coverage", f"{interval:.0%} width (scaled)", "interval scale"]
    cells = []
    for row in rows:
        line = [row["model"], *(mean_std(row[k]) if row.get(k) else "–" for k in ("val_smape", "val_mase"))]
        line += [mean_std(row["smape"]), mean_std(row["mase"])]
        if probabilistic:
            line += [mean_std(row[k]) if k in row else "–" for k in scored]
        cells.append([*line, seeds_column(row), clock(row)])
    caption = (
        f"M4 {benchmark.name}, {n_series} series, horizon {benchmark.horizon}, sMAPE and MASE (seasonality "
        f"{benchmark.season}) averaged over series; validation: the {benchmark.horizon} steps before the test "
        f"steps; {hardware_name}."
    )
    table = markdown_table(caption, [*header, "seeds", "wall-clock (train + test)"], cells)
    columns = {
        "val_smape": "validation sMAPE",
        "val_mase": "validation MASE",
        "smape": "test sMAPE",
        "mase": "test MASE",
    }
    return table + per_seed_lines(rows, columns)


def _row(name: str, smape_, mase_, seconds: list[float] | None = None) -> dict:
    as_list = lambda value: value if isinstance(value, list) else [value]  # noqa: E731
    return {
        "model": name,
        "smape": as_list(smape_),
        "mase": as_list(mase_),
        "val_smape": [],
        "val_mase": [],
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.m4", description=__doc__.split("\n")[0])
    parser.add_argument("--frequency", choices=list(BENCHMARKS), default="hourly", help="which M4 subset")
    parser.add_argument("--data", type=Path, default=None, help="from project.tools.datasets (default: data/m4_*.csv)")
    parser.add_argument("--regimes", nargs="*", default=["free_running_detach"], choices=list(REGIMES))
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one training run per seed")
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time (each gets a share of the CPU)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument(
        "--output", type=Path, default=None, help="Markdown table to write (default: experiments/results/m4_*.md)"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--statistical",
        nargs="*",
        default=list(STATISTICAL),
        choices=list(STATISTICAL_MODELS),
        help="statsforecast models fitted per series (the baselines extra); none: --statistical with no name",
    )
    parser.add_argument(
        "--ckpt_path",
        type=Path,
        nargs="*",
        default=None,
        help="score these checkpoints (one configuration, e.g. one per seed) instead of training",
    )
    trust_argument(parser)
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    benchmark = BENCHMARKS[args.frequency]
    args.data = args.data or benchmark.data
    output = args.output or Path(f"experiments/results/m4_{args.frequency}.md")
    if not args.data.is_file():
        parser.error(f"{args.data}: not found; run python -m project.tools.datasets m4_{args.frequency}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    run_commit()  # what the stamp names: the code at the start, before baselines and runs
    with reported_in_one_line():
        check_seeds(args.seeds)
        # Built, not only read: a class the checkpoint names and the user did not trust is refused before the data.
        checkpoints = {path: load_checkpoint(path, args.trust)[0] for path in args.ckpt_path or []}
        inputs = [args.data, *(i for path, c in checkpoints.items() for i in checkpoint_inputs(path, c))]
        check_output(output, inputs, args.overwrite)  # before training, not after
        windows = datamodule(args.data, benchmark)
        for path, checkpoint in checkpoints.items():
            check_fits_m4(path, checkpoint, windows, benchmark)
        if args.statistical:
            statistical_model(
                args.statistical[0], benchmark.data_season
            )  # the extra is missing: say so before training
        rows = measure_baselines(windows, benchmark, tuple(args.statistical))
        if args.ckpt_path:  # timed by the events its run logged, from training to test
            seconds = [run_seconds(c.parent.parent) for c in args.ckpt_path]
            rows += score_checkpoints(args.ckpt_path, windows, seconds, None, benchmark)
        else:
            for regime in args.regimes:
                rows += train_and_score(regime, windows, args, extra, benchmark)
        rows += [_row(f"{name} (published)", *values) for name, values in benchmark.published.items()]
        write_table(output, markdown(rows, hardware(), benchmark, windows.panel.n_series), argv)


if __name__ == "__main__":
    main()
