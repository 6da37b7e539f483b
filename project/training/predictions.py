"""Writes ``predict`` forecasts to one CSV file, in original units, with series ids and timestamps."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter

from project.files import check_output, write_atomically


class ForecastWriter(BasePredictionWriter):
    """Writes every forecast of ``predict`` to a CSV in long format, one row per window and forecast step.

    Columns: the data's id columns (with several series), ``window`` (index of the prediction window), ``step``
    (1 … horizon), ``timestamp`` (when the data has a time column), then per target the point forecast (its name)
    and, for a model with a distribution, its quantiles (``<name>_q0.1``, …), all in the data's original units.
    Under DDP the processes' forecasts are gathered and written once, each window once.

    Args:
        output: CSV file to write. Empty: ``predictions.csv`` in the run's log folder. An existing file is replaced
            only with ``--overwrite``; the data file itself never is.
        overwrite: Replace an existing output file (set by the CLI's ``--overwrite``).
    """

    def __init__(self, output: str | None = None, overwrite: bool = False) -> None:
        super().__init__(write_interval="epoch")
        self.output, self.overwrite = output, overwrite
        self.inputs: list[str | Path | None] = []  # the run's other inputs (config files), set by the CLI

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        # Checked before predicting, so that a refused output costs nothing.
        if stage == "predict" and trainer.is_global_zero:
            inputs = [trainer.datamodule.hparams.get("source"), trainer.ckpt_path, *self.inputs]
            check_output(self._path(trainer), inputs, self.overwrite)

    def write_on_epoch_end(self, trainer: L.Trainer, pl_module, predictions, batch_indices) -> None:
        parts = {key: torch.cat([p[key] for p in predictions]).float().cpu() for key in predictions[0]}
        if trainer.world_size > 1:
            gathered = [None] * trainer.world_size
            torch.distributed.all_gather_object(gathered, parts)
            parts = {key: torch.cat([g[key] for g in gathered]) for key in parts}
        if not trainer.is_global_zero:
            return
        frame = forecast_frame(trainer.datamodule, parts, getattr(pl_module, "prediction_quantiles", []))
        path = self._path(trainer)
        write_atomically(path, lambda temporary: frame.to_csv(temporary, index=False))
        print(f"Wrote {frame['window'].nunique()} forecasts of {frame['step'].max()} steps to {path}")

    def _path(self, trainer: L.Trainer) -> Path:
        return Path(self.output) if self.output else Path(trainer.log_dir or ".") / "predictions.csv"


def forecast_frame(datamodule, parts: dict[str, torch.Tensor], quantile_levels: list[float]) -> pd.DataFrame:
    """Long-format table of the forecasts ``parts`` (window, series, point, and quantiles) of ``predict``."""
    dataset, panel = datamodule.predict_dataset(), datamodule.panel
    # Gathered from several processes, with windows repeated to pad their shards: each window once, in order.
    first_of = {int(window): index for index, window in reversed(list(enumerate(parts["window"].tolist())))}
    frames = []
    for window, index in sorted(first_of.items()):
        frame = pd.DataFrame(parts["point"][index].numpy(), columns=datamodule.target_names)  # (T, F)
        if "quantiles" in parts:  # (T, F, Q): a column per level and target, level by level
            columns = [f"{name}_q{level:g}" for level in quantile_levels for name in datamodule.target_names]
            frame[columns] = parts["quantiles"][index].transpose(1, 2).flatten(1).numpy()
        timestamps = dataset.target_timestamps(window)
        if timestamps is not None:
            frame.insert(0, "timestamp", timestamps[: len(frame)])
        frame.insert(0, "step", range(1, len(frame) + 1))
        frame.insert(0, "window", window)
        series = int(parts["series"][index])
        for position, column in enumerate(panel.roles.ids):
            frame.insert(position, column, panel.ids.iloc[series][column])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)
