"""When free running pays off: every regime trained at several decoder depths on real data, with a figure.

    python -m experiments.depth etth1 --data data/ETTh1.csv          # results/depth_etth1.md, docs/depth_etth1.png
    python -m experiments.depth m4_hourly --data data/m4_hourly.csv  # results/depth_m4_hourly.md, ...png

(``results/`` is ``experiments/results/``.)

AutoETS and AutoTheta rows need the ``baselines`` extra (``pip install -e .[baselines]``); ``--statistical`` alone
leaves them out.

For a dataset and its horizon H, each regime (teacher forcing, free running ``detach`` and ``bptt``, scheduled
sampling) is trained at each decoder depth D = H / patch_length: D autoregressive decoder steps, each forecasting
one patch. Everything else is the same in every cell and fixed in ``STUDIES`` before any test score was read:
the dataset's preset (its network and learning rate, the same for every regime), shrunk so that the grid runs on
2 CPU cores (a shorter look-back, a smaller network, a stride over the training windows, fewer epochs). Each cell
is trained once per seed by ``python -m project.cli fit``, which tests the checkpoint its validation chose; the
table gives, per cell, the validation scores of that checkpoint (read from its run: the free-running loss, what
prediction gets, beside the teacher-forced one, whose difference is the exposure-bias gap) and the test scores,
beside the in-run baselines (repeat-last, seasonal naive, the least-squares and NLinear maps fitted on the same
training windows, and statsforecast's AutoETS and AutoTheta fitted per series and channel on the training rows:
``--statistical``, the ``baselines`` extra) on the same validation and test windows; each cell's values per seed
follow the tables. A second table says, depth by depth, where each
free-running regime beats teacher forcing by more than the seeds' spread, ties, or loses. The figure draws the
validation and test score against D (log scale), one line per regime, the seeds' range as a band.

A cell left out says so in its row: ``--leave-out REGIME:D=REASON`` (say why and what it costs). A run that fails
or ends without its test writes no table: the command ends in one line naming it, exit code 2. ``--reuse`` keeps
the runs already in ``--logs`` that reached their test, so a failed or interrupted grid resumes;
``--regimes``/``--depths`` run part of it (the other cells are labelled, never dropped).
"""

from __future__ import annotations

import argparse
import os
import statistics
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from experiments.etth1 import SEASON, measure_baselines, statistical_row
from experiments.results import (
    RunFailed,
    best_checkpoint,
    best_epoch,
    check_distinct_outputs,
    check_seeds,
    data_options,
    fit,
    markdown_table,
    mean_std,
    per_seed_lines,
    preset_datamodule,
    run_seconds,
    study_config,
    tested_run,
    write_table,
)
from experiments.statistical import STATISTICAL_MODELS, statistical_label, statistical_model
from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically
from project.tools.stamp import hardware
from project.training.regimes import REGIMES, regime_arguments
from project.training.runs import read_scalars


@dataclass(frozen=True)
class Study:
    """One dataset's grid and the setting every cell shares (fixed before any test score was read).

    ``config`` is the preset stacked on configs/base.yaml; ``setting`` the ``fit`` options every cell gets on top
    of it (the ``--data.*`` ones also shape the baselines' windows); ``scheduled`` the options scheduled sampling
    gets besides (its decay, which only it takes); ``monitor`` the validation score that chooses each run's
    checkpoint; ``score`` the one the verdicts and the figure read (``mse`` or ``mae``, on scaled values)."""

    title: str  # its counts ({series}, {channels}) are filled in from the data the tool read
    config: Path
    horizon: int
    depths: tuple[int, ...]
    setting: tuple[str, ...]
    scheduled: tuple[str, ...]
    monitor: str
    score: str


SMALL_NETWORK = (  # one network for every cell of both studies: 47k parameters at ETTh1's seven channels
    "--model.network.init_args.d_model=32",
    "--model.network.init_args.nhead=4",
    "--model.network.init_args.num_encoder_layers=1",
    "--model.network.init_args.num_decoder_layers=2",
    "--model.network.init_args.dim_feedforward=128",
)
COMMON = (
    "--trainer.max_epochs=4",
    "--early_stopping.patience=4",  # every cell trains its 4 epochs; the checkpoint is the best by validation
    "--model.lr_scheduler.init_args.warmup_steps=50",
    "--forecast_figures.every_n_epochs=0",
    "--trainer.enable_progress_bar=false",
)
# Sized from one epoch of each grid's deepest bptt cell, timed first (one thread, niced, 2 shared cores):
# ETTh1 D=32 (patch 3), stride 5: 54 steps of 32 windows x 7 channels and a validation, 23 s (28 s with start-up);
# M4 Hourly D=48 (patch 1), the preset's batch of 256 at stride 25: 40 steps in 61 s, so M4 trains on every 50th
# window in batches of 64 (about 70 steps an epoch, ~40% of that work).
STUDIES = {
    "etth1": Study(
        "ETTh1, {channels} channels (channel-independent), horizon 96, look-back 96",
        study_config("etth1.yaml"),
        96,
        (2, 4, 8, 16, 32),
        (*SMALL_NETWORK, *COMMON, "--data.context_length=96", "--data.stride=5", "--data.eval_stride=5"),
        (
            "--model.regime.init_args.steps=100",
        ),  # about half of the run's ~210 steps: the second half is near free running
        "val/mse",
        "mse",
    ),
    "m4_hourly": Study(
        "M4 Hourly, {series} series, horizon 48, look-back 168",
        study_config("m4_hourly.yaml"),
        48,
        (2, 4, 8, 16, 48),
        (*SMALL_NETWORK, *COMMON, "--data.stride=50", "--data.batch_size=64"),
        ("--model.regime.init_args.steps=140",),  # about half of the run's ~280 steps
        "val/loss",
        "mae",
    ),
}
REGIME_ORDER = ["teacher_forcing", "free_running_detach", "free_running_bptt", "scheduled_sampling"]
FREE_RUNNING = ["free_running_detach", "free_running_bptt", "scheduled_sampling"]


def cell_name(dataset: str, regime: str, depth: int) -> str:
    return f"{dataset}_{regime}_D{depth}"


def cell_arguments(study: Study, regime: str, depth: int, data: Path) -> list[str]:
    """The ``fit`` options of one cell: the study's setting, the regime's settings and the patch that gives D."""
    settings = regime_arguments(regime)
    patch = [f"--model.network.init_args.patch_length={study.horizon // depth}"]
    scheduled = list(study.scheduled) if regime == "scheduled_sampling" else []
    return [f"--data.source={data}", *study.setting, *settings, *patch, *scheduled]


def run_grid(study_name: str, cells: list[tuple[str, int]], args: argparse.Namespace, extra: list[str]) -> dict:
    """Train every (cell, seed) not already tested in ``--logs`` (with ``--reuse``), ``--jobs`` at a time; each
    cell → its runs, or the error that stopped one of them."""
    study = STUDIES[study_name]
    work = []
    for regime, depth in cells:
        for seed in args.seeds:
            name = f"{cell_name(study_name, regime, depth)}_seed{seed}"
            if not (args.reuse and tested_run(args.logs, name)):
                arguments = [*cell_arguments(study, regime, depth, args.data), *extra, f"--seed_everything={seed}"]
                work.append((name, arguments))
    threads = None if "OMP_NUM_THREADS" in os.environ else max(1, (os.cpu_count() or 1) // args.jobs)

    def one(job: tuple[str, list[str]]) -> str | None:
        name, arguments = job
        try:
            fit([study.config], arguments, args.logs, name, threads)
        except RunFailed as error:
            return name, str(error)
        return None

    with ThreadPoolExecutor(max_workers=args.jobs) as pool:
        failures = [failure for failure in pool.map(one, work) if failure]
    if failures:  # a table without the runs asked for would read as the study's result
        kept = " (--reuse keeps the runs that reached their test)" if len(failures) < len(work) else ""
        raise RunFailed(f"{len(failures)} of {len(work)} runs failed, the first: {failures[0][1]}{kept}")
    found = {}
    for regime, depth in cells:
        names = [f"{cell_name(study_name, regime, depth)}_seed{seed}" for seed in args.seeds]
        runs = [tested_run(args.logs, name) for name in names]
        missing = [name for name, run in zip(names, runs) if run is None]
        if missing:  # it ran and exited 0 without testing (e.g. --test_after_fit=false): no scores to show
            raise RunFailed(f"the run {missing[0]} did not reach its test; its log is in {args.logs}")
        found[(regime, depth)] = runs
    return found


VALIDATION_TAGS = {
    "val_mse": "val/mse",
    "val_mae": "val/mae",
    "val_loss": "val/loss",  # free-running, as prediction forecasts
    "val_loss_tf": "val/loss_teacher_forced",  # its difference from val/loss is the exposure-bias gap
}


CELL_SCORES = ("val_mse", "val_mae", "val_loss", "val_loss_tf", "test_mse", "test_mae")  # the table's columns
CELL_LABELS = (
    "validation MSE",
    "validation MAE",
    "validation loss",
    "validation loss, teacher-forced",
    "test MSE",
    "test MAE",
)


def cell_row(runs: list[Path], monitor: str) -> dict:
    """A cell over its seeds: each run's validation scores at the checkpoint its validation chose (the minimum of
    ``monitor``), its test scores, best epoch and seconds."""
    row = {key: [] for key in CELL_SCORES}
    row["seconds"], row["best_epoch"] = [], []
    for run in runs:
        curves = read_scalars(run)
        tags = [monitor, *(f"val/{tag}" for tag in ("mse", "mae", "loss", "loss_teacher_forced")), "test/mse"]
        missing = [tag for tag in dict.fromkeys(tags) if tag not in curves]
        if missing:  # a run that never validated (or tested) has no checkpoint the study can score
            raise InputError(f"{run}: the run logged no {', '.join(missing)}; a study's runs validate and test")
        chosen = curves[monitor].idxmin()  # the step of the best checkpoint
        for key, tag in (
            ("val_mse", "mse"),
            ("val_mae", "mae"),
            ("val_loss", "loss"),
            ("val_loss_tf", "loss_teacher_forced"),
        ):
            row[key].append(float(curves[f"val/{tag}"][chosen]))
        for key in ("mse", "mae"):
            row[f"test_{key}"].append(float(curves[f"test/{key}"].iloc[-1]))
        row["seconds"].append(run_seconds(run))
        row["best_epoch"].append(best_epoch(best_checkpoint(run)))
    return row


def verdict(free: list[float], teacher: list[float]) -> str:
    """``wins`` when free running's mean + its standard deviation is below teacher forcing's mean − its own
    (lower is better), ``loses`` the other way round, ``ties`` when the two mean ± sd intervals overlap."""
    (free_mean, free_sd), (teacher_mean, teacher_sd) = (_mean_sd(free), _mean_sd(teacher))
    if free_mean + free_sd < teacher_mean - teacher_sd:
        return "wins"
    if free_mean - free_sd > teacher_mean + teacher_sd:
        return "loses"
    return "ties"


def _mean_sd(values: list[float]) -> tuple[float, float]:
    return statistics.mean(values), statistics.stdev(values) if len(values) > 1 else 0.0


def title(study: Study, windows) -> str:
    """The study's title with the series and channels of the data the tool read, not of the file it expects."""
    return study.title.format(series=windows.panel.n_series, channels=len(windows.panel.roles.targets))


def markdown(
    study_name: str, cells: dict, baselines: list[dict], args: argparse.Namespace, extra: list[str], named: str = ""
) -> str:
    """The grid table (baselines first, then regime by depth), the verdicts against teacher forcing, and what was
    fixed."""
    study = STUDIES[study_name]
    header = ["model", "D (decoder steps)", "patch", *CELL_LABELS, "seeds", "wall-clock"]
    lines = []
    for row in baselines:
        scores = [mean_std(row[k]) for k in ("val_mse", "val_mae")] + ["–", "–"]
        lines.append(
            [
                row["model"],
                "–",
                "–",
                *scores,
                *(mean_std(row[k]) for k in ("test_mse", "test_mae")),
                "deterministic",
                "–",
            ]
        )
    for regime in REGIME_ORDER:
        for depth in study.depths:
            name, found = regime.replace("_", " "), cells.get((regime, depth))
            first = [name, str(depth), str(study.horizon // depth)]
            if isinstance(found, dict):
                scores = [mean_std(found[k]) for k in CELL_SCORES]
                epochs = ", ".join(map(str, found["best_epoch"]))
                seconds = statistics.mean(found["seconds"])
                lines.append([*first, *scores, str(len(found["seconds"])), f"{seconds:.0f} s (best epoch {epochs})"])
            else:
                lines.append(
                    [
                        *first,
                        f"left out: {found or 'not run by this command (--regimes/--depths)'}",
                        *["–"] * 5,
                        "0",
                        "–",
                    ]
                )
    loss = "validation MSE" if study.monitor == "val/mse" else "the validation loss (MAE, the training loss)"
    caption = (
        f"{named or study.title}: every regime at every decoder depth D = {study.horizon} / patch, mean ± standard "
        f"deviation over seeds, scores on scaled values; validation at each run's checkpoint chosen by {loss}, "
        f"whose free-running loss and teacher-forced loss are side by side; {hardware()}."
    )
    text = markdown_table(caption, header, lines)
    score = study.score.upper()
    rows = []
    for depth in study.depths:
        teacher = cells.get(("teacher_forcing", depth))
        line = [str(depth)]
        for regime in FREE_RUNNING:
            free = cells.get((regime, depth))
            if not (isinstance(free, dict) and isinstance(teacher, dict)):
                line += ["–", "–"]
                continue
            for split in ("val", "test"):
                difference = statistics.mean(free[f"{split}_{study.score}"]) - statistics.mean(
                    teacher[f"{split}_{study.score}"]
                )
                line.append(
                    f"{difference:+.3f} ({verdict(free[f'{split}_{study.score}'], teacher[f'{split}_{study.score}'])})"
                )
        rows.append(line)
    header = ["D"] + [
        f"{r.replace('_', ' ')} − teacher forcing, {s}" for r in FREE_RUNNING for s in ("validation", "test")
    ]
    text += "\n" + markdown_table(
        f"Free running against teacher forcing, {score} (negative: free running is better): wins, ties or loses "
        "by whether the two mean ± sd intervals over seeds are apart or overlap.",
        header,
        rows,
    )
    text += per_seed_lines(
        [
            {**found, "model": f"{regime.replace('_', ' ')}, D = {depth}", "seeds": args.seeds}
            for regime in REGIME_ORDER
            for depth in study.depths
            if isinstance(found := cells.get((regime, depth)), dict)
        ],
        dict(zip(CELL_SCORES, CELL_LABELS, strict=True)),
    )
    options = " ".join(f"`{option}`" for option in [*study.setting, *extra])
    text += (
        "\nFixed in every cell before any test score was read: "
        f"`experiments/configs/{study.config.name}` on `configs/base.yaml` "
        f"(its learning rate for every regime), then {options}; scheduled sampling also "
        f"{' '.join(f'`{option}`' for option in study.scheduled)} (inverse-sigmoid decay of the teacher-forcing "
        f"probability). Seeds {', '.join(map(str, args.seeds))}.\n"
    )
    return text


def draw(study_name: str, cells: dict, baselines: list[dict], path: Path, named: str = "") -> None:
    """Validation and test score against D (log scale), one line per regime, the seeds' range as a band, and the
    least-squares and seasonal-naive baselines as dashed lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    study = STUDIES[study_name]
    figure, axes = plt.subplots(1, 2, figsize=(10, 3.8), sharey=False)
    for axis, split, title in zip(axes, ("val", "test"), ("validation", "test")):
        key = f"{split}_{study.score}"
        for regime in REGIME_ORDER:
            depths = [d for d in study.depths if isinstance(cells.get((regime, d)), dict)]
            if not depths:
                continue
            values = [cells[(regime, d)][key] for d in depths]
            color = f"C{REGIME_ORDER.index(regime)}"  # a regime has one colour in every figure
            means = [statistics.mean(v) for v in values]
            axis.plot(depths, means, marker="o", color=color, label=regime.replace("_", " "))
            axis.fill_between(depths, [min(v) for v in values], [max(v) for v in values], color=color, alpha=0.2)
        for row, style in zip(
            [b for b in baselines if b["model"].startswith(("least-squares", "seasonal naive"))], ("--", ":")
        ):
            axis.axhline(
                row[key][0], color="grey", linestyle=style, linewidth=1, label=row["model"].split(",")[0].split(" (")[0]
            )
        axis.set_xscale("log", base=2)
        axis.set_xticks(list(study.depths), [str(d) for d in study.depths])
        axis.set_xlabel("decoder steps D (log scale)")
        axis.set_ylabel(f"{title} {study.score.upper()} (scaled)")
        axis.set_title(f"{(named or study.title).split(',')[0]}: {title}")
    axes[1].legend(fontsize=7)
    figure.tight_layout()
    write_atomically(path, lambda temporary: figure.savefig(temporary, dpi=110, format="png"))
    plt.close(figure)


def statistical(name: str, windows) -> dict:
    """``name`` fitted per series and channel on the training rows, forecasting every validation and test window of
    the study (season 24, both studies' data being hourly): a baseline row, its seconds in its label."""
    row = statistical_row(name, windows)
    label = statistical_label(name, SEASON)
    return {**row, "model": f"{label}, statsforecast, per series and channel (measured, {row['seconds'][0]:.0f} s)"}


def parse_left_out(values: list[str]) -> dict[tuple[str, int], str]:
    """``REGIME:D=REASON`` → {(regime, D): reason}."""
    left_out = {}
    for value in values:
        cell, _, reason = value.partition("=")
        regime, _, depth = cell.partition(":")
        if regime not in REGIMES or not depth.isdigit() or not reason:
            raise argparse.ArgumentTypeError(f"--leave-out takes REGIME:D=REASON; got {value!r}")
        left_out[(regime, int(depth))] = reason
    return left_out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.depth", description=__doc__.split("\n")[0])
    parser.add_argument("dataset", choices=list(STUDIES))
    parser.add_argument("--data", type=Path, default=None, help="the dataset's file (default: data/ETTh1.csv, ...)")
    parser.add_argument("--regimes", nargs="+", default=REGIME_ORDER, choices=REGIME_ORDER, metavar="REGIME")
    parser.add_argument("--depths", type=int, nargs="+", default=None, help="decoder depths to train (default: all)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="one training run per seed")
    parser.add_argument("--jobs", type=int, default=1, help="training runs at a time (each gets a share of the CPU)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs/depth"), help="where the runs are logged")
    parser.add_argument(
        "--output", type=Path, default=None, help="Markdown table (default: experiments/results/depth_<dataset>.md)"
    )
    parser.add_argument("--figure", type=Path, default=None, help="PNG (default: docs/depth_<dataset>.png)")
    parser.add_argument("--overwrite", action="store_true", help="replace existing --output and --figure files")
    parser.add_argument("--reuse", action="store_true", help="keep runs already in --logs that reached their test")
    parser.add_argument(
        "--leave-out",
        nargs="*",
        default=[],
        metavar="REGIME:D=REASON",
        help="cells not to train, each with the reason (and measured cost) its row gives",
    )
    parser.add_argument(
        "--statistical",
        nargs="*",
        default=["AutoETS", "AutoTheta"],
        choices=list(STATISTICAL_MODELS),
        help="statsforecast models per series and channel (the baselines extra) as baseline rows; none: --statistical",
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    study = STUDIES[args.dataset]
    args.data = args.data or Path("data/ETTh1.csv" if args.dataset == "etth1" else "data/m4_hourly.csv")
    if not args.data.is_file():
        parser.error(f"{args.data}: not found; run python -m project.tools.datasets {args.dataset}")
    if args.jobs < 1:
        parser.error(f"--jobs must be at least 1; got {args.jobs}")
    depths = args.depths or list(study.depths)
    if unknown := sorted(set(depths) - set(study.depths)):
        parser.error(f"--depths of {args.dataset} are among {list(study.depths)}; got {unknown}")
    try:
        left_out = parse_left_out(args.leave_out)
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    output = args.output or Path(f"experiments/results/depth_{args.dataset}.md")
    figure = args.figure or Path(f"docs/depth_{args.dataset}.png")
    with reported_in_one_line():
        check_seeds(args.seeds)
        check_distinct_outputs({"--output": output, "--figure": figure})
        check_output(output, [args.data], args.overwrite)  # before hours of training, not after
        check_output(figure, [args.data], args.overwrite)
        if args.statistical:
            statistical_model(args.statistical[0], SEASON)  # the extra is missing: say so before training
        given = data_options([*study.setting, *extra])  # the baselines see the runs' windows
        windows = preset_datamodule(study.config, args.data, **given)
        baselines = measure_baselines(windows) + [statistical(name, windows) for name in args.statistical]
        wanted = [(r, d) for r in args.regimes for d in depths if (r, d) not in left_out]
        found = run_grid(args.dataset, wanted, args, extra)
        cells = {
            cell: cell_row(runs, study.monitor) if isinstance(runs, list) else runs for cell, runs in found.items()
        }
        cells.update({cell: reason for cell, reason in left_out.items()})
        named = title(study, windows)
        write_table(output, markdown(args.dataset, cells, baselines, args, extra, named), argv)
        draw(args.dataset, cells, baselines, figure, named)
        print(f"Wrote {output} and {figure}")


if __name__ == "__main__":
    main()
