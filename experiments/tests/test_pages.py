"""The pages that report the studies hold to their results files: every link into experiments/ leads to a file, and
the hand-written prose quotes no result; every figure is a table copy or a generated block (test_report.py)."""

import re

import pytest

from experiments import report, results
from experiments.figure_checks import hand_written_figures, result_figures
from tests.helpers import REPOSITORY

PAGES = report.pages()
RESULTS = REPOSITORY / "experiments" / "results"


def test_every_relative_link_of_the_pages_leads_to_a_file():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text()):
            if "://" not in target:
                assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPOSITORY).as_posix())
def test_no_result_figure_is_written_by_hand_in_the_page_s_prose(page):
    """A decimal, a percentage, a thousands separator, a duration or a count outside the generated blocks, the table
    copies and code is a figure written by hand: it belongs in a results file, and on the page in a block."""
    assert hand_written_figures(page.read_text()) == []


@pytest.mark.parametrize(
    ("text", "figures"),
    [
        ("`detach` scores 0.381 on test", ["0.381"]),
        ("the ensemble is 3.26% below the mean seed, the model +2% and -5.7%", ["3.26%", "+2%", "-5.7%"]),
        ("AutoETS's test MAE 4,201.578 on 10,000 series", ["4,201.578", "10,000"]),
        (
            "`make train` took 82 s, AutoETS 4.2 min and\n5 minutes, about 40 CPU-minutes",
            ["82 s", "4.2 min", "5 minutes", "40 CPU-minutes"],
        ),
        ("below on 5 of 7 datasets and 3 of the 7", ["5 of 7", "3 of the 7"]),
        ("seeds 0, 1 and 2; 12 months, 48 hours, 414 series of 700 to 960 hours", []),
        ("torch 2.13.0, commit 7d8ccc6, 1e-3, 2026-12-04, 21:25, 2²⁰ bytes", []),
        ("Python ≥ 3.10 and PyTorch 2.13, CC BY-ND 4.0", []),
    ],
    ids=["decimal", "percentage", "thousands", "duration", "count", "integers", "not-figures", "allowed-phrases"],
)
def test_the_rule_flags_result_figures_and_nothing_else(text, figures):
    assert result_figures(text) == figures


def test_a_figure_in_code_or_in_a_block_is_not_prose_and_one_beside_them_is():
    page = "Set `max_steps: 5000` and `--data.stride=16`.\n\n<!-- generated: bench -->\n0.381\n<!-- end generated -->\n"
    assert hand_written_figures(page) == []
    assert hand_written_figures(page + "\nIt scores 0.381 here.\n") == ["0.381"]


def test_a_note_added_below_a_results_file_s_seal_quotes_no_figure():
    """What a command wrote is above the seal; a note written later by hand goes below it, and the pages' rule holds
    there."""
    for path in sorted(RESULTS.rglob("*.md")):
        text = path.read_text()
        below = text[len(results.above_seal(text)) :].partition("\n")[2]
        assert result_figures(below) == [], f"{path.relative_to(RESULTS)}: figures in a note below its seal"


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
OPENS |= {r"```.*": "```"}


def test_the_checks_read_every_plain_line_of_the_pages_prose():
    """Read line by line, apart from the regular expressions: every line outside the blocks and code with no code
    span in it is prose that the figure rule reads."""
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
