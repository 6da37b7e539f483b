"""The Trainer features the template promises, checked in-process: accumulation, resume, mixed precision."""

import copy

import lightning as L
import torch
from lightning.pytorch.callbacks import ModelCheckpoint

from project.data import WindowDataModule
from tests.conftest import relative_difference
from tests.helpers import learnable_series, quiet_trainer, tiny_module


class RecordFirstStep(L.Callback):
    """Gradients just before the first optimizer step and parameters right after it."""

    def on_before_optimizer_step(self, trainer, pl_module, optimizer):
        if trainer.global_step == 0:
            self.gradients = [p.grad.clone() for p in pl_module.parameters()]

    def on_train_batch_end(self, trainer, pl_module, *args):
        if trainer.global_step == 1 and not hasattr(self, "parameters"):
            self.parameters = [p.detach().clone() for p in pl_module.parameters()]


def first_step(batch_size: int, accumulate: int) -> RecordFirstStep:
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(), context_length=8, horizon=4, batch_size=batch_size)
    module = tiny_module(warmup_steps=1, learning_rate=1e-2).double()
    recorder = RecordFirstStep()
    trainer = quiet_trainer(max_steps=1, accumulate_grad_batches=accumulate, limit_val_batches=0, callbacks=[recorder])
    datamodule.setup("fit")
    datamodule.series = datamodule.series.double()
    trainer.fit(module, datamodule)
    return recorder


def test_accumulating_four_batches_of_8_equals_one_batch_of_32():
    accumulated, whole = first_step(batch_size=8, accumulate=4), first_step(batch_size=32, accumulate=1)
    for accumulated_gradient, whole_gradient in zip(accumulated.gradients, whole.gradients):
        assert relative_difference(accumulated_gradient, whole_gradient) <= 1e-10
    for accumulated_parameter, whole_parameter in zip(accumulated.parameters, whole.parameters):
        torch.testing.assert_close(accumulated_parameter, whole_parameter, rtol=1e-10, atol=1e-12)


def test_resuming_restores_the_global_step_and_the_optimizer_state(tmp_path):
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    checkpointing = ModelCheckpoint(dirpath=tmp_path, save_last=True)
    quiet_trainer(max_steps=3, limit_val_batches=0, callbacks=[checkpointing], enable_checkpointing=True).fit(
        tiny_module(), datamodule
    )
    saved = torch.load(tmp_path / "last.ckpt", weights_only=False)

    class RecordStart(L.Callback):
        def on_train_start(self, trainer, pl_module):
            self.global_step = trainer.global_step
            self.optimizer_state = copy.deepcopy(trainer.optimizers[0].state_dict())  # training goes on in place

    start = RecordStart()
    quiet_trainer(max_steps=5, limit_val_batches=0, callbacks=[start]).fit(
        tiny_module(), datamodule, ckpt_path=tmp_path / "last.ckpt"
    )
    assert start.global_step == saved["global_step"] == 3
    restored, expected = start.optimizer_state["state"], saved["optimizer_states"][0]["state"]
    assert restored.keys() == expected.keys()
    for index in expected:
        for name in ("exp_avg", "exp_avg_sq", "step"):
            torch.testing.assert_close(restored[index][name], expected[index][name], rtol=0, atol=0)


def test_bf16_mixed_precision_trains_on_cpu():
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(training_mode="free_running", feedback="bptt")
    trainer = quiet_trainer(max_steps=4, precision="bf16-mixed", limit_val_batches=2, val_check_interval=4)
    trainer.fit(module, datamodule)
    assert trainer.precision == "bf16-mixed"
    assert torch.isfinite(trainer.callback_metrics["val/loss"])
    assert all(torch.isfinite(p).all() for p in module.parameters())
