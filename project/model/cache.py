"""The decoder's key/value cache and the attention that reads it: the decoder is causal, so the keys and values of
earlier positions never change, and one decode step computes only its new position's.

Shapes: N batch, H heads, D head dim, L cached positions, k new positions (usually 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import Tensor
from torch.nn import functional as F


class LayerCache:
    """What one decoder layer keeps between decode calls: buffers of the self-attention keys and values of every
    position decoded so far, written without autograd, sized by ``capacity`` when given and grown by doubling otherwise.
    ``new_keys``/``new_values``: in a differentiable unroll, the newest keys and values as the graph made them, through
    which gradients reach this call's projections (``_AttendOverCache``); ``differentiable_from`` is the first
    position decoded with gradients. ``memory_keys``/``memory_values``: the cross-attention keys and values of the
    encoder output ``(N, H, S, D)``, computed on the first call."""

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

    def append(self, keys: Tensor, values: Tensor) -> None:
        """Add the keys/values ``(N, H, k, D)`` of the ``k`` newest positions."""
        differentiable = torch.is_grad_enabled() and (keys.requires_grad or values.requires_grad)
        if differentiable and self.differentiable_from is None:
            self.differentiable_from = self.length
        # Kept only as graph inputs, to route gradients to this call's projections; never saved for backward.
        self.new_keys, self.new_values = (keys, values) if self.differentiable_from is not None else (None, None)
        end = self.length + keys.shape[2]
        if self._key_buffer is None or end > self._key_buffer.shape[2]:
            self._key_buffer = self._grown(self._key_buffer, keys, end)
            self._value_buffer = self._grown(self._value_buffer, values, end)
        # Written through ``.data`` so that the write does not count as a modification of the views of positions
        # 0..length-1 that attention steps saved for backward: it only touches positions after all of them.
        self._key_buffer.data[:, :, self.length : end] = keys.detach()
        self._value_buffer.data[:, :, self.length : end] = values.detach()
        self.length = end

    def attend(self, query: Tensor) -> Tensor:
        """Attention of the newest ``k`` queries ``(N, H, k, D)`` over every cached position, causally."""
        keys, values = self._key_buffer[:, :, : self.length], self._value_buffer[:, :, : self.length]  # (N, H, L, D)
        if self.new_keys is None or not torch.is_grad_enabled():
            return attend(query, keys, values)
        start = self.length - self.new_keys.shape[2]
        earlier = self._earlier_gradients or (None, None)
        output, *self._earlier_gradients = _AttendOverCache.apply(
            query, keys, values, self.differentiable_from, start, self.new_keys, self.new_values, *earlier
        )
        return output

    def _grown(self, buffer: Tensor | None, new: Tensor, needed: int) -> Tensor:
        if buffer is None and self.capacity:
            capacity = max(needed, self.capacity)
        else:
            capacity = max(16, needed, 2 * (0 if buffer is None else buffer.shape[2]))
        grown = new.new_empty(*new.shape[:2], capacity, new.shape[3])
        if buffer is not None:
            grown[:, :, : self.length] = buffer[:, :, : self.length]
        return grown


class KVCache:
    """Every decoder layer's keys and values of the positions decoded so far, for one batch's forecast: from
    ``model.new_cache()``, passed to each ``decode`` call of that forecast, then dropped (never reset or shared).
    ``capacity`` (positions to decode) sizes the buffers once; ``length`` (positions decoded) is the next call's
    positional offset; ``encoded``, the encoder output it was filled for: passing another one is an error."""

    def __init__(self, num_layers: int, capacity: int | None = None) -> None:
        self.layers = [LayerCache(capacity) for _ in range(num_layers)]
        self.encoded = None  # project.model.transformer.Encoded

    @property
    def length(self) -> int:
        return self.layers[0].length


def attend(query: Tensor, keys: Tensor, values: Tensor) -> Tensor:
    """Attention of the last ``k`` of ``L`` positions over all of them, causally: (N, H, k, D). A single query row (the
    cached decode step) on a CPU is a plain matmul–softmax–matmul: the fused CPU kernel of
    ``scaled_dot_product_attention`` is tiled for long query blocks and spends most of a one-row call on set-up."""
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
    whenever a second derivative depends on them."""

    @staticmethod
    def forward(ctx, count: int, *tensors: Tensor) -> tuple[Tensor, ...]:
        return tensors[:count]

    @staticmethod
    def backward(ctx, *grads: Tensor):
        raise RuntimeError(SECOND_DERIVATIVE_REFUSED)


def _first_order_only(backward: Callable) -> Callable:
    """Run a hand-written ``backward`` without building a graph and, under ``create_graph=True``, make its gradients
    raise ``SECOND_DERIVATIVE_REFUSED`` if differentiated again. The refusal hangs off the incoming gradients' graph,
    which in the model holds every input the gradients depend on (the attention output always passes through a
    LayerNorm, whose backward depends on it). Where no incoming gradient carries a graph, nothing would reach the
    refusal, so it is raised at once."""

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
        refused = iter(_SecondDerivativeRefused.apply(len(present), *(outputs[i] for i in present), *anchors))
        return tuple(None if output is None else next(refused) for output in outputs)

    return wrapper


class _AttendOverCache(torch.autograd.Function):
    """Differentiable attention over the cache that saves one step's query, not a copy of the past.

    Plain autograd would save every step's concatenated keys/values, O(T²) memory over a T-step unroll. Each step here
    saves its query, each query row's log-sum-exp (backward recomputes the weights from it) and views of positions
    0..L-1 of the cache's buffers, which later steps only extend: the whole unroll keeps O(T) alive.

    Key/value gradients travel backwards along the unroll as one tensor per step, not one per earlier position: each
    call also returns two placeholders standing for positions ``first..end-1`` and takes the previous call's as
    inputs. In backward it adds what later calls found for its placeholders to its own gradients, returns the part
    for the positions it appended (``new_keys``/``new_values``) to their projections and hands the rest to the
    previous call; the engine runs the calls in reverse, so each position's gradient is complete when returned."""

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
        carried = torch.promote_types(query.dtype, torch.float32)  # bf16/fp16 logits lose too much in the exponent
        with torch.autocast(query.device.type, enabled=False):
            scores = _scores(query, keys.to(query.dtype)).to(carried)  # (N, H, k, L)
            log_normaliser = scores.logsumexp(dim=-1, keepdim=True)
            weights = (scores - log_normaliser).exp().to(query.dtype)
            output = weights @ values.to(query.dtype)  # (N, H, k, D)
        ctx.first, ctx.start = first, start
        ctx.new_dtypes = new_keys.dtype, new_values.dtype
        # The positions the previous call's placeholders stand for: first..start-1, less any decoded since
        # without gradients (those have no graph to reach).
        ctx.earlier = 0 if earlier_keys is None else earlier_keys.shape[2]
        ctx.save_for_backward(query, log_normaliser, keys, values)  # keys/values: views of the cache's buffers
        # Placeholders for the gradients of positions first..L-1, summed in at least float32 along the unroll:
        # expanded scalars, no memory.
        shape = (*keys.shape[:2], keys.shape[2] - first, keys.shape[3])
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
        first, new, earlier = ctx.first, ctx.start - ctx.first, ctx.earlier
        key_grads = grad_keys[:, :, first:].to(later_key_grads.dtype).add_(later_key_grads)
        value_grads = grad_values[:, :, first:].to(later_value_grads.dtype).add_(later_value_grads)
        new_keys = key_grads[:, :, new:].to(ctx.new_dtypes[0]) if ctx.needs_input_grad[5] else None
        new_values = value_grads[:, :, new:].to(ctx.new_dtypes[1]) if ctx.needs_input_grad[6] else None
        earlier_grads = (key_grads[:, :, :earlier], value_grads[:, :, :earlier]) if earlier else (None, None)
        return grad_query, None, None, None, None, new_keys, new_values, *earlier_grads


def _scores(query: Tensor, keys: Tensor) -> Tensor:
    """Scaled dot products ``(N, H, k, L)``, with future positions of a multi-position chunk at -inf."""
    scores = (query @ keys.transpose(-2, -1)) / math.sqrt(query.shape[-1])
    mask = _causal_tail_mask(query, keys)
    return scores if mask is None else scores.masked_fill(~mask, float("-inf"))


class FixedShapeLayerCache:
    """``LayerCache`` with fixed shapes, without gradients: buffers sized for the whole forecast, the position a tensor.
    Attention reads every slot and masks those not yet written, so a step's shapes never change: it can be captured
    as a CUDA graph (``in_place``: slots written with ``index_copy_``) or exported with the cache as explicit inputs
    and outputs (functional: ``keys``/``values`` become new tensors)."""

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
    """The decoder's cache with fixed shapes, from ``ForecastTransformer.new_fixed_shape_cache`` with every layer's
    cross-attention keys/values computed; the caller advances ``position`` (in place) between steps."""

    def __init__(self, layers: list[FixedShapeLayerCache], position: Tensor) -> None:
        self.layers, self.position = layers, position
        self.length = position  # the same tensor: decode's positional offset
        self.encoded = None
