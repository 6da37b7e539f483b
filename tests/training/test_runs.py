"""Run summaries read back from TensorBoard logs, and the smoothing they print."""

import numpy as np
import pytest

from project.training import runs
from tests.helpers import BASE, SMALL_MODEL, cli, quick_fit_arguments


@pytest.mark.slow
def test_runs_prints_a_table_of_runs(tmp_path, capsys):
    assert cli("fit", "--config", BASE, *SMALL_MODEL, *quick_fit_arguments(tmp_path)) == 0
    runs.main([str(tmp_path)])
    printed = capsys.readouterr().out
    assert "effective_batch_size" in printed
    assert "synthetic_series/version_0" in printed
    with pytest.raises(SystemExit):
        runs.main([str(tmp_path / "nothing here")])


def test_smoothing_is_tensorboards_debiased_moving_average():
    values = np.random.default_rng(0).normal(size=50)
    expected, average = [], 0.0
    for step, value in enumerate(values):  # TensorBoard's formula, written out
        average = 0.9 * average + 0.1 * value
        expected.append(average / (1 - 0.9 ** (step + 1)))
    np.testing.assert_allclose(runs.smooth(values, weight=0.9), expected, rtol=1e-12, atol=1e-14)
