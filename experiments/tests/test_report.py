"""Every figure and verdict the pages give about accuracy or speed is the results files', by one rule: regenerating
every block from the files changes nothing, and the rule says what it states."""

import pytest

from experiments import report
from experiments.report import Score, verdict
from project.errors import InputError
from tests.helpers import REPOSITORY


@pytest.mark.parametrize(
    "page",
    report.pages(),
    ids=lambda page: page.relative_to(REPOSITORY).as_posix(),
)
def test_every_generated_block_and_table_copy_of_the_page_is_what_the_results_files_give(page):
    assert report.refreshed(page) == page.read_text(), f"{page.name}: run python -m experiments.report --overwrite"


def test_every_block_is_on_a_page():
    names = {block[2] for page in report.pages() for block in report.BLOCK.finditer(page.read_text())}
    assert set(report.BLOCKS) <= names, f"blocks no page holds: {set(report.BLOCKS) - names}"


@pytest.mark.parametrize(
    ("model", "other", "word"),
    [
        ((0.1, 0.2), (0.3, 0.4), "below"),  # every seed lower
        ((0.3, 0.4), (0.1, 0.2), "above"),
        ((0.1, 0.3), (0.2, 0.4), "level with"),  # the ranges overlap
        ((0.267, 0.268), (0.267, 0.271), "level with"),  # by one printed unit: more than a shared end
        ((0.264, 0.268), (0.268, 0.271), "level with"),  # they only touch: a tie of printed values decides nothing
        ((0.268, 0.271, 0.268), (0.265, 0.268, 0.264), "level with"),  # scheduled sampling against teacher forcing
        ((0.269, 0.271), (0.265, 0.268), "above"),  # one printed unit apart
        ((0.652,), (0.650, 0.654), "level with"),  # one value inside the seeds' range, not at its end
        ((0.650, 0.652), (0.652,), "level with"),  # one value at the range's end: touching
        ((0.1 + 0.2,), (0.3,), "level with"),  # equal as printed, whatever the float sum says
        ((0.652,), (0.652,), "level with"),  # two equal values
        ((9.350, 9.357, 9.470), (9.328,), "above"),  # all seeds behind a published row, however close the means
        ((8.876,), (8.913,), "below"),  # one value each: the rule has no spread, and says below
    ],
)
def test_the_verdict_is_level_unless_the_seeds_ranges_are_apart_as_printed(model, other, word):
    assert verdict(Score(model, ""), Score(other, "")) == word


def test_a_score_takes_its_seeds_from_the_lines_under_its_own_table():
    """etth1_regimes.md lists free running's seeds under both of its tables; each table's cell gets its own."""
    all_windows = report.score("etth1_regimes.md", "free running detach", "test MSE", table=0)
    every_24th = report.score("etth1_regimes.md", "free running detach", "test MSE", table=1)
    assert all_windows.values == (0.380, 0.382, 0.380)
    assert every_24th.values != all_windows.values
    assert all_windows.text.startswith("0.381 ± ")


def test_the_defaults_table_takes_which_runs_are_the_defaults_from_one_mapping(monkeypatch):
    """report.DEFAULTS names the defaults' and the previous defaults' files: swapping them swaps the columns and the
    counts, every dataset keeps its row, and a loss is a row like a win."""
    counts = "the defaults on {} of 7 validation sets and {} of 7 test sets; the previous defaults on {} of 7"
    today = report.defaults_on_real_data(REPOSITORY)
    rows = [line for line in today.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + 7
    assert counts.format(5, 3, 5) + " validation sets and 5 of 7 test sets" in " ".join(today.split())
    assert "| pedestrian counts | 3585.376 ± 73.991 | 3654.718 ± 110.756 | AutoETS 1537.865 |" in today
    assert rows[-1].endswith("| above on validation, level with on test |")
    swapped = {"defaults": report.DEFAULTS["previous defaults"], "previous defaults": report.DEFAULTS["defaults"]}
    monkeypatch.setattr(report, "DEFAULTS", swapped)
    switched = report.defaults_on_real_data(REPOSITORY)
    assert counts.format(5, 5, 5) + " validation sets and 3 of 7 test sets" in " ".join(switched.split())
    assert "| pedestrian counts | 3654.718 ± 110.756 | 3585.376 ± 73.991 | AutoETS 1537.865 |" in switched


def test_every_figure_of_the_decoder_depth_section_is_generated():
    """docs/how-it-works.md's "When free running pays off: decoder depth", up to the next section, holds every
    depth block (the rule of test_pages.py holds its prose to no figure)."""
    page = (REPOSITORY / "docs" / "how-it-works.md").read_text()
    heading = "## When free running pays off: decoder depth\n"
    assert heading in page
    section = page.split(heading, 1)[1].split("\n## ", 1)[0]
    names = {block[2] for block in report.BLOCK.finditer(section)}
    assert {name for name in report.BLOCKS if name.startswith("depth-")} <= names
    assert "written by hand" not in report.BLOCK.sub("", section)


def test_rewriting_a_page_needs_overwrite_and_changes_only_its_blocks(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- generated: bench -->\nold\n<!-- end generated -->\nafter\n")
    with pytest.raises(SystemExit) as refused:
        report.main([str(page)])
    assert refused.value.code == 2
    assert "pass --overwrite" in capsys.readouterr().err
    report.main([str(page), "--overwrite"])
    text = page.read_text()
    assert text.startswith("intro\n<!-- generated: bench -->\n| regime |")
    assert text.endswith("<!-- end generated -->\nafter\n")


def test_a_block_of_no_known_name_is_one_line(tmp_path, capsys):
    page = tmp_path / "page.md"
    page.write_text("<!-- generated: nonsense -->\n<!-- end generated -->\n")
    with pytest.raises(SystemExit):
        report.main([str(page), "--overwrite"])
    assert "no generated block named 'nonsense'" in capsys.readouterr().err


BENCH = """Written by `python -m project.tools.bench` at commit x.

| horizon | regime | step time | step ratio | saved | saved ratio |
|---|---|---:|---:|---:|---:|
| 12 | `teacher_forcing` | 196.0 ms | 1.00x | 51.0 MiB | 1.00x |
| 12 | `free_running_detach` | 298.1 ms | 1.52x | 51.0 MiB | 1.00x |
| 48 | `teacher_forcing` | 440.6 ms | 1.00x | 132.6 MiB | 1.00x |
| 48 | `free_running_detach` | 810.8 ms | 1.84x | 132.6 MiB | 1.00x |
"""
BLOCK_PAGE = "intro\n<!-- generated: bench -->\nold\n<!-- end generated -->\n"


@pytest.fixture
def results(tmp_path, monkeypatch):
    """A results folder of the test's own, read afresh (the readers cache what they read)."""
    folder = tmp_path / "results"
    (folder / "cpu_2core").mkdir(parents=True)
    monkeypatch.setattr(report, "RESULTS", folder)
    report.tables.cache_clear()
    report.per_seed.cache_clear()
    yield folder
    report.tables.cache_clear()
    report.per_seed.cache_clear()


def refused(capsys, *pages) -> str:
    """The one line a refused report prints, after checking that it exited with 2 and left every page as it was."""
    before = {page: page.read_text() for page in pages}
    with pytest.raises(SystemExit) as stopped:
        report.main([*map(str, pages), "--overwrite"])
    assert stopped.value.code == 2
    assert {page: page.read_text() for page in pages} == before
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    return error.strip()


WHOLE = "expected the whole file as the command its first line names writes it"
LINES = BENCH.splitlines(keepends=True)
HEADED = "the table headed horizon | regime | step time | …"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (None, "results file not found; expected the results file a page reads"),
        ("", f"empty; {WHOLE}"),
        (BENCH[:-12], f"cut short (it ends mid-line); {WHOLE}"),
        (
            "".join(LINES[:7]),
            f"no row of `free_running_detach` at horizon 48 in {HEADED}; {WHOLE}",
        ),
        ("".join(LINES[:4]), f"{HEADED} has no row; {WHOLE}"),
        (
            "".join(LINES[:7]) + "| 48 | `free_running_detach` | 810.8 ms |\n",
            f"the row '48' of {HEADED} has 3 cells where its header has 6; {WHOLE}",
        ),
    ],
    ids=["missing", "empty", "cut-mid-line", "cut-between-rows", "cut-after-the-header", "a-row-cut-short"],
)
def test_a_missing_or_cut_results_file_is_one_line_naming_it_and_no_page_changes(
    results, tmp_path, capsys, text, message
):
    if text is not None:
        (results / "cpu_2core" / "bench.md").write_text(text)
    page = tmp_path / "page.md"
    page.write_text(BLOCK_PAGE)
    assert refused(capsys, page) == f"error: {results / 'cpu_2core' / 'bench.md'}: {message}"


def test_a_whole_results_file_gives_the_block(results, tmp_path):
    (results / "cpu_2core" / "bench.md").write_text(BENCH)
    page = tmp_path / "page.md"
    page.write_text(BLOCK_PAGE)
    report.main([str(page), "--overwrite"])
    assert "| `free_running_detach` | 1.84x | 1.00x |\n<!-- end generated -->" in page.read_text()


def test_a_page_is_not_rewritten_when_another_page_s_results_are_cut(results, tmp_path, capsys):
    (results / "cpu_2core" / "bench.md").write_text(BENCH)
    first, second = tmp_path / "first.md", tmp_path / "second.md"
    first.write_text(BLOCK_PAGE)  # its block would change
    second.write_text("<!-- experiments/results/etth1_regimes.md -->\nold\n<!-- end -->\n")  # a copy of no file here
    assert refused(capsys, first, second) == (
        f"error: {results / 'etth1_regimes.md'}: results file not found; expected the results file a page reads"
    )


def test_a_mean_over_seeds_whose_seed_lines_were_cut_is_one_line_not_a_verdict_on_the_mean(results):
    """A cell printed as mean ± sd is weighed by its seeds: without them the rule would weigh one value."""
    whole = "| model | test MSE | seeds |\n|---|---:|---:|\n| detach | 0.381 ± 0.001 | 3 |\n\n"
    (results / "regimes.md").write_text(whole + "- detach, test MSE: seed 0: 0.380, seed 1: 0.382, seed 2: 0.380\n")
    assert report.score("regimes.md", "detach", "test MSE").values == (0.380, 0.382, 0.380)
    (results / "regimes.md").write_text(whole)
    report.tables.cache_clear()
    report.per_seed.cache_clear()
    with pytest.raises(InputError) as refusal:
        report.score("regimes.md", "detach", "test MSE")
    assert (
        str(refusal.value)
        == f"{results / 'regimes.md'}: no per-seed line '- detach, test MSE: seed …' under table 1; {WHOLE}"
    )


def test_an_ensemble_decision_whose_count_is_not_its_table_s_is_refused(results):
    """The ensemble block quotes the rule's counts only when the table under them gives the same."""
    real = (REPOSITORY / "experiments" / "results" / "ensemble" / "validation.md").read_text()
    (results / "ensemble").mkdir()
    (results / "ensemble" / "validation.md").write_text(real)
    assert "below its best seed on 3 of 7" in report.ensemble(REPOSITORY)
    (results / "ensemble" / "validation.md").write_text(
        real.replace("best seed on 3 of the 7", "best seed on 5 of the 7")
    )
    report.tables.cache_clear()
    with pytest.raises(InputError, match="its decision counts 5 of 7 datasets below their best seed, its table 3 of 7"):
        report.ensemble(REPOSITORY)
