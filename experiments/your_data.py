"""Does the config users start from beat the naive forecasts? The README's "Your data" path on every dataset.

    python -m experiments.your_data                        # experiments/results/your_data.md, every dataset below
    python -m experiments.your_data --datasets m4_weekly   # some of them

Each dataset is trained with ``configs/base.yaml`` alone, given only what the README's "Your data" section asks a
user for: the data file, its columns' roles, the look-back and the horizon, and the split, read from each dataset's
preset (``GIVEN``: the windows are the ones the other tables score); on the two M4 sets also a training stride (every
16th or 8th window), the CPU budget, as a user with a large panel and no GPU would set. Nothing about the model,
its loss or its training is set, so every row is what the defaults give. Each run keeps its checkpoint of lowest
validation loss and tests it once, per seed. The ``NaiveComparison`` callback scores repeat-last and seasonal naive
on the same validation and test windows, MAE in original units beside the model's, as ``test`` prints it.
A second table holds the statistical floor: statsforecast's AutoETS and AutoTheta (``experiments.statistical``,
the ``baselines`` extra), each fitted per series and channel on the training rows, forecasting every validation and
test window from the rows before it, with each seed's kept checkpoint scored again on the same windows (every
``floor_stride``-th window where all of them would cost too long: stated in the table).
``--reuse`` keeps the runs already in ``--logs`` (each dataset's and seed's latest) that kept a checkpoint, so an
interrupted table resumes, or is written again from its runs without training.

``--splits val`` trains with ``--test_after_fit=false`` and scores validation only: the test is read later, once,
by ``--reuse --splits val test``, which scores each kept checkpoint on the test windows in the floor's table.
The floor's table also scores the ensemble of the seeds (the mean of their point forecasts, what
``python -m project.tools.ensemble`` forecasts) on the same windows, and with the seven real datasets it applies the
rule committed before their runs (``experiments/results/search/ensemble_rule.md``).

The data files: ``python -m project.tools.datasets etth1``, ``m4_hourly`` and ``m4_weekly`` write them; the four
single series are facebook/prophet's examples, copied into ``--data_dir`` as they are (``wp_log_R.csv``'s copy
sorted by time is written by this tool, as the data module's refusal of unsorted rows asks); the intermittent panel
is written by this tool when absent (``experiments.intermittent``'s panel); the two synthetic datasets are
embedded.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import yaml

from experiments.intermittent import PANEL_CONFIG, data_settings, intermittent_panel
from experiments.results import (
    at_best_validation,
    best_checkpoint,
    check_seeds,
    data_options,
    fit,
    forecast_split,
    markdown_table,
    mean_forecast,
    mean_std,
    preset_datamodule,
    run_seconds,
    study_config,
    write_table,
)
from experiments.statistical import STATISTICAL_MODELS, floor_maes, statistical_model
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically
from project.tools.stamp import hardware, run_commit
from project.training.runs import find_runs, read_scalars

MODEL, NAIVE = "mae_original_units", ("mae_repeat_last_original_units", "mae_seasonal_naive_original_units")
SPLITS = {"val": "validation", "test": "test"}
# The datasets the ensemble rule is decided on (experiments/results/search/ensemble_rule.md): the real ones.
REAL = ("etth1", "m4_hourly", "m4_weekly", "peyton_manning", "wp_log_r", "pedestrians", "retail_sales")
ENSEMBLE_RULE = "experiments/results/search/ensemble_rule.md"


# What the README's "Your data" section asks a user for, the `data:` keys each dataset's own settings are cut to:
# the columns' roles, the look-back and horizon, the split and the training stride (on a large panel, the budget).
GIVEN = (
    "time_column",
    "id_columns",
    "target_columns",
    "past_covariates",
    "future_covariates",
    "static_covariates",
    "context_length",
    "horizon",
    "split",
    "eval_stride",
    "stride",
)


def given(settings: dict) -> list[str]:
    """``settings`` (a preset's ``data:``) cut to the keys a user gives, as ``fit`` options."""
    written = {
        key: f"[{', '.join(map(str, value))}]" if isinstance(value, list) else value for key, value in settings.items()
    }
    written.update({key: json.dumps(value) for key, value in settings.items() if isinstance(value, dict)})
    return [f"--data.{key}={value}" for key, value in written.items() if key in GIVEN]  # as a user types them


@dataclass(frozen=True)
class Dataset:
    """A dataset as a user would give it: its label, the data file (None: embedded), the season of its seasonal
    naive forecast (None: longer than the look-back), the settings it is defined by (a preset, or a ``data:``
    mapping) and options the preset does not hold; for the statistical floor, the season its models are given and
    every how many validation and test windows they forecast."""

    label: str  # its counts ({series}, {channels}) and lengths ({horizon}, {look_back}): from the data read, ``named``
    file: str | None
    season: int | None
    settings: Path | dict = field(default_factory=dict)
    extra: tuple[str, ...] = ()
    made_by: str = ""  # the command that writes ``file``
    sorted_from: str = ""  # a file in the data folder that ``file`` is a copy of, sorted by its time column
    period: int = 1  # the statistical models' season_length: the data's season (1: none)
    floor_stride: int = 1  # > 1 where AutoTheta on every window would take long (~70 ms a window and channel)

    def named(self, windows: WindowDataModule) -> str:
        """The label with the series, channels and lengths of the data the tool read (a ``--data.context_length``
        given to every run included), not of the file it expects."""
        return self.label.format(
            series=windows.panel.n_series,
            channels=len(windows.panel.roles.targets),
            horizon=windows.horizon,
            look_back=windows.context_length,
        )

    @property
    def options(self) -> list[str]:
        """The ``fit`` options: the settings cut to ``GIVEN``, then ``extra``."""
        settings = self.settings
        if isinstance(settings, Path):  # read when used: the tool runs from the repository's root
            settings = yaml.safe_load(settings.read_text())["data"]
        return [*given(settings), *self.extra]

    def windows(self, source: Path | None, extra: list[str], stride: int = 1) -> WindowDataModule:
        """The data of the runs (base.yaml's ``data:`` with ``options``, then the ``--data.*`` options of ``extra``
        that every run is given), every ``stride``-th validation and test window, set up for testing."""
        settings = data_options([*self.options, *extra])
        settings["eval_stride"] = settings.get("eval_stride", 1) * stride
        return preset_datamodule(None, source, **settings)


PROPHET_EXAMPLES = "copy facebook/prophet's examples/ files (../shared/data/prophet-examples/ here) into the folder"


def prophet_series(
    label: str, file: str, season: int, look_back: int, horizon: int, sorted_copy: bool = False
) -> Dataset:
    """One of facebook/prophet's example series (a time column ``ds``, a value ``y``), split by the default
    fractions, its naive and statistical forecasts at ``season``; ``sorted_copy``: read from a copy of ``file``
    sorted by time, which the tool writes (the data module refuses rows out of order)."""
    return Dataset(
        label + ", horizon {horizon}, look-back {look_back}",
        file.replace(".csv", "_sorted.csv") if sorted_copy else file,
        season,
        {"time_column": "ds", "target_columns": ["y"], "context_length": look_back, "horizon": horizon},
        made_by=PROPHET_EXAMPLES,
        sorted_from=file if sorted_copy else "",
        period=season,
    )


DATASETS = {
    "series": Dataset(  # make train: base.yaml exactly as it is
        "embedded synthetic series (`make train`), {channels} channels, hourly, "
        "horizon {horizon}, look-back {look_back}",
        None,
        None,
        period=24,
        floor_stride=24,  # 989 and 1989 windows, 5 channels
    ),
    "panel": Dataset(
        "embedded synthetic panel (configs/panel.yaml's data), {series} daily series, "
        "horizon {horizon}, look-back {look_back}",
        None,
        7,
        PANEL_CONFIG,
        ("--data.synthetic=panel",),
        period=7,
        floor_stride=7,  # 2262 and 4983 windows
    ),
    "intermittent": Dataset(
        "intermittent monthly panel (synthetic), {series} series, horizon {horizon}, look-back {look_back}",
        "intermittent_panel.csv",
        12,
        data_settings(),
        period=12,
    ),
    "etth1": Dataset(
        "ETTh1, {channels} channels, hourly, horizon {horizon}, look-back {look_back}",
        "ETTh1.csv",
        24,
        study_config("etth1.yaml"),
        made_by="python -m project.tools.datasets etth1",
        period=24,
        floor_stride=24,  # 2785 windows a split, 7 channels: AutoTheta on all would take ~45 min
    ),
    "m4_hourly": Dataset(
        "M4 Hourly, {series} series, horizon {horizon}, look-back {look_back}",
        "m4_hourly.csv",
        24,
        study_config("m4_hourly.yaml"),
        ("--data.stride=16",),  # every 16th training window: the CPU budget (one epoch of all is ~45 min here)
        "python -m project.tools.datasets m4_hourly",
        period=24,
    ),
    "m4_weekly": Dataset(  # its preset trains on every 8th window, the CPU budget
        "M4 Weekly, {series} series, horizon {horizon}, look-back {look_back}",
        "m4_weekly.csv",
        52,
        study_config("m4_weekly.yaml"),
        made_by="python -m project.tools.datasets m4_weekly",
        period=52,  # a year of weeks: the data's season (M4 scales MASE by 1 for weekly data; no MASE here)
    ),
    "peyton_manning": prophet_series("Peyton Manning page views (log), daily", "wp_log_peyton_manning.csv", 7, 56, 14),
    "wp_log_r": prophet_series("R page views (log), daily", "wp_log_R.csv", 7, 56, 14, sorted_copy=True),
    "pedestrians": prophet_series(
        "pedestrian counts, daily, 2020 lockdowns inside", "pedestrians_covid.csv", 7, 56, 14
    ),
    "retail_sales": prophet_series("US retail sales, monthly", "retail_sales.csv", 12, 36, 12),
}


def scores(run: Path) -> dict[str, float]:
    """The run's validation MAEs at its kept checkpoint (lowest validation loss) and its test MAEs, original
    units: ``val/…`` and ``test/…`` of the model, repeat-last and seasonal naive (NaN when not scored)."""
    curves, found = read_scalars(run), {}
    for tag in (MODEL, *NAIVE):
        found[f"val/{tag}"] = at_best_validation(curves, f"val/{tag}") if f"val/{tag}" in curves else math.nan
        found[f"test/{tag}"] = float(curves[f"test/{tag}"].iloc[-1]) if f"test/{tag}" in curves else math.nan
    return found


def verdict(model: list[float], naive: list[float]) -> str:
    """Whether the model's MAE is below every naive forecast's on a split, and by how much the worst seed is."""
    naive = [value for value in naive if not math.isnan(value)]  # a seasonal naive not scored is NaN
    margin = max(model) / min(naive) - 1
    return f"{'yes' if margin < 0 else 'no'} ({margin:+.1%})"


def markdown(
    rows: dict[str, list[dict[str, float]]], seeds: list[int], seconds: dict[str, list[float]], labels: dict[str, str]
) -> str:
    header = [
        "data",
        "split",
        "model MAE",
        "repeat-last MAE",
        "seasonal naive MAE",
        "below both (worst seed)",
        "seeds",
        "wall-clock (fit + test)",
    ]
    table, per_seed = [], []
    for key, runs in rows.items():
        dataset = DATASETS[key]
        minutes = f"{statistics.mean(seconds[key]) / 60:.1f} min"
        for split, name in (("val", "validation"), ("test", "test")):
            model = [run[f"{split}/{MODEL}"] for run in runs]
            if any(math.isnan(value) for value in model):  # not tested (--test_after_fit=false)
                continue
            naive = [runs[0][f"{split}/{tag}"] for tag in NAIVE]  # the same windows every seed: one value
            seasonal = f"{naive[1]:.3f} (season {dataset.season})" if dataset.season else "– (season > look-back)"
            table.append(
                [
                    labels[key],
                    name,
                    mean_std(model),
                    f"{naive[0]:.3f}",
                    seasonal,
                    verdict(model, naive),
                    str(len(runs)),
                    minutes,
                ]
            )
            values = ", ".join(f"seed {seed}: {value:.3f}" for seed, value in zip(seeds, model))
            per_seed.append(f"- {labels[key]}, {name} model MAE: {values}")
    caption = (
        "configs/base.yaml with only the data's roles, look-back, horizon and split (the README's \"Your data\" "
        f"path): MAE in original units, validation at the checkpoint kept, test once per seed; {hardware()}."
    )
    return markdown_table(caption, header, table) + "\n" + "\n".join(per_seed) + "\n"


def floor(
    dataset: Dataset,
    source: Path | None,
    runs: list[Path],
    statistical: tuple[str, ...],
    splits: list[str],
    extra: list[str] = (),
) -> tuple[dict[str, list[float]], dict[str, float], dict[str, dict[str, float]], dict[str, float]]:
    """MAEs in original units on every ``dataset.floor_stride``-th window of ``splits``: each run's kept checkpoint
    (split → one value per seed), the ensemble of the runs (split → the MAE of the mean of their point forecasts),
    and ``experiments.statistical.floor_maes``' naive and ``statistical`` forecasts on the same windows (forecast →
    split → value) with each statistical model's seconds."""
    windows = dataset.windows(source, list(extra), dataset.floor_stride)  # the runs' windows, as they were given
    model, ensemble = {}, {}
    for split in splits:
        forecasts = [forecast_split(best_checkpoint(run), windows, split) for run in runs]
        model[split] = [mae(forecast) for forecast in forecasts]
        ensemble[split] = mae(mean_forecast(forecasts))
    maes, seconds = floor_maes(windows, statistical, dataset.season, dataset.period, splits, progress=None)
    return model, ensemble, maes, seconds


def mae(forecast: dict) -> float:
    return float((forecast["point"] - forecast["target"]).abs().mean())


def best_simple(maes: dict[str, dict[str, float]], split: str) -> tuple[str, float]:
    """The simple forecast (naive or statistical) with the lowest MAE on ``split``, and that MAE."""
    return min(((name, by_split[split]) for name, by_split in maes.items()), key=lambda pair: pair[1])


def floor_markdown(
    floors: dict[str, tuple], seeds: list[int], statistical: tuple[str, ...], labels: dict[str, str]
) -> str:
    """The statistical floor's table: per dataset and split, the model's MAE over seeds and the ensemble's beside
    the naive and the statistical forecasts' on the same windows, and whether every seed is below each statistical
    model; with the seven real datasets' validation, the ensemble rule's decision."""
    header = ["data", "split", "windows", "season", "model MAE", "ensemble MAE", "repeat-last MAE"]
    header += ["seasonal naive MAE", *(f"{name} MAE" for name in statistical)]
    header += [f"below {name} (worst seed)" for name in statistical]
    header += ["ensemble below the best seed", "ensemble below the best simple forecast"]
    table, per_seed = [], []
    for key, (model, ensemble, maes, seconds) in floors.items():
        dataset = DATASETS[key]
        every = "every window" if dataset.floor_stride == 1 else f"every {dataset.floor_stride}th window"
        for split, by_seed in model.items():  # the splits the runs were scored on
            seasonal = maes.get(f"seasonal naive ({dataset.season})")
            taken = [f"{maes[n][split]:.3f} ({seconds[n]:.0f} s)" for n in statistical]
            simple, simple_mae = best_simple(maes, split)
            table.append(
                [
                    labels[key],
                    SPLITS[split],
                    every,
                    str(dataset.period),
                    mean_std(by_seed),
                    f"{ensemble[split]:.3f}",
                    f"{maes['repeat-last'][split]:.3f}",
                    f"{seasonal[split]:.3f}" if seasonal else "–",
                    *taken,
                    *(verdict(by_seed, [maes[n][split]]) for n in statistical),
                    verdict([ensemble[split]], [min(by_seed)]),
                    f"{verdict([ensemble[split]], [simple_mae])}, {simple}",
                ]
            )
            values = ", ".join(f"seed {seed}: {value:.3f}" for seed, value in zip(seeds, by_seed))
            per_seed.append(f"- {labels[key]}, {SPLITS[split]}, {every}, model MAE: {values}")
    caption = (
        "The statistical floor on the same runs: each seed's kept checkpoint scored again, and the ensemble of the "
        "seeds (the mean of their point forecasts), beside statsforecast's models (fitted per series and channel on "
        "the training rows with the data's season, the season column, the seasonal naive's too; in parentheses the "
        "seconds each took for the splits scored) and the naive forecasts, MAE in original units on every window or, "
        f"where that would take long, every Nth validation and test window; {hardware()}."
    )
    text = markdown_table(caption, header, table) + "\n" + "\n".join(per_seed) + "\n"
    if set(REAL) <= set(floors) and all("val" in floors[key][0] for key in REAL) and len(seeds) > 1:
        text += "\n" + ensemble_decision({key: floors[key] for key in REAL}) + "\n"
    return text


def ensemble_decision(floors: dict[str, tuple]) -> str:
    """The rule of ``ENSEMBLE_RULE`` on the datasets' validation MAEs: the ensemble is recommended where accuracy
    matters when it is below its best seed on at least five of the seven datasets and at least 1% below the mean
    seed on average."""
    below_best = [key for key, (model, ensemble, *_) in floors.items() if ensemble["val"] < min(model["val"])]
    gains = [1 - ensemble["val"] / statistics.mean(model["val"]) for model, ensemble, *_ in floors.values()]
    gain = statistics.mean(gains)
    recommended = len(below_best) >= 5 and gain >= 0.01
    return (
        f"The ensemble rule ({ENSEMBLE_RULE}, committed before these runs), on validation: the ensemble is below its "
        f"best seed on {len(below_best)} of the {len(floors)} datasets (needs 5), and {gain:.2%} below the mean "
        f"seed on average (needs 1%; per dataset: {', '.join(f'{g:+.2%}' for g in gains)}). Decision: "
        + ("recommend the ensemble where accuracy matters." if recommended else "do not recommend the ensemble.")
    )


def write_data(dataset: Dataset, source: Path, folder: Path) -> None:
    """Write a data file the tool makes itself (the intermittent panel, a sorted copy), or say how to get it."""
    if source.name == "intermittent_panel.csv":
        write_atomically(source, lambda path: intermittent_panel().to_csv(path, index=False))
    elif dataset.sorted_from and (original := folder / dataset.sorted_from).is_file():
        frame = pd.read_csv(original)
        time_column = dataset.settings["time_column"]
        frame = frame.iloc[pd.to_datetime(frame[time_column]).argsort(kind="stable")]
        write_atomically(source, lambda path: frame.to_csv(path, index=False))
    elif dataset.made_by.startswith("python -m"):
        raise InputError(f"{source}: not found; `{dataset.made_by} --dir {folder}` writes it")
    else:
        raise InputError(f"{folder / (dataset.sorted_from or dataset.file)}: not found; {dataset.made_by}")


def kept_run(logs: Path, name: str) -> Path | None:
    """The latest run logged as ``logs/name`` that kept a checkpoint (what ``--reuse`` keeps). A run trained with
    ``--splits val`` has no test scores of its own: the floor's table scores its checkpoint on the test windows."""
    runs = find_runs(logs / name) if (logs / name).is_dir() else []
    return runs[-1] if runs and list((runs[-1] / "checkpoints").glob("best-*.ckpt")) else None


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.your_data", description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", nargs="+", choices=list(DATASETS), default=list(DATASETS), help="which")
    parser.add_argument("--data_dir", type=Path, default=Path("data"), help="where the data files are")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one run per seed and dataset")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs/your_data"), help="where runs log")
    parser.add_argument("--output", type=Path, default=Path("experiments/results/your_data.md"), help="the table")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--reuse", action="store_true", help="keep the runs already in --logs that kept a checkpoint")
    parser.add_argument(
        "--splits",
        nargs="+",
        choices=list(SPLITS),
        default=list(SPLITS),
        help="what is scored: val alone trains without testing; val test after it reads the test once",
    )
    parser.add_argument(
        "--statistical",
        nargs="*",
        default=["AutoETS", "AutoTheta"],
        choices=list(STATISTICAL_MODELS),
        help="the floor's statsforecast models (the baselines extra); with no name, no floor table",
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    run_commit()  # what the stamp names: the code at the start
    with reported_in_one_line():
        check_seeds(args.seeds)
        chosen = {key: DATASETS[key] for key in args.datasets}
        sources = {key: args.data_dir / d.file for key, d in chosen.items() if d.file}
        check_output(args.output, list(sources.values()), args.overwrite)
        for key, source in sources.items():
            if not source.is_file():
                write_data(chosen[key], source, args.data_dir)
        if args.statistical:
            statistical_model(args.statistical[0], 1)  # the extra is missing: say so before training
        rows, seconds, floors, labels, trained = {}, {}, {}, {}, {}
        for key, dataset in chosen.items():
            labels[key] = dataset.named(dataset.windows(sources.get(key), extra))  # the data as the runs read it
            options = [*dataset.options, *extra]
            if key in sources:
                options.insert(0, f"--data.source={sources[key]}")
            if dataset.season:
                options.append(f"--naive_comparison.season={dataset.season}")
            if "test" not in args.splits:
                options.append("--test_after_fit=false")
            runs = []
            for seed in args.seeds:
                name = f"{key}_seed{seed}"
                run = (args.reuse and kept_run(args.logs, name)) or fit(
                    [], [*options, f"--seed_everything={seed}"], args.logs, name
                )[0]
                runs.append(run)
                trained[name] = run
                rows.setdefault(key, []).append(scores(run))
                seconds.setdefault(key, []).append(run_seconds(run))  # from the log: the same for a kept run
            if args.statistical:  # on the splits asked for: a validation-only table reads no test
                print(f"the statistical floor of {key} ({', '.join(args.statistical)})", flush=True)
                floors[key] = floor(dataset, sources.get(key), runs, tuple(args.statistical), args.splits, extra)
        table = markdown(rows, args.seeds, seconds, labels)
        if floors:
            table += "\n" + floor_markdown(floors, args.seeds, tuple(args.statistical), labels)
        write_table(args.output, table, argv, runs=trained if args.reuse else None)


if __name__ == "__main__":
    main()
