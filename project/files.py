"""Writing outputs without losing anything: an existing file survives unless ``--overwrite``, an input never (the
user's data, checkpoint or config), a bad destination is refused before the work, and a file appears whole or not at
all (``check_output``, ``write_atomically``). Settings files are read bounded (``bounded_yaml``): a hostile file is
one line, not minutes of work.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from project.errors import InputError

Inputs = Iterable[str | Path | None]
NAME_MAX = 255  # bytes in one file or folder name, on Linux, macOS and Windows alike
# A settings file's bounds: far above any config, far below what takes a machine's memory (a YAML alias "bomb" of
# nine nested aliases expands to 9**9 values while its text is a few hundred bytes).
MAX_SETTINGS_CHARACTERS = 1_000_000
MAX_SETTINGS_VALUES = 100_000
MAX_SETTINGS_DEPTH = 100  # levels of nesting: a config has a handful


def check_output(path: str | Path, inputs: Inputs = (), overwrite: bool = False) -> Path:
    """``path`` as a Path, after refusing (one line) an output that is one of ``inputs``, that is a folder, that
    already exists and may not be replaced, or whose folder cannot be written. An input is refused even with
    ``overwrite``: it is the user's data (or checkpoint, config, search space, study database)."""
    path = check_name_lengths(path)
    for source in inputs:
        if source is not None and _same_file(path, Path(source)):
            raise InputError(f"{path}: the output would replace the input {source}; choose another output path")
    if path.is_dir():
        raise InputError(f"{path} is a folder; expected the path of a file to write")
    if path.exists() and not overwrite:
        raise InputError(f"{path} already exists; choose another output path or pass --overwrite to replace it")
    check_folder_writable(path.parent)
    return path


def write_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` and rename the temporary file (beside ``path``, named for this process) to ``path``:
    an interrupted write leaves the old file or none, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}{path.suffix}")  # the suffix a writer may go by
    try:
        write(temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return path


def check_name_lengths(path: str | Path, option: str = "") -> Path:
    """``path`` as a Path, after refusing one with a name longer than the file system allows (255 bytes a name):
    asking the system about it would fail with an error no user should read."""
    path = Path(path)
    longest = max(path.parts, key=lambda part: len(os.fsencode(part)), default="")
    size = len(os.fsencode(longest))
    if size > NAME_MAX:
        named = f"{option}={str(path)[:60]}…" if option else f"{str(path)[:60]}…"
        raise InputError(
            f"{named}: the name {longest[:40]}… has {size} bytes; a file or folder name has at most {NAME_MAX}"
        )
    return path


def check_folder_writable(folder: str | Path, option: str = "") -> None:
    """Refuse a destination whose nearest existing folder is a file or cannot be written (it would be created
    below it), so that a run fails before its work rather than after. ``option`` names the setting it came from."""
    folder = check_name_lengths(folder, option)
    named = f"{option}={folder}" if option else str(folder)
    advice = "choose another folder" if option else "choose another output path"
    existing = folder
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{named}: {existing} is a file, not a folder; {advice}")
    try:  # a probe file rather than os.access, which answers yes to root and knows nothing of read-only mounts
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise InputError(f"{named}: cannot write into {existing} ({reason}); {advice}") from None


def bounded_yaml(text: str, source: str = "settings", load: Callable[[str], object] = yaml.safe_load) -> object:
    """``text`` read as YAML (or JSON, with ``load=json.loads``) by ``load``, refused in one line when longer than
    ``MAX_SETTINGS_CHARACTERS``, when it does not parse, when it nests deeper than ``MAX_SETTINGS_DEPTH`` or when it
    expands (through aliases) to more than ``MAX_SETTINGS_VALUES`` values; ``source`` names it in the messages."""
    if len(text) > MAX_SETTINGS_CHARACTERS:
        raise InputError(f"{source}: {len(text)} characters; a settings file holds at most {MAX_SETTINGS_CHARACTERS}")
    nested = f"{source}: nested deeper than {MAX_SETTINGS_DEPTH} levels; a settings file nests at most that deep"
    try:
        value = load(text)
    except yaml.YAMLError as error:
        reason = " ".join(str(error).split())[:160]
        raise InputError(f"{source}: not a YAML file this project reads ({reason})") from None
    except json.JSONDecodeError as error:
        raise InputError(f"{source}: not a JSON file this project reads ({error})") from None
    except RecursionError:  # the parsers recurse once a level
        raise InputError(nested) from None
    check_settings_bounds(value, source)
    return value


def check_settings_bounds(value: object, source: str = "settings") -> None:
    """Refuse in one line settings (a config's, a checkpoint's) that nest deeper than ``MAX_SETTINGS_DEPTH`` or hold
    more than ``MAX_SETTINGS_VALUES`` values, before anything walks them recursively (the parser, a search)."""
    nested = f"{source}: nested deeper than {MAX_SETTINGS_DEPTH} levels; a settings file nests at most that deep"
    pending, seen = [(value, 1)], 0
    while pending:  # each value once per path to it: what anything that walks the settings would visit
        item, depth = pending.pop()
        seen += 1
        if seen > MAX_SETTINGS_VALUES:
            raise InputError(
                f"{source}: expands to more than {MAX_SETTINGS_VALUES} values (YAML aliases that repeat each other?)"
            )
        if depth > MAX_SETTINGS_DEPTH:  # what walks the settings recursively (the parser, a search) stays in bounds
            raise InputError(nested)
        if isinstance(item, dict):
            pending.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, (list, tuple)):
            pending.extend((child, depth + 1) for child in item)


def _same_file(a: Path, b: Path) -> bool:
    try:
        return os.path.samefile(a, b) if a.exists() and b.exists() else a.resolve() == b.resolve()
    except OSError:  # an input whose name the system refuses (too long) is no file this output could replace
        return False
