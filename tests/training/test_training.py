"""The Trainer features the template promises, checked in-process: accumulation, exact resume, mixed precision."""

import lightning as L
import pytest
import torch
from lightning.pytorch.callbacks import EarlyStopping
from lightning.pytorch.utilities.exceptions import SIGTERMException

from project.data import WindowDataModule
from project.errors import InputError
from project.training import FreeRunning
from project.training.callbacks import ForecastCheckpoint, RandomState, ValidateEachEpochAtLeast
from tests.helpers import (
    ScriptedValidation,
    Terminate,
    adamw,
    learnable_series,
    quiet_trainer,
    relative_difference,
    tiny_module,
    warmup_cosine,
)


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
    module = tiny_module(lr_scheduler=warmup_cosine(1), optimizer=adamw(1e-2))
    recorder = RecordFirstStep()
    trainer = quiet_trainer(
        max_steps=1, accumulate_grad_batches=accumulate, limit_val_batches=0, callbacks=[recorder], precision="64-true"
    )
    trainer.fit(module, datamodule)
    return recorder


def test_accumulating_four_batches_of_8_equals_one_batch_of_32():
    accumulated, whole = first_step(batch_size=8, accumulate=4), first_step(batch_size=32, accumulate=1)
    for accumulated_gradient, whole_gradient in zip(accumulated.gradients, whole.gradients):
        assert relative_difference(accumulated_gradient, whole_gradient) <= 1e-10
    for accumulated_parameter, whole_parameter in zip(accumulated.parameters, whole.parameters):
        torch.testing.assert_close(accumulated_parameter, whole_parameter, rtol=1e-10, atol=1e-12)


def resumable_run(directory, callbacks=(), ckpt_path=None) -> L.LightningModule:
    """A seeded run with dropout (so the random state matters) over 30 steps, crossing an epoch boundary."""
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(dropout=0.2, optimizer=adamw(3e-3), lr_scheduler=warmup_cosine(5))
    checkpoint = ForecastCheckpoint(dirpath=directory, monitor="val/loss", save_last=True)
    trainer = quiet_trainer(
        max_steps=30,
        val_check_interval=10,
        limit_val_batches=2,
        enable_checkpointing=True,
        callbacks=[checkpoint, RandomState(), *callbacks],
    )
    trainer.fit(module, datamodule, ckpt_path=ckpt_path)
    return module


def test_sigterm_saves_last_ckpt_at_the_current_step_and_resuming_reaches_the_uninterrupted_parameters(tmp_path):
    uninterrupted = resumable_run(tmp_path / "whole")
    with pytest.raises(SIGTERMException):
        resumable_run(tmp_path / "parts", callbacks=[Terminate(step=23)])  # mid-epoch: 17 batches per epoch
    last = torch.load(tmp_path / "parts" / "last.ckpt", weights_only=False)
    assert last["global_step"] == 23
    resumed = resumable_run(tmp_path / "parts", ckpt_path=tmp_path / "parts" / "last.ckpt")
    for expected, actual in zip(uninterrupted.parameters(), resumed.parameters()):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


@pytest.mark.parametrize("save_last", [True, False])
def test_save_last_is_followed_as_the_user_gave_it(tmp_path, save_last):
    """last.ckpt holds the final step even when the metric did not improve: a learning rate too small to move a
    float32 weight, so that the validation loss never improves after the first validation (zero itself is outside
    the option's domain)."""
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    checkpoint = ForecastCheckpoint(dirpath=tmp_path, monitor="val/loss", save_last=save_last)
    trainer = quiet_trainer(
        max_steps=10, val_check_interval=5, limit_val_batches=2, enable_checkpointing=True, callbacks=[checkpoint]
    )
    trainer.fit(tiny_module(optimizer=adamw(1e-30)), datamodule)
    trainer.test(tiny_module(), datamodule, verbose=False)  # setup again: the user's setting still stands
    assert (tmp_path / "last.ckpt").is_file() == save_last
    assert not save_last or torch.load(tmp_path / "last.ckpt", weights_only=False)["global_step"] == 10
    assert checkpoint.keep_latest == save_last
    assert list(tmp_path.glob("epoch=*.ckpt"))  # the best checkpoint either way


def test_save_last_link_is_refused_in_one_line_rather_than_written_as_a_copy(tmp_path):
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    checkpoint = ForecastCheckpoint(dirpath=tmp_path, monitor="val/loss", save_last="link")
    trainer = quiet_trainer(max_steps=2, enable_checkpointing=True, callbacks=[checkpoint])
    with pytest.raises(InputError, match=r"save_last=link would make last\.ckpt a link") as error:
        trainer.fit(tiny_module(), datamodule)
    assert "\n" not in str(error.value)
    assert not list(tmp_path.glob("*.ckpt"))


@pytest.mark.parametrize(
    ("limits", "losses", "said"),
    [
        ({"max_steps": 30, "val_check_interval": 10}, [3.0, 2.0, 1.0], "raise trainer.max_steps=30 to train longer"),
        ({"max_epochs": 3}, [3.0, 2.0, 1.0], "raise trainer.max_epochs=3 to train longer"),
        ({"max_steps": 30, "val_check_interval": 10}, [3.0, 1.0, 2.0], None),  # the best came before the end
        (
            {"max_steps": 5, "val_check_interval": 10, "check_val_every_n_epoch": None},
            [],
            "no validation ran in this fit's 5 steps (one every trainer.val_check_interval=10 training batches), so no "
            "best checkpoint was kept; lower it",
        ),
    ],
)
def test_a_fit_whose_best_validation_is_its_last_or_that_never_validated_says_so_and_which_option_to_change(
    tmp_path, capsys, limits, losses, said
):
    checkpoint = ForecastCheckpoint(dirpath=tmp_path, monitor="val/loss")
    trainer = quiet_trainer(enable_checkpointing=True, num_sanity_val_steps=0, callbacks=[checkpoint], **limits)
    trainer.fit(ScriptedValidation(losses))
    notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
    if said is None:
        assert notes == []
    elif said.startswith("no validation"):
        assert notes == [f"note: {said}"]
    else:
        assert notes == [
            "note: the best val/loss came at the last validation (step 30), so the model may still be improving; "
            + said
        ]


@pytest.mark.parametrize(
    ("interval", "validated_at", "patience"), [(25, [10, 20, 30], 5), (4, [4, 8, 12, 16, 20, 24, 28], 2)]
)
def test_an_epoch_shorter_than_the_validation_interval_is_validated_at_its_end(interval, validated_at, patience):
    """Ten batches an epoch: a validation every 25 batches across epochs becomes one per epoch, and a patience of 2
    validations (50 batches) becomes 5 (the short series' case); every 4 batches, shorter than an epoch, stays as it is
    (the panels' case)."""

    class Steps(L.Callback):
        def __init__(self):
            self.steps = []

        def on_validation_end(self, trainer, pl_module):
            self.steps.append(trainer.global_step)

    steps, stopping = Steps(), EarlyStopping("val/loss", patience=2)
    limits = {"max_steps": 30, "val_check_interval": interval, "check_val_every_n_epoch": None}
    trainer = quiet_trainer(num_sanity_val_steps=0, callbacks=[ValidateEachEpochAtLeast(), steps, stopping], **limits)
    trainer.fit(ScriptedValidation(list(range(10, 0, -1))))  # always improving: early stopping never ends it
    assert steps.steps == validated_at
    assert stopping.patience == patience


def test_bf16_mixed_precision_trains_on_cpu():
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(400), context_length=8, horizon=4, batch_size=16)
    module = tiny_module(regime=FreeRunning(gradient="bptt"))
    trainer = quiet_trainer(max_steps=4, precision="bf16-mixed", limit_val_batches=2, val_check_interval=4)
    trainer.fit(module, datamodule)
    assert trainer.precision == "bf16-mixed"
    assert torch.isfinite(trainer.callback_metrics["val/loss"])
    assert all(torch.isfinite(p).all() for p in module.parameters())
