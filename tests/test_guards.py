"""The guards every command is behind: no output replaces an input, no checkpoint runs code, no folder is deleted,
and a tool's bad option ends in one line as the CLI's do."""

import hashlib
import os
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from project import backtest, export, figures, m4
from project.errors import InputError
from tests.helpers import BASE, SMALL_MODEL, cli, last_line, only_run, quick_fit_arguments
from tests.test_data import frame_of_row_numbers


class CreatesAFileWhenUnpickled:
    """What a hostile checkpoint carries: unpickling it would call ``open(path, "w")``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def digests(*paths: Path) -> dict[Path, str]:
    """The SHA-256 of every file at or under ``paths``."""
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]
    return {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def one_line_error(capsys) -> str:
    error = capsys.readouterr().err
    assert "Traceback" not in error
    line = last_line(error)
    assert line.startswith("error: ")
    return line


def exit_code(main, arguments: list[str]) -> int:
    with pytest.raises(SystemExit) as stopped:
        main(arguments)
    return stopped.value.code


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """A short fit on a user's CSV named ``forecasts.csv`` (a name backtest writes), logged beside it; the folder,
    the CSV and the run's checkpoint."""
    folder = tmp_path_factory.mktemp("user")
    source = folder / "forecasts.csv"
    frame_of_row_numbers(400).to_csv(source, index=False)
    arguments = [f"--data.source={source}", "--data.time_column=time", *SMALL_MODEL, *quick_fit_arguments(folder)]
    assert cli("fit", "--config", BASE, *arguments, "--test_after_fit=false") == 0
    return folder, source, only_run(folder, "forecasts") / "checkpoints" / "last.ckpt"


@pytest.fixture
def hostile_checkpoint(user_run, tmp_path) -> tuple[Path, Path]:
    """A copy of the user's checkpoint that would create ``marker`` when unpickled; the file and the marker."""
    marker = tmp_path / "marker"
    checkpoint = torch.load(user_run[2], weights_only=False)
    checkpoint["callbacks"] = CreatesAFileWhenUnpickled(marker)
    path = tmp_path / "hostile.ckpt"
    torch.save(checkpoint, path)
    return path, marker


def test_a_checkpoint_that_would_run_code_is_refused_by_every_entry_point(hostile_checkpoint, user_run, capsys):
    path, marker = hostile_checkpoint
    source = user_run[1]
    output = path.parent / "out"
    for subcommand in ("fit", "validate", "test", "predict"):
        assert cli(subcommand, f"--ckpt_path={path}", "--trainer.logger=false") == 2, subcommand
        assert "cannot read the checkpoint" in one_line_error(capsys)
    tools = {
        "figures": (figures.main, [str(path), "--output", f"{output}.png"]),
        "export": (export.main, [str(path), "--output", str(output)]),
        "backtest": (backtest.main, ["--ckpt_path", str(path), "--output", str(output)]),
        "m4": (m4.main, ["--data", str(source), "--ckpt_path", str(path), "--output", f"{output}.md"]),
    }
    for name, (main, arguments) in tools.items():
        assert exit_code(main, arguments) == 2, name
        assert "cannot read the checkpoint" in one_line_error(capsys), name
    from project.results import best_epoch, forecast_split

    for read in (best_epoch, lambda p: forecast_split(p, None, "test")):
        with pytest.raises(InputError, match="cannot read the checkpoint"):
            read(path)
    assert not marker.exists()
    assert not output.exists()


def test_an_export_into_a_folder_of_the_users_files_replaces_none_of_them(user_run, capsys):
    folder, _, checkpoint = user_run
    before = digests(folder)
    code = export.main([str(checkpoint), "--format", "torch_export", "--output", str(folder), "--overwrite"])
    assert code is None
    assert all(digests(*before)[path] == digest for path, digest in before.items())  # every input byte-identical
    assert {"encoder.pt2", "decoder_step.pt2", "model.json"} <= {p.name for p in folder.iterdir()}
    for name in ("encoder.pt2", "decoder_step.pt2", "model.json"):
        (folder / name).unlink()


def test_an_export_aimed_at_an_existing_file_is_refused_and_leaves_no_partial_folder(user_run, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    assert exit_code(export.main, [str(user_run[2]), "--output", str(target), "--overwrite"]) == 2
    assert one_line_error(capsys) == f"error: {target} is a file; expected a folder to write encoder.onnx, " + (
        "decoder_step.onnx, model.json into"
    )
    assert target.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--horizon", "1000"], r"--horizon 1000 exceeds 48, the longest forecast .* is set up for"),
        (["--horizon", "-5"], r"--horizon must be a positive integer; got -5"),
        (["--batch-size", "0"], r"--batch-size must be a positive integer; got 0"),
    ],
)
def test_export_refuses_a_shape_the_model_cannot_serve(user_run, tmp_path, capsys, option, message):
    assert exit_code(export.main, [str(user_run[2]), "--output", str(tmp_path / "export"), *option]) == 2
    assert re.search(message, one_line_error(capsys))
    assert not (tmp_path / "export").exists()


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


def test_a_backtest_never_replaces_the_training_data_in_its_output_folder(user_run, capsys):
    folder, source, checkpoint = user_run
    before = digests(source)
    arguments = ["--ckpt_path", str(checkpoint), "--output", str(folder), "--overwrite"]
    assert exit_code(backtest.main, arguments) == 2
    assert one_line_error(capsys) == (
        f"error: {source}: the output would replace the input {source}; choose another output path"
    )
    assert digests(source) == before


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (["--step", "-28"], "--step must be a positive integer; got -28"),
        (["--step", "0"], "--step must be a positive integer; got 0"),
        (["--refit", "--refit-epochs", "0"], "--refit-epochs must be a positive integer; got 0"),
        (["--origins", "0"], "--origins must be a positive integer; got 0"),
    ],
)
def test_backtest_origins_stay_in_the_test_period(user_run, tmp_path, capsys, option, message):
    arguments = ["--ckpt_path", str(user_run[2]), "--output", str(tmp_path / "b"), *option]
    assert exit_code(backtest.main, arguments) == 2
    assert one_line_error(capsys) == f"error: {message}"
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("windows", [0, 100_000])
def test_figures_draw_a_bounded_number_of_windows(user_run, tmp_path, capsys, windows):
    arguments = [str(user_run[2]), "--windows", str(windows), "--output", str(tmp_path / "f.png")]
    assert exit_code(figures.main, arguments) == 2
    assert one_line_error(capsys) == f"error: forecast_figures.num_windows must be an integer in [1, 50]; got {windows}"


def test_the_short_config_flag_is_compared_with_the_checkpoint_like_the_long_one(user_run, tmp_path, capsys):
    config = tmp_path / "wider.yaml"
    config.write_text("model:\n  d_model: 32\n")
    for flag in ("-c", "--config"):
        assert cli("predict", flag, str(config), f"--ckpt_path={user_run[2]}", "--trainer.logger=false") == 2
        assert "model.d_model=32 (checkpoint: 16)" in one_line_error(capsys)


def test_an_explicit_scaling_other_than_the_checkpoints_is_refused(user_run, capsys):
    assert cli("predict", f"--ckpt_path={user_run[2]}", "--data.scaling=per_series", "--trainer.logger=false") == 2
    assert "data.scaling='per_series' (checkpoint: 'global')" in one_line_error(capsys)


def test_data_that_gives_the_network_other_sizes_than_the_checkpoint_is_refused(user_run, tmp_path, capsys):
    other = tmp_path / "three.csv"
    frame_of_row_numbers(400, n_features=3).to_csv(other, index=False)
    code = cli("predict", f"--ckpt_path={user_run[2]}", f"--data.source={other}", "--trainer.logger=false",
               f"--predictions.output={tmp_path / 'p.csv'}")  # fmt: skip
    assert code == 2
    assert "its columns give the network n_features=3 (checkpoint: 2)" in one_line_error(capsys)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(hyper_parameters={}), "not a checkpoint written by `python -m project.cli fit`"),
        (lambda c: c["state_dict"].update(stranger=torch.ones(3)), "its weights do not fit the settings it records"),
        (lambda c: c["hyper_parameters"].update(d_model=64), "its weights do not fit the settings it records"),
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
