"""Should ``configs/base.yaml`` take the linear baseline path? The rule committed before the runs
(``experiments/results/search/baseline_path_rule.md``), applied to two runs of ``experiments.your_data``.

    python -m experiments.your_data --statistical --output runs/no_path.md --logs runs/no_path
    python -m experiments.your_data --statistical --output runs/linear_path.md --logs runs/linear_path \\
        --model.network.init_args.baseline_path=project.model.LinearPath
    python -m experiments.baseline_path --without runs/no_path.md --with_path runs/linear_path.md

Each input is a results file of ``experiments.your_data`` (its per-seed lines are read: validation and test MAE
in original units at each run's kept checkpoint); a candidate's datasets may come from several files, each dataset
from one (runs stopped and taken up again on the rest). The table gives, per dataset, each candidate's validation MAE
(mean ± sample standard deviation over the seeds), the difference, and whether the linear path is worse there by
more than the larger of the two spreads; the test columns are given for the record and decide nothing (every test
set here was read before). The last line is the rule's decision; with fewer than the six datasets the rule is over, only
a loss beyond the spread already decides (no dataset still to run can undo it), else there is none yet. A file whose
stamp says it holds the other candidate's runs, or datasets the other role's files do not hold, is refused in one line.
"""

from __future__ import annotations

import argparse
import re
import shlex
import statistics
from pathlib import Path

import yaml

from experiments.results import markdown_table, mean_std, write_table
from project.errors import InputError, reported_in_one_line
from project.files import check_output

SPLITS = ("validation", "test")
# "- {dataset label}, {split} model MAE: seed 0: 0.560, seed 1: 0.560, seed 2: 0.565", as experiments.your_data writes
PER_SEED = re.compile(r"^- (?P<dataset>.+), (?P<split>validation|test) model MAE: (?P<seeds>seed \d+: .+)$")
STAMP = re.compile(r"^Written by `(?P<command>[^`]*)`")  # project.tools.stamp's first line: the command that wrote it
PATH_OPTION = "--model.network.init_args.baseline_path"
NO_PATH = "NoPath"
# Options of the runs' command line that may set the path without naming it (a config, the whole network).
MAY_SET_THE_PATH = ("--config", "--model", "--model.network", "--model.network.init_args")
# The datasets the rule is over (experiments/results/search/baseline_path_rule.md): your_data's first six, not the
# ones it has gained since.
RULE_DATASETS = ("series", "panel", "intermittent", "etth1", "m4_hourly", "m4_weekly")
ROLES = {"--without": "NoPath's runs, configs/base.yaml as it is", "--with_path": "the runs with a baseline path"}


def seed_maes(path: Path) -> dict[str, dict[str, list[float]]]:
    """Dataset label → split → the seeds' MAEs, from the first table's per-seed lines of a your_data results file."""
    if not path.is_file():
        raise InputError(f"{path}: not found; expected a results file of python -m experiments.your_data")
    found: dict[str, dict[str, list[float]]] = {}
    for line in path.read_text().splitlines():
        if (match := PER_SEED.match(line)) and match["split"] not in found.get(match["dataset"], {}):
            values = [float(part.split(":")[1]) for part in match["seeds"].split(", ")]
            found.setdefault(match["dataset"], {})[match["split"]] = values
    if not found:
        raise InputError(f"{path}: no per-seed MAE lines; expected a results file of python -m experiments.your_data")
    return found


def arm_maes(paths: list[Path]) -> dict[str, dict[str, list[float]]]:
    """``seed_maes`` of several files of one candidate, each dataset from one of them."""
    found: dict[str, dict[str, list[float]]] = {}
    for path in paths:
        for dataset, splits in seed_maes(path).items():
            if dataset in found:
                raise InputError(f"{path}: holds {dataset} again; give each dataset's runs in one file per candidate")
            found[dataset] = splits
    return found


def candidate(path: Path) -> str | None:
    """The baseline path the runs of a your_data results file were made with, as its stamp's command line names it
    (``NoPath`` when it names none), or None where the command line cannot tell: no stamp, or a config or a whole
    network that may set it. The stamp is the one record a results file keeps of its runs' settings."""
    stamp = STAMP.match(path.read_text().partition("\n")[0])
    if stamp is None:
        return None
    try:
        arguments = shlex.split(stamp["command"])
    except ValueError:  # a quote cut in half: the command cannot be read back
        return None
    named = None
    for position, argument in enumerate(arguments):
        option, equals, value = argument.partition("=")
        if option in MAY_SET_THE_PATH:
            return None
        if option == PATH_OPTION:
            named = value if equals else (arguments[position + 1] if position + 1 < len(arguments) else "")
    if named is None:
        return NO_PATH
    try:
        value = yaml.safe_load(named)  # a class name, or {class_path: …, init_args: …}
    except yaml.YAMLError:
        return None
    if isinstance(value, dict):
        value = value.get("class_path")
    return NO_PATH if value in (None, "None") else str(value).rpartition(".")[2]


def check_roles(without: list[Path], with_path: list[Path]) -> None:
    """Each file holds the runs of the candidate its role names (as far as its stamp tells), on datasets the other
    role's files hold too, and no file is given for both: a file in the wrong role gives a verdict about other runs."""
    if both := [path for path in with_path if path.resolve() in {given.resolve() for given in without}]:
        raise InputError(f"{both[0]}: given for both --without and --with_path; each file holds one candidate's runs")
    given = {"--without": without, "--with_path": with_path}
    first_path: tuple[str, Path] | None = None  # the first --with_path file's baseline path, and the file
    for role, other in (("--without", "--with_path"), ("--with_path", "--without")):
        elsewhere = {dataset for path in given[other] for dataset in seed_maes(path)}
        for path in given[role]:
            datasets = seed_maes(path)  # one line when it is missing or not a results file of your_data
            held = candidate(path)
            if held is not None and (held == NO_PATH) != (role == "--without"):
                runs = "NoPath's runs (no baseline path)" if held == NO_PATH else f"runs with {PATH_OPTION}={held}"
                raise InputError(
                    f"{path}: given for {role} ({ROLES[role]}) but holds {runs}, by its stamp; give it for {other}"
                )
            if held not in (None, NO_PATH):
                first_held, first = first_path = first_path or (held, path)
                if held != first_held:
                    raise InputError(
                        f"{path}: given for --with_path holds the runs of {held}, and {first} those of {first_held}; "
                        "give one baseline path's runs"
                    )
            if unmatched := [dataset for dataset in datasets if dataset not in elsewhere]:
                raise InputError(
                    f"{path}: given for {role} ({ROLES[role]}) holds {'; '.join(unmatched)}, which no {other} file "
                    "holds; run both candidates on the same datasets"
                )


def spread(values: list[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def decision(without: dict, with_path: dict, required: int = len(RULE_DATASETS)) -> tuple[list[list[str]], str]:
    """The table's rows and the rule's decision line, over the datasets both files hold; no decision with fewer than
    ``required`` (the rule's six)."""
    datasets = [name for name in without if name in with_path]
    if missing := sorted(set(without) ^ set(with_path)):
        raise InputError(f"the two files hold other datasets: {', '.join(missing)}; run both on the same ones")
    rows, wins, losses, vetoes = [], 0, 0, []
    for name in datasets:
        before, after = without[name]["validation"], with_path[name]["validation"]
        difference = statistics.mean(after) - statistics.mean(before)
        allowed = max(spread(before), spread(after))
        wins, losses = wins + (difference < 0), losses + (difference > 0)
        if difference > allowed:
            vetoes.append(name)
        rows.append(
            [
                name,
                mean_std(before),
                mean_std(after),
                f"{100 * difference / statistics.mean(before):+.1f}%",
                f"{allowed:.3f}",
                "yes" if difference > allowed else "no",
                mean_std(without[name]["test"]),
                mean_std(with_path[name]["test"]),
            ]
        )
    better_rank = wins > len(datasets) / 2
    adopted = better_rank and not vetoes
    said = (
        f"LinearPath has the lower validation MAE on {wins} of {len(datasets)} datasets and the higher on {losses} "
        f"(its mean rank {'beats' if better_rank else 'does not beat'} NoPath's); it is worse by more than the seeds' "
        f"spread on {', '.join(vetoes) if vetoes else 'no dataset'}. Decision: "
    )
    if len(datasets) < required and vetoes:  # no dataset still to run can take a loss beyond the spread back
        return rows, said + (
            f"configs/base.yaml keeps NoPath (its second condition already fails on {len(vetoes)} of the "
            f"{len(datasets)} datasets run; the {required - len(datasets)} not run cannot change that)."
        )
    if len(datasets) < required:  # the rule is over every dataset: a part of them decides nothing else
        return rows, said + f"none: the rule is over all {required} datasets and these files hold {len(datasets)}."
    return rows, said + ("configs/base.yaml takes LinearPath." if adopted else "configs/base.yaml keeps NoPath.")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.baseline_path", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--without",
        type=Path,
        nargs="+",
        required=True,
        help="experiments.your_data's results with configs/base.yaml as it is (one file or more)",
    )
    parser.add_argument(
        "--with_path",
        type=Path,
        nargs="+",
        required=True,
        help="the same with --model.network.init_args.baseline_path=… (one file or more)",
    )
    parser.add_argument("--output", type=Path, default=Path("experiments/results/baseline_path.md"), help="the table")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--required", type=int, default=len(RULE_DATASETS), help="datasets the rule is over (default: its six)"
    )
    args = parser.parse_args(argv)
    with reported_in_one_line():
        check_output(args.output, [*args.without, *args.with_path], args.overwrite)
        check_roles(args.without, args.with_path)
        rows, said = decision(arm_maes(args.without), arm_maes(args.with_path), args.required)
        header = [
            "data",
            "NoPath validation MAE",
            "LinearPath validation MAE",
            "difference",
            "larger spread",
            "worse by more than it",
            "NoPath test MAE (not used)",
            "LinearPath test MAE (not used)",
        ]
        caption = (
            "The rule of experiments/results/search/baseline_path_rule.md: MAE in original units at each run's kept "
            "checkpoint, mean ± sample standard deviation over the seeds; the spread is the larger of the two "
            "standard deviations. The test columns were read once per run and decide nothing."
        )
        write_table(args.output, markdown_table(caption, header, rows) + "\n" + said + "\n", argv)


if __name__ == "__main__":
    main()
