"""The README is read once, top to bottom: short, every page and file it or the docs link to exists, and every
command it shows runs in a test or in CI."""

import re
from pathlib import Path

from tests.helpers import REPOSITORY

PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]


def test_the_readme_is_at_most_300_lines():
    assert len((REPOSITORY / "README.md").read_text().splitlines()) <= 300


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
    "python -m project.runs lightning_logs/": PANEL_STEPS,
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


def figures_of(files: list[Path]) -> set[str]:
    """Every number of the files, at every rounding from 1 to 6 decimals: what prose citing them may quote."""
    figures = set()
    for path in files:
        for number in re.findall(r"\d+(?:,\d{3})*\.\d+", path.read_text()):
            value = float(number.replace(",", ""))
            figures.update(f"{value:.{digits}f}" for digits in range(1, 7))
    return figures


def prose(text: str) -> str:
    """A page without its copied results tables, its test-read history (figures of the earlier commits it names),
    code blocks and inline code (settings, not figures)."""
    text = re.sub(r"<!-- results/.*?<!-- end -->", "", text, flags=re.DOTALL)
    text = re.sub(r"<!-- history:.*?<!-- end history -->", "", text, flags=re.DOTALL)  # earlier commits' figures
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    return re.sub(r"`[^`]*`", "", text)


def test_every_figure_in_the_results_prose_is_in_a_results_file_the_page_cites():
    readme = (REPOSITORY / "README.md").read_text()
    accuracy = readme[readme.index("**Accuracy") :].split("\n\n")[0]  # it cites docs/results.md
    pages = [(page.name, page.read_text(), cited_results(page)) for page in PROSE_WITH_RESULTS]
    pages.append(("README.md", accuracy, cited_results(REPOSITORY / "docs" / "results.md")))
    missing = []
    for name, text, cited in pages:
        assert cited, f"{name} cites no file under results/"
        figures = figures_of(cited) | set(TARGETS)
        missing += [f"{name}: {figure}" for figure in DECIMAL.findall(prose(text)) if figure not in figures]
    assert not missing, f"figures that no results file the page cites holds: {missing}"
