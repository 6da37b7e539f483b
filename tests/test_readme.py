"""The README is read once, top to bottom: short, and every page and file it or the docs link to exists."""

import re

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
