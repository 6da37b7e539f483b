"""Do schedules that end where the run ends beat A3's? The rule of experiments/results/search/schedules.md, applied.

    python -m experiments.schedules --logs <the candidate's --logs> --data_dir data --table schedules/validation_b.md \
        --candidate B --output experiments/results/schedules/decision_b.md

Reads a candidate's validation table (written from its runs by ``python -m experiments.your_data --reuse --splits val
--statistical``) and A3's (``budget/validation_a3.md``), and writes ``--output``: per dataset, both configs' seeds,
the best simple forecast on the same windows, each seed's step of its best checkpoint and the learning rate there as a
share of the peak (A3's from its schedule, a cosine sized to 5,000 steps, at the steps ``budget/decision_a3.md``
records; the candidate's from its runs' logs), and the rule's three conditions and decision.
"""

from __future__ import annotations

import argparse
import math
import re
import statistics
from pathlib import Path

from experiments import report
from experiments.results import markdown_table, mean_std, write_table
from experiments.your_data import DATASETS, REAL, kept_run
from project.errors import InputError, reported_in_one_line
from project.files import check_output
from project.training.runs import read_scalars

INCUMBENT = ("A3", "budget/validation_a3.md", "budget/decision_a3.md")
MODEL = "model MAE"
A3_WARMUP, A3_RUN_STEPS = 100, 5000  # A3's WarmupCosine: warm-up, then a cosine to zero at max_steps


def a3_rate(step: int) -> float:
    """A3's learning rate at optimizer step ``step``, as a share of the peak (its WarmupCosine)."""
    if step < A3_WARMUP:
        return (step + 1) / A3_WARMUP
    progress = min(1.0, (step - A3_WARMUP) / (A3_RUN_STEPS - A3_WARMUP))
    return 0.5 * (1.0 + math.cos(math.pi * progress))


def a3_best_steps(label: str) -> list[int]:
    """A3's best checkpoint's step per seed, as ``budget/decision_a3.md`` records them (``900 (best 400), …``)."""
    found = report.nth_table(INCUMBENT[2], 0)
    cells = report.row_where(INCUMBENT[2], found, lambda cells: cells[0] == label, repr(label))
    steps = cells[report.column_index(INCUMBENT[2], found, "A3's steps: last (best)")]
    return [int(best) for best in re.findall(r"best (\d+)", steps)]


def best_steps_and_rates(logs: Path, key: str, seeds: list[int]) -> list[tuple[int, float]]:
    """Per seed of the candidate's runs: the step of the best validation (by ``val/loss``) and the learning rate of
    the weight matrices there, as a share of the peak (the optimizer's rate of the config)."""
    found = []
    for seed in seeds:
        run = kept_run(logs, f"{key}_seed{seed}")
        if run is None:
            raise InputError(f"{logs}: no run {key}_seed{seed} that kept a checkpoint")
        curves = read_scalars(run)
        best, rates = int(curves["val/loss"].idxmin()), curves["lr-AdamW/weights"]
        found.append((best + 1, float(rates[rates.index <= best].iloc[-1] / rates.max())))
    return found


def steps_text(pairs: list[tuple[int, float]]) -> str:
    return ", ".join(f"{step} ({rate:.0%})" for step, rate in pairs)


def decision(logs: Path, data_dir: Path, seeds: list[int], table: str, candidate: str) -> str:
    """The rule applied to the candidate's validation table ``table`` (its runs in ``logs``), named ``candidate``."""
    name, incumbent_table, _ = INCUMBENT
    header = ["data", f"validation MAE, {name}", f"validation MAE, {candidate}", "within the spread"]
    header += [f"{candidate} / {name}", "validation best simple forecast"]
    header += [f"{name}: every seed below", f"{candidate}: every seed below"]
    header += [f"{name}: best step (rate)", f"{candidate}: best step (rate)"]
    rows, held, ratios, wins = [], [], [], {name: [], candidate: []}
    for key in REAL:
        dataset = DATASETS[key]
        windows = dataset.windows(data_dir / dataset.file if dataset.file else None, [])
        label = dataset.named(windows)
        seeds_key = f"{label}, validation {MODEL}"  # the per-seed lines of your_data's tables
        before, tried = (report.score(t, label, MODEL, seeds_key=seeds_key) for t in (incumbent_table, table))
        spread = max(statistics.stdev(before.values), statistics.stdev(tried.values))
        held.append(tried.mean <= before.mean + spread)
        ratios.append(tried.mean / before.mean)
        best = report.validation_best_simple(label, table)
        simple = report.number(best.text)
        below = {}
        for config, score in ((name, before), (candidate, tried)):
            margin = score.high / simple - 1
            below[config] = f"{'yes' if margin < 0 else 'no'} ({margin:+.1%})"
            if margin < 0:
                wins[config].append(label.split(",")[0])
        incumbent_steps = [(step, a3_rate(step)) for step in a3_best_steps(label)]
        rows.append(
            [
                label,
                mean_std(list(before.values)),
                mean_std(list(tried.values)),
                f"{'yes' if held[-1] else 'no'} ({tried.mean - before.mean:+.3f}, spread {spread:.3f})",
                f"{ratios[-1]:.3f}",
                f"{best.name} {best.text}",
                below[name],
                below[candidate],
                steps_text(incumbent_steps),
                steps_text(best_steps_and_rates(logs, key, seeds)),
            ]
        )
    ratio = statistics.mean(ratios)
    adopted = all(held) and len(wins[candidate]) >= len(wins[name]) and ratio < 1
    caption = (
        f"The rule of experiments/results/search/schedules.md on validation MAE in original units (3 seeds each): "
        f"{name}'s rows ({incumbent_table}) beside candidate {candidate}'s, the best simple forecast on the same "
        "windows; each seed's step of its best checkpoint and, in brackets, the learning rate there as a share of "
        "the peak."
    )
    text = markdown_table(caption, header, rows) + "\n"
    text += (
        f"1. No dataset worse than {name} beyond the seeds' spread: {sum(held)} of {len(held)} hold.\n"
        f"2. Every seed below the best simple forecast: {candidate} on {len(wins[candidate])} of {len(REAL)} "
        f"({', '.join(wins[candidate]) or 'none'}), {name} on {len(wins[name])} "
        f"({', '.join(wins[name]) or 'none'}).\n"
        f"3. The mean over the datasets of {candidate}'s mean over {name}'s: {ratio:.3f} (below 1: "
        f"{'yes' if ratio < 1 else 'no'}).\n\n"
        f"Decision: {f'candidate {candidate} holds the rule' if adopted else f'{candidate} does not hold the rule'}.\n"
    )
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.schedules", description=__doc__.split("\n")[0])
    parser.add_argument("--logs", type=Path, required=True, help="where the candidate's runs logged")
    parser.add_argument("--data_dir", type=Path, default=Path("data"), help="where the data files are")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--table", required=True, help="its validation table, under results/")
    parser.add_argument("--candidate", required=True, help="its name in the rule")
    parser.add_argument("--output", type=Path, required=True)
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        check_output(args.output, [], args.overwrite)
        write_table(args.output, decision(args.logs, args.data_dir, args.seeds, args.table, args.candidate), argv)


if __name__ == "__main__":
    main()
