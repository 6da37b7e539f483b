"""Scores written once with their formulas: every score of a forecast (``forecast_scores``, what the module logs,
the results tables and backtesting average), sMAPE as M4 defines it, and the scores of probabilistic forecasts.

Not torchmetrics' ``ContinuousRankedProbabilityScore``: it forms all K² pairwise differences of the draws (1.7 GB
for one batch of 64 × 96 × 7 values with 100 paths) and returns only their mean; the sorted form below is
O(K log K) and per value. ``tests/model/test_distributions.py`` checks it against ``properscoring`` and torchmetrics.
"""

from __future__ import annotations

import torch
from torch import Tensor


def symmetric_percentage_errors(forecast: Tensor, actual: Tensor) -> Tensor:
    """Per value, 200 · |y − ŷ| / (|y| + |ŷ|): their mean is sMAPE in percent, as the M4 competition defines it
    (0 where forecast and actual are both 0), as the module, backtest and the M4 table score it."""
    denominator = actual.abs() + forecast.abs()
    errors = 200 * (actual - forecast).abs() / denominator.clamp_min(torch.finfo(denominator.dtype).tiny)
    return torch.where(denominator > 0, errors, torch.zeros_like(errors))


def crps_from_samples(samples: Tensor, target: Tensor) -> Tensor:
    """Continuous ranked probability score of an ensemble, per value: E|X − y| − ½ E|X − X'|.

    ``samples`` (N, K, …) are K draws of the forecast of ``target`` (N, …). The second expectation over all
    pairs is computed from the sorted draws in O(K log K): E|X − X'| = 2 / K² Σᵢ (2i − K − 1) x₍ᵢ₎, i = 1..K.
    Lower is better; for a point forecast (K identical draws) it is the absolute error.
    """
    draws = samples.shape[1]
    spread_to_target = (samples - target.unsqueeze(1)).abs().mean(dim=1)
    ordered = samples.sort(dim=1).values
    shape = [1, draws] + [1] * (samples.dim() - 2)
    weights = (2 * torch.arange(1, draws + 1, device=samples.device, dtype=samples.dtype) - draws - 1).view(shape)
    spread_between = 2 * (weights * ordered).sum(dim=1) / draws**2
    return spread_to_target - 0.5 * spread_between


def central_interval(samples: Tensor, coverage: float) -> tuple[Tensor, Tensor]:
    """Lower and upper ends of the central ``coverage`` interval of the draws (dimension 1), interpolated."""
    tail = (1 - coverage) / 2
    return torch.quantile(samples, samples.new_tensor([tail, 1 - tail]), dim=1).unbind()


def unscale(values: Tensor, loc: Tensor, scale: Tensor) -> Tensor:
    """Scaled values back in original units (``loc``/``scale`` of the batch, (N, 1, F), broadcast)."""
    return values * scale + loc


def score_names(samples: bool) -> list[str]:
    """The names of the scores ``forecast_scores`` gives with ``loc`` and ``scale``, without or with ``samples``."""
    names = ["mse", "mae", "smape", *(f"{name}_original_units" for name in ("mse", "mae", "smape"))]
    return names + (["crps", "coverage", "width", "crps_original_units"] if samples else [])


def forecast_scores(
    point: Tensor,
    target: Tensor,
    loc: Tensor | None = None,
    scale: Tensor | None = None,
    samples: Tensor | None = None,
    interval: float | None = None,
) -> dict[str, Tensor]:
    """Every score of a batch of forecasts on scaled values, per value: the mean of each is the metric of that name.
    With ``samples`` (N, K, T, F) also ``crps``, ``coverage`` (1 where the target is inside the central ``interval``
    of the draws) and ``width``; with ``loc`` and ``scale`` (N, 1, F) the point scores and CRPS in original units,
    named ``*_original_units``."""
    scores = _point_scores(point, target)
    if samples is not None:
        if interval is None:
            raise ValueError("forecast_scores needs the interval (the model's hparams.interval) to score samples")
        lower, upper = central_interval(samples, interval)
        scores["crps"] = crps_from_samples(samples, target)
        scores["coverage"] = ((lower <= target) & (target <= upper)).to(point.dtype)
        scores["width"] = upper - lower
    if loc is not None and scale is not None:
        original = _point_scores(unscale(point, loc, scale), unscale(target, loc, scale))
        if samples is not None:  # CRPS moves with a shift of every value and scales with their scale (> 0)
            original["crps"] = scores["crps"] * scale
        scores.update({f"{name}_original_units": values for name, values in original.items()})
    return scores


def _point_scores(forecast: Tensor, actual: Tensor) -> dict[str, Tensor]:
    error = forecast - actual
    return {"mse": error.square(), "mae": error.abs(), "smape": symmetric_percentage_errors(forecast, actual)}
