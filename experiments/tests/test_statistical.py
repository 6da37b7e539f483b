"""The statistical floor (an optional tool: it needs statsforecast, the ``baselines`` extra)."""

import numpy as np
import pandas as pd
import pytest

from experiments import intermittent, your_data
from experiments.m4 import scores
from experiments.results import tested_run
from experiments.statistical import STATISTICAL_MODELS, forecast_origins, split_forecasts
from project.data import LastRows, WindowDataModule
from project.errors import InputError

pytest.importorskip("statsforecast")
from tests.helpers import REPOSITORY

SEASON, HORIZON = 12, 6


def seasonal_panel(n_series: int = 3, length: int = 96) -> list[np.ndarray]:
    """Noisy seasonal series at different levels: what AutoETS and AutoTheta forecast well."""
    rng = np.random.default_rng(0)
    steps = np.arange(length)
    return [
        level * (1 + 0.3 * np.sin(2 * np.pi * steps / SEASON)) + rng.normal(0, 0.05 * level, length)
        for level in (10.0, 100.0, 1000.0)[:n_series]
    ]


def panel_windows(panel: list[np.ndarray]) -> WindowDataModule:
    frame = pd.DataFrame({"series": np.repeat(np.arange(len(panel)), len(panel[0])), "value": np.concatenate(panel)})
    windows = WindowDataModule(
        source=frame,
        id_columns=["series"],
        target_columns=["value"],
        context_length=24,
        horizon=HORIZON,
        split=LastRows(12, 12),
        eval_stride=1,
        scaling="per_series",
    )
    windows.setup("test")
    return windows


@pytest.mark.parametrize("name", ["AutoETS", "AutoTheta"])
def test_a_fit_on_the_training_rows_beats_repeat_last_on_every_window_of_the_later_splits(name):
    panel = seasonal_panel()
    windows = panel_windows(panel)
    splits = {split: windows.split(split) for split in ("val", "test")}
    forecasts, seconds = split_forecasts(name, splits, windows.split_rows[:, 0], SEASON, progress=None)
    for split, dataset in splits.items():
        located = [dataset.locate(i) for i in range(len(dataset))]
        actual = np.stack([panel[s][o : o + HORIZON] for s, o in located])
        last = np.stack([np.repeat(panel[s][o - 1], HORIZON) for s, o in located])
        insample = [panel[s][: int(windows.split_rows[s, 0])] for s, _ in located]
        model = forecasts[split][..., 0].numpy()
        assert scores(model, actual, insample, SEASON)[0] < scores(last, actual, insample, SEASON)[0]
    assert seconds > 0


def test_a_forecast_never_depends_on_its_own_targets():
    (values,) = seasonal_panel(n_series=1)
    changed = values.copy()
    changed[80:] = -values[80:]  # everything from the second origin on
    before, after = (forecast_origins("AutoETS", v, 72, [72, 80], HORIZON, SEASON) for v in (values, changed))
    np.testing.assert_array_equal(before, after)


def test_an_origin_inside_the_training_rows_is_refused():
    (values,) = seasonal_panel(n_series=1)
    with pytest.raises(InputError, match="training rows"):
        forecast_origins("AutoETS", values, 72, [60], HORIZON, SEASON)


def test_the_models_are_statsforecasts():
    from statsforecast import models

    assert all(hasattr(models, name) for name in STATISTICAL_MODELS)


def test_the_etth1_rows_score_every_channel_on_scaled_values_beside_the_baselines():
    from project.tools import etth1

    steps = np.arange(480)
    rng = np.random.default_rng(1)
    frame = pd.DataFrame(
        {
            name: level + np.sin(2 * np.pi * steps / 24) + rng.normal(0, 0.1, 480)
            for name, level in (("a", 5.0), ("b", 50.0))
        }
    )
    windows = WindowDataModule(
        source=frame,
        target_columns=["a", "b"],
        context_length=48,
        horizon=24,
        split=LastRows(48, 48),
        eval_stride=12,
    )
    windows.setup("test")
    row = etth1.statistical_row("AutoETS", windows)
    naive = {r["model"]: r for r in etth1.measure_baselines(windows)}["repeat-last (measured)"]
    for key in ("val_mse", "val_mae", "test_mse", "test_mae"):
        assert 0 < row[key][0] < naive[key][0]


def test_your_datas_floor_scores_the_kept_checkpoint_again_on_the_tested_windows(tmp_path, monkeypatch):
    """The floor table's model and repeat-last MAEs on every window are the ones the run logged at its test: the
    same windows and units as AutoETS's beside them."""
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    intermittent.intermittent_panel(n_stores=2, n_products=3).to_csv(tmp_path / "intermittent_panel.csv", index=False)
    output, logs = tmp_path / "table.md", tmp_path / "logs"
    quick = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.enable_progress_bar=false"]
    quick.append("--trainer.val_check_interval=2")  # base.yaml validates every 100 batches
    your_data.main(
        [
            "--datasets",
            "intermittent",
            "--seeds",
            "0",
            f"--data_dir={tmp_path}",
            f"--logs={logs}",
            f"--output={output}",
            "--statistical",
            "AutoETS",
            *quick,
        ]
    )
    logged = your_data.scores(tested_run(logs, "intermittent_seed0"))
    label = "intermittent monthly panel (synthetic), 6 series, horizon 6, look-back 12"  # 2 stores x 3 products
    table = output.read_text()
    for split, name in your_data.SPLITS.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| {label} | {name} | every window | 12 | "))
        cells = [cell.strip() for cell in row.strip("|").split("|")]  # 12: the season the models were fitted with
        model, ensemble, naive, ets = float(cells[4]), float(cells[5]), float(cells[6]), float(cells[8].split()[0])
        assert model == pytest.approx(logged[f"{split}/{your_data.MODEL}"], abs=1.1e-3)  # printed to 3 decimals
        assert ensemble == model  # one seed: the ensemble is that seed's forecast
        assert naive == pytest.approx(logged[f"{split}/{your_data.NAIVE[0]}"], abs=1.1e-3)
        assert ets > 0
    assert f"- {label}, test, every window, model MAE: seed 0: " in table
    assert "AutoETS MAE" in table
    assert "AutoTheta" not in table


@pytest.mark.slow
def test_the_etth1_covariates_table_has_the_floor_with_each_run_scored_again_on_its_own_inputs(
    etth1, tmp_path, monkeypatch
):
    from project.tools import etth1 as tool

    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    output = tmp_path / "covariates.md"
    short = [
        "--trainer.max_steps=2",
        "--trainer.limit_train_batches=2",
        "--trainer.val_check_interval=2",  # base.yaml validates every 100 batches
        "--trainer.limit_val_batches=2",
        "--trainer.limit_test_batches=2",
        "--trainer.enable_progress_bar=false",
    ]
    tool.main(
        [
            "--experiment",
            "covariates",
            "--data",
            str(etth1),
            "--seeds",
            "0",
            "1",
            "--logs",
            str(tmp_path),
            "--output",
            str(output),
            "--statistical",
            "AutoETS",
            "--statistical_stride",
            "480",
            *short,
        ]
    )
    main, floor = output.read_text().split("every 480th validation and test window")
    assert "| AutoETS (season 24), statsforecast, per channel (measured, OT) |" in floor
    for title in tool.COVARIATE_RUNS:
        assert f"| {title} (this template) | " in main
        assert f"| {title} (this template) | " in floor  # its checkpoint, with its own covariates, on the subset
    assert "mean of the" not in floor  # two seeds, and no ensemble row the main table does not have


@pytest.mark.slow
def test_the_intermittent_tables_floor_rows_are_scored_on_the_chosen_recipes_test_windows(tmp_path, monkeypatch):
    """The AutoETS rows' naive columns, computed again on the panel's windows, are the ones the chosen recipe's runs
    logged at their test: the same windows."""
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    data, output = tmp_path / "panel.csv", tmp_path / "table.md"
    intermittent.intermittent_panel(n_stores=2, n_products=3).to_csv(data, index=False)
    quick = ["--trainer.max_epochs=1", "--trainer.limit_train_batches=2", "--trainer.enable_progress_bar=false"]
    quick.append("--trainer.val_check_interval=2")  # base.yaml validates every 100 batches
    intermittent.main(
        [
            f"--data={data}",
            f"--logs={tmp_path / 'logs'}",
            f"--output={output}",
            "--seeds",
            "0",
            "--statistical",
            "AutoETS",
            *quick,
        ]
    )
    rows = {}
    for line in output.read_text().splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 6 and cells[1] == "test":
            rows["AutoETS" if cells[0].startswith("AutoETS") else "chosen"] = cells
    for column in (3, 4):  # repeat-last and seasonal naive, printed to 3 decimals (float32 sums beside float64)
        assert float(rows["AutoETS"][column]) == pytest.approx(float(rows["chosen"][column]), abs=1.1e-3)
    assert rows["AutoETS"][5] == "deterministic"
    assert "beside the statistical floor" in output.read_text()
