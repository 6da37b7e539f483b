"""Does a budget in optimizer steps beat the epoch budget? The rule of experiments/results/search/budget.md, applied.

    python -m experiments.budget --logs <the runs' --logs> --data_dir data

Reads a candidate's validation table (``--table``, default ``budget/validation.md``, written from its runs by
``python -m experiments.your_data --reuse --splits val --statistical``) and the old defaults'
(``ensemble/validation.md``, recorded at 7d8ccc6 with AutoETS and AutoTheta on the same windows), and writes
``--output``: per dataset, the two configs' seeds, the best simple forecast, the optimizer steps each budget gives,
and the rule's decision.
"""

from __future__ import annotations

import argparse
import statistics
from pathlib import Path

from experiments import report
from experiments.results import markdown_table, mean_std, write_table
from experiments.your_data import DATASETS, REAL, kept_run
from project.errors import InputError, reported_in_one_line
from project.files import check_output
from project.training.runs import read_scalars

OLD = report.VALIDATION_FLOOR  # the old defaults' validation rows, and AutoETS and AutoTheta on those windows
MODEL = "model MAE"
OLD_EPOCHS = 10  # the old budget: max_epochs 10


def steps(logs: Path, key: str, seeds: list[int]) -> str:
    """The optimizer steps of the candidate's runs: the last validation's and the best one's (by val/loss), per seed."""
    found = []
    for seed in seeds:
        run = kept_run(logs, f"{key}_seed{seed}")
        if run is None:
            raise InputError(f"{logs}: no run {key}_seed{seed} that kept a checkpoint")
        loss = read_scalars(run)["val/loss"]
        found.append(f"{int(loss.index[-1]) + 1} (best {int(loss.idxmin()) + 1})")
    return ", ".join(found)


def decision(
    logs: Path, data_dir: Path, seeds: list[int], new: str, candidate: str, incumbent: tuple[str, str] | None = None
) -> str:
    """The rule applied to the candidate's validation table ``new`` (its runs in ``logs``), named ``candidate``; with
    an ``incumbent`` (its name and validation table), also whether the candidate is within the spread of it."""
    header = [
        "data",
        "epoch budget's max steps",
        "validation MAE, old defaults",
        f"validation MAE, candidate {candidate}",
    ]
    header += [f"{candidate}'s steps: last (best)", "within the spread", "validation best simple forecast"]
    header += ["old: every seed below", f"{candidate}: every seed below"]
    header += [f"within {incumbent[0]}'s spread"] if incumbent else []
    rows, held, wins = [], [], {"old": [], candidate: []}
    target_line = ""
    for key in REAL:
        dataset = DATASETS[key]
        windows = dataset.windows(data_dir / dataset.file if dataset.file else None, [])
        windows.setup("fit")
        label = dataset.named(windows)
        seeds_key = f"{label}, validation {MODEL}"  # the per-seed lines of your_data's tables
        old, tried = (report.score(name, label, MODEL, seeds_key=seeds_key) for name in (OLD, new))
        spread = max(statistics.stdev(old.values), statistics.stdev(tried.values))
        within = tried.mean <= old.mean + spread
        held.append(within)
        best = report.validation_best_simple(label, new)
        name, simple = best.name, report.number(best.text)
        below = {}
        for config, score in (("old", old), (candidate, tried)):
            margin = score.high / simple - 1
            below[config] = f"{'yes' if margin < 0 else 'no'} ({margin:+.1%})"
            if margin < 0:
                wins[config].append(label.split(",")[0])
        rows.append(
            [
                label,
                str(OLD_EPOCHS * len(windows.train_dataloader())),
                mean_std(list(old.values)),
                mean_std(list(tried.values)),
                steps(logs, key, seeds),
                f"{'yes' if within else 'no'} ({tried.mean - old.mean:+.3f}, spread {spread:.3f})",
                f"{name} {simple:.3f}",
                below["old"],
                below[candidate],
            ]
        )
        if incumbent:
            before = report.score(incumbent[1], label, MODEL, seeds_key=seeds_key)
            spread = max(statistics.stdev(before.values), statistics.stdev(tried.values))
            held.append(tried.mean <= before.mean + spread)
            rows[-1].append(f"{'yes' if held[-1] else 'no'} ({tried.mean - before.mean:+.3f}, spread {spread:.3f})")
        if key == "retail_sales":
            target_line = (
                f"US retail sales: {candidate}'s mean {tried.mean:.3f} is {tried.mean / simple - 1:+.1%} from the best "
                f"simple forecast ({name}, {simple:.3f}); its worst seed {tried.high / simple - 1:+.1%}."
            )
    adopted = all(held) and len(wins[candidate]) >= len(wins["old"])
    caption = (
        "The rule of experiments/results/search/budget.md on validation MAE in original units (3 seeds each): the "
        f"old defaults' rows recorded at 7d8ccc6 beside candidate {candidate}'s, the best simple forecast on the same "
        "windows."
    )
    also, stays = (f", and of {incumbent[0]}", f"{incumbent[0]} stays") if incumbent else ("", "the epoch budget stays")
    text = markdown_table(caption, header, rows) + "\n"
    text += (
        f"1. No dataset worse beyond the seeds' spread (of the old defaults{also}): {sum(held)} of {len(held)} hold.\n"
        f"2. Every seed below the best simple forecast: {candidate} on {len(wins[candidate])} of {len(REAL)} "
        f"({', '.join(wins[candidate]) or 'none'}), the old defaults on {len(wins['old'])} "
        f"({', '.join(wins['old']) or 'none'}).\n\n"
        f"Decision: {f'candidate {candidate} becomes the default' if adopted else stays}.\n\n"
        f"The issue's target (reported, not deciding): every seed below the best simple forecast on at least 6 of 7 "
        f"({'met' if len(wins[candidate]) >= 6 else 'not met'}: {len(wins[candidate])}); {target_line}\n"
    )
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.budget", description=__doc__.split("\n")[0])
    parser.add_argument("--logs", type=Path, required=True, help="where the candidate's runs logged")
    parser.add_argument("--data_dir", type=Path, default=Path("data"), help="where the data files are")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--table", default="budget/validation.md", help="its validation table, under results/")
    parser.add_argument("--candidate", default="A", help="its name in the rule")
    parser.add_argument("--incumbent", nargs=2, metavar=("NAME", "TABLE"), help="a default it must not be worse than")
    parser.add_argument("--output", type=Path, default=Path("experiments/results/budget/decision.md"))
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        check_output(args.output, [], args.overwrite)
        incumbent = tuple(args.incumbent) if args.incumbent else None
        table = decision(args.logs, args.data_dir, args.seeds, args.table, args.candidate, incumbent)
        write_table(args.output, table, argv)


if __name__ == "__main__":
    main()
