"""An encoder–decoder transformer forecaster whose decoder can run one position at a time.

Pure PyTorch: no Lightning here. The encoder reads the context window, the decoder is causal and emits, at every
position, the forecast of what follows its input. Decoding with a ``KVCache`` computes only the new positions
and reuses the keys/values of the earlier ones.

A token is one time step of all channels by default. With ``patch_length`` P it is P consecutive time steps, and
with ``channel_independent`` each channel is its own sequence (a batch of N·F univariate series sharing weights).
The public methods always take and return series in time steps, (N, length, F).

Shapes: N batch, S context length, T decoder length, F features, P patch length, B token batch (N or N·F),
H heads, D head dim, d_model = H * D.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F
from torch.utils.checkpoint import checkpoint

from project.model.cache import KVCache, LayerCache


class SinusoidalPositions(nn.Module):
    """Fixed sine/cosine position codes (Vaswani et al. 2017), looked up from an offset."""

    def __init__(self, d_model: int, max_length: int) -> None:
        super().__init__()
        position = torch.arange(max_length).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10_000.0) / d_model))
        table = torch.zeros(max_length, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency[: d_model // 2])
        self.register_buffer("table", table, persistent=False)
        self.max_length = max_length

    def forward(self, length: int, offset: int = 0) -> Tensor:
        return self.table[offset : offset + length]  # (length, d_model)


def split_heads(x: Tensor, nhead: int) -> Tensor:
    batch, length, width = x.shape
    return x.view(batch, length, nhead, width // nhead).transpose(1, 2)  # (N, H, length, D)


def merge_heads(x: Tensor) -> Tensor:
    batch, nhead, length, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, length, nhead * head_dim)  # (N, length, d_model)


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
    """Multi-head attention from decoder positions to the encoder output (the memory)."""

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

    def forward(self, x: Tensor, memory: Tensor, cache: LayerCache | None = None) -> Tensor:
        if cache is None:
            key, value = self.memory_keys_values(memory)
        else:
            # Cross-attention keys depend only on the memory, so compute them once per cache.
            if cache.memory_keys is None:
                cache.memory_keys, cache.memory_values = self.memory_keys_values(memory)
            key, value = cache.memory_keys, cache.memory_values
        query = split_heads(self.query(x), self.nhead)
        return self.out(merge_heads(F.scaled_dot_product_attention(query, key, value)))


class FeedForward(nn.Sequential):
    def __init__(self, d_model: int, dim_feedforward: int) -> None:
        super().__init__(nn.Linear(d_model, dim_feedforward), nn.GELU(), nn.Linear(dim_feedforward, d_model))


class EncoderLayer(nn.Module):
    """Pre-norm encoder layer: every position attends to every context position."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.attention_norm = nn.LayerNorm(d_model)
        self.attention = SelfAttention(d_model, nhead, causal=False)
        self.feed_forward_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        x = x + self.dropout(self.attention(self.attention_norm(x)))
        return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))


class DecoderLayer(nn.Module):
    """Pre-norm decoder layer: causal self-attention, cross-attention to the memory, feed-forward."""

    def __init__(self, d_model: int, nhead: int, dim_feedforward: int, dropout: float) -> None:
        super().__init__()
        self.self_attention_norm = nn.LayerNorm(d_model)
        self.self_attention = SelfAttention(d_model, nhead, causal=True)
        self.cross_attention_norm = nn.LayerNorm(d_model)
        self.cross_attention = CrossAttention(d_model, nhead)
        self.feed_forward_norm = nn.LayerNorm(d_model)
        self.feed_forward = FeedForward(d_model, dim_feedforward)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor, memory: Tensor, cache: LayerCache | None = None) -> Tensor:
        x = x + self.dropout(self.self_attention(self.self_attention_norm(x), cache))
        x = x + self.dropout(self.cross_attention(self.cross_attention_norm(x), memory, cache))
        return x + self.dropout(self.feed_forward(self.feed_forward_norm(x)))


class ForecastTransformer(nn.Module):
    """Encoder–decoder transformer forecaster with an incremental (cached) decoder.

    ``decode(tgt, memory)[:, t]`` is the forecast of the value P steps after ``tgt[:, t]`` (the next value for
    the default P = 1) and depends only on ``memory`` and the patches of ``tgt`` up to and including the one
    holding step t. Attention weights are not dropped out, so decoding with a cache computes exactly the same
    function as decoding the whole sequence at once.

    Args:
        n_features: Number of channels F of the series (input and output).
        d_model: Width of every token embedding; must be divisible by ``nhead``.
        nhead: Number of attention heads.
        num_encoder_layers: Number of encoder layers over the context window.
        num_decoder_layers: Number of causal decoder layers.
        dim_feedforward: Hidden width of each feed-forward block.
        dropout: Dropout on embeddings and residual branches (off in ``eval()``).
        max_length: Longest encoder or decoder sequence, in tokens, the positional encoding supports.
        patch_length: Time steps per token P, in the encoder and the decoder: each decoder step then forecasts
            P steps at once, so a horizon H needs H / P sequential steps instead of H. Context and decoder
            lengths must be multiples of P.
        channel_independent: Model every channel as its own univariate sequence with shared weights (as in
            PatchTST) instead of one token per time step holding all channels.
        checkpoint_layers: Recompute each layer's activations in backward instead of storing them (activation
            checkpointing): less memory for more compute. Applies to whole-sequence passes in training; cached
            decoding is never checkpointed because it appends to the cache.
    """

    def __init__(
        self,
        n_features: int = 5,
        d_model: int = 128,
        nhead: int = 8,
        num_encoder_layers: int = 3,
        num_decoder_layers: int = 3,
        dim_feedforward: int = 512,
        dropout: float = 0.1,
        max_length: int = 1024,
        patch_length: int = 1,
        channel_independent: bool = False,
        checkpoint_layers: bool = False,
    ) -> None:
        super().__init__()
        if d_model % nhead:
            raise ValueError(f"d_model must be divisible by nhead; got d_model={d_model}, nhead={nhead}")
        if num_encoder_layers < 1 or num_decoder_layers < 1:
            raise ValueError(
                "num_encoder_layers and num_decoder_layers must be >= 1; "
                f"got {num_encoder_layers} and {num_decoder_layers}"
            )
        if patch_length < 1:
            raise ValueError(f"patch_length must be >= 1; got {patch_length}")
        self.n_features = n_features
        self.d_model = d_model
        self.patch_length = patch_length
        self.channel_independent = channel_independent
        self.checkpoint_layers = checkpoint_layers
        token_width = patch_length * (1 if channel_independent else n_features)
        self.positions = SinusoidalPositions(d_model, max_length)
        self.encoder_embedding = nn.Linear(token_width, d_model)
        self.decoder_embedding = nn.Linear(token_width, d_model)
        self.embedding_dropout = nn.Dropout(dropout)
        layer_args = (d_model, nhead, dim_feedforward, dropout)
        self.encoder_layers = nn.ModuleList(EncoderLayer(*layer_args) for _ in range(num_encoder_layers))
        self.decoder_layers = nn.ModuleList(DecoderLayer(*layer_args) for _ in range(num_decoder_layers))
        self.encoder_norm = nn.LayerNorm(d_model)
        self.decoder_norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, token_width)

    def new_cache(self) -> KVCache:
        """An empty cache for one batch's incremental decoding."""
        return KVCache(len(self.decoder_layers))

    def encode(self, src: Tensor) -> Tensor:
        """Context window ``src`` (N, S, F) → memory (B, S / P, d_model)."""
        tokens = self._tokens("src", src)  # (B, S / P, token_width)
        x = self.embedding_dropout(self.encoder_embedding(tokens) + self._positions("src", tokens, offset=0))
        for layer in self.encoder_layers:
            x = self._run_layer(layer, x)
        return self.encoder_norm(x)

    def decode(self, tgt: Tensor, memory: Tensor, cache: KVCache | None = None) -> Tensor:
        """Decoder inputs ``tgt`` (N, T, F) → forecasts (N, T, F) of the values P steps after each input.

        With ``cache``, ``tgt`` holds only the new positions; their keys/values are appended to the cache,
        and their positional offset is the number of positions already in it.
        """
        tokens = self._tokens("tgt", tgt)  # (B, T / P, token_width)
        self._check_memory(memory, tokens, cache)
        offset = 0 if cache is None else cache.length
        x = self.embedding_dropout(self.decoder_embedding(tokens) + self._positions("tgt", tokens, offset))
        if cache is None:
            for layer in self.decoder_layers:
                x = self._run_layer(layer, x, memory)
        else:
            cache.memory = memory
            for layer, layer_cache in zip(self.decoder_layers, cache.layers):
                x = layer(x, memory, layer_cache)
        return self._series(self.head(self.decoder_norm(x)), batch=tgt.shape[0])

    def start_of(self, src: Tensor) -> Tensor:
        """The first decoder input (N, P, F): the last observed patch of the context."""
        return src[:, -self.patch_length :]

    def rollout(self, memory: Tensor, start: Tensor, horizon: int) -> Tensor:
        """Free-running forecast: feed each prediction back as the next input, decoding with a cache.

        ``start`` (N, P, F) is the first decoder input, usually ``start_of(src)``. Differentiable when
        gradients are enabled (back-propagation through the fed-back predictions).
        """
        if horizon <= 0:
            raise ValueError(f"horizon must be a positive integer; got {horizon}")
        cache = self.new_cache()
        step_input, forecasts = start, []
        for _ in range(math.ceil(horizon / self.patch_length)):
            step_input = self.decode(step_input, memory, cache)
            forecasts.append(step_input)
        return torch.cat(forecasts, dim=1)[:, :horizon]  # (N, horizon, F)

    def generate(self, src: Tensor, horizon: int) -> Tensor:
        """Autoregressive forecast (N, horizon, F) from the context ``src`` (N, S, F)."""
        return self.rollout(self.encode(src), self.start_of(src), horizon)

    def _tokens(self, name: str, x: Tensor) -> Tensor:
        """Series (N, length, F) → tokens (B, length / P, token_width)."""
        if x.dim() != 3 or x.shape[-1] != self.n_features or x.shape[1] == 0 or x.shape[1] % self.patch_length:
            raise ValueError(
                f"{name} must have shape (N, length, {self.n_features}) with length a positive multiple of "
                f"patch_length={self.patch_length}; got {tuple(x.shape)}"
            )
        batch, length, n_features = x.shape
        if self.channel_independent:
            x = x.transpose(1, 2).reshape(batch * n_features, length, 1)  # (N·F, length, 1)
        return x.reshape(x.shape[0], length // self.patch_length, -1)

    def _series(self, tokens: Tensor, batch: int) -> Tensor:
        """Tokens (B, tokens, token_width) → series (N, length, F); the inverse of ``_tokens``."""
        if self.channel_independent:
            return tokens.reshape(batch, self.n_features, -1).transpose(1, 2)
        return tokens.reshape(batch, -1, self.n_features)

    def _run_layer(self, layer: nn.Module, *inputs: Tensor) -> Tensor:
        if self.checkpoint_layers and self.training and torch.is_grad_enabled():
            return checkpoint(layer, *inputs, use_reentrant=False)
        return layer(*inputs)

    def _positions(self, name: str, tokens: Tensor, offset: int) -> Tensor:
        end = offset + tokens.shape[1]
        if end > self.positions.max_length:
            raise ValueError(
                f"{name}: token positions {offset}..{end - 1} exceed max_length={self.positions.max_length} of "
                f"the positional encoding; expected at most {self.positions.max_length} tokens "
                f"(patch_length={self.patch_length}); raise max_length"
            )
        return self.positions(tokens.shape[1], offset)

    def _check_memory(self, memory: Tensor, tokens: Tensor, cache: KVCache | None) -> None:
        expected = f"({tokens.shape[0]}, S, {self.d_model})"
        if memory.dim() != 3 or memory.shape[0] != tokens.shape[0] or memory.shape[-1] != self.d_model:
            raise ValueError(f"memory must have shape {expected} to match tgt; got {tuple(memory.shape)}")
        if cache is None or cache.memory is None:
            return
        if memory.shape != cache.memory.shape:
            raise ValueError(
                f"memory has shape {tuple(memory.shape)} but the cache was filled for memory of shape "
                f"{tuple(cache.memory.shape)}; use model.new_cache() for each batch"
            )
        if memory is not cache.memory:
            raise ValueError("memory is not the tensor this cache was filled for; use model.new_cache() per batch")
