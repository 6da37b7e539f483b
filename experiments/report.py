"""Every figure and verdict the README and the docs give about accuracy or speed, written from the results files.

    python -m experiments.report --overwrite   # rewrite the generated blocks and the table copies of every page

A page holds a generated paragraph (or table) between two lines, ``<!-- generated: NAME -->`` and
``<!-- end generated -->``; NAME is one of ``BLOCKS``, each a function of the files under ``experiments/results/``.
A block's paragraphs are wrapped at 116 columns: a table is left as it is, and a paragraph starting with ``- `` is
one list item, its continuation lines indented. The pages' copies of whole results tables
(``<!-- experiments/results/NAME.md -->`` … ``<!-- end -->``) are refreshed by the same command.
``experiments/tests/test_report.py`` regenerates every block and fails on any difference, so a figure on a page is
the file's and a verdict is the rule's; the prose between the blocks quotes no figure
(``experiments.figure_checks.result_figures``, held by ``experiments/tests/test_pages.py``). Which runs are "the
defaults" and "the previous defaults" in the README's table of the seven real datasets is ``DEFAULTS``, one mapping.

The rule (``verdict``): one model's error is *below* another's when its range over seeds lies below the other's,
*above* when it lies above, and *level with* it otherwise: when the two ranges overlap or only touch. The seeds are
compared as the files print them (most to three decimals), so ranges that touch as printed, the highest seed of one
equal to the lowest of the other (0.264–0.268 against 0.268–0.271), are level: a tie of rounded values cannot say
which is lower. A row without seeds (a measured baseline, a published entry, one ensemble) is a range of one value:
inside another range or at its end it is level with it; two equal values are level. With one value on each side the
rule cannot weigh noise, and the page says so where it applies.
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
# A marker is a line of its own: the same words quoted in prose or in inline code open no block.
BLOCK = re.compile(r"^(<!-- generated: ([\w-]+) -->\n)(.*?)^(<!-- end generated -->)$", re.DOTALL | re.MULTILINE)
FENCED_CODE = re.compile(r"^ *```.*?^ *```", re.DOTALL | re.MULTILINE)
# A code span may go on over a wrapped line but never past its paragraph, so a backtick left open hides at most
# the rest of one paragraph (and test_pages fails on it).
INLINE_CODE = re.compile(r"`(?:[^`\n]|\n(?![ \t]*\n))*`")


def pages(root: Path = REPOSITORY) -> list[Path]:
    """The pages that quote the studies: the README, the docs and the results page."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md")), root / "experiments" / "README.md"]


def prose(page: str) -> str:
    """A page's hand-written prose: the page without its generated blocks, its copies of results tables and its code
    (settings, not figures)."""
    for block in (BLOCK, TABLE_BLOCK, FENCED_CODE, INLINE_CODE):
        page = block.sub("", page)
    return page


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

    @property
    def described(self) -> str:
        """The table as a message names it: by its first columns."""
        return "the table headed " + " | ".join(self.header[:3]) + (" | …" if len(self.header) > 3 else "")


# Every results file is written whole by the command its first line names: a file that lacks what a block reads was
# cut short (a copy or a disk that stopped) or is another command's.
WHOLE_FILE = "expected the whole file as the command its first line names writes it"


def results_text(name: str) -> str:
    """A results file's text (``name`` relative to experiments/results/): one line when it is missing, or cut short
    (it ends mid-line; a whole one ends with a newline)."""
    path = RESULTS / name
    if not path.is_file():
        raise InputError(f"{path}: results file not found; expected the results file a page reads")
    text = path.read_text()
    if not text.endswith("\n"):
        raise InputError(f"{path}: {'empty' if not text else 'cut short (it ends mid-line)'}; {WHOLE_FILE}")
    return text


def lacking(name: str, what: str) -> InputError:
    return InputError(f"{RESULTS / name}: no {what}; {WHOLE_FILE}")


@cache
def tables(name: str) -> list[Table]:
    """Every Markdown table of a results file (``name`` relative to experiments/results/), with the line before it;
    one line for a table cut short (a row narrower or wider than its header, or no row at all)."""
    found, previous, current = [], "", None
    for line in results_text(name).splitlines():
        if line.startswith("|"):
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if current is None:
                current = Table(previous, cells, [])
                found.append(current)
            elif not line.startswith("|---"):
                if len(cells) != len(current.header):
                    raise InputError(
                        f"{RESULTS / name}: the row {cells[0]!r} of {current.described} has {len(cells)} cells where "
                        f"its header has {len(current.header)}; {WHOLE_FILE}"
                    )
                current.rows.append(cells)
        else:
            current = None
            if line.strip():
                previous = line.strip()
    if empty := next((table for table in found if not table.rows), None):
        raise InputError(f"{RESULTS / name}: {empty.described} has no row; {WHOLE_FILE}")
    return found


def nth_table(name: str, index: int) -> Table:
    found = tables(name)
    if index >= len(found):
        raise lacking(name, f"table {index + 1} (it holds {len(found)})")
    return found[index]


def table_where(name: str, holds: Callable[[Table], bool], what: str) -> Table:
    found = next((table for table in tables(name) if holds(table)), None)
    if found is None:
        raise lacking(name, f"table {what}")
    return found


def row_where(name: str, found: Table, holds: Callable[[list[str]], bool], what: str) -> list[str]:
    cells = next((cells for cells in found.rows if holds(cells)), None)
    if cells is None:
        raise lacking(name, f"row {what} in {found.described}")
    return cells


def column_index(name: str, found: Table, column: str) -> int:
    if column not in found.header:
        raise lacking(name, f"column {column!r} in {found.described}")
    return found.header.index(column)


def seeds(name: str, key: str, table: int = 0) -> tuple[float, ...]:
    """The values of a per-seed line under the ``table``-th table (``per_seed``)."""
    found = per_seed(name, table).get(key)
    if found is None:
        raise lacking(name, f"per-seed line '- {key}: seed …' under table {table + 1}")
    return found


@cache
def per_seed(name: str, table: int = 0) -> dict[str, tuple[float, ...]]:
    """The lines under a table that give a row's values per seed (``- ROW, COLUMN: seed 0: 0.265, seed 1: …``),
    of the ``table``-th table: each line belongs to the nearest table above it that has its row."""
    lines, seen, found = {}, 0, tables(name)
    text = results_text(name)
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
    found = nth_table(name, table)
    index = column_index(name, found, column)
    cells = row_where(name, found, lambda cells: cells[0].startswith(row), f"starting with {row!r}")
    text = cells[index]
    key = seeds_key or f"{cells[0]}, {column}"
    if " ± " in text:  # a mean ± sd over seeds, which the file lists: the rule weighs the seeds, never the mean alone
        return Score(seeds(name, key, table), text)
    return Score(per_seed(name, table).get(key) or (number(text),), text)


def depth_score(name: str, regime: str, steps: int, column: str) -> Score:
    """A decoder-depth cell: ``regime`` at ``steps`` decoder steps."""
    found, cells = depth_row(name, regime, steps)
    return Score(seeds(name, f"{regime}, D = {steps}, {column}"), cells[column_index(name, found, column)])


def depth_row(name: str, regime: str, steps: int) -> tuple[Table, list[str]]:
    """A decoder-depth study's first table and its row of ``regime`` at ``steps`` decoder steps."""
    found = nth_table(name, 0)
    return found, row_where(
        name, found, lambda c: c[0] == regime and c[1] == str(steps), f"{regime!r} at {steps} steps"
    )


# The rule.


def verdict(model: Score, other: Score) -> str:
    """``model``'s error against ``other``'s: below or above when their ranges over seeds are apart at the
    precision the files print, level with when they overlap or touch."""
    # The values are the printed ones: a shared end (0.264–0.268 against 0.268–0.271) is a tie of rounded values,
    # and rounding may hide which side is lower, so only a printed gap decides. round() drops float noise.
    if round(model.high - other.low, 9) < 0:
        return "below"
    if round(model.low - other.high, 9) > 0:
        return "above"
    return "level with"


def spread(score: Score) -> str:
    """A score as the page gives it: the table's text, and the seeds' range when there are several."""
    if score.seeds > 1:
        return f"{score.text} (seeds {score.low:.3f}–{score.high:.3f})"
    return score.text


# The blocks.


BENCH_TABLE = "headed horizon | regime"


def benchmark_table(table: Table) -> bool:
    return table.header[:2] == ["horizon", "regime"]


def bench(here: Path) -> str:
    """The README's benchmark rows: horizon 48 of the CPU benchmark, each regime against teacher forcing."""
    name = "cpu_2core/bench.md"
    found = table_where(name, benchmark_table, BENCH_TABLE)
    if missing := sorted({c[1] for c in found.rows} - {c[1] for c in found.rows if c[0] == "48"}):
        raise lacking(name, f"row of {', '.join(missing)} at horizon 48 in {found.described}")
    lines = ["| regime | step time vs teacher forcing | saved for backward vs teacher forcing |", "|---|---:|---:|"]
    for cells in found.rows:
        if cells[0] == "48" and cells[1] != "`teacher_forcing`":
            lines.append(f"| {cells[1]} | {cells[3]} | {cells[5]} |")
    return "\n".join(lines)


def bench_row(name: str, horizon: str, regime: str) -> dict[str, str]:
    """A training row of a benchmark file: ``regime`` (its backticked name) at ``horizon``."""
    found = table_where(name, benchmark_table, BENCH_TABLE)
    cells = row_where(name, found, lambda c: c[0] == horizon and c[1] == f"`{regime}`", f"`{regime}` at {horizon}")
    return dict(zip(["horizon", "regime", "step time", "step ratio", "saved", "saved ratio"], cells, strict=False))


def naive_memory(here: Path) -> str:
    """how-it-works' posted loop: what it saves for backward and how long its step takes at horizon 48, 2 CPU cores."""
    name = "cpu_2core/bench.md"
    naive, teacher = (bench_row(name, "48", regime) for regime in ("naive_loop_as_posted", "teacher_forcing"))
    return (
        "Every step runs T positions through every layer and keeps its whole graph alive until `backward()`: O(T²) "
        f"time and memory. At horizon 48 it saves {naive['saved ratio']} the bytes teacher forcing saves for backward "
        f"({naive['saved']} against {teacher['saved']}) and takes {naive['step ratio']} its step time on 2 CPU cores "
        f"([`bench.md`]({link(here, 'experiments/results/' + name)}), "
        f"[the benchmark]({link(here, 'docs/benchmark.md')})). Three ideas remove that cost."
    )


def gpu_cuda_graph(here: Path) -> str:
    """The H200 files' `detach` rollout against teacher forcing in 16-mixed, with and without its CUDA graph."""
    name = "gpu_h200/bench-16-mixed.md"
    found = table_where(name, benchmark_table, BENCH_TABLE)
    horizons = sorted({c[0] for c in found.rows}, key=int)
    plain = bench_row(name, horizons[-1], "free_running_detach")
    graph = [bench_row(name, h, "free_running_detach_cuda_graph")["step ratio"].replace("x", "×") for h in horizons]
    return (
        "What they showed: a step of this model on a GPU is launch-bound, so the "
        f"{horizons[-1]} sequential steps of a `detach` rollout cost {plain['step ratio'].replace('x', '×')} "
        "teacher forcing's step in 16-mixed; replaying one decode step as a CUDA graph (`--model.cuda_graph true`, "
        f"tested equal to the cached decode) brings `detach` to {' / '.join(graph)} teacher forcing at horizons "
        f"{' / '.join(horizons)} in 16-mixed ([`bench-16-mixed.md`]({link(here, 'experiments/results/' + name)}))."
    )


REGIMES = ["teacher forcing", "free running detach", "free running bptt", "scheduled sampling"]
DEPTH = {"ETTh1": ("depth_etth1.md", "validation MSE"), "M4 Hourly": ("depth_m4_hourly.md", "validation MAE")}


def defaults_depth(here: Path) -> str:
    """What the decoder-depth study says about the 2 to 4 steps the defaults decode."""
    ratios, best = [], []
    for dataset, (name, column) in DEPTH.items():
        cells = {(regime, steps): depth_score(name, regime, steps, column) for regime in REGIMES for steps in (2, 4)}
        for (_, steps), cell in cells.items():
            ratios.append(cell.mean / cells[("teacher forcing", steps)].mean)
        steps_of = {c[1] for c in nth_table(name, 0).rows if c[0] in REGIMES}
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
    name = "search/base_defaults.md"
    found = table_where(name, lambda t: "F's model MAE" in t.header, 'with a column "F\'s model MAE"')
    cells = row_where(name, found, lambda c: c[0].startswith("embedded synthetic series"), "of the embedded series")
    joint, independent = (
        cells[column_index(name, found, "E's model MAE (round four)")],
        cells[column_index(name, found, "F's model MAE")],
    )
    budget = "search/budget.md"
    training = re.search(r"`make train` took (\d+) s on 2 cores,\s+(\d+) optimizer steps", results_text(budget))
    if training is None:
        raise lacking(budget, "sentence '`make train` took N s on 2 cores, M optimizer steps'")
    seconds, steps = training[1], training[2]
    source = link(here, "experiments/results/search/base_defaults.md")
    timed = link(here, "experiments/results/search/budget.md")
    return (
        f"`make train` trains the embedded series' five channels as one sequence (validation MAE {joint} against the "
        f"defaults' channel-independent {independent}, seed 0, [with the epoch budget]({source}"
        f"#make-trains-channels-results-round-three)) for at most 1000 optimizer steps ([{steps} steps, {seconds} s]"
        f"({timed}#make-train) on 2 cores), then prints the test MAE beside repeat-last's on the same windows."
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
    """The defaults on six datasets against the naive forecasts and the statistical floor, each split, by the rule
    over seeds. (M4 Weekly's rows, once disputed for two seeds' equal test MAE, are counted: the ensemble study's
    runs give them again to every printed decimal.)"""
    name = "your_data.md"
    naive, floor = nth_table(name, 0), nth_table(name, 1)
    counted, words = [], {"naive": set(), "floor": set()}
    for part, found, columns, key in (
        ("naive", naive, ("repeat-last MAE", "seasonal naive MAE"), "{data}, {split} model MAE"),
        ("floor", floor, ("AutoETS MAE", "AutoTheta MAE"), "{data}, {split}, {windows}, model MAE"),
    ):
        for cells in found.rows:
            data, split = cells[0], cells[1]
            values = seeds(name, key.format(data=data, split=split, windows=cells[2]), int(found is floor))
            model = Score(values, cells[column_index(name, found, "model MAE")])
            others = [cells[column_index(name, found, column)] for column in columns]
            words[part] |= {verdict(model, Score((number(c),), c)) for c in others if not c.startswith("–")}
            short = re.sub(r" \(.*?\)", "", data.split(",")[0])
            if short not in counted:
                counted.append(short)

    def said(part: str, what: str) -> str:
        return f"every seed is below {what}" if words[part] == {"below"} else f"not every seed is below {what}"

    naive_words = "below" if words["naive"] == {"below"} else "not always below"
    floor_words = "below" if words["floor"] == {"below"} else "not always below"
    why = link(here, "experiments/README.md") + "#m4-weekly-rows-of-the-defaults-disputed-then-reproduced"
    return (
        "What the defaults gave before issue 70 (a budget of 10 epochs) with nothing but the roles, look-back, horizon "
        "and split, three seeds each "
        f"([`your_data.md`]({link(here, 'experiments/results/your_data.md')}), by `python -m experiments.your_data`): "
        f"in that file's runs, on the {len(counted)} datasets ({', '.join(counted)}), every seed is "
        f"{naive_words} repeat-last and seasonal naive (where its season fits the look-back) and {floor_words} AutoETS "
        f"and AutoTheta, on validation and test (M4 Weekly's rows, once disputed, are reproduced: [why]({why})). "
        + defaults_again(here)
    )


# The same config, base.yaml as it is, trained again for issue 55's comparison on the six datasets (no floor).
RERUNS = ("baseline_path/no_path.md", "baseline_path/no_path_etth1_m4_hourly.md")


def seed_names(name: str, key: str, table: int = 0) -> list[str]:
    """The seeds' names (``seed 0``, …) of a per-seed line, in the order ``seeds`` gives their values."""
    seeds(name, key, table)  # one line when the file lacks it
    line = next(line for line in results_text(name).splitlines() if line.startswith(f"- {key}: seed "))
    return re.findall(r"(seed \S+): ", line.partition(": ")[2])


def defaults_again(here: Path) -> str:
    """The reruns of the defaults against the naive forecasts: every seed that is not below one, or that none is."""
    exceptions = []
    for name in RERUNS:
        found = nth_table(name, 0)
        for cells in found.rows:
            data, split = cells[0], cells[1]
            key = f"{data}, {split} model MAE"
            for column, label in (("repeat-last MAE", "repeat-last"), ("seasonal naive MAE", "seasonal naive")):
                naive = cells[column_index(name, found, column)]
                if naive.startswith("–"):  # no seasonal naive where the season is longer than the look-back
                    continue
                naive_score = Score((number(naive),), naive.split(" (")[0])
                for seed, value in zip(seed_names(name, key), seeds(name, key)):
                    if (word := verdict(Score((value,), ""), naive_score)) != "below":
                        exceptions.append(
                            f"on {data.split(',')[0]}'s {split} windows {seed}'s {value:.3f} MAE is {word} {label}'s "
                            f"{naive_score.text} ({value / naive_score.values[0] - 1:+.1%})"
                        )
    files = joined([f"[`{Path(name).name}`]({link(here, 'experiments/results/' + name)})" for name in RERUNS])
    again = f"Trained again for the baseline-path comparison ({files}, three seeds on each of the six datasets)"
    if not exceptions:
        return f"{again}, every seed of the same config is below repeat-last and seasonal naive too."
    return f"{again}, the same config is not below them on every seed: {'; '.join(exceptions)}."


# The decoder-depth section of docs/how-it-works.md: each bullet a block, every figure a cell of the two studies.

TEACHER, FREE = "teacher forcing", REGIMES[1:]
LABEL = {"teacher forcing": "teacher forcing", "free running detach": "`detach`", "free running bptt": "`bptt`"}
LABEL["scheduled sampling"] = "scheduled sampling"


def joined(items: list[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def depths(dataset: str) -> list[int]:
    name, _ = DEPTH[dataset]
    found = sorted({int(cells[1]) for cells in nth_table(name, 0).rows if cells[0] in REGIMES})
    if not found:
        raise lacking(name, f"row of the regimes {joined(REGIMES)} in its first table")
    return found


def depth_cell(dataset: str, regime: str, steps: int, split: str = "validation", column: str | None = None) -> Score:
    """A cell of a depth study: ``split``'s score (ETTh1 MSE, M4 Hourly MAE) or another ``column``."""
    name, metric = DEPTH[dataset]
    return depth_score(name, regime, steps, column or metric.replace("validation", split))


def pooled(cells: list[Score]) -> Score:
    """Several cells as one range: every seed of each."""
    return Score(tuple(v for cell in cells for v in cell.values), "")


def means(cells: list[Score]) -> str:
    """The range of several cells' means, as the tables print them."""
    low, high = min(cells, key=lambda c: number(c.text)), max(cells, key=lambda c: number(c.text))
    return f"{number(low.text):.3f} to {number(high.text):.3f}"


def steps_text(steps: list[int]) -> str:
    return joined([str(s) for s in steps]) + (" step" if steps == [1] else " steps")


def against_teacher(dataset: str, steps: int, split: str = "validation") -> str:
    """The free-running regimes at ``steps`` against teacher forcing there, grouped by the rule's word."""
    teacher = depth_cell(dataset, TEACHER, steps, split)
    groups: dict[str, list[tuple[str, Score]]] = {}
    for regime in FREE:
        cell = depth_cell(dataset, regime, steps, split)
        groups.setdefault(verdict(cell, teacher), []).append((regime, cell))
    parts = []
    for i, (word, members) in enumerate(groups.items()):
        who = "every free-running regime" if len(members) == len(FREE) else joined([LABEL[r] for r, _ in members])
        figures = joined([cell.text for _, cell in members])
        verb = "is" if len(members) == 1 or len(members) == len(FREE) else "are"
        parts.append(f"{who} ({figures}) {verb} {word} " + (f"teacher forcing's {teacher.text}" if i == 0 else "it"))
    return f"at {steps} steps " + ", ".join(parts)


def exceptions(dataset: str, steps: list[int], split: str) -> tuple[list[str], int]:
    """The cells at ``steps`` whose word against teacher forcing is not *level with*, and how many cells there are."""
    found = []
    for regime in FREE:
        for s in steps:
            cell, teacher = depth_cell(dataset, regime, s, split), depth_cell(dataset, TEACHER, s, split)
            if (word := verdict(cell, teacher)) != "level with":
                found.append(f"{LABEL[regime]} at {s} steps is {word} it ({cell.text} against {teacher.text})")
    return found, len(FREE) * len(steps)


def depth_regime(here: Path) -> str:
    """Depth against regime: every cell at 2 and 4 steps against every cell at 16 and more, and the best cells."""
    parts, best = [], []
    for dataset, (name, metric) in DEPTH.items():
        few, deep = [s for s in depths(dataset) if s <= 4], [s for s in depths(dataset) if s >= 16]
        shallow = [depth_cell(dataset, r, s) for r in REGIMES for s in few]
        far = [depth_cell(dataset, r, s) for r in REGIMES for s in deep]
        metric_name = metric.split()[-1]
        parts.append(
            f"on {dataset} every regime's validation {metric_name} at {steps_text(few)} ({means(shallow)}) is "
            f"{verdict(pooled(shallow), pooled(far))} every regime's at {steps_text(deep)} ({means(far)})"
        )
        every = {(r, s): depth_cell(dataset, r, s) for r in REGIMES for s in depths(dataset)}
        (regime, steps), cell = min(every.items(), key=lambda item: number(item[1].text))
        patch = depth_row(name, regime, steps)[1][2]
        width = max(
            max(number(depth_cell(dataset, r, s).text) for r in REGIMES)
            - min(number(depth_cell(dataset, r, s).text) for r in REGIMES)
            for s in few
        )
        best.append(f"{regime} at {steps} steps of {patch} hours on {dataset} ({cell.text})")
        parts[-1] += f", and at each of {steps_text(few)} the four regimes' means lie within {width:.3f} of each other"
    return (
        "- **Depth matters more than the regime here.** With this budget, "
        f"{'; '.join(parts)}. The lowest cell of each study is {' and '.join(best)}."
    )


def depth_few_steps(here: Path) -> str:
    """At 2 and 4 steps: each free-running regime against teacher forcing, validation and test."""
    etth1, m4 = "ETTh1", "M4 Hourly"
    validation = [against_teacher(etth1, 2), against_teacher(etth1, 4), against_teacher(m4, 2)]
    test = [against_teacher(etth1, 2, "test"), against_teacher(etth1, 4, "test"), against_teacher(m4, 2, "test")]
    disagree: dict[str, list[int]] = {}
    for d, s in ((etth1, 2), (etth1, 4), (m4, 2)):
        if any(
            verdict(depth_cell(d, r, s), depth_cell(d, TEACHER, s))
            != verdict(depth_cell(d, r, s, "test"), depth_cell(d, TEACHER, s, "test"))
            for r in FREE
        ):
            disagree.setdefault(d, []).append(s)
    where = [f"{d} at {steps_text(ss)}" for d, ss in disagree.items()]
    return (
        "- **Few steps (2 and 4).** On validation, on ETTh1 "
        f"{validation[0]}, and {validation[1]}; on M4 Hourly {validation[2]}. "
        f"On test, on ETTh1 {test[0]}, and {test[1]}; on M4 Hourly {test[2]}"
        + (f": validation and test disagree on {joined(where)}." if disagree else ".")
    )


def depth_middle(here: Path) -> str:
    """The middle depths: the cells the rule does not call level with teacher forcing."""
    parts = []
    for dataset, steps in (("ETTh1", [8, 16, 32]), ("M4 Hourly", [4, 8, 16])):
        for split in ("validation", "test"):
            found, count = exceptions(dataset, steps, split)
            where = f"on {dataset}'s {split} windows at {steps_text(steps)}"
            if not found:
                parts.append(f"{where} every one of the {count} free-running cells is level with teacher forcing")
            else:
                level = count - len(found)
                parts.append(
                    f"{where} {level} of the {count} free-running cells are level with teacher forcing: "
                    + ", ".join(found)
                )
    return (
        f"- **Middle depths.** {parts[0][0].upper()}{parts[0][1:]}. "
        + ". ".join(p[0].upper() + p[1:] for p in parts[1:])
        + "."
    )


def depth_many_steps(here: Path) -> str:
    """48 one-hour steps on M4 Hourly: free running against teacher forcing and the baselines; the exposure-bias
    gap (validation loss less its teacher-forced loss) by depth."""
    m4, name = "M4 Hourly", DEPTH["M4 Hourly"][0]
    deepest = depths(m4)[-1]
    teacher, teacher_test = depth_cell(m4, TEACHER, deepest), depth_cell(m4, TEACHER, deepest, "test")
    cuts = []
    for regime in FREE:
        cell, test = depth_cell(m4, regime, deepest), depth_cell(m4, regime, deepest, "test")
        cut = (1 - number(cell.text) / number(teacher.text)) * 100
        cuts.append(
            f"{LABEL[regime]}'s {spread(cell)} is {verdict(cell, teacher)} it ({cut:.0f}% lower; test "
            f"{test.text}, {verdict(test, teacher_test)} teacher forcing's {teacher_test.text})"
        )
    baselines = [
        (label, score(name, row, "validation MAE"))
        for label, row in (
            ("seasonal naive", "seasonal naive"),
            ("the least-squares map", "least-squares linear map"),
            ("the NLinear form", "NLinear form"),
        )
    ]
    versus = {regime: [verdict(depth_cell(m4, regime, deepest), b) for _, b in baselines] for regime in FREE}
    values = joined([f"{label}'s {b.text}" for label, b in baselines])
    if len({w for words in versus.values() for w in words}) == 1:
        beside = f"every free-running {deepest}-step cell is {versus[FREE[0]][0]} {values}"
    else:
        beside = (
            "; ".join(
                f"{LABEL[r]} is {joined([f'{w} {label}' for w, (label, _) in zip(words, baselines)])}"
                for r, words in versus.items()
            )
            + f" ({values})"
        )

    def gap(dataset: str, regime: str, steps: int) -> float:
        cell = depth_cell(dataset, regime, steps, column="validation loss")
        forced = depth_cell(dataset, regime, steps, column="validation loss, teacher-forced")
        return number(cell.text) - number(forced.text)

    forced = {s: depth_cell(m4, TEACHER, s, column="validation loss, teacher-forced") for s in depths(m4)}
    lowest = min(forced, key=lambda s: number(forced[s].text))
    first, etth1_deep = depths(m4)[0], depths("ETTh1")[-1]
    etth1_teacher = depth_cell("ETTh1", TEACHER, etth1_deep)
    etth1 = [(r, depth_cell("ETTh1", r, etth1_deep)) for r in FREE]
    gains = [number(etth1_teacher.text) - number(c.text) for _, c in etth1]
    words = joined([f"{LABEL[r]} {verdict(c, etth1_teacher)} it" for r, c in etth1])
    return (
        f"- **Many steps.** At {deepest} one-hour steps on M4 Hourly, against teacher forcing's validation MAE "
        f"{spread(teacher)}: {'; '.join(cuts)}. On the same windows {beside}. "
        "The exposure-bias gap (validation loss less its teacher-forced loss) says "
        f"why: teacher forcing's teacher-forced loss is lowest at {lowest} steps ({forced[lowest].text}) while its "
        f"free-running loss, what prediction gets, is {teacher.text} there: its gap is "
        f"{gap(m4, TEACHER, first):.3f} at {first} steps and {gap(m4, TEACHER, deepest):.3f} at {deepest}, "
        f"`detach`'s {gap(m4, 'free running detach', deepest):.3f} at {deepest}. On ETTh1 teacher forcing's gap "
        f"grows the same way ({gap('ETTh1', TEACHER, depths('ETTh1')[0]):.3f} at {depths('ETTh1')[0]} steps, "
        f"{gap('ETTh1', TEACHER, etth1_deep):.3f} at {etth1_deep}), but the free-running regimes' means are only "
        f"{min(gains):.3f} to {max(gains):.3f} lower than teacher forcing's {spread(etth1_teacher)} at "
        f"{etth1_deep} steps: {words}."
    )


def wall_clock(dataset: str, regime: str, steps: int) -> float:
    name, _ = DEPTH[dataset]
    found, cells = depth_row(name, regime, steps)
    return number(cells[column_index(name, found, "wall-clock")])


def depth_regimes(here: Path) -> str:
    """`bptt` and scheduled sampling against `detach`, depth by depth, and `bptt`'s wall-clock against `detach`'s."""
    detach, bptt, sampling = FREE
    parts, costs, lowest = [], [], []
    for dataset in DEPTH:
        words = {s: verdict(depth_cell(dataset, bptt, s), depth_cell(dataset, detach, s)) for s in depths(dataset)}
        odd = [f"{w} it at {s} steps" for s, w in words.items() if w != "level with"]
        parts.append(f"on {dataset} " + ("at every depth" if not odd else f"except {joined(odd)}"))
        ratio, steps = max((wall_clock(dataset, bptt, s) / wall_clock(dataset, detach, s), s) for s in depths(dataset))
        costs.append(
            f"{ratio:.1f} times on {dataset} ({wall_clock(dataset, bptt, steps):.0f} s against "
            f"{wall_clock(dataset, detach, steps):.0f} s at {steps} steps)"
        )
        best = [
            s for s in depths(dataset) if min(FREE, key=lambda r: number(depth_cell(dataset, r, s).text)) == sampling
        ]
        against: dict[str, list[int]] = {}
        for s in depths(dataset):
            against.setdefault(verdict(depth_cell(dataset, sampling, s), depth_cell(dataset, detach, s)), []).append(s)
        said = ", ".join(f"{w} it at {steps_text(ss)}" for w, ss in against.items())
        lowest.append(f"at {steps_text(best)} on {dataset} (against `detach`: {said})")
    return (
        f"- **What `bptt` and scheduled sampling add over `detach`.** On validation `bptt` is level with `detach` "
        f"{' and '.join(parts)}, at up to "
        f"{' and '.join(costs)} of wall-clock: the gradient through the feedback buys nothing the seeds can tell "
        "apart here. Scheduled sampling has the lowest validation mean of the three free-running regimes "
        f"{'; '.join(lowest)}."
    )


def depth_floor(here: Path) -> str:
    """The statistical rows against every regime, depth by depth, validation and test."""
    parts, deep_above, shallow_above = [], False, False
    for dataset, (name, metric) in DEPTH.items():
        for split in ("validation", "test"):
            column = metric.replace("validation", split)
            rows = [
                (label, score(name, row, column))
                for label, row in (
                    ("AutoETS", "AutoETS"),
                    ("AutoTheta", "AutoTheta"),
                    ("seasonal naive", "seasonal naive"),
                )
            ]
            said = []
            for label, row in rows:
                by_word: dict[str, list[int]] = {}
                mixed = []
                for s in depths(dataset):
                    words = {r: verdict(depth_cell(dataset, r, s, split), row) for r in REGIMES}
                    if label != "seasonal naive" and "above" in words.values():
                        shallow_above |= s <= 4
                        deep_above |= s > 4
                    if len(set(words.values())) == 1:
                        by_word.setdefault(next(iter(words.values())), []).append(s)
                    else:
                        groups: dict[str, list[str]] = {}
                        for r, w in words.items():
                            groups.setdefault(w, []).append(LABEL[r])
                        mixed.append(f"at {s} steps {' and '.join(f'{joined(g)} {w} it' for w, g in groups.items())}")
                whole = [f"every regime is {w} it at {steps_text(ss)}" for w, ss in by_word.items()]
                said.append(f"{label}'s {row.text}: {', '.join(whole + mixed)}")
            parts.append(f"{dataset} {split} {column.split()[-1]}, " + "; ".join(said))
    return (
        "- **The statistical floor** (AutoETS and AutoTheta fitted per series and channel on the training rows in "
        f"the same run, scored on the study's windows, with seasonal naive beside them). {'. '.join(parts)}."
        + (
            " A deep decoder on a small budget can be above a per-series model; a few long patches are not."
            if deep_above and not shallow_above
            else ""
        )
    )


def depth_use(here: Path) -> str:
    """What to use: the rule at 2 to 4 steps; the count `search/base_defaults.md` states over the study file's own
    second-table verdicts at 8 and 16 steps (and at 2 and 4), with the seed-range rule's count beside it."""
    few = []
    for dataset in DEPTH:
        for s in (2, 4):
            few += [verdict(depth_cell(dataset, r, s), depth_cell(dataset, TEACHER, s)) for r in FREE]
    none_below = "below" not in few
    cheapest = all(wall_clock(d, TEACHER, s) <= wall_clock(d, r, s) for d in DEPTH for s in (2, 4) for r in FREE)

    def own(steps: tuple[int, ...]) -> dict[str, tuple[int, float]]:
        counts = {}
        for regime in REGIMES:
            total, ratios = 0, []
            for dataset, (name, _) in DEPTH.items():
                second = nth_table(name, 1)
                for s in steps:
                    ratios.append(
                        number(depth_cell(dataset, regime, s).text) / number(depth_cell(dataset, TEACHER, s).text)
                    )
                    if regime == TEACHER:
                        continue
                    row = row_where(name, second, lambda c, s=s: c[0] == str(s), f"of {s} steps")
                    cell = row[column_index(name, second, f"{regime} − teacher forcing, validation")]
                    total += {"wins": 1, "ties": 0, "loses": -1}[re.search(r"\((\w+)\)", cell)[1]]
            counts[regime] = (total, statistics.mean(ratios))
        return counts

    def by_rule(steps: tuple[int, ...]) -> dict[str, int]:
        return {
            regime: sum(
                {"below": 1, "level with": 0, "above": -1}[verdict(depth_cell(d, regime, s), depth_cell(d, TEACHER, s))]
                for d in DEPTH
                for s in steps
            )
            for regime in REGIMES
        }

    def listed(counts: dict[str, tuple[int, float]], ratio: bool) -> str:
        order = sorted(REGIMES, key=lambda r: (-counts[r][0], counts[r][1]))
        return ", ".join(
            f"{LABEL[r]} {counts[r][0]:+d}".replace("+0", "0").replace("-", "−")
            + (f" ({counts[r][1]:.3f})" if ratio and r != TEACHER else "")
            for r in order
        )

    middle, shallow = own((8, 16)), own((2, 4))
    same = all(by_rule(steps)[r] == own(steps)[r][0] for steps in ((8, 16), (2, 4)) for r in REGIMES)
    winner = sorted(REGIMES, key=lambda r: (-middle[r][0], middle[r][1]))[0]
    source = link(here, "experiments/results/search/base_defaults.md")
    return (
        "**What to use.** With a few long patches (2 to 4 decoder steps) "
        + (
            "no free-running regime is below teacher forcing on validation"
            if none_below
            else "a free-running regime is below teacher forcing on validation at some cell"
        )
        + (", and no regime's wall-clock is below teacher forcing's" if cheapest else "")
        + f". `configs/base.yaml`, when it decoded 12 steps, took {winner}, by a "
        f"rule [`base_defaults.md`]({source}#the-regime) states over the four validation cells at 8 and 16 steps: the "
        "most wins minus losses against teacher forcing in the study files' own second-table verdicts (their mean ± sd "
        "intervals apart or not), a tie broken by the mean ratio of validation score to teacher forcing's. That count "
        f"gives {listed(middle, True)}: small margins, and the order could change with another budget. At 2 and 4 "
        f"steps it gives {listed(shallow, False)}"
        + (
            "; counting the seed-range rule's below and above instead gives the same over both sets of cells."
            if same
            else "; counting the seed-range rule's below and above instead gives other counts."
        )
    )


SEARCHES = {
    "ETTh1": ("search/etth1_regime_depth.md", "validation MSE"),
    "M4 Hourly": ("search/m4_hourly_regime_depth.md", "validation sMAPE"),
}


def depth_search(here: Path) -> str:
    """The presets' regime × depth searches (one seed a cell): each grid's lowest cell against the rest, and
    teacher forcing's cells."""
    parts = []
    for dataset, (name, column) in SEARCHES.items():
        found = table_where(name, lambda t: t.header[0] == "regime", "headed regime")
        index = column_index(name, found, column)
        cells = {(c[0], int(c[1])): Score((number(c[index]),), c[index]) for c in found.rows}
        (regime, steps), best = min(cells.items(), key=lambda item: item[1].mean)
        others = {verdict(best, cell) for key, cell in cells.items() if key != (regime, steps)}
        teacher = [(s, cell) for (r, s), cell in cells.items() if r == TEACHER]
        relation = (
            f"{joined(sorted(others))} every other cell of its grid"
            if len(others) == 1
            else f"{joined(sorted(others))} the other cells of its grid"
        )
        parts.append(
            f"on {dataset} {LABEL[regime]} at {steps} steps ({column} {best.text}), {relation}, "
            "teacher forcing's cells "
            f"({joined([f'{cell.text} at {s}' for s, cell in teacher])}) among them"
        )
    source = link(here, "experiments/results/search")
    return (
        f"The lowest cell of each [search]({source}) was {'; '.join(parts)} (one value a cell: the rule has no "
        "spread to weigh, and says below when lower); on M4 Weekly one decoder step of 13 weeks, where every regime "
        "is the same run."
    )


# The decoder-depth study again, with the linear baseline path (issue 55): M4 Hourly, the regimes it ran.
PATH_DEPTH = ("depth_m4_hourly_linear_path.md", "validation MAE")
PATH_REGIMES = ["teacher forcing", "free running detach", "scheduled sampling"]


def path_depth_cells() -> dict[int, dict[str, Score]]:
    """Decoder steps → regime → validation MAE, in the path study's file."""
    name, column = PATH_DEPTH
    steps = sorted({int(c[1]) for c in nth_table(name, 0).rows if c[0] in PATH_REGIMES})
    if not steps:
        raise lacking(name, f"row of the regimes {joined(PATH_REGIMES)} in its first table")
    return {s: {regime: depth_score(name, regime, s, column) for regime in PATH_REGIMES} for s in steps}


def depth_with_the_path(here: Path) -> str:
    """Which regime has the lowest validation MAE at each depth with the linear path, whether free running is below
    teacher forcing there, and the deepest cells against seasonal naive and the NLinear map."""
    name, column = PATH_DEPTH
    cells = path_depth_cells()
    naive, nlinear = score(name, "seasonal naive", column), score(name, "NLinear form", column)
    said = []
    for steps, by_regime in cells.items():
        regime, best = min(by_regime.items(), key=lambda item: item[1].mean)
        teacher = by_regime["teacher forcing"]
        free = [
            f"{r.replace('free running ', '`')}{'`' if 'detach' in r else ''} {verdict(c, teacher)}"
            for r, c in by_regime.items()
            if r != "teacher forcing"
        ]
        said.append(f"{steps} steps: lowest {regime} ({best.text}); against teacher forcing, {', '.join(free)}")
    deepest = max(cells)
    deep = cells[deepest]["free running detach"]
    source = link(here, f"experiments/results/{name}")
    return (
        f"With `LinearPath` on M4 Hourly ([`{name}`]({source}), validation MAE on scaled values, 3 seeds): "
        + "; ".join(said)
        + f". At {deepest} steps `detach`'s {deep.text} is {verdict(deep, naive)} seasonal naive's {naive.text} and "
        f"{verdict(deep, nlinear)} the NLinear form's {nlinear.text}."
    )


def path_changes_the_answer(here: Path) -> str:
    """The README's two sentences: when free running pays once the network forecasts the residual over a linear
    path, against the study without it."""
    name, column = PATH_DEPTH
    cells = path_depth_cells()
    deepest = max(cells)
    before = depth_score(DEPTH["M4 Hourly"][0], "teacher forcing", deepest, column)
    teacher, detach = cells[deepest]["teacher forcing"], cells[deepest]["free running detach"]
    naive, nlinear = score(name, "seasonal naive", column), score(name, "NLinear form", column)
    deep = list(cells[deepest].values())
    against = {verdict(c, naive) for c in deep}, {verdict(c, nlinear) for c in deep}
    paying = [
        steps
        for steps, by_regime in cells.items()
        if any(verdict(c, by_regime["teacher forcing"]) == "below" for r, c in by_regime.items() if "teacher" not in r)
    ]
    margin = max(
        cells[s]["teacher forcing"].mean - min(c.mean for r, c in cells[s].items() if "teacher" not in r)
        for s in paying
    )
    (best_regime, best_steps), best = min(
        (((r, s), c) for s, by_regime in cells.items() for r, c in by_regime.items()), key=lambda item: item[1].mean
    )
    source = link(here, f"experiments/results/{name}")
    return (
        f"**With a linear baseline path** (`LinearPath`, [the study again]({source})), at {deepest} steps teacher "
        f"forcing's validation MAE falls from {before.text} to {teacher.text}, {verdict(teacher, detach)} `detach`'s "
        f"{detach.text}, and every regime there is {' or '.join(sorted(against[0]))} seasonal naive's {naive.text} and "
        f"{' or '.join(sorted(against[1]))} the NLinear form's {nlinear.text}. Free running is below teacher forcing "
        f"only at {' and '.join(map(str, paying))} steps, by at most {margin:.3f}, and the lowest cell is still "
        f"{best_regime} at {best_steps} steps ({best.text})."
    )


def baseline_path(here: Path) -> str:
    """issue 55's comparison by the rule's own measure: each dataset's difference of the seed-means of validation MAE
    against the larger of the two seeds' standard deviations, gains and losses alike, and the file's decision."""
    name = "baseline_path/comparison.md"
    found = nth_table(name, 0)
    columns = ("NoPath validation MAE", "LinearPath validation MAE", "larger spread")
    sides: dict[str, list[str]] = {"lower": [], "higher": []}
    for cells in found.rows:
        without, with_path, allowed = (number(cells[column_index(name, found, c)]) for c in columns)
        difference = with_path - without
        where = "beyond" if abs(difference) > allowed else "inside"
        short = re.sub(r" \(.*?\)", "", cells[0].split(",")[0])
        sides["lower" if difference < 0 else "higher"].append(
            f"{short} by {abs(difference):.3f}, {where} the spread of {allowed:.3f}"
        )
    decision = re.search(r"Decision: (.+)$", results_text(name), re.MULTILINE)
    if decision is None:
        raise lacking(name, "line '… Decision: …'")
    source = link(here, f"experiments/results/{name}")
    return (
        f"Over the {len(found.rows)} datasets, 3 seeds each, by the rule's measure (the difference of the seed-means "
        "of validation MAE against the larger of the two seeds' standard deviations, "
        f"[`comparison.md`]({source})), `LinearPath` is lower on {len(sides['lower'])} ({'; '.join(sides['lower'])}) "
        f"and higher on {len(sides['higher'])} ({'; '.join(sides['higher'])}). The rule adopts it only when it is "
        "lower on more than half the datasets and higher beyond the spread on none; the file's decision: "
        f"{decision[1]}"
    )


def ensemble(here: Path) -> str:
    """The ensemble of three seeds against its seeds and the simple forecasts on the seven real datasets' validation
    windows, and what the rule committed before the runs decided: the README's advice follows it."""
    name = "ensemble/validation.md"
    found = table_where(name, lambda t: "ensemble MAE" in t.header, 'with a column "ensemble MAE"')
    rows = [cells for cells in found.rows if cells[1] == "validation"]
    best_simple = column_index(name, found, "ensemble below the best simple forecast")
    beats = [cells[0].split(",")[0] for cells in rows if cells[best_simple].startswith("yes")]
    decision = re.search(r"^The ensemble rule .*?Decision: (.*)$", results_text(name), re.MULTILINE)
    if decision is None:
        raise lacking(name, "line 'The ensemble rule … Decision: …'")
    measured = re.search(r"below its best seed on (\d+) of the (\d+) datasets.*?, and (-?[\d.]+%) below", decision[0])
    if measured is None:
        raise lacking(name, "counts in its line 'The ensemble rule …'")
    # The counts are the table's: a decision line that disagrees with its own table is refused, not quoted.
    below_best = sum(
        cells[column_index(name, found, "ensemble below the best seed")].startswith("yes") for cells in rows
    )
    if (int(measured[1]), int(measured[2])) != (below_best, len(rows)):
        raise InputError(
            f"{RESULTS / name}: its decision counts {measured[1]} of {measured[2]} datasets below their best seed, its "
            f"table {below_best} of {len(rows)}; {WHOLE_FILE}"
        )
    recommended = decision[1].startswith("recommend")
    rule = link(here, "experiments/results/search/ensemble_rule.md")
    advice = (
        "Where accuracy matters, train three seeds and forecast with their ensemble"
        if recommended
        else "By that rule the README does not recommend the ensemble; the tool stays for those who want it"
    )
    table = link(here, "experiments/results/ensemble/validation.md")
    which = f" ({', '.join(beats)})" if beats else ""
    return (
        f"Three seeds of the defaults before issue 70 (a budget of 10 epochs) and the mean of their forecasts "
        f"(`python -m project.tools.ensemble`), on the "
        f"validation windows of {measured[2]} real datasets ([`validation.md`]({table}), by the [rule committed "
        f"before the runs]({rule})): the ensemble is below its best seed on {measured[1]} of {measured[2]} and "
        f"{measured[3]} below the mean seed on average; below the best simple forecast (naive, seasonal naive, "
        f"AutoETS, AutoTheta) on {len(beats)} of {len(rows)}{which}. {advice} (`make train` stays one quick model)."
    )


# The defaults on the seven real datasets (issue 70) beside the previous defaults: which runs are which is this one
# mapping. When a candidate is adopted, its runs become "defaults" and the adopted ones "previous defaults": each
# names its validation table (``experiments.your_data --splits val``) and the test tables read once after its decision.


@dataclass(frozen=True)
class Runs:
    """A config's three seeds on the seven real datasets: how the table names it, and its results files."""

    name: str
    validation: str
    tests: tuple[str, ...]


DEFAULTS = {
    "defaults": Runs(
        "candidate A3, a budget of optimizer steps (`experiments/results/budget/decision_a3.md`)",
        "budget/validation_a3.md",
        ("budget/test_etth1_m4_hourly.md", "budget/test_m4_weekly.md", "budget/test_single_series.md"),
    ),
    "previous defaults": Runs(
        "a budget of 10 epochs",
        "ensemble/validation.md",
        ("ensemble/test_etth1_m4_hourly.md", "ensemble/test_m4_weekly_and_single_series.md"),
    ),
}
SIMPLE = ("repeat-last", "seasonal naive", "AutoETS", "AutoTheta")
# AutoETS and AutoTheta on the validation windows, fitted once for every config (they do not depend on it).
VALIDATION_FLOOR = "ensemble/validation.md"


@dataclass(frozen=True)
class Simple:
    """The best simple forecast on a split's windows: its name and its MAE as the file prints it."""

    name: str
    text: str

    @property
    def score(self) -> Score:
        return Score((number(self.text),), self.text)


def validation_best_simple(label: str, validation: str) -> Simple:
    """The lowest validation MAE of repeat-last and seasonal naive (``validation``'s table, every window) and AutoETS
    and AutoTheta (``VALIDATION_FLOOR``'s floor table) where the floor scored every window, as
    experiments/results/search/budget.md states it; where the floor scored every Nth window (ETTh1), its models must
    be above seasonal naive there, as the rule assumed."""
    simple = {name: score(validation, label, f"{name} MAE").text.split(" (")[0] for name in SIMPLE[:2]}
    floor = nth_table(VALIDATION_FLOOR, 1)
    cells = row_where(
        VALIDATION_FLOOR, floor, lambda cells: cells[0] == label and cells[1] == "validation", repr(label)
    )
    every_window = cells[column_index(VALIDATION_FLOOR, floor, "windows")] == "every window"
    seasonal_there = number(cells[column_index(VALIDATION_FLOOR, floor, "seasonal naive MAE")])
    for name in SIMPLE[2:]:
        text = cells[column_index(VALIDATION_FLOOR, floor, f"{name} MAE")].split(" (")[0]
        if every_window:
            simple[name] = text
        elif number(text) < seasonal_there:
            raise InputError(
                f"{RESULTS / VALIDATION_FLOOR}: {label}'s {name} is below seasonal naive on its windows; the rule "
                "assumed not"
            )
    best = min(simple, key=lambda name: number(simple[name]))
    return Simple(best, simple[best])


def validated(runs: Runs) -> dict[str, tuple[Score, Simple]]:
    """Per dataset of ``runs``' validation table: the model's validation MAE over its seeds and the best simple
    forecast."""
    found = {}
    for cells in nth_table(runs.validation, 0).rows:
        label = cells[0]
        model = score(runs.validation, label, "model MAE", seeds_key=f"{label}, validation model MAE")
        found[label] = (model, validation_best_simple(label, runs.validation))
    return found


def tested(runs: Runs) -> dict[str, tuple[Score, Simple, str]]:
    """Per dataset of the floor tables of ``runs``' test files: the model's test MAE over its seeds, the best simple
    forecast on the same windows, and which windows they are."""
    found = {}
    for name in runs.tests:
        floor = table_where(name, lambda t: "AutoETS MAE" in t.header, 'with a column "AutoETS MAE"')
        for cells in floor.rows:
            if cells[1] != "test":
                continue
            windows = cells[column_index(name, floor, "windows")]
            values = seeds(name, f"{cells[0]}, test, {windows}, model MAE", 1)
            model = Score(values, cells[column_index(name, floor, "model MAE")])
            simple = {label: cells[column_index(name, floor, f"{label} MAE")].split(" (")[0] for label in SIMPLE}
            best = min(simple, key=lambda label: number(simple[label]))
            found[cells[0]] = (model, Simple(best, simple[best]), windows)
    return found


def short_name(label: str) -> str:
    return re.sub(r" \(.*?\)", "", label.split(",")[0])


def defaults_on_real_data(here: Path) -> str:
    """The defaults and the previous defaults on the seven real datasets, validation and test, beside the best simple
    forecast on the same windows; whether every seed of the defaults is below it, by the verdict rule, and how many
    datasets each config wins; the files it reads are ``DEFAULTS``'."""
    new, old = DEFAULTS["defaults"], DEFAULTS["previous defaults"]
    on_validation = {key: validated(runs) for key, runs in DEFAULTS.items()}
    on_test = {key: tested(runs) for key, runs in DEFAULTS.items()}
    labels = list(on_validation["defaults"])
    for key, found in [*on_validation.items(), *on_test.items()]:
        if set(found) != set(labels):
            raise InputError(f"the {key}' files hold {', '.join(found)}; the defaults' hold {', '.join(labels)}")
    header = ["data", "validation MAE: defaults", "previous defaults", "best simple forecast"]
    header += ["test MAE: defaults", "previous defaults", "best simple forecast", "the defaults against it"]
    lines = ["| " + " | ".join(header) + " |", "|---|" + "---:|" * 6 + "---|"]
    wins = {key: {"validation": 0, "test": 0} for key in DEFAULTS}
    only_validation, subsets = [], {}
    for label in labels:
        words = {}
        for split, found in (("validation", on_validation), ("test", on_test)):
            for key in DEFAULTS:
                model, simple = found[key][label][:2]
                below = verdict(model, simple.score) == "below"
                wins[key][split] += below
                if key == "defaults":
                    words[split] = verdict(model, simple.score)
        if words["validation"] == "below" != words["test"]:
            only_validation.append(short_name(label))
        if (windows := on_test["defaults"][label][2]) != "every window":
            subsets.setdefault(windows, []).append(short_name(label))
        said = (
            f"{words['validation']} on both"
            if words["validation"] == words["test"]
            else f"{words['validation']} on validation, {words['test']} on test"
        )
        cells = [short_name(label)]
        for found in (on_validation, on_test):
            simple = found["defaults"][label][1]
            cells += [found["defaults"][label][0].text, found["previous defaults"][label][0].text]
            cells.append(f"{simple.name} {simple.text}")
        lines.append("| " + " | ".join([*cells, said]) + " |")
    total = len(labels)
    files = [new.validation, *new.tests, old.validation, *old.tests]
    cited = joined([f"`experiments/results/{name}`" for name in files])
    said = (
        f"Every seed below the best simple forecast (repeat-last, seasonal naive, AutoETS, AutoTheta on the same "
        f"windows, by the verdict rule): the defaults on {wins['defaults']['validation']} of {total} validation sets "
        f"and {wins['defaults']['test']} of {total} test sets; the previous defaults on "
        f"{wins['previous defaults']['validation']} of {total} validation sets and "
        f"{wins['previous defaults']['test']} of {total} test sets. "
    )
    if only_validation:
        said += f"On {joined(only_validation)} every seed is below it on validation and not on test. "
    for windows, names in subsets.items():
        said += f"{joined(names)}'s test columns are on {windows}, where AutoETS and AutoTheta were fitted. "
    said += (
        f"The defaults: {new.name}; the previous defaults: {old.name}; MAE in original units, mean ± sd over the "
        f"seeds. From {cited}."
    )
    return "\n".join(lines) + "\n\n" + said


# The results page's sections (experiments/README.md): what each table says, one block a section.


def scores(name: str, row: str, columns: tuple[str, ...], table: int = 0) -> dict[str, Score]:
    """A row's cells in several columns (``test MSE``, ``test MAE``), as ``score`` reads each."""
    return {column: score(name, row, column, table) for column in columns}


def against(model: dict[str, Score], other: dict[str, Score], label: str, figures: bool = True) -> str:
    """Two metrics of a row against another's, by the rule: 'above the least-squares map (0.370 / 0.392)', or 'level
    with (MSE) and above (MAE) the least-squares map (0.652 / 0.543)'; without the other's ``figures``, 'above them'."""
    words = {column: verdict(model[column], other[column]) for column in model}
    if len(set(words.values())) == 1:
        said = next(iter(words.values()))
    else:
        said = joined([f"{word} ({column.split()[-1]})" for column, word in words.items()])
    return f"{said} {label}" + (f" ({pair(other)})" if figures else "")


def pair(cells: dict[str, Score]) -> str:
    return " / ".join(cell.text for cell in cells.values())


ETTH1_LINEAR = {"least-squares linear map": "the least-squares map", "NLinear form": "the NLinear form"}


def etth1_regimes(here: Path) -> str:
    """ETTh1's regimes table: free running against the in-run linear baselines, its ensemble and teacher forcing, on
    test and on validation, and whether the target (below the best linear baseline on test, both metrics) is met."""
    name, test, validation = "etth1_regimes.md", ("test MSE", "test MAE"), ("validation MSE", "validation MAE")
    detach, teacher = scores(name, "free running detach", test), scores(name, "teacher forcing", test)
    ensemble = scores(name, "free running detach, mean", test)
    linear = {label: scores(name, row, test) for row, label in ETTH1_LINEAR.items()}
    best = min(linear, key=lambda label: sum(cell.mean for cell in linear[label].values()))
    met = all(verdict(detach[column], linear[best][column]) == "below" for column in test)
    patch = scores(name, "PatchTST/42", test)
    detach_validation = scores(name, "free running detach", validation)
    ensemble_validation = scores(name, "free running detach, mean", validation)
    least_squares = scores(name, "least-squares linear map", validation)
    return (
        f"**What it says: the target is {'met' if met else 'missed'}.** The target was the free-running model below "
        f"the best in-run linear baseline on test, on both metrics. On test free-running `detach` scores "
        f"{pair(detach)} (MSE / MAE, three seeds), {against(detach, linear[best], best)}, and the mean of its seeds' "
        f"forecasts ({pair(ensemble)}) is {against(ensemble, linear[best], 'it', False)}. Teacher forcing, searched "
        f"with the same budget, scores {pair(teacher)}: {against(teacher, detach, 'free running', False)}, and "
        f"{against(teacher, linear[best], best, False)}. On validation, where every setting was chosen, `detach` "
        f"scores {pair(detach_validation)}, {against(detach_validation, least_squares, 'the least-squares map')}, and "
        f"its ensemble {pair(ensemble_validation)}, {against(ensemble_validation, least_squares, 'it', False)}. "
        f"PatchTST/42, published at the same look-back, scored {pair(patch)} on test."
    )


def lowest(name: str, rows: dict[str, str], column: str, table: int = 0) -> tuple[str, Score]:
    """Of ``rows`` (row → how the page names it), the one of lowest ``column``: its name and its cell."""
    cells = {label: score(name, row, column, table) for row, label in rows.items()}
    label = min(cells, key=lambda label: cells[label].mean)
    return label, cells[label]


ETTH1_BASELINES = {
    "repeat-last": "repeat-last",
    "seasonal naive": "seasonal naive",
    "least-squares linear map": "the least-squares map",
    "NLinear form": "the NLinear form",
}
FLOOR_ROWS = {"AutoETS": "AutoETS", "AutoTheta": "AutoTheta"}


def etth1_floor(here: Path) -> str:
    """ETTh1's statistical floor, the regimes file's second table (every 24th window): AutoETS and AutoTheta against
    the naive forecasts and the least-squares map, free running against all of them, and the lowest baseline."""
    name, test, validation = "etth1_regimes.md", "test MSE", "validation MSE"
    cell = {row: score(name, row, test, 1) for row in [*ETTH1_BASELINES, *FLOOR_ROWS, "free running detach"]}
    theta, ets, naive, last = cell["AutoTheta"], cell["AutoETS"], cell["seasonal naive"], cell["repeat-last"]
    linear, detach = cell["least-squares linear map"], cell["free running detach"]
    theta_validation = score(name, "AutoTheta", validation, 1)
    linear_validation = score(name, "least-squares linear map", validation, 1)
    floor_label, floor = lowest(name, {**ETTH1_BASELINES, **FLOOR_ROWS}, test, 1)
    return (
        f"On those test windows AutoTheta scores {theta.text} MSE, {verdict(theta, naive)} seasonal naive's "
        f"{naive.text} (one value each: the rule has no spread to weigh), and AutoETS {ets.text}, "
        f"{verdict(ets, last)} repeat-last's {last.text}; the least-squares map's {linear.text} is "
        f"{verdict(linear, theta)} AutoTheta and {verdict(linear, ets)} AutoETS, and on validation "
        f"{linear_validation.text} is {verdict(linear_validation, theta_validation)} AutoTheta's "
        f"{theta_validation.text}. Free-running `detach` on the same test windows scores {detach.text}, "
        f"{verdict(detach, theta)} AutoTheta, {verdict(detach, ets)} AutoETS and {verdict(detach, linear)} the "
        f"least-squares map: on ETTh1 the lowest baseline, the floor to beat, is {floor_label} ({floor.text})."
    )


def m4_hourly(here: Path) -> str:
    """M4 Hourly's table: free running against M4's winner and best hourly entry, the baselines and the statistical
    floor, the ensemble on validation and test, and the measured seasonal naive against M4's published row."""
    name, metrics = "m4_hourly.md", ("sMAPE", "MASE")
    test = tuple(f"test {m}" for m in metrics)
    detach = scores(name, "free running detach (", test)
    winner, best = scores(name, "ES-RNN", test), scores(name, "best hourly", test)
    measured, published = scores(name, "seasonal naive (measured)", test), scores(name, "seasonal naive (sNaive)", test)
    same = all(measured[column].text == published[column].text for column in test)
    behind = {
        "seasonal naive": "seasonal naive (measured)",
        "the least-squares map": "least-squares linear map",
        "the NLinear form": "NLinear form",
        "AutoETS": "AutoETS",
        "AutoTheta": "AutoTheta",
    }
    baselines = {label: score(name, row, "test sMAPE") for label, row in behind.items()}
    words = {verdict(cell, detach["test sMAPE"]) for cell in baselines.values()}
    floor = {label: scores(name, label, ("validation sMAPE", "test sMAPE")) for label in FLOOR_ROWS}
    naive = scores(name, "seasonal naive (measured)", ("validation sMAPE", "test sMAPE"))
    floor_words = {
        verdict(floor[label][column], naive[column]) for label in floor for column in ("validation sMAPE", "test sMAPE")
    }
    seeds_validation = score(name, "free running detach (", "validation sMAPE")
    ensemble_validation = score(name, "free running detach, mean", "validation sMAPE")
    ensemble = scores(name, "free running detach, mean", test)
    return (
        f"**What it says.** The measured seasonal naive's test sMAPE / MASE, {pair(measured)}, "
        f"{'are' if same else 'are not'} M4's published sNaive row's, which checks the metric code. On test free "
        f"running scores {pair(detach)} (sMAPE / MASE, three seeds): {against(detach, winner, 'ES-RNN, the winner')}, "
        f"and {against(detach, best, 'the best hourly entry')}. On test sMAPE "
        + joined([f"{label} ({cell.text})" for label, cell in baselines.items()])
        + (f" are all {next(iter(words))} it" if len(words) == 1 else " are not all on one side of it")
        + f", and AutoETS and AutoTheta are {joined(sorted(floor_words))} seasonal naive on validation and test. On "
        f"validation the mean of the three seeds' forecasts scores {ensemble_validation.text} sMAPE against the seeds' "
        f"{seeds_validation.text}, {verdict(ensemble_validation, seeds_validation)} them, so validation chooses it; on "
        f"test it scores {pair(ensemble)}, {against(ensemble, best, 'the best hourly entry', False)} ({pair(best)}; "
        "one ensemble against one entry: the rule has no spread to weigh)."
    )


M4_WEEKLY_BASELINES = {
    "seasonal naive": "seasonal naive",
    "repeat-last": "repeat-last",
    "least-squares linear map": "the least-squares map",
    "NLinear form": "the NLinear form",
    "AutoETS": "AutoETS",
    "AutoTheta": "AutoTheta",
}


def m4_weekly(here: Path) -> str:
    """M4 Weekly's table: free running against AutoTheta and AutoETS at the data's season, each split, the lowest
    baseline of each test metric, the ensemble, and AutoTheta as the competition fitted it (the note under the
    table)."""
    name, metrics = "m4_weekly.md", ("sMAPE", "MASE")
    test, validation = tuple(f"test {m}" for m in metrics), tuple(f"validation {m}" for m in metrics)
    detach = scores(name, "free running detach (", test)
    detach_validation = scores(name, "free running detach (", validation)
    on_test = [against(detach, scores(name, row, test), f"{row} at season 52") for row in FLOOR_ROWS]
    on_validation = [against(detach_validation, scores(name, row, validation), row) for row in FLOOR_ROWS]
    nearest = []
    for column in test:
        label, cell = lowest(name, M4_WEEKLY_BASELINES, column)
        nearest.append(f"{verdict(detach[column], cell)} {label} ({cell.text}), the lowest baseline on {column}")
    ensemble = scores(name, "free running detach, mean", test)
    ensemble_validation = scores(name, "free running detach, mean", ("validation sMAPE",))
    seeds_validation = {"validation sMAPE": detach_validation["validation sMAPE"]}
    competition = re.search(r"AutoTheta at season 52\s+scores ([\d.]+) sMAPE / ([\d.]+) MASE", results_text(name))
    if competition is None:
        raise lacking(name, "note 'AutoTheta at season 52 scores … sMAPE / … MASE'")
    fitted = {column: Score((number(value),), value) for column, value in zip(test, competition.groups())}
    return (
        f"On test free running scores {pair(detach)} (sMAPE / MASE, three seeds): {'; '.join(on_test)}. On "
        f"validation, where every choice is read, it scores {pair(detach_validation)}: {'; '.join(on_validation)}. "
        f"Free running is {', and '.join(nearest)}. On validation the mean of the seeds' forecasts scores "
        f"{pair(ensemble_validation)} sMAPE, {against(ensemble_validation, seeds_validation, 'the seeds')}, so "
        f"validation would choose it; on test it scores {pair(ensemble)}. Fitted as M4's entries were, on every week "
        "before the test weeks (`experiments.m4.competition_scores`, the note under the table), AutoTheta at season "
        f"52 scores {pair(fitted)} on test, and free running is {against(detach, fitted, 'it', False)} too."
    )


def split_score(name: str, row: str, split: str, column: str, table: int = 0) -> Score:
    """A cell of a table with a split column: the first row starting with ``row`` on ``split``, with its seeds."""
    found = nth_table(name, table)
    cells = row_where(name, found, lambda c: c[0].startswith(row) and c[1] == split, f"{row!r} on {split}")
    text = cells[column_index(name, found, column)]
    if " ± " in text:
        return Score(seeds(name, f"{cells[0]}, {split} {column}", table), text)
    return Score((number(text),), text.split(" (")[0])


def all_said(models: list[Score], other: Score) -> str:
    """Several rows against one by the rule, as one word when they agree ('below'), else each word."""
    words = sorted({verdict(model, other) for model in models})
    return words[0] if len(words) == 1 else "by turns " + joined(words)


def grouped(words: dict[str, str]) -> str:
    """Verdicts against several rows (row → word), each word once: 'below seasonal naive (18.582) and repeat-last
    (24.466)', 'level with the least-squares map (0.058) and above the NLinear form (0.053)'."""
    groups: dict[str, list[str]] = {}
    for label, word in words.items():
        groups.setdefault(word, []).append(label)
    return " and ".join(f"{word} {joined(labels)}" for word, labels in groups.items())


INTERMITTENT, INTERMITTENT_FLOOR = "intermittent_panel.md", "intermittent_floor.md"
NAIVE_COLUMNS = {"seasonal naive": "seasonal naive (12) MAE", "repeat-last": "repeat-last MAE"}


def recipes(split: str) -> dict[str, Score]:
    """The intermittent panel's recipes on ``split`` (the statistical rows left out): recipe → model MAE."""
    found = nth_table(INTERMITTENT, 0)
    rows = [c[0] for c in found.rows if c[1] == split and not c[0].startswith(("AutoETS", "AutoTheta"))]
    return {row: split_score(INTERMITTENT, row, split, "model MAE") for row in rows}


def intermittent(here: Path) -> str:
    """The intermittent panel's recipes against the naive forecasts on validation, the chosen one on test, and the
    statistical floor of the same run."""
    tried, chosen = recipes("validation"), recipes("test")
    (chosen_score,) = chosen.values()
    naive = {
        split: {
            label: split_score(INTERMITTENT, next(iter(found)), split, column)
            for label, column in NAIVE_COLUMNS.items()
        }
        for split, found in (("validation", tried), ("test", chosen))
    }
    low, high = min(tried.values(), key=lambda s: s.mean), max(tried.values(), key=lambda s: s.mean)
    best = min(tried, key=lambda row: tried[row].mean)
    floor = {label: split_score(INTERMITTENT, label, "test", "model MAE") for label in FLOOR_ROWS}
    seasonal = naive["test"]["seasonal naive"]
    on_validation = grouped(
        {f"{label} ({cell.text})": all_said(list(tried.values()), cell) for label, cell in naive["validation"].items()}
    )
    on_test = grouped({f"{label} ({cell.text})": verdict(chosen_score, cell) for label, cell in naive["test"].items()})
    words = {label: verdict(cell, seasonal) for label, cell in floor.items()}
    if len(set(words.values())) == 1:
        floor_said = f"both {next(iter(words.values()))} seasonal naive ({seasonal.text})"
    else:
        floor_said = joined([f"{label} {word}" for label, word in words.items()]) + f" seasonal naive ({seasonal.text})"
    chosen_said = grouped({label: verdict(chosen_score, cell) for label, cell in floor.items()})
    return (
        f"**What it says.** On validation every recipe ({low.text} to {high.text} model MAE) is {on_validation}; the "
        f"recipes lie within {high.mean / low.mean - 1:.1%} of each other, and the lowest, {best.split(' (')[0]}, was "
        f"chosen. On test the chosen recipe scores {chosen_score.text} model MAE, {on_test}. The statistical floor of "
        f"the same run, on the same test windows: AutoTheta scores {floor['AutoTheta'].text} and AutoETS "
        f"{floor['AutoETS'].text}, {floor_said}, and the chosen recipe is {chosen_said}."
    )


def intermittent_floor(here: Path) -> str:
    """The floor alone (intermittent_floor.md): the recipes against AutoETS and AutoTheta on validation, and AutoARIMA
    against the naive forecast, the other statistical models and the recipes."""
    name, tried = INTERMITTENT_FLOOR, recipes("validation")
    floor = {
        row: {split: score(name, row, f"{split} MAE") for split in ("validation", "test")}
        for row in ("seasonal naive", "AutoETS", "AutoTheta", "AutoARIMA")
    }
    low, high = min(tried.values(), key=lambda s: s.mean), max(tried.values(), key=lambda s: s.mean)
    arima, naive = floor["AutoARIMA"], floor["seasonal naive"]
    others = joined([f"{verdict(arima['validation'], floor[row]['validation'])} {row}" for row in FLOOR_ROWS])
    recipes_said = all_said(list(tried.values()), arima["validation"])
    return (
        f"On validation the recipes' {low.text} to {high.text} model MAE is "
        f"{all_said(list(tried.values()), floor['AutoTheta']['validation'])} AutoTheta's "
        f"{floor['AutoTheta']['validation'].text} and {all_said(list(tried.values()), floor['AutoETS']['validation'])} "
        f"AutoETS's {floor['AutoETS']['validation'].text}. AutoARIMA, fitted per series at season 12, scores "
        f"{arima['validation'].text} on validation, {verdict(arima['validation'], naive['validation'])} seasonal naive "
        f"({naive['validation'].text}), {others}, and every recipe is {recipes_said} it; on test AutoARIMA scores "
        f"{arima['test'].text}, {verdict(arima['test'], naive['test'])} seasonal naive ({naive['test'].text}) and "
        f"{verdict(arima['test'], floor['AutoTheta']['test'])} AutoTheta ({floor['AutoTheta']['test'].text})."
    )


COVARIATES = "etth1_covariates.md"
COVARIATE_ROWS = {
    "OT with the six loads (past) and the calendar": "OT with the loads and the calendar",
    "OT with the six loads": "OT with the six loads",
    "OT with the calendar": "OT with the calendar",
}


def etth1_covariates(here: Path) -> str:
    """The covariates table: each covariate row against OT alone on test, OT alone against the linear baselines, the
    lowest model row on validation, and the statistical floor on every 24th window."""
    name, test, validation = COVARIATES, "test MSE", "validation MSE"
    alone = score(name, "OT alone", test)
    rows = {label: score(name, row, test) for row, label in COVARIATE_ROWS.items()}
    helping = [label for label, cell in rows.items() if verdict(cell, alone) == "below"]
    linear = {label: score(name, row, test) for row, label in ETTH1_LINEAR.items()}
    models = {"OT alone": "OT alone", **COVARIATE_ROWS}
    best_label, best = lowest(name, models, validation)
    alone_validation = score(name, "OT alone", validation)
    floor = {label: score(name, label, test, 1) for label in FLOOR_ROWS}
    last = score(name, "repeat-last", test, 1)
    alone_there, alone_there_validation = score(name, "OT alone", test, 1), score(name, "OT alone", validation, 1)
    theta_validation = score(name, "AutoTheta", validation, 1)
    etss_is_last = all(
        score(name, "AutoETS", column, 1).text == score(name, "repeat-last", column, 1).text
        for column in nth_table(name, 1).header[1:5]
    )
    return (
        f"**What it says.** {'No covariate row is' if not helping else joined(helping) + ' is'} below OT alone on "
        f"test: OT alone scores {alone.text} MSE, "
        + grouped({f"{label} ({cell.text})": verdict(alone, cell) for label, cell in linear.items()})
        + "; "
        + "; ".join(f"{label} scores {cell.text}, {verdict(cell, alone)} it" for label, cell in rows.items())
        + f". On validation the lowest model row is {best_label} ({best.text}"
        + (
            f", against OT alone's {alone_validation.text}: {verdict(best, alone_validation)} it)"
            if best_label != "OT alone"
            else ")"
        )
        + f". On every 24th window (the second table) AutoTheta scores {floor['AutoTheta'].text} test MSE and AutoETS "
        f"{floor['AutoETS'].text}"
        + (", AutoETS's figures being repeat-last's there" if etss_is_last else f" (repeat-last {last.text})")
        + f"; OT alone scores {alone_there.text} there, "
        f"{grouped({label: verdict(alone_there, cell) for label, cell in floor.items()})}, and on validation "
        f"{alone_there_validation.text}, "
        f"{verdict(alone_there_validation, theta_validation)} AutoTheta's {theta_validation.text}."
    )


PROBABILISTIC = "etth1_probabilistic.md"
QUANTILES = "free-running detach, Quantiles distribution"


def etth1_probabilistic(here: Path) -> str:
    """The probabilistic table: the CRPS beside a point forecast's, the calibration on validation and the coverage on
    test, the median against the point model, and the floor on every 24th window. The file lists its seeds' scores
    for the MSE and MAE columns only, so the rule weighs those alone."""
    name = PROBABILISTIC
    found = nth_table(name, 0)
    coverage_column = next(column for column in found.header if column.endswith("coverage"))

    def printed(row: str, column: str) -> str:
        cells = row_where(name, found, lambda c: c[0].startswith(row), f"starting with {row!r}")
        return cells[column_index(name, found, column)]

    median, point = score(name, QUANTILES, "test MSE"), score("etth1_regimes.md", "free running detach", "test MSE")
    there = score(name, QUANTILES, "test MSE", 1)
    floor = {label: score(name, label, "test MSE", 1) for label in FLOOR_ROWS}
    linear = score(name, "least-squares linear map", "test MSE", 1)
    return (
        f"**What it says.** The forecast distribution's CRPS is {printed(QUANTILES, 'CRPS')}, the least-squares "
        f"map's {printed('least-squares linear map', 'CRPS')} (a point forecast's CRPS is its absolute error; the "
        "file lists no seed's CRPS, so the rule gives no word on it). Validation widened the paths by an interval "
        f"scale of {printed(QUANTILES, 'interval scale')} so that the central interval held its share of the "
        f"validation targets; on the test months its {coverage_column} is {printed(QUANTILES, coverage_column)}. "
        f"The median forecast's test MSE, {median.text}, is {verdict(median, point)} the point model's {point.text} "
        f"(`etth1_regimes.md`). On every 24th window (the second table) the median scores {there.text} test MSE, "
        f"{grouped({f'{label} ({cell.text})': verdict(there, cell) for label, cell in floor.items()})}, and "
        f"{verdict(there, linear)} the least-squares map ({linear.text})."
    )


BLOCKS: dict[str, Callable[[Path], str]] = {
    "defaults-on-real-data": defaults_on_real_data,
    "bench": bench,
    "defaults-depth": defaults_depth,
    "free-running-pays": free_running_pays,
    "make-train": make_train,
    "accuracy": accuracy,
    "your-data": your_data,
    "depth-regime": depth_regime,
    "depth-few-steps": depth_few_steps,
    "depth-middle": depth_middle,
    "depth-many-steps": depth_many_steps,
    "depth-regimes": depth_regimes,
    "depth-floor": depth_floor,
    "depth-use": depth_use,
    "depth-search": depth_search,
    "naive-memory": naive_memory,
    "gpu-cuda-graph": gpu_cuda_graph,
    "depth-with-the-path": depth_with_the_path,
    "path-changes-the-answer": path_changes_the_answer,
    "baseline-path": baseline_path,
    "ensemble": ensemble,
    "etth1-regimes": etth1_regimes,
    "etth1-floor": etth1_floor,
    "m4-hourly": m4_hourly,
    "m4-weekly": m4_weekly,
    "intermittent": intermittent,
    "intermittent-floor": intermittent_floor,
    "etth1-covariates": etth1_covariates,
    "etth1-probabilistic": etth1_probabilistic,
}


def link(here: Path, target: str) -> str:
    """A link from a page in the folder ``here`` to ``target``, a path from the repository's root."""
    return os.path.relpath(REPOSITORY / target, here).replace(os.sep, "/")


EVIDENCE_LINK = re.compile(r"\[([^\]]+)\]\(([^)#\s]+)(#[^)\s]*)?\)")  # [label](path#anchor)


def evidence_named(link: re.Match, here: Path) -> str:
    """A link of a page outside experiments/ (the README, docs/) to a file inside it, as the label and the file's path
    in code: deleting experiments/ leaves no link dangling on the template's pages; other links as they are."""
    target = (here / link[2]).resolve()
    if not target.is_relative_to(REPOSITORY / "experiments"):
        return link[0]
    return f"{link[1]} (`{target.relative_to(REPOSITORY).as_posix()}`)"


def wrapped(text: str) -> str:
    """A block's text as the hand-written pages are: each paragraph wrapped at 116 columns (a list item with its
    continuation lines indented), a table as it is."""
    paragraphs = []
    for paragraph in text.split("\n\n"):
        if not paragraph.startswith("|"):
            indent = "  " if paragraph.startswith("- ") else ""
            paragraph = textwrap.fill(
                paragraph, 116, subsequent_indent=indent, break_long_words=False, break_on_hyphens=False
            )
        paragraphs.append(paragraph)
    return "\n\n".join(paragraphs)


def generated(page: str, here: Path = REPOSITORY) -> str:
    """The page (in the folder ``here``, for its links) with every generated block rewritten from the results
    files."""

    def one(match: re.Match) -> str:
        if match[2] not in BLOCKS:
            raise InputError(f"no generated block named {match[2]!r}; the names are {', '.join(BLOCKS)}")
        text = BLOCKS[match[2]](here)
        if not here.resolve().is_relative_to(REPOSITORY / "experiments"):
            text = EVIDENCE_LINK.sub(lambda link: evidence_named(link, here), text)
        return f"{match[1]}{wrapped(text)}\n{match[4]}"

    return BLOCK.sub(one, page)


def refreshed(page: Path, text: str | None = None) -> str:
    """The page (its ``text``, by default the file's) with its generated blocks and its copies of results tables as
    the results files give them."""
    text = page.read_text() if text is None else text
    for block in TABLE_BLOCK.finditer(text):  # a copy's file: whole, as a block's (``results_text``)
        results_text(str(Path(block[2]).relative_to("experiments/results")))
    return generated(with_tables(text, REPOSITORY), page.resolve().parent)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.report", description=__doc__.split("\n")[0])
    parser.add_argument("pages", type=Path, nargs="*", help="pages to rewrite (default: the README, docs, results)")
    parser.add_argument("--overwrite", action="store_true", help="rewrite a page whose blocks differ")
    args = parser.parse_args(argv)
    with reported_in_one_line():
        changed = {}  # every page is refreshed and checked before any is written: a refusal leaves all as they were
        for page in args.pages or pages():
            if not page.is_file():
                raise InputError(f"{page}: page not found")
            text = page.read_text()
            new = refreshed(page)
            if new == text:
                continue
            inputs = [REPOSITORY / block[2] for block in TABLE_BLOCK.finditer(text)]
            check_output(page, inputs=inputs, overwrite=args.overwrite)  # only the blocks change
            changed[page] = new
        for page, new in changed.items():
            write_atomically(page, lambda temporary, n=new: temporary.write_text(n))
            print(f"Rewrote the generated blocks of {page}")


if __name__ == "__main__":
    main()
