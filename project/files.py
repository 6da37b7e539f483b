"""Writing outputs without losing anything: an existing file survives unless the user asks for it to be replaced,
an output never replaces an input, and a file appears whole or not at all."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from project.errors import InputError


def check_output(path: str | Path, inputs: Iterable[str | Path | None] = (), overwrite: bool = False) -> Path:
    """``path`` as a Path, after refusing (one line) an output that is one of ``inputs`` or that already exists
    and may not be replaced. An input is refused even with ``overwrite``: it is the user's data."""
    path = Path(path)
    for source in inputs:
        if source is not None and _same_file(path, Path(source)):
            raise InputError(f"{path}: the output would replace the input {source}; choose another output path")
    if path.exists() and not overwrite:
        raise InputError(f"{path} already exists; choose another output path or pass --overwrite to replace it")
    return path


def write_atomically(path: str | Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(temporary)`` and rename the temporary file to ``path``: an interrupted write leaves the old
    file or none, never half of one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=path.suffix, dir=path.parent)
    os.close(handle)
    try:
        write(Path(temporary))
        os.chmod(temporary, 0o666 & ~_umask())  # mkstemp makes it private; the output is an ordinary file
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _same_file(a: Path, b: Path) -> bool:
    if a.exists() and b.exists():
        return os.path.samefile(a, b)
    return a.resolve() == b.resolve()
