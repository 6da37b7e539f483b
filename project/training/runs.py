"""Read TensorBoard runs back: scalar curves, smoothing, noise, and a one-table summary.

    python -m project.training.runs lightning_logs/

prints one row per run (every folder holding event files) with its effective batch size, optimizer steps, the
step-to-step standard deviation of the training loss, and the last value of the main metrics. The notebook
``notebooks/loss_curves.ipynb`` uses the same functions to plot raw and smoothed loss curves.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator

from project.files import bounded_yaml
from project.training.regimes import regime_name

SUMMARY_METRICS = (
    "train/loss",
    "val/loss",
    "val/mse",
    "val/mae",
    "test/mse",
    "test/mae",
    "test/mae_repeat_last_original_units",
)


def find_runs(root: str | Path) -> list[Path]:
    """Every folder under ``root`` (or ``root`` itself) that holds TensorBoard event files, oldest first."""
    root = Path(root)
    folders = {path.parent for path in root.rglob("events.out.tfevents.*")}
    return sorted(folders, key=lambda folder: min(p.stat().st_mtime for p in folder.glob("events.out.tfevents.*")))


def read_scalars(run: str | Path) -> dict[str, pd.Series]:
    """All scalar curves of a run: tag → values indexed by step (the last value wins when a step repeats)."""
    accumulator = EventAccumulator(str(run), size_guidance={SCALARS: 0})
    accumulator.Reload()
    curves = {}
    for tag in accumulator.Tags()["scalars"]:
        events = accumulator.Scalars(tag)
        series = pd.Series([e.value for e in events], index=[e.step for e in events], name=tag)
        curves[tag] = series[~series.index.duplicated(keep="last")]
    return curves


def read_hyperparameters(run: str | Path) -> dict:
    """The run's ``hparams.yaml`` as written by Lightning's TensorBoardLogger (empty when there is none)."""
    path = Path(run) / "hparams.yaml"
    if not path.is_file():
        return {}
    return bounded_yaml(path.read_text(), str(path)) or {}


def smooth(values: np.ndarray | pd.Series, weight: float = 0.9) -> np.ndarray:
    """TensorBoard's smoothing: an exponential moving average, debiased so the start is not pulled to zero (pandas'
    ``ewm(adjust=True)`` divides by the weights' sum, which is exactly that debiasing)."""
    return pd.Series(np.asarray(values, dtype=np.float64)).ewm(alpha=1 - weight, adjust=True).mean().to_numpy()


def step_to_step_std(values: np.ndarray | pd.Series) -> float:
    """Standard deviation of the change between consecutive logged values: the curve's noise, not its trend."""
    values = np.asarray(values, dtype=np.float64)
    return float(np.std(np.diff(values))) if len(values) > 2 else float("nan")


def regime_label(spec: object) -> str | None:
    """A run's regime as its ``hparams.yaml`` records it (class_path and init_args): its registry name
    (``free_running_detach``), or its class's name for a regime of another class."""
    if not isinstance(spec, dict):
        return None
    return regime_name(spec) or str(spec.get("class_path", "")).rpartition(".")[2] or None


def summarize(root: str | Path) -> pd.DataFrame:
    """One row per run under ``root``: effective batch size, steps, loss noise and the last main metrics."""
    rows = []
    for run in find_runs(root):
        curves, hyperparameters = read_scalars(run), read_hyperparameters(run)
        train_loss = curves.get("train/loss", pd.Series(dtype=float))
        row = {
            "run": str(run.relative_to(root)) if run != Path(root) else run.name,
            "effective_batch_size": hyperparameters.get("effective_batch_size"),
            "regime": regime_label(hyperparameters.get("regime")),
            "steps": int(train_loss.index.max()) if len(train_loss) else 0,  # logged after each optimizer step
            "train/loss step-to-step std": step_to_step_std(train_loss),
        }
        row.update({metric: curves[metric].iloc[-1] if metric in curves else np.nan for metric in SUMMARY_METRICS})
        rows.append(row)
    return pd.DataFrame(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.training.runs", description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, nargs="?", default=Path("lightning_logs"), help="folder of runs")
    root = parser.parse_args(argv).root
    if not root.is_dir():
        parser.error(f"{root}: no such folder")
    table = summarize(root)
    if table.empty:
        parser.error(f"{root}: no TensorBoard event files found")
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.float_format", "{:.4g}".format):
        print(table.to_string(index=False))


if __name__ == "__main__":
    main()
