"""Every figure and verdict the README and the docs give about accuracy or speed, written from the results files.

    python -m experiments.report --overwrite   # rewrite the generated blocks and the table copies of every page

A page holds a generated paragraph (or table) between two lines, ``<!-- generated: NAME -->`` and
``<!-- end generated -->``; NAME is one of ``BLOCKS``, each a function of the files under ``experiments/results/``.
The pages' copies of whole results tables (``<!-- experiments/results/NAME.md -->`` … ``<!-- end -->``) are
refreshed by the same command. ``experiments/tests/test_report.py`` regenerates every block and fails on any
difference, so a figure on a page is the file's and a verdict is the rule's.

The rule (``verdict``): one model's error is *below* another's when every seed of the first is lower than every seed
of the second (their ranges over seeds do not meet), *above* when every seed is higher, and *level with* it when the
two ranges overlap. A row without seeds (a measured baseline, a published entry, one ensemble) is a range of one
value. With one value on each side the rule cannot weigh noise, and the page says so where it applies.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from experiments.results import TABLE_BLOCK, with_tables
from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically

REPOSITORY = Path(__file__).resolve().parents[1]
RESULTS = REPOSITORY / "experiments" / "results"
BLOCK = re.compile(r"(<!-- generated: ([\w-]+) -->\n)(.*?)(<!-- end generated -->)", re.DOTALL)


def pages(root: Path = REPOSITORY) -> list[Path]:
    """The pages that quote the studies: the README, the docs and the results page."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "experiments" / "README.md"]


# Reading the results files.


@dataclass(frozen=True)
class Score:
    """A row's value in one column: its seeds' values (one value for a row without seeds), and the mean ± standard
    deviation the table prints."""

    values: tuple[float, ...]
    text: str

    @property
    def mean(self) -> float:
        return statistics.mean(self.values)

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def seeds(self) -> int:
        return len(self.values)


@dataclass(frozen=True)
class Table:
    caption: str
    header: list[str]
    rows: list[list[str]]


@cache
def tables(name: str) -> list[Table]:
    """Every Markdown table of a results file (``name`` relative to experiments/results/), with the line before it."""
    found, previous, current = [], "", None
    for line in (RESULTS / name).read_text().splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if current is None:
                current = Table(previous, cells, [])
                found.append(current)
            elif not line.startswith("|---"):
                current.rows.append(cells)
        else:
            current = None
            if line.strip():
                previous = line.strip()
    return found


@cache
def per_seed(name: str, table: int = 0) -> dict[str, tuple[float, ...]]:
    """The lines under a table that give a row's values per seed (``- ROW, COLUMN: seed 0: 0.265, seed 1: …``),
    of the ``table``-th table: each line belongs to the nearest table above it that has its row."""
    lines, seen, found = {}, 0, tables(name)
    text = (RESULTS / name).read_text()
    for line in text.splitlines():
        if line.startswith("|---"):
            seen += 1
        elif line.startswith("- ") and ": seed " in line:
            key, _, values = line[2:].partition(": seed ")
            owner = next(
                (i for i in reversed(range(seen)) if any(key.startswith(cells[0] + ",") for cells in found[i].rows)),
                None,
            )
            if owner == table:
                lines[key] = tuple(number(v) for v in re.findall(r"seed \S+: (-?[\d,]*\.?\d+)", "seed " + values))
    return lines


def number(text: str) -> float:
    return float(re.match(r"-?[\d,]*\.?\d+", text.strip())[0].replace(",", ""))


def score(name: str, row: str, column: str, table: int = 0, seeds_key: str | None = None) -> Score:
    """The cell of ``column`` in the first row that starts with ``row``, in the file's ``table``-th table, with the
    row's seeds when the file lists them (under ``seeds_key``: default the row's label, a comma and the column)."""
    found = tables(name)[table]
    index = found.header.index(column)
    cells = next((cells for cells in found.rows if cells[0].startswith(row)), None)
    if cells is None:
        raise InputError(f"{name}: no row starting with {row!r} in table {table}")
    text = cells[index]
    seeds = per_seed(name, table).get(seeds_key or f"{cells[0]}, {column}")
    return Score(seeds or (number(text),), text)


def depth_score(name: str, regime: str, steps: int, column: str) -> Score:
    """A decoder-depth cell: ``regime`` at ``steps`` decoder steps."""
    found = tables(name)[0]
    index = found.header.index(column)
    cells = next(c for c in found.rows if c[0] == regime and c[1] == str(steps))
    return Score(per_seed(name)[f"{regime}, D = {steps}, {column}"], cells[index])


# The rule.


def verdict(model: Score, other: Score) -> str:
    """``model``'s error against ``other``'s: below, level with or above, by whether their ranges over seeds meet."""
    if model.high < other.low:
        return "below"
    if model.low > other.high:
        return "above"
    return "level with"


def spread(score: Score) -> str:
    """A score as the page gives it: the table's text, and the seeds' range when there are several."""
    if score.seeds > 1:
        return f"{score.text} (seeds {score.low:.3f}–{score.high:.3f})"
    return score.text


# The blocks.


def bench(here: Path) -> str:
    """The README's benchmark rows: horizon 48 of the CPU benchmark, each regime against teacher forcing."""
    found = next(t for t in tables("cpu_2core/bench.md") if t.header[:2] == ["horizon", "regime"])
    lines = ["| regime | step time vs teacher forcing | saved for backward vs teacher forcing |", "|---|---:|---:|"]
    for cells in found.rows:
        if cells[0] == "48" and cells[1] != "`teacher_forcing`":
            lines.append(f"| {cells[1]} | {cells[3]} | {cells[5]} |")
    return "\n".join(lines)


REGIMES = ["teacher forcing", "free running detach", "free running bptt", "scheduled sampling"]
DEPTH = {"ETTh1": ("depth_etth1.md", "validation MSE"), "M4 Hourly": ("depth_m4_hourly.md", "validation MAE")}


def defaults_depth(here: Path) -> str:
    """What the decoder-depth study says about the 2 to 4 steps the defaults decode."""
    ratios, best = [], []
    for dataset, (name, column) in DEPTH.items():
        cells = {(regime, steps): depth_score(name, regime, steps, column) for regime in REGIMES for steps in (2, 4)}
        for (_, steps), cell in cells.items():
            ratios.append(cell.mean / cells[("teacher forcing", steps)].mean)
        steps_of = {c[1] for c in tables(name)[0].rows if c[0] in REGIMES}
        every = {(r, int(s)): depth_score(name, r, int(s), column) for r in REGIMES for s in steps_of}
        (regime, steps), cell = min(every.items(), key=lambda item: item[1].mean)
        best.append(f"{dataset}, {regime} at {steps} steps ({cell.text})")
    within = max(abs(ratio - 1) for ratio in ratios) * 100
    return (
        f"At 2 and 4 decoder steps every regime's mean validation score was within {within:.1f}% of teacher forcing's "
        f"(ETTh1 MSE, M4 Hourly MAE), and each dataset's best cell was {'; '.join(best)}."
    )


def free_running_pays(here: Path) -> str:
    """At 48 one-hour decoder steps on M4 Hourly: free running against teacher forcing and the baselines; and the
    rule at 2 steps, where the defaults decode."""
    name, column = DEPTH["M4 Hourly"]
    teacher, free = (depth_score(name, regime, 48, column) for regime in ("teacher forcing", "free running detach"))
    naive = score(name, "seasonal naive", column)
    linear, nlinear = score(name, "least-squares linear map", column), score(name, "NLinear form", column)
    best_linear, linear_name = min([(linear, "least squares"), (nlinear, "the NLinear form")], key=lambda x: x[0].mean)
    scheduled = depth_score(name, "scheduled sampling", 2, column)
    teacher_2 = depth_score(name, "teacher forcing", 2, column)
    source = link(here, "experiments/results/depth_m4_hourly.md")
    return (
        "**When free running pays:** when the decoder must take many steps. "
        f"At 48 one-hour steps on M4 Hourly, `detach`'s validation MAE {free.text} is {verdict(free, teacher)} teacher "
        f"forcing's {teacher.text}, but {verdict(free, naive)} seasonal naive's {naive.text} and "
        f"{verdict(free, best_linear)} {linear_name}'s {best_linear.text} ([`depth_m4_hourly.md`]({source})); at 2 "
        f"steps scheduled sampling's {scheduled.text} is {verdict(scheduled, teacher_2)} teacher forcing's "
        f"{teacher_2.text}."
    )


def make_train(here: Path) -> str:
    """`make train`'s channel choice, on the embedded series' validation windows (seed 0)."""
    found = next(t for t in tables("search/base_defaults.md") if "F's model MAE" in t.header)
    cells = next(c for c in found.rows if c[0].startswith("embedded synthetic series"))
    joint, independent = (
        cells[found.header.index("E's model MAE (round four)")],
        cells[found.header.index("F's model MAE")],
    )
    seconds = re.search(r"in (\d+) s of training", (RESULTS / "search" / "base_defaults.md").read_text())[1]
    source = link(here, "experiments/results/search/base_defaults.md")
    return (
        f"`make train` trains the embedded series' five channels as one sequence (validation MAE {joint} against the "
        f"defaults' channel-independent {independent}, seed 0; [about {seconds} s]({source}"
        "#make-trains-channels-results-round-three) on 2 cores) until early stopping, then prints the test MAE beside "
        "repeat-last's on the same windows."
    )


def accuracy(here: Path) -> str:
    """The README's accuracy table: ETTh1, M4 Hourly and M4 Weekly, each model row against its nearest rows."""
    etth1, hourly, weekly = "etth1_regimes.md", "m4_hourly.md", "m4_weekly.md"
    linear, linear_val = (score(etth1, "least-squares linear map", f"{split} MSE") for split in ("test", "validation"))
    ensemble = score(hourly, "free running detach, mean", "test sMAPE")
    ensemble_val = score(hourly, "free running detach, mean", "validation sMAPE")
    single_val = score(hourly, "free running detach (", "validation sMAPE")
    m4w = score(weekly, "free running detach (", "test sMAPE")
    nlinear, theta = score(weekly, "NLinear form", "test sMAPE"), score(weekly, "AutoTheta", "test sMAPE")
    esrnn, best = score(hourly, "ES-RNN", "test sMAPE"), score(hourly, "best hourly", "test sMAPE")
    rows = [
        (
            "ETTh1, test MSE",
            "free-running `detach`",
            score(etth1, "free running detach", "test MSE"),
            [("least-squares map, in run", linear)],
        ),
        (
            "ETTh1, test MSE",
            "teacher forcing",
            score(etth1, "teacher forcing", "test MSE"),
            [("least-squares map, in run", linear)],
        ),
        (
            "ETTh1, validation MSE",
            "free-running `detach`",
            score(etth1, "free running detach", "validation MSE"),
            [("least-squares map, in run", linear_val)],
        ),
        (
            "M4 Hourly, test sMAPE",
            "free-running `detach`",
            score(hourly, "free running detach (", "test sMAPE"),
            [("ES-RNN, M4's winner", esrnn)],
        ),
        (
            "M4 Hourly, test sMAPE",
            f"the mean of the seeds' forecasts ({verdict(ensemble_val, single_val)} the seeds on validation)",
            ensemble,
            [("best hourly entry (one value each: no spread to weigh)", best)],
        ),
        (
            "M4 Weekly, test sMAPE",
            "free-running `detach`, one decoder step",
            m4w,
            [("NLinear form, the nearest baseline", nlinear), ("AutoTheta, season 52", theta)],
        ),
    ]
    lines = ["| score | model | its score | against | verdict |", "|---|---|---:|---|---|"]
    for what, model, mine, others in rows:
        against = "; ".join(f"{label}: {other.text}" for label, other in others)
        words = ", ".join(verdict(mine, other) for _, other in others)
        lines.append(f"| {what} | {model} | {spread(mine)} | {against} | {words} |")
    return "\n".join(lines)


def your_data(here: Path) -> str:
    """The defaults on six datasets against the naive forecasts, each split, by the rule over seeds; M4 Weekly's
    floor rows are disputed (two seeds' equal test MAE) and left out."""
    name = "your_data.md"
    naive, floor = tables(name)[0], tables(name)[1]
    counted, words = [], {"naive": set(), "floor": set()}
    for part, found, columns, key in (
        ("naive", naive, ("repeat-last MAE", "seasonal naive MAE"), "{data}, {split} model MAE"),
        ("floor", floor, ("AutoETS MAE", "AutoTheta MAE"), "{data}, {split}, {windows}, model MAE"),
    ):
        for cells in found.rows:
            data, split = cells[0], cells[1]
            if data.startswith(DISPUTED):
                continue
            seeds = per_seed(name, found is floor)[key.format(data=data, split=split, windows=cells[2])]
            model = Score(seeds, cells[found.header.index("model MAE")])
            others = [cells[found.header.index(column)] for column in columns]
            words[part] |= {verdict(model, Score((number(c),), c)) for c in others if not c.startswith("–")}
            short = re.sub(r" \(.*?\)", "", data.split(",")[0])
            if short not in counted:
                counted.append(short)

    def said(part: str, what: str) -> str:
        return f"every seed is below {what}" if words[part] == {"below"} else f"not every seed is below {what}"

    naive_words = "below" if words["naive"] == {"below"} else "not always below"
    floor_words = "below" if words["floor"] == {"below"} else "not always below"
    why = link(here, "experiments/README.md") + "#m4-weekly-rows-of-the-defaults-disputed"
    return (
        "What the defaults give with nothing but the roles, look-back, horizon and split, three seeds each "
        f"([`your_data.md`]({link(here, 'experiments/results/your_data.md')}), by `python -m experiments.your_data`): "
        f"on the {len(counted)} datasets whose rows stand ({', '.join(counted)}) every seed is {naive_words} "
        f"repeat-last and seasonal naive (where its season fits the look-back) and {floor_words} AutoETS and "
        f"AutoTheta, on validation and test; {DISPUTED}'s rows are disputed and not counted ([why]({why}))."
    )


DISPUTED = "M4 Weekly"  # your_data.md's rows of M4 Weekly: seeds 0 and 1 report the same test MAE (273.899)


BLOCKS: dict[str, Callable[[Path], str]] = {
    "bench": bench,
    "defaults-depth": defaults_depth,
    "free-running-pays": free_running_pays,
    "make-train": make_train,
    "accuracy": accuracy,
    "your-data": your_data,
}


def link(here: Path, target: str) -> str:
    """A link from a page in the folder ``here`` to ``target``, a path from the repository's root."""
    return os.path.relpath(REPOSITORY / target, here).replace(os.sep, "/")


def generated(page: str, here: Path = REPOSITORY) -> str:
    """The page (in the folder ``here``, for its links) with every generated block rewritten from the results
    files."""

    def one(match: re.Match) -> str:
        if match[2] not in BLOCKS:
            raise InputError(f"no generated block named {match[2]!r}; the names are {', '.join(BLOCKS)}")
        text = BLOCKS[match[2]](here)
        if not text.startswith("|"):  # a paragraph, wrapped as the hand-written ones are; a table as it is
            text = textwrap.fill(text, 116, break_long_words=False, break_on_hyphens=False)
        return f"{match[1]}{text}\n{match[4]}"

    return BLOCK.sub(one, page)


def refreshed(page: Path) -> str:
    """The page with its generated blocks and its copies of results tables as the results files give them."""
    return generated(with_tables(page.read_text(), REPOSITORY), page.resolve().parent)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__.split("\n")[0])
    parser.add_argument("pages", type=Path, nargs="*", help="pages to rewrite (default: the README, docs, results)")
    parser.add_argument("--overwrite", action="store_true", help="rewrite a page whose blocks differ")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        for page in args.pages or pages():
            if not page.is_file():
                raise InputError(f"{page}: page not found")
            text = page.read_text()
            new = refreshed(page)
            if new == text:
                continue
            inputs = [REPOSITORY / block[2] for block in TABLE_BLOCK.finditer(text)]
            check_output(page, inputs=inputs, overwrite=args.overwrite)  # only the blocks change
            write_atomically(page, lambda temporary, n=new: temporary.write_text(n))
            print(f"Rewrote the generated blocks of {page}")


if __name__ == "__main__":
    main()
