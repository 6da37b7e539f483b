"""The README's "What to delete" is true: each optional tool and its test file can go without breaking the rest."""

import ast
import re
import shutil
import subprocess
import sys

from tests.helpers import REPOSITORY

# tool module → its test files; deleting both must leave the package and the suite working.
OPTIONAL = {
    "project/bench.py": ["tests/test_bench.py"],
    "project/etth1.py": ["tests/test_etth1.py"],
    "project/m4.py": ["tests/test_m4.py"],
    "project/datasets.py": ["tests/test_datasets.py"],
    "project/results.py": [],  # shared by etth1.py and m4.py only
    "project/tune.py": ["tests/test_tune.py"],
    "project/export.py": ["tests/test_export.py"],
    "project/serve.py": [],  # the export's driver
    "project/backtest.py": ["tests/test_backtest.py"],
}


def imported_modules(path) -> set[str]:
    tree = ast.parse(path.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
    return names


def test_nothing_but_their_own_tests_and_each_other_imports_the_optional_tools():
    optional_modules = {path.removesuffix(".py").replace("/", ".") for path in OPTIONAL}
    allowed = {test for tests in OPTIONAL.values() for test in tests} | set(OPTIONAL)
    for path in [*REPOSITORY.glob("project/**/*.py"), *REPOSITORY.glob("tests/*.py")]:
        relative = str(path.relative_to(REPOSITORY))
        if relative in allowed:
            continue
        used = imported_modules(path) & optional_modules
        assert not used, f"{relative} imports {used}: deleting the optional tool would break it"


def test_the_suite_is_collected_without_the_optional_tools(tmp_path):
    copy = tmp_path / "clone"
    shutil.copytree(
        REPOSITORY, copy, ignore=shutil.ignore_patterns(".venv", ".git", "lightning_logs", ".cache", "data")
    )
    for tool, tests in OPTIONAL.items():
        for path in [tool, *tests]:
            (copy / path).unlink()
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
        cwd=copy, capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-3000:]
    assert re.match(r"\d+ tests collected in", result.stdout.strip().splitlines()[-1]), result.stdout[-3000:]
