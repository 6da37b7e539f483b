"""Importing a class that a file names, without running code that nobody chose.

Importing a module runs its code, so a class path read from a checkpoint is imported only when it is this project's
(``project.…``), torch's for an optimizer or scheduler, or one the user named for this process (``trust``: the CLI's
class options, the tools' ``--trust``); Python code may also load a class it imported itself. Anything else is one
line, before any import.
"""

from __future__ import annotations

import importlib
import inspect
import re
import sys
from collections.abc import Iterable, Mapping

from project.errors import InputError

OWN_PACKAGE = "project"
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")
# How a user of the CLI trusts a class a checkpoint names, by its kind: the option that names it.
CLI_TRUST = {
    "network": "--model.network.class_path",
    "distribution": "--model.network.init_args.distribution",
    "regime": "--model.regime",
    "optimizer": "--model.optimizer",
    "lr_scheduler": "--model.lr_scheduler",
    "model class": "--model",
    "data class": "--data",
    "data split": "--data.split",
}
# Kinds of class a checkpoint may also name from these packages: torch's optimizers and schedulers.
FRAMEWORK_PACKAGES = {"optimizer": "torch.optim", "lr_scheduler": "torch.optim"}
_trusted: set[str] = set()  # class paths the user named for this process
_how_to_trust: dict[str, str] = {}  # kind → the option that trusts it (the CLI's, or a tool's --trust)


def trust(class_paths: Iterable[str], how: Mapping[str, str] | None = None) -> None:
    """Let a checkpoint name these classes in this process: the user named them (``how`` says how, for messages)."""
    _trusted.update([class_paths] if isinstance(class_paths, str) else class_paths)  # a string is one name
    _how_to_trust.update(how or {})


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
    own = f"{module_name}.".startswith((f"{OWN_PACKAGE}.", f"{FRAMEWORK_PACKAGES.get(what, OWN_PACKAGE)}."))
    if not (own or class_path in _trusted or (allow_imported and module_name in sys.modules)):
        how = f"call project.imports.trust(['{class_path}'])"  # from Python; a command names its own option
        if what in _how_to_trust:
            how = f"pass {_how_to_trust[what]}={class_path}"
        raise InputError(
            f"{where}the checkpoint names the {what} {class_path}, outside this project; nothing was imported: {how} "
            "to trust it"
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
