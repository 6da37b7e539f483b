"""The checkpoint door stands at the edge: the method (``project/model``, ``project/training``, ``project/data``)
imports none of it, nor the CLI's edge modules, at module level; ``Forecaster`` and ``WindowDataModule`` reach it
only from their ``load_from_checkpoint`` delegates."""

import ast

import pytest

from tests.helpers import REPOSITORY

EDGE = ("project.checkpoints", "project.cli", "project.run_folders", "project.option_errors")
METHOD = ("model", "training", "data")


def module_level_imports(tree: ast.Module) -> set[str]:
    """What a module imports when it is imported: its top-level statements (and those of a top-level ``if``/``try``),
    not those inside a function, which run when the function is called."""
    names, pending = set(), list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, (ast.If, ast.Try)):
            pending += [*node.body, *node.orelse, *getattr(node, "finalbody", []), *getattr(node, "handlers", [])]
    return names


def function_imports(tree: ast.Module) -> dict[str, set[str]]:
    """The imports inside each function, by the function's name."""
    found = {}
    for function in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        inner = {node.module for node in ast.walk(function) if isinstance(node, ast.ImportFrom) and node.module}
        if inner:
            found[function.name] = inner
    return found


@pytest.mark.parametrize(
    "path",
    sorted(p for folder in METHOD for p in (REPOSITORY / "project" / folder).rglob("*.py")),
    ids=lambda p: str(p.relative_to(REPOSITORY)),
)
def test_the_method_imports_no_checkpoint_code_at_module_level(path):
    tree = ast.parse(path.read_text())
    used = {name for name in module_level_imports(tree) if name.startswith(EDGE)}
    assert not used, f"{path.relative_to(REPOSITORY)} imports {used}: the method stands below the checkpoint door"
    for function, modules in function_imports(tree).items():
        reached = {module for module in modules if module.startswith(EDGE)}
        assert not reached or (function, reached) == ("load_from_checkpoint", {"project.checkpoints"}), (
            f"{path.relative_to(REPOSITORY)}:{function} imports {reached}: only a load_from_checkpoint delegate may"
        )
