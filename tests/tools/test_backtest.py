"""Rolling-origin evaluation (an optional tool: it goes with project/tools)."""

import itertools

import pandas as pd
import pytest

from project.data.synthetic import synthetic_panel
from project.tools import backtest
from project.training.runs import read_scalars
from tests.helpers import assert_close_in_float32, assert_refused_in_one_line, cli, only_run


@pytest.fixture
def trained(panel_run):
    """The suite's panel model, whose test period is three horizons (42 days) of every series: its log folder and
    checkpoint."""
    return panel_run.parents[3], panel_run


def scores_of_test(checkpoint, folder, eval_stride: int) -> dict:
    arguments = [
        f"--ckpt_path={checkpoint}",
        f"--data.eval_stride={eval_stride}",
        f"--trainer.default_root_dir={folder}",
    ]
    assert cli("test", *arguments, "--trainer.enable_progress_bar=false") == 0
    return {name: values.iloc[-1] for name, values in read_scalars(only_run(folder, "lightning_logs")).items()}


@pytest.mark.slow
def test_an_origin_scores_what_test_scores_on_the_same_windows(trained, tmp_path):
    _, checkpoint = trained
    backtest.main(["--ckpt_path", str(checkpoint), "--origins", "3", "--output", str(tmp_path / "backtest")])
    metrics = pd.read_csv(tmp_path / "backtest" / "metrics.csv").set_index("origin")
    # test's windows are anchored at the end of the test period: with a stride of 42 days, one per series, the
    # forecast from the last origin; with a stride of 14, the forecasts from all three origins.
    last = scores_of_test(checkpoint, tmp_path / "last", eval_stride=42)
    assert metrics.loc["2", "windows"] == 36
    assert_close_in_float32(metrics.loc["2", "mse"], last["test/mse"])  # other batches: float32 sums reordered
    assert_close_in_float32(metrics.loc["2", "mae_original_units"], last["test/mae_original_units"])
    every = scores_of_test(checkpoint, tmp_path / "every", eval_stride=14)
    assert_close_in_float32(metrics.loc["all", "mse"], every["test/mse"])


def test_k_origins_give_k_rows_an_overall_row_every_forecast_and_a_figure(trained, tmp_path):
    _, checkpoint = trained
    backtest.main(["--ckpt_path", str(checkpoint), "--origins", "3", "--output", str(tmp_path)])
    metrics = pd.read_csv(tmp_path / "metrics.csv")
    assert metrics["origin"].tolist() == ["0", "1", "2", "all"]
    forecasts = pd.read_csv(tmp_path / "forecasts.csv", parse_dates=["timestamp"])
    assert len(forecasts) == 3 * 36 * 14
    assert {"store", "product", "origin", "step", "timestamp", "sales", "sales_actual"} <= set(forecasts.columns)
    # consecutive origins are one horizon apart
    first_series = forecasts[forecasts["series"] == 0]
    starts = first_series[first_series["step"] == 1]["timestamp"].tolist()
    assert [(b - a).days for a, b in itertools.pairwise(starts)] == [14, 14]
    assert (tmp_path / "backtest.png").read_bytes().startswith(b"\x89PNG")


@pytest.mark.slow
def test_refitting_trains_a_model_per_origin_on_the_rows_before_it(trained, tmp_path):
    _, checkpoint = trained
    # Two stores of the panel (its columns, as --source asks): each refit trains an epoch of 6 series, not of 36.
    panel = synthetic_panel()
    panel[panel["store"].isin(["S01", "S02"])].to_csv(tmp_path / "two_stores.csv", index=False)
    arguments = ["--ckpt_path", str(checkpoint), "--source", str(tmp_path / "two_stores.csv"), "--origins", "2"]
    backtest.main([*arguments, "--refit", "--output", str(tmp_path / "backtest")])
    metrics = pd.read_csv(tmp_path / "backtest" / "metrics.csv")
    assert metrics["origin"].tolist() == ["0", "1", "all"]
    assert metrics["windows"].tolist() == [6, 6, 12]


def test_too_many_origins_is_a_one_line_error(trained, tmp_path, capsys):
    _, checkpoint = trained
    arguments = ["--ckpt_path", str(checkpoint), "--origins", "9", "--output", str(tmp_path)]
    assert_refused_in_one_line(lambda: backtest.main(arguments), capsys, "leaves no series room for a forecast")
