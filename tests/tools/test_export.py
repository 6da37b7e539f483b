"""Export for serving (an optional tool: it goes with project/tools)."""

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from project.errors import InputError
from project.model import InputSizes
from project.tools import export
from project.training.module import Forecaster
from tests.helpers import REPOSITORY, assert_refused_in_one_line, tiny_module


@pytest.fixture
def checkpoint(panel_run):
    """The suite's panel model: past, future and static covariates and per-window normalisation (panel.yaml's)."""
    return panel_run


def expected_forecast(checkpoint, inputs, horizon) -> np.ndarray:
    module = Forecaster.load_from_checkpoint(checkpoint, map_location="cpu").eval()
    with torch.no_grad():
        return module.forecast(inputs, horizon).point.numpy()


@pytest.mark.slow
@pytest.mark.parametrize("horizon", [14, 20])  # the trained horizon, and further
def test_the_onnx_driver_forecasts_what_generate_forecasts_without_importing_torch(checkpoint, horizon, tmp_path):
    folder = tmp_path / "export"
    export.main([str(checkpoint), "--batch-size", "3", "--horizon", str(horizon), "--output", str(folder)])
    module = Forecaster.load_from_checkpoint(checkpoint, map_location="cpu")
    inputs = export.example_inputs(module, 3, horizon)
    np.savez(tmp_path / "inputs.npz", **{name: value.numpy() for name, value in inputs.items()})
    driver = (
        "import sys, numpy as np\n"
        "from project.tools.serve import ExportedForecaster\n"
        f"inputs = dict(np.load({str(tmp_path / 'inputs.npz')!r}))\n"
        f"forecast = ExportedForecaster({str(folder)!r}).forecast(**inputs)\n"
        f"np.save({str(tmp_path / 'forecast.npy')!r}, forecast)\n"
        "assert 'torch' not in sys.modules and 'lightning' not in sys.modules, 'the driver imported torch'\n"
    )
    result = subprocess.run([sys.executable, "-c", driver], cwd=REPOSITORY, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    forecast = np.load(tmp_path / "forecast.npy")
    expected = expected_forecast(checkpoint, inputs, horizon)
    assert forecast.shape == (3, horizon, 1)
    assert np.abs(forecast - expected).max() <= 1e-4 * np.abs(expected).max()


@pytest.mark.slow
def test_torch_export_forecasts_what_generate_forecasts(checkpoint, tmp_path):
    folder = tmp_path / "export"
    export.main([str(checkpoint), "--format", "torch_export", "--batch-size", "2", "--output", str(folder)])
    inputs = export.example_inputs(Forecaster.load_from_checkpoint(checkpoint, map_location="cpu"), 2, 14)
    forecast = export.forecast_with_torch_export(folder, inputs).numpy()
    expected = expected_forecast(checkpoint, inputs, 14)
    assert np.abs(forecast - expected).max() <= 1e-4 * np.abs(expected).max()


def test_an_export_into_an_existing_folder_keeps_its_other_files_and_an_earlier_export(checkpoint, tmp_path, capsys):
    folder = tmp_path / "export"
    folder.mkdir()
    (folder / "mine.txt").write_text("keep me")
    export.main([str(checkpoint), "--format", "torch_export", "--output", str(folder)])
    assert sorted(p.name for p in folder.iterdir()) == ["decoder_step.pt2", "encoder.pt2", "mine.txt", "model.json"]
    earlier = (folder / "model.json").read_bytes()
    again = [str(checkpoint), "--format", "torch_export", "--output", str(folder), "--horizon", "7"]
    assert_refused_in_one_line(lambda: export.main(again), capsys, "already exists")  # replaced only with --overwrite
    assert (folder / "model.json").read_bytes() == earlier
    assert (folder / "mine.txt").read_text() == "keep me"


def test_export_refuses_another_network_in_one_line_before_writing(tmp_path, capsys):
    from project.model import GRUForecaster
    from tests.helpers import quiet_trainer

    module = Forecaster(
        GRUForecaster(InputSizes(n_targets=2), hidden_size=8, num_layers=1), context_length=8, horizon=4
    )
    trainer = quiet_trainer(max_steps=0)
    trainer.strategy.connect(module)
    trainer.save_checkpoint(tmp_path / "gru.ckpt")
    output = tmp_path / "export"
    assert_refused_in_one_line(
        lambda: export.main([str(tmp_path / "gru.ckpt"), "--output", str(output)]),
        capsys,
        "export supports the ForecastTransformer network; this checkpoint's is project.model.gru.GRUForecaster",
    )
    assert not output.exists()


def test_a_horizon_ending_inside_a_patch_with_future_covariates_is_refused_in_one_line():
    module = tiny_module(n_future_covariates=1, patch_length=2)
    with pytest.raises(InputError, match=r"--horizon 5 must be a multiple of run\.ckpt's patch_length=2 with future"):
        export.check_horizon(module, 5, Path("run.ckpt"))
    export.check_horizon(module, 6, Path("run.ckpt"))
    export.check_horizon(tiny_module(patch_length=2), 5, Path("run.ckpt"))  # no covariates: the last patch is cut


@pytest.fixture(scope="module")
def checkpoint_with_a_linear_path(tmp_path_factory) -> Path:
    """The panel model of ``panel_run`` with a linear baseline path, whose weights are set to random values (a short
    fit leaves them near their zero start), so the exported path has something to add."""
    from tests.helpers import BASE, SMALL_MODEL, cli, config, only_run, quick_fit_arguments

    log_dir = tmp_path_factory.mktemp("panel_with_a_path")
    arguments = [*SMALL_MODEL, "--model.network.init_args.baseline_path=project.model.LinearPath"]
    arguments += ["--data.split=LastRows", "--data.split.val_size=14", "--data.split.test_size=42"]
    arguments += [*quick_fit_arguments(log_dir, steps=2), "--test_after_fit=false"]
    assert cli("fit", "--config", BASE, "--config", config("panel.yaml"), *arguments) == 0
    path = only_run(log_dir, "synthetic_panel") / "checkpoints" / "last.ckpt"
    recorded = torch.load(path, weights_only=True)
    generator = torch.Generator().manual_seed(0)
    for name, value in recorded["state_dict"].items():
        if ".baseline_path." in name:
            recorded["state_dict"][name] = 0.1 * torch.randn(value.shape, generator=generator, dtype=value.dtype)
    torch.save(recorded, path.with_name("random_path.ckpt"))
    return path.with_name("random_path.ckpt")


@pytest.mark.slow
@pytest.mark.parametrize("export_format", ["onnx", "torch_export"])
def test_an_exported_model_with_a_baseline_path_forecasts_what_generate_forecasts(
    checkpoint_with_a_linear_path, export_format, tmp_path
):
    folder = tmp_path / "export"
    path = checkpoint_with_a_linear_path
    export.main([str(path), "--format", export_format, "--batch-size", "2", "--output", str(folder)])
    module = Forecaster.load_from_checkpoint(path, map_location="cpu")
    assert any(".baseline_path." in name for name in module.state_dict())
    inputs = export.example_inputs(module, 2, 14)
    if export_format == "onnx":
        from project.tools.serve import ExportedForecaster

        forecast = ExportedForecaster(str(folder)).forecast(**{name: value.numpy() for name, value in inputs.items()})
    else:
        forecast = export.forecast_with_torch_export(folder, inputs).numpy()
    expected = expected_forecast(path, inputs, 14)
    assert np.abs(forecast - expected).max() <= 1e-4 * np.abs(expected).max()
