"""Checks that a figure written by hand on a results page is the one its sentence names, and that every figure a
results file derives (a mean ± sd, a verdict, a count, a decision) follows from the figures it is derived from.

``experiments/tests/test_figure_checks.py`` runs them over the real pages and files, and plants realistic errors
(a neighbouring seed, the other split's value, a cell that contradicts its verdict) that each must flag.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from experiments import report

SPLIT_WORDS = ("validation", "test")
WORD = re.compile(r"[a-z0-9]+")
DECIMAL = re.compile(r"(?<![\w.,])(\d+\.\d+)(?![\w.]*\d)")
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(*])|\n\s*\n")
PER_SEED = re.compile(r"^- (.+?): (seed \S+: .+)$")
SEED_VALUE = re.compile(r"seed \S+: (-?[\d,]*\.?\d+)")
# A sentence that names a seed by its number may quote that seed's value ("seed 0 gave 263.181", "seed-0 run").
NAMED_SEED = re.compile(r"\bseeds? \d|\bseed-\d", re.IGNORECASE)
# Figures the prose may name that are goals, not results.
TARGETS = {"9.5": "M4 Hourly's sMAPE target", "1.5": "detach's step-time target, as a multiple of teacher forcing"}


def words(text: str) -> list[str]:
    return WORD.findall(re.sub(r"\((measured[^)]*|this template|published)\)", "", text.lower()).replace("-", " "))


def column_split(column: str) -> str | None:
    """The split a column is of when its header starts with it (``test MSE``), or None (``model MAE``)."""
    first = words(column)[:1]
    return first[0] if first and first[0] in SPLIT_WORDS else None


def split_of(*texts: str) -> str | None:
    """The split a header, a split column's value or a per-seed key names (its first split word), or None."""
    for text in texts:
        found = [word for word in words(text) if word in SPLIT_WORDS]
        if found:
            return found[0]
    return None


@dataclass(frozen=True)
class Cell:
    """A figure's place in a results file: a table cell, or one seed's value on the per-seed line under a table."""

    path: Path
    row: str
    column: str
    split: str | None
    text: str
    seed: bool = False
    note: bool = False


def cells_of(path: Path) -> list[Cell]:
    """``cells_of_text`` of a file as it is now."""
    return cells_of_text(path, path.read_text())


@cache  # a page's check reads the same hundred files for each figure planted in it
def cells_of_text(path: Path, text: str) -> list[Cell]:
    """Every table cell, per-seed value and note figure of a results file (a setting of a YAML file is a row of its
    own); a cell's split is its column's (``test MSE``) or its row's (a ``split`` column)."""
    if path.suffix != ".md":
        settings = re.findall(r"^\s*(\w+): (-?\d+\.\d+(?:e-?\d+)?)$", text, re.MULTILINE)
        return [Cell(path, key.replace("_", " "), "", None, f"{float(value):f}") for key, value in settings]
    found, header = notes_of(path, text), None
    for line in text.splitlines():
        if line.startswith("|"):
            if line.startswith("|---"):
                continue
            parts = [part.strip() for part in line.strip().strip("|").split("|")]
            if header is None:
                header = parts
                continue
            row_split = split_of(parts[header.index("split")]) if "split" in header else None
            for column, text in zip(header[1:], parts[1:], strict=False):
                found.append(Cell(path, parts[0], column, column_split(column) or row_split, text))
            continue
        header = None
        if seeds := PER_SEED.match(line):
            key, values = seeds[1], seeds[2]
            column = key.rpartition(", ")[2]
            for value in SEED_VALUE.findall(values):
                found.append(Cell(path, key, column, split_of(column, key), value, seed=True))
    return found


def figures_of_text(text: str) -> set[str]:
    """The decimals of a text as they may be quoted: each at one to six decimals."""
    figures = set()
    for number in re.findall(r"\d+(?:,\d{3})*\.\d+", text):
        value = float(number.replace(",", ""))
        figures.update(f"{value:.{digits}f}" for digits in range(1, 7))
    return figures


def names_the_cell(named: set[str], split: str | None, cell: Cell) -> bool:
    """The prose places a figure in a cell when it names the cell's row (the first two words of its label, before
    any comma) or, where the table puts the model in the column (e.g. 'repeat-last MAE'), the column; and when the
    cell belongs to a split (by its column or its row), that split is the one the prose gives the figure."""
    labels = [label for label in (cell.row, cell.column) if words(label)]
    return any(set(words(label.split(",")[0])[:2]) <= named for label in labels) and cell.split in (None, split)


def quoted_spread(sentence: str, end: int) -> str | None:
    """The ``± sd`` written right after a figure, or None."""
    found = re.match(r" ± (\d+\.\d+)", sentence[end:])
    return found[1] if found else None


@cache
def figure_index(files: tuple[tuple[Path, str], ...]) -> dict[str, list[Cell]]:
    """The cells that hold each way a figure may be quoted: a mean ± sd as its cell prints it (tables only), a bare
    figure at any rounding."""
    index: dict[str, list[Cell]] = {}
    for path, text in files:
        for cell in cells_of_text(path, text):
            quoted = set() if cell.seed or cell.note else set(re.findall(r"^\d+\.\d+ ± \d+\.\d+", cell.text))
            for figure in quoted | figures_of_text(cell.text):
                index.setdefault(figure, []).append(cell)
    return index


def split_of_figure(sentence: str, match: re.Match, end: int, last: str | None) -> str | None:
    """The split the prose gives a figure: of a pair ``A / B`` under ``(validation / test …)``, its side; else the
    split named in the three words after it, in its clause (``1.785 ± 0.017 validation MAE``, ``… on test``); else
    the last one named before it (``last``, in the sentence or the paragraph); else the first one named after it."""
    pair = re.search(r"(validation|test) / (validation|test)", sentence)
    if pair and re.match(r" / \d", sentence[end:]):
        return pair[1]
    if pair and re.search(r"\d / $", sentence[: match.start()]):
        return pair[2]
    clause = re.split(r"[;,()]", sentence[end:])[0]
    after = [w for w in words(clause)[:3] if w in SPLIT_WORDS]
    if after:
        return after[0]
    before = [w for w in words(sentence[: match.start()]) if w in SPLIT_WORDS]
    if before or last:
        return before[-1] if before else last
    return next((w for w in words(sentence[end:]) if w in SPLIT_WORDS), None)


def sections(text: str) -> list[tuple[str, str]]:
    """A page's prose as (heading, paragraph) pairs: a sentence leans on its section's heading and its paragraph's
    first sentence to name what it speaks of ("seeds 0 and 1 report …" under "M4 Weekly again …")."""
    found, heading = [], ""
    for paragraph in re.split(r"\n\s*\n", report.prose(text)):
        if paragraph.lstrip().startswith("#"):
            heading = paragraph.strip().splitlines()[0]
        found.append((heading, paragraph))
    return found


def misplaced_figures(text: str, cited: list[Path]) -> list[str]:
    """Figures of a page's prose that are not in a cell of a row their sentence (with its paragraph's first sentence
    and its section's heading) names, under the split the prose gives them: a figure changed to a neighbouring
    seed's, to the other split's or to another row's fails here. A mean written with its ``± sd`` must be a cell as
    printed; a seed's value counts only where the sentence names a seed by its number; a note's only where the
    sentence shares its words."""
    index = figure_index(tuple((path, path.read_text()) for path in cited))
    found = []
    for heading, paragraph in sections(text):
        sentences, split = SENTENCE_END.split(paragraph), None  # the split the paragraph last named
        lead = f"{heading} {sentences[0]}"
        for sentence in sentences:
            named, says_seed = set(words(f"{lead} {sentence}")), NAMED_SEED.search(sentence) is not None
            for match in DECIMAL.finditer(sentence):
                if sentence[: match.start()].endswith("± ") or match[1] in TARGETS:
                    continue  # a spread is checked with its mean
                figure, spread = match[1], quoted_spread(sentence, match.end())
                end = match.end() + (len(f" ± {spread}") if spread else 0)
                split = split_of_figure(sentence, match, end, split)
                quoted = figure + (f" ± {spread}" if spread else "")
                places = [c for c in index.get(quoted, []) if says_seed or not c.seed]
                if not places:
                    found.append(f"{quoted} (in no results file the page cites)")
                elif not any(
                    names_the_note(sentence, split, c) if c.note else names_the_cell(named, split, c) for c in places
                ):
                    rows = sorted({c.row[:80] for c in places})[:3]
                    found.append(f"{quoted} (not in a row its sentence names, under {split}: {rows})")
            mentioned = [w for w in words(sentence) if w in SPLIT_WORDS]
            split = mentioned[-1] if mentioned else split
    return found


def notes_of(path: Path, text: str) -> list[Cell]:
    """The figures of a results file's notes (its lines outside tables, code included), each placed in its sentence
    and under its section's heading, which ``names_the_note`` compares with the page's sentence."""
    found, heading = [], ""
    lines = [line for line in text.splitlines() if not line.startswith(("|", "- "))]
    for paragraph in re.split(r"\n\s*\n", "\n".join(lines)):
        if paragraph.startswith("#"):
            heading = paragraph.splitlines()[0]
        for sentence in SENTENCE_END.split(paragraph):
            for figure in re.findall(r"\d+(?:,\d{3})*\.\d+", sentence):
                found.append(Cell(path, f"{heading} {sentence}", "", None, figure, note=True))
    return found


def content_words(text: str) -> set[str]:
    return {word for word in words(text) if len(word) >= 4 and not word.isdigit()}


def names_the_note(sentence: str, split: str | None, note: Cell) -> bool:
    """A page's sentence quotes a note's figure when the two share three words of four letters or more (a note has
    no row to name) and the note speaks of the split the prose gives the figure."""
    shared = len(content_words(sentence) & content_words(note.row)) >= 3
    return shared and (split is None or split in words(note.row))


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


# Counts and integer percentages written by hand.

COUNT = re.compile(r"\b\d+ of (?:the )?\d+\b|(?<![\d.,])\d+%")


def hand_written_counts(text: str) -> list[str]:
    """The counts ("5 of 7") and integer percentages ("24%") of a page's prose: a result's count is generated, so
    one written by hand is flagged unless a page's list of settings and goals names it."""
    return COUNT.findall(report.prose(text))
