"""The figure tool draws a checkpoint's forecasts from the command line, and keeps the files it finds."""

import subprocess
import sys

import pytest

from tests.helpers import REPOSITORY


def figure(*arguments: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "project.tools.figure", *arguments]
    return subprocess.run(command, cwd=REPOSITORY, capture_output=True, text=True)


@pytest.mark.slow
def test_the_figure_tool_draws_a_checkpoints_forecasts_with_a_band_on_its_own_data_and_keeps_existing_files(
    quantile_panel_run, tmp_path
):
    checkpoint = quantile_panel_run
    output = tmp_path / "forecast.png"
    result = figure(str(checkpoint), "--output", str(output))  # no --source: the checkpoint's own data
    assert result.returncode == 0, result.stderr[-2000:]
    assert output.read_bytes().startswith(b"\x89PNG")
    before = output.read_bytes()
    refused = figure(str(checkpoint), "--output", str(output))
    assert refused.returncode == 2
    assert (
        refused.stderr.strip()
        .splitlines()[-1]
        .endswith("already exists; choose another output path or pass --overwrite to replace it")
    )
    assert output.read_bytes() == before
