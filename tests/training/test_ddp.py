"""DistributedDataParallel with two CPU processes: exact evaluation and each window predicted once."""

import pandas as pd
import pytest

from project.training.runs import read_scalars
from tests.helpers import (
    BASE,
    SMALL_MODEL,
    assert_close_in_float32,
    assert_ok,
    cli,
    config,
    only_run,
    quick_fit_arguments,
    run_cli,
)

# DDP's processes find each other on a free local port: two such runs at once (pytest-xdist) could pick the same.
pytestmark = pytest.mark.xdist_group("ddp")

DDP = ["--trainer.strategy=ddp", "--trainer.accelerator=cpu", "--trainer.devices=2"]


def run(layout: str, *arguments: str) -> None:
    """A CLI command that succeeds: DDP's in a fresh process, which its launcher starts again as the second rank;
    one process's in this one."""
    if layout == "ddp":
        assert_ok(run_cli(*arguments))
    else:
        assert cli(*arguments) == 0


@pytest.mark.slow
def test_two_processes_score_and_predict_exactly_what_one_process_does(tmp_path):
    # 999 validation windows and batches of 10: an odd count that DistributedSampler would pad with repeats.
    split = ["--data.split=Fractions", "--data.split.val=0.1001", "--data.split.test=0.1"]
    data = ["--data.batch_size=10", *split, "--data.eval_stride=1"]
    fit = quick_fit_arguments(tmp_path / "fit")
    assert cli("fit", "--config", BASE, *SMALL_MODEL, *data, *fit, "--test_after_fit=false") == 0
    checkpoint = only_run(tmp_path / "fit") / "checkpoints" / "last.ckpt"  # DDP's training: the panel test below
    scores = {}
    for name, processes in (("ddp", DDP), ("single", ["--trainer.devices=1", "--trainer.accelerator=cpu"])):
        arguments = [f"--ckpt_path={checkpoint}", *data, *processes, f"--trainer.default_root_dir={tmp_path / name}"]
        output = tmp_path / f"{name}.csv"
        run(name, "validate", *arguments)
        scores[name] = read_scalars(only_run(tmp_path / name, "lightning_logs"))
        # One series, one forecast, two processes: the second's shard is padded, and the window written once.
        run(name, "predict", *arguments, f"--predictions.output={output}")
    for metric in ("val/mse", "val/mae", "val/loss", "val/mae_original_units", "val/mae_repeat_last_original_units"):
        assert_close_in_float32(scores["ddp"][metric].iloc[-1], scores["single"][metric].iloc[-1])
    ddp, single = pd.read_csv(tmp_path / "ddp.csv"), pd.read_csv(tmp_path / "single.csv")
    assert ddp["window"].nunique() == single["window"].nunique() == len(single) // 12  # every window once
    assert list(ddp.columns) == list(single.columns)
    numbers = single.select_dtypes("number").columns
    pd.testing.assert_frame_equal(ddp.drop(columns=numbers), single.drop(columns=numbers))
    for column in numbers:  # each forecast to float32 rounding at its column's scale
        assert_close_in_float32(ddp[column], single[column])
    assert not list(tmp_path.glob("ddp-rank*.csv"))  # one file, not one per process


@pytest.mark.slow
def test_two_processes_train_on_a_panel(tmp_path):
    """DDP's training: its two processes, each with a data-loading worker, on a panel of series."""
    arguments = [*SMALL_MODEL, *DDP, *quick_fit_arguments(tmp_path), "--data.num_workers=1"]
    assert_ok(run_cli("fit", "--config", BASE, "--config", config("panel.yaml"), *arguments))
    assert (only_run(tmp_path, "synthetic_panel") / "checkpoints" / "last.ckpt").is_file()
