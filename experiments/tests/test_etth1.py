"""The ETTh1 tables (an optional tool: it goes with project/tools)."""

import pytest

from experiments import etth1 as script
from tests.helpers import REPOSITORY


@pytest.fixture
def in_repository(monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the script reads configs/


def test_etth1_baselines_are_measured_on_the_benchmark_windows(etth1, in_repository):
    repeat_last, seasonal, linear, nlinear = etth1_module_rows(etth1)
    # The published repeat-last figures, reproduced on the same 2785 test windows.
    assert (round(repeat_last["test_mse"][0], 3), round(repeat_last["test_mae"][0], 3)) == (1.294, 0.713)
    assert len(repeat_last["val_mse"]) == 1  # measured on the validation windows too
    assert seasonal["model"] == "seasonal naive (season 24) (measured)"
    assert linear["test_mse"][0] < 0.38
    assert nlinear["test_mse"][0] < 0.38
    published = script.published_row("DLinear", 0.375, 0.399)
    trained = {**script._row("teacher forcing", [60.0, 120.0]), "seeds": [0, 1], "best_epoch": [3, 4]}
    trained.update(val_mse=[0.70, 0.72], val_mae=[0.55, 0.56], test_mse=[0.38, 0.39], test_mae=[0.40, 0.41])
    table = script.markdown([repeat_last, linear, published, trained], "CPU")
    assert "| repeat-last (measured) | " in table
    assert "| 1.294 | 0.713 | deterministic | – |" in table
    assert "| DLinear (published) | – | – | 0.375 | 0.399 | – | published |" in table
    assert "| teacher forcing | 0.710 ± 0.014 | 0.555 ± 0.007 | 0.385 ± 0.007 | 0.405 ± 0.007 | 2 |" in table


def etth1_module_rows(path):
    return script.measure_baselines(script.datamodule(path))


@pytest.mark.slow
def test_etth1_script_trains_tests_and_tabulates_a_regime(etth1, in_repository, tmp_path):
    output = tmp_path / "etth1.md"
    # Batch counts of 2: jsonargparse reads a limit of 1 as the float 1.0, which Lightning takes as "all".
    short = ["--trainer.max_steps=2", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=2"]
    short.append("--trainer.val_check_interval=2")  # base.yaml validates every 100 batches
    short += ["--trainer.limit_test_batches=2", "--trainer.enable_progress_bar=false", "--data.batch_size=4"]
    arguments = ["--data", str(etth1), "--regimes", "teacher_forcing", "--logs", str(tmp_path), "--output", str(output)]
    # --statistical alone: no AutoETS or AutoTheta (minutes, and the optional baselines extra; test_statistical's)
    script.main([*arguments, "--seeds", "0", "1", "--jobs", "2", "--statistical", *short])
    stamp, table = output.read_text().split("\n\n", 1)
    assert stamp.startswith("Written by `python -m ")
    assert " --seeds 0 1 --jobs 2 " in stamp
    assert "at commit " in stamp
    assert "| teacher forcing | " in table
    assert " ± " in table
    assert "| least-squares linear map, shared across channels (measured) |" in table
    assert "| teacher forcing, mean of the 2 seeds' forecasts | " in table
    assert "| 2, one ensemble |" in table
    assert (
        "| PatchTST/42 (Nie et al. 2023), look-back 336 (published) | – | – | 0.375 | 0.399 | – | published |" in table
    )
    assert {run.name for run in tmp_path.glob("teacher_forcing_seed*")} == {
        "teacher_forcing_seed0",
        "teacher_forcing_seed1",
    }
