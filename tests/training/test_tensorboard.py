"""What a user inspects in TensorBoard: the logged curves, hyperparameters and forecast figures."""

import lightning as L
import pytest
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.loggers import TensorBoardLogger
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
from tensorboard.plugins.hparams import plugin_data_pb2

from project.data import WindowDataModule
from project.training import ScheduledSampling
from project.training.figures import ForecastFigures
from project.training.naive_comparison import NaiveComparison
from project.training.runs import read_hyperparameters, read_scalars
from tests.helpers import learnable_series, tiny_module


def short_run(log_dir, figures_every_n_epochs=1, accumulate=1, **module_overrides):
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(600), context_length=8, horizon=4, batch_size=16)
    trainer = L.Trainer(
        max_epochs=2,
        limit_train_batches=6,
        limit_val_batches=2,
        limit_test_batches=2,
        log_every_n_steps=1,
        accumulate_grad_batches=accumulate,
        logger=TensorBoardLogger(log_dir, name="", version="run"),
        callbacks=[
            LearningRateMonitor("step"),
            ForecastFigures(every_n_epochs=figures_every_n_epochs, num_windows=2),
            NaiveComparison(),
        ],
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    module = tiny_module(**module_overrides)
    trainer.fit(module, datamodule)
    trainer.test(module, datamodule, verbose=False)
    return log_dir / "run"


def test_event_files_hold_every_promised_curve_and_hyperparameter(tmp_path):
    run = short_run(tmp_path, regime=ScheduledSampling(steps=10))
    scalars = read_scalars(run)
    split_tags = {
        f"{split}/{name}"
        for split in ("val", "test")
        for name in (
            "loss",
            "loss_teacher_forced",
            "mse",
            "mae",
            "smape",
            "mae_original_units",
            "mae_repeat_last_original_units",
        )
    }
    expected = {"train/loss", "train/loss_epoch", "train/teacher_forcing_probability", "lr-AdamW/weights", *split_tags}
    assert expected <= set(scalars)
    assert len(scalars["train/loss"]) == 12  # one point per optimizer step
    assert scalars["train/teacher_forcing_probability"].is_monotonic_decreasing
    assert read_hyperparameters(run)["effective_batch_size"] == 16
    expected_hyperparameters = {"effective_batch_size", "regime/class_path", "batch_size", "context_length"}
    expected_hyperparameters |= {"network/class_path", "network/init_args/d_model"}  # the network, nested
    assert any(expected_hyperparameters <= logged for logged in hparams_sessions(run))


def hparams_sessions(run):
    """The hyperparameter names of every session the TensorBoard HPARAMS plugin received."""
    for path in run.glob("events.out.tfevents.*"):
        for event in EventFileLoader(str(path)).Load():
            for value in event.summary.value:
                if value.tag == "_hparams_/session_start_info":
                    content = value.metadata.plugin_data.content
                    yield set(plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams)


@pytest.mark.parametrize(("every_n_epochs", "figures"), [(1, 2), (0, 0)])
def test_a_forecast_figure_is_logged_only_when_turned_on(tmp_path, every_n_epochs, figures):
    run = short_run(tmp_path, figures_every_n_epochs=every_n_epochs)
    logged = EventAccumulator(str(run), size_guidance={"images": 0})
    logged.Reload()
    images = logged.Images("val/forecasts") if "val/forecasts" in logged.Tags()["images"] else []
    assert len(images) == figures  # one per validation epoch
    assert all(image.width > 100 and image.height > 100 for image in images)


def test_effective_batch_size_counts_accumulation(tmp_path):
    run = short_run(tmp_path, accumulate=3)
    assert read_hyperparameters(run)["effective_batch_size"] == 48
