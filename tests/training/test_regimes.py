import itertools

import pytest
import torch

from project.errors import InputError
from project.model.decoding import rollout
from project.model.network import component_spec
from project.training import regimes
from project.training.regimes import REGIMES, FreeRunning, RegimeOptions, ScheduledSampling, TeacherForcing
from tests.helpers import (
    BASELINE_PATHS,
    COVARIATES,
    baseline_path,
    covariates_for,
    forecaster,
    refusal_of,
    relative_difference,
    small_model,
    tiny_module,
)
from tests.reference_loops import naive_free_running
from tests.saved_tensors import SavedTensorsMeter

DISTRIBUTIONS = ("normal", "student_t", "quantile")


def loss_and_gradients(model, forecast_fn, target):
    model.zero_grad()
    loss = model.distribution.loss(forecast_fn(), target)
    loss.backward()
    return loss.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters()]


def assert_same_loss_and_gradients(model, fast, slow, target, tolerance=1e-8):
    fast_loss, fast_gradients = loss_and_gradients(model, fast, target)
    slow_loss, slow_gradients = loss_and_gradients(model, slow, target)
    assert relative_difference(fast_loss, slow_loss) <= tolerance
    scale = max(gradient.abs().max().item() for gradient in slow_gradients)
    for fast_gradient, slow_gradient in zip(fast_gradients, slow_gradients, strict=True):
        # Every gradient, those that are zero in the reference too: to the tolerance at the largest one's scale.
        torch.testing.assert_close(fast_gradient, slow_gradient, rtol=tolerance, atol=tolerance * scale)


def batch(n=4, context=12, horizon=6, dtype=torch.float64):
    return torch.randn(n, context, 5, dtype=dtype), torch.randn(n, horizon, 5, dtype=dtype)


def regime(model, src, name, target, covariates=None, **options):
    encoded, start = model.encode(src, **(covariates or {})), model.start_of(src)
    return REGIMES[name].forecast(model, encoded, start, target, RegimeOptions(**options))


def test_every_regime_is_registered_once():
    assert set(REGIMES) == {"teacher_forcing", "free_running_detach", "free_running_bptt", "scheduled_sampling"}
    for name, entry in REGIMES.items():
        assert regimes.regime_name(component_spec(entry)) == name
    as_configs_name_them = {"class_path": "project.training.FreeRunning", "init_args": {"gradient": "bptt"}}
    assert regimes.regime_name(as_configs_name_them) == "free_running_bptt"
    assert regimes.regime_name({"class_path": "userregime.Mine", "init_args": {}}) is None


class HalfTeacherForced(regimes.Regime):
    """A user's regime: half the true previous values, in teacher forcing's one pass."""

    calls: list

    def teacher_forcing_probability(self, step, fade=None):
        return 0.5

    def forecast(self, network, encoded, start, target, options):
        self.calls.append(options.teacher_forcing_probability)
        return regimes.teacher_forcing(network, encoded, start, target, options)


def test_a_regime_subclass_trains_with_no_other_edit():
    regime = HalfTeacherForced()
    regime.calls = []
    module = tiny_module(regime=regime)
    loss = module.training_loss({"context": torch.randn(2, 8, 2), "target": torch.randn(2, 4, 2)})
    loss.backward()
    assert regime.calls == [0.5]
    assert module.teacher_forcing_probability() == 0.5
    assert module.hparams.regime == {"class_path": f"{__name__}.HalfTeacherForced", "init_args": {}}


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ScheduledSampling(schedule="cubic"), "schedule must be one of linear, exponential, inverse_sigmoid"),
        (lambda: FreeRunning(gradient="sideways"), "gradient must be one of detach, bptt; got 'sideways'"),
        (
            lambda: FreeRunning(gradient="bptt", rollout_dropout=False),
            "rollout_dropout=false applies to the no-grad rollout of gradient=detach",
        ),
        (
            lambda: tiny_module(regime=FreeRunning(feedback="sample")),
            "feedback=sample draws from a predicted distribution",
        ),
        (
            lambda: tiny_module(regime=ScheduledSampling(feedback="sample")),
            "feedback=sample draws from a predicted distribution",
        ),
        (
            lambda: tiny_module(regime=FreeRunning(gradient="bptt", feedback="sample"), distribution="quantile"),
            "differentiates through the draws, which Quantiles cannot",
        ),
    ],
)
def test_a_regime_refuses_its_own_bad_options_in_one_line(build, message):
    assert message in refusal_of(build)


def test_an_option_exists_only_on_the_regime_it_applies_to():
    with pytest.raises(TypeError):
        TeacherForcing(rollout_dropout=False)
    with pytest.raises(TypeError):
        FreeRunning(steps=10)
    tiny_module(regime=FreeRunning(gradient="bptt", feedback="sample"), distribution="normal")  # reparameterised


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("with_covariates", [False, True], ids=["targets-only", "covariates"])
@pytest.mark.parametrize("gradient", ["detach", "bptt"])
def test_free_running_has_the_loss_and_gradients_of_the_naive_loop_detached_as_it_says(gradient, with_covariates, path):
    """detach: the fully detached naive loop; bptt: the undetached one."""
    model = small_model(**(COVARIATES if with_covariates else {}), baseline_path=baseline_path(path, 12, 6)).train()
    src, target = batch()
    covariates = covariates_for(4, 12, 6) if with_covariates else {}
    assert_same_loss_and_gradients(
        model,
        lambda: regime(model, src, f"free_running_{gradient}", target, covariates),
        lambda: naive_free_running(model, src, target, gradient, **covariates),
        target,
    )


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("distribution", DISTRIBUTIONS)
def test_detach_with_sampled_feedback_equals_the_naive_loop_given_the_same_draws(distribution, path):
    model = small_model(**COVARIATES, distribution=distribution, baseline_path=baseline_path(path, 12, 6)).train()
    src, target = batch()
    covariates = covariates_for(4, 12, 6)
    assert_same_loss_and_gradients(
        model,
        lambda: regime(
            model,
            src,
            "free_running_detach",
            target,
            covariates,
            feedback_value="sample",
            generator=torch.Generator().manual_seed(3),
        ),
        lambda: naive_free_running(
            model, src, target, "detach", "sample", torch.Generator().manual_seed(3), **covariates
        ),
        target,
    )


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("distribution", ["none", "normal", "student_t"])
def test_bptt_and_detach_have_the_same_forecast_but_different_gradients(distribution, path):
    """Fed back the mean, or samples (a distribution): bptt through sampled feedback is the naive loop that
    differentiates the same draws, and differs from detach only by what flows back through them."""
    model = small_model(distribution=distribution, baseline_path=baseline_path(path, 12, 6)).train()
    src, target = batch()
    sampled = distribution != "none"
    options = dict(feedback_value="sample") if sampled else {}

    def forecast(name):
        generator = dict(generator=torch.Generator().manual_seed(5)) if sampled else {}
        return lambda: regime(model, src, name, target, **options, **generator)

    if sampled:
        naive = lambda: naive_free_running(model, src, target, "bptt", "sample", torch.Generator().manual_seed(5))  # noqa: E731
        assert_same_loss_and_gradients(model, forecast("free_running_bptt"), naive, target)
    bptt_loss, bptt = loss_and_gradients(model, forecast("free_running_bptt"), target)
    detach_loss, detach = loss_and_gradients(model, forecast("free_running_detach"), target)
    assert relative_difference(bptt_loss, detach_loss) <= 1e-10
    assert max(relative_difference(b, d) for b, d in zip(bptt, detach) if d.abs().max() > 0) > 1e-3


def test_the_posted_loop_differs_from_both_forms():
    model, (src, target) = small_model().train(), batch()
    _, partial = loss_and_gradients(model, lambda: naive_free_running(model, src, target, "partial"), target)
    for gradient in ("detach", "bptt"):
        _, other = loss_and_gradients(model, lambda f=gradient: naive_free_running(model, src, target, f), target)
        assert max(relative_difference(p, o) for p, o in zip(partial, other)) > 1e-6


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("variant", [{"patch_length": 3}, {"channel_independent": True}])
def test_detach_matches_a_step_by_step_detached_unroll_for_patched_and_channel_independent_models(variant, path):
    model = small_model(**variant, n_future_covariates=3, baseline_path=baseline_path(path, 12, 6)).train()
    src, target = batch(context=12, horizon=6)
    future = {"future_covariates": torch.randn(4, 18, 3, dtype=torch.float64)}

    def detached_unroll():
        encoded, forecasts = model.encode(src, **future), []
        for _ in range(target.shape[1] // model.patch_length):
            sequence = torch.cat([model.start_of(src), *[f[..., 0].detach() for f in forecasts]], dim=1)
            forecasts.append(model.decode(sequence, encoded)[:, -model.patch_length :])
        return torch.cat(forecasts, dim=1)

    assert_same_loss_and_gradients(
        model, lambda: regime(model, src, "free_running_detach", target, future), detached_unroll, target
    )


@pytest.mark.parametrize("path", BASELINE_PATHS)
def test_scheduled_sampling_at_probability_one_is_teacher_forcing_and_at_zero_free_running_detach(path):
    model, (src, target) = small_model(baseline_path=baseline_path(path, 12, 6)), batch()
    sampled = regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=1.0)
    torch.testing.assert_close(sampled, regime(model, src, "teacher_forcing", target), rtol=0, atol=0)
    assert_same_loss_and_gradients(
        model,
        lambda: regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=0.0),
        lambda: regime(model, src, "free_running_detach", target),
        target,
        tolerance=0,
    )


def test_scheduled_sampling_mixes_true_and_predicted_inputs_per_position():
    model, (src, target) = small_model(), batch(n=64)
    teacher = regime(model, src, "teacher_forcing", target)
    free = regime(model, src, "free_running_detach", target)
    mixed = regime(model, src, "scheduled_sampling", target, teacher_forcing_probability=0.5)
    # Position 0 always starts from the last observed value; later positions differ from both pure regimes.
    torch.testing.assert_close(mixed[:, 0], teacher[:, 0])
    assert not torch.allclose(mixed[:, 1:], teacher[:, 1:])
    assert not torch.allclose(mixed[:, 1:], free[:, 1:])


@pytest.mark.parametrize("rollout_dropout", [True, False])
def test_the_no_grad_rollout_keeps_or_drops_dropout_as_configured(rollout_dropout):
    model = small_model(dropout=0.3).train()
    src, _ = batch()
    encoded, start = model.encode(src), model.start_of(src)
    options = RegimeOptions(rollout_dropout=rollout_dropout)
    fed_back = [regimes._no_grad_rollout(model, encoded, start, 6, options) for _ in range(2)]
    assert model.training  # the mode is restored
    with torch.no_grad():
        model.eval()
        deterministic = rollout(model, encoded, start, 5)[1]  # the values fed back at positions 1..5
        model.train()
    if rollout_dropout:  # what the naive training loop feeds back: a fresh dropout mask at every call
        assert not torch.allclose(fed_back[0], fed_back[1])
        assert not torch.allclose(fed_back[0], deterministic)
    else:  # what predict feeds back
        torch.testing.assert_close(fed_back[0], deterministic, rtol=0, atol=0)
        torch.testing.assert_close(fed_back[1], deterministic, rtol=0, atol=0)


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


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("horizon", [12, 48])
def test_detach_and_bptt_save_about_what_teacher_forcing_saves(horizon, path):
    sizes = dict(d_model=64, nhead=4, num_encoder_layers=3, num_decoder_layers=3)
    model = small_model(torch.float32, **sizes, baseline_path=baseline_path(path, 12, horizon)).train()
    src, target = batch(n=16, horizon=horizon, dtype=torch.float32)
    teacher = saved_bytes(model, lambda: regime(model, src, "teacher_forcing", target))
    detach = saved_bytes(model, lambda: regime(model, src, "free_running_detach", target))
    bptt = saved_bytes(model, lambda: regime(model, src, "free_running_bptt", target))
    assert detach <= 1.05 * teacher
    assert bptt <= 1.05 * teacher


def test_bptt_memory_grows_linearly_with_the_horizon():
    model = small_model(torch.float32).train()
    src = torch.randn(8, 12, 5)
    per_step = [
        saved_bytes(model, lambda h=h: rollout(model, model.encode(src), src[:, -1:], h)[0]) for h in (8, 16, 32)
    ]
    encoder_and_first = per_step[0] - (per_step[1] - per_step[0])
    growth = [(b - encoder_and_first) / h for b, h in zip(per_step, (8, 16, 32))]
    assert max(growth) / min(growth) < 1.01  # constant bytes per step: O(T), no copy of the past per step


def test_the_naive_loop_saves_at_least_five_times_what_teacher_forcing_saves():
    model = small_model(torch.float32, d_model=64, nhead=4, num_encoder_layers=3, num_decoder_layers=3).train()
    src, target = batch(n=16, horizon=12, dtype=torch.float32)
    teacher = saved_bytes(model, lambda: regime(model, src, "teacher_forcing", target))
    for gradient in ("partial", "detach"):
        assert saved_bytes(model, lambda f=gradient: naive_free_running(model, src, target, f)) >= 5 * teacher


def test_activation_checkpointing_saves_less_and_keeps_the_gradient():
    src, target = batch(n=8, horizon=12)
    batch_dict = {"context": src, "target": target}
    gradients, memory = [], []
    for checkpoint_layers in (False, True):
        torch.manual_seed(0)
        module = forecaster(
            n_targets=5, d_model=32, nhead=4, dim_feedforward=64, dropout=0.0, checkpoint_layers=checkpoint_layers
        )
        module = module.double().train()
        memory.append(saved_bytes(module, lambda m=module: m.training_forecast(batch_dict)))
        gradients.append(
            loss_and_gradients(module.network, lambda m=module: m.training_forecast(batch_dict), target)[1]
        )
    assert memory[1] < 0.5 * memory[0]
    for plain, checkpointed in zip(*gradients):
        assert relative_difference(checkpointed, plain) <= 1e-10


USER_REGIME = '''
from project.training import FreeRunning


class Rollout(FreeRunning):
    """Free running under another name, in the user's own module."""
'''


@pytest.mark.slow
def test_a_users_own_regime_trains_through_the_cli_and_is_the_naive_loop(tmp_path, monkeypatch):
    from project.checkpoints import read_checkpoint
    from project.cli import datamodule_from_config
    from project.data import WindowDataModule
    from project.training.module import COVARIATES as COVARIATE_NAMES
    from project.training.module import Forecaster
    from tests.helpers import BASE, cli, quick_fit_arguments, users_module

    users_module(tmp_path, "userregime", USER_REGIME, monkeypatch)
    logs = tmp_path / "logs"
    assert cli("fit", "--config", BASE, "--model.regime=userregime.Rollout", *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    spec = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["regime"]
    assert spec["class_path"] == "userregime.Rollout"
    with pytest.raises(InputError, match=r"names userregime\.Rollout \(at model\.regime\), outside this project"):
        Forecaster.load_from_checkpoint(checkpoint)  # the checkpoint alone names no code
    trained = read_checkpoint(checkpoint)
    module = Forecaster.load_from_checkpoint(checkpoint, trusted=["userregime.Rollout"])
    assert type(module.regime).__name__ == "Rollout"
    assert module.regime.init_args == {"gradient": "detach", "feedback": "mean", "rollout_dropout": True}
    recorded = trained["datamodule_hyper_parameters"]
    datamodule = datamodule_from_config({k: v for k, v in recorded.items() if not k.startswith("_")})
    datamodule.load_state_dict(trained[WindowDataModule.__qualname__])  # the run's scaling and training order
    datamodule.setup("fit")
    batch = next(iter(datamodule.train_dataloader()))
    batch = {name: value.double() if value.is_floating_point() else value for name, value in batch.items()}
    src, target = batch.pop("context"), batch.pop("target")
    covariates = {name: batch[name] for name in COVARIATE_NAMES if name in batch}
    model = module.network.double().eval()  # eval: the naive loop draws no dropout masks of its own

    def fast():
        encoded, start = model.encode(src, **covariates), model.start_of(src)
        return module.regime.forecast(model, encoded, start, target, module.regime.options())

    naive = lambda: naive_free_running(model, src, target, "detach", **covariates)  # noqa: E731
    assert_same_loss_and_gradients(model, fast, naive, target)
