"""The pages that report the studies hold to their results files: every link into experiments/ leads to a file, and
every figure of the hand-written results prose sits in the row its sentence names."""

import re
from pathlib import Path

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


def prose(text: str) -> str:
    """A page without its copied results tables, its test-read history (figures of the earlier commits it names),
    code blocks and inline code (settings, not figures)."""
    text = re.sub(r"<!-- experiments/results/.*?<!-- end -->", "", text, flags=re.DOTALL)
    text = re.sub(r"<!-- generated: .*?<!-- end generated -->", "", text, flags=re.DOTALL)  # experiments.report's
    text = re.sub(r"<!-- history:.*?<!-- end history -->", "", text, flags=re.DOTALL)  # earlier commits' figures
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.sub(r"`[^`]*`", "", text)


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
    for paragraph in re.split(r"\n\s*\n", prose(text)):
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
