"""What the studies' test modules share, so that none imports another: the pages that report results and the links
they cite, and a results file as experiments.your_data writes it."""

import re
from pathlib import Path

from tests.helpers import REPOSITORY

RESULTS_PAGE = REPOSITORY / "experiments" / "README.md"
PROSE_WITH_RESULTS = [RESULTS_PAGE, REPOSITORY / "docs" / "benchmark.md"]
WITHOUT = "python -m experiments.your_data --seeds 0 1 2"


def cited_results(page: Path) -> list[Path]:
    """The files under experiments/results/ that a page links to (a folder: every file in it) or embeds as a table
    block."""
    text, root = page.read_text(), (REPOSITORY / "experiments" / "results").resolve()
    targets = [page.parent / t for t in re.findall(r"\]\(([^)#]+?)(?:#[^)]*)?\)", text) if "://" not in t]
    targets += [REPOSITORY / name for name in re.findall(r"<!-- (experiments/results/[\w./-]+) -->", text)]
    files = []
    for target in (t.resolve() for t in targets):
        if target.is_relative_to(root):
            files += sorted(f for f in target.rglob("*") if f.is_file()) if target.is_dir() else [target]
    return files


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
