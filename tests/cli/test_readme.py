"""The README is read once, top to bottom: the template on its first screen, every page and file it or the docs link to
exists and outlives a deleted experiments/, and every command it shows runs in a test or in CI."""

import re

from tests.helpers import REPOSITORY

PAGES = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
EXPERIMENTS = REPOSITORY / "experiments"
# Blocks that `python -m experiments.report` writes from the results files: their links are its (experiments/report.py).
GENERATED = re.compile(r"<!-- generated: [\w-]+ -->\n.*?<!-- end generated -->", re.DOTALL)


def test_the_readme_opens_with_the_template_its_two_commands_and_make_it_yours():
    """What a newcomer sees first (one screen, about 40 lines): what the template is, the quickstart's two commands
    and what they print, then "Make it yours"; the studies' evidence comes after."""
    lines = (REPOSITORY / "README.md").read_text().splitlines()
    first_screen = lines[:40]
    assert {"make train", "make test"} <= {line.split("#")[0].strip() for line in first_screen}
    assert "```text" in first_screen  # what a run prints
    sections = [line for line in lines if line.startswith("## ")]
    assert sections[0] == "## Make it yours"
    assert "## Make it yours" in first_screen


def relative_link_targets(text: str) -> list[str]:
    """The relative targets of a page's links and images (``[text](target)``, ``![alt](target "title")``,
    ``<img src=...>``), without their ``#anchor``; code is not a link."""
    text = re.sub(r"```.*?```", "", text, flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "code", text)
    targets = re.findall(r"\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)", text)
    targets += re.findall(r"<img\b[^>]*?\bsrc\s*=\s*[\"']([^\"']+)[\"']", text, flags=re.IGNORECASE)
    targets = [target.split("#", 1)[0] for target in targets]
    return [target for target in targets if target and not re.match(r"[a-z][a-z0-9+.-]*:", target, re.IGNORECASE)]


def test_relative_link_targets_finds_links_images_and_img_tags_but_not_code_or_urls():
    text = (
        '[a](docs/a.md#x) ![b](docs/b.png "title") <img src="docs/c.png" width=300> [d](https://e.org) [f](#anchor)\n'
        "`[g](not/a/link.md)` [`h`](docs/h.md)\n```bash\n[i](nor/this.md)\n```\n[k](mailto:x@y.z)\n"
    )
    assert relative_link_targets(text) == ["docs/a.md", "docs/b.png", "docs/h.md", "docs/c.png"]


def test_every_relative_link_of_the_readme_and_the_docs_leads_to_a_file_outside_experiments():
    """A clone that deletes experiments/ (the README's "Make it yours") keeps every link of the README and the docs:
    a page names a study's file as code (`experiments/results/...`), never as a link, the generated blocks too
    (experiments/report.py writes them so)."""
    for page in PAGES:
        for target in relative_link_targets(page.read_text()):
            resolved = (page.parent / target).resolve()
            assert resolved.is_relative_to(REPOSITORY), f"{page.name} links to {target}, outside the repository"
            assert not resolved.is_relative_to(EXPERIMENTS), (
                f"{page.name} links to {target}, which deleting experiments/ leaves dangling: name it as code"
            )
            assert resolved.exists(), f"{page.name} links to {target}, which does not exist"


def test_the_readme_links_every_page_of_the_docs():
    readme = (REPOSITORY / "README.md").read_text()
    for page in PAGES[1:]:
        assert f"docs/{page.name}" in readme, f"the README does not link docs/{page.name}"


# Every command of the README's code blocks, and where it runs as written: a test of tests/cli/test_cli.py, or CI
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
            cli_tests = (REPOSITORY / "tests" / "cli" / "test_cli.py").read_text()
            assert f"def {where}(" in cli_tests, f"{where} does not exist"


def test_the_github_workflow_runs_the_make_targets_of_ci_run():
    """`.ci/run` (CI on a clean clone) and `.github/workflows/ci.yml` (GitHub Actions, in parallel jobs) describe the
    same steps: each make target of one is a step of the other."""
    ci = re.findall(r"^make ([\w-]+)", (REPOSITORY / ".ci" / "run").read_text(), re.MULTILINE)
    workflow = (REPOSITORY / ".github" / "workflows" / "ci.yml").read_text()
    workflow = re.findall(r"^\s*- run: make ([\w-]+)", workflow, re.MULTILINE)
    assert ci
    assert set(ci) == set(workflow)
