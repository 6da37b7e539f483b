"""What the results scripts (``project.tools.etth1``, ``project.tools.m4``) share: training through the CLI exactly as
a user would, finding a run's best checkpoint, timing it, evaluating it on a split, and writing a Markdown table."""

from __future__ import annotations

import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator
from torch.utils.data import DataLoader

from project.checkpoints import load_forecaster, read_checkpoint
from project.data import WindowDataModule
from project.files import write_atomically
from project.runs import find_runs
from project.training.metrics import central_interval, crps_from_samples

BASE_CONFIG = Path("configs/base.yaml")


def fit(configs: list[Path], arguments: list[str], logs: Path, name: str) -> tuple[Path, float]:
    """``python -m project.cli fit`` with ``configs`` stacked on base.yaml, logged as ``logs/name``; the run's folder
    and its wall-clock seconds (training and the test that follows)."""
    command = ["fit", "--config", str(BASE_CONFIG)]
    for config in configs:
        command += ["--config", str(config)]
    command += [f"--trainer.logger.init_args.save_dir={logs}", f"--trainer.logger.init_args.name={name}", *arguments]
    started = time.perf_counter()
    print("$ python -m project.cli", " ".join(command), flush=True)
    subprocess.run([sys.executable, "-m", "project.cli", *command], check=True)
    return find_runs(logs / name)[-1], time.perf_counter() - started


def run_seconds(run: str | Path) -> float:
    """Wall-clock seconds between the first and the last scalar the run logged (training to test)."""
    accumulator = EventAccumulator(str(run), size_guidance={SCALARS: 0})
    accumulator.Reload()
    times = [event.wall_time for tag in accumulator.Tags()["scalars"] for event in accumulator.Scalars(tag)]
    return max(times) - min(times) if times else 0.0


def preset_datamodule(preset: Path, data: Path, **overrides) -> WindowDataModule:
    """The data of the training runs, set up for testing: base.yaml's data settings, overridden by the preset's,
    the data file and ``overrides``."""
    base, stacked = (yaml.safe_load(path.read_text())["data"] for path in (BASE_CONFIG, preset))
    windows = WindowDataModule(**{**base, **stacked, "source": str(data), **overrides})
    windows.setup("test")
    return windows


def without_point_loss(arguments: list[str]) -> list[str]:
    """The arguments, plus ``--model.loss=null`` when they ask for a distribution and name no loss: the presets
    train point forecasts with MAE, and a distribution trains by its own likelihood or pinball loss."""
    given = {argument.split("=", 1)[0] for argument in arguments}
    wants_distribution = any(
        argument.startswith("--model.distribution=") and not argument.endswith("=none") for argument in arguments
    )
    return [*arguments, "--model.loss=null"] if wants_distribution and "--model.loss" not in given else arguments


def best_checkpoint(run: Path) -> Path:
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    return best


def best_epoch(checkpoint: Path) -> int:
    return int(read_checkpoint(checkpoint)["epoch"]) + 1


def forecast_split(checkpoint: Path, datamodule, split: str, batch_size: int = 256) -> dict[str, torch.Tensor]:
    """The checkpoint's forecasts of every window of ``split``: ``point``, ``target`` and ``context`` in original
    units (windows, …) and ``series`` (windows,); for a model with a distribution also, per value and on scaled
    values, ``crps``, ``covered`` (inside the model's central ``interval``) and ``width`` (of that interval)."""
    model = load_forecaster(checkpoint)
    parts: dict[str, list] = {}
    with torch.no_grad():
        for batch in DataLoader(datamodule.split(split), batch_size=batch_size):
            unscale = lambda x, b=batch: x * b["scale"] + b["loc"]  # noqa: E731
            forecast = model.forecast(batch, batch["target"].shape[1])
            found = {
                "point": unscale(forecast.point),
                "target": unscale(batch["target"]),
                "context": unscale(batch["context"]),
                "series": batch["series"],
            }
            if forecast.samples is not None:
                lower, upper = central_interval(forecast.samples, model.hparams.interval)
                found["crps"] = crps_from_samples(forecast.samples, batch["target"])
                found["covered"] = ((lower <= batch["target"]) & (batch["target"] <= upper)).float()
                found["width"] = upper - lower
            for key, value in found.items():
                parts.setdefault(key, []).append(value)
    return {key: torch.cat(values) for key, values in parts.items()}


def hardware() -> str:
    if torch.cuda.is_available():
        return torch.cuda.get_device_name()
    threads = torch.get_num_threads()
    return f"{platform.machine()} CPU, {threads} thread{'s' if threads > 1 else ''}"


def clock(row: dict) -> str:
    """A row's wall-clock column: published, measured (with the best epoch of a trained model), or not timed."""
    if row["model"].endswith("(published)"):
        return "published"
    if row.get("seconds") is None:
        return "–"
    seconds = row["seconds"]
    text = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"
    return text + (f" (best epoch {row['best_epoch']})" if row.get("best_epoch") else "")


def markdown_table(caption: str, header: list[str], rows: list[list[str]]) -> str:
    """A caption line and a Markdown table: the first column left-aligned, the others right-aligned."""
    lines = [caption, "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def write_table(path: Path, table: str) -> None:
    """Write the table (its path checked with ``check_output`` before the runs began) and print it."""
    write_atomically(path, lambda temporary: temporary.write_text(table))
    print(table)
