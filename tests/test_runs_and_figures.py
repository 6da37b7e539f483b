"""Run summaries and forecast figures from a checkpoint."""

import subprocess
import sys

import numpy as np
import pytest

from project import runs
from tests.helpers import BASE, REPOSITORY, SMALL_MODEL, cli, quick_fit_arguments


def test_runs_prints_a_table_of_runs(tmp_path, capsys):
    assert cli("fit", "--config", BASE, *SMALL_MODEL, *quick_fit_arguments(tmp_path)) == 0
    runs.main([str(tmp_path)])
    printed = capsys.readouterr().out
    assert "effective_batch_size" in printed
    assert "synthetic_series/version_0" in printed
    with pytest.raises(SystemExit):
        runs.main([str(tmp_path / "nothing here")])


def figures(*arguments: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "project.figures", *arguments]
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True)


@pytest.mark.slow
def test_figures_draws_a_checkpoints_forecasts_with_a_band_on_its_own_data_and_keeps_existing_files(
    quantile_panel_run, tmp_path
):
    checkpoint = quantile_panel_run
    output = tmp_path / "forecast.png"
    result = figures(str(checkpoint), "--output", str(output))  # no --source: the checkpoint's own data
    assert result.returncode == 0, result.stderr[-2000:]
    assert output.read_bytes().startswith(b"\x89PNG")
    before = output.read_bytes()
    refused = figures(str(checkpoint), "--output", str(output))
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines()[-1].endswith("already exists; choose another output path or pass "
                                                            "--overwrite to replace it")  # fmt: skip
    assert output.read_bytes() == before


def test_smoothing_is_tensorboards_debiased_moving_average():
    values = np.random.default_rng(0).normal(size=50)
    expected, average = [], 0.0
    for step, value in enumerate(values):  # TensorBoard's formula, written out
        average = 0.9 * average + 0.1 * value
        expected.append(average / (1 - 0.9 ** (step + 1)))
    np.testing.assert_allclose(runs.smooth(values, weight=0.9), expected, rtol=1e-12, atol=1e-14)
