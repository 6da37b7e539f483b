"""What one change to ``configs/base.yaml`` gives on validation: runs of ``experiments.your_data`` with the change,
beside its runs without it (``experiments/results/search/other_tries_plan.md``).

    python -m experiments.your_data --statistical --test_after_fit=false --output runs/wider.md --logs runs/wider \\
        --model.network.init_args.d_model=256 --model.network.init_args.dim_feedforward=1024
    python -m experiments.tries --default runs/no_path.md --try "d_model 256" runs/wider.md --output runs/tries.md

Each dataset is matched by its label up to its lengths (``…, horizon 12, look-back 48`` is the series still), so
a try that changes the look-back is set beside the default's run of the same data. Per dataset: the default's and
the try's validation MAE (mean ± sample standard deviation over the seeds), the difference, and the verdict:
better or worse where the difference is larger than the larger of the two standard deviations, else level. A try
decides nothing by itself: a change to the defaults takes its own rule, committed before its runs. Where a try's
runs and the default's ran on different machines (their stamps name the CPU), a line under the table says so: float
results differ across CPUs, instruction sets and thread counts, so those rows compare the machines as well as the
change.
"""

from __future__ import annotations

import argparse
import re
import statistics
from pathlib import Path

from experiments.baseline_path import arm_maes, seed_maes, spread
from experiments.results import markdown_table, mean_std, write_table
from project.errors import InputError, reported_in_one_line
from project.files import check_output

LENGTHS = ", horizon "  # where a your_data label's lengths begin
MACHINE = re.compile(r" on (.+?), \d+ threads?, ")  # project.tools.stamp's machine: the CPU and torch's kernels


def data_name(label: str) -> str:
    """The dataset a your_data label names, without the lengths its runs were given."""
    return label.split(LENGTHS)[0]


def look_back(label: str) -> str:
    return label.rsplit("look-back ", 1)[-1] if "look-back " in label else "–"


def verdict(default: list[float], tried: list[float]) -> tuple[float, str]:
    """The try's difference in percent of the default's mean, and better, worse or level by the larger spread."""
    difference = statistics.mean(tried) - statistics.mean(default)
    beyond = abs(difference) > max(spread(default), spread(tried))
    said = ("better" if difference < 0 else "worse") if beyond else "level"
    return 100 * difference / statistics.mean(default), said


def machine(path: Path) -> str:
    """The CPU a results file's runs ran on, as its stamp names it."""
    found = MACHINE.search(path.read_text().partition("\n")[0])
    return found[1] if found else "a machine its stamp does not name"


def machine_note(default: list[Path], tries: dict[str, list[Path]]) -> str:
    """One line naming the tries whose runs ran on another machine than the default's runs of the same data, or
    nothing when every pair shares one."""
    default_machine = {data_name(label): machine(path) for path in default for label in seed_maes(path)}
    pairs: dict[tuple[str, str], list[str]] = {}
    for name, paths in tries.items():
        for path in paths:
            for label in seed_maes(path):
                if (ran := machine(path)) != (before := default_machine.get(data_name(label), ran)):
                    pairs.setdefault((ran, before), []).append(f"{name!r} on {data_name(label).split(',')[0]}")
    if not pairs:
        return ""
    said = "; ".join(
        f"{', '.join(where)}: the try's runs on {ran}, the default's on {before}"
        for (ran, before), where in pairs.items()
    )
    return (
        f"Two machines: {said}. Float results differ across CPUs, instruction sets and thread counts, so in these rows "
        "neither the validation MAEs nor any wall-clock are bitwise comparable: each difference holds the machines' as "
        "well as the change's."
    )


def rows(default: dict, tries: dict[str, dict]) -> list[list[str]]:
    """One row per try and dataset it ran, in the order the tries were given."""
    by_name = {data_name(label): (label, splits) for label, splits in default.items()}
    table = []
    for name, found in tries.items():
        for label, splits in found.items():
            if data_name(label) not in by_name:
                raise InputError(f"the try {name!r} ran {data_name(label)}, which the default's files do not hold")
            default_label, default_splits = by_name[data_name(label)]
            before, after = default_splits["validation"], splits["validation"]
            percent, said = verdict(before, after)
            table.append(
                [
                    name,
                    data_name(label),
                    f"{look_back(default_label)} → {look_back(label)}",
                    mean_std(before),
                    mean_std(after),
                    f"{percent:+.1f}%",
                    said,
                ]
            )
    return table


def arguments() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m experiments.tries", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--default", type=Path, nargs="+", required=True, help="experiments.your_data's results of base.yaml as it is"
    )
    parser.add_argument(
        "--try",
        dest="tries",
        nargs="+",
        action="append",
        required=True,
        metavar=("NAME", "FILE"),
        help="a try's name, then its your_data results file(s); once per try",
    )
    parser.add_argument("--output", type=Path, default=Path("experiments/results/tries.md"), help="the table")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = arguments().parse_args(argv)
    with reported_in_one_line():
        if short := [given[0] for given in args.tries if len(given) < 2]:
            raise InputError(f"--try {short[0]!r}: expected a name, then one your_data results file or more")
        names = [given[0] for given in args.tries]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise InputError(f"--try {twice[0]!r} is given twice; name each try once")
        files = {given[0]: [Path(file) for file in given[1:]] for given in args.tries}
        check_output(
            args.output, [*args.default, *(file for paths in files.values() for file in paths)], args.overwrite
        )
        tries = {name: arm_maes(paths) for name, paths in files.items()}
        header = ["try", "data", "look-back", "default validation MAE", "try's validation MAE", "difference", "verdict"]
        caption = (
            'One change to configs/base.yaml at a time, through the README\'s "Your data" path: validation MAE in '
            "original units at each run's kept checkpoint, mean ± sample standard deviation over the seeds; better or "
            "worse where the difference of the means is larger than the larger of the two standard deviations, else "
            "level. No run of a try read a test set, and no try decides a default."
        )
        table = markdown_table(caption, header, rows(arm_maes(args.default), tries)) + "\n"
        if note := machine_note(args.default, files):
            table += "\n" + note + "\n"
        write_table(args.output, table, argv)


if __name__ == "__main__":
    main()
