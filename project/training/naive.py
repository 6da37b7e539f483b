"""The slow reference loops users write today: the whole decoder re-run on the growing sequence every step.

Kept for tests (the fast regimes must match them exactly) and for the benchmark (what the cache saves).
Never use them to train.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from project.model.transformer import ForecastTransformer

NaiveFeedback = Literal["detach", "bptt", "partial"]


def naive_free_running(model: ForecastTransformer, src: Tensor, target: Tensor, feedback: NaiveFeedback) -> Tensor:
    """Forecasts (N, T, F) from T full decoder passes over a growing target, with every graph kept alive.

    ``feedback`` says what is detached when a prediction is fed back:
    ``detach`` every fed-back value; ``bptt`` nothing; ``partial`` the older positions but not the newest
    prediction, the loop as it is usually posted, whose gradient chains back through every step.
    """
    memory = model.encode(src)
    batch, horizon, n_features = target.shape
    tgt = torch.cat([src[:, -1:], src.new_zeros(batch, horizon - 1, n_features)], dim=1)
    forecasts = []
    for j in range(horizon):
        out = model.decode(tgt, memory)
        forecasts.append(out[:, j : j + 1])
        newest = out[:, j : j + 1].detach() if feedback == "detach" else out[:, j : j + 1]
        if feedback in ("detach", "partial"):
            tgt = tgt.detach()
        tgt = torch.cat([tgt[:, : j + 1], newest, tgt[:, j + 1 : horizon - 1]], dim=1)
    return torch.cat(forecasts, dim=1)


def naive_generate(model: ForecastTransformer, src: Tensor, horizon: int) -> Tensor:
    """Autoregressive forecast without a cache, re-decoding the whole prefix every step (as Darts' and
    Hugging Face's time-series transformers generate)."""
    memory = model.encode(src)
    sequence = src[:, -1:]
    for _ in range(horizon):
        sequence = torch.cat([sequence, model.decode(sequence, memory)[:, -1:]], dim=1)
    return sequence[:, 1:]
