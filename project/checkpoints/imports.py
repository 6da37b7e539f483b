"""What a parser may import: jsonargparse's own import policy, configured as an allowlist.

Importing a module runs its code, so a checkpoint must not choose what is imported. jsonargparse checks every import
path a parsed value names (a class path at any depth, a callable such as a scheduler's ``lr_lambda``, a string it reads
as YAML or as a config file) against its import policy before importing it. While a checkpoint's settings are parsed,
that policy denies everything (``*``) but this project, torch's optimizers and schedulers, and exactly the classes and
callables the user named in their configs and flags (``named_imports``). Nothing here walks the settings: the parser
refuses, where it would import.
"""

from __future__ import annotations

import contextlib
import inspect
import re
from collections.abc import Iterable, Iterator

import jsonargparse
from jsonargparse import _common as jsonargparse_settings

from project.rules import loaded_class

# What a checkpoint may name without the user naming it: the project's own classes, and torch's optimizers and
# schedulers (the classes a checkpoint's optimizer and lr_scheduler record).
FRAMEWORK_IMPORTS = ("project", "torch.optim")
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# jsonargparse's words for an import its policy refused: "Importing 'model_utils.Net' is not allowed, …"
_REFUSED = re.compile(r"Importing '([^']+)' is not allowed")


def named_imports(config: object) -> set[str]:
    """The import paths a parsed config names as a class (``class_path``) or gives as a callable the parser imported
    (``lr_lambda: mymodule.f``), with the module each is defined in: what the user named, when ``config`` was
    parsed from the user's configs and flags alone. A string that is only a value (``forecast.csv``) is not one."""
    if isinstance(config, jsonargparse.Namespace):
        config = config.as_dict()
    if isinstance(config, dict):
        found = set().union(*(named_imports(value) for value in config.values()))
        class_path = config.get("class_path")
        if isinstance(class_path, str) and _DOTTED_NAME.fullmatch(class_path):
            found |= {class_path, *_defined_at(loaded_class(class_path))}
        return found
    if isinstance(config, (list, tuple)):
        return set().union(*(named_imports(value) for value in config))
    return _defined_at(config) if callable(config) or inspect.ismodule(config) else set()


def _defined_at(value: object) -> set[str]:
    """Where a class, function or module is defined (jsonargparse checks that path too, so that an allowed module's
    re-export of a denied function does not pass)."""
    if inspect.ismodule(value):
        return {value.__name__}
    module, name = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    return {f"{module}.{name}"} if isinstance(module, str) and isinstance(name, str) else set()


@contextlib.contextmanager
def import_policy_kept() -> Iterator[None]:
    """jsonargparse's import policy as it was before, whatever was set inside: a process may run several commands (a
    search's trials, the tests, a notebook loading checkpoints)."""
    settings = jsonargparse_settings.parsing_settings  # jsonargparse has no public way to take an entry back
    kept = {name: settings[name] for name in ("import_path_verdicts", "import_paths_enforced")}
    try:
        yield
    finally:
        settings.update(kept)


def enforce_default_denylist() -> None:
    """From now on (inside ``import_policy_kept``), jsonargparse refuses the import paths it denies by default (``os``,
    ``subprocess``, ``builtins.eval``, …) instead of warning: for the parse of the user's own configs and flags."""
    jsonargparse.set_parsing_settings(import_path_denylist=[])


def allow_only(named: Iterable[str]) -> None:
    """From now on (inside ``import_policy_kept``), jsonargparse imports nothing but ``FRAMEWORK_IMPORTS`` and
    ``named`` (the user's own classes and callables): for any parse that reads a checkpoint's settings."""
    allowed = sorted({*FRAMEWORK_IMPORTS, *(path for path in named if _DOTTED_NAME.fullmatch(path))})
    jsonargparse.set_parsing_settings(import_path_denylist=["*"], import_path_allowlist=allowed)


def refused_import(error: BaseException | None) -> str | None:
    """The import path jsonargparse's policy refused somewhere in ``error``'s chain of causes, or None."""
    while error is not None:
        if isinstance(error, jsonargparse_settings.ImportDenied) and (refused := _REFUSED.search(str(error))):
            return refused[1]
        error = error.__cause__ or error.__context__
    return None
