"""The command-line tools besides the CLI: benchmark, run summaries, figures, the ETTh1 table."""

import subprocess
import sys

import pandas as pd
import pytest

from project import bench, etth1, runs
from tests.helpers import REPOSITORY, SMALL_MODEL, only_run, quick_fit_arguments, run_cli
from tests.test_data import ETTH1


def test_the_benchmark_writes_its_tables(tmp_path, capsys):
    arguments = ["--horizons", "2", "4", "--batch-size", "2", "--d-model", "16", "--repeats", "1"]
    bench.main([*arguments, "--output", str(tmp_path)])
    training = pd.read_csv(tmp_path / "training.csv")
    assert list(training["regime"].unique()) == list(bench.REGIMES)
    assert (training.loc[training["regime"] == "teacher forcing", "memory_ratio"] == 1.0).all()
    assert (training.loc[training["regime"] == "free-running detach", "memory_ratio"] <= 1.1).all()
    assert len(pd.read_csv(tmp_path / "inference.csv")) == 2
    table = (tmp_path / "bench.md").read_text()
    assert "| 4 | naive loop (as posted) |" in table
    assert "re-decoding the prefix" in capsys.readouterr().out


def test_the_benchmark_skips_a_naive_loop_it_cannot_afford(tmp_path):
    arguments = ["--horizons", "2", "64", "--batch-size", "2", "--d-model", "16", "--repeats", "1", "--skip-inference"]
    bench.main([*arguments, "--naive-max-seconds", "0.001", "--output", str(tmp_path)])
    training = pd.read_csv(tmp_path / "training.csv")
    skipped = training[(training["horizon"] == 64) & (training["regime"] == bench.NAIVE)]
    assert skipped["note"].str.startswith("skipped: ~").all()
    assert skipped["step_ms"].isna().all()


def test_runs_prints_a_table_of_runs(tmp_path, capsys):
    assert run_cli("fit", "--config", "configs/base.yaml", *SMALL_MODEL, *quick_fit_arguments(tmp_path)).returncode == 0
    runs.main([str(tmp_path)])
    printed = capsys.readouterr().out
    assert "effective_batch_size" in printed
    assert "synthetic/version_0" in printed
    with pytest.raises(SystemExit):
        runs.main([str(tmp_path / "nothing here")])


def test_figures_draws_forecasts_from_a_checkpoint(tmp_path):
    assert run_cli("fit", "--config", "configs/base.yaml", *SMALL_MODEL, *quick_fit_arguments(tmp_path)).returncode == 0
    checkpoint = only_run(tmp_path) / "checkpoints" / "last.ckpt"
    output = tmp_path / "forecast.png"
    command = [sys.executable, "-m", "project.figures", str(checkpoint), "--output", str(output)]
    subprocess.run(command, cwd=REPOSITORY, check=True, capture_output=True)
    assert output.read_bytes().startswith(b"\x89PNG")


@pytest.mark.skipif(not ETTH1.is_file(), reason="ETTh1.csv is not in ../shared/data")
def test_etth1_baselines_are_measured_on_the_benchmark_windows():
    repeat_last, linear = etth1.measure_baselines(ETTH1)
    # The published repeat-last figures, reproduced on the same 2785 test windows.
    assert (round(repeat_last["mse"], 3), round(repeat_last["mae"], 3)) == (1.294, 0.713)
    assert linear["mse"] < 0.38
    table = etth1.markdown([repeat_last, linear, etth1._row("DLinear (published)", 0.375, 0.399, None)], "CPU")
    assert "| repeat-last (measured) | 1.294 | 0.713 |" in table
    assert "| DLinear (published) | 0.375 | 0.399 | published |" in table


@pytest.mark.slow
@pytest.mark.skipif(not ETTH1.is_file(), reason="ETTh1.csv is not in ../shared/data")
def test_etth1_script_trains_tests_and_tabulates_a_regime(tmp_path, monkeypatch):
    monkeypatch.chdir(REPOSITORY)
    output = tmp_path / "etth1.md"
    short = ["--trainer.max_steps=2", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=1"]
    short += ["--trainer.limit_test_batches=1", "--trainer.enable_progress_bar=false", "--data.batch_size=4"]
    etth1.main(
        ["--data", str(ETTH1), "--regimes", "teacher forcing", "--logs", str(tmp_path), "--output", str(output), *short]
    )
    table = output.read_text()
    assert "| teacher forcing |" in table
    assert "| least-squares linear map, shared across channels (measured) |" in table
    assert "| PatchTST/64 (Nie et al. 2023) (published) | 0.370 | 0.400 | published |" in table
