"""The checks that hold the pages to the results files, besides regenerating them (``experiments/tests/test_report.py``)
and the files' seals (``experiments/tests/test_results.py``): no result figure in a page's hand-written prose, each
test-read row's figures in the files it cites, and every figure a results file derives (a mean ± sd, a verdict cell,
a decision) following from the figures it is derived from.

The pages' rule is one plain one, ``result_figures``: a decimal number, a percentage, a number with a thousands
separator, a duration ("82 s", "4.2 min") or a count ("5 of 7") outside the generated blocks, the copies of results
tables and code is a result written by hand, and fails, unless ``NOT_RESULTS`` names the phrase it sits in (a version,
a licence, a target). A setting is written as code (``max_steps: 5000``, ``--data.stride=16``). Prose explains and
points at the tables and blocks; it does not quote them.

``experiments/tests/test_figure_checks.py`` runs the checks over the real pages and files, and plants realistic
errors, each of which some check must flag.
"""

from __future__ import annotations

import re
import statistics
import subprocess
from pathlib import Path

from experiments import report

# The rule: what a result looks like in prose.
RESULT_FIGURE = re.compile(
    r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d])"  # a thousands separator: 4,201.578, 10,000
    r"|(?<![\w.])\d+(?:\.\d+)? ?(?:ms|s|min|minutes?|seconds?|CPU-minutes|CPU-hours)\b"  # a duration: 82 s, 4.2 min
    r"|(?<![\w.])[+-]?\d+(?:\.\d+)?%"  # a percentage: 24%, -2.7%
    r"|(?<![\w.])\d+\.\d+(?![\w.]*\d)"  # a decimal: 0.381, not a version's 2.13.0 or a commit
    r"|\b\d+ of (?:the )?\d+\b"  # a count: 5 of 7, 3 of the 7
)
# Numbers of the pages' prose that are not results, by the phrase they sit in, and why.
NOT_RESULTS = {
    "Python ≥ 3.10": "the Python version the template needs",
    "PyTorch 2.13": "the torch version the Makefile installs",
    "CC BY-ND 4.0": "ETTh1's licence",
    "A target of 1.5× teacher forcing": "a goal the benchmark was set, not what it measured",
}


def result_figures(text: str) -> list[str]:
    """The result figures of a text by the rule, apart from the phrases of ``NOT_RESULTS``."""
    text = re.sub(r"\s+", " ", text)  # a figure or a phrase may be wrapped over two lines
    for phrase in NOT_RESULTS:
        text = text.replace(phrase, "")
    return [match[0] for match in RESULT_FIGURE.finditer(text)]


def hand_written_figures(page: str) -> list[str]:
    """The result figures of a page's hand-written prose: outside its generated blocks, table copies and code."""
    return result_figures(report.prose(page))


PER_SEED = re.compile(r"^- (.+?): (seed \S+: .+)$")
SEED_VALUE = re.compile(r"seed \S+: (-?[\d,]*\.?\d+)")


# The test-read history: a table of experiments/results/test_reads.md, one row a read, each naming in its last column
# the files its figures are in: a path in this tree (``experiments/results/m4_hourly.md``) or a file as a commit held
# it (``45c170f:results/m4_hourly.md``, read with git).

TEST_READS = "test_reads.md"
CITED = re.compile(r"`(?:([0-9a-f]{7,40}):)?([\w./-]+)`")


def cited_text(commit: str, path: str, root: Path) -> str | None:
    """A cited file's text: in this tree (no ``commit``), or as ``commit`` held it (None where git cannot tell: a copy
    without .git, a shallow clone, a commit not fetched)."""
    if not commit:
        return (root / path).read_text() if (root / path).is_file() else ""
    try:
        shown = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=root, capture_output=True, text=True)
    except FileNotFoundError:
        return None
    return shown.stdout if shown.returncode == 0 else None


def holds(text: str, figure: str) -> bool:
    """Whether ``text`` holds ``figure`` as a figure of its own, thousands separators aside: 0.03 is not in 0.030, and
    a duration or a percentage keeps its unit (6 s is not the 6 of 6 min)."""
    plain = re.sub(r"(?<=\d),(?=\d{3})", "", text)
    figure = re.sub(r"(?<=\d),(?=\d{3})", "", figure.lstrip("+-"))
    number, unit = re.match(r"([\d.]+(?: of (?:the )?\d+)?) ?(.*)", figure).groups()
    if not unit:
        end = r"(?!\d)"
    elif unit == "%":
        end = "%"
    else:  # a duration's unit
        end = rf" ?{re.escape(unit)}\b"
    return re.search(r"(?<![\d.])" + re.escape(number) + end, plain) is not None


def history_rows(text: str) -> list[list[str]]:
    """The rows of the test-read table: commit, data, what was read, what changed after, the files cited."""
    lines = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("|---")]
    return [[cell.strip() for cell in line.strip().strip("|").split("|")] for line in lines[1:]]


def history_mismatches(path: Path, root: Path = report.REPOSITORY) -> tuple[list[str], int]:
    """Each figure of a test-read row (outside code) that none of the files the row cites holds, and how many rows
    could not be checked (a cited commit git cannot show here). A row that quotes a figure cites a file."""
    found, unchecked = [], 0
    for cells in history_rows(path.read_text()):
        figures = result_figures(report.INLINE_CODE.sub("", " ".join(cells[2:4])))
        texts = [cited_text(commit, name, root) for commit, name in CITED.findall(cells[4])]
        if figures and not texts:
            found.append(f"{cells[0]} ({cells[1]}): {', '.join(figures)} and no file cited")
        elif None in texts:
            unchecked += 1
        else:
            missing = [figure for figure in figures if not any(holds(text, figure) for text in texts)]
            if missing:
                found.append(f"{cells[0]} ({cells[1]}): {', '.join(missing)} in none of {cells[4]}")
    return found, unchecked


# A mean ± sd against its seeds.


def decimals(text: str) -> int:
    return len(text.partition(".")[2])


def per_seed_lines(path: Path) -> list[tuple[str, str | None, list[str], int]]:
    """Each per-seed line of a results file: its key, the cell it gives the seeds of (in the nearest table above it
    that has the key's row and column, as ``report.per_seed`` reads them; None if none has), its values as printed
    and how many tables are above it."""
    tables, lines = tables_and_lines(path)
    found = []
    for line, above in lines:
        if seeds := PER_SEED.match(line):
            key = seeds[1]
            cell = next((c for rows in reversed(tables[:above]) if (c := cell_of_key(rows, key)) is not None), None)
            found.append((key, cell, SEED_VALUE.findall(seeds[2]), above))
    return found


def cell_of_key(rows: list[list[str]], key: str) -> str | None:
    """The cell a per-seed line's key names in a table: its row's label starts the key, its column ends it, and each
    part between is one of the row's cells (a split, a window subset) or ``NAME = CELL`` (``D = 2``, the depth)."""
    header, body = rows[0], rows[1:]
    for row in body:
        if not key.startswith(row[0] + ", "):
            continue
        middle = key[len(row[0]) + 2 :]
        for column, text in zip(header[1:], row[1:], strict=False):
            between = middle.removesuffix(column).strip(" ,")
            parts = [part.strip() for part in between.split(",") if part.strip()]
            if middle.endswith(column) and all(part.rpartition(" = ")[2] in row[1:] for part in parts):
                return text
    return None


def spread_mismatches(path: Path) -> list[str]:
    """Each mean ± sd of a results file that its per-seed line does not give: the mean and the sample standard
    deviation of the seeds as printed, within what rounding the seeds and the cell allows."""
    found = []
    for key, text, printed, _ in per_seed_lines(path):
        if text is None or " ± " not in text or len(printed) < 2:
            continue
        mean_text, _, sd_text = text.partition(" (")[0].partition(" ± ")
        values = [float(v.replace(",", "")) for v in printed]
        seed_unit = 10.0 ** -min(decimals(v) for v in printed)
        mean, sd = statistics.mean(values), statistics.stdev(values)
        if abs(mean - number(mean_text)) > seed_unit / 2 + 10.0 ** -decimals(mean_text) / 2 + 1e-9:
            found.append(f"{path.name}: {key}: the seeds' mean is {mean:.4f}, the cell says {text}")
        elif abs(sd - number(sd_text)) > seed_unit + 10.0 ** -decimals(sd_text) / 2 + 1e-9:
            found.append(f"{path.name}: {key}: the seeds' sd is {sd:.4f}, the cell says {text}")
    return found


def number(text: str) -> float:
    return float(re.match(r"-?[\d,]*\.?\d+", text.strip())[0].replace(",", ""))


# A verdict cell ("yes (-6.2%)") against the cells it compares, and the ensemble rule's decision against its table.

VERDICT_CELL = re.compile(r"^(yes|no) \(([+-]\d+\.\d)%\)")


def ratio_range(value: str, against: list[str]) -> tuple[float, float]:
    """The relative difference ``value / min(against) - 1`` that printed figures allow: each may be off by half its
    last printed digit."""

    def bounds(text: str) -> tuple[float, float]:
        half = 10.0 ** -decimals(number_text(text)) / 2
        return number(text) - half, number(text) + half

    low, high = bounds(value)
    against_low = min(bounds(text)[0] for text in against)
    against_high = min(bounds(text)[1] for text in against)
    return low / against_high - 1, high / against_low - 1


def number_text(text: str) -> str:
    return re.match(r"-?[\d,]*\.?\d+", text.strip())[0]


def seed_values(path: Path, key: str, table: int) -> list[str] | None:
    """The printed seeds of the first per-seed line named ``key`` under the ``table``-th table (from 0), or None."""
    lines = per_seed_lines(path)
    return next((values for name, _, values, above in lines if name == key and above > table), None)


def verdict_mismatches(path: Path) -> list[str]:
    """Each "yes/no (±x%)" cell of a results file that its row's figures do not give: the worst (or best) seed, or the
    ensemble, against the forecasts the column names, to the printed precision; yes exactly when the margin is below
    zero."""
    found = []
    for index, rows in enumerate(tables_of(path)):
        header = rows[0]
        for row in rows[1:]:
            cells = dict(zip(header, row, strict=False))
            for column, text in cells.items():
                verdict = VERDICT_CELL.match(text)
                compared = verdict and compared_figures(path, index, header, row, column)
                if not compared:
                    continue
                value, against = compared
                low, high = ratio_range(value, against)
                printed = float(verdict[2]) / 100
                if not low - 0.0005 <= printed <= high + 0.0005 or (verdict[1] == "yes") != (printed < 0):
                    found.append(
                        f"{path.name}: {row[0][:40]} {row[1]}, {column!r} says {text}, its figures give "
                        f"{low:+.1%} to {high:+.1%}"
                    )
    return found


def tables_of(path: Path) -> list[list[list[str]]]:
    return tables_and_lines(path)[0]


def tables_and_lines(path: Path) -> tuple[list[list[list[str]]], list[tuple[str, int]]]:
    """A file's Markdown tables (their rows as cells, the ``|---`` rule left out), and each line outside them with how
    many tables are above it."""
    tables, lines, in_table = [], [], False
    for line in path.read_text().splitlines():
        if line.startswith("|"):
            if not in_table:
                tables.append([])
            in_table = True
            if not line.startswith("|---"):
                tables[-1].append([part.strip() for part in line.strip().strip("|").split("|")])
        else:
            in_table = False
            lines.append((line, len(tables)))
    return tables, lines


def compared_figures(
    path: Path, table: int, header: list[str], row: list[str], column: str
) -> tuple[str, list[str]] | None:
    """What a verdict column compares, as printed: (the model's worst seed or the ensemble, the forecasts it is
    against); None for a column this check does not know."""
    cells = dict(zip(header, row, strict=False))
    split, windows = cells.get("split", ""), cells.get("windows")
    key = f"{row[0]}, {split}, {windows}, model MAE" if windows else f"{row[0]}, {split} model MAE"
    seeds = seed_values(path, key, table) or ([number_text(cells["model MAE"])] if "model MAE" in cells else None)
    if seeds is None:
        return None
    worst = max(seeds, key=lambda v: float(v.replace(",", "")))
    simple = [c for c in ("repeat-last MAE", "seasonal naive MAE") if c in cells and not cells[c].startswith("–")]
    if column == "below both (worst seed)":
        return worst, [cells[c] for c in simple]
    if column.startswith("below Auto") and column.endswith("(worst seed)"):
        return worst, [cells[column.removeprefix("below ").removesuffix(" (worst seed)") + " MAE"]]
    if column == "ensemble below the best seed":
        return cells["ensemble MAE"], [min(seeds, key=lambda v: float(v.replace(",", "")))]
    if column == "ensemble below the best simple forecast":
        floor = [c for c in ("AutoETS MAE", "AutoTheta MAE") if c in cells]
        return cells["ensemble MAE"], [cells[c] for c in simple + floor]
    return None


DECISION = re.compile(
    r"below its best seed on (\d+) of the (\d+) datasets \(needs (\d+)\), and (-?[\d.]+)% below the mean seed on "
    r"average \(needs (\d+)%; per dataset: ([^)]*)\)\. Decision: (.*)$",
    re.MULTILINE,
)


def decision_mismatches(path: Path) -> list[str]:
    """The ensemble rule's line against its table: the count of datasets where the ensemble is below its best seed,
    each dataset's gain over the mean seed (1 - ensemble / mean seed, to the printed precision), their average and
    the decision the rule's thresholds give."""
    line = DECISION.search(path.read_text())
    if line is None:
        return []
    table = next(rows for rows in tables_of(path) if "ensemble MAE" in rows[0])
    header, rows = table[0], [row for row in table[1:] if row[1] == "validation"]
    below = sum(row[header.index("ensemble below the best seed")].startswith("yes") for row in rows)
    printed = [float(g.strip().rstrip("%")) / 100 for g in line[6].split(",")]
    # A gain is 1 - ensemble / mean seed: the negative of the ratio's range, with half a printed 0.01% either side.
    allowed = [ratio_range(row[header.index("ensemble MAE")], [row[header.index("model MAE")]]) for row in rows]
    found = []
    if (int(line[1]), int(line[2])) != (below, len(rows)):
        found.append(f"{path.name}: the decision counts {line[1]} of {line[2]}, its table gives {below} of {len(rows)}")
    if len(printed) != len(rows) or any(
        not -high - 0.00005 <= gain <= -low + 0.00005 for gain, (low, high) in zip(printed, allowed, strict=False)
    ):
        found.append(f"{path.name}: the per-dataset gains {line[6]} are not its table's")
    if abs(float(line[4]) / 100 - statistics.mean(printed)) > 0.0001:
        found.append(f"{path.name}: the average gain {line[4]}% is not its datasets' {statistics.mean(printed):.2%}")
    recommend = below >= int(line[3]) and float(line[4]) / 100 >= int(line[5]) / 100
    if line[7].startswith("recommend") != recommend:
        found.append(f"{path.name}: the decision {line[7]!r} is not what the rule gives its table")
    return found
