"""The decoder's key/value cache and the attention that reads it.

Decoding one position at a time only needs the *new* position's query, key and value: the keys and values of
earlier positions do not change (the decoder is causal), so they are kept here instead of being recomputed.

Shapes: N batch, H heads, D head dim, L cached positions, k new positions (usually 1).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor
from torch.nn import functional as F


class LayerCache:
    """What one decoder layer keeps between decode calls.

    ``keys``/``values``: the self-attention keys and values of every position decoded so far, ``(N, H, L, D)``,
    as views of buffers that grow by doubling, so a step copies only its own position. The buffers hold plain
    values, written without autograd.

    ``key_chunks``/``value_chunks``: in a differentiable unroll, also each decode call's keys and values as the
    autograd graph made them. They are never written again, so backward can *reference* them instead of saving a
    copy of all past positions per step (``_AttendOverChunks``). Empty when decoding without gradients.

    ``memory_keys``/``memory_values``: the cross-attention keys and values of the encoder output ``(N, H, S, D)``.
    They depend only on the memory, so they are computed on the first decode call and reused.
    """

    def __init__(self) -> None:
        self.length = 0
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None
        self.key_chunks: list[Tensor] = []
        self.value_chunks: list[Tensor] = []
        self.memory_keys: Tensor | None = None
        self.memory_values: Tensor | None = None

    @property
    def keys(self) -> Tensor:
        return self._key_buffer[:, :, : self.length]  # (N, H, L, D)

    @property
    def values(self) -> Tensor:
        return self._value_buffer[:, :, : self.length]  # (N, H, L, D)

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Add the keys/values ``(N, H, k, D)`` of the ``k`` newest positions."""
        differentiable = torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)
        if differentiable and not self.key_chunks and self.length:
            # Positions decoded without gradients become one constant chunk, so the chunks cover every position.
            self.key_chunks, self.value_chunks = [self.keys.clone()], [self.values.clone()]
        if differentiable or self.key_chunks:
            # Contiguous, because concatenating many strided views in backward is several times slower; the
            # copies replace the projection output the views would otherwise keep alive.
            self.key_chunks.append(keys.contiguous())
            self.value_chunks.append(values.contiguous())
        self._write(keys.detach(), values.detach())

    def attend(self, query: Tensor) -> Tensor:
        """Attention of the newest ``k`` queries ``(N, H, k, D)`` over every cached position, causally."""
        if self.key_chunks and torch.is_grad_enabled():
            chunks = (*self.key_chunks, *self.value_chunks)
            return _AttendOverChunks.apply(query.contiguous(), self.keys, self.values, len(self.key_chunks), *chunks)
        keys, values = self.keys, self.values
        return F.scaled_dot_product_attention(query, keys, values, attn_mask=_causal_tail_mask(query, keys))

    def _write(self, keys: Tensor, values: Tensor) -> None:
        end = self.length + keys.shape[2]
        if self._key_buffer is None or end > self._key_buffer.shape[2]:
            self._key_buffer = self._grown(self._key_buffer, keys, end)
            self._value_buffer = self._grown(self._value_buffer, values, end)
        self._key_buffer[:, :, self.length : end] = keys
        self._value_buffer[:, :, self.length : end] = values
        self.length = end

    def _grown(self, buffer: Tensor | None, new: Tensor, needed: int) -> Tensor:
        batch, nhead, _, head_dim = new.shape
        capacity = max(16, needed, 2 * (0 if buffer is None else buffer.shape[2]))
        grown = new.new_empty(batch, nhead, capacity, head_dim)
        if buffer is not None:
            grown[:, :, : self.length] = buffer[:, :, : self.length]
        return grown


class KVCache:
    """Keys and values of the decoder positions already decoded, for every decoder layer.

    Who owns it: the caller of ``ForecastTransformer.decode``. Make one with ``model.new_cache()`` for each batch
    you forecast, pass it to every ``decode`` call of that forecast, and drop it afterwards; a cache is never
    reset or shared between batches. ``length`` is the number of positions decoded so far: the next call's
    positional offset. ``encoded`` is the encoder output the cache was filled for; passing another one is an error.
    """

    def __init__(self, num_layers: int) -> None:
        self.layers = [LayerCache() for _ in range(num_layers)]
        self.encoded = None  # project.model.transformer.Encoded

    @property
    def length(self) -> int:
        return self.layers[0].length


def _causal_tail_mask(query: Tensor, keys: Tensor) -> Tensor | None:
    """Boolean mask letting the last ``k`` of ``L`` positions see themselves and everything before them."""
    new, total = query.shape[-2], keys.shape[-2]
    if new == 1:
        return None  # a single newest position may see every cached position
    return torch.ones(new, total, dtype=torch.bool, device=query.device).tril(diagonal=total - new)


class _AttendOverChunks(torch.autograd.Function):
    """Differentiable attention over cached chunks that saves references, not copies.

    Plain autograd would save the concatenated ``keys``/``values`` of every step for backward: a fresh copy of
    all past positions per step, O(T²) memory over a T-step unroll. Here forward reads the cache's buffers
    (``keys``/``values``, not saved: later steps append to them), and backward gets the chunks themselves (each
    saved once, shared by every later step), concatenates them, and recomputes the attention weights from the
    saved log-sum-exp of each query row. What a step keeps alive is then O(1) in the number of past positions,
    and the whole unroll is O(T), like teacher forcing. The chunks are inputs so that gradients reach them.
    """

    @staticmethod
    def forward(ctx, query: Tensor, keys: Tensor, values: Tensor, num_chunks: int, *chunks: Tensor) -> Tensor:
        with torch.autocast(query.device.type, enabled=False):
            scores = _scores(query, keys.to(query.dtype)).to(_softmax_dtype(query))  # (N, H, k, L)
            log_normaliser = scores.logsumexp(dim=-1, keepdim=True)
            weights = (scores - log_normaliser).exp().to(query.dtype)
            output = weights @ values.to(query.dtype)  # (N, H, k, D)
        ctx.num_chunks = num_chunks
        ctx.save_for_backward(query, log_normaliser, *chunks)
        return output

    @staticmethod
    def backward(ctx, grad_output: Tensor):
        query, log_normaliser, *chunks = ctx.saved_tensors
        key_chunks, value_chunks = chunks[: ctx.num_chunks], chunks[ctx.num_chunks :]
        dtype = grad_output.dtype
        keys = torch.cat(key_chunks, dim=2).to(dtype)
        values = torch.cat(value_chunks, dim=2).to(dtype)
        query = query.to(dtype)
        scale = 1.0 / math.sqrt(query.shape[-1])

        weights = (_scores(query, keys).to(log_normaliser.dtype) - log_normaliser).exp().to(dtype)  # (N, H, k, L)
        grad_values = weights.transpose(-2, -1) @ grad_output  # (N, H, L, D)
        grad_weights = grad_output @ values.transpose(-2, -1)
        # softmax backward: dS = P ⊙ (dP − Σ_j P_j dP_j)
        grad_scores = weights * (grad_weights - (grad_weights * weights).sum(dim=-1, keepdim=True)) * scale
        grad_query = grad_scores @ keys
        grad_keys = grad_scores.transpose(-2, -1) @ query  # (N, H, L, D)

        sizes = [chunk.shape[2] for chunk in key_chunks]
        grad_key_chunks = [g.to(c.dtype) for g, c in zip(grad_keys.split(sizes, dim=2), key_chunks)]
        grad_value_chunks = [g.to(c.dtype) for g, c in zip(grad_values.split(sizes, dim=2), value_chunks)]
        return grad_query, None, None, None, *grad_key_chunks, *grad_value_chunks


def _softmax_dtype(query: Tensor) -> torch.dtype:
    """Softmax in at least float32: bf16/fp16 logits lose too much in the exponent."""
    return torch.promote_types(query.dtype, torch.float32)


def _scores(query: Tensor, keys: Tensor) -> Tensor:
    """Scaled dot products ``(N, H, k, L)``, with future positions of a multi-position chunk at -inf."""
    scores = (query @ keys.transpose(-2, -1)) / math.sqrt(query.shape[-1])
    mask = _causal_tail_mask(query, keys)
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))
