"""What a user may delete comes off in one step: nothing in ``project/`` or ``tests/`` imports ``experiments/`` (the
studies and their results), nothing outside ``project/tools`` and ``tests/tools`` (and ``experiments/``) imports the
tools, and on a copy without them the suite is collected and the README's and the docs' links all lead somewhere. That
the suite then passes follows from the imports: nothing left imports what was deleted, so it is not run a second time
on a copy."""

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers import REPOSITORY

TOOLS = ("project/tools", "tests/tools")


def imported_modules(path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_nothing_of_the_template_imports_the_experiments():
    """project/tools included: the benchmark and the search stamp their tables with project/tools/stamp.py."""
    for path in [*REPOSITORY.glob("project/**/*.py"), *REPOSITORY.glob("tests/**/*.py")]:
        used = {name for name in imported_modules(path) if name.split(".")[0] == "experiments"}
        assert not used, f"{path.relative_to(REPOSITORY)} imports {used}: deleting experiments/ would break it"


def test_nothing_outside_the_tools_imports_them():
    for path in [*REPOSITORY.glob("project/**/*.py"), *REPOSITORY.glob("tests/**/*.py")]:
        relative = str(path.relative_to(REPOSITORY))
        if relative.startswith(TOOLS):
            continue
        used = {name for name in imported_modules(path) if name.startswith("project.tools")}
        assert not used, f"{relative} imports {used}: deleting project/tools would break it"


def test_the_core_imports_no_test_code():
    """The reference loops and the saved-tensor meter live in tests/: the benchmark may measure them, the core never
    runs them."""
    for path in REPOSITORY.glob("project/**/*.py"):
        relative = str(path.relative_to(REPOSITORY))
        if not relative.startswith("project/tools"):
            used = {name for name in imported_modules(path) if name.split(".")[0] == "tests"}
            assert not used, f"{relative} imports {used}"


# The README's and the docs' link tests (tests/cli/test_readme.py), the only tests the copy runs.
LINK_TESTS = "test_every_relative_link_of_the_readme or test_the_readme_links_every_page_of_the_docs"


@pytest.mark.slow
@pytest.mark.parametrize("deleted", [("experiments",), ("experiments", "tools")])
def test_without_what_a_user_may_delete_the_suite_is_collected_and_every_link_leads_to_a_file(deleted, tmp_path):
    """Without experiments/; and without it, project/tools and tests/tools (the studies import the tools). The whole
    suite is collected, and the link tests of tests/cli/test_readme.py run on the copy."""
    if "tools" not in deleted and not (REPOSITORY / "project" / "tools").exists():
        pytest.skip("this tree is without project/tools already")
    copy = tmp_path / "clone"
    patterns = shutil.ignore_patterns(".venv", ".git", "lightning_logs", ".cache", "*.egg-info")

    def ignored(folder: str, names: list[str]) -> set[str]:
        # The downloaded data/ at the top, not the package's project/data/: without it, `project.data` would be
        # imported from wherever the package is installed, and the check would pass or fail by that copy.
        top = ({"data", "experiments"} & set(names)) if Path(folder) == REPOSITORY else set()
        parts = (REPOSITORY / "project", REPOSITORY / "tests")
        tools = {"tools"} & set(names) if "tools" in deleted and Path(folder) in parts else set()
        return set(patterns(folder, names)) | top | tools

    shutil.copytree(REPOSITORY, copy, ignore=ignored)
    assert not (copy / "experiments").exists()
    assert (copy / "project" / "tools").exists() == ("tools" not in deleted)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", LINK_TESTS],
        cwd=copy,
        env={name: value for name, value in os.environ.items() if name != "PYTHONPATH"},  # the copy's packages
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-3000:]
    # Every test collected, and only the two link tests run: "2 passed, N deselected in ...".
    assert re.match(r"2 passed, \d+ deselected in", result.stdout.strip().splitlines()[-1]), result.stdout[-3000:]
