"""The decoder's key/value cache and the attention that reads it.

Decoding one position at a time only needs the *new* position's query, key and value: the keys and values of
earlier positions do not change (the decoder is causal), so they are kept here instead of being recomputed.

Shapes: N batch, H heads, D head dim, L cached positions, k new positions (usually 1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F


class LayerCache:
    """What one decoder layer keeps between decode calls.

    ``keys``/``values``: the self-attention keys and values of every position decoded so far, ``(N, H, L, D)``,
    as views of buffers written without autograd. The buffers are sized for the whole forecast when the caller
    says how long it will be (``capacity``), otherwise they grow by doubling; either way a step writes only its own
    position.

    In a differentiable unroll, attention also takes the newest keys and values as the autograd graph made them
    (``new_keys``/``new_values``), the inputs through which its gradients reach the projections of this call; the
    gradients of earlier positions travel back through the previous call's attention (``_AttendOverCache``), which
    started at position ``differentiable_from`` (positions before it were decoded without gradients).

    ``memory_keys``/``memory_values``: the cross-attention keys and values of the encoder output ``(N, H, S, D)``.
    They depend only on the memory, so they are computed on the first decode call and reused.
    """

    def __init__(self, capacity: int | None = None) -> None:
        self.length = 0
        self.capacity = capacity
        self._key_buffer: Tensor | None = None
        self._value_buffer: Tensor | None = None
        self.differentiable_from: int | None = None
        self.new_keys: Tensor | None = None
        self.new_values: Tensor | None = None
        self._earlier_gradients: tuple[Tensor, Tensor] | None = None
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
        if differentiable and self.differentiable_from is None:
            self.differentiable_from = self.length
        # Kept only as graph inputs, to route gradients to this call's projections; never saved for backward.
        self.new_keys, self.new_values = (keys, values) if self.differentiable_from is not None else (None, None)
        self._write(keys.detach(), values.detach())

    def attend(self, query: Tensor) -> Tensor:
        """Attention of the newest ``k`` queries ``(N, H, k, D)`` over every cached position, causally."""
        if self.new_keys is None or not torch.is_grad_enabled():
            return attend(query, self.keys, self.values)
        start = self.length - self.new_keys.shape[2]
        earlier = self._earlier_gradients or (None, None)
        output, *self._earlier_gradients = _AttendOverCache.apply(
            query, self.keys, self.values, self.differentiable_from, start, self.new_keys, self.new_values, *earlier
        )
        return output

    def _write(self, keys: Tensor, values: Tensor) -> None:
        end = self.length + keys.shape[2]
        if self._key_buffer is None or end > self._key_buffer.shape[2]:
            self._key_buffer = self._grown(self._key_buffer, keys, end)
            self._value_buffer = self._grown(self._value_buffer, values, end)
        # Written through ``.data`` so that the write does not count as a modification of the views of positions
        # 0..length-1 that attention steps saved for backward: it only touches positions after all of them.
        self._key_buffer.data[:, :, self.length : end] = keys
        self._value_buffer.data[:, :, self.length : end] = values
        self.length = end

    def _grown(self, buffer: Tensor | None, new: Tensor, needed: int) -> Tensor:
        batch, nhead, _, head_dim = new.shape
        if buffer is None and self.capacity:
            capacity = max(needed, self.capacity)
        else:
            capacity = max(16, needed, 2 * (0 if buffer is None else buffer.shape[2]))
        grown = new.new_empty(batch, nhead, capacity, head_dim)
        if buffer is not None:
            grown[:, :, : self.length] = buffer[:, :, : self.length]
        return grown


class KVCache:
    """Keys and values of the decoder positions already decoded, for every decoder layer.

    Who owns it: the caller of ``ForecastTransformer.decode``. Make one with ``model.new_cache()`` for each batch
    you forecast, pass it to every ``decode`` call of that forecast, and drop it afterwards; a cache is never
    reset or shared between batches. ``capacity``, the number of positions the forecast will decode, sizes the
    buffers once. ``length`` is the number of positions decoded so far: the next call's positional offset.
    ``encoded`` is the encoder output the cache was filled for; passing another one is an error.
    """

    def __init__(self, num_layers: int, capacity: int | None = None) -> None:
        self.layers = [LayerCache(capacity) for _ in range(num_layers)]
        self.encoded = None  # project.model.transformer.Encoded

    @property
    def length(self) -> int:
        return self.layers[0].length


def attend(query: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """Attention of the last ``k`` of ``L`` positions over all of them, causally: (N, H, k, D).

    A single query row (the cached decode step) is a plain matmul–softmax–matmul: the fused CPU kernel of
    ``scaled_dot_product_attention`` is tiled for long query blocks and spends most of a one-row call on set-up.
    """
    if query.shape[-2] == 1 and query.device.type == "cpu":
        scores = (query * (1.0 / math.sqrt(query.shape[-1]))) @ keys.transpose(-2, -1)  # (N, H, 1, L)
        return scores.softmax(dim=-1) @ values
    return F.scaled_dot_product_attention(query, keys, values, attn_mask=_causal_tail_mask(query, keys))


def _causal_tail_mask(query: Tensor, keys: Tensor) -> Tensor | None:
    """Boolean mask letting the last ``k`` of ``L`` positions see themselves and everything before them."""
    new, total = query.shape[-2], keys.shape[-2]
    if new == 1:
        return None  # a single newest position may see every cached position
    return torch.ones(new, total, dtype=torch.bool, device=query.device).tril(diagonal=total - new)


SECOND_DERIVATIVE_REFUSED = (
    "the decoder cache's attention is once_differentiable: it supports first derivatives only; for a second "
    "derivative (create_graph=True, then a gradient of that gradient) re-decode without a cache, "
    "model.decode(tgt, encoded) over the whole sequence (teacher forcing, or at every step of a rollout), "
    "under torch.nn.attention.sdpa_kernel(SDPBackend.MATH) since the fused attention kernels have no double backward"
)


class _SecondDerivativeRefused(torch.autograd.Function):
    """Passes a first-order backward's gradients through unchanged; differentiating them again raises.

    ``torch.autograd.function.once_differentiable`` is not enough: its error node hangs off fresh leaves, so
    ``torch.autograd.grad(..., inputs=...)`` prunes it and the second derivative silently comes out without the
    attention's terms. This node's inputs are the incoming gradients that carry a graph, so the engine reaches it
    whenever a second derivative depends on them.
    """

    @staticmethod
    def forward(ctx, count: int, *tensors: Tensor) -> tuple[Tensor, ...]:
        return tensors[:count]

    @staticmethod
    def backward(ctx, *grads: Tensor):
        raise RuntimeError(SECOND_DERIVATIVE_REFUSED)


def _first_order_only(backward: Callable) -> Callable:
    """Run a hand-written ``backward`` without building a graph and, when the caller asked for one
    (``create_graph=True``), make its gradients raise ``SECOND_DERIVATIVE_REFUSED`` if differentiated again.

    The refusal is reached through the incoming gradients' graph. In the model that graph holds the attention
    call itself, and through it every input the gradients depend on (query, keys, values): the attention output
    always passes through a LayerNorm, whose backward depends on it. Where no incoming gradient carries a graph at
    all, nothing would reach the refusal, so it is raised at once.
    """

    @functools.wraps(backward)
    def wrapper(ctx, *grads: Tensor):
        with torch.no_grad():
            outputs = backward(ctx, *grads)
        if not torch.is_grad_enabled():  # create_graph=False: a plain first derivative
            return outputs
        anchors = [grad for grad in grads if isinstance(grad, Tensor) and grad.requires_grad]
        if not anchors:
            raise RuntimeError(SECOND_DERIVATIVE_REFUSED)
        present = [i for i, output in enumerate(outputs) if output is not None]
        if not present:
            return outputs
        refused = _SecondDerivativeRefused.apply(len(present), *(outputs[i] for i in present), *anchors)
        wrapped = list(outputs)
        for i, output in zip(present, refused):
            wrapped[i] = output
        return tuple(wrapped)

    return wrapper


class _AttendOverCache(torch.autograd.Function):
    """Differentiable attention over the cache that saves one step's query, not a copy of the past.

    Plain autograd would save the concatenated ``keys``/``values`` of every step for backward: a fresh copy of
    all past positions per step, O(T²) memory over a T-step unroll. Here each step saves its query, each query
    row's log-sum-exp, and views of positions 0..L-1 of the cache's buffers: every step shares the same two
    storages, which later steps only extend (they write positions after L), so the whole unroll keeps O(T) alive.
    Backward recomputes the attention weights from the log-sum-exp.

    Gradients of the keys and values travel backwards along the unroll, as one tensor per step instead of one per
    earlier position: besides its output, each call returns two placeholder outputs standing for the keys and
    values of positions ``first..end-1`` (``first``: the first position decoded with gradients), and takes the
    previous call's placeholders as inputs. In backward a call adds the gradient it receives for its placeholders
    (everything later calls found for those positions) to its own, returns the part for the positions it appended
    (``new_keys``/``new_values``) to the projections that made them, and hands the rest to the previous call. Each
    step thus does O(1) operations instead of one per earlier position, and the autograd engine runs the calls in
    reverse order, so every position's gradient is complete before it is returned. First-order only: a second
    derivative raises instead of being silently wrong (``_first_order_only``).
    """

    @staticmethod
    def forward(
        ctx,
        query: Tensor,
        keys: Tensor,
        values: Tensor,
        first: int,
        start: int,
        new_keys: Tensor,
        new_values: Tensor,
        earlier_keys: Tensor | None = None,
        earlier_values: Tensor | None = None,
    ) -> tuple[Tensor, Tensor, Tensor]:
        query = query.contiguous()  # not a view of the projection output, which would keep its keys/values alive
        with torch.autocast(query.device.type, enabled=False):
            scores = _scores(query, keys.to(query.dtype)).to(_softmax_dtype(query))  # (N, H, k, L)
            log_normaliser = scores.logsumexp(dim=-1, keepdim=True)
            weights = (scores - log_normaliser).exp().to(query.dtype)
            output = weights @ values.to(query.dtype)  # (N, H, k, D)
        ctx.first, ctx.start = first, start
        ctx.new_dtypes = new_keys.dtype, new_values.dtype
        # The positions the previous call's placeholders stand for: first..start-1, less any decoded since
        # without gradients (those have no graph to reach).
        ctx.earlier = 0 if earlier_keys is None else earlier_keys.shape[2]
        # keys/values are views of the cache's buffers: every step saves the same two storages, not a copy each.
        ctx.save_for_backward(query, log_normaliser, keys, values)
        batch, nhead, length, head_dim = keys.shape
        # Placeholders for the gradients of positions first..length-1, summed in at least float32 along the
        # unroll: expanded scalars, no memory.
        shape, carried = (batch, nhead, length - first, head_dim), _softmax_dtype(query)
        placeholders = (query.new_zeros((), dtype=carried).expand(shape) for _ in range(2))
        return output, *placeholders

    @staticmethod
    @_first_order_only
    def backward(ctx, grad_output: Tensor, later_key_grads: Tensor, later_value_grads: Tensor):
        query, log_normaliser, keys, values = ctx.saved_tensors
        dtype = grad_output.dtype
        keys, values, query = keys.to(dtype), values.to(dtype), query.to(dtype)
        scale = 1.0 / math.sqrt(query.shape[-1])

        weights = (_scores(query, keys).to(log_normaliser.dtype) - log_normaliser).exp().to(dtype)  # (N, H, k, L)
        grad_values = weights.transpose(-2, -1) @ grad_output  # (N, H, L, D)
        grad_weights = grad_output @ values.transpose(-2, -1)
        # softmax backward: dS = P ⊙ (dP − Σ_j P_j dP_j)
        grad_scores = weights * (grad_weights - (grad_weights * weights).sum(dim=-1, keepdim=True)) * scale
        grad_query = grad_scores @ keys if ctx.needs_input_grad[0] else None
        grad_keys = grad_scores.transpose(-2, -1) @ query  # (N, H, L, D)

        # Positions before ``first`` were decoded without gradients: nothing to return for them. Summed in place
        # into this step's own gradient tensors, the largest of the step, rather than into new ones.
        first, start = ctx.first, ctx.start
        key_grads = grad_keys[:, :, first:].to(later_key_grads.dtype).add_(later_key_grads)
        value_grads = grad_values[:, :, first:].to(later_value_grads.dtype).add_(later_value_grads)
        new, earlier = start - first, ctx.earlier
        return (
            grad_query,
            None,
            None,
            None,
            None,
            key_grads[:, :, new:].to(ctx.new_dtypes[0]) if ctx.needs_input_grad[5] else None,
            value_grads[:, :, new:].to(ctx.new_dtypes[1]) if ctx.needs_input_grad[6] else None,
            key_grads[:, :, :earlier] if earlier else None,
            value_grads[:, :, :earlier] if earlier else None,
        )


def _softmax_dtype(query: Tensor) -> torch.dtype:
    """Softmax in at least float32: bf16/fp16 logits lose too much in the exponent."""
    return torch.promote_types(query.dtype, torch.float32)


def _scores(query: Tensor, keys: Tensor) -> Tensor:
    """Scaled dot products ``(N, H, k, L)``, with future positions of a multi-position chunk at -inf."""
    scores = (query @ keys.transpose(-2, -1)) / math.sqrt(query.shape[-1])
    mask = _causal_tail_mask(query, keys)
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


class FixedShapeLayerCache:
    """``LayerCache`` with fixed shapes: buffers sized for the whole forecast and the position as a tensor.

    Attention reads every slot of the buffers and masks the ones not yet written, so a step's shapes never change
    and the step can be captured as a CUDA graph (``in_place``: slots written with ``index_copy_``) or exported
    with the cache as explicit inputs and outputs (functional: ``keys``/``values`` become new tensors). Without
    gradients only.
    """

    def __init__(self, keys: Tensor, values: Tensor, position: Tensor, in_place: bool) -> None:
        self.keys, self.values = keys, values  # (N, H, capacity, D)
        self.position = position  # () int64: the slot of the position being decoded
        self.in_place = in_place
        self.memory_keys: Tensor | None = None
        self.memory_values: Tensor | None = None

    def append(self, keys: Tensor, values: Tensor) -> None:
        slot = self.position.reshape(1)
        if self.in_place:
            self.keys.index_copy_(2, slot, keys)
            self.values.index_copy_(2, slot, values)
            return
        written = torch.arange(self.keys.shape[2], device=keys.device).view(1, 1, -1, 1) == slot
        self.keys = torch.where(written, keys, self.keys)
        self.values = torch.where(written, values, self.values)

    def attend(self, query: Tensor) -> Tensor:
        visible = torch.arange(self.keys.shape[2], device=query.device) <= self.position  # slots 0..position
        scores = (query * (1.0 / math.sqrt(query.shape[-1]))) @ self.keys.transpose(-2, -1)  # (N, H, 1, capacity)
        scores = scores.masked_fill(~visible, float("-inf"))
        return scores.softmax(dim=-1) @ self.values


class FixedShapeKVCache:
    """The decoder's cache with fixed shapes (see ``FixedShapeLayerCache``); ``length`` is the position tensor.

    Made by ``ForecastTransformer.new_fixed_shape_cache`` with every layer's cross-attention keys/values computed
    once; the caller advances ``position`` (in place) between steps.
    """

    def __init__(self, layers: list[FixedShapeLayerCache], position: Tensor) -> None:
        self.layers, self.position = layers, position
        self.encoded = None

    @property
    def length(self) -> Tensor:
        return self.position
