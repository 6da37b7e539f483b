"""The slow reference loops users write today: the whole decoder re-run on the growing sequence every step.

The tests' reference: the fast regimes must match them exactly. The benchmark (``project/tools/bench.py``, run
from the repository root) times them too, for what the cache saves. Nothing in ``project/`` but that tool imports
them. Never use them to train.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import Tensor

from project.model.decoding import encode_for_samples
from project.model.distributions import value_to_feed_back
from project.model.network import ForecastNetwork

NaiveGradient = Literal["detach", "bptt", "partial"]


def naive_free_running(
    model: ForecastNetwork,
    context: Tensor,
    target: Tensor,
    gradient: NaiveGradient,
    feedback_value: Literal["mean", "sample"] = "mean",
    generator: torch.Generator | None = None,
    **covariates: Tensor,
) -> Tensor:
    """Forecast parameters (N, T, F, n_parameters) from T full decoder passes over a growing target, with every
    graph kept alive.

    ``gradient`` says what is detached when a prediction is fed back:
    ``detach`` every fed-back value; ``bptt`` nothing; ``partial`` the older positions but not the newest
    prediction, the loop as it is usually posted, whose gradient chains back through every step. Covariates are
    always the true values; only targets are fed back. One time step per token (``patch_length`` 1).
    """
    _one_step_tokens(model)
    encoded = model.encode(context, **covariates)
    batch, horizon, n_targets = target.shape
    tgt = torch.cat([model.start_of(context), context.new_zeros(batch, horizon - 1, n_targets)], dim=1)
    forecasts = []
    for j in range(horizon):
        out = model.decode(tgt, encoded)
        forecasts.append(out[:, j : j + 1])
        newest = value_to_feed_back(model.distribution, out[:, j : j + 1], feedback_value, generator)
        newest = newest.detach() if gradient == "detach" else newest
        if gradient in ("detach", "partial"):
            tgt = tgt.detach()
        tgt = torch.cat([tgt[:, : j + 1], newest, tgt[:, j + 1 : horizon - 1]], dim=1)
    return torch.cat(forecasts, dim=1)


def naive_generate(
    model: ForecastNetwork,
    context: Tensor,
    horizon: int,
    num_samples: int | None = None,
    generator: torch.Generator | None = None,
    **covariates: Tensor,
) -> Tensor:
    """Autoregressive forecast without a cache, re-decoding the whole prefix every step, as Darts' and Hugging
    Face's time-series transformers generate. With ``num_samples`` K: N·K rows re-decode their prefixes
    (N, K, horizon, F), conditioned as ``generate`` conditions them (``decoding.encode_for_samples``), so that the
    two differ only by the cache. One time step per token (``patch_length`` 1)."""
    _one_step_tokens(model)
    if num_samples is None:
        encoded, start, value = model.encode(context, **covariates), model.start_of(context), "mean"
    else:
        encoded = encode_for_samples(model, num_samples, context, **covariates)
        start, value = model.start_of(context).repeat_interleave(num_samples, dim=0), "sample"
    sequence = start
    for _ in range(horizon):
        step = model.decode(sequence, encoded)[:, -1:]
        sequence = torch.cat([sequence, value_to_feed_back(model.distribution, step, value, generator)], dim=1)
    paths = sequence[:, 1:]
    return paths if num_samples is None else paths.view(context.shape[0], num_samples, horizon, -1)


def _one_step_tokens(model: ForecastNetwork) -> None:
    if model.patch_length != 1:
        raise ValueError(f"the naive loops decode one time step per token; got patch_length={model.patch_length}")
