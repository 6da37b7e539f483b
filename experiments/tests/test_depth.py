"""The decoder-depth study (an optional tool: it goes with project/tools)."""

import argparse
import re

import pytest

from experiments import depth
from project.errors import InputError
from tests.helpers import BASE, REPOSITORY, cli, only_run, quick_fit_arguments


@pytest.fixture
def in_repository(monkeypatch):
    monkeypatch.chdir(REPOSITORY)  # the tool reads configs/


def fabricated_cell(level: float) -> dict:
    row = {
        key: [level, level + 0.01, level + 0.02] for key in ("val_mse", "val_mae", "val_loss", "test_mse", "test_mae")
    }
    return {**row, "val_loss_tf": [level - 0.1] * 3, "seconds": [10.0, 11.0, 12.0], "best_epoch": [3, 4, 4]}


def test_verdicts_need_the_seeds_spreads_apart():
    assert depth.verdict([0.50, 0.51], [0.60, 0.61]) == "wins"
    assert depth.verdict([0.60, 0.61], [0.50, 0.51]) == "loses"
    assert depth.verdict([0.50, 0.60], [0.55, 0.56]) == "ties"


def test_table_and_figure_have_every_cell_and_baseline_and_label_a_left_out_cell(tmp_path, in_repository):
    study = depth.STUDIES["etth1"]
    cells = {(r, d): fabricated_cell(0.4 + 0.01 * d) for r in depth.REGIME_ORDER for d in study.depths}
    cells[("teacher_forcing", 2)] = fabricated_cell(0.9)
    cells[("free_running_bptt", 32)] = "one epoch took 30 s; not run"
    names = ["repeat-last", "seasonal naive (season 24)", "least-squares linear map", "NLinear form"]
    scores = {"val_mse": [1.0], "val_mae": [0.8], "test_mse": [0.9], "test_mae": [0.7]}
    baselines = [{"model": f"{name} (measured)", **scores} for name in names]
    args = argparse.Namespace(seeds=[0, 1, 2])
    table = depth.markdown("etth1", cells, baselines, args, [])
    for name in names:
        assert f"| {name} (measured) | – | – | 1.000 | 0.800 | – | – | 0.900 | 0.700 | deterministic | – |" in table
    for regime in depth.REGIME_ORDER:
        for d in study.depths:
            assert f"| {regime.replace('_', ' ')} | {d} | {96 // d} | " in table
    assert "| free running bptt | 32 | 3 | left out: one epoch took 30 s; not run | – |" in table
    assert "| teacher forcing | 4 | 24 | 0.450 ± 0.010 | 0.450 ± 0.010 | 0.450 ± 0.010 | 0.340 ± 0.000 |" in table
    assert "| 2 | -0.480 (wins) | -0.480 (wins) |" in table  # every free-running regime beats teacher forcing at D=2
    assert "| 4 | +0.000 (ties) | +0.000 (ties) |" in table
    assert "`--data.context_length=96`" in table
    assert "Seeds 0, 1, 2." in table
    # Each cell's values per seed, from which its mean ± sd is computed.
    assert "- teacher forcing, D = 4, validation MSE: seed 0: 0.440, seed 1: 0.450, seed 2: 0.460\n" in table
    assert "- scheduled sampling, D = 32, test MAE: seed 0: 0.720, seed 1: 0.730, seed 2: 0.740\n" in table
    assert "- free running bptt, D = 32," not in table  # left out: no values
    figure = tmp_path / "depth.png"
    depth.draw("etth1", cells, baselines, figure)
    assert figure.read_bytes().startswith(b"\x89PNG")


def test_a_bad_left_out_cell_is_refused_in_one_line(etth1_shaped, tmp_path, in_repository, capsys):
    with pytest.raises(SystemExit):
        depth.main(
            [
                "etth1",
                "--data",
                str(etth1_shaped),
                "--leave-out",
                "free_running_bptt:32",
                "--output",
                str(tmp_path / "t.md"),
                "--figure",
                str(tmp_path / "f.png"),
            ]
        )
    assert "--leave-out takes REGIME:D=REASON" in capsys.readouterr().err


@pytest.mark.slow
def test_depth_tool_trains_the_grid_labels_what_it_left_out_and_reuses_tested_runs(
    etth1_shaped, tmp_path, in_repository
):
    output, figure = tmp_path / "depth.md", tmp_path / "depth.png"
    # Batch counts of 2: jsonargparse reads a limit of 1 as the float 1.0, which Lightning takes as "all".
    short = ["--trainer.max_steps=2", "--trainer.limit_train_batches=2", "--trainer.limit_val_batches=2"]
    short.append("--trainer.val_check_interval=2")  # base.yaml validates every 100 batches
    short += ["--trainer.limit_test_batches=2", "--data.batch_size=4"]
    arguments = [
        "etth1",
        "--data",
        str(etth1_shaped),
        "--regimes",
        "teacher_forcing",
        "free_running_bptt",
        "--depths",
        "32",
        "--seeds",
        "0",
        "--logs",
        str(tmp_path / "logs"),
        "--output",
        str(output),
        "--figure",
        str(figure),
        "--leave-out",
        "scheduled_sampling:2=1 min an epoch",
        "--statistical",
        *short,
    ]
    depth.main(arguments)
    stamp, table = output.read_text().split("\n\n", 1)
    assert stamp.startswith("Written by `python -m ")
    assert "at commit " in stamp
    assert "| least-squares linear map, shared across channels (measured) | – | – | " in table
    assert re.search(r"\| teacher forcing \| 32 \| 3 \| \d+\.\d{3} \|", table)
    assert re.search(r"\| free running bptt \| 32 \| 3 \| \d+\.\d{3} \|", table)
    assert "| scheduled sampling | 2 | 48 | left out: 1 min an epoch |" in table
    assert "| free running detach | 32 | 3 | left out: not run by this command (--regimes/--depths) |" in table
    assert figure.read_bytes().startswith(b"\x89PNG")
    runs = sorted((tmp_path / "logs").rglob("events.out.tfevents.*"))
    depth.main([*arguments, "--reuse", "--overwrite"])  # tabulates the tested runs again, trains none
    assert sorted((tmp_path / "logs").rglob("events.out.tfevents.*")) == runs
    assert re.search(r"\| free running bptt \| 32 \| 3 \| \d+\.\d{3} \|", output.read_text())


def test_the_statistical_rows_are_fitted_per_channel_and_scored_on_the_studys_windows(etth1_shaped, in_repository):
    pytest.importorskip("statsforecast")
    from experiments.etth1 import statistical_row
    from experiments.results import data_options, preset_datamodule

    study = depth.STUDIES["etth1"]
    given = {**data_options(study.setting), "eval_stride": 240}  # a few windows: seconds, not minutes
    windows = preset_datamodule(study.config, etth1_shaped, **given)
    row = depth.statistical("AutoETS", windows)
    assert re.fullmatch(
        r"AutoETS \(season 24\), statsforecast, per series and channel \(measured, \d+ s\)", row["model"]
    )
    expected = statistical_row("AutoETS", windows)
    assert {key: row[key] for key in depth.CELL_SCORES if key in row} == {
        key: expected[key] for key in depth.CELL_SCORES if key in expected
    }
    assert 0 < row["val_mse"][0] < 1  # a daily sine and noise: far better than its unit variance


def test_a_run_that_never_validated_is_one_line_naming_it_and_what_it_did_not_log(tmp_path):
    assert cli("fit", "--config", BASE, *quick_fit_arguments(tmp_path), "--trainer.limit_val_batches=0") == 0
    run = only_run(tmp_path)
    with pytest.raises(InputError) as refused:
        depth.cell_row([run], "val/mse")
    assert str(refused.value) == (
        f"{run}: the run logged no val/mse, val/mae, val/loss, val/loss_teacher_forced; a study's runs validate "
        "and test"
    )
