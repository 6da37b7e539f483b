"""The pages that report the studies hold to their results files: every link into experiments/ leads to a file, and
every figure of the hand-written results prose sits in the row its sentence names."""

import itertools
import re
from pathlib import Path

import pytest

from experiments import figure_checks, report
from experiments.figure_checks import misplaced_figures
from experiments.tests.helpers import PROSE_WITH_RESULTS, RESULTS_PAGE, cited_results
from tests.helpers import REPOSITORY

PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md")), RESULTS_PAGE]


def test_every_relative_link_of_the_pages_leads_to_a_file():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


DECIMAL = figure_checks.DECIMAL
TARGETS = figure_checks.TARGETS


def test_a_figure_moved_to_another_row_of_its_table_fails_the_prose_check(tmp_path):
    table = tmp_path / "table.md"
    table.write_text("| model | test MSE |\n|---|---:|\n| teacher forcing | 0.377 |\n| free running detach | 0.381 |\n")
    assert misplaced_figures("Free-running detach scores 0.381 on test.", [table]) == []
    assert misplaced_figures("Teacher forcing scores 0.381 on test.", [table]) != []  # the figure of another row
    assert misplaced_figures("Free-running detach scores 0.381 on validation.", [table]) != []  # another split


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


def realistic_slips(text: str, cited: list[Path]) -> list[tuple[re.Match, str]]:
    """Prose figures and the realistic wrong value of each: a mean ± sd written with one of its own seeds, a split's
    figure written with the other split's figure of the same row and metric."""
    cells = [cell for path in cited for cell in figure_checks.cells_of(path)]
    seeds = {}
    for path in cited:
        for _, cell, values, _ in figure_checks.per_seed_lines(path) if path.suffix == ".md" else []:
            seeds.setdefault(cell, values)
    by_place = {(c.path, c.row, c.column): c.text for c in cells if not (c.seed or c.note)}
    slips = []
    for match in prose_figures(text):
        figure = match[1]
        spread = figure_checks.quoted_spread(text, match.end())
        if spread is not None:
            own = seeds.get(next((t for t in seeds if t and t.startswith(f"{figure} ± {spread}")), None), [])
            slips += [(match, seed) for seed in own[:1] if seed != figure]
            continue
        for cell in cells:
            other = {"validation": "test", "test": "validation"}.get(figure_checks.column_split(cell.column) or "")
            if cell.seed or cell.note or other is None or cell.text != figure:
                continue
            swapped = by_place.get((cell.path, cell.row, other + cell.column.split(" ", 1)[1]))
            if swapped and figure_checks.DECIMAL.fullmatch(swapped) and swapped != figure:
                slips.append((match, swapped))
                break
    return slips


@pytest.mark.parametrize("page", PROSE_WITH_RESULTS, ids=lambda page: page.name)
def test_a_realistic_wrong_figure_in_the_real_page_s_prose_fails_the_check(page):
    """A neighbouring seed for a mean, the other split's value for a split's figure: every second such slip, from the
    first paragraph to the last, is flagged."""
    text, cited = page.read_text(), cited_results(page)
    seen = prose_figures(text)
    assert len(DECIMAL.findall(report.prose(text))) == len(seen)
    assert len(seen) >= SEEN_AT_LEAST.get(page, 1), f"{page.name}: the check sees {len(seen)} figures"
    slips = realistic_slips(text, cited)
    if page == RESULTS_PAGE:
        assert len(slips) >= 30, f"only {len(slips)} realistic slips found: the planting has gone blind"
    for match, wrong in slips[::2]:
        changed = text[: match.start()] + wrong + text[match.end() :]
        assert misplaced_figures(changed, cited) != [], (
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
