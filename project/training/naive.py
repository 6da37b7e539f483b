"""The slow reference loops users write today: the whole decoder re-run on the growing sequence every step.

Kept for tests (the fast regimes must match them exactly) and for the benchmark (what the cache saves).
Never use them to train.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from project.model.distributions import feedback
from project.model.transformer import Encoded, ForecastTransformer

NaiveFeedback = Literal["detach", "bptt", "partial"]


def naive_free_running(
    model: ForecastTransformer,
    context: Tensor,
    target: Tensor,
    feedback_mode: NaiveFeedback,
    feedback_value: Literal["mean", "sample"] = "mean",
    generator: torch.Generator | None = None,
    **covariates: Tensor,
) -> Tensor:
    """Forecast parameters (N, T, F, n_parameters) from T full decoder passes over a growing target, with every
    graph kept alive.

    ``feedback_mode`` says what is detached when a prediction is fed back:
    ``detach`` every fed-back value; ``bptt`` nothing; ``partial`` the older positions but not the newest
    prediction, the loop as it is usually posted, whose gradient chains back through every step. Covariates are
    always the true values; only targets are fed back.
    """
    encoded = model.encode(context, **covariates)
    batch, horizon, n_features = target.shape
    tgt = torch.cat([context[:, -1:], context.new_zeros(batch, horizon - 1, n_features)], dim=1)
    forecasts = []
    for j in range(horizon):
        out = model.decode(tgt, encoded)
        forecasts.append(out[:, j : j + 1])
        newest = feedback(model.distribution, out[:, j : j + 1], feedback_value, generator)
        newest = newest.detach() if feedback_mode == "detach" else newest
        if feedback_mode in ("detach", "partial"):
            tgt = tgt.detach()
        tgt = torch.cat([tgt[:, : j + 1], newest, tgt[:, j + 1 : horizon - 1]], dim=1)
    return torch.cat(forecasts, dim=1)


def naive_generate(
    model: ForecastTransformer,
    context: Tensor,
    horizon: int,
    num_samples: int | None = None,
    generator: torch.Generator | None = None,
    **covariates: Tensor,
) -> Tensor:
    """Autoregressive forecast without a cache, re-decoding the whole prefix every step, as Darts' and Hugging
    Face's time-series transformers generate. With ``num_samples`` K, like Hugging Face's ``generate``: the
    encoder output is repeated K times and N·K rows re-decode their prefixes (N, K, horizon, F)."""
    encoded = model.encode(context, **covariates)
    start, value = context[:, -1:], "mean"
    if num_samples is not None:
        channels = model.n_features if model.channel_independent else 1

        def repeat(rows: Tensor | None) -> Tensor | None:
            """Token rows (N·channels, …) → (N·K·channels, …), ordered (series, sample, channel) as the decoder
            orders the rows of N·K series."""
            if rows is None:
                return None
            grouped = rows.view(context.shape[0], 1, channels, *rows.shape[1:])
            return grouped.expand(-1, num_samples, *grouped.shape[2:]).reshape(-1, *rows.shape[1:])

        future = None if encoded.future is None else encoded.future.repeat_interleave(num_samples, dim=0)
        encoded = Encoded(repeat(encoded.memory), repeat(encoded.static), future)
        start, value = start.repeat_interleave(num_samples, dim=0), "sample"
    sequence = start
    for _ in range(horizon):
        step = model.decode(sequence, encoded)[:, -1:]
        sequence = torch.cat([sequence, feedback(model.distribution, step, value, generator)], dim=1)
    paths = sequence[:, 1:]
    return paths if num_samples is None else paths.view(context.shape[0], num_samples, horizon, -1)
