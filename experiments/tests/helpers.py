"""What the studies' test modules share, so that none imports another: a results file as experiments.your_data
writes it, and this repository's git history where there is one."""

import subprocess
from pathlib import Path

from tests.helpers import REPOSITORY

WITHOUT = "python -m experiments.your_data --seeds 0 1 2"


def your_data_file(path: Path, validation: dict[str, list[float]], command: str = WITHOUT) -> Path:
    """A results file as experiments.your_data writes its stamp (``command``: NoPath's runs unless it names a path)
    and its per-seed lines (test MAE: the validation MAE plus 1)."""
    lines = [f"Written by `{command}` at commit x.", ""]
    for dataset, values in validation.items():
        for split, offset in (("validation", 0.0), ("test", 1.0)):
            seeds = ", ".join(f"seed {seed}: {value + offset:.3f}" for seed, value in enumerate(values))
            lines.append(f"- {dataset}, {split} model MAE: {seeds}")
    path.write_text("\n".join(lines) + "\n")
    return path


def history() -> list[str] | None:
    """Every commit of HEAD's history, or None where git cannot tell: no git, a copy without .git, a shallow clone
    (CI's checkout)."""
    try:
        shallow = subprocess.run(["git", "rev-parse", "--is-shallow-repository"], cwd=REPOSITORY, capture_output=True)
        if shallow.returncode != 0 or shallow.stdout.strip() != b"false":
            return None
        return subprocess.run(
            ["git", "rev-list", "HEAD"], cwd=REPOSITORY, capture_output=True, text=True
        ).stdout.split()
    except FileNotFoundError:
        return None
