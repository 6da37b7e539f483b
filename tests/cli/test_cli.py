"""The CLI as a user runs it: the README's commands, checkpoints, predictions, Trainer flags, presets."""

import importlib
import inspect
import logging
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from project.checkpoints import read_checkpoint
from project.cli import cli_main
from project.data import WindowDataModule
from project.data.splits import as_split
from project.errors import InputError
from project.model import ForecastTransformer
from project.training.module import Forecaster
from project.training.naive_comparison import naive_comparison
from project.training.regimes import REGIMES, regime_arguments
from project.training.runs import read_scalars
from tests.helpers import (
    BASE,
    REPOSITORY,
    SMALL_MODEL,
    assert_ok,
    assert_refused_in_one_line,
    cli,
    config,
    last_line,
    only_run,
    quick_fit_arguments,
    run_cli,
    users_module,
)


def readme_command(prefix: str) -> list[str]:
    """The README's command that starts with ``prefix``, split as a shell would."""
    for line in (REPOSITORY / "README.md").read_text().splitlines():
        if line.strip().startswith(prefix):
            return shlex.split(line.strip(), comments=True)
    raise AssertionError(f"the README has no command starting with {prefix!r}")


def readme_full_command(prefix: str) -> list[str]:
    """The README's command that starts with ``prefix`` with its continued lines, split as a shell would."""
    lines = (REPOSITORY / "README.md").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(prefix))
    command = lines[start]
    while command.rstrip().endswith("\\"):
        start += 1
        command = command.rstrip()[:-1] + " " + lines[start].strip()
    return shlex.split(command, comments=True)


def test_the_readme_fit_command_writes_a_checkpoint_the_config_and_event_files(tmp_path):
    """The fast tier's one fresh ``python -m project.cli`` process: the README's command as a user types it."""
    command = readme_command("python -m project.cli fit --config configs/base.yaml")
    assert command[:3] == ["python", "-m", "project.cli"]
    validated = "--trainer.val_check_interval=2"  # base.yaml validates every 100 batches: once in the 2 steps
    result = run_cli(*command[3:], *quick_fit_arguments(tmp_path), validated)
    assert_ok(result)
    run = only_run(tmp_path)  # named after the data: the embedded synthetic series
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert list((run / "checkpoints").glob("best-*.ckpt"))
    assert (run / "config.yaml").is_file()
    assert list(run.glob("events.out.tfevents.*"))
    assert "val/loss" in read_scalars(run)


@pytest.mark.slow
def test_the_readme_panel_fit_then_predict_then_runs_commands_work_as_written(tmp_path):
    """The README's next steps, in order, in a fresh folder holding the configs: the panel fit (shortened), the
    predict command with the checkpoint path as the README spells it, and the run summary."""
    (tmp_path / "configs").symlink_to(REPOSITORY / "configs")
    fit = readme_command("python -m project.cli fit --config configs/base.yaml --config configs/panel.yaml")
    assert_ok(run_cli(*fit[3:], *SMALL_MODEL, *quick_fit_arguments(Path("lightning_logs")), cwd=tmp_path))
    predict = readme_command("python -m project.cli predict --ckpt_path")
    assert_ok(run_cli(*predict[3:], cwd=tmp_path))
    assert list(tmp_path.rglob("predictions.csv"))  # in the predict run's log folder
    runs = readme_command("python -m project.training.runs")
    result = subprocess.run(
        [sys.executable, *runs[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    assert_ok(result)
    assert "synthetic_panel" in result.stdout


@pytest.mark.slow
def test_the_readme_column_roles_command_trains_on_a_sales_table(tmp_path):
    """The README's column-roles example, as written, on a small table with those columns (shortened)."""
    (tmp_path / "configs").symlink_to(REPOSITORY / "configs")
    (tmp_path / "data").mkdir()
    rows = []
    for store in ("north", "south"):
        for product in ("tea", "cake"):
            for day, date in enumerate(pd.date_range("2024-01-01", periods=200, freq="D")):
                price = 2.0 + (day % 7 == 5)
                rows.append(
                    dict(
                        date=date,
                        store=store,
                        product=product,
                        sales=10 + day % 7 + 3 * (product == "tea"),
                        footfall=100 + day % 7,
                        price=price,
                        promotion=int(day % 14 == 0),
                        region=store,
                        store_size=1.5 if store == "north" else 2.5,
                    )
                )
    pd.DataFrame(rows).to_csv(tmp_path / "data" / "sales.csv", index=False)
    command = readme_full_command("python -m project.cli fit --config configs/base.yaml --data.source data/sales.csv")
    assert command[:3] == ["python", "-m", "project.cli"]
    logs = tmp_path / "logs"
    assert_ok(run_cli(*command[3:], *SMALL_MODEL, *quick_fit_arguments(logs), cwd=tmp_path))
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    data = read_checkpoint(checkpoint)["datamodule_hyper_parameters"]
    assert data["future_covariates"] == ["price", "promotion"]
    assert data["static_covariates"] == ["region", "store_size"]


@pytest.mark.slow  # a README command of another tool, end to end
def test_the_readme_tensorboard_command_reads_a_runs_curves(trained_run):
    command = readme_command("tensorboard --logdir lightning_logs")
    executable = Path(sys.executable).parent / command[0]
    # --inspect: TensorBoard's own digest of what it would show, instead of a server that never exits.
    result = subprocess.run(
        [str(executable), "--inspect", "--logdir", str(trained_run)], capture_output=True, text=True, timeout=120
    )
    assert_ok(result)
    assert "train/loss" in result.stdout
    assert "val/loss" in result.stdout


@pytest.mark.slow  # a README command of another tool, end to end
def test_the_readme_pre_commit_command_installs_the_hook(tmp_path):
    command = readme_command(".venv/bin/pre-commit install")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".pre-commit-config.yaml").write_text((REPOSITORY / ".pre-commit-config.yaml").read_text())
    executable = Path(sys.executable).parent / "pre-commit"
    result = subprocess.run([str(executable), *command[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert_ok(result)
    assert (tmp_path / ".git" / "hooks" / "pre-commit").is_file()


@pytest.mark.parametrize("naive_comparison", ["true", "false"])
def test_test_from_a_checkpoint_restores_its_settings_and_the_naive_comparison_is_removed_in_one_config_line(
    naive_comparison, trained_run, tmp_path, capfd
):
    """No model or data settings: they come from the checkpoint, not from the parser's defaults."""
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    arguments = [
        f"--ckpt_path={checkpoint}",
        f"--trainer.default_root_dir={tmp_path}",
        "--trainer.limit_test_batches=2",
    ]
    assert cli("test", *arguments, f"--naive_comparison.enabled={naive_comparison}") == 0
    metrics = read_scalars(only_run(tmp_path, "lightning_logs"))
    assert {"test/mse", "test/mae", "test/smape", "test/loss_teacher_forced", "test/mae_original_units"} <= set(metrics)
    naive = [name for name in metrics if "naive" in name or "repeat_last" in name]
    if naive_comparison == "true":
        assert {"test/mse_original_units", "test/mae_repeat_last_original_units"} <= set(metrics)
    else:
        assert not naive
        assert "MAE in original units" not in capfd.readouterr().err


@pytest.mark.slow
def test_test_and_validate_print_the_model_beside_the_naive_forecasts_in_original_units(trained_run, tmp_path, capfd):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    for command, split in (("test", "test"), ("validate", "val")):
        assert (
            cli(
                command,
                f"--ckpt_path={checkpoint}",
                f"--trainer.default_root_dir={tmp_path / command}",
                "--naive_comparison.season=12",
            )
            == 0
        )
        metrics = read_scalars(only_run(tmp_path / command, "lightning_logs"))
        printed = capfd.readouterr().err
        line = next(line for line in printed.splitlines() if line.startswith(f"{split} MAE in original units"))
        for name in ("mae_original_units", "mae_repeat_last_original_units", "mae_seasonal_naive_original_units"):
            assert f"{metrics[f'{split}/{name}'].iloc[-1]:.6g}" in line
        assert "seasonal naive (season 12)" in line


def test_a_season_longer_than_the_context_is_refused_in_one_line(trained_run, tmp_path, capsys):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    code = cli(
        "test", f"--ckpt_path={checkpoint}", f"--trainer.default_root_dir={tmp_path}", "--naive_comparison.season=13"
    )
    assert assert_refused_in_one_line(code, capsys) == (
        "error: naive_comparison.season=13 must be at most model.context_length=12 (the seasonal-naive forecast "
        "repeats the context's last season)"
    )


def test_the_comparison_warns_in_one_line_naming_each_naive_forecast_that_did_better():
    metrics = {
        "test/mae_original_units": 2.0,
        "test/mae_repeat_last_original_units": 1.5,
        "test/mae_seasonal_naive_original_units": 3.0,
    }
    comparison, warning = naive_comparison("test", metrics, 24).splitlines()
    assert comparison == "test MAE in original units: model 2, repeat-last 1.5, seasonal naive (season 24) 3"
    assert warning == "warning: the model's test MAE is worse than repeat-last on the same windows"
    metrics["test/mae_original_units"] = 1.0
    assert "warning" not in naive_comparison("test", metrics, 24)


def test_a_checkpoint_used_with_an_incompatible_config_fails_with_one_line(trained_run, tmp_path, capsys):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    code = cli(
        "test",
        "--config",
        BASE,
        f"--ckpt_path={checkpoint}",
        "--model.network.init_args.d_model=64",
        "--data.horizon=24",
        *quick_fit_arguments(tmp_path),
    )
    line = assert_refused_in_one_line(code, capsys)
    assert line.startswith(f"error: {checkpoint} was trained with other settings than the config:")
    assert "model.network.init_args.d_model=64 (checkpoint: 16)" in line
    assert "data.horizon=24 (checkpoint: 12)" in line


def test_a_setting_given_explicitly_at_its_default_value_is_compared_too(trained_run, tmp_path, capsys):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    # 128 is the default d_model; the checkpoint has 16. Set on purpose, it is a mismatch all the same.
    code = cli(
        "predict", f"--ckpt_path={checkpoint}", "--model.network.init_args.d_model=128", "--trainer.logger=false"
    )
    assert_refused_in_one_line(code, capsys, "model.network.init_args.d_model=128 (checkpoint: 16)")


@pytest.mark.slow
def test_patch_length_auto_trains_with_the_integer_it_resolves_to_and_the_config_still_tests_it(tmp_path, capsys):
    """``patch_length: auto``: look-back 24 and horizon 12 decode in 4 steps of 3. The run's
    config.yaml and checkpoint record 3; the same config then tests the checkpoint (scheduled sampling's teacher-forced
    diagnostic without a fit), and asks for another patch in one line."""
    lengths = ["--data.context_length=24", "--data.horizon=12"]
    base = ["--config", config("base.yaml"), *SMALL_MODEL, "--model.network.init_args.patch_length=auto", *lengths]
    assert cli("fit", *base, *quick_fit_arguments(tmp_path)) == 0
    run = only_run(tmp_path)
    assert "patch_length: 3\n" in (run / "config.yaml").read_text()
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert Forecaster.load_from_checkpoint(checkpoint).network.patch_length == 3
    testing = [*base, f"--ckpt_path={checkpoint}", "--trainer.logger=false"]
    assert cli("test", *testing, "--trainer.limit_test_batches=2") == 0
    code = cli("test", *testing, "--model.network.init_args.patch_length=2")
    assert_refused_in_one_line(code, capsys, "model.network.init_args.patch_length=2 (checkpoint: 3)")


def test_predict_with_only_a_checkpoint_forecasts_the_data_it_was_trained_on_in_original_units(trained_run, tmp_path):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    output = tmp_path / "forecast.csv"
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    forecast = pd.read_csv(output, parse_dates=["timestamp"])
    columns = ["window", "step", "timestamp", "load", "temperature", "lagged_load", "pressure", "regime"]
    assert list(forecast.columns) == columns
    assert forecast["step"].tolist() == list(range(1, 13))
    # The synthetic series ends at 2025-02-20 15:00; the forecast continues hourly from there.
    assert forecast["timestamp"].iloc[0] == pd.Timestamp("2025-02-20 16:00")
    assert forecast["pressure"].between(900, 1100).all()  # original units (about 1000), not standardised


USER_CLASSES = """
from project.data import WindowDataModule
from project.training.module import Forecaster


class DampedForecaster(Forecaster):
    def __init__(self, network, damping: float = 0.5, **kwargs):
        super().__init__(network, **kwargs)
        self.damping = damping


class ShiftedData(WindowDataModule):
    def __init__(self, shift: float = 0.0, **kwargs):
        super().__init__(**kwargs)
        self.shift = shift


class NotAForecaster:
    def __init__(self, network=None):
        pass
"""


@pytest.mark.slow
def test_a_users_own_model_and_data_classes_train_and_forecast_through_the_cli(tmp_path, monkeypatch, capsys):
    """Subclass mode: ``--model`` and ``--data`` name the user's own subclasses; their checkpoint rebuilds them. The
    fit runs as a user's does, a fresh ``python -m project.cli`` with the module's folder on ``PYTHONPATH``: the one
    such process of the suite; the other tests of a user's own class (network, distribution, path, regime) run the
    same parser in this process."""
    users_module(tmp_path, "usermod", USER_CLASSES, monkeypatch)
    logs = tmp_path / "logs"
    own = ["--model=usermod.DampedForecaster", "--model.damping=0.25", "--data=usermod.ShiftedData", "--data.shift=1.5"]
    result = run_cli("fit", "--config", BASE, *own, *quick_fit_arguments(logs), python_path=(tmp_path,), cwd=tmp_path)
    assert result.returncode == 0, last_line(result.stderr)
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    forecast = tmp_path / "forecast.csv"
    with pytest.raises(InputError, match=r"names usermod\.DampedForecaster \(at model\)"):
        Forecaster.load_from_checkpoint(checkpoint)  # a class outside the project, not named by the user
    module = Forecaster.load_from_checkpoint(checkpoint, trusted=["usermod.DampedForecaster"])
    predicted = cli_main(
        [
            "predict",
            f"--ckpt_path={checkpoint}",
            f"--predictions.output={forecast}",
            "--model=usermod.DampedForecaster",
            "--data=usermod.ShiftedData",
            "--trainer.logger=false",
        ]
    )
    assert (type(module).__name__, module.damping) == ("DampedForecaster", 0.25)
    assert (type(predicted.model).__name__, predicted.model.damping) == ("DampedForecaster", 0.25)
    assert (type(predicted.datamodule).__name__, predicted.datamodule.shift) == ("ShiftedData", 1.5)
    assert len(pd.read_csv(forecast)) > 0

    capsys.readouterr()
    assert cli("fit", "--config", BASE, "--model=usermod.NotAForecaster") != 0
    assert "NotAForecaster" in capsys.readouterr().err


@pytest.mark.slow
def test_predict_forecasts_beyond_the_trained_horizon_up_to_max_horizon(trained_run, tmp_path, capsys):
    checkpoint = trained_run / "checkpoints" / "last.ckpt"
    output = tmp_path / "longer.csv"
    arguments = [f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false"]
    assert cli("predict", *arguments, "--data.predict_horizon=30") == 0  # trained on 12, max_horizon 4 × 12
    assert pd.read_csv(output)["step"].max() == 30
    code = cli("predict", *arguments, "--data.predict_horizon=60")
    assert_refused_in_one_line(code, capsys, "predict_horizon=60 exceeds max_horizon=48")


@pytest.mark.slow
@pytest.mark.parametrize("version", ["version_0", "seed_0"], ids=["the-newest-run", "a-named-run"])
def test_resuming_the_last_run_continues_at_the_saved_step_in_the_same_folder(version, tmp_path):
    """docs/tools.md's seeds loop names each run (``version=seed_0``): ``--ckpt_path last`` continues that run, not
    the newest ``version_N``, and its ``last.ckpt`` knows the best checkpoint, which the resumed run replaces."""
    arguments = [*SMALL_MODEL, "--trainer.log_every_n_steps=1", *quick_fit_arguments(tmp_path, steps=4)]
    arguments += [
        "--test_after_fit=false",
        *([] if version == "version_0" else [f"--trainer.logger.init_args.version={version}"]),
    ]
    assert cli("fit", "--config", BASE, *arguments) == 0
    run = only_run(tmp_path)
    assert run.name == version
    last = torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 4
    assert any(state.get("best_k_models") for state in last["callbacks"].values())  # saved after the epoch's best
    longer = [a.replace("max_steps=4", "max_steps=8") for a in arguments]
    assert cli("fit", "--config", BASE, "--ckpt_path=last", *longer) == 0
    assert only_run(tmp_path) == run  # continued in its own folder, not a new version
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 8
    logged = list(read_scalars(run)["train/loss"].index)
    assert len(logged) == 8  # one point per optimizer step, in one curve: the second run went on, not over
    assert logged == sorted(set(logged))
    assert len(list((run / "checkpoints").glob("best-*.ckpt"))) == 1


@pytest.mark.slow
@pytest.mark.parametrize(("signal_name", "exit_code", "said"), [("SIGINT", 130, "Ctrl-C"), ("SIGTERM", 143, "SIGTERM")])
def test_ctrl_c_or_sigterm_saves_the_current_step_and_says_how_to_continue(signal_name, exit_code, said, tmp_path):
    """In a fresh process; exit code 128 + the signal, as a shell reports a job stopped by it."""
    arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path, steps=6)]
    result = run_cli("fit", "--config", BASE, *arguments, *stop_at(3, signal_name))
    assert result.returncode == exit_code
    run = only_run(tmp_path)
    assert last_line(result.stderr) == (
        f"error: stopped by {said}; {run / 'checkpoints' / 'last.ckpt'} holds the current step; continue with "
        "--ckpt_path last"
    )
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 3
    assert_ok(run_cli("fit", "--config", BASE, *arguments, "--ckpt_path=last"))
    assert torch.load(run / "checkpoints" / "last.ckpt", weights_only=False)["global_step"] == 6


def stop_at(step: int, signal_name: str, where: str = "batch_end", times: int = 1) -> list[str]:
    """A callback that sends this run's process ``signal_name`` (``times`` in a row) at ``where`` at optimizer step
    ``step`` (see ``tests.helpers.Terminate``)."""
    return [
        "--trainer.callbacks+=tests.helpers.Terminate",
        f"--trainer.callbacks.step={step}",
        f"--trainer.callbacks.signal_name={signal_name}",
        f"--trainer.callbacks.where={where}",
        f"--trainer.callbacks.times={times}",
    ]


RESUMABLE = ["--trainer.limit_train_batches=5", "--test_after_fit=false"]  # 9 steps: epochs of 5 steps, dropout on


def final_weights(log_dir: Path, *options: str) -> dict:
    """The final weights of a CLI fit of 9 steps on the embedded data (dropout on), never interrupted."""
    assert cli("fit", "--config", BASE, *quick_fit_arguments(log_dir, steps=9), *RESUMABLE, *options) == 0
    return torch.load(only_run(log_dir) / "checkpoints" / "last.ckpt", weights_only=False)["state_dict"]


@pytest.fixture(scope="module")
def uninterrupted_weights(tmp_path_factory) -> dict:
    return final_weights(tmp_path_factory.mktemp("uninterrupted"))


ACCUMULATE = ["--trainer.accumulate_grad_batches=2"]  # 3 steps an epoch: 2 of two micro-batches, 1 of the last one


@pytest.fixture(scope="module")
def uninterrupted_accumulated_weights(tmp_path_factory) -> dict:
    return final_weights(tmp_path_factory.mktemp("uninterrupted_accumulated"), *ACCUMULATE)


def assert_resumes_to(weights: dict, stop: list[str], exit_code: int, stopped_at: int, folder: Path, *options) -> None:
    """A fit stopped by ``stop`` exits with ``exit_code`` at step ``stopped_at``; resumed with ``--ckpt_path last``
    it ends on ``weights`` bit for bit. In this process: the CLI's own signal handling, as the fresh-process tests
    above see it, and every run starts from ``seed_everything`` as a new process does."""
    arguments = ["fit", "--config", BASE, *quick_fit_arguments(folder, steps=9), *RESUMABLE, *options]
    assert cli(*arguments, *stop) == exit_code
    last = only_run(folder) / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=False)["global_step"] == stopped_at
    assert cli(*arguments, "--ckpt_path=last") == 0
    resumed = torch.load(last, weights_only=False)
    assert resumed["global_step"] == 9
    assert resumed["state_dict"].keys() == weights.keys()
    for name, expected in weights.items():
        assert torch.equal(resumed["state_dict"][name], expected), name


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signal_name", "where", "step", "exit_code", "stopped_at"),
    [
        ("SIGINT", "batch_end", 3, 130, 3),  # pressed once step 3 is whole: it stops there
        ("SIGINT", "forward", 3, 130, 4),
        ("SIGINT", "backward", 3, 130, 4),
        ("SIGINT", "validation", 5, 130, 6),
        ("SIGTERM", "batch_end", 7, 143, 7),
        ("SIGTERM", "batch_end", 5, 143, 5),
        ("SIGINT twice", "forward", 7, 130, 5),  # stops inside step 8: last.ckpt keeps step 5, the last one saved
    ],
    ids=[
        "ctrl-c-between-steps",
        "ctrl-c-inside-a-forward",
        "ctrl-c-inside-a-backward",
        "ctrl-c-during-validation",
        "sigterm-mid-epoch",
        "sigterm-at-the-end-of-an-epoch",
        "ctrl-c-twice-inside-a-forward",
    ],
)
def test_a_fit_stopped_by_a_signal_and_resumed_from_the_cli_ends_on_the_uninterrupted_weights_bit_for_bit(
    uninterrupted_weights, signal_name, where, step, exit_code, stopped_at, tmp_path
):
    """Ctrl-C inside a step lets the step finish and stops after it; SIGTERM stops after the current batch; a second
    Ctrl-C stops inside the step and saves nothing, so that last.ckpt keeps the last whole step."""
    signal_name, _, twice = signal_name.partition(" ")
    stop = stop_at(step, signal_name, where, times=2 if twice else 1)
    assert_resumes_to(uninterrupted_weights, stop, exit_code, stopped_at, tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize(("where", "step", "stopped_at"), [("micro_batch", 1, 2), ("backward", 3, 4)])
def test_ctrl_c_between_or_inside_the_micro_batches_of_an_accumulated_step_resumes_bit_for_bit(
    uninterrupted_accumulated_weights, where, step, stopped_at, tmp_path
):
    """The first micro-batch's gradient is never lost: the run stops only once the step's last micro-batch is in."""
    stop = stop_at(step, "SIGINT", where)
    assert_resumes_to(uninterrupted_accumulated_weights, stop, 130, stopped_at, tmp_path, *ACCUMULATE)


@pytest.mark.slow
def test_ctrl_c_with_the_logger_off_advises_the_checkpoints_path_and_that_command_continues(tmp_path):
    folder = tmp_path / "checkpoints"
    arguments = [a for a in quick_fit_arguments(tmp_path, steps=4) if "logger" not in a]
    arguments += ["--trainer.logger=false", f"--checkpoint.dirpath={folder}", "--test_after_fit=false"]
    result = run_cli("fit", "--config", BASE, *arguments, *stop_at(2, "SIGINT"))
    assert result.returncode == 130
    assert last_line(result.stderr) == (
        f"error: stopped by Ctrl-C; {folder / 'last.ckpt'} holds the current step; continue with --ckpt_path "
        f"{folder / 'last.ckpt'}"
    )
    advice = shlex.split(last_line(result.stderr).split("continue with ")[1])
    assert_ok(run_cli("fit", "--config", BASE, *arguments, *advice))
    assert torch.load(folder / "last.ckpt", weights_only=False)["global_step"] == 4


@pytest.mark.slow
def test_sigterm_with_checkpointing_off_says_that_no_checkpoint_holds_the_step(tmp_path):
    arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path, steps=4), "--trainer.enable_checkpointing=false"]
    result = run_cli("fit", "--config", BASE, *arguments, *stop_at(2, "SIGTERM"))
    assert result.returncode == 143
    assert last_line(result.stderr) == "error: stopped by SIGTERM; no checkpoint holds the current step"
    assert not list(tmp_path.rglob("*.ckpt"))


def test_training_with_checkpointing_turned_off_tests_the_last_weights_and_says_so(tmp_path, caplog):
    caplog.set_level(logging.INFO)
    arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path), "--trainer.enable_checkpointing=false"]
    assert cli("fit", "--config", BASE, *arguments) == 0
    assert not list(tmp_path.rglob("*.ckpt"))
    assert "test/mse" in read_scalars(only_run(tmp_path))
    assert "there is no best checkpoint (checkpointing is off)" in caplog.text


def test_ordinary_trainer_flags_work(tmp_path):
    """Lightning's own flags pass through the CLI and its callbacks: a time budget leaves a run that ends sooner by
    its steps untouched (fast_dev_run: the debug preset's test)."""
    assert cli("fit", "--config", BASE, *quick_fit_arguments(tmp_path), "--trainer.max_time=00:00:10:00") == 0
    last = torch.load(only_run(tmp_path) / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["global_step"] == 2


@pytest.mark.slow
def test_reduce_lr_on_plateau_which_help_offers_trains_stepped_on_the_validation_loss(tmp_path):
    plateau = ["--model.lr_scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau", "--test_after_fit=false"]
    two_epochs = [*quick_fit_arguments(tmp_path, steps=4), "--trainer.limit_train_batches=2"]
    assert cli("fit", "--config", BASE, *two_epochs, *plateau) == 0
    last = torch.load(only_run(tmp_path) / "checkpoints" / "last.ckpt", weights_only=False)
    (schedule,) = last["lr_schedulers"]
    assert 0 < schedule["best"] < float("inf")  # stepped after the first epoch's validation, on its loss


def test_reduce_lr_on_plateau_in_a_run_that_validates_across_epochs_is_one_line_before_training(tmp_path, capsys):
    """Lightning steps a plateau schedule per epoch (or per batch of an epoch): base.yaml's validation every 100 batches
    across epochs would step it on the same score epoch after epoch."""
    across = ["--trainer.check_val_every_n_epoch=null", "--trainer.val_check_interval=4"]
    plateau = "--model.lr_scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau"
    code = cli("fit", "--config", BASE, *quick_fit_arguments(tmp_path), *across, plateau)
    assert assert_refused_in_one_line(code, capsys) == (
        "error: model.lr_scheduler ReduceLROnPlateau is stepped after each epoch, and this run validates every "
        "trainer.val_check_interval=4 batches across epochs (check_val_every_n_epoch: null, base.yaml's budget); set "
        "trainer.check_val_every_n_epoch=1 and trainer.val_check_interval=1.0 to use it"
    )


def test_a_run_on_a_users_file_is_named_after_it(tmp_path):
    from tests.helpers import frame_of_row_numbers

    path = tmp_path / "my_meters.csv"
    frame_of_row_numbers(400).to_csv(path, index=False)
    arguments = [f"--data.source={path}", "--data.time_column=time", *SMALL_MODEL, *quick_fit_arguments(tmp_path)]
    assert cli("fit", "--config", BASE, *arguments) == 0
    assert only_run(tmp_path, "my_meters").is_dir()


@pytest.mark.slow
def test_the_panel_preset_trains_and_predicts_every_series_with_its_ids_and_future_covariates(tmp_path):
    arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path), "--trainer.val_check_interval=2"]
    assert cli("fit", "--config", BASE, "--config", config("panel.yaml"), *arguments) == 0
    checkpoint = only_run(tmp_path, "synthetic_panel") / "checkpoints" / "last.ckpt"
    output = tmp_path / "panel.csv"
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    forecast = pd.read_csv(output, parse_dates=["timestamp"])
    assert list(forecast.columns) == ["store", "product", "window", "step", "timestamp", "sales"]
    assert len(forecast) == 36 * 14
    assert forecast.groupby(["store", "product"]).size().eq(14).all()
    assert forecast["timestamp"].min() == pd.Timestamp("2024-07-01")  # the day after each series' last sales


@pytest.mark.slow
def test_the_amp_preset_trains_with_bf16_on_cpu(tmp_path):
    result = run_cli(
        "fit",
        "--config",
        BASE,
        "--config",
        config("amp.yaml"),
        *SMALL_MODEL,
        *quick_fit_arguments(tmp_path),
    )
    assert_ok(result)
    assert "Using bfloat16 Automatic Mixed Precision" in result.stdout + result.stderr
    config_text = (only_run(tmp_path) / "config.yaml").read_text()
    assert re.search(r"precision: 16-mixed", config_text)
    assert torch.isfinite(torch.tensor(read_scalars(only_run(tmp_path))["val/loss"].to_numpy())).all()


@pytest.mark.slow
def test_the_debug_preset_runs_one_batch_of_everything_and_writes_nothing(tmp_path):
    """As its header says: one batch of each loop (Lightning's fast_dev_run), no checkpoint, no log."""
    assert cli("fit", "--config", BASE, "--config", config("debug.yaml"), *SMALL_MODEL) == 0
    assert not list(tmp_path.rglob("*.ckpt"))
    assert not list(tmp_path.rglob("events.out.tfevents.*"))


def signature_defaults(chosen) -> dict:
    return {
        name: parameter.default
        for name, parameter in inspect.signature(chosen).parameters.items()
        if parameter.default is not inspect.Parameter.empty
    }


def set_apart_from_the_code(values: dict, chosen, prefix: str, built_for_none: dict):
    """The dotted keys of ``values`` (init arguments of the class ``chosen``, as a config gives them) that differ from
    the signature defaults: a value, or a class other than the default instance's or class; where the default is
    None, other than the class the code builds for it (``built_for_none``, by key)."""
    defaults = signature_defaults(chosen)
    for name, value in values.items():
        key, default = f"{prefix}.{name}", defaults.get(name, inspect.Parameter.empty)
        default = list(default) if isinstance(default, tuple) else default  # YAML gives lists
        if isinstance(value, dict) and "class_path" in value:
            module, _, attribute = value["class_path"].rpartition(".")
            named = getattr(importlib.import_module(module), attribute)
            if default is None:
                default_class = built_for_none.get(key)
            else:
                default_class = default if inspect.isclass(default) else type(default)
            if default is not inspect.Parameter.empty and named is not default_class:
                yield key
            yield from set_apart_from_the_code(value.get("init_args") or {}, named, f"{key}.init_args", built_for_none)
        elif default is not inspect.Parameter.empty and value != default:
            yield key


def comments_by_key(path: Path) -> dict[str, str]:
    """Each key line of a YAML file, as a dotted key, and the comment at the end of that line."""
    comments, stack = {}, []
    for line in path.read_text().splitlines():
        if not (match := re.match(r"(\s*)(\w+):", line)) or line.lstrip().startswith("#"):
            continue
        indent = len(match[1])
        stack = [(level, name) for level, name in stack if level < indent] + [(indent, match[2])]
        comments[".".join(name for _, name in stack)] = line.partition(" #")[2]
    return comments


def test_where_base_yaml_sets_a_model_or_data_value_other_than_the_codes_default_its_line_says_so():
    """One set of defaults: configs/base.yaml's model and data values are the signatures' defaults, or the line that
    sets them (or the mapping that holds it) says what the code's default is (chosen on validation, its header says)."""
    base = REPOSITORY / "configs" / "base.yaml"
    settings, comments = yaml.safe_load(base.read_text()), comments_by_key(base)
    network = ForecastTransformer()
    built_for_none = {  # the classes the code builds where a signature's default is None
        "model.network.init_args.distribution": type(network.distribution),
        "model.network.init_args.baseline_path": type(network.baseline_path),
        "data.split": type(as_split(None)),
    }
    differing = [
        *set_apart_from_the_code(settings["model"], Forecaster, "model", built_for_none),
        *set_apart_from_the_code(settings["data"], WindowDataModule, "data", built_for_none),
    ]
    assert {"model.regime", "model.network.init_args.channel_independent"} <= set(differing)  # the walk sees them
    for key in differing:
        holder = key
        while holder not in comments:  # a value inside an inline mapping ({loss: mae}): the line of the mapping
            holder = holder.rpartition(".")[0]
        assert "code's default" in comments[holder], f"base.yaml's {key} differs from the code's default: say so"


@pytest.mark.slow
@pytest.mark.parametrize("regime", REGIMES)
def test_configs_base_yaml_stacked_with_a_switch_of_regime_starts(regime):
    """configs/base.yaml sets its regime and no option of it (scheduled sampling's decay is sized to the run), so
    switching to any other regime from a preset or the command line needs nothing else: one batch of each."""
    switch = regime_arguments(regime)
    assert cli("fit", "--config", config("base.yaml"), "--config", config("debug.yaml"), *SMALL_MODEL, *switch) == 0


@pytest.mark.slow
def test_fit_help_documents_every_option(monkeypatch, capsys):
    """`fit --help` lists the Trainer's and the callbacks' options; the model's and the data's are listed by
    `--model.help` and `--data.help` with the class (subclass mode: they depend on the class chosen). The optimizer
    and schedule are the module's own (``--model.optimizer``), not LightningCLI's top-level ``--optimizer``."""
    expected_in = {
        ("--help",): [
            "--model CONFIG | CLASS_PATH_OR_NAME",
            "--data CONFIG | CLASS_PATH_OR_NAME",
            "--overwrite",
            "--forecast_figures.every_n_epochs",
            "--predictions.output",
            "--checkpoint.monitor",
        ],
        ("--model.help", "Forecaster"): [
            "--model.regime",
            "teacher-forcing memory",
            "--model.optimizer",
            "--model.network",
            "--model.lr_scheduler",
            "--model.max_horizon",
        ],
        ("--model.regime.help", "FreeRunning"): [
            "--regime.gradient",
            "--regime.feedback",
            "--regime.rollout_dropout",
            "teacher-forcing memory",
        ],
        ("--data.help", "WindowDataModule"): [
            "--data.context_length",
            "look-back window",
            "--data.id_columns",
            "--data.future_covariates",
            "--data.static_covariates",
        ],
    }
    monkeypatch.setenv("COLUMNS", "200")  # argparse wraps help at the terminal's width
    for arguments, expected in expected_in.items():
        assert cli("fit", *arguments) == 0
        printed = capsys.readouterr().out
        for option in expected:
            assert option in printed, (arguments, option)
        if arguments == ("--help",):
            assert not re.search(r"^\s*--(optimizer|lr_scheduler)\b", printed, re.MULTILINE)


@pytest.mark.slow
def test_the_ddp_preset_uses_every_gpu_of_the_node():
    result = run_cli("fit", "--config", BASE, "--config", config("ddp.yaml"), "--print_config")
    assert_ok(result)
    assert "strategy: ddp" in result.stdout
    assert "devices: -1" in result.stdout
    assert "num_nodes: 1" in result.stdout


@pytest.mark.parametrize(
    ("argument", "expected"),
    [
        (
            "--model.regime.gradient=bogus",
            'error: Parser key "model.regime.init_args.gradient": Expected a typing.Literal',
        ),
        ("--model.cuda_graph=bogus", "error: Parser key \"model.cuda_graph\": Expected a <class 'bool'>"),
        ("--data.batch_size=abc", 'error: Parser key "data.batch_size": Not of type PositiveInt: invalid literal'),
        ("--model.network.init_args.d_model=abc", 'error: Parser key "model.network.init_args.d_model":'),
        ("--model.nonexistent=3", "error: Parser key \"model\": Option 'nonexistent' is not accepted"),
    ],
)
def test_a_bad_model_or_data_option_is_named_as_a_config_names_it(argument, expected, capsys):
    """Subclass mode: jsonargparse reports the whole model as matching neither Forecaster nor None; the CLI says
    which option, as before."""
    assert cli("fit", "--config", BASE, argument) == 2
    printed = capsys.readouterr().err
    assert printed.startswith(expected)
    assert printed.count("\n") == 1  # one line, without pages of usage
    assert "Union subtypes" not in printed


def test_a_share_of_the_default_split_needs_no_class_path(capfd):
    """``--data.split.val`` alone sets the default ``Fractions``' share, as ``--data.batch_size`` sets a number."""
    assert cli("fit", "--config", BASE, "--data.split.val=0.2", "--print_config") == 0
    printed = capfd.readouterr().out
    assert "class_path: project.data.Fractions" in printed
    assert "val: 0.2" in printed
