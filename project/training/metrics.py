"""Scores written once with their formulas: sMAPE as M4 defines it, and the scores of probabilistic forecasts.

Not torchmetrics' ``ContinuousRankedProbabilityScore``: it forms all K² pairwise differences of the draws (1.7 GB
for one batch of 64 × 96 × 7 values with 100 paths) and returns only their mean; the sorted form below is
O(K log K) and per value. ``tests/test_distributions.py`` checks it against ``properscoring`` and torchmetrics.
"""

from __future__ import annotations

import torch
from torch import Tensor
from torchmetrics import MeanMetric


def symmetric_percentage_errors(forecast: Tensor, actual: Tensor) -> Tensor:
    """Per value, 200 · |y − ŷ| / (|y| + |ŷ|): their mean is sMAPE in percent, as the M4 competition defines it
    (0 where forecast and actual are both 0). The one definition the module, backtest and the M4 table use."""
    denominator = actual.abs() + forecast.abs()
    errors = 200 * (actual - forecast).abs() / denominator.clamp_min(torch.finfo(denominator.dtype).tiny)
    return torch.where(denominator > 0, errors, torch.zeros_like(errors))


class SymmetricMAPE(MeanMetric):
    """sMAPE in percent (``symmetric_percentage_errors``), averaged over every value, synchronised across devices."""

    def update(self, forecast: Tensor, actual: Tensor) -> None:  # type: ignore[override]
        super().update(symmetric_percentage_errors(forecast, actual))


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
    levels = samples.new_tensor([tail, 1 - tail])
    lower, upper = torch.quantile(samples, levels, dim=1)
    return lower, upper
