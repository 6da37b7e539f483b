"""The intermittent-panel check (an optional tool: it goes with project/tools)."""

import pytest

from experiments import intermittent
from project.data import LastRows, WindowDataModule
from tests.helpers import REPOSITORY


def test_the_panel_is_short_intermittent_and_spread_over_orders_of_magnitude():
    panel = intermittent.intermittent_panel()
    assert panel.equals(intermittent.intermittent_panel())  # deterministic
    lengths = panel.groupby(["store", "product"]).size()
    assert len(lengths) == 350
    assert lengths.between(36, 60).all()
    months_without_sales = (panel["sales"] == 0).groupby([panel["store"], panel["product"]]).mean()
    assert (months_without_sales > 0.3).mean() > 0.1  # a share of the series sells in only some months
    levels = panel.groupby(["store", "product"])["sales"].mean()
    assert levels.max() / levels[levels > 0].min() > 100
    assert panel.groupby("month")["store"].size().index.max() == "2024-12-01"  # every series ends in the same month


def test_the_data_settings_read_the_panel_with_one_validation_and_one_test_window_per_series(tmp_path):
    source = tmp_path / "panel.csv"
    intermittent.intermittent_panel().to_csv(source, index=False)
    windows = WindowDataModule(
        source=str(source),
        time_column="month",
        id_columns=["store", "product"],
        target_columns=["sales"],
        future_covariates=["price", "promotion"],
        static_covariates=["store_size", "category"],
        context_length=12,
        horizon=6,
        split=LastRows(6, 6),
        eval_stride=6,
    )
    windows.setup("fit")
    assert len(windows.split("val")) == len(windows.split("test")) == 350


@pytest.mark.slow
def test_the_check_chooses_on_validation_and_tests_the_choice_once_per_seed(tmp_path, monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    output = tmp_path / "table.md"
    quick = [
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.val_check_interval=2",  # base.yaml validates every 100 batches
        "--trainer.limit_val_batches=2",
        "--trainer.limit_test_batches=2",
        "--trainer.enable_progress_bar=false",
    ]
    intermittent.main(
        [
            f"--data={tmp_path / 'panel.csv'}",
            f"--logs={tmp_path / 'logs'}",
            f"--output={output}",
            "--seeds",
            "0",
            "--statistical",
            *quick,
        ]
    )
    table = output.read_text()
    assert table.count("| validation |") == len(intermittent.RECIPES)
    assert table.count("(chosen) | test |") == 1
    assert "(chosen), test model MAE: seed 0: " in table


def test_the_floor_scores_the_naive_forecasts_on_the_recipes_windows_without_training(tmp_path, monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    data = tmp_path / "panel.csv"
    intermittent.intermittent_panel(n_stores=2, n_products=5).to_csv(data, index=False)
    table = intermittent.floor_table(data, statistical=())
    assert "| repeat-last (measured) |" in table
    assert "| seasonal naive (12) (measured) |" in table
