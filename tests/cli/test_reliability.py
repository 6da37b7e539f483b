"""Never lose the user's data, never report a failure as success, and date forecasts in the data's calendar."""

import os

import numpy as np
import pandas as pd
import pytest
import torch

from project.data import WindowDataModule
from project.errors import InputError
from project.files import write_atomically
from tests.helpers import (
    BASE,
    SMALL_MODEL,
    assert_refused_in_one_line,
    cli,
    frame_of_row_numbers,
    quick_fit_arguments,
)


@pytest.mark.slow
def test_an_existing_output_survives_unless_overwrite_is_given(user_run, tmp_path, capsys):
    _, _, checkpoint = user_run
    output = tmp_path / "forecast.csv"
    output.write_text("my earlier forecast\n")
    arguments = ["predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false"]
    assert assert_refused_in_one_line(cli(*arguments), capsys) == (
        f"error: {output} already exists; choose another output path or pass --overwrite to replace it"
    )
    assert output.read_text() == "my earlier forecast\n"
    assert cli(*arguments, "--overwrite=true") == 0
    assert pd.read_csv(output)["step"].tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]


def test_an_interrupted_write_leaves_the_old_file_whole(tmp_path):
    output = tmp_path / "table.csv"
    output.write_text("old\n")

    def fail_halfway(temporary):
        temporary.write_text("half of a new")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        write_atomically(output, fail_halfway)
    assert output.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]  # no temporary file left behind


def test_an_atomically_written_file_has_the_permissions_of_any_new_file(tmp_path):
    umask = os.umask(0)  # read by setting it; set back at once
    os.umask(umask)
    output = write_atomically(tmp_path / "table.csv", lambda temporary: temporary.write_text("new\n"))
    assert output.stat().st_mode & 0o777 == 0o666 & ~umask
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_a_diverging_run_stops_with_one_line_a_non_zero_exit_and_no_nan_checkpoint(tmp_path, capsys):
    arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path, steps=20), "--trainer.val_check_interval=2"]
    arguments += ["--model.optimizer.init_args.lr=1e6", "--model.lr_scheduler.init_args.warmup_steps=1"]
    line = assert_refused_in_one_line(
        cli("fit", "--config", BASE, *arguments, "--trainer.gradient_clip_val=null"), capsys
    )
    assert line.startswith("error: training diverged: the")
    assert "at step" in line
    assert "lower the learning rate" in line
    for checkpoint in tmp_path.rglob("*.ckpt"):
        state = torch.load(checkpoint, weights_only=False)["state_dict"]
        assert all(torch.isfinite(value).all() for value in state.values()), checkpoint


def test_resuming_a_checkpoint_whose_learning_rate_is_nan_is_one_line_before_any_step(trained_run, tmp_path, capsys):
    """The optimizer the model rebuilds from the checkpoint's settings (its state's rates are never taken:
    tests/checkpoints/test_restore.py)."""
    checkpoint = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=False)
    checkpoint["hyper_parameters"]["optimizer"]["init_args"]["lr"] = float("nan")
    path = tmp_path / "nan.ckpt"
    torch.save(checkpoint, path)
    folder = tmp_path / "checkpoints"
    fit = ["fit", f"--ckpt_path={path}", "--trainer.logger=false", f"--checkpoint.dirpath={folder}"]
    code = cli(*fit, f"--trainer.max_steps={checkpoint['global_step'] + 2}")
    assert assert_refused_in_one_line(code, capsys) == "error: model.optimizer: Invalid learning rate: nan"
    assert not folder.exists() or not list(folder.iterdir())


@pytest.mark.parametrize(
    ("frequency", "first", "expected"),
    [
        ("QS", "1959-01-01", ["2010-04-01", "2010-07-01", "2010-10-01"]),  # statsmodels' macrodata, quarter starts
        ("MS", "1990-01-01", ["2010-04-01", "2010-05-01", "2010-06-01"]),
        ("ME", "1990-01-31", ["2010-04-30", "2010-05-31", "2010-06-30"]),
        ("B", "2009-03-02", ["2010-04-05", "2010-04-06", "2010-04-07"]),  # business days: Monday after Friday
    ],
)
def test_forecasts_follow_the_datas_calendar(frequency, first, expected, recwarn):
    times = pd.date_range(first, "2010-04-02", freq=frequency)
    times = times[times < pd.Timestamp("2010-04-01")] if frequency != "B" else times
    frame = pd.DataFrame({"time": times, "value": np.arange(len(times), dtype=float)})
    datamodule = WindowDataModule(frame, time_column="time", context_length=4, horizon=3)
    assert not [w for w in recwarn if "not regularly spaced" in str(w.message)]
    timestamps = datamodule.predict_dataset().target_timestamps(0)
    assert [str(t.date()) for t in timestamps] == expected
    assert datamodule.state_dict()["frequency"] == datamodule.panel.frequency  # saved in the checkpoint


def test_monthly_data_with_a_missing_month_keeps_its_calendar_and_says_what_is_missing():
    times = pd.date_range("2000-01-01", periods=60, freq="MS").delete(30)
    frame = pd.DataFrame({"time": times, "value": np.arange(59, dtype=float)})
    with pytest.warns(UserWarning, match=r"not regularly spaced at its frequency MS: 1 missing steps"):
        datamodule = WindowDataModule(frame, time_column="time", context_length=4, horizon=3)
    assert datamodule.panel.frequency == "MS"
    assert str(datamodule.predict_dataset().target_timestamps(0)[0].date()) == "2005-01-01"


def test_predict_needs_the_future_covariates_of_every_forecast_step(tmp_path):
    frame = frame_of_row_numbers(100)
    frame["price"] = 1.0
    future = pd.DataFrame({"time": pd.date_range(frame["time"].iloc[-1], periods=3, freq="h")[1:], "price": 2.0})
    frame = pd.concat([frame, future], ignore_index=True)  # 2 known future rows; the horizon needs 3
    datamodule = WindowDataModule(
        frame,
        time_column="time",
        target_columns=["c0"],
        future_covariates=["price"],
        context_length=5,
        horizon=3,
        calendar_features=False,
    )
    with pytest.raises(InputError, match=r"future covariate 'price' is missing for step 3 of the 3 to forecast \("):
        datamodule.predict_dataset()
