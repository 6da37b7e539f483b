"""Importing what a file names, without running code that nobody chose.

Importing a module runs its code, so an import path read from a checkpoint (a class path at any depth, a callable such
as a scheduler's ``lr_lambda``, a number given as a path) is imported only when it is this project's (``project.…``),
torch's in the optimizer or scheduler settings, or one the user named for this process (``trust``: what the CLI's
configs and flags name, the tools' ``--trust``); Python code may also load a class it imported itself. Anything else is
one line, before any import.

Two checks hold this: ``check_recorded_imports`` walks every string a checkpoint records, at any depth and whatever
its key, and names the first it refuses; ``parser_never_imports`` then tells jsonargparse (which LightningCLI and
Lightning's ``load_from_checkpoint`` parse the settings with) to refuse every other dotted string the checkpoint holds,
so a value the walk did not take for an import path is refused where the parser would import it.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import re
import sys
from collections.abc import Iterable, Iterator, Mapping

import jsonargparse
import torch
from jsonargparse import _common as jsonargparse_settings

from project.errors import InputError

OWN_PACKAGE = "project"
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# How a user of the CLI trusts a class a checkpoint names, by its kind: the option that names it.
CLI_TRUST = {
    "network": "--model.network.class_path",
    "distribution": "--model.network.init_args.distribution",
    "baseline_path": "--model.network.init_args.baseline_path",
    "regime": "--model.regime",
    "optimizer": "--model.optimizer",
    "lr_scheduler": "--model.lr_scheduler",
    "model class": "--model",
    "data class": "--data",
    "data split": "--data.split",
    # Any other import path a checkpoint records: the option at the place it sits.
    "setting": "--{location}",
}
# Kinds of class a checkpoint may also name from these packages: torch's optimizers and schedulers.
FRAMEWORK_PACKAGES = {"optimizer": "torch.optim", "lr_scheduler": "torch.optim"}
_trusted: set[str] = set()  # class paths the user named for this process
_how_to_trust: dict[str, str] = {}  # kind → the option that trusts it (the CLI's, or a tool's --trust)


def trust(class_paths: Iterable[str], how: Mapping[str, str] | None = None) -> None:
    """Let a checkpoint name these import paths in this process: the user named them (``how`` says how, for
    messages); a string is one path."""
    _trusted.update([class_paths] if isinstance(class_paths, str) else class_paths)
    _how_to_trust.update(how or {})


def dotted_names(tree: object) -> set[str]:
    """Every string at any depth of ``tree`` (dicts, lists, a jsonargparse Namespace) that reads as an import path:
    what a user's configs and flags name, trusted for the run."""
    if isinstance(tree, jsonargparse.Namespace):
        tree = tree.as_dict()
    if isinstance(tree, dict):
        return set().union(*(dotted_names(value) for value in tree.values()))
    if isinstance(tree, (list, tuple)):
        return set().union(*(dotted_names(value) for value in tree))
    return {tree} if isinstance(tree, str) and _DOTTED_NAME.fullmatch(tree) else set()


def import_paths_in(tree: object, location: str = "") -> Iterator[tuple[str, str]]:
    """Every string at any depth of a checkpoint's settings (dict values, list items) that the parser could import,
    with where it sits (``lr_scheduler.init_args.lr_lambda``): a dotted name whose top-level module Python would find
    without running it. Other dotted strings (a column named ``sales.eur``) import nothing, whatever the parser does."""
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from import_paths_in(value, f"{location}.{key}" if location else str(key))
    elif isinstance(tree, (list, tuple)):
        for index, value in enumerate(tree):
            yield from import_paths_in(value, f"{location}[{index}]")
    elif isinstance(tree, str) and _DOTTED_NAME.fullmatch(tree) and _findable(tree.partition(".")[0]):
        yield location, tree


def _findable(top_level: str) -> bool:
    if top_level in sys.modules:
        return True
    try:  # a top-level name is looked up on sys.path without importing anything
        return importlib.util.find_spec(top_level) is not None
    except (ImportError, ValueError):
        return True


def check_recorded_imports(
    settings: dict, section: str, where: str, allow_imported: bool = False, skip: Iterable[str] = ()
) -> set[str]:
    """The import paths ``settings`` (a checkpoint's ``section``: ``model`` or ``data``) records, each checked under
    the rule above; the first refused is one line and nothing is imported. ``skip``: top-level settings left out (a
    command that never builds them). Returns the dotted strings of the settings that did not pass (a column named
    ``sales.eur``, a path whose module Python could not find), which the parser must never import:
    ``parser_never_imports``."""
    passed = set()
    # Lightning's own keys (``_instantiator``) are Lightning's to check; ``_class_path`` is the recorded class.
    recorded = {k: v for k, v in settings.items() if k not in set(skip) and (k == "_class_path" or k[:1] != "_")}
    for location, path in import_paths_in(recorded):
        what = _kind_at(location, section)
        if not _allowed(path, location.partition(".")[0], allow_imported):
            raise InputError(
                f"{where}the checkpoint names the {what} {path}"
                f"{f' (at {section}.{location})' if what == 'setting' else ''}, outside this project; nothing was "
                f"imported: {_how_to_trust_it(what, path, f'{section}.{location}')} to trust it"
            )
        passed.add(path)
    return dotted_names(recorded) - passed


def _kind_at(location: str, section: str) -> str:
    """What an import path at ``location`` is, in the words of ``CLI_TRUST``."""
    if location == "_class_path":
        return f"{section} class"
    component = location.removesuffix(".class_path")
    if component == "split":
        return "data split"
    if component.startswith("network.init_args."):  # the network's own components: its distribution, its path
        component = component.removeprefix("network.init_args.")
    return component if component in CLI_TRUST else "setting"


def _allowed(path: str, top_setting: str, allow_imported: bool) -> bool:
    """The rule above for one import path recorded under ``top_setting`` (a kind of ``CLI_TRUST`` or a setting's
    name: the optimizer's and scheduler's may also be torch's)."""
    module_name, _, name = path.rpartition(".")
    framework = FRAMEWORK_PACKAGES.get(top_setting, OWN_PACKAGE)
    if f"{path}.".startswith((f"{OWN_PACKAGE}.", f"{framework}.")) or path in _trusted:
        return True
    # A class the caller imported itself; its module has run already, and a function (os._exit) is not a class.
    return allow_imported and isinstance(getattr(sys.modules.get(module_name), name, None), type)


def _how_to_trust_it(what: str, path: str, location: str) -> str:
    if what not in _how_to_trust:
        return f"call project.imports.trust(['{path}'])"  # from Python; a command names its own option
    option = _how_to_trust[what].format(location=location)
    if "[" in option:  # a list item has no option of its own
        return f"name {path} in a config, at {location},"
    return f"pass {option}={path}"


@contextlib.contextmanager
def parser_import_policy_kept() -> Iterator[None]:
    """jsonargparse's import policy as it was before, whatever ``parser_never_imports`` set inside: a process may run
    several commands (a search's trials, the tests)."""
    settings = jsonargparse_settings.parsing_settings  # jsonargparse has no public way to take an entry back
    kept = {name: settings[name] for name in ("import_path_verdicts", "import_paths_enforced")}
    try:
        yield
    finally:
        settings.update(kept)


def parser_never_imports(paths: Iterable[str]) -> None:
    """From now on (inside ``parser_import_policy_kept``), jsonargparse refuses to import any of ``paths``: the choke
    point where a value the checkpoint records would be imported, for what ``check_recorded_imports`` did not pass.
    Its default denylist (``os``, ``subprocess``, …) is enforced too; what the user's configs name is untouched."""
    if denied := sorted(paths):
        jsonargparse.set_parsing_settings(import_path_denylist=denied)


def imported_class(class_path: str) -> object | None:
    """What the dotted ``class_path`` (``package.module.Class``) names, or None when it cannot be imported: for class
    paths the user gave (a config or the command line), which may run their own module's code."""
    if not isinstance(class_path, str) or not _DOTTED_NAME.fullmatch(class_path):
        return None
    module_name, _, name = class_path.rpartition(".")
    try:
        return getattr(importlib.import_module(module_name), name)
    except Exception:  # a user's module may raise anything while importing; the caller reports the name
        return None


def default_of(class_path: type | str | None, argument: str) -> object:
    """The default of the constructor ``argument`` of a class, or of the class a config names; None when it has
    none."""
    cls = class_path if isinstance(class_path, type) else imported_class(class_path) if class_path else None
    parameter = inspect.signature(cls).parameters.get(argument) if isinstance(cls, type) else None
    return None if parameter is None or parameter.default is parameter.empty else parameter.default


def checkpoint_class(class_path: object, what: str, where: str, allow_imported: bool = False) -> object:
    """The class a checkpoint names as its ``what`` (a key of ``CLI_TRUST``), imported under the rule above;
    ``allow_imported``: also from a module the caller imported. ``where`` prefixes the errors."""
    if not isinstance(class_path, str) or not _DOTTED_NAME.fullmatch(class_path):
        raise InputError(f"{where}its {what} {class_path!r} is not a dotted class path (package.module.Class)")
    module_name, _, name = class_path.rpartition(".")
    if not _allowed(class_path, what, allow_imported):
        raise InputError(
            f"{where}the checkpoint names the {what} {class_path}, outside this project; nothing was imported: "
            f"{_how_to_trust_it(what, class_path, what)} to trust it"
        )
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # ImportError, or whatever the module's own code raised
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else ""
        raise InputError(
            f"{where}its {what} {class_path} cannot be imported ({type(error).__name__}{': ' if reason else ''}"
            f"{reason}); put its module on PYTHONPATH"
        ) from None
    found = getattr(module, name, None)
    if found is None:
        raise InputError(f"{where}its {what} {class_path} cannot be imported: {module_name} has no {name}")
    return found


def is_component_spec(spec: object) -> bool:
    """Whether ``spec`` is a component as a checkpoint records it: ``{"class_path": "package.Class", ...}``."""
    return isinstance(spec, dict) and isinstance(spec.get("class_path"), str) and "." in spec["class_path"]


def component_class(spec: dict, what: str, base: type, where: str = "", allow_imported: bool = False) -> type:
    """The class ``spec`` names as the checkpoint's ``what``, imported under the rule above and refused in one line
    unless it is ``base`` or a subclass of it."""
    cls = checkpoint_class(spec["class_path"], what, where, allow_imported)
    if not (isinstance(cls, type) and issubclass(cls, base)):
        expected = "an nn.Module" if base.__qualname__ == "Module" else f"a {base.__module__}.{base.__qualname__}"
        raise InputError(f"{where}its {what} {spec['class_path']} is not {expected} subclass")
    return cls


def built_component(spec: dict, what: str, base: type, where: str = "", allow_imported: bool = False) -> object:
    """The component ``spec`` (``{"class_path": ..., "init_args": {...}}``) names, built from its arguments: its class
    checked by ``component_class``."""
    cls = component_class(spec, what, base, where, allow_imported)
    try:
        return cls(**(spec.get("init_args") or {}))
    except InputError as error:  # the class refused a recorded setting: say whose record it is
        raise InputError(f"{where}its {what} {spec['class_path']}: {error}" if where else str(error)) from None
    except TypeError as error:  # settings another class (or another version of it) takes
        raise InputError(
            f"{where}its {what} {spec['class_path']} does not take the settings recorded for it ({error}); was it "
            "written by another version, or edited?"
        ) from None


@contextlib.contextmanager
def checkpoint_imports_checked(checkpoint_path: object, key: str, section: str) -> Iterator[None]:
    """Around Lightning's ``load_from_checkpoint``: the import paths the checkpoint's ``key`` settings record are
    checked first (classes the caller imported allowed), and its parser imports none of the others."""
    recorded = torch.load(checkpoint_path, map_location="cpu", weights_only=True)
    settings = recorded.get(key, {}) if isinstance(recorded, dict) else {}
    refused = check_recorded_imports(settings, section, f"{checkpoint_path}: ", allow_imported=True)
    with parser_import_policy_kept():
        parser_never_imports(refused)
        yield
