"""Free-running decoding, written once for every ``ForecastNetwork``: the cached rollout, sampling, CUDA graphs.

Shapes: N series, K sample paths, F targets, P patch length.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor

from project.model.distributions import value_to_feed_back
from project.model.network import ForecastNetwork


def rollout(
    network: ForecastNetwork,
    encoded: Any,
    start: Tensor,
    horizon: int,
    feedback_value: str = "mean",
    generator: torch.Generator | None = None,
    cuda_graph: bool = False,
) -> tuple[Tensor, Tensor]:
    """Free-running forecast from the first decoder input ``start`` (N, P, F): each step's point forecast (or a draw)
    fed back as the next input, decoding with a cache. Returns the parameters (N, horizon, F, n_parameters) and the
    fed-back values (N, horizon, F); differentiable when gradients are enabled (draws are reparameterised).
    ``cuda_graph`` (without gradients) decodes with the network's ``new_fixed_shape_cache`` and, on a GPU, replays
    the step captured once as a CUDA graph: the same values, without a kernel launch per operation."""
    if horizon <= 0:
        raise ValueError(f"horizon must be a positive integer; got {horizon}")
    if cuda_graph and torch.is_grad_enabled():
        raise ValueError("decoding with cuda_graph records no gradients; use it under torch.no_grad()")
    cache = network.new_fixed_shape_cache(encoded, horizon) if cuda_graph else network.new_cache(horizon)
    step_input = start.clone() if cuda_graph else start
    decode_step = _captured_step(network, step_input, encoded, cache) if cuda_graph else None
    parameters, values = [], []
    for token in range(math.ceil(horizon / network.patch_length)):
        if cuda_graph:
            cache.position.fill_(token)
        step_parameters = decode_step() if cuda_graph else network.decode(step_input, encoded, cache)
        fed_back = value_to_feed_back(network.distribution, step_parameters, feedback_value, generator)
        if cuda_graph:
            step_input.copy_(fed_back)
        else:
            step_input = fed_back
        parameters.append(step_parameters)
        values.append(fed_back)
    return torch.cat(parameters, dim=1)[:, :horizon], torch.cat(values, dim=1)[:, :horizon]


def generate(
    network: ForecastNetwork,
    context: Tensor,
    horizon: int,
    num_samples: int | None = None,
    generator: torch.Generator | None = None,
    cuda_graph: bool = False,
    **covariates: Tensor,
) -> Tensor:
    """Autoregressive forecast from ``context`` (N, S, F) and its covariates (as ``encode`` takes them). Without
    ``num_samples``: the point path (N, horizon, F), each step's point forecast fed back. With K samples: K sample
    paths per series (N, K, horizon, F), each step drawn given the path's earlier draws; one cached rollout over N·K
    rows. ``cuda_graph``: see ``rollout``."""
    if num_samples is None:
        encoded = network.encode(context, **covariates)
        return rollout(network, encoded, network.start_of(context), horizon, cuda_graph=cuda_graph)[1]
    if num_samples < 1:
        raise ValueError(f"num_samples must be a positive integer; got {num_samples}")
    encoded = encode_for_samples(network, num_samples, context, **covariates)
    start = network.start_of(context).repeat_interleave(num_samples, dim=0)
    paths = rollout(network, encoded, start, horizon, "sample", generator, cuda_graph)[1]
    return paths.view(context.shape[0], num_samples, horizon, -1)


def encode_for_samples(network: ForecastNetwork, samples: int, context: Tensor, **covariates: Tensor) -> Any:
    """What ``decode`` conditions on for ``samples`` paths per series, rows ordered (series, sample): the encoder
    run once and shared (``network.share_encoded``) when the network can, on repeated inputs otherwise."""
    if hasattr(network, "share_encoded"):
        return network.share_encoded(network.encode(context, **covariates), samples)
    repeated = {name: value.repeat_interleave(samples, dim=0) for name, value in covariates.items()}
    return network.encode(context.repeat_interleave(samples, dim=0), **repeated)


def _captured_step(network: ForecastNetwork, step_input: Tensor, encoded: Any, cache: Any) -> Callable[[], Tensor]:
    """One decode step reading ``step_input`` and the cache's position: a replayed CUDA graph on a GPU."""

    def step() -> Tensor:
        return network.decode(step_input, encoded, cache)

    if step_input.device.type != "cuda":
        return step
    # Autocast's cache of cast weights is freed when its context ends, under a graph that still reads it:
    # capture with the cache off (the casts become part of the graph).
    autocast = torch.autocast(
        "cuda", dtype=torch.get_autocast_dtype("cuda"), enabled=torch.is_autocast_enabled("cuda"), cache_enabled=False
    )
    # Warm up on a side stream before capture, as CUDA graphs require; the warm-up writes the first step's
    # keys and values, which the first replay writes again.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), autocast:
        step()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), autocast:
        output = step()

    def replay() -> Tensor:
        graph.replay()
        return output.clone()  # the output buffer is reused by the next replay

    return replay
