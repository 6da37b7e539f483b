"""The checks of the results files and the test-read history pass on the real files."""

import pytest

from experiments import figure_checks
from experiments.figure_checks import (
    decision_mismatches,
    history_mismatches,
    history_rows,
    result_figures,
    spread_mismatches,
    verdict_mismatches,
)
from experiments.tests.test_results import history
from tests.helpers import REPOSITORY

RESULTS = REPOSITORY / "experiments" / "results"
RESULTS_FILES = sorted(RESULTS.rglob("*.md"))
TEST_READS = RESULTS / figure_checks.TEST_READS

DERIVED = [spread_mismatches, verdict_mismatches, decision_mismatches]


@pytest.mark.parametrize("check", DERIVED, ids=lambda check: check.__name__)
def test_every_derived_figure_of_the_results_files_follows_from_its_figures(check):
    problems = [problem for path in RESULTS_FILES for problem in check(path)]
    assert not problems, problems


def test_the_spread_check_reads_every_per_seed_line():
    """A check that matched no cell would pass any file: every per-seed line gives the seeds of a cell."""
    lines = [(path.name, key) for path in RESULTS_FILES for key, cell, _, _ in figure_checks.per_seed_lines(path)]
    assert len(lines) >= 500
    unread = [line for path in RESULTS_FILES for line in figure_checks.per_seed_lines(path) if line[1] is None]
    assert not unread


def test_every_figure_of_a_test_read_is_in_the_files_its_row_cites():
    """Rows citing a file as an earlier commit held it are read with git; a copy without it checks the rest."""
    mismatches, unchecked = history_mismatches(TEST_READS)
    assert mismatches == []
    if history() is not None:
        assert unchecked == 0


def test_every_test_read_stays_a_row_and_the_history_s_text_quotes_no_figure():
    """A read is never deleted (52 when the history became a file), and the history's words around its table follow
    the pages' rule."""
    text = TEST_READS.read_text()
    rows = history_rows(text)
    assert len(rows) >= 52
    assert all(len(cells) == 5 for cells in rows)
    assert result_figures("\n".join(line for line in text.splitlines() if not line.startswith("|"))) == []
