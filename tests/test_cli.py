import re
import shlex

import pandas as pd
import pytest
import torch

from project.runs import read_scalars
from tests.helpers import REPOSITORY, SMALL_MODEL, only_run, quick_fit_arguments, run_cli


def readme_command(prefix: str) -> list[str]:
    """The README's command that starts with ``prefix``, split as a shell would."""
    for line in (REPOSITORY / "README.md").read_text().splitlines():
        if line.strip().startswith(prefix):
            return shlex.split(line.strip(), comments=True)
    raise AssertionError(f"the README has no command starting with {prefix!r}")


def assert_ok(result):
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


@pytest.fixture(scope="module")
def trained_run(tmp_path_factory):
    """One short CLI fit on the embedded data, shared by the tests that need a checkpoint."""
    log_dir = tmp_path_factory.mktemp("logs")
    assert_ok(run_cli("fit", "--config", "configs/base.yaml", *SMALL_MODEL, *quick_fit_arguments(log_dir, steps=4)))
    return only_run(log_dir)


def test_the_readme_fit_command_writes_a_checkpoint_the_config_and_event_files(tmp_path):
    command = readme_command("python -m project.cli fit --config configs/base.yaml")
    assert command[:3] == ["python", "-m", "project.cli"]
    result = run_cli(*command[3:], *quick_fit_arguments(tmp_path))
    assert_ok(result)
    run = only_run(tmp_path)
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert list((run / "checkpoints").glob("best-*.ckpt"))
    assert (run / "config.yaml").is_file()
    assert list(run.glob("events.out.tfevents.*"))
    assert "val/loss" in read_scalars(run)


def test_test_from_a_checkpoint_restores_hyperparameters_and_beats_nothing_silently(trained_run, tmp_path):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    # No model settings on the command line: they come from the checkpoint, not from base.yaml's defaults.
    result = run_cli(
        "test", "--config", "configs/base.yaml", f"--ckpt_path={checkpoint}", *quick_fit_arguments(tmp_path)
    )
    assert_ok(result)
    metrics = read_scalars(only_run(tmp_path))
    assert {"test/mse", "test/mae", "test/smape", "test/loss_teacher_forced", "test/mse_repeat_last"} <= set(metrics)


def test_a_checkpoint_used_with_an_incompatible_config_fails_with_one_line(trained_run, tmp_path):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    result = run_cli(
        "test", "--config", "configs/base.yaml", f"--ckpt_path={checkpoint}", "--model.d_model=64",
        "--data.horizon=24", *quick_fit_arguments(tmp_path),
    )  # fmt: skip
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    last_line = result.stderr.strip().splitlines()[-1]
    assert last_line.startswith(f"error: {checkpoint} was trained with other settings than the config:")
    assert "model.d_model=64 (checkpoint: 16)" in last_line
    assert "data.horizon=24 (checkpoint: 12)" in last_line


def test_predict_from_a_checkpoint_writes_forecasts_in_original_units(trained_run, tmp_path):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    output = tmp_path / "forecast.csv"
    result = run_cli(
        "predict", "--config", "configs/base.yaml", f"--ckpt_path={checkpoint}", f"--predictions.output={output}",
        *quick_fit_arguments(tmp_path),
    )  # fmt: skip
    assert_ok(result)
    forecast = pd.read_csv(output, parse_dates=["timestamp"])
    assert list(forecast.columns) == [
        "window",
        "step",
        "timestamp",
        "load",
        "temperature",
        "lagged_load",
        "pressure",
        "regime",
    ]
    assert forecast["step"].tolist() == list(range(1, 13))
    # The synthetic series ends at 2025-02-20 15:00; the forecast continues hourly from there.
    assert forecast["timestamp"].iloc[0] == pd.Timestamp("2025-02-20 16:00")
    assert forecast["pressure"].between(900, 1100).all()  # original units (about 1000), not standardised


def test_resuming_from_last_ckpt_continues_at_the_saved_step(trained_run, tmp_path):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    assert torch.load(checkpoint, map_location="cpu", weights_only=False)["global_step"] == 4
    arguments = quick_fit_arguments(tmp_path, steps=8)
    arguments[arguments.index("--trainer.limit_train_batches=8")] = "--trainer.limit_train_batches=4"
    result = run_cli(
        "fit", "--config", "configs/base.yaml", *SMALL_MODEL, f"--ckpt_path={checkpoint}",
        "--trainer.log_every_n_steps=1", *arguments,
    )  # fmt: skip
    assert_ok(result)
    assert "Restored all states from the checkpoint" in result.stdout + result.stderr
    run = only_run(tmp_path)
    logged_steps = read_scalars(run)["train/loss"].index
    assert list(logged_steps) == [5, 6, 7, 8]  # optimizer steps 5 to 8: it went on from step 4, not from scratch
    assert torch.load(run / "checkpoints" / "last.ckpt", map_location="cpu", weights_only=False)["global_step"] == 8


@pytest.mark.slow
def test_ddp_with_two_cpu_processes_trains_and_synchronises_metrics(tmp_path):
    ddp = ["--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2"]
    # 990 validation windows (1001 rows) split evenly over 2 processes and batches of 55: the sampler pads
    # nothing, so the synchronised metric must equal a single process's.
    data = ["--data.batch_size=55", "--data.val_fraction=0.1001", "--data.test_fraction=0.1999"]
    result = run_cli(
        "fit", "--config", "configs/base.yaml", *SMALL_MODEL, *data, *ddp, *quick_fit_arguments(tmp_path / "fit")
    )
    assert_ok(result)
    run = only_run(tmp_path / "fit")
    assert (run / "checkpoints" / "last.ckpt").is_file()
    checkpoint = run / "checkpoints" / "last.ckpt"
    values = {}
    for name, extra in (("ddp", ddp), ("single", ["--trainer.devices=1"])):
        arguments = [*data, f"--ckpt_path={checkpoint}", *extra, *quick_fit_arguments(tmp_path / name)]
        arguments.remove("--trainer.limit_val_batches=2")
        assert_ok(run_cli("validate", "--config", "configs/base.yaml", *arguments))
        values[name] = read_scalars(only_run(tmp_path / name))["val/mse"].iloc[-1]
    # Unsynchronised, rank 0 would report the error on its half of the windows only.
    assert values["ddp"] == pytest.approx(values["single"], rel=1e-5)


def test_the_amp_preset_trains_with_bf16_on_cpu(tmp_path):
    result = run_cli(
        "fit", "--config", "configs/base.yaml", "--config", "configs/amp.yaml", *SMALL_MODEL,
        *quick_fit_arguments(tmp_path),
    )  # fmt: skip
    assert_ok(result)
    assert "Using bfloat16 Automatic Mixed Precision" in result.stdout + result.stderr
    config = (only_run(tmp_path) / "config.yaml").read_text()
    assert re.search(r"precision: 16-mixed", config)
    assert torch.isfinite(torch.tensor(read_scalars(only_run(tmp_path))["val/loss"].to_numpy())).all()


def test_the_debug_preset_runs_one_batch_of_everything():
    result = run_cli("fit", "--config", "configs/base.yaml", "--config", "configs/debug.yaml", *SMALL_MODEL)
    assert_ok(result)


def test_bad_data_input_prints_one_line_and_exits_nonzero(tmp_path):
    result = run_cli("fit", "--config", "configs/base.yaml", f"--data.source={tmp_path / 'missing.csv'}")
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1] == f"error: {tmp_path / 'missing.csv'}: data file not found"


def test_fit_help_documents_every_option():
    result = run_cli("fit", "--help")
    assert_ok(result)
    for expected in (
        "--model.training_mode",
        "teacher-forcing memory",
        "--model.feedback",
        "--data.context_length",
        "look-back window",
        "--forecast_figures.every_n_epochs",
        "--predictions.output",
        "--checkpoint.monitor",
    ):
        assert expected in result.stdout


def test_the_ddp_preset_uses_every_gpu_of_the_node():
    result = run_cli("fit", "--config", "configs/base.yaml", "--config", "configs/ddp.yaml", "--print_config")
    assert_ok(result)
    assert "strategy: ddp" in result.stdout
    assert "devices: -1" in result.stdout
    assert "num_nodes: 1" in result.stdout
