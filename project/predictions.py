"""Writes ``predict`` forecasts to a CSV file, in original units, with timestamps when the data has them."""

from __future__ import annotations

from pathlib import Path

import lightning as L
import pandas as pd
import torch
from lightning.pytorch.callbacks import BasePredictionWriter


class ForecastWriter(BasePredictionWriter):
    """Writes every forecast of ``predict`` to a CSV in long format, one row per window and forecast step.

    Columns: ``window`` (index of the prediction window), ``step`` (1 … horizon), ``timestamp`` (when the data
    has a time column), then one column per channel, in the data's original units (the scaling is undone).

    Args:
        output: CSV file to write. Empty: ``predictions.csv`` in the run's log folder. With several devices each
            process writes its own ``-rank<N>`` file.
    """

    def __init__(self, output: str | None = None) -> None:
        super().__init__(write_interval="epoch")
        self.output = output
        self.written: Path | None = None

    def write_on_epoch_end(self, trainer: L.Trainer, pl_module, predictions, batch_indices) -> None:
        datamodule = trainer.datamodule
        forecasts = datamodule.inverse_transform(torch.cat(predictions).float().cpu())  # (windows, horizon, F)
        windows = [index for batch in batch_indices[0] for index in batch]
        frames = []
        for window, forecast in zip(windows, forecasts):
            frame = pd.DataFrame(forecast.numpy(), columns=datamodule.feature_names)
            timestamps = datamodule.forecast_timestamps(window)
            if timestamps is not None:
                frame.insert(0, "timestamp", timestamps[: len(frame)])
            frame.insert(0, "step", range(1, len(frame) + 1))
            frame.insert(0, "window", window)
            frames.append(frame)
        path = Path(self.output) if self.output else Path(trainer.log_dir or ".") / "predictions.csv"
        if trainer.world_size > 1:
            path = path.with_name(f"{path.stem}-rank{trainer.global_rank}{path.suffix}")
        path.parent.mkdir(parents=True, exist_ok=True)
        pd.concat(frames, ignore_index=True).to_csv(path, index=False)
        self.written = path
        print(f"Wrote {len(windows)} forecasts of {forecasts.shape[1]} steps to {path}")
