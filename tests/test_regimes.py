import itertools

import pytest
import torch

from project.training import regimes
from project.training.memory import SavedTensorsMeter
from project.training.module import Forecaster
from project.training.naive import naive_free_running
from tests.conftest import relative_difference, small_model


def loss_and_gradients(model, forecast_fn, target):
    model.zero_grad()
    loss = (forecast_fn() - target).pow(2).mean()
    loss.backward()
    return loss.detach(), [p.grad.clone() for p in model.parameters()]


def assert_same_loss_and_gradients(model, fast, slow, target, tolerance=1e-8):
    fast_loss, fast_gradients = loss_and_gradients(model, fast, target)
    slow_loss, slow_gradients = loss_and_gradients(model, slow, target)
    assert relative_difference(fast_loss, slow_loss) <= tolerance
    for fast_gradient, slow_gradient in zip(fast_gradients, slow_gradients):
        assert relative_difference(fast_gradient, slow_gradient) <= tolerance


def batch(n=4, context=12, horizon=6, dtype=torch.float64):
    return torch.randn(n, context, 5, dtype=dtype), torch.randn(n, horizon, 5, dtype=dtype)


def regime(model, src, name, target=None, **kwargs):
    memory, start = model.encode(src), model.start_of(src)
    if name == "teacher_forced":
        return regimes.teacher_forced(model, memory, start, target)
    if name == "scheduled_sampling":
        return regimes.scheduled_sampling(model, memory, start, target, **kwargs)
    return getattr(regimes, name)(model, memory, start, kwargs.get("horizon", target.shape[1]))


def test_free_running_detach_has_the_loss_and_gradients_of_the_fully_detached_naive_loop():
    model, (src, target) = small_model().train(), batch()
    assert_same_loss_and_gradients(
        model,
        lambda: regime(model, src, "free_running_detached", target),
        lambda: naive_free_running(model, src, target, feedback="detach"),
        target,
    )


def test_free_running_bptt_has_the_loss_and_gradients_of_the_undetached_naive_loop():
    model, (src, target) = small_model().train(), batch()
    assert_same_loss_and_gradients(
        model,
        lambda: regime(model, src, "free_running_bptt", target),
        lambda: naive_free_running(model, src, target, feedback="bptt"),
        target,
    )


def test_bptt_and_detach_have_the_same_forecast_but_different_gradients():
    model, (src, target) = small_model().train(), batch()
    detach_loss, detach_gradients = loss_and_gradients(
        model, lambda: regime(model, src, "free_running_detached", target), target
    )
    bptt_loss, bptt_gradients = loss_and_gradients(
        model, lambda: regime(model, src, "free_running_bptt", target), target
    )
    assert relative_difference(bptt_loss, detach_loss) <= 1e-10
    assert max(relative_difference(b, d) for b, d in zip(bptt_gradients, detach_gradients)) > 1e-3


def test_the_posted_loop_differs_from_both_forms():
    model, (src, target) = small_model().train(), batch()
    _, partial = loss_and_gradients(model, lambda: naive_free_running(model, src, target, "partial"), target)
    for feedback in ("detach", "bptt"):
        _, other = loss_and_gradients(model, lambda f=feedback: naive_free_running(model, src, target, f), target)
        assert max(relative_difference(p, o) for p, o in zip(partial, other)) > 1e-6


@pytest.mark.parametrize("variant", [{"patch_length": 3}, {"channel_independent": True}])
def test_detach_matches_a_step_by_step_detached_unroll_for_patched_and_channel_independent_models(variant):
    model = small_model(**variant).train()
    src, target = batch(context=12, horizon=6)

    def detached_unroll():
        memory, forecasts = model.encode(src), []
        for _ in range(target.shape[1] // model.patch_length):
            sequence = torch.cat([model.start_of(src), *[f.detach() for f in forecasts]], dim=1)
            forecasts.append(model.decode(sequence, memory)[:, -model.patch_length :])
        return torch.cat(forecasts, dim=1)

    assert_same_loss_and_gradients(
        model, lambda: regime(model, src, "free_running_detached", target), detached_unroll, target
    )


def test_scheduled_sampling_at_probability_one_is_teacher_forcing():
    model, (src, target) = small_model(), batch()
    sampled = regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=1.0)
    torch.testing.assert_close(sampled, regime(model, src, "teacher_forced", target), rtol=0, atol=0)


def test_scheduled_sampling_at_probability_zero_is_free_running_detach():
    model, (src, target) = small_model(), batch()
    assert_same_loss_and_gradients(
        model,
        lambda: regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=0.0),
        lambda: regime(model, src, "free_running_detached", target),
        target,
        tolerance=0,
    )


def test_scheduled_sampling_mixes_true_and_predicted_inputs_per_position():
    model, (src, target) = small_model(), batch(n=64)
    teacher = regime(model, src, "teacher_forced", target)
    free = regime(model, src, "free_running_detached", target)
    mixed = regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=0.5)
    # Position 0 always starts from the last observed value; later positions differ from both pure regimes.
    torch.testing.assert_close(mixed[:, 0], teacher[:, 0])
    assert not torch.allclose(mixed[:, 1:], teacher[:, 1:])
    assert not torch.allclose(mixed[:, 1:], free[:, 1:])


@pytest.mark.parametrize("schedule", ["linear", "exponential", "inverse_sigmoid"])
def test_teacher_forcing_probability_decays_from_one_to_the_floor(schedule):
    probabilities = [regimes.teacher_forcing_probability(step, schedule, 100, 0.05) for step in range(0, 201, 10)]
    assert probabilities[0] >= 0.99
    assert all(later <= earlier for earlier, later in itertools.pairwise(probabilities))
    assert probabilities[10] <= 0.05 + 1e-12  # at decay_steps: the floor (or 1% above a zero floor)
    assert probabilities[-1] == 0.05


def saved_bytes(model, forecast_fn):
    with SavedTensorsMeter(exclude=model.parameters()) as meter:
        forecast = forecast_fn()
    forecast.sum().backward()
    return meter.bytes


@pytest.mark.parametrize("horizon", [12, 48])
def test_detach_and_bptt_save_about_what_teacher_forcing_saves(horizon):
    model = small_model(torch.float32, d_model=64, nhead=4, num_encoder_layers=3, num_decoder_layers=3).train()
    src, target = batch(n=16, horizon=horizon, dtype=torch.float32)
    teacher = saved_bytes(model, lambda: regime(model, src, "teacher_forced", target))
    detach = saved_bytes(model, lambda: regime(model, src, "free_running_detached", target))
    bptt = saved_bytes(model, lambda: regime(model, src, "free_running_bptt", target))
    assert detach <= 1.1 * teacher
    assert bptt <= 1.5 * teacher


def test_bptt_memory_grows_linearly_with_the_horizon():
    model = small_model(torch.float32).train()
    src = torch.randn(8, 12, 5)
    per_step = [saved_bytes(model, lambda h=h: model.rollout(model.encode(src), src[:, -1:], h)) for h in (8, 16, 32)]
    encoder_and_first = per_step[0] - (per_step[1] - per_step[0])
    growth = [(b - encoder_and_first) / h for b, h in zip(per_step, (8, 16, 32))]
    assert max(growth) / min(growth) < 1.01  # constant bytes per step: O(T), no copy of the past per step


def test_the_naive_loop_saves_at_least_five_times_what_teacher_forcing_saves():
    model = small_model(torch.float32, d_model=64, nhead=4, num_encoder_layers=3, num_decoder_layers=3).train()
    src, target = batch(n=16, horizon=12, dtype=torch.float32)
    teacher = saved_bytes(model, lambda: regime(model, src, "teacher_forced", target))
    for feedback in ("partial", "detach"):
        assert saved_bytes(model, lambda f=feedback: naive_free_running(model, src, target, f)) >= 5 * teacher


def test_activation_checkpointing_saves_less_and_keeps_the_gradient():
    src, target = batch(n=8, horizon=12)
    gradients, memory = [], []
    for checkpoint_layers in (False, True):
        torch.manual_seed(0)
        module = Forecaster(d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, checkpoint_layers=checkpoint_layers)
        module = module.double().train()
        memory.append(saved_bytes(module, lambda m=module: m.training_forecast(src, target)))
        gradients.append(loss_and_gradients(module, lambda m=module: m.training_forecast(src, target), target)[1])
    assert memory[1] < 0.5 * memory[0]
    for plain, checkpointed in zip(*gradients):
        assert relative_difference(checkpointed, plain) <= 1e-10
