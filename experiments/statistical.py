"""The statistical floor of the results tables: statsforecast's AutoETS and AutoTheta (and AutoARIMA where it is
quick enough), each fitted per series on the rows the model trains on, then forecasting from given origins.

    pip install -e .[baselines]      # statsforecast, an optional extra: the results tools need it, training does not

A model is fitted once per series on the series' first ``train_length`` values (the rows the transformer trains
on); a forecast from a later origin uses every value before the origin without refitting (statsforecast's
``forward``: the fitted parameters, the state run through the newer values), as the transformer reads its
look-back without retraining. Forecasts come back in the units they were given; the results tools score them with
the same metric code and on the same windows as every other row.

Each model is given the data's season (24 hourly, 52 weekly, 12 monthly, 7 daily), never a metric's: M4 scales
weekly MASE by the one-step naive error (seasonality 1), but AutoTheta given ``season_length=1`` does not
deseasonalise. statsforecast 2.1.1's AutoETS takes seasons above 24 too (R's ``ets`` refuses them) and chooses
among seasonal and non-seasonal forms by AICc. A row names its season (``statistical_label``).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader

from project.errors import InputError
from project.training.baselines import repeat_last, seasonal_naive
from project.training.metrics import unscale

STATISTICAL_MODELS = ("AutoETS", "AutoTheta", "AutoARIMA")


def statistical_label(name: str, season: int) -> str:
    """A statistical row's name with the season its models were fitted with: ``AutoTheta (season 52)``."""
    return f"{name} (season {season})"


def statistical_model(name: str, season: int):
    """An unfitted statsforecast model by name, for data with ``season`` steps per seasonal cycle (1: none)."""
    try:
        from statsforecast import models
    except ImportError as error:
        raise InputError("the statistical baselines need statsforecast: pip install -e .[baselines]") from error
    if name not in STATISTICAL_MODELS:
        raise InputError(f"unknown statistical model {name!r}; choose from {', '.join(STATISTICAL_MODELS)}")
    return getattr(models, name)(season_length=season)


def forecast_origins(
    name: str, values: np.ndarray, train_length: int, origins: Sequence[int], horizon: int, season: int
) -> np.ndarray:
    """``name`` fitted on ``values[:train_length]`` (one series), forecasting ``horizon`` steps from each origin:
    row ``i`` forecasts ``values[origins[i]:origins[i] + horizon]`` from ``values[:origins[i]]``. Every origin is
    at or after ``train_length``: a forecast never comes from a fit that saw its targets. (origins, horizon)"""
    values = np.asarray(values, dtype=np.float64)
    if min(origins, default=train_length) < train_length:
        raise InputError(f"an origin before the end of the training rows ({train_length}) would forecast seen rows")
    fitted = statistical_model(name, season).fit(values[:train_length])
    forecasts = np.empty((len(origins), horizon))
    for row, origin in enumerate(origins):
        if origin == train_length:
            forecasts[row] = fitted.predict(h=horizon)["mean"]
        else:
            forecasts[row] = fitted.forward(y=values[:origin], h=horizon)["mean"]
    return forecasts


def split_forecasts(
    name: str, splits: dict, train_rows: np.ndarray, season: int, progress: Callable[[str], None] | None = print
) -> tuple[dict[str, torch.Tensor], float]:
    """``name``'s forecasts of every window of each split (name → ``PanelWindows``), in original units (windows,
    horizon, targets): each target channel of each series fitted once on the series' first ``train_rows[series]``
    rows, then forecasting every window of that series, of every split, from the rows before it. Also the
    wall-clock seconds in all."""
    starts = defaultdict(list)  # series → [(split, window, local row of its target's first step)]
    for split, windows in splits.items():
        for index in range(len(windows)):
            series, start = windows.locate(index)
            starts[series].append((split, index, start))
    some = next(iter(splits.values()))
    panel, horizon, targets = some.panel, some.horizon, len(some.panel.roles.targets)
    forecasts = {split: np.empty((len(windows), horizon, targets)) for split, windows in splits.items()}
    started = time.perf_counter()
    for done, (series, located) in enumerate(starts.items(), start=1):
        values = np.asarray(panel.values[panel.rows(series)], dtype=np.float64)
        origins = [start for _, _, start in located]
        for channel in range(targets):
            found = forecast_origins(name, values[:, channel], int(train_rows[series]), origins, horizon, season)
            for (split, index, _), forecast in zip(located, found):
                forecasts[split][index, :, channel] = forecast
        if progress is not None and (done % 50 == 0 or targets > 1):
            progress(f"{name}: {done}/{len(starts)} series, {time.perf_counter() - started:.0f} s")
    return {split: torch.from_numpy(f) for split, f in forecasts.items()}, time.perf_counter() - started


def floor_maes(
    windows,
    statistical: Sequence[str],
    season: int | None,
    period: int,
    splits: Sequence[str] = ("val", "test"),
    progress: Callable[[str], None] | None = print,
) -> tuple[dict[str, dict[str, float]], dict[str, float]]:
    """MAE in original units (forecast → split → value) on the windows of ``splits`` of a ``WindowDataModule``:
    repeat-last, seasonal naive (``season`` steps; None: left out) and the ``statistical`` models (each fitted per
    series and channel on its training rows, ``period`` their season); and each statistical model's seconds."""
    chosen = {split: windows.split(split) for split in splits}
    found = {}
    for split, dataset in chosen.items():
        batches = list(DataLoader(dataset, batch_size=512))
        loc, scale = (torch.cat([b[key] for b in batches]) for key in ("loc", "scale"))
        context, target = (unscale(torch.cat([b[key] for b in batches]), loc, scale) for key in ("context", "target"))
        found[split] = (context.double(), target.double())
    horizon = windows.horizon
    forecasts = {"repeat-last": {s: repeat_last(c, horizon) for s, (c, _) in found.items()}}
    if season:
        forecasts[f"seasonal naive ({season})"] = {s: seasonal_naive(c, horizon, season) for s, (c, _) in found.items()}
    seconds = {}
    for name in statistical:
        forecasts[name], seconds[name] = split_forecasts(name, chosen, windows.split_rows[:, 0], period, progress)
    maes = {name: {s: float((f[s] - found[s][1]).abs().mean()) for s in chosen} for name, f in forecasts.items()}
    return maes, seconds
