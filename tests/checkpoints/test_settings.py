"""A checkpoint's settings (``project.checkpoints.settings``): parsed once, without reading a file they name, and
built on the meta device against the weights before any memory is taken."""

import pytest

from project.errors import InputError
from project.training.module import Forecaster
from tests.helpers import assert_refused_in_one_line, cli, tampered
from tests.saved_tensors import LargestStorage


def test_settings_that_would_build_a_model_larger_than_its_weights_are_refused_before_it_is_built(
    trained_run, tmp_path, capsys
):
    """A feed-forward width of 2**24 in the settings (4.8 GB of weights) beside the small weights of the file: the
    settings are built on the meta device and compared with the weights first."""

    def change(checkpoint: dict) -> None:
        checkpoint["hyper_parameters"]["network"]["init_args"]["dim_feedforward"] = 2**24

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    with LargestStorage() as largest, pytest.raises(InputError, match="its weights do not fit the settings it records"):
        Forecaster.load_from_checkpoint(path)
    assert largest.bytes < 10**6
    code = cli("predict", f"--ckpt_path={path}", f"--predictions.output={tmp_path / 'out.csv'}")
    assert_refused_in_one_line(code, capsys, "its weights do not fit the settings it records")
    assert not (tmp_path / "out.csv").exists()


def test_a_setting_that_names_a_file_is_refused_without_the_file_being_read(trained_run, tmp_path, capsys):
    """jsonargparse reads a string given for a component as the path of its config file, where a parser lets it: the
    file here holds the checkpoint's own distribution, so that reading it would make the checkpoint load. Refused, its
    content never quoted, by the CLI and the Python API."""
    secret = tmp_path / "secret.yaml"
    secret.write_text("class_path: project.model.PointForecast  # password: hunter2\ninit_args: {loss: mse}\n")

    def change(checkpoint: dict) -> None:
        checkpoint["hyper_parameters"]["network"]["init_args"]["distribution"] = str(secret)

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    line = assert_refused_in_one_line(cli("predict", f"--ckpt_path={path}"), capsys)
    assert line.startswith(f'error: {path}: Parser key "model.network.init_args.distribution": ')
    assert "hunter2" not in line
    with pytest.raises(InputError, match="distribution") as refused:
        Forecaster.load_from_checkpoint(path)
    assert "hunter2" not in str(refused.value)
