import inspect

import lightning as L
import numpy as np
import pytest
import torch

from project.data import WindowDataModule
from project.errors import InputError
from project.training import (
    FreeRunning,
    InstanceNorm,
    LastValueNorm,
    ScheduledSampling,
    TeacherForcing,
    WarmupCosine,
)
from project.training.module import ContextNorm, Forecaster
from project.training.regimes import REGIMES, RegimeOptions
from tests.helpers import (
    adamw,
    learnable_series,
    quiet_trainer,
    refusal_of,
    relative_difference,
    tiny_module,
    warmup_cosine,
)


def random_batch(n=3, context=8, horizon=4, channels=2):
    return {
        "context": torch.randn(n, context, channels, dtype=torch.float64),
        "target": torch.randn(n, horizon, channels, dtype=torch.float64),
    }


@pytest.mark.filterwarnings("ignore:You are trying to `self.log()`")
@pytest.mark.parametrize(
    ("loss", "expected"), [("mse", torch.nn.functional.mse_loss), ("mae", torch.nn.functional.l1_loss)]
)
def test_training_step_returns_the_mean_loss_over_batch_time_and_channels(loss, expected):
    module = tiny_module(loss=loss).double()
    batch = random_batch()
    torch.manual_seed(1)
    step_loss = module.training_step(batch, 0)
    torch.manual_seed(1)
    forecast = module.training_forecast(batch)[..., 0]
    assert step_loss.item() == expected(forecast, batch["target"], reduction="mean").item()


def test_huber_loss_uses_its_delta():
    module = tiny_module(loss="huber", huber_delta=0.5).double()
    batch = {"context": torch.zeros(1, 8, 2, dtype=torch.float64), "target": torch.zeros(1, 4, 2, dtype=torch.float64)}
    parameters = torch.full((1, 4, 2, 1), 2.0, dtype=torch.float64)
    expected = torch.nn.functional.huber_loss(parameters[..., 0], batch["target"], delta=0.5)
    assert module.distribution.loss(parameters, batch["target"]).item() == expected.item()


@pytest.mark.parametrize("regime", ["teacher_forcing", "free_running_detach", "free_running_bptt"])
def test_each_regime_class_runs_its_registered_function(regime):
    module = tiny_module(regime=REGIMES[regime]).double()
    batch = random_batch()
    model = module.network
    encoded, start = model.encode(batch["context"]), model.start_of(batch["context"])
    expected = REGIMES[regime].forecast(model, encoded, start, batch["target"], RegimeOptions())
    torch.testing.assert_close(module.training_forecast(batch), expected, rtol=0, atol=0)


NORMALISATIONS = [InstanceNorm(), LastValueNorm()]


def test_each_normalisation_takes_its_location_and_scale_from_the_context_only():
    context, target = torch.randn(4, 8, 2), torch.randn(4, 4, 2)
    spread = (context.var(1, keepdim=True, unbiased=False) + 1e-5).sqrt()
    for normalisation, location in zip(NORMALISATIONS, [context.mean(1, keepdim=True), context[:, -1:]], strict=True):
        norm = ContextNorm(context, normalisation)
        assert torch.equal(norm.loc, location)
        assert torch.equal(norm.scale, spread)
        torch.testing.assert_close(norm.inverse(norm(target)), target)
        module = tiny_module(normalisation=normalisation, regime=TeacherForcing()).double()
        batch = {"context": context.double(), "target": target.double()}
        changed = dict(batch, target=batch["target"].clone())
        changed["target"][:, 1:] *= 1000  # the future of position 0 changes wildly
        forecast, forecast_changed = module.training_forecast(batch), module.training_forecast(changed)
        torch.testing.assert_close(forecast_changed[:, 0], forecast[:, 0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("normalisation", NORMALISATIONS, ids=repr)
@pytest.mark.parametrize(
    "regime",
    [TeacherForcing(), FreeRunning("detach"), FreeRunning("bptt"), ScheduledSampling(steps=10)],
    ids=repr,
)
def test_a_normalised_model_trains_each_regime_exactly_on_the_normalised_windows(normalisation, regime):
    """The normalisation wraps the regime: its forecast is the regime's own on the normalised context and target,
    mapped back to the batch's units, bit for bit in float64 (so every regime's exactness holds with it)."""
    module = tiny_module(normalisation=normalisation, regime=regime).double()
    batch, model = random_batch(), module.network
    loc, scale = normalisation.statistics(batch["context"])
    context, target = (batch["context"] - loc) / scale, (batch["target"] - loc) / scale
    encoded, start = model.encode(context), model.start_of(context)
    torch.manual_seed(0)
    expected = regime.forecast(model, encoded, start, target, regime.options(step=0))
    torch.manual_seed(0)
    forecast = module.training_forecast(batch)
    assert torch.equal(forecast, module.distribution.affine(expected, loc, scale))


@pytest.mark.parametrize("normalisation", NORMALISATIONS, ids=repr)
def test_a_normalisation_makes_forecasts_equivariant_to_shifting_and_scaling_the_context(normalisation):
    module = tiny_module(normalisation=normalisation).double().eval()
    context = torch.randn(2, 8, 2, dtype=torch.float64)
    torch.testing.assert_close(module(3 * context + 5), 3 * module(context) + 5, rtol=1e-4, atol=1e-4)  # eps in std


def test_last_value_norm_follows_a_level_that_has_just_moved_where_the_look_backs_mean_lags_it():
    """A look-back flat at 0 then at 10 for its last two steps: the last-value model sees the same input as for a
    look-back flat at 10 throughout (its forecast starts at the new level); the mean's sees a window mostly below."""
    moved = torch.cat([torch.zeros(1, 6, 1), torch.full((1, 2, 1), 10.0)], dim=1).double()
    assert LastValueNorm().statistics(moved)[0].item() == 10.0
    assert InstanceNorm().statistics(moved)[0].item() == 2.5


def test_a_forecast_may_go_beyond_the_trained_horizon_up_to_max_horizon():
    module = tiny_module(max_horizon=10).double().eval()
    context = torch.randn(2, 8, 2, dtype=torch.float64)
    longer = module(context, 10)
    assert longer.shape == (2, 10, 2)
    torch.testing.assert_close(longer[:, :4], module(context))  # the first steps do not depend on the length
    with pytest.raises(InputError, match=r"horizon 11 is outside 1\.\.max_horizon=10"):
        module(context, 11)
    with pytest.raises(InputError, match=r"horizon 0 is outside"):
        module(context, 0)  # 0 is not "the default"


@pytest.mark.parametrize("distribution", ["normal", "student_t", "quantile"])
def test_a_distribution_model_forecasts_mean_quantiles_and_sample_paths(distribution):
    module = tiny_module(distribution=distribution, num_samples=16, prediction_quantiles=[0.1, 0.5, 0.9]).eval()
    forecast = module.forecast(torch.randn(3, 8, 2), 4)
    assert forecast.samples.shape == (3, 16, 4, 2)
    assert forecast.quantiles.shape == (3, 4, 2, 3)
    assert (forecast.quantiles.diff(dim=-1) >= 0).all()
    expected = forecast.samples.median(1).values if distribution == "quantile" else forecast.samples.mean(1)
    torch.testing.assert_close(forecast.point, expected)


def test_point_forecasts_have_no_samples_or_quantiles():
    forecast = tiny_module().eval().forecast(torch.randn(3, 8, 2))
    assert forecast.samples is None
    assert forecast.quantiles is None


@pytest.mark.parametrize(
    "overrides",
    [
        dict(regime=TeacherForcing()),
        dict(regime=FreeRunning(gradient="detach")),
        dict(regime=FreeRunning(gradient="bptt")),
        dict(regime=ScheduledSampling(steps=40)),
    ],
    ids=["teacher_forcing", "detach", "bptt", "scheduled_sampling"],
)
def test_a_short_training_run_lowers_the_free_running_validation_loss(overrides):
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(), context_length=8, horizon=4, batch_size=32)
    module = tiny_module(optimizer=adamw(3e-3), lr_scheduler=warmup_cosine(5), **overrides)
    before = quiet_trainer().validate(module, datamodule, verbose=False)[0]["val/loss"]
    quiet_trainer(max_steps=60, limit_val_batches=0).fit(module, datamodule)
    after = quiet_trainer().validate(module, datamodule, verbose=False)[0]["val/loss"]
    assert after < 0.5 * before


def test_learning_rate_warms_up_then_follows_a_cosine_to_zero():
    class RecordLearningRate(L.Callback):
        def __init__(self):
            self.rates = []

        def on_train_batch_start(self, trainer, *args):
            self.rates.append(trainer.optimizers[0].param_groups[0]["lr"])

    recorder = RecordLearningRate()
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(optimizer=adamw(1e-2), lr_scheduler=warmup_cosine(4))
    quiet_trainer(max_steps=20, callbacks=[recorder], limit_val_batches=0).fit(module, datamodule)
    rates = np.array(recorder.rates)
    np.testing.assert_allclose(rates[:4], [2.5e-3, 5e-3, 7.5e-3, 1e-2])
    assert all(np.diff(rates[4:]) < 0)
    expected_last = 1e-2 * 0.5 * (1 + np.cos(np.pi * 15 / 16))
    assert relative_difference(torch.tensor(rates[-1]), torch.tensor(expected_last)) < 1e-9


def learning_rate_factor(step: int, warmup: int, schedule: str, total_steps: float) -> float:
    """The learning-rate factor as Forecaster.configure_optimizers computed it before the schedule was a class."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant" or not np.isfinite(total_steps):
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
    return 0.5 * (1.0 + np.cos(np.pi * progress))


@pytest.mark.parametrize(
    ("warmup", "decay", "run_steps"),
    [(100, "cosine", 1000), (0, "cosine", 50), (10, "constant", 200), (5, "cosine", float("inf"))],
)
def test_the_warmup_cosine_schedule_is_the_learning_rate_curve_of_before(warmup, decay, run_steps):
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1.0)
    schedule = WarmupCosine(optimizer, warmup_steps=warmup, decay=decay)
    schedule.set_run_steps(run_steps)
    for step in (0, 1, warmup // 2, max(0, warmup - 1), warmup, warmup + 1, 37, 49, 50, 199, 500, 999, 1000, 5000):
        assert schedule.factor(step) == learning_rate_factor(step, warmup, decay, run_steps), step


def test_the_default_optimizer_decays_weight_matrices_only_and_the_schedule_ends_at_the_runs_last_step():
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module()  # no optimizer argument: AdamW, lr 1e-3, weight decay 0.01, WarmupStableDecay(100)
    trainer = quiet_trainer(max_steps=3, limit_val_batches=0)
    trainer.fit(module, datamodule)
    (optimizer,) = trainer.optimizers
    assert type(optimizer) is torch.optim.AdamW
    weights, others = optimizer.param_groups
    assert (weights["weight_decay"], others["weight_decay"]) == (0.01, 0.0)
    assert all(p.dim() >= 2 for p in weights["params"])
    assert all(p.dim() < 2 for p in others["params"])
    assert weights["initial_lr"] == 1e-3
    (config,) = trainer.lr_scheduler_configs
    assert config.interval == "step"
    assert (config.scheduler.warmup_steps, config.scheduler.run_steps) == (100, 3)
    assert module.hparams.optimizer["class_path"] == "torch.optim.adamw.AdamW"
    assert module.hparams.optimizer["init_args"]["lr"] == 1e-3  # recorded with its defaults, as LightningCLI does
    assert module.hparams.lr_scheduler == {
        "class_path": "project.training.schedules.WarmupStableDecay",
        "init_args": {"warmup_steps": 100, "decay_share": 0.2},
    }


class RecordTeacherForcing(L.Callback):
    """The teacher-forcing probability at the start of each optimizer step, by step."""

    def __init__(self):
        self.probabilities = {}

    def on_train_batch_start(self, trainer, module, *args):
        self.probabilities[trainer.global_step] = module.teacher_forcing_probability()


def test_an_empty_schedule_steps_fades_teacher_forcing_over_the_learning_rates_decay():
    """A run of 20 optimizer steps whose decay (a fifth of the steps before it) the budget places at steps 17 to 20:
    99% teacher forcing while the rate holds, 1% when the rate reaches zero."""
    recorder = RecordTeacherForcing()
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(regime=ScheduledSampling())  # inverse sigmoid over the decay's share done
    trainer = quiet_trainer(max_steps=20, limit_train_batches=10, limit_val_batches=0, callbacks=[recorder])
    trainer.fit(module, datamodule)
    (config,) = trainer.lr_scheduler_configs
    start, length = config.scheduler.decay_steps()
    assert (round(start), length) == (17, 3)
    assert all(recorder.probabilities[step] == pytest.approx(0.99, rel=1e-12) for step in range(17))
    assert recorder.probabilities[17] > recorder.probabilities[18] > recorder.probabilities[19] > 0.01
    assert module.teacher_forcing_probability() == pytest.approx(0.01, rel=1e-12)  # step 20: the decay done


def test_an_empty_schedule_steps_without_a_decaying_schedule_fades_over_half_of_the_runs_optimizer_steps():
    recorder = RecordTeacherForcing()
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(regime=ScheduledSampling(), lr_scheduler=None)  # inverse sigmoid: 99% at step 0, 1% at 5
    trainer = quiet_trainer(
        max_epochs=2, limit_train_batches=10, accumulate_grad_batches=2, limit_val_batches=0, callbacks=[recorder]
    )
    trainer.fit(module, datamodule)
    assert trainer.estimated_stepping_batches == 10  # 2 epochs of 10 batches, accumulated 2 to a step
    assert recorder.probabilities[0] == pytest.approx(0.99, rel=1e-12)
    assert recorder.probabilities[5] == pytest.approx(0.01, rel=1e-12)
    assert all(recorder.probabilities[step] < 0.01 for step in range(6, 10))


def test_an_empty_schedule_steps_in_a_run_of_unknown_length_without_a_decaying_schedule_is_refused_at_fit_start():
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(regime=ScheduledSampling(), lr_scheduler=None)
    with pytest.raises(InputError, match=r"steps is empty, .* this run has neither .* set steps"):
        quiet_trainer(max_epochs=-1, limit_train_batches=2, limit_val_batches=0).fit(module, datamodule)
    assert module.global_step == 0


def test_forecaster_is_a_lightning_module_with_documented_arguments():
    documented = Forecaster.__doc__
    for name in inspect.signature(Forecaster.__init__).parameters.keys() - {"self"}:
        assert f"{name}:" in documented, f"{name} is not documented"


REJECTED = {  # the option named → settings it cannot have (the default loss is mse), and the words of its refusal
    "num_samples": (dict(num_samples=10), "PointForecast forecasts points"),
    "prediction_quantiles": (dict(prediction_quantiles=[0.05, 0.5, 0.95]), "PointForecast forecasts points"),
    "interval": (dict(interval=0.9), "PointForecast forecasts points"),
    "huber_delta": (dict(huber_delta=2.0), "huber_delta applies to loss=huber"),
    "predict_horizon": (dict(predict_horizon=50), "predict_horizon=50 exceeds max_horizon=16"),
    "d_model": (dict(d_model=30, nhead=4), "d_model must be divisible by nhead; got d_model=30, nhead=4"),
    "patch_length": (
        dict(context_length=8, horizon=6, patch_length=4),
        "horizon=6 must be a multiple of patch_length=4",
    ),
}


@pytest.mark.parametrize("option", REJECTED)
def test_every_rejected_combination_is_one_line_naming_the_option(option):
    """An option that would mean nothing with the others, or a combination the network cannot build."""
    settings, words = REJECTED[option]
    message = refusal_of(lambda: tiny_module(**settings))
    assert option in message
    assert words in message


@pytest.mark.parametrize(
    ("settings", "words"),
    [
        (dict(synthetic="panel"), "synthetic chooses the embedded data"),
        (dict(calendar_features=True), "calendar_features=true derives features from the timestamps"),
    ],
)
def test_a_data_option_that_would_have_no_effect_is_refused_naming_it(settings, words):
    with pytest.raises(InputError, match=words):
        WindowDataModule(learnable_series(200), context_length=8, horizon=4, **settings)


def test_a_data_rule_names_the_source_whole_however_long_its_path(tmp_path):
    folder = tmp_path / ("a-long-folder-name-" * 6)
    folder.mkdir()
    source = folder / "series.csv"
    learnable_series(200).to_csv(source, index=False)
    with pytest.raises(InputError) as refused:
        WindowDataModule(str(source), context_length=8, horizon=4, synthetic="panel")
    assert f"data.source={source} is read instead" in str(refused.value)
    with pytest.raises(InputError, match=r"data\.source=the DataFrame is read instead"):
        WindowDataModule(learnable_series(200), context_length=8, horizon=4, synthetic="panel")


def test_a_nan_forecast_makes_the_scores_nan_and_weights_are_kept():
    module = tiny_module()
    loss = module.val_scores["loss"]
    loss.update(torch.tensor(2.0), 10)
    loss.update(torch.tensor(1.0), 30)
    assert loss.compute().item() == 1.25  # weighted by the values each batch scored
    mse = module.val_scores["mse"]
    mse.update(torch.tensor([1.0, float("nan")]))
    assert torch.isnan(mse.compute())


def test_a_predict_horizon_ending_inside_a_patch_is_refused_with_future_covariates_only():
    message = r"predict_horizon=5 must be a multiple of patch_length=2 with future covariates"
    with pytest.raises(InputError, match=message):
        tiny_module(n_future_covariates=1, patch_length=2, predict_horizon=5)
    tiny_module(n_future_covariates=1, patch_length=2, predict_horizon=6)
    tiny_module(patch_length=2, predict_horizon=5)  # without covariates the last patch's extra steps are cut


@pytest.mark.parametrize("quantiles", [None, [0.1, 0.5, 0.9]])
def test_a_forecast_option_at_its_default_is_not_refused_for_points(quantiles):
    """Switching to PointForecast needs no other edit: options left at their defaults, however spelled, pass."""
    module = tiny_module(prediction_quantiles=quantiles, num_samples=100, interval=0.8)
    assert not module.has_distribution
    assert module.prediction_quantiles == [0.1, 0.5, 0.9]
