"""The embedded data, so that the quickstart needs no download: a deterministic hourly series and a panel, built
so that a forecaster has something to learn that a repeat-last forecast cannot (daily and weekly cycles, a trend,
channels that follow others with a lag, autocorrelated noise, a regime change two thirds of the way through).
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


def synthetic_panel(seed: int = 0, future_days: int = 14) -> pd.DataFrame:
    """Daily sales of 3 products in 12 stores (36 series of 545 to 910 days), in long format. Columns: ``store``,
    ``product`` (together they identify a series), ``date``, ``sales`` (the target), ``footfall`` (visitors, observed
    only up to today: a past covariate), ``price`` and ``promotion`` (planned in advance: future covariates),
    ``region`` (categorical) and ``store_size`` (numeric), constant per store (static covariates). Sales fall with the
    price (elasticity 1.5) and rise by 60% in promotion weeks, so a model that reads the planned prices beats one that
    does not. Each series ends with ``future_days`` rows whose sales are empty and whose prices and promotions are
    known: what ``predict`` forecasts."""
    rng = np.random.default_rng(seed)
    end = pd.Timestamp("2024-06-30")
    frames = []
    for store in range(12):
        region = ("north", "south", "east", "west")[store % 4]
        size = round(float(rng.uniform(1.0, 3.0)), 2)
        opened = int(rng.integers(545, 911))
        dates = pd.date_range(end=end + pd.Timedelta(days=future_days), periods=opened + future_days, freq="D")
        day = np.arange(len(dates), dtype=np.float64)
        weekly = 1 + 0.3 * np.sin(2 * np.pi * (dates.day_of_week.to_numpy() - 1) / 7)
        yearly = 1 + 0.15 * np.sin(2 * np.pi * dates.day_of_year.to_numpy() / 365.25)
        footfall = 400 * size * weekly * yearly * np.exp(_autoregressive(rng, len(day), 0.9, 0.05))
        for product_index, product in enumerate(("bread", "coffee", "cheese")):
            base_price = (2.0, 5.0, 9.0)[product_index]
            promotion = (rng.random(len(day) // 7 + 1) < 0.12).repeat(7)[: len(day)].astype(np.float64)
            drift = np.exp(np.cumsum(rng.normal(0, 0.004, len(day))))
            price = np.round(base_price * drift * np.where(promotion > 0, 0.8, 1.0), 2)
            level = (60, 25, 12)[product_index] * size * (1 + 0.1 * product_index * (region == "south"))
            demand = level * weekly * yearly * (price / (base_price * drift)) ** -1.5 * (1 + 0.6 * promotion)
            sales = demand * (footfall / footfall.mean()) ** 0.3 * np.exp(rng.normal(0, 0.08, len(day)))
            sales[-future_days:] = np.nan
            frames.append(
                pd.DataFrame(
                    {
                        "store": f"S{store + 1:02d}",
                        "product": product,
                        "date": dates,
                        "sales": np.round(sales, 1),
                        "footfall": np.where(day < len(day) - future_days, np.round(footfall), np.nan),
                        "price": price,
                        "promotion": promotion,
                        "region": region,
                        "store_size": size,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)
