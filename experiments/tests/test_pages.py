"""The pages that report the studies hold to their results files: every link into experiments/ leads to a file, and
every figure of the hand-written results prose sits in the row its sentence names."""

import itertools
import re
from pathlib import Path

import pytest

from experiments import report
from tests.helpers import REPOSITORY

RESULTS_PAGE = REPOSITORY / "experiments" / "README.md"
PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md")), RESULTS_PAGE]


def test_every_relative_link_of_the_pages_leads_to_a_file():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


# Figures the prose may name that are goals, not results.
TARGETS = {"9.5": "M4 Hourly's sMAPE target", "1.5": "detach's step-time target, as a multiple of teacher forcing"}
DECIMAL = re.compile(r"(?<![\w.,])(\d+\.\d+)(?![\w.]*\d)")
PROSE_WITH_RESULTS = [RESULTS_PAGE, REPOSITORY / "docs" / "benchmark.md"]


def cited_results(page: Path) -> list[Path]:
    """The files under experiments/results/ that a page links to (a folder: every file in it) or embeds as a table
    block."""
    text, root = page.read_text(), (REPOSITORY / "experiments" / "results").resolve()
    targets = [page.parent / t for t in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", text) if "://" not in t]
    targets += [REPOSITORY / name for name in re.findall(r"<!-- (experiments/results/[\w./-]+) -->", text)]
    files = []
    for target in (t.resolve() for t in targets):
        if target.is_relative_to(root):
            files += sorted(f for f in target.rglob("*") if f.is_file()) if target.is_dir() else [target]
    return files


WORD = re.compile(r"[a-z0-9]+")
SPLIT_WORDS = ("validation", "test")
SENTENCE_END = re.compile(r"(?<=[.;:!?])\s+(?=[A-Z(*])|\n\s*\n")


def table_cells(files: list[Path]) -> list[tuple[str, str, str]]:
    """(row label, column header, cell) of every Markdown table in the files."""
    cells = []
    for path in files:
        header = None
        for line in path.read_text().splitlines():
            if not line.startswith("|"):
                header = None
            elif not line.startswith("|---"):
                parts = [part.strip() for part in line.strip().strip("|").split("|")]
                if header is None:
                    header = parts
                else:
                    cells += [(parts[0], column, cell) for column, cell in zip(header[1:], parts[1:])]
    return cells


def words(text: str) -> list[str]:
    return WORD.findall(re.sub(r"\((measured[^)]*|this template|published)\)", "", text.lower()).replace("-", " "))


def names_the_cell(sentence: set[str], split: str | None, row: str, column: str) -> bool:
    """A sentence places a figure in a cell when it names the cell's row (the first two words of its label, before
    any comma) or, where the table puts the model in the column (e.g. 'repeat-last MAE'), the column; and when the
    column belongs to a split, that split is the one the prose last named before the figure (``split``)."""
    named = any(set(words(label.split(",")[0])[:2]) <= sentence for label in (row, column) if words(label))
    column_split = next((word for word in SPLIT_WORDS if words(column)[:1] == [word]), None)
    return named and (column_split is None or column_split == split)


def misplaced_figures(text: str, cited: list[Path]) -> list[str]:
    """Figures of the prose that no cited file holds; and figures of a results table quoted in a sentence that does
    not name their row, or for a split's column (validation, test) under another split: a figure moved to another
    row fails here."""
    other_text = "\n".join(
        "\n".join(line for line in path.read_text().splitlines() if not line.startswith("|")) for path in cited
    )
    outside_tables = figures_of_text(other_text)
    cells = [(row, column, figures_of_text(cell)) for row, column, cell in table_cells(cited)]
    found = []
    for paragraph in re.split(r"\n\s*\n", report.prose(text)):
        split = None  # the split the paragraph last named
        for sentence in SENTENCE_END.split(paragraph):
            named = set(words(sentence))
            previous = 0
            for match in DECIMAL.finditer(sentence):
                mentioned = [w for w in words(sentence[previous : match.start()]) if w in SPLIT_WORDS]
                split, previous, figure = (mentioned[-1] if mentioned else split), match.end(), match[1]
                if split is None:  # none named yet: the sentence may name it after the figure
                    split = next((w for w in words(sentence[previous:]) if w in SPLIT_WORDS), None)
                if figure in TARGETS or figure in outside_tables:
                    continue
                places = [(row, column) for row, column, figures in cells if figure in figures]
                if not places:
                    found.append(f"{figure} (in no results file the page cites)")
                elif not any(names_the_cell(named, split, row, column) for row, column in places):
                    rows = sorted({row for row, _ in places})[:3]
                    found.append(f"{figure} (not in a row its sentence names, under {split}: {rows})")
            mentioned = [w for w in words(sentence[previous:]) if w in SPLIT_WORDS]
            split = mentioned[-1] if mentioned else split
    return found


def figures_of_text(text: str) -> set[str]:
    figures = set()
    for number in re.findall(r"\d+(?:,\d{3})*\.\d+", text):
        value = float(number.replace(",", ""))
        figures.update(f"{value:.{digits}f}" for digits in range(1, 7))
    return figures


def test_a_figure_moved_to_another_row_of_its_table_fails_the_prose_check(tmp_path):
    table = tmp_path / "table.md"
    table.write_text("| model | test MSE |\n|---|---:|\n| teacher forcing | 0.377 |\n| free running detach | 0.381 |\n")
    assert misplaced_figures("Free-running detach scores 0.381 on test.", [table]) == []
    assert misplaced_figures("Teacher forcing scores 0.381 on test.", [table]) != []  # the figure of another row
    assert misplaced_figures("Free-running detach scores 0.381 on validation.", [table]) != []  # another split


def test_every_figure_in_the_results_prose_is_in_its_row_of_a_results_file_the_page_cites():
    """The README's figures are generated (experiments/tests/test_report.py); these pages' prose is hand-written."""
    pages = [(page.name, page.read_text(), cited_results(page)) for page in PROSE_WITH_RESULTS]
    missing = []
    for name, text, cited in pages:
        assert cited, f"{name} cites no file under experiments/results/"
        missing += [f"{name}: {problem}" for problem in misplaced_figures(text, cited)]
    assert not missing, f"figures of the prose not in the row its sentence names: {missing}"


def prose_figures(text: str) -> list[re.Match]:
    """The figures of a page that its prose holds, as matches in the whole page: each figure is swapped for its
    index, and the indices that ``report.prose`` keeps are the prose's."""
    matches, index = list(DECIMAL.finditer(text)), itertools.count()
    marked = DECIMAL.sub(lambda _: f"⟦{next(index)}⟧", text)
    kept = {int(i) for i in re.findall(r"⟦(\d+)⟧", report.prose(marked))}
    return [match for i, match in enumerate(matches) if i in kept]


# The results page's prose quoted 217 figures when this was written: a check that sees far fewer has gone blind
# (a marker quoted in the prose once hid all but 2 of them).
SEEN_AT_LEAST = {RESULTS_PAGE: 200}


@pytest.mark.parametrize("page", PROSE_WITH_RESULTS, ids=lambda page: page.name)
def test_a_wrong_figure_in_the_real_page_s_prose_fails_the_check(page):
    text, cited = page.read_text(), cited_results(page)
    seen = prose_figures(text)
    assert len(DECIMAL.findall(report.prose(text))) == len(seen)
    assert len(seen) >= SEEN_AT_LEAST.get(page, 1), f"{page.name}: the check sees {len(seen)} figures"
    known = figures_of_text("\n".join(path.read_text() for path in [*cited, page]))
    for match in seen[::20]:  # one figure in twenty, from the first paragraph to the last
        wrong, factor = match[1], 1.37
        while wrong in known or wrong in TARGETS:
            wrong, factor = f"{float(match[1]) * factor:.{len(match[1].split('.')[1])}f}", factor + 0.11
        changed = text[: match.start()] + wrong + text[match.end() :]
        assert f"{wrong} (in no results file the page cites)" in misplaced_figures(changed, cited), (
            f"{page.name}: {match[1]} changed to {wrong} at character {match.start()} went unflagged"
        )


def test_every_paragraph_of_the_pages_prose_closes_its_code_spans():
    """A backtick left open would pair with the next one of its paragraph and hide the prose between from the
    checks."""
    for page in PAGES:
        for paragraph in re.split(r"\n\s*\n", report.prose(page.read_text())):
            assert "`" not in paragraph, f"{page.name}: a backtick left open in {paragraph[:200]!r}"


def test_a_marker_quoted_in_the_prose_opens_no_block():
    page = "Blocks look like `<!-- generated: NAME -->` here; 0.5 `a` b.\n\n"
    page += "<!-- generated: x -->\n9.9\n<!-- end generated -->\n"
    assert report.prose(page) == "Blocks look like  here; 0.5  b.\n\n\n"


OPENS = {r"<!-- generated: [\w-]+ -->": "<!-- end generated -->", r"<!-- experiments/results/\S+ -->": "<!-- end -->"}
OPENS |= {r"<!-- history:.*-->": "<!-- end history -->", r"```.*": "```"}


def test_the_checks_read_every_plain_line_of_the_pages_prose():
    """Read line by line, apart from the regular expressions: every line outside the blocks and code with no code
    span in it is prose that the figure checks (here and in test_report.py) read."""
    for page in PAGES:
        text, closing = page.read_text(), None
        kept = set(report.prose(text).splitlines())
        for number, line in enumerate(text.splitlines(), 1):
            if closing is not None:
                closing = None if line == closing else closing
            elif opening := next((end for start, end in OPENS.items() if re.fullmatch(start, line)), None):
                closing = opening
            elif line.strip() and "`" not in line:
                assert line in kept, f"{page.name}:{number} is prose the checks do not read: {line!r}"
