"""Second derivatives (gradient penalties, Hessian-vector products, meta-learning) through the decoder's cache.

The cache's attention has a hand-written first-order backward. Every cached path (a rollout with gradients, the
BPTT unroll, a multi-position chunk appended to a filled cache) must give first derivatives equal to full
re-decoding's and refuse a second derivative with a one-line error, instead of returning one without the
attention's terms. Full re-decoding, which the error recommends, must give a correct second derivative.

All in float64 under math attention: the fused CPU kernel has no double backward, so without it full re-decoding
could not be the reference.
"""

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from project.model.cache import SECOND_DERIVATIVE_REFUSED, LayerCache
from project.model.decoding import generate, rollout
from project.training.regimes import REGIMES, RegimeOptions
from tests.helpers import small_model, unroll_by_full_redecoding
from tests.reference_loops import naive_free_running

REFUSED = r"decoder cache's attention is once_differentiable: it supports first derivatives only"


@pytest.fixture(autouse=True)
def _math_attention():
    """Math attention everywhere, the only scaled_dot_product_attention backend with a double backward."""
    with sdpa_kernel(SDPBackend.MATH):
        yield


def one_plus_one_layer_model():
    """The model of the bug report: one encoder and one decoder layer, float64."""
    return small_model(num_encoder_layers=1, num_decoder_layers=1)


def first_derivative(loss, inputs):
    """The gradient of ``loss`` with respect to ``inputs``, itself differentiable (``create_graph=True``); zero for
    an input the loss does not depend on."""
    return torch.autograd.grad(loss, inputs, create_graph=True, materialize_grads=True)


def gradient_penalty(gradients):
    """A squared gradient norm, what a gradient penalty differentiates again."""
    return sum(gradient.pow(2).sum() for gradient in gradients)


def assert_same(actual, expected):
    for actual_part, expected_part in zip(actual, expected, strict=True):
        torch.testing.assert_close(actual_part, expected_part, rtol=1e-9, atol=1e-12)


def assert_second_derivative_refused(penalty, inputs):
    """Differentiating ``penalty`` again, by ``autograd.grad`` (which prunes unrequested nodes, where the old
    error went unnoticed) or by ``backward``, raises the one-line refusal."""

    def differentiate():
        return penalty.backward() if inputs is None else torch.autograd.grad(penalty, inputs, allow_unused=True)

    with pytest.raises(RuntimeError, match=REFUSED) as refusal:
        differentiate()
    assert str(refusal.value) == SECOND_DERIVATIVE_REFUSED
    assert "\n" not in str(refusal.value)


@pytest.mark.parametrize("with_respect_to", ["parameters", "context", "backward"])
@pytest.mark.parametrize("unroll", ["rollout", "bptt"])
def test_a_rollout_or_the_bptt_unroll_keeps_its_first_derivative_and_refuses_a_second_one(unroll, with_respect_to):
    """A rollout with gradients against full re-decoding (the bug report's model), and the BPTT regime against the
    naive loop (dropout 0: training mode computes the same function)."""
    model = one_plus_one_layer_model() if unroll == "rollout" else small_model().train()
    src = torch.randn(3, 12, 5, dtype=torch.float64, requires_grad=True)
    target = torch.randn(3, 4, 5, dtype=torch.float64)
    if unroll == "rollout":
        cached = rollout(model, model.encode(src), model.start_of(src), 4)[1]
        full = unroll_by_full_redecoding(model, src, 4)
        torch.testing.assert_close(cached, full, rtol=1e-12, atol=1e-14)
        loss = lambda forecast: (forecast - target).pow(2).mean()  # noqa: E731
    else:
        encoded, start = model.encode(src), model.start_of(src)
        cached = REGIMES["free_running_bptt"].forecast(model, encoded, start, target, RegimeOptions())
        full = naive_free_running(model, src, target, "bptt")
        loss = lambda forecast: model.distribution.loss(forecast, target)  # noqa: E731
    inputs = [*model.parameters(), src]
    cached_gradients = first_derivative(loss(cached), inputs)
    assert_same(cached_gradients, first_derivative(loss(full), inputs))
    targets = {"parameters": list(model.parameters()), "context": [src], "backward": None}
    assert_second_derivative_refused(gradient_penalty(cached_gradients), targets[with_respect_to])


@pytest.mark.parametrize("prefix", ["with gradients", "without gradients"])
@pytest.mark.parametrize("with_respect_to", ["parameters", "decoder inputs", "backward"])
def test_a_chunk_appended_to_a_filled_cache_keeps_its_first_derivative_and_refuses_a_second_one(
    prefix, with_respect_to
):
    """Three positions at once after three already cached: the multi-position (masked) attention path."""
    model = small_model()
    src = torch.randn(2, 12, 5, dtype=torch.float64)
    tgt = torch.randn(2, 6, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 6, 5, dtype=torch.float64)
    encoded, cache = model.encode(src), model.new_cache()
    with torch.set_grad_enabled(prefix == "with gradients"):
        first = model.decode(tgt[:, :3], encoded, cache)[..., 0]
    chunk = model.decode(tgt[:, 3:], encoded, cache)[..., 0]
    full = model.decode(tgt, encoded)[..., 0]
    torch.testing.assert_close(torch.cat([first, chunk], dim=1), full, rtol=1e-12, atol=1e-14)
    # Without gradients the prefix is a constant, as in full decoding with its first three outputs left out.
    cached = torch.cat([first, chunk], dim=1) if prefix == "with gradients" else chunk
    reference = full if prefix == "with gradients" else full[:, 3:]
    # Decoder inputs before the chunk reach it only through the cache's keys and values.
    inputs = [*model.parameters(), tgt]
    cached_gradients = first_derivative((cached * weights[:, -cached.shape[1] :]).tanh().sum(), inputs)
    full_gradients = first_derivative((reference * weights[:, -cached.shape[1] :]).tanh().sum(), inputs)
    if prefix == "with gradients":
        assert_same(cached_gradients, full_gradients)
    else:
        # A prefix decoded without gradients is a constant to the cache, but not to full decoding's parameters
        # and first inputs: only the chunk's own inputs have the same gradient in both.
        torch.testing.assert_close(cached_gradients[-1][:, 3:], full_gradients[-1][:, 3:], rtol=1e-9, atol=1e-12)
    targets = {"parameters": list(model.parameters()), "decoder inputs": [tgt], "backward": None}
    assert_second_derivative_refused(gradient_penalty(cached_gradients), targets[with_respect_to])


def test_a_first_derivative_with_create_graph_alone_is_not_refused():
    """``create_graph=True`` is refused only once something differentiates the gradient again."""
    model = one_plus_one_layer_model()
    src = torch.randn(2, 12, 5, dtype=torch.float64)
    parameters = list(model.parameters())
    loss = generate(model, src, 3).pow(2).mean()
    with_graph = first_derivative(loss, parameters)
    without_graph = torch.autograd.grad(generate(model, src, 3).pow(2).mean(), parameters)
    assert_same([g.detach() for g in with_graph], without_graph)


def three_cached_steps() -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Three one-position steps of attention over a ``LayerCache``: their outputs and every query, key and value."""
    cache, outputs, leaves = LayerCache(capacity=3), [], []
    for _ in range(3):
        query, key, value = (torch.randn(2, 2, 1, 4, dtype=torch.float64, requires_grad=True) for _ in range(3))
        cache.append(key, value)
        outputs.append(cache.attend(query))
        leaves += [query, key, value]
    return outputs, leaves


def test_a_second_derivative_through_the_cached_attention_raises_instead_of_being_wrong():
    outputs, leaves = three_cached_steps()
    gradients = torch.autograd.grad(sum(output.pow(2).sum() for output in outputs), leaves, create_graph=True)
    with pytest.raises(RuntimeError, match=REFUSED):
        sum(gradient.pow(2).sum() for gradient in gradients).backward()


def test_create_graph_through_the_cache_is_refused_at_once_where_no_gradient_could_reach_the_refusal():
    """A loss linear in the attention outputs sends gradients that carry no graph, so a later second derivative
    could not find the refusal: it is raised by the first derivative already."""
    outputs, leaves = three_cached_steps()
    loss = sum(output.sum() for output in outputs)
    with pytest.raises(RuntimeError, match=REFUSED):
        first_derivative(loss, leaves)
    # The same first derivative without create_graph is still served.
    first_order = torch.autograd.grad(sum(output.sum() for output in outputs), leaves)
    assert all(torch.isfinite(gradient).all() for gradient in first_order)


def test_full_redecoding_without_a_cache_gives_the_second_derivative_the_error_recommends():
    """The Hessian-vector product of a re-decoded rollout's loss, by double backward, equals the central finite
    difference of its gradient along the same direction: the second derivative is really there and exact."""
    model = one_plus_one_layer_model()
    src = torch.randn(3, 12, 5, dtype=torch.float64)
    target = torch.randn(3, 4, 5, dtype=torch.float64)
    direction = torch.randn_like(src)

    def gradient(context, create_graph=False):
        context = context if create_graph else context.detach().requires_grad_()
        loss = (unroll_by_full_redecoding(model, context, 4) - target).pow(2).mean()
        return torch.autograd.grad(loss, context, create_graph=create_graph)[0]

    src.requires_grad_()
    (hessian_vector,) = torch.autograd.grad((gradient(src, create_graph=True) * direction).sum(), src)
    step = 1e-5
    finite_difference = (gradient(src + step * direction) - gradient(src - step * direction)) / (2 * step)
    assert hessian_vector.abs().max() > 0
    torch.testing.assert_close(hessian_vector, finite_difference, rtol=1e-6, atol=1e-9)
