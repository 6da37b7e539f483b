"""Each logger preset trains a short run and writes where it says."""

import os

import pandas as pd
import pytest

from tests.helpers import BASE, SMALL_MODEL, cli, config

pytestmark = pytest.mark.slow  # Lightning's loggers end to end: the second tier


QUICK = [
    "--trainer.max_steps=2",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=2",
    "--trainer.limit_test_batches=2",
    "--trainer.log_every_n_steps=1",
    "--trainer.enable_progress_bar=false",
    "--forecast_figures.every_n_epochs=0",
]


def fit_with(preset: str, *extra: str) -> None:
    assert cli("fit", "--config", BASE, "--config", config(f"loggers/{preset}.yaml"), *SMALL_MODEL, *QUICK, *extra) == 0


def test_the_tensorboard_preset_writes_event_files(tmp_path):
    fit_with("tensorboard")
    assert list((tmp_path / "lightning_logs" / "synthetic_series" / "version_0").glob("events.out.tfevents.*"))


def test_the_csv_preset_writes_metrics_to_a_csv_file(tmp_path):
    fit_with("csv")
    metrics = pd.read_csv(tmp_path / "lightning_logs" / "synthetic_series" / "version_0" / "metrics.csv")
    assert {"train/loss", "val/loss", "test/mse"} <= set(metrics.columns)


def test_the_mlflow_preset_writes_a_local_store_its_client_reads_back(tmp_path):
    from mlflow.tracking import MlflowClient

    fit_with("mlflow")
    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'lightning_logs' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("forecasting").experiment_id])
    assert run.info.run_name == "synthetic_series"
    assert {"val/loss", "test/mse"} <= set(run.data.metrics)
    assert run.data.params["regime/class_path"] == "project.training.regimes.FreeRunning"


def test_the_wandb_preset_writes_an_offline_run(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_SILENT", "true")
    monkeypatch.setenv("WANDB_MODE", "offline")
    fit_with("wandb")
    runs = list((tmp_path / "lightning_logs" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    assert any(path.suffix == ".wandb" for path in runs[0].iterdir())


@pytest.mark.parametrize("preset", ["csv", "mlflow"])
def test_presets_stack_with_any_run(preset, tmp_path):
    assert os.path.isfile(config(f"loggers/{preset}.yaml"))
    fit_with(preset, "--config", config("panel.yaml"))
