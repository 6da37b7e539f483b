import pytest
import torch
from torch.nn import functional as F

from project.errors import InputError
from project.model import ForecastTransformer, auto_patch_length
from project.model.cache import attend
from project.model.decoding import generate
from project.model.transformer import Encoded
from project.training import FreeRunning, LastValueNorm, ScheduledSampling
from tests.helpers import (
    BASELINE_PATHS,
    COVARIATES,
    baseline_path,
    covariates_for,
    forecaster,
    relative_difference,
    small_model,
    unroll_by_full_redecoding,
)
from tests.reference_loops import naive_generate

VARIANTS = {
    "step-tokens": {},
    "patches": {"patch_length": 3},
    "channel-independent": {"channel_independent": True},
    "patches-channel-independent": {"patch_length": 2, "channel_independent": True},
}


def decode_one_position_at_a_time(model, tgt, encoded):
    cache = model.new_cache()
    patch = model.patch_length
    steps = [model.decode(tgt[:, t : t + patch], encoded, cache) for t in range(0, tgt.shape[1], patch)]
    return torch.cat(steps, dim=1)


@pytest.mark.parametrize(("dtype", "tolerance"), [(torch.float64, 1e-10), (torch.float32, 1e-5)])
@pytest.mark.parametrize(("batch", "context", "length"), [(1, 12, 12), (4, 6, 24), (7, 24, 3)])
@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decode_matches_full_decode(dtype, tolerance, batch, context, length, variant):
    model = small_model(dtype, **VARIANTS[variant])
    patch = model.patch_length
    src = torch.randn(batch, context * patch, 5, dtype=dtype)
    tgt = torch.randn(batch, length * patch, 5, dtype=dtype)
    with torch.no_grad():
        encoded = model.encode(src)
        full = model.decode(tgt, encoded)
        cached = decode_one_position_at_a_time(model, tgt, encoded)
    assert cached.shape == full.shape == (*tgt.shape, 1)
    assert (cached - full).abs().max().item() <= tolerance


@pytest.mark.parametrize("distribution", ["none", "normal", "student_t", "quantile"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_cached_decode_matches_full_decode_with_covariates_and_distributions(variant, distribution):
    model = small_model(**VARIANTS[variant], **COVARIATES, distribution=distribution, quantile_levels=(0.05, 0.5, 0.95))
    patch = model.patch_length
    src, tgt = torch.randn(3, 4 * patch, 5, dtype=torch.float64), torch.randn(3, 5 * patch, 5, dtype=torch.float64)
    encoded = model.encode(src, **covariates_for(3, 4 * patch, 5 * patch))
    full = model.decode(tgt, encoded)
    assert full.shape == (3, 5 * patch, 5, model.distribution.n_parameters)
    assert (decode_one_position_at_a_time(model, tgt, encoded) - full).abs().max().item() <= 1e-10


def test_every_covariate_changes_the_forecast():
    model = small_model(**COVARIATES)
    src, tgt = torch.randn(2, 6, 5, dtype=torch.float64), torch.randn(2, 4, 5, dtype=torch.float64)
    covariates = covariates_for(2, 6, 4)
    reference = model.decode(tgt, model.encode(src, **covariates))
    for name in covariates:
        changed = dict(covariates)
        changed[name] = (covariates[name] + 1) % 2 if name == "static_categorical" else covariates[name] + 1.0
        assert not torch.allclose(model.decode(tgt, model.encode(src, **changed)), reference), name


def test_cached_decode_with_gradients_matches_full_decode():
    model = small_model()
    src, tgt = torch.randn(3, 12, 5, dtype=torch.float64), torch.randn(3, 9, 5, dtype=torch.float64)
    encoded = model.encode(src)
    cache = model.new_cache()
    chunked = torch.cat([model.decode(tgt[:, :4], encoded, cache), model.decode(tgt[:, 4:], encoded, cache)], 1)
    assert (chunked - model.decode(tgt, encoded)).abs().max().item() <= 1e-10


@pytest.mark.parametrize("cached", [False, True])
@pytest.mark.parametrize("variant", VARIANTS)
def test_changing_future_inputs_leaves_past_outputs_unchanged(cached, variant):
    model = small_model(**VARIANTS[variant], n_future_covariates=3)
    patch = model.patch_length
    src, tgt = torch.randn(2, 6 * patch, 5, dtype=torch.float64), torch.randn(2, 8 * patch, 5, dtype=torch.float64)
    future = torch.randn(2, 14 * patch, 3, dtype=torch.float64)
    decode = decode_one_position_at_a_time if cached else lambda m, x, e: m.decode(x, e)
    for t in range(patch - 1, tgt.shape[1] - patch, patch):  # the last step of every patch but the final one
        changed, changed_future = tgt.clone(), future.clone()
        changed[:, t + 1 :] = torch.randn_like(changed[:, t + 1 :]) * 100
        changed_future[:, 6 * patch + t + 1 :] *= 100  # the covariates of later forecast steps
        before = decode(model, tgt, model.encode(src, future_covariates=future))
        after = decode(model, changed, model.encode(src, future_covariates=changed_future))
        torch.testing.assert_close(after[:, : t + 1], before[:, : t + 1], rtol=0, atol=1e-12)
        assert not torch.allclose(after[:, t + 1 :], before[:, t + 1 :])


@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_equals_a_hand_written_step_loop_and_naive_redecoding(variant):
    model = small_model(**VARIANTS[variant])
    patch = model.patch_length
    src = torch.randn(3, 4 * patch, 5, dtype=torch.float64)
    horizon = 5 * patch
    with torch.no_grad():
        forecast = generate(model, src, horizon)
        encoded, cache = model.encode(src), model.new_cache()
        step_input, steps = src[:, -patch:], []
        for _ in range(horizon // patch):
            step_input = model.decode(step_input, encoded, cache)[..., 0]
            steps.append(step_input)
        by_hand = torch.cat(steps, dim=1)
    assert forecast.shape == (3, horizon, 5)
    torch.testing.assert_close(forecast, by_hand, rtol=0, atol=1e-12)
    if patch == 1:
        torch.testing.assert_close(forecast, naive_generate(model, src, horizon), rtol=0, atol=1e-10)


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("variant", ["step-tokens", "channel-independent"])
@pytest.mark.parametrize("distribution", ["normal", "student_t", "quantile"])
def test_sample_paths_equal_a_hand_written_sampling_loop_with_the_same_generator(variant, distribution, path):
    path = baseline_path(path, 6, 4)
    model = small_model(**VARIANTS[variant], **COVARIATES, distribution=distribution, baseline_path=path)
    src, covariates = torch.randn(3, 6, 5, dtype=torch.float64), covariates_for(3, 6, 4)
    with torch.no_grad():
        paths = generate(model, src, 4, num_samples=7, generator=torch.Generator().manual_seed(1), **covariates)
        # By hand, as Hugging Face's generate does: the memory copied 7 times, each prefix re-decoded every step.
        by_hand = naive_generate(model, src, 4, num_samples=7, generator=torch.Generator().manual_seed(1), **covariates)
    assert paths.shape == (3, 7, 4, 5)
    assert paths.dtype == torch.float64
    torch.testing.assert_close(paths, by_hand, rtol=0, atol=1e-10)
    assert (paths[:, 1:] != paths[:, :1]).any(dim=(2, 3)).all()  # the paths of one series differ


def test_sample_paths_share_the_encoder_output_instead_of_copying_it():
    model = small_model(distribution="normal")
    encoded = model.encode(torch.randn(2, 6, 5, dtype=torch.float64))
    shared = encoded.with_samples(50)
    assert shared.memory is encoded.memory
    cache = model.new_cache()
    model.decode(torch.randn(100, 1, 5, dtype=torch.float64), shared, cache)
    assert cache.layers[0].memory_keys.shape[0] == 2  # cross-attention keys per series, not per path


def test_generate_truncates_to_a_horizon_that_is_not_a_multiple_of_the_patch():
    model = small_model(patch_length=4)
    src = torch.randn(2, 8, 5, dtype=torch.float64)
    assert generate(model, src, 6).shape == (2, 6, 5)
    torch.testing.assert_close(generate(model, src, 6), generate(model, src, 8)[:, :6])


def test_consecutive_generate_calls_are_independent():
    model = small_model()
    first, second = torch.randn(2, 12, 5, dtype=torch.float64), torch.randn(2, 12, 5, dtype=torch.float64)
    alone = generate(model, second, 6)
    generate(model, first, 6)
    torch.testing.assert_close(generate(model, second, 6), alone, rtol=0, atol=0)


def test_generate_runs_under_bf16_autocast():
    model = small_model(torch.float32)
    src = torch.randn(4, 12, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16), torch.no_grad():
        forecast = generate(model, src, 8)
    assert forecast.shape == (4, 8, 5)
    assert torch.isfinite(forecast).all()
    torch.testing.assert_close(forecast.float(), generate(model, src, 8), rtol=0.1, atol=0.1)


def test_differentiable_cached_unroll_runs_under_bf16_autocast():
    model = small_model(torch.float32).train()
    src = torch.randn(4, 12, 5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = generate(model, src, 6).float().pow(2).mean()
    loss.backward()
    assert all(torch.isfinite(p.grad).all() for p in model.parameters())


def test_gradients_flow_through_the_cache_like_full_redecoding():
    model = small_model()
    src = torch.randn(3, 12, 5, dtype=torch.float64)
    target = torch.randn(3, 3, 5, dtype=torch.float64)
    gradients = []
    for unroll in (lambda: generate(model, src, 3), lambda: unroll_by_full_redecoding(model, src, 3)):
        loss = (unroll() - target).pow(2).mean()
        gradients.append(torch.autograd.grad(loss, list(model.parameters())))
    for cached, full in zip(*gradients):
        assert relative_difference(cached, full) <= 1e-8


def test_no_gradient_decoding_does_not_keep_a_graph():
    model = small_model()
    with torch.no_grad():
        forecast = generate(model, torch.randn(2, 12, 5, dtype=torch.float64), 4)
    assert not forecast.requires_grad


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda m: m.encode(torch.randn(12, 5)), r"context must have shape \(N, length, 5\).*got \(12, 5\)"),
        (lambda m: m.encode(torch.randn(2, 12, 4)), r"context must have shape \(N, length, 5\).*got \(2, 12, 4\)"),
        (lambda m: generate(m, torch.randn(2, 12, 5), 0), r"horizon must be a positive integer; got 0"),
        (lambda m: generate(m, torch.randn(2, 12, 5), -3), r"horizon must be a positive integer; got -3"),
        (lambda m: m.encode(torch.randn(1, 40, 5)), r"context: time steps 0\.\.39 exceed max_length=32"),
        (lambda m: generate(m, torch.randn(1, 4, 5), 40), r"tgt: time steps 32\.\.32 exceed max_length=32"),
        (
            lambda m: m.decode(torch.randn(2, 1, 5), Encoded(torch.randn(3, 12, 32))),
            r"memory must have shape \(2, S, 32\) to match tgt; got \(3, 12, 32\)",
        ),
        (
            lambda m: m.encode(torch.randn(2, 12, 5), past_covariates=torch.randn(2, 12, 1)),
            r"past_covariates must have shape \(2, length, 0\); got \(2, 12, 1\)",
        ),
    ],
)
def test_bad_input_names_the_argument_and_the_expected_shape(call, message):
    model = small_model(torch.float32, max_length=32)
    with pytest.raises(ValueError, match=message):
        call(model)


def test_decoding_past_the_known_future_covariates_is_an_error():
    model = small_model(torch.float32, n_future_covariates=1)
    src = torch.randn(2, 12, 5)
    with pytest.raises(ValueError, match=r"future_covariates cover 3 forecast steps; forecasting step 4 needs them"):
        generate(model, src, 4, future_covariates=torch.randn(2, 15, 1))


def test_memory_from_another_batch_than_the_cache_is_rejected():
    model = small_model(torch.float32)
    cache = model.new_cache()
    model.decode(torch.randn(4, 1, 5), model.encode(torch.randn(4, 12, 5)), cache)
    with pytest.raises(
        ValueError, match=r"memory has shape \(2, 12, 32\) but the cache was filled for .*\(4, 12, 32\)"
    ):
        model.decode(torch.randn(2, 1, 5), model.encode(torch.randn(2, 12, 5)), cache)
    with pytest.raises(ValueError, match=r"memory is not the tensor this cache was filled for"):
        model.decode(torch.randn(4, 1, 5), model.encode(torch.randn(4, 12, 5)), cache)


def test_patched_model_rejects_lengths_that_are_not_multiples_of_the_patch():
    model = small_model(patch_length=4)
    with pytest.raises(ValueError, match=r"length a positive multiple of patch_length=4; got \(2, 10, 5\)"):
        model.encode(torch.randn(2, 10, 5, dtype=torch.float64))


def test_invalid_architecture_is_rejected():
    with pytest.raises(ValueError, match="d_model must be divisible by nhead; got d_model=30, nhead=4"):
        small_model(d_model=30, nhead=4)


def test_a_cache_filled_without_gradients_can_continue_with_them():
    model = small_model()
    src, tgt = torch.randn(2, 12, 5, dtype=torch.float64), torch.randn(2, 6, 5, dtype=torch.float64)
    encoded, cache = model.encode(src), model.new_cache()
    with torch.no_grad():
        first = model.decode(tgt[:, :3], encoded, cache)
    rest = torch.cat([model.decode(tgt[:, t : t + 1], encoded, cache) for t in range(3, 6)], dim=1)
    assert rest.requires_grad
    full = model.decode(tgt, encoded)
    assert (torch.cat([first, rest], dim=1) - full).abs().max().item() <= 1e-10


def test_gradients_through_a_cache_started_without_them_equal_full_decoding():
    """Positions decoded without gradients, then a chunk of two and single positions with them: the gradients
    that travel back along the unroll reach every input that had one, as in one full pass."""
    model = small_model()
    src = torch.randn(2, 12, 5, dtype=torch.float64)
    tgt = torch.randn(2, 7, 5, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 4, 5, dtype=torch.float64)
    encoded, cache = model.encode(src), model.new_cache()
    with torch.no_grad():
        model.decode(tgt[:, :3], encoded, cache)
    chunks = [tgt[:, 3:5], tgt[:, 5:6], tgt[:, 6:7]]
    cached = torch.cat([model.decode(chunk, encoded, cache)[..., 0] for chunk in chunks], dim=1)
    full = model.decode(tgt, encoded)[:, 3:, :, 0]
    (cached_gradient,) = torch.autograd.grad((cached * weights).sum(), tgt)
    (full_gradient,) = torch.autograd.grad((full * weights).sum(), tgt)
    # The later inputs only: the prefix was decoded without gradients, so no gradient reaches its inputs.
    assert relative_difference(cached_gradient[:, 3:], full_gradient[:, 3:]) <= 1e-10
    assert cached_gradient[:, :3].abs().max() == 0


def test_a_position_decoded_without_gradients_inside_a_differentiable_unroll_cuts_only_its_own_paths():
    model = small_model()
    src = torch.randn(2, 12, 5, dtype=torch.float64)
    tgt = torch.randn(2, 3, 5, dtype=torch.float64, requires_grad=True)
    encoded, cache = model.encode(src), model.new_cache()
    first = model.decode(tgt[:, :1], encoded, cache)[..., 0]
    with torch.no_grad():
        model.decode(tgt[:, 1:2], encoded, cache)
    last = model.decode(tgt[:, 2:3], encoded, cache)[..., 0]
    (gradient,) = torch.autograd.grad(first.sum() + last.sum(), tgt)
    full = model.decode(tgt, encoded)[..., 0]
    (last_only,) = torch.autograd.grad(full[:, 2].sum(), tgt)
    assert relative_difference(gradient[:, 2], last_only[:, 2]) <= 1e-10  # the newest input: one path, as in full
    assert gradient[:, 1].abs().max() == 0  # decoded without gradients: no path from it
    assert gradient[:, 0].abs().max() > 0


@pytest.mark.parametrize("length", [1, 7, 96])
def test_the_single_query_attention_path_equals_scaled_dot_product_attention(length):
    query, keys, values = (torch.randn(3, 4, n, 8, dtype=torch.float64) for n in (1, length, length))
    expected = F.scaled_dot_product_attention(query, keys, values)
    torch.testing.assert_close(attend(query, keys, values), expected, rtol=0, atol=1e-12)


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("distribution", ["none", "normal"])
@pytest.mark.parametrize("variant", VARIANTS)
def test_fixed_shape_decoding_equals_cached_decoding(variant, distribution, path):
    """The form a CUDA graph captures (fixed buffers, the position as a tensor), run eagerly on the CPU."""
    patch = VARIANTS[variant].get("patch_length", 1)
    model = small_model(
        **VARIANTS[variant],
        **COVARIATES,
        distribution=distribution,
        baseline_path=baseline_path(path, 4 * patch, 5 * patch),
    )
    src, covariates = torch.randn(3, 4 * patch, 5, dtype=torch.float64), covariates_for(3, 4 * patch, 5 * patch)
    samples = None if distribution == "none" else 4
    with torch.no_grad():
        paths = [
            generate(model, src, 5 * patch, samples, torch.Generator().manual_seed(0), static, **covariates)
            for static in (False, True)
        ]
    torch.testing.assert_close(paths[1], paths[0], rtol=0, atol=1e-12)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
@pytest.mark.parametrize("path", BASELINE_PATHS)
def test_a_cuda_graph_replays_the_cached_decode_exactly(path):
    model = small_model(torch.float32, **COVARIATES, baseline_path=baseline_path(path, 6, 12)).cuda()
    src, covariates = (
        torch.randn(8, 6, 5).cuda(),
        {k: v.cuda().float() if v.is_floating_point() else v.cuda() for k, v in covariates_for(8, 6, 12).items()},
    )
    with torch.no_grad():
        torch.testing.assert_close(
            generate(model, src, 12, cuda_graph=True, **covariates),
            generate(model, src, 12, **covariates),
            rtol=1e-5,
            atol=1e-5,
        )


@pytest.mark.parametrize(
    ("context_length", "horizon", "patch"),
    [
        (336, 96, 24),  # ETTh1: 4 steps of a day
        (168, 48, 12),  # M4 Hourly: 4 steps of half a day
        (12, 12, 3),  # the embedded series (make train)
        (28, 14, 7),  # the embedded panel: 7 would be 2 steps, 2 would be 7
        (12, 6, 2),  # 3 steps: 1 would be 6
        (52, 13, 13),  # 13 is prime: one step
        (12, 7, 1),  # nothing but 1 divides both: 7 steps, the fewest the lengths allow
        (24, 4, 1),  # a short horizon keeps one step per token
    ],
)
def test_patch_length_auto_is_the_shortest_common_divisor_with_at_most_four_decoder_steps(
    context_length, horizon, patch
):
    assert auto_patch_length(context_length, horizon) == patch


def test_patch_length_auto_is_refused_in_python_with_the_function_that_resolves_it():
    with pytest.raises(InputError, match=r"patch_length='auto' is resolved from the data by python -m project\.cli"):
        ForecastTransformer(patch_length="auto")


@pytest.mark.parametrize(
    "regime", [ScheduledSampling(steps=10), FreeRunning()], ids=["scheduled_sampling", "free_running"]
)
def test_channel_independence_with_one_target_is_the_joint_model(regime):
    """With one target channel the two layouts are the same computation, down to the random draws, through a
    training step: the defaults' round five (experiments/results/search/base_defaults.md) carries the single-target
    datasets' runs over on this. Free running feeds every prediction back; scheduled sampling draws its coins."""
    arguments = dict(
        COVARIATES,
        n_targets=1,
        d_model=16,
        nhead=2,
        num_encoder_layers=1,
        num_decoder_layers=1,
        dim_feedforward=32,
        dropout=0.1,
        patch_length=2,
        context_length=8,
        horizon=4,
        loss="mae",
        normalisation=LastValueNorm(),
        regime=regime,
    )
    batch = {"context": torch.randn(3, 8, 1), "target": torch.randn(3, 4, 1), **covariates_for(3, 8, 4, torch.float32)}
    results = []
    for channel_independent in (False, True):
        torch.manual_seed(0)
        module = forecaster(channel_independent=channel_independent, **arguments)
        initial = {name: value.clone() for name, value in module.state_dict().items()}
        optimizer = torch.optim.AdamW(module.parameters(), lr=1e-2)
        loss = module.training_loss(batch)  # dropout (and scheduled sampling's coins) drawn in train mode
        loss.backward()
        gradients = {name: parameter.grad.clone() for name, parameter in module.named_parameters()}
        optimizer.step()
        module.eval()
        results.append((initial, loss, gradients, module.state_dict(), module.forecast(batch).point))
    for joint, independent in zip(*results):
        if isinstance(joint, dict):
            assert joint.keys() == independent.keys()
            assert all(torch.equal(joint[name], independent[name]) for name in joint)
        else:
            assert torch.equal(joint, independent)
