"""The checks of the results pages can fail: each of ten realistic wrong figures (a neighbouring seed, the other
split's value, a cell that contradicts its verdict, a count written by hand) is flagged, and the real pages and
results files pass every check."""

from pathlib import Path

import pytest

from experiments import figure_checks, report
from experiments.figure_checks import (
    decision_mismatches,
    hand_written_counts,
    misplaced_figures,
    spread_mismatches,
    verdict_mismatches,
)
from experiments.tests.helpers import PROSE_WITH_RESULTS, RESULTS_PAGE, cited_results
from tests.helpers import REPOSITORY

RESULTS = REPOSITORY / "experiments" / "results"
RESULTS_FILES = sorted(RESULTS.rglob("*.md"))

# Counts and integer percentages of the pages' prose that are settings or goals, not results.
NOT_COUNTED = {
    "how-it-works.md": {"100 of 212": "the depth study's training budget in steps, a setting"},
    "probabilistic.md": {
        "85%": "the coverage a test asks of a short run (75–85%)",
        "80%": "the default interval",
        "10%": "the CRPS tolerance of tests/training/test_probabilistic.py",
    },
    "tracking.md": {"80%": "the default interval"},
    "README.md": {"80%": "the default interval", "5%": "the intermittent panel's recipes, a bound its table shows"},
}


def test_every_figure_of_the_results_prose_is_in_the_row_and_split_its_sentence_names():
    missing = []
    for page in PROSE_WITH_RESULTS:
        missing += [f"{page.name}: {problem}" for problem in misplaced_figures(page.read_text(), cited_results(page))]
    assert not missing, f"figures of the prose not in the row its sentence names: {missing}"


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


@pytest.mark.parametrize("page", report.pages(), ids=lambda page: f"{page.parent.name}/{page.name}")
def test_no_count_or_integer_percentage_of_the_pages_prose_is_a_result_written_by_hand(page):
    allowed = NOT_COUNTED.get(page.name, {})
    assert [count for count in hand_written_counts(page.read_text()) if count not in allowed] == []


# The ten planted errors: (what, file, old text, new text, the check that must flag it).


PLANT_DIR: list[Path] = []
PLANTED = [
    (
        "the ETTh1 headline 0.381 written as 0.380 (a neighbouring seed)",
        "experiments/README.md",
        "Free-running `detach` scores 0.381 ± 0.001",
        "Free-running `detach` scores 0.380 ± 0.001",
    ),
    (
        "the ETTh1 headline 0.381 written as 0.481",
        "experiments/README.md",
        "Free-running `detach` scores 0.381 ± 0.001",
        "Free-running `detach` scores 0.481 ± 0.001",
    ),
    (
        "M4 Hourly's test seasonal naive swapped for the validation one",
        "experiments/README.md",
        "338.685 ± 6.924 on test against 353.856",
        "338.685 ± 6.924 on test against 335.046",
    ),
    (
        "the ensemble of ETTh1's detach seeds replaced by seed 0's test MSE",
        "experiments/README.md",
        "the mean of its seeds' forecasts (0.377 / 0.401)",
        "the mean of its seeds' forecasts (0.380 / 0.401)",
    ),
    (
        "an ensemble cell that contradicts its verdict (M4 Weekly below its best seed, the verdict says no)",
        "experiments/results/ensemble/validation.md",
        "| 248.595 ± 14.609 | 241.986 |",
        "| 248.595 ± 14.609 | 231.986 |",
    ),
    (
        "a per-seed line that no longer gives its mean ± sd (ETTh1 detach's test MSE, seed 1)",
        "experiments/results/etth1_regimes.md",
        "- free running detach, test MSE: seed 0: 0.380, seed 1: 0.382, seed 2: 0.380",
        "- free running detach, test MSE: seed 0: 0.380, seed 1: 0.392, seed 2: 0.380",
    ),
    (
        "a mean ± sd with two digits swapped (ETTh1's validation MAE of the defaults)",
        "experiments/results/ensemble/validation.md",
        "| validation | 1.785 ± 0.017 |",
        "| validation | 1.758 ± 0.017 |",
    ),
    (
        "the ensemble decision's count written as 5 of the 7",
        "experiments/results/ensemble/validation.md",
        "below its best seed on 3 of the 7 datasets",
        "below its best seed on 5 of the 7 datasets",
    ),
    (
        'a hand-written "5 of 7" in README prose',
        "README.md",
        "**These are not held-out results.**",
        "The ensemble is below the best simple forecast on 5 of 7 datasets. **These are not held-out results.**",
    ),
    (
        "a hand-written integer percentage in README prose",
        "README.md",
        "**These are not held-out results.**",
        "The defaults beat seasonal naive by 24% on M4 Weekly. **These are not held-out results.**",
    ),
]


def flags(where: str, text: str) -> list[str]:
    """What the checks say about ``text`` as the content of ``where`` (a page, or a results file)."""
    path = REPOSITORY / where
    if path == RESULTS_PAGE:
        return misplaced_figures(text, cited_results(path))
    if path.name == "README.md":
        return hand_written_counts(text)
    copy = Path(PLANT_DIR[0]) / path.name
    copy.write_text(text)
    return spread_mismatches(copy) + verdict_mismatches(copy) + decision_mismatches(copy)


@pytest.fixture
def plant_dir(tmp_path):
    PLANT_DIR[:] = [tmp_path]
    yield tmp_path
    PLANT_DIR.clear()


@pytest.mark.parametrize(("what", "where", "old", "new"), PLANTED, ids=[p[0][:60] for p in PLANTED])
def test_a_planted_error_is_flagged_and_the_real_text_is_not(plant_dir, what, where, old, new):
    real = (REPOSITORY / where).read_text()
    assert real.count(old) == 1, f"{where} no longer holds {old!r} once: plant the error elsewhere"
    allowed = set(NOT_COUNTED["README.md"]) if where == "README.md" else set()
    assert [p for p in flags(where, real) if p not in allowed] == []
    assert [p for p in flags(where, real.replace(old, new)) if p not in allowed] != [], f"{what} went unflagged"
