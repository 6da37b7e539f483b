"""The embedded default data: a deterministic hourly series with five related channels.

It exists so that the quickstart needs no download, and it is built so that a forecaster has something to learn
that a repeat-last forecast cannot: daily and weekly cycles, a slow trend, channels that follow other channels
with a lag, autocorrelated noise, and a regime change two thirds of the way through.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

CHANNELS = ("load", "temperature", "lagged_load", "pressure", "regime")


def synthetic_series(n_rows: int = 10_000, seed: int = 0) -> pd.DataFrame:
    """A ``timestamp`` column (hourly, from 2024-01-01) and the five channels of ``CHANNELS``."""
    rng = np.random.default_rng(seed)
    hours = np.arange(n_rows + 24, dtype=np.float64)  # 24 extra leading hours feed the lagged channels
    daily, weekly = np.sin(2 * np.pi * hours / 24), np.sin(2 * np.pi * hours / 168)

    load = 10 + 3 * daily + 1.5 * weekly + 2e-4 * hours + _autoregressive(rng, len(hours), 0.8, 0.3)
    temperature = 20 + 5 * np.sin(2 * np.pi * (hours - 6) / 24) + 0.5 * weekly + rng.normal(0, 0.4, len(hours))
    lagged_load = 0.6 * np.roll(load, 3) + 0.3 * temperature + rng.normal(0, 0.2, len(hours))
    pressure = (
        1000 + 4 * np.roll(weekly, 12) - 0.5 * np.roll(temperature, 6) + _autoregressive(rng, len(hours), 0.95, 0.2)
    )
    after_change = hours >= 24 + int(0.65 * n_rows)
    regime = (
        np.where(after_change, 4.0, 2.0) * daily + np.where(after_change, 3.0, 0.0) + rng.normal(0, 0.3, len(hours))
    )

    values = np.stack([load, temperature, lagged_load, pressure, regime], axis=1)[24:]
    frame = pd.DataFrame(values, columns=list(CHANNELS))
    frame.insert(0, "timestamp", pd.date_range("2024-01-01", periods=n_rows, freq="h"))
    return frame


def _autoregressive(rng: np.random.Generator, length: int, coefficient: float, scale: float) -> np.ndarray:
    noise = rng.normal(0, scale, length)
    series = np.empty(length)
    series[0] = noise[0]
    for i in range(1, length):
        series[i] = coefficient * series[i - 1] + noise[i]
    return series
