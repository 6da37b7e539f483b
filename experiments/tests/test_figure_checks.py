"""The checks of the results files and the test-read history pass on the real files, and the project's checks fail
on each of twenty realistic wrong figures planted in the pages and the results files, one kind of error after
another (an audit of issue 77 planted them in clones, and most passed the checks of the time)."""

from pathlib import Path

import pytest

from experiments import figure_checks, report, results
from experiments.figure_checks import (
    decision_mismatches,
    hand_written_figures,
    history_mismatches,
    history_rows,
    result_figures,
    spread_mismatches,
    verdict_mismatches,
)
from experiments.tests.helpers import history
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


# The twenty planted errors: (the kind of error, the file, the text there, the wrong text). Each kind of the audit
# twice, in the README, the results page, the docs, the results files and the test-read history.
PLANTED = [
    (
        "a test figure labelled validation (ETTh1's test MAE of the defaults in the validation column)",
        "README.md",
        "| ETTh1 | 1.791 ± 0.012 | 1.785 ± 0.017 |",
        "| ETTh1 | 1.560 ± 0.025 | 1.785 ± 0.017 |",
    ),
    (
        "a test figure labelled validation, written into the prose",
        "experiments/README.md",
        "Where validation and test disagree, the linear map carries over",
        "On validation `detach` scores 0.381 MSE. Where validation and test disagree, the linear map carries over",
    ),
    (
        "a win turned into a loss (M4 Weekly's row of the accuracy table)",
        "README.md",
        "AutoTheta, season 52: 7.961 | below, below |",
        "AutoTheta, season 52: 7.961 | above, below |",
    ),
    (
        "a win turned into a loss (ETTh1's validation verdict cell)",
        "experiments/results/your_data.md",
        "| 1.915 (season 24) | yes (-6.2%) | 3 | 7.7 min |",
        "| 1.915 (season 24) | no (+6.2%) | 3 | 7.7 min |",
    ),
    (
        "two metrics swapped (ETTh1 detach's test MSE and MAE)",
        "experiments/README.md",
        "`detach` scores 0.381 ± 0.001 / 0.404 ± 0.001 (MSE",
        "`detach` scores 0.404 ± 0.001 / 0.381 ± 0.001 (MSE",
    ),
    (
        "two metrics swapped (M4 Hourly's measured seasonal naive, validation sMAPE and MASE)",
        "experiments/results/m4_hourly.md",
        "| seasonal naive (measured) | 14.570 | 1.228 |",
        "| seasonal naive (measured) | 1.228 | 14.570 |",
    ),
    (
        "seed 1's value given as seed 0's (ETTh1 detach's test MSE)",
        "experiments/results/etth1_regimes.md",
        "- free running detach, test MSE: seed 0: 0.380, seed 1: 0.382, seed 2: 0.380",
        "- free running detach, test MSE: seed 0: 0.382, seed 1: 0.382, seed 2: 0.380",
    ),
    (
        "seed 1's value given as seed 0's (the defaults' rerun on M4 Hourly)",
        "experiments/README.md",
        "seed 0's 361.776 MAE",
        "seed 0's 295.611 MAE",
    ),
    (
        "a generated block edited by hand (the CUDA graph's ratio)",
        "docs/benchmark.md",
        "cost 9.32× teacher forcing's step",
        "cost 8.32× teacher forcing's step",
    ),
    (
        "a generated block edited by hand (bptt's cut at 48 steps)",
        "docs/how-it-works.md",
        "is below it (39% lower;",
        "is below it (40% lower;",
    ),
    (
        "a results file's row edited by hand (AutoARIMA's test MAE)",
        "experiments/results/intermittent_floor.md",
        "| 17.115 | 18.729 | 101 s |",
        "| 17.115 | 18.279 | 101 s |",
    ),
    (
        "a results file's row edited by hand (M4 Weekly's ensemble, which its verdict says is not below its best seed)",
        "experiments/results/ensemble/validation.md",
        "| 248.595 ± 14.609 | 241.986 |",
        "| 248.595 ± 14.609 | 231.986 |",
    ),
    (
        "one copy of a figure changed and not the other (the results page's copy of etth1_regimes.md)",
        "experiments/README.md",
        "| teacher forcing | 0.646 ± 0.003 | 0.543 ± 0.002 |",
        "| teacher forcing | 0.646 ± 0.003 | 0.534 ± 0.002 |",
    ),
    (
        "one copy of a figure changed and not the other (a test-read row's copy of m4_hourly.md's ensemble)",
        "experiments/results/test_reads.md",
        "the mean of the seeds' forecasts 8.876 / 0.751",
        "the mean of the seeds' forecasts 8.867 / 0.751",
    ),
    (
        "a stamp's commit changed (M4 Weekly's table)",
        "experiments/results/m4_weekly.md",
        "at commit e67a00b on",
        "at commit e67a00c on",
    ),
    (
        "a stamp's commit changed (a reused run's training commit)",
        "experiments/results/budget/validation_a3.md",
        "peyton_manning_seed0 at commit d048760",
        "peyton_manning_seed0 at commit d048706",
    ),
    (
        '"82 s" written as "28 s" (make train, generated)',
        "README.md",
        "1000 steps, 82 s",
        "1000 steps, 28 s",
    ),
    (
        '"82 s" written as "28 s" (make train, in the prose)',
        "README.md",
        "`make train` is `fit --config configs/base.yaml` plus",
        "`make train` (28 s on 2 cores) is `fit --config configs/base.yaml` plus",
    ),
    (
        "a figure with a thousands separator (the panel benchmark's series)",
        "docs/data.md",
        "ten thousand series",
        "10,000 series",
    ),
    (
        "a dropped digit in a decision cell (A3 on pedestrian counts), which regeneration would carry into the pages",
        "experiments/results/budget/decision_a3.md",
        "| no (+142.0%) | no (+138.2%) |",
        "| no (+142.0%) | no (+18.2%) |",
    ),
]


def problems(where: str, text: str, folder: Path) -> list[str]:
    """What the checks the real tests run say of ``text`` as the content of ``where``: a page is regenerated from the
    results files and read by the prose rule; a results file (copied to ``folder``) is read for its seal, its stamps'
    commits and its derived figures; the test-read history for its rows' figures."""
    path = REPOSITORY / where
    if path in report.pages():
        regenerated = [] if report.refreshed(path, text) == text else ["a block or table copy differs from its file"]
        return regenerated + hand_written_figures(text)
    copy = folder / path.name
    copy.write_text(text)
    if path == TEST_READS:
        return history_mismatches(copy)[0]
    found = [problem] if (problem := results.seal_problem(text)) else []
    if (commits := history()) is not None:
        found += results.commits_outside(text, commits)
    return found + spread_mismatches(copy) + verdict_mismatches(copy) + decision_mismatches(copy)


def test_twenty_errors_are_planted_each_kind_twice():
    assert len(PLANTED) == 20
    assert {where.split("/")[0] for _, where, _, _ in PLANTED} >= {"README.md", "docs", "experiments"}


@pytest.mark.parametrize(("what", "where", "old", "new"), PLANTED, ids=[plant[0][:60] for plant in PLANTED])
def test_a_planted_error_fails_the_checks_and_the_real_text_passes_them(tmp_path, what, where, old, new):
    real = (REPOSITORY / where).read_text()
    assert real.count(old) == 1, f"{where} no longer holds {old!r} once: plant the error elsewhere"
    assert problems(where, real, tmp_path) == []
    assert problems(where, real.replace(old, new), tmp_path) != [], f"{what} went unflagged"
