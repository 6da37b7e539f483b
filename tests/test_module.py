import lightning as L
import numpy as np
import pytest
import torch

from project.data import WindowDataModule
from project.training import regimes
from project.training.module import ContextNorm
from tests.conftest import relative_difference
from tests.helpers import learnable_series, quiet_trainer, tiny_module


@pytest.mark.filterwarnings("ignore:You are trying to `self.log()`")
@pytest.mark.parametrize(
    ("loss", "expected"), [("mse", torch.nn.functional.mse_loss), ("mae", torch.nn.functional.l1_loss)]
)
def test_training_step_returns_the_mean_loss_over_batch_time_and_channels(loss, expected):
    module = tiny_module(loss=loss).double()
    context, target = torch.randn(3, 8, 2, dtype=torch.float64), torch.randn(3, 4, 2, dtype=torch.float64)
    torch.manual_seed(1)
    step_loss = module.training_step((context, target), 0)
    torch.manual_seed(1)
    assert step_loss.item() == expected(module.training_forecast(context, target), target, reduction="mean").item()


def test_huber_loss_uses_its_delta():
    module = tiny_module(loss="huber", huber_delta=0.5)
    assert isinstance(module.loss, torch.nn.HuberLoss)
    assert module.loss.delta == 0.5


@pytest.mark.parametrize(
    ("overrides", "regime"),
    [
        (dict(training_mode="teacher_forcing"), "teacher_forced"),
        (dict(training_mode="free_running", feedback="detach"), "free_running_detached"),
        (dict(training_mode="free_running", feedback="bptt"), "free_running_bptt"),
    ],
)
def test_each_training_mode_runs_its_regime(overrides, regime):
    module = tiny_module(**overrides).double()
    context, target = torch.randn(3, 8, 2, dtype=torch.float64), torch.randn(3, 4, 2, dtype=torch.float64)
    model = module.model
    memory, start = model.encode(context), model.start_of(context)
    function = getattr(regimes, regime)
    expected = function(model, memory, start, target if regime == "teacher_forced" else target.shape[1])
    torch.testing.assert_close(module.training_forecast(context, target), expected, rtol=0, atol=0)


def test_context_norm_statistics_come_from_the_context_only():
    context, target = torch.randn(4, 8, 2), torch.randn(4, 4, 2)
    norm = ContextNorm(context)
    torch.testing.assert_close(norm.mean, context.mean(1, keepdim=True))
    torch.testing.assert_close(norm.inverse(norm(target)), target)
    module = tiny_module(instance_norm=True, training_mode="teacher_forcing").double()
    context, target = context.double(), target.double()
    changed = target.clone()
    changed[:, 1:] *= 1000  # the future of position 0 changes wildly
    forecast, forecast_changed = module.training_forecast(context, target), module.training_forecast(context, changed)
    torch.testing.assert_close(forecast_changed[:, 0], forecast[:, 0], rtol=0, atol=1e-12)
    torch.testing.assert_close(module(context), module(context * 1.0), rtol=0, atol=0)


def test_instance_norm_makes_forecasts_equivariant_to_shifting_and_scaling_the_context():
    module = tiny_module(instance_norm=True).double().eval()
    context = torch.randn(2, 8, 2, dtype=torch.float64)
    torch.testing.assert_close(module(3 * context + 5), 3 * module(context) + 5, rtol=1e-4, atol=1e-4)  # eps in std


def test_patch_length_must_divide_context_and_horizon():
    with pytest.raises(ValueError, match="horizon=6 must be a multiple of patch_length=4"):
        tiny_module(context_length=8, horizon=6, patch_length=4)


@pytest.mark.parametrize(
    "overrides",
    [
        dict(training_mode="teacher_forcing"),
        dict(training_mode="free_running", feedback="detach"),
        dict(training_mode="free_running", feedback="bptt"),
        dict(training_mode="scheduled_sampling", schedule_steps=40),
    ],
    ids=["teacher_forcing", "detach", "bptt", "scheduled_sampling"],
)
def test_a_short_training_run_lowers_the_free_running_validation_loss(overrides):
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(), context_length=8, horizon=4, batch_size=32)
    module = tiny_module(learning_rate=3e-3, warmup_steps=5, **overrides)
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
    module = tiny_module(learning_rate=1e-2, warmup_steps=4)
    quiet_trainer(max_steps=20, callbacks=[recorder], limit_val_batches=0).fit(module, datamodule)
    rates = np.array(recorder.rates)
    np.testing.assert_allclose(rates[:4], [2.5e-3, 5e-3, 7.5e-3, 1e-2])
    assert all(np.diff(rates[4:]) < 0)
    expected_last = 1e-2 * 0.5 * (1 + np.cos(np.pi * 15 / 16))
    assert relative_difference(torch.tensor(rates[-1]), torch.tensor(expected_last)) < 1e-9
