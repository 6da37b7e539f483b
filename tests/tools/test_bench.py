"""The benchmark command (an optional tool: it goes with project/tools)."""

import pandas as pd
import pytest

from project.tools import bench
from tests.helpers import assert_refused_in_one_line


def test_the_benchmark_writes_its_tables(tmp_path, capsys):
    arguments = ["--horizons", "2", "4", "--batch-size", "2", "--d-model", "16", "--repeats", "1", "--samples", "3"]
    bench.main([*arguments, "--output", str(tmp_path)])
    training = pd.read_csv(tmp_path / "training.csv")
    assert list(training["regime"].unique()) == list(bench.TRAINING_ROWS)
    assert (training.loc[training["regime"] == "teacher_forcing", "memory_ratio"] == 1.0).all()
    assert (training.loc[training["regime"] == "free_running_detach", "memory_ratio"] <= 1.1).all()
    assert len(pd.read_csv(tmp_path / "inference.csv")) == 2
    assert len(pd.read_csv(tmp_path / "sampling.csv")) == 2
    table = (tmp_path / "bench.md").read_text()
    assert "| 4 | `naive_loop_as_posted` |" in table
    assert "`generate(num_samples=100)` with cache" in table
    assert "re-decoding the prefix" in capsys.readouterr().out


@pytest.mark.slow
def test_the_benchmark_skips_a_naive_loop_it_cannot_afford(tmp_path):
    arguments = ["--horizons", "2", "64", "--batch-size", "2", "--d-model", "16", "--repeats", "1"]
    bench.main([*arguments, "--suite", "training", "--naive-max-seconds", "0.001", "--output", str(tmp_path)])
    training = pd.read_csv(tmp_path / "training.csv")
    skipped = training[(training["horizon"] == 64) & (training["regime"] == bench.NAIVE)]
    assert skipped["note"].str.startswith("skipped: ~").all()
    assert skipped["step_ms"].isna().all()


def test_the_benchmark_does_not_replace_earlier_results_without_overwrite(tmp_path, capsys):
    (tmp_path / "training.csv").write_text("earlier\n")
    arguments = ["--suite", "training", "--horizons", "2", "--batch-size", "2", "--d-model", "16", "--repeats", "1"]
    arguments += ["--output", str(tmp_path)]
    assert_refused_in_one_line(lambda: bench.main(arguments), capsys, "training.csv already exists")
    assert (tmp_path / "training.csv").read_text() == "earlier\n"


@pytest.mark.slow
def test_the_panel_suite_reports_memory_against_the_matrix_and_the_first_batch(tmp_path):
    arguments = ["--suite", "panel", "--panel-rows", "40000", "--panel-series", "40", "--output", str(tmp_path)]
    bench.main(arguments)
    table = (tmp_path / "panel.md").read_text()
    assert "× the matrix" in table
    assert "serve the first training batch" in table


@pytest.mark.slow
def test_the_profile_suite_profiles_the_rollout_and_bptt(tmp_path):
    bench.main(["--suite", "profile", "--batch-size", "2", "--d-model", "16", "--output", str(tmp_path)])
    profile = (tmp_path / "profile.txt").read_text()
    assert profile.startswith("Written by `python -m ")
    assert "96-step no-grad cached rollout" in profile
    assert "96-step differentiable unroll (BPTT) and its backward" in profile
    assert "_AttendOverCacheBackward" in profile.split("(BPTT)")[1]
