"""Importing a class that a file names, without running code that nobody chose.

A checkpoint records class paths (the model's, the data's, the network's), and importing a module runs its top-level
code: a checkpoint must not be able to pick that code. So a class path read from a checkpoint is imported only when
it is this project's own (``project.…``), when its module is already imported (a Python caller that built the
class), or when the user named the same class path (``--model.network.class_path=…`` in the CLI, ``--trust …`` in
the tools). Anything else is refused in one line, before any import and before any folder is searched.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Collection

from project.errors import InputError

OWN_PACKAGE = "project"
_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)+")


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


def checkpoint_class(class_path: object, what: str, where: str, trusted: Collection[str], trust_option: str) -> object:
    """The class a checkpoint names as its ``what`` ("network", "model class", "data class"), imported under the rule
    above. ``where`` prefixes the one-line errors (the checkpoint's path and a colon); ``trust_option`` is how the
    caller's user names a class to trust it (``--trust``, or the CLI's option for ``what``)."""
    if not isinstance(class_path, str) or not _DOTTED_NAME.fullmatch(class_path):
        raise InputError(f"{where}its {what} {class_path!r} is not a dotted class path (package.module.Class)")
    module_name, _, name = class_path.rpartition(".")
    own = module_name == OWN_PACKAGE or module_name.startswith(OWN_PACKAGE + ".")
    if not (own or module_name in sys.modules or class_path in trusted):
        raise InputError(
            f"{where}the checkpoint names the {what} {class_path}, outside this project; nothing was imported: "
            f"pass {trust_option}={class_path} to trust it"
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
