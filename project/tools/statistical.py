"""The statistical floor of the results tables: statsforecast's AutoETS and AutoTheta (and AutoARIMA where it is
quick enough), each fitted per series on the rows the model trains on, then forecasting from given origins.

    pip install -e .[baselines]      # statsforecast, an optional extra: the results tools need it, training does not

A model is fitted once per series on the series' first ``train_length`` values (the rows the transformer trains
on); a forecast from a later origin uses every value before the origin without refitting (statsforecast's
``forward``: the fitted parameters, the state run through the newer values), as the transformer reads its
look-back without retraining. Forecasts come back in the units they were given; the results tools score them with
the same metric code and on the same windows as every other row.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from project.errors import InputError

STATISTICAL_MODELS = ("AutoETS", "AutoTheta", "AutoARIMA")


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


def panel_forecasts(
    name: str,
    series: Sequence[np.ndarray],
    train_lengths: Sequence[int],
    origins: Sequence[Sequence[int]],
    horizon: int,
    season: int,
    progress: Callable[[str], None] | None = print,
) -> tuple[list[np.ndarray], float]:
    """``forecast_origins`` for every series of a panel (each with its own training rows and origins), and the
    wall-clock seconds it took in all."""
    started = time.perf_counter()
    forecasts = []
    for index, (values, train_length, starts) in enumerate(zip(series, train_lengths, origins)):
        forecasts.append(forecast_origins(name, values, train_length, starts, horizon, season))
        if progress is not None and (index + 1) % 50 == 0:
            progress(f"{name}: {index + 1}/{len(series)} series, {time.perf_counter() - started:.0f} s")
    return forecasts, time.perf_counter() - started
