"""An encoder–decoder transformer forecaster (Vaswani et al.) whose causal decoder can run one position at a time.

- encoder token at context step t: targets, past covariates and future covariates of step t;
- decoder token at forecast step j: the targets of step j−1 (true or fed back) and the future covariates of step j,
  so the decoder sees the prices or holidays of the step it forecasts;
- static covariates: one embedding per series, added to every token of both streams.

A token is P = ``patch_length`` consecutive steps, and with ``channel_independent`` each target channel is its own
sequence (sharing the covariates); the public methods take and return series in time steps, (N, length, F).

Shapes: N batch, S context length, T decoder length, F target channels, C covariates, P patch length, B token
batch (N or N·F, times the sample paths K when sampling), H heads, D head dim, d_model = H * D.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint
from typing_extensions import Unpack

from project.domains import DropoutRate, PatchLength, PositiveInt
from project.errors import InputError
from project.model.cache import FixedShapeKVCache, FixedShapeLayerCache, KVCache, LayerCache
from project.model.distributions import Distribution
from project.model.network import ONE_TARGET, Covariates, InputSizes, StaticEmbedding, set_up, with_baseline_path
from project.model.paths import BaselinePath


@dataclass
class Encoded:
    """What the decoder conditions on: the encoder output ``memory`` (B, S / P, d_model), the static embedding of each
    token row (B, 1, d_model), the forecast steps' future covariates (N, steps, C) and the baseline path's forecast
    (N, steps, F; None without a path). With ``samples`` paths per series, token rows are ordered (series, channel,
    sample) and the K paths share their series' memory row."""

    memory: Tensor
    static: Tensor | None = None
    future: Tensor | None = None
    samples: int = 1
    baseline: Tensor | None = None

    def with_samples(self, samples: int) -> Encoded:
        if self.samples != 1:
            raise ValueError(f"these encoder outputs already serve {self.samples} sample paths per series")
        repeat = lambda t: None if t is None else t.repeat_interleave(samples, dim=0)  # noqa: E731
        repeated = {name: repeat(getattr(self, name)) for name in ("static", "future", "baseline")}
        return replace(self, **repeated, samples=samples)


class SinusoidalPositions(nn.Module):
    """Fixed sine/cosine position codes (Vaswani et al. 2017): ``table`` (max_length, d_model)."""

    def __init__(self, d_model: int, max_length: int) -> None:
        super().__init__()
        position = torch.arange(max_length).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10_000.0) / d_model))
        table = torch.zeros(max_length, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
        self.register_buffer("table", table, persistent=False)


def split_heads(x: Tensor, nhead: int) -> Tensor:
    batch, length, width = x.shape
    return x.view(batch, length, nhead, width // nhead).transpose(1, 2)  # (B, H, length, D)


def merge_heads(x: Tensor) -> Tensor:
    batch, nhead, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, nhead * head_dim)  # (B, length, d_model)


class SelfAttention(nn.Module):
    """Multi-head self-attention; causal in the decoder, where it can also read and extend a cache."""

    def __init__(self, d_model: int, nhead: int, causal: bool) -> None:
        super().__init__()
        self.nhead = nhead
        self.causal = causal
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, x: Tensor, cache: LayerCache | None = None) -> Tensor:
        query, key, value = (split_heads(t, self.nhead) for t in self.qkv(x).chunk(3, dim=-1))
        if cache is None:
            attended = F.scaled_dot_product_attention(query, key, value, is_causal=self.causal)
        else:
            cache.append(key, value)
            attended = cache.attend(query)
        return self.out(merge_heads(attended))


class CrossAttention(nn.Module):
    """Multi-head attention from decoder positions to the encoder output (the memory). With K sample paths per memory
    row, the K paths' queries attend as K·k rows of one query block: exact (there is no mask here) and the memory's
    keys/values are read once per series instead of being copied K times."""

    def __init__(self, d_model: int, nhead: int) -> None:
        super().__init__()
        self.nhead = nhead
        self.query = nn.Linear(d_model, d_model)
        self.key_value = nn.Linear(d_model, 2 * d_model)
        self.out = nn.Linear(d_model, d_model)

    def memory_keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        key, value = self.key_value(memory).chunk(2, dim=-1)
        # Contiguous once per memory, so attention at every step references these instead of copying them.
        return split_heads(key, self.nhead).contiguous(), split_heads(value, self.nhead).contiguous()

    def forward(self, x: Tensor, memory: Tensor, samples: int = 1, cache: LayerCache | None = None) -> Tensor:
        # Cross-attention keys depend only on the memory, so compute them once per cache.
        if cache is not None and cache.memory_keys is None:
            cache.memory_keys, cache.memory_values = self.memory_keys_values(memory)
        key, value = self.memory_keys_values(memory) if cache is None else (cache.memory_keys, cache.memory_values)
        query = split_heads(self.query(x), self.nhead)  # (B·K, H, k, D)
        rows, heads, length, head_dim = query.shape
        if samples > 1:
            query = query.view(rows // samples, samples, heads, length, head_dim).transpose(1, 2)
            query = query.reshape(rows // samples, heads, samples * length, head_dim)  # (B, H, K·k, D)
        attended = F.scaled_dot_product_attention(query, key, value)
        if samples > 1:
            attended = attended.view(rows // samples, heads, samples, length, head_dim).transpose(1, 2)
            attended = attended.reshape(rows, heads, length, head_dim)
        return self.out(merge_heads(attended))


class PreNormLayer(nn.Module):
    """Pre-norm residual blocks ``x + dropout(block(norm(x)))``: the given attention blocks, then a feed-forward one;
    block ``name``'s norm is ``name_norm``. These names, in this order, are what a checkpoint and its optimiser hold."""

    def __init__(self, d_model: int, dim_feedforward: int, dropout: float, **attention: nn.Module) -> None:
        super().__init__()
        ffn = nn.Sequential(nn.Linear(d_model, dim_feedforward), nn.GELU(), nn.Linear(dim_feedforward, d_model))
        for name, block in {**attention, "feed_forward": ffn}.items():
            self.add_module(f"{name}_norm", nn.LayerNorm(d_model))
            self.add_module(name, block)
        self.dropout = nn.Dropout(dropout)


class EncoderLayer(PreNormLayer):
    """Pre-norm encoder layer: every position attends to every context position."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__(d_model, dim_feedforward, dropout, attention=SelfAttention(d_model, nhead, causal=False))

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attention(self.attention_norm(x)))
        return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))


class DecoderLayer(PreNormLayer):
    """Pre-norm decoder layer: causal self-attention, cross-attention to the memory, feed-forward."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        self_attention, cross_attention = SelfAttention(d_model, nhead, causal=True), CrossAttention(d_model, nhead)
        super().__init__(
            d_model, dim_feedforward, dropout, self_attention=self_attention, cross_attention=cross_attention
        )

    def forward(self, x: Tensor, memory: Tensor, samples: int = 1, cache: LayerCache | None = None) -> Tensor:
        x = x + self.dropout(self.self_attention(self.self_attention_norm(x), cache))
        x = x + self.dropout(self.cross_attention(self.cross_attention_norm(x), memory, samples, cache))
        return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))


# `patch_length: auto` decodes a horizon in at most this many steps where the lengths allow: in the decoder-depth
# study (experiments/results/depth_*.md) validation error is lowest at 2 or 4 steps; 4 keeps the decoder
# autoregressive, and the defaults' search chose it with the rest of configs/base.yaml
# (experiments/results/search/base_defaults.md).
AUTO_DECODER_STEPS = 4


def auto_patch_length(context_length: int, horizon: int, max_decoder_steps: int = AUTO_DECODER_STEPS) -> int:
    """What ``patch_length: auto`` means: the shortest patch that divides both the context and the horizon and
    decodes the horizon in at most ``max_decoder_steps`` steps; when none does, their greatest common divisor (the
    fewest steps the two lengths allow)."""
    common = math.gcd(context_length, horizon)
    shortest = (p for p in range(1, common + 1) if common % p == 0 and horizon <= p * max_decoder_steps)
    return next(shortest, common)


def resolved_patch_length(patch_length: int | str, context_length: int, horizon: int) -> int:
    """A ``patch_length`` setting as the network is built with it: ``auto`` resolved for the lengths."""
    return auto_patch_length(context_length, horizon) if patch_length == "auto" else patch_length


class ForecastTransformer(nn.Module):
    """Encoder–decoder transformer forecaster with covariates and an incremental (cached) decoder: a
    ``ForecastNetwork`` (``project.model.network``) with its optional ``share_encoded`` and ``new_fixed_shape_cache``.
    Attention weights are not dropped out, so decoding with a cache computes exactly what a whole-sequence pass does.

    Args:
        sizes: The sizes of its inputs (target channels, covariates, static covariates), linked from the data.
        d_model: Width of every token embedding; must be divisible by ``nhead``.
        nhead: Number of attention heads.
        num_encoder_layers: Number of encoder layers over the context window.
        num_decoder_layers: Number of causal decoder layers.
        dim_feedforward: Hidden width of each feed-forward block.
        dropout: Dropout on embeddings and residual branches (off in ``eval()``).
        max_length: Time steps the positional encoding covers, linked from the context length and ``max_horizon``.
        patch_length: Time steps per token P, in the encoder and the decoder: a horizon H then takes H / P decoder
            steps instead of H. Context and decoder lengths must be multiples of P. ``auto`` is resolved by
            ``python -m project.cli`` from the data's lengths (``auto_patch_length``); in Python, pass the integer.
        channel_independent: Each target channel its own sequence (as in PatchTST), sharing weights and covariates.
        checkpoint_layers: Recompute layer activations in backward (less memory, more compute) in whole-sequence passes.
        distribution: What the head predicts per target value and trains with, by class_path (it sizes the head):
            ``PointForecast`` (the default, MSE), ``Normal``, ``StudentT``, ``Quantiles`` or your ``Distribution``.
        baseline_path: What the network forecasts the residual over, by class_path (``project.model.paths``):
            ``NoPath`` (the default), ``LinearPath``, ``SeasonalNaivePath`` or your ``BaselinePath``; the forecast is
            the path plus the residual, and that is what free running feeds back.
    """

    def __init__(
        self,
        sizes: InputSizes = ONE_TARGET,
        d_model: PositiveInt = 128,
        nhead: PositiveInt = 8,
        num_encoder_layers: PositiveInt = 3,
        num_decoder_layers: PositiveInt = 3,
        dim_feedforward: PositiveInt = 512,
        dropout: DropoutRate = 0.1,
        max_length: PositiveInt = 1024,
        patch_length: PatchLength = 1,
        channel_independent: bool = False,
        checkpoint_layers: bool = False,
        distribution: Distribution | None = None,
        baseline_path: BaselinePath | None = None,
    ) -> None:
        super().__init__()
        set_up(self, locals())
        if d_model % nhead:
            raise InputError(f"d_model must be divisible by nhead; got d_model={d_model}, nhead={nhead}")
        if patch_length == "auto":
            raise InputError(
                "patch_length='auto' is resolved from the data by python -m project.cli; in Python give an integer: "
                "project.model.auto_patch_length(context_length, horizon)"
            )
        self.d_model = d_model
        self.patch_length = patch_length
        self.channel_independent = channel_independent
        self.checkpoint_layers = checkpoint_layers
        channels_per_token = 1 if channel_independent else sizes.n_targets
        encoder_width = patch_length * (channels_per_token + sizes.n_past_covariates + sizes.n_future_covariates)
        decoder_width = patch_length * (channels_per_token + sizes.n_future_covariates)
        self.max_length = max_length
        self.positions = SinusoidalPositions(d_model, math.ceil(max_length / patch_length))
        self.encoder_embedding = nn.Linear(encoder_width, d_model)
        self.decoder_embedding = nn.Linear(decoder_width, d_model)
        self.static_embedding = StaticEmbedding(sizes, d_model) if sizes.has_static else None
        self.embedding_dropout = nn.Dropout(dropout)
        layer_args = (d_model, nhead, dim_feedforward, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model)
        self.decoder_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, patch_length * channels_per_token * self.distribution.n_parameters)

    def new_cache(self, steps: int | None = None) -> KVCache:
        capacity = None if steps is None else math.ceil(steps / self.patch_length)
        return KVCache(len(self.decoder_layers), capacity)

    def new_fixed_shape_cache(self, encoded: Encoded, steps: int, in_place: bool = True) -> FixedShapeKVCache:
        """A ``FixedShapeKVCache`` for decoding ``steps`` time steps one token at a time, without gradients."""
        memory, rows = encoded.memory, encoded.memory.shape[0] * encoded.samples
        nhead = self.decoder_layers[0].self_attention.nhead
        shape = (rows, nhead, math.ceil(steps / self.patch_length), self.d_model // nhead)
        position = torch.zeros((), dtype=torch.long, device=memory.device)
        device = memory.device.type
        # Keys are written in the dtype the projections produce: autocast's, when it is on.
        dtype = torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device) else memory.dtype
        layers = []
        for layer in self.decoder_layers:
            buffers = (torch.zeros(shape, dtype=dtype, device=memory.device) for _ in range(2))
            cache = FixedShapeLayerCache(*buffers, position, in_place)
            cache.memory_keys, cache.memory_values = layer.cross_attention.memory_keys_values(memory)
            layers.append(cache)
        return FixedShapeKVCache(layers, position)

    def encode(self, context: Tensor, **covariates: Unpack[Covariates]) -> Encoded:
        batch, length = context.shape[0], context.shape[1]
        future = self._covariates("future_covariates", covariates, self.n_future_covariates, batch)
        past = self._covariates("past_covariates", covariates, self.n_past_covariates, batch)
        if past is not None and past.shape[1] != length:
            raise ValueError(f"past_covariates must cover the {length} context steps; got {tuple(past.shape)}")
        if future is not None and future.shape[1] < length:
            raise ValueError(
                f"future_covariates must cover the {length} context steps and the forecast; got {tuple(future.shape)}"
            )
        static = self._static(covariates.get("static_categorical"), covariates.get("static_real"), batch)
        known = [c for c in (past, None if future is None else future[:, :length]) if c is not None]
        tokens = self._tokens("context", context, torch.cat(known, dim=-1) if known else None)
        x = self.encoder_embedding(tokens) + self._positions("context", tokens, offset=0)
        x = self.embedding_dropout(x if static is None else x + static)
        for layer in self.encoder_layers:
            x = self._run_layer(layer, x)
        # The path's forecast of every step the decoder can reach, kept with the memory: computed once per context.
        baseline = self.baseline_path.forecast(context, len(self.positions.table) * self.patch_length)
        return Encoded(self.encoder_norm(x), static, None if future is None else future[:, length:], baseline=baseline)

    def decode(self, tgt: Tensor, encoded: Encoded, cache: KVCache | None = None) -> Tensor:
        offset = 0 if cache is None else cache.length  # a tensor for a fixed-shape cache
        tokens = self._tokens("tgt", tgt, self._future_steps(encoded, offset, tgt.shape[1]), encoded.samples)
        if not isinstance(cache, FixedShapeKVCache):
            self._check_memory(encoded, tokens, cache)
        x = self.decoder_embedding(tokens) + self._positions("tgt", tokens, offset)
        x = self.embedding_dropout(x if encoded.static is None else x + encoded.static)
        if cache is None:
            for layer in self.decoder_layers:
                x = self._run_layer(layer, x, encoded.memory, encoded.samples)
        else:
            cache.encoded = encoded
            for layer, layer_cache in zip(self.decoder_layers, cache.layers):
                x = layer(x, encoded.memory, encoded.samples, layer_cache)
        x = self.head(self.decoder_norm(x))  # (B, tokens, P·channels·n_parameters)
        rows, samples, n_parameters = tgt.shape[0], encoded.samples, self.distribution.n_parameters
        if self.channel_independent:  # token rows (series, channel, sample) → rows (series, sample)
            x = x.reshape(rows // samples, self.n_targets, samples, -1, n_parameters).permute(0, 2, 3, 1, 4)
        parameters = self.distribution.constrain(x.reshape(rows, -1, self.n_targets, n_parameters))
        return with_baseline_path(self, parameters, encoded.baseline, offset * self.patch_length)

    def start_of(self, context: Tensor) -> Tensor:
        return context[:, -self.patch_length :]

    share_encoded = staticmethod(Encoded.with_samples)  # (encoded, samples) → the K paths share each memory row

    def _tokens(self, name: str, series: Tensor, covariates: Tensor | None, samples: int = 1) -> Tensor:
        """Series (N·K, length, F) and covariates (N·K, length, C) → tokens (B, length / P, token width); rows of N·K
        are (series, sample), token rows (series, channel, sample) in channel-independent mode."""
        shape = series.shape
        if series.dim() != 3 or shape[-1] != self.n_targets or shape[1] == 0 or shape[1] % self.patch_length:
            raise ValueError(
                f"{name} must have shape (N, length, {self.n_targets}) with length a positive multiple of "
                f"patch_length={self.patch_length}; got {tuple(series.shape)}"
            )
        rows, length, channels = series.shape
        if self.channel_independent:
            series = series.view(rows // samples, samples, length, channels).permute(0, 3, 1, 2)
            series = series.reshape(-1, length, 1)  # (N·F·K, length, 1)
            if covariates is not None:
                covariates = covariates.view(rows // samples, 1, samples, length, -1)
                covariates = covariates.expand(-1, channels, -1, -1, -1).reshape(series.shape[0], length, -1)
        x = series if covariates is None else torch.cat([series, covariates], dim=-1)
        return x.reshape(x.shape[0], length // self.patch_length, -1)

    def _covariates(self, name: str, covariates: Covariates, width: int, batch: int) -> Tensor | None:
        values = covariates.get(name)
        if width == 0 and (values is None or values.shape[-1] == 0):
            return None
        if values is None or values.dim() != 3 or values.shape[0] != batch or values.shape[-1] != width:
            got = None if values is None else tuple(values.shape)
            raise ValueError(f"{name} must have shape ({batch}, length, {width}); got {got}")
        return values

    def _future_steps(self, encoded: Encoded, offset: int | Tensor, length: int) -> Tensor | None:
        """The future covariates of the ``length`` forecast steps from token ``offset`` on."""
        if encoded.future is None:
            return None
        if isinstance(offset, Tensor):  # a fixed-shape cache: gathered, so the step's shapes do not depend on it
            steps = offset * self.patch_length + torch.arange(length, device=offset.device)
            return encoded.future.index_select(1, steps)
        start = offset * self.patch_length
        if start + length > encoded.future.shape[1]:
            raise ValueError(
                f"future_covariates cover {encoded.future.shape[1]} forecast steps; forecasting step "
                f"{start + length} needs them for every step up to it"
            )
        return encoded.future[:, start : start + length]

    def _static(self, categorical: Tensor | None, reals: Tensor | None, batch: int) -> Tensor | None:
        if self.static_embedding is None:
            return None
        expected = len(self.static_embedding.categories)
        if expected and (categorical is None or tuple(categorical.shape) != (batch, expected)):
            got = None if categorical is None else tuple(categorical.shape)
            raise ValueError(f"static_categorical must have shape ({batch}, {expected}); got {got}")
        embedding = self.static_embedding(categorical, reals)  # (N, d_model)
        if self.channel_independent:
            embedding = embedding.repeat_interleave(self.n_targets, dim=0)
        return embedding.unsqueeze(1)  # (B, 1, d_model)

    def _run_layer(self, layer: nn.Module, *inputs) -> Tensor:
        if self.checkpoint_layers and self.training and torch.is_grad_enabled():
            return checkpoint(layer, *inputs, use_reentrant=False)
        return layer(*inputs)

    def _positions(self, name: str, tokens: Tensor, offset: int | Tensor) -> Tensor:
        if isinstance(offset, Tensor):
            return self.positions.table.index_select(0, offset + torch.arange(tokens.shape[1], device=offset.device))
        end = offset + tokens.shape[1]
        if end > len(self.positions.table):
            raise ValueError(
                f"{name}: time steps {offset * self.patch_length}..{end * self.patch_length - 1} exceed "
                f"max_length={self.max_length} of the positional encoding; raise max_length"
            )
        return self.positions.table[offset:end]  # (tokens, d_model)

    def _check_memory(self, encoded: Encoded, tokens: Tensor, cache: KVCache | None) -> None:
        memory, rows = encoded.memory, tokens.shape[0] // encoded.samples
        expected = f"({rows}, S, {self.d_model})"
        if memory.dim() != 3 or memory.shape[0] != rows or memory.shape[-1] != self.d_model:
            raise ValueError(f"memory must have shape {expected} to match tgt; got {tuple(memory.shape)}")
        if cache is not None and cache.encoded is not None and encoded is not cache.encoded:
            if memory.shape != cache.encoded.memory.shape:
                raise ValueError(
                    f"memory has shape {tuple(memory.shape)} but the cache was filled for memory of shape "
                    f"{tuple(cache.encoded.memory.shape)}; use model.new_cache() for each batch"
                )
            raise ValueError("memory is not the tensor this cache was filled for; use model.new_cache() per batch")
