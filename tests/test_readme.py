"""The README is read once, top to bottom: short, every page and file it or the docs link to exists, and every
command it shows runs in a test or in CI."""

import re
from pathlib import Path

from tests.helpers import REPOSITORY

PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]


def test_the_readme_is_at_most_220_lines():
    assert len((REPOSITORY / "README.md").read_text().splitlines()) <= 220


def test_every_relative_link_of_the_readme_and_the_docs_leads_to_a_file():
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            assert (page.parent / target).exists(), f"{page.name} links to {target}, which does not exist"


def test_the_readme_links_every_page_of_the_docs():
    readme = (REPOSITORY / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in readme, f"the README does not link docs/{page.name}"


def test_the_readme_benchmark_table_is_the_horizon_48_rows_of_its_results_file():
    readme = (REPOSITORY / "README.md").read_text()
    bench = (REPOSITORY / "results" / "cpu_2core" / "bench.md").read_text()
    quoted = re.findall(r"^\| (`\w+`) \| ([\d.]+x) \| ([\d.]+x) \|$", readme, re.MULTILINE)
    assert len(quoted) == 4
    for regime, step_time, saved in quoted:
        row = next(line for line in bench.splitlines() if line.startswith(f"| 48 | {regime} |"))
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert (cells[3], cells[5]) == (step_time, saved), f"README row {regime} differs from results: {row}"


# Every command of the README's code blocks, and where it runs as written: a test of tests/test_cli.py, or CI
# (a line of .ci/run).
PANEL_STEPS = "test_the_readme_panel_fit_then_predict_then_runs_commands_work_as_written"
README_COMMANDS = {
    "make train": "ci",
    "make test": "ci",
    "tensorboard --logdir lightning_logs": "test_the_readme_tensorboard_command_reads_a_runs_curves",
    "python -m project.training.runs lightning_logs/": PANEL_STEPS,
    "python -m project.cli fit --config configs/base.yaml": (
        "test_the_readme_fit_command_writes_a_checkpoint_the_config_and_event_files"
    ),
    "python -m project.cli fit --config configs/base.yaml --config configs/panel.yaml": PANEL_STEPS,
    "python -m project.cli predict --ckpt_path lightning_logs/synthetic_panel/version_0/checkpoints/last.ckpt": (
        PANEL_STEPS
    ),
    "python -m project.cli fit --config configs/base.yaml --data.source data/sales.csv --data.time_column date": (
        "test_the_readme_column_roles_command_trains_on_a_sales_table"
    ),
    "make test-slow": "ci",
    "make lint": "ci",
    "make format": "ci",
    ".venv/bin/pre-commit install": "test_the_readme_pre_commit_command_installs_the_hook",
}


def readme_code_commands() -> list[str]:
    """The commands of the README's bash blocks, comments dropped, continued lines given by their first line."""
    commands, continued = [], False
    for block in re.findall(r"```bash\n(.*?)```", (REPOSITORY / "README.md").read_text(), re.DOTALL):
        for line in block.splitlines():
            command = line.split("  #")[0].split(" # ")[0].strip().rstrip("\\").strip()
            if command and not continued:
                commands.append(command)
            continued = line.rstrip().endswith("\\")
    return commands


def test_every_command_of_the_readme_runs_in_a_test_or_in_ci():
    ci = (REPOSITORY / ".ci" / "run").read_text()
    commands = readme_code_commands()
    assert set(README_COMMANDS) <= set(commands), "README_COMMANDS names a command the README no longer has"
    for command in commands:
        assert command in README_COMMANDS, f"the README command {command!r} is run by no test and not in CI"
        where = README_COMMANDS[command]
        if where == "ci":
            assert re.search(rf"^{re.escape(command)}$", ci, re.MULTILINE), f"{command!r} is not a line of .ci/run"
        else:
            assert f"def {where}(" in (REPOSITORY / "tests" / "test_cli.py").read_text(), f"{where} does not exist"


# Figures the prose may name that are goals, not results.
TARGETS = {"9.5": "M4 Hourly's sMAPE target", "1.5": "detach's step-time target, as a multiple of teacher forcing"}
DECIMAL = re.compile(r"(?<![\w.,])(\d+\.\d+)(?![\w.]*\d)")
PROSE_WITH_RESULTS = [REPOSITORY / "docs" / "results.md", REPOSITORY / "docs" / "benchmark.md"]


def cited_results(page: Path) -> list[Path]:
    """The files under results/ that a page links to (a folder: every file in it) or embeds as a table block."""
    text, root = page.read_text(), (REPOSITORY / "results").resolve()
    targets = [page.parent / t for t in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", text) if "://" not in t]
    targets += [REPOSITORY / name for name in re.findall(r"<!-- (results/[\w./-]+) -->", text)]
    files = []
    for target in (t.resolve() for t in targets):
        if target.is_relative_to(root):
            files += sorted(f for f in target.rglob("*") if f.is_file()) if target.is_dir() else [target]
    return files


def prose(text: str) -> str:
    """A page without its copied results tables, its test-read history (figures of the earlier commits it names),
    code blocks and inline code (settings, not figures)."""
    text = re.sub(r"<!-- results/.*?<!-- end -->", "", text, flags=re.DOTALL)
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
    readme = (REPOSITORY / "README.md").read_text()
    accuracy = readme[readme.index("**Accuracy") :].split("\n\n")[0]  # it cites docs/results.md
    pages = [(page.name, page.read_text(), cited_results(page)) for page in PROSE_WITH_RESULTS]
    pages.append(("README.md", accuracy, cited_results(REPOSITORY / "docs" / "results.md")))
    missing = []
    for name, text, cited in pages:
        assert cited, f"{name} cites no file under results/"
        missing += [f"{name}: {problem}" for problem in misplaced_figures(text, cited)]
    assert not missing, f"figures of the prose not in the row its sentence names: {missing}"
