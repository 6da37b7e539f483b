"""The README's "Your data" path on every dataset (an optional tool: it goes with project/tools)."""

import pytest

from experiments import intermittent, your_data
from tests.helpers import REPOSITORY

QUICK = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=2",
    "--trainer.limit_val_batches=2",
    "--trainer.limit_test_batches=2",
    "--trainer.enable_progress_bar=false",
]


def test_each_dataset_is_given_only_what_the_readme_asks_a_user_for(monkeypatch):
    """The data's roles, look-back, horizon, split and (for a large panel) the training stride: never a model or
    trainer option, so that each row is what configs/base.yaml's defaults give."""
    monkeypatch.chdir(REPOSITORY)  # the presets are read from configs/
    for dataset in your_data.DATASETS.values():
        assert all(option.startswith("--data.") for option in dataset.options), dataset.label


def test_a_label_names_the_lengths_the_runs_are_given():
    """A ``--data.context_length`` given to every run is the look-back its rows are labelled with."""
    series = your_data.DATASETS["series"]
    assert series.named(series.windows(None, [])).endswith("horizon 12, look-back 12")
    assert series.named(series.windows(None, ["--data.context_length=48"])).endswith("horizon 12, look-back 48")


def test_a_presets_data_settings_are_cut_to_what_a_user_gives(monkeypatch):
    """Roles, look-back, horizon and split come from the preset, written as a user types them; its scaling, batch
    size and calendar features (the defaults' to choose) do not."""
    settings = {
        "id_columns": ["store", "product"],
        "context_length": 28,
        "scaling": "mean_abs",
        "batch_size": 8,
        "calendar_features": False,
        "split": {"class_path": "project.data.LastRows", "init_args": {"val_size": 5, "test_size": 6}},
    }
    split = '{"class_path": "project.data.LastRows", "init_args": {"val_size": 5, "test_size": 6}}'
    assert your_data.given(settings) == [
        "--data.id_columns=[store, product]",
        "--data.context_length=28",
        f"--data.split={split}",
    ]
    monkeypatch.chdir(REPOSITORY)  # the presets are read from configs/
    assert any(
        option.startswith("--data.split=") and "2017-10-24" in option for option in your_data.DATASETS["etth1"].options
    )
    assert "--data.calendar_features=false" not in your_data.DATASETS["intermittent"].options


def test_the_floors_models_are_fitted_with_the_datas_season_the_seasonal_naive_repeats():
    """AutoETS and AutoTheta are given each dataset's season (M4 Weekly's year of 52 weeks, not M4's MASE
    seasonality of 1); the embedded series, whose daily season is longer than its look-back, has no seasonal
    naive, but its models are fitted with 24 hours."""
    for key, dataset in your_data.DATASETS.items():
        assert dataset.period == (dataset.season or 24), key
    assert your_data.DATASETS["m4_weekly"].period == 52


@pytest.mark.slow  # four real training runs in their own processes: the default suite's longest test
def test_the_table_has_a_validation_and_a_test_row_per_dataset_and_each_seeds_value(tmp_path, monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/
    intermittent.intermittent_panel(n_stores=2, n_products=5).to_csv(tmp_path / "intermittent_panel.csv", index=False)
    output = tmp_path / "table.md"
    logs = f"--logs={tmp_path / 'logs'}"
    your_data.main(
        [
            "--datasets",
            "series",
            "intermittent",
            "--seeds",
            "0",
            "1",
            f"--data_dir={tmp_path}",
            logs,
            f"--output={output}",
            "--statistical",
            *QUICK,
        ]
    )
    table = output.read_text()
    assert table.startswith("Written by `python -m ")  # the stamp: command, commit, machine
    counted = {"series": "5 channels", "intermittent": "10 series"}  # the data read: 2 stores x 5 products
    lengths = {"series": (12, 12), "intermittent": (6, 12)}  # horizon, look-back
    for key in ("series", "intermittent"):
        horizon, look_back = lengths[key]
        label = your_data.DATASETS[key].label.format(series=10, channels=5, horizon=horizon, look_back=look_back)
        assert counted[key] in label
        assert table.count(f"| {label} | validation |") == table.count(f"| {label} | test |") == 1
        assert f"- {label}, test model MAE: seed 0: " in table
    assert "– (season > look-back)" in table  # the embedded series' daily season is longer than its look-back
    assert "(season 12)" in table
    started = {run: run.stat().st_mtime for run in (tmp_path / "logs").rglob("events.out.tfevents.*")}
    your_data.main(
        [
            "--datasets",
            "series",
            "intermittent",
            "--seeds",
            "0",
            "1",
            f"--data_dir={tmp_path}",
            logs,
            f"--output={output}",
            "--overwrite",
            "--reuse",
            "--statistical",
            *QUICK,
        ]
    )
    assert output.read_text().split("\n", 1)[1] == table.split("\n", 1)[1]  # the same rows, nothing trained again
    assert {run: run.stat().st_mtime for run in (tmp_path / "logs").rglob("events.out.tfevents.*")} == started


def test_a_missing_data_file_names_the_command_that_writes_it(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPOSITORY)
    with pytest.raises(SystemExit):
        your_data.main(["--datasets", "etth1", f"--data_dir={tmp_path}", f"--output={tmp_path / 'table.md'}"])
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert "ETTh1.csv: not found; `python -m project.tools.datasets etth1 --dir" in error
    assert not (tmp_path / "table.md").exists()
