"""The guards the CLI and the figures command are behind: no output replaces an input, no checkpoint runs code, and
every refusal is one line (the tools' own: tests/tools/test_tool_guards.py)."""

import os
import sys

import pandas as pd
import pytest
import torch

from project import figures
from tests.helpers import BASE, SMALL_MODEL, cli, digests, exit_code, one_line_error, quick_fit_arguments
from tests.test_data import frame_of_row_numbers


def test_a_checkpoint_that_would_run_code_is_refused_by_the_cli_and_figures(hostile_checkpoint, capsys):
    path, marker = hostile_checkpoint
    for subcommand in ("fit", "validate", "test", "predict"):
        assert cli(subcommand, f"--ckpt_path={path}", "--trainer.logger=false") == 2, subcommand
        assert "cannot read the checkpoint" in one_line_error(capsys)
    assert exit_code(figures.main, [str(path), "--output", str(path.parent / "out.png")]) == 2
    assert "cannot read the checkpoint" in one_line_error(capsys)
    assert not marker.exists()
    assert not (path.parent / "out.png").exists()


def test_predict_never_replaces_its_checkpoint_or_its_config_even_with_overwrite(user_run, tmp_path, capsys):
    _, _, checkpoint = user_run
    config = tmp_path / "mine.yaml"
    config.write_text("trainer:\n  logger: false\n")
    for output in (checkpoint, config):
        before = digests(checkpoint, config)
        code = cli("predict", "--config", str(config), f"--ckpt_path={checkpoint}",
                   f"--predictions.output={output}", "--overwrite=true")  # fmt: skip
        assert code == 2
        assert one_line_error(capsys).endswith("choose another output path")
        assert digests(checkpoint, config) == before


def test_an_unwritable_prediction_output_is_refused_before_predicting(user_run, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for output, message in ((tmp_path, "is a folder"), (blocker / "forecast.csv", "is a file, not a folder")):
        code = cli("predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={output}", "--trainer.logger=false")
        assert code == 2
        line = one_line_error(capsys)
        assert message in line
        assert "Predicting" not in capsys.readouterr().out


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_refused_before_predicting(user_run, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code = cli("predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={locked / 'f.csv'}",
               "--trainer.logger=false")  # fmt: skip
    assert code == 2
    assert "cannot write into" in one_line_error(capsys)


@pytest.mark.parametrize("windows", [0, 100_000])
def test_figures_draw_a_bounded_number_of_windows(user_run, tmp_path, capsys, windows):
    arguments = [str(user_run[2]), "--windows", str(windows), "--output", str(tmp_path / "f.png")]
    assert exit_code(figures.main, arguments) == 2
    assert one_line_error(capsys) == f"error: forecast_figures.num_windows must be an integer in [1, 50]; got {windows}"


def test_the_short_config_flag_is_compared_with_the_checkpoint_like_the_long_one(user_run, tmp_path, capsys):
    config = tmp_path / "wider.yaml"
    config.write_text("model:\n  network:\n    init_args:\n      d_model: 32\n")
    for flag in ("-c", "--config"):
        assert cli("predict", flag, str(config), f"--ckpt_path={user_run[2]}", "--trainer.logger=false") == 2
        assert "model.network.init_args.d_model=32 (checkpoint: 16)" in one_line_error(capsys)


def test_an_explicit_scaling_other_than_the_checkpoints_is_refused(user_run, capsys):
    assert cli("predict", f"--ckpt_path={user_run[2]}", "--data.scaling=per_series", "--trainer.logger=false") == 2
    assert "data.scaling='per_series' (checkpoint: 'global')" in one_line_error(capsys)


def test_data_that_gives_the_network_other_sizes_than_the_checkpoint_is_refused(user_run, tmp_path, capsys):
    other = tmp_path / "three.csv"
    frame_of_row_numbers(400, n_features=3).to_csv(other, index=False)
    code = cli("predict", f"--ckpt_path={user_run[2]}", f"--data.source={other}", "--trainer.logger=false",
               f"--predictions.output={tmp_path / 'p.csv'}")  # fmt: skip
    assert code == 2
    assert "its columns give the network n_targets=3 (checkpoint: 2)" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(hyper_parameters={}), "not a checkpoint written by `python -m project.cli fit`"),
        (lambda c: c["state_dict"].update(stranger=torch.ones(3)), "its weights do not fit the settings it records"),
        (
            lambda c: c["hyper_parameters"]["network"]["init_args"].update(d_model=64),
            "its weights do not fit the settings it records",
        ),
        (
            lambda c: c["hyper_parameters"]["network"].update(class_path="subprocess.Popen"),
            "its network subprocess.Popen is not an nn.Module subclass",
        ),
        (
            lambda c: c["hyper_parameters"].update(_class_path="subprocess.Popen"),
            "its class subprocess.Popen is not a Forecaster subclass",
        ),
        (
            lambda c: c["datamodule_hyper_parameters"].update(_class_path="subprocess.Popen"),
            "its class subprocess.Popen is not a WindowDataModule subclass",
        ),
    ],
)
def test_a_foreign_checkpoint_is_refused_in_one_line(user_run, tmp_path, capsys, change, message):
    checkpoint = torch.load(user_run[2], weights_only=False)
    change(checkpoint)
    path = tmp_path / "foreign.ckpt"
    torch.save(checkpoint, path)
    assert cli("predict", f"--ckpt_path={path}", "--trainer.logger=false") == 2
    assert message in one_line_error(capsys)


def test_training_with_the_logger_off_writes_no_file_unless_a_checkpoint_folder_is_named(tmp_path, capsys):
    arguments = [a for a in quick_fit_arguments(tmp_path) if "logger" not in a]
    assert cli("fit", "--config", BASE, *SMALL_MODEL, *arguments, "--trainer.logger=false") == 0
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".cache" not in p.parts]
    assert written == []
    asked = ["--trainer.logger=false", "--trainer.enable_checkpointing=true"]
    assert cli("fit", "--config", BASE, *SMALL_MODEL, *arguments, *asked) == 2
    assert one_line_error(capsys).endswith("needs a folder for the checkpoints: set --checkpoint.dirpath")


def test_a_prediction_table_is_written_whole(user_run, tmp_path):
    output = tmp_path / "forecast.csv"
    assert cli("predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    assert pd.read_csv(output)["step"].max() == 12
    assert [p.name for p in tmp_path.iterdir() if p.name != ".cache"] == ["forecast.csv"]  # no temporary file left
