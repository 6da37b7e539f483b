"""Where a results table comes from: the command that wrote it, the commit the work ran at, the machine and the
date, as one line above the table. The benchmark, the search and the studies of ``experiments/`` stamp with it.

The command holds no absolute path: one inside the repository is written relative to its root
(``/home/me/repo/data/ETTh1.csv`` → ``data/ETTh1.csv``), any other as ``<outside>/`` and its last part
(``/tmp/r7/logs`` → ``<outside>/logs``), so a stamp names no one's folders and reads the same on every machine."""

from __future__ import annotations

import os
import platform
import re
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from functools import cache
from pathlib import Path

import torch

REPOSITORY = Path(__file__).resolve().parents[2]
# An absolute path in a command-line argument: alone, after an option's "=" or inside a list; not the "/" of
# "val/loss" or "1/2", of a URL's "//" or of a placeholder already written ("<outside>/logs").
ABSOLUTE_PATH = re.compile(r"(?<![\w.~:/<>-])/[^\s,;'\"\]\}\)]*")


def hardware() -> str:
    """The device the figures came from. A CPU's model and the instruction set torch's kernels use are named:
    training repeats itself bit for bit on one machine, but not across kernel builds (experiments/README.md)."""
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    threads = torch.get_num_threads()
    cpuinfo = Path("/proc/cpuinfo")
    lines = cpuinfo.read_text().splitlines() if cpuinfo.is_file() else []
    model = next((line.partition(":")[2].strip() for line in lines if line.startswith("model name")), "")
    described = ", ".join(filter(None, [model, torch.backends.cpu.get_cpu_capability()]))
    return f"{platform.machine()} CPU ({described}), {threads} thread{'s' if threads > 1 else ''}"


@cache
def run_commit() -> str:
    """The commit this process runs (``+changes`` when the working tree had uncommitted changes), read once: at the
    first training run, or when a tool asks before its work, so that a commit made while the runs go on does not
    take their stamp."""
    commit = _git("rev-parse", "--short", "HEAD") or "unknown"
    if _git("status", "--porcelain", "--untracked-files=no"):
        commit += "+changes"
    return commit


def stamp(argv: list[str] | None = None) -> str:
    """Where a table comes from: the command that wrote it, the commit the work ran at (``run_commit``), the
    machine and the date."""
    arguments = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m", _module(), *(shlex.quote(portable(argument)) for argument in arguments)])
    commit = run_commit()
    machine = f"{hardware()}, {platform.system()}, torch {torch.__version__}"
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return f"Written by `{command}` at commit {commit} on {machine}, {date}."


def portable(argument: str, root: Path = REPOSITORY) -> str:
    """A command-line argument with each absolute path written relative to ``root`` when inside it, else as
    ``<outside>/`` and its last part."""

    def written(match: re.Match) -> str:
        path = Path(os.path.normpath(match[0]))
        if path == root or path.is_relative_to(root):
            return path.relative_to(root).as_posix()
        return f"<outside>/{path.name}"

    return ABSOLUTE_PATH.sub(written, argument)


def _module() -> str:
    main_module = sys.modules["__main__"]
    spec = getattr(main_module, "__spec__", None)
    return spec.name if spec is not None else Path(sys.argv[0]).stem


def _git(*arguments: str) -> str:
    try:
        done = subprocess.run(["git", *arguments], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""
