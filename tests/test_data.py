from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from project.data.datamodule import InputError, WindowDataModule, WindowDataset

ETTH1 = Path(__file__).resolve().parents[2] / "shared" / "data" / "ETTh1.csv"


def frame_of_row_numbers(rows: int = 200, n_features: int = 2) -> pd.DataFrame:
    """Every value is its row number (plus the channel), so windows show which rows they hold."""
    values = np.arange(rows, dtype=np.float64)[:, None] + np.arange(n_features)[None] * 1000
    frame = pd.DataFrame(values, columns=[f"c{i}" for i in range(n_features)])
    frame.insert(0, "time", pd.date_range("2020-01-01", periods=rows, freq="h"))
    return frame


def target_rows(datamodule: WindowDataModule, split: str) -> set[int]:
    """Original row numbers of every target value of ``split``."""
    windows = datamodule.split(split, stride=1)
    return {int(row) for i in range(len(windows)) for row in datamodule.inverse_transform(windows[i][1])[:, 0]}


def test_windows_match_a_hand_computed_example():
    series = torch.arange(10, dtype=torch.float32)[:, None]
    windows = WindowDataset(series, context_length=3, horizon=2)
    assert len(windows) == 6
    context, target = windows[0]
    assert context[:, 0].tolist() == [0, 1, 2]
    assert target[:, 0].tolist() == [3, 4]
    context, target = windows[5]
    assert context[:, 0].tolist() == [5, 6, 7]
    assert target[:, 0].tolist() == [8, 9]


def test_stride_skips_the_oldest_rows_and_keeps_the_last_window():
    series = torch.arange(10, dtype=torch.float32)[:, None]
    windows = WindowDataset(series, context_length=3, horizon=2, stride=2)
    assert len(windows) == 3
    assert [windows[i][0][0, 0].item() for i in range(3)] == [1, 3, 5]
    assert windows[2][1][:, 0].tolist() == [8, 9]
    assert [windows.target_start(i) for i in range(3)] == [4, 6, 8]


def test_no_validation_or_test_target_row_is_a_training_target():
    datamodule = WindowDataModule(frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    datamodule.setup("fit")
    train, val, test = (target_rows(datamodule, split) for split in ("train", "val", "test"))
    assert train.isdisjoint(val)
    assert train.isdisjoint(test)
    assert val.isdisjoint(test)
    assert max(train) < min(val)
    assert max(val) < min(test)
    assert (max(train), min(val), max(val), min(test), max(test)) == (139, 140, 159, 160, 199)
    first_val_context, _ = datamodule.split("val")[0]
    assert datamodule.inverse_transform(first_val_context)[:, 0].tolist() == [135, 136, 137, 138, 139]


def test_scaler_statistics_equal_those_of_the_training_rows_alone():
    frame = frame_of_row_numbers()
    datamodule = WindowDataModule(frame, time_column="time", context_length=5, horizon=3)
    datamodule.setup("fit")
    training_rows = torch.tensor(frame[["c0", "c1"]].to_numpy()[:140], dtype=torch.float32)
    torch.testing.assert_close(datamodule.scaler.mean, training_rows.mean(0))
    torch.testing.assert_close(datamodule.scaler.std, training_rows.std(0, unbiased=False))


def test_scaler_never_sees_test_rows():
    frame = frame_of_row_numbers()
    changed = frame.copy()
    changed.loc[140:, ["c0", "c1"]] *= 1000
    scalers = []
    for data in (frame, changed):
        datamodule = WindowDataModule(data, time_column="time", context_length=5, horizon=3)
        datamodule.setup("fit")
        scalers.append(datamodule.scaler)
    torch.testing.assert_close(scalers[0].mean, scalers[1].mean, rtol=0, atol=0)
    torch.testing.assert_close(scalers[0].std, scalers[1].std, rtol=0, atol=0)


def test_a_datamodule_restored_from_a_checkpoint_scales_identically():
    trained = WindowDataModule(frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    trained.setup("fit")
    state = trained.state_dict()
    other_data = frame_of_row_numbers()
    other_data[["c0", "c1"]] *= 3  # different rows would fit a different scaler
    restored = WindowDataModule(other_data, time_column="time", context_length=5, horizon=3)
    restored.setup("test")
    restored.load_state_dict(state)
    probe = torch.randn(4, 2)
    torch.testing.assert_close(restored.scaler.transform(probe), trained.scaler.transform(probe), rtol=0, atol=0)
    torch.testing.assert_close(restored.series, trained.scaler.transform(restored.raw))


def test_restoring_a_checkpoint_trained_on_other_columns_fails():
    trained = WindowDataModule(frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    trained.setup("fit")
    renamed = frame_of_row_numbers().rename(columns={"c1": "other"})
    restored = WindowDataModule(renamed, time_column="time", context_length=5, horizon=3)
    with pytest.raises(InputError, match=r"trained on columns \['c0', 'c1'\]; the data has \['c0', 'other'\]"):
        restored.load_state_dict(trained.state_dict())


def test_predictions_go_back_to_original_units():
    datamodule = WindowDataModule(frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    datamodule.setup("fit")
    torch.testing.assert_close(datamodule.inverse_transform(datamodule.series), datamodule.raw)


def test_csv_and_parquet_files_load_like_the_dataframe(tmp_path):
    frame = frame_of_row_numbers()
    frame.to_csv(tmp_path / "series.csv", index=False)
    frame.to_parquet(tmp_path / "series.parquet")
    loaded = [
        WindowDataModule(source, time_column="time", context_length=5, horizon=3)
        for source in (frame, str(tmp_path / "series.csv"), tmp_path / "series.parquet")
    ]
    for datamodule in loaded[1:]:
        torch.testing.assert_close(datamodule.raw, loaded[0].raw, rtol=0, atol=0)
        assert datamodule.feature_names == ["c0", "c1"]


def test_split_by_timestamps():
    datamodule = WindowDataModule(
        frame_of_row_numbers(),
        time_column="time",
        context_length=5,
        horizon=3,
        val_start="2020-01-05 00:00",
        test_start="2020-01-06 00:00",
        test_end="2020-01-07 00:00",
    )
    assert datamodule.boundaries == (96, 120, 144)


def test_predict_forecasts_the_future_after_the_last_row():
    datamodule = WindowDataModule(frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    datamodule.setup("predict")
    (context,) = next(iter(datamodule.predict_dataloader()))
    assert context.shape == (1, 5, 2)
    assert datamodule.inverse_transform(context)[0, :, 0].tolist() == [195, 196, 197, 198, 199]
    assert list(datamodule.forecast_timestamps(0)) == list(pd.date_range("2020-01-09 08:00", periods=3, freq="h"))


def test_predict_on_every_test_window_knows_its_timestamps():
    frame = frame_of_row_numbers()
    datamodule = WindowDataModule(frame, time_column="time", context_length=5, horizon=3, predict_windows="test")
    datamodule.setup("predict")
    windows = datamodule.predict_dataset()
    assert len(windows) == 40 - 3 + 1
    for index in (0, len(windows) - 1):
        first_target_row = int(datamodule.inverse_transform(windows[index][1])[0, 0])
        assert datamodule.forecast_timestamps(index)[0] == frame["time"].iloc[first_target_row]


def test_embedded_synthetic_data_needs_no_source():
    datamodule = WindowDataModule()
    assert datamodule.n_features == 5
    assert len(datamodule.raw) == 10_000
    datamodule.setup("fit")
    context, target = next(iter(datamodule.train_dataloader()))
    assert context.shape == (64, 12, 5)
    assert target.shape == (64, 12, 5)


def test_windowing_a_million_rows_allocates_about_the_series_not_the_windows():
    rows, n_features = 1_000_000, 5
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(rows, n_features)), columns=list("abcde"))
    datamodule = WindowDataModule(
        frame, context_length=96, horizon=96, train_fraction=0.9, val_fraction=0.05, test_fraction=0.05
    )
    datamodule.setup("fit")
    series_bytes = rows * n_features * 4
    assert datamodule.series.untyped_storage().nbytes() == series_bytes
    for split in ("train", "val", "test"):
        windows = datamodule.split(split).windows
        assert windows.untyped_storage().data_ptr() == datamodule.series.untyped_storage().data_ptr()
        assert windows.untyped_storage().nbytes() == series_bytes  # a view: ~20 MB, not N × 192 rows (~3.5 GB)


@pytest.mark.skipif(not ETTH1.is_file(), reason="ETTh1.csv is not in ../shared/data")
def test_etth1_loads_with_the_12_4_4_month_split_of_the_ltsf_benchmarks():
    datamodule = WindowDataModule(
        ETTH1,
        time_column="date",
        context_length=336,
        horizon=96,
        val_start="2017-06-26",
        test_start="2017-10-24",
        test_end="2018-02-21",
    )
    datamodule.setup("fit")
    assert datamodule.n_features == 7
    assert datamodule.feature_names[-1] == "OT"
    assert datamodule.boundaries == (8640, 11520, 14400)
    assert [len(datamodule.split(split)) for split in ("train", "val", "test")] == [8209, 2785, 2785]


def test_missing_values_can_be_filled():
    frame = frame_of_row_numbers(rows=60)
    frame.loc[10, "c0"] = np.nan
    frame.loc[20, "c1"] = np.inf
    frame.loc[0, "c1"] = np.nan
    carried = WindowDataModule(frame, time_column="time", context_length=5, horizon=3, fill_missing="ffill")
    assert carried.raw[10, 0] == 9
    assert carried.raw[20, 1] == 1019
    assert carried.raw[0, 1] == 1001
    interpolated = WindowDataModule(frame, time_column="time", context_length=5, horizon=3, fill_missing="interpolate")
    assert interpolated.raw[10, 0] == 10
    assert interpolated.raw[20, 1] == 1020
    assert torch.isfinite(interpolated.raw).all()


def test_irregular_timestamps_are_reported():
    frame = frame_of_row_numbers().drop(index=[50, 51]).reset_index(drop=True)
    with pytest.warns(UserWarning, match=r"'time' is not regularly spaced: 1 steps differ from the usual 0 days 01:00"):
        WindowDataModule(frame, time_column="time", context_length=5, horizon=3)


def with_value(frame: pd.DataFrame, row: int, column: str, value) -> pd.DataFrame:
    frame = frame.copy()
    if not isinstance(value, float):
        frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    return frame


BAD_INPUT = {
    "missing file": (dict(source="no/such.csv"), r"^no/such.csv: data file not found$"),
    "wrong suffix": (dict(source=__file__), r"expected a .csv or .parquet file; got '.py'"),
    "unknown column": (dict(feature_columns=["c0", "nope"]), r"column 'nope' not found; available: time, c0, c1"),
    "unknown time column": (dict(time_column="when"), r"column 'when' not found"),
    "non-numeric column": (
        dict(source=with_value(frame_of_row_numbers(), 3, "c1", "n/a"), feature_columns=["c0", "c1"]),
        r"column 'c1' must be numeric; got dtype object",
    ),
    "nan": (
        dict(source=with_value(frame_of_row_numbers(), 17, "c1", np.nan)),
        r"column 'c1' has a missing or infinite value at row 17 \(2020-01-01 17:00:00\); set fill_missing",
    ),
    "inf": (dict(source=with_value(frame_of_row_numbers(), 3, "c0", np.inf)), r"column 'c0' .* at row 3 "),
    "bad timestamp": (
        dict(source=with_value(frame_of_row_numbers(), 4, "time", "yesterday")),
        r"column 'time' must hold timestamps; row 4 has 'yesterday'",
    ),
    "duplicate timestamps": (
        dict(source=with_value(frame_of_row_numbers(), 5, "time", pd.Timestamp("2020-01-01 04:00"))),
        r"column 'time' has duplicate timestamps; row 5 repeats 2020-01-01 04:00:00",
    ),
    "unsorted timestamps": (
        dict(source=frame_of_row_numbers().iloc[[0, 2, 1, *range(3, 200)]]),
        r"column 'time' must be sorted in increasing time; row 2 \(2020-01-01 01:00:00\) comes before row 1",
    ),
    "too few rows": (
        dict(source=frame_of_row_numbers(rows=10)),
        r"has 10 rows; a training window and a validation and test horizon need at least .* = 14",
    ),
    "empty validation split": (
        dict(train_fraction=0.9, val_fraction=0.01, test_fraction=0.09),
        r"the val split \(fractions 0.9/0.01/0.09\) has 2 of 200 rows; it needs at least 3",
    ),
    "fractions above one": (
        dict(train_fraction=0.8, val_fraction=0.2, test_fraction=0.2),
        r"must be at most 1; got 0.8 \+ 0.2 \+ 0.2 = 1.2",
    ),
    "zero fraction": (dict(test_fraction=0.0), r"test_fraction must be in \(0, 1\]; got 0.0"),
    "zero context": (dict(context_length=0), r"^context_length must be a positive integer; got 0$"),
    "negative horizon": (dict(horizon=-2), r"^horizon must be a positive integer; got -2$"),
    "zero stride": (dict(stride=0), r"^stride must be a positive integer; got 0$"),
    "date split without time column": (dict(time_column=None, val_start="2020-01-02"), r"need time_column"),
    "date split needs both dates": (dict(val_start="2020-01-02"), r"needs both val_start and test_start"),
}


@pytest.mark.parametrize("case", BAD_INPUT)
def test_bad_input_gets_one_line_naming_what_was_expected(case):
    overrides, message = BAD_INPUT[case]
    arguments = dict(source=frame_of_row_numbers(), time_column="time", context_length=5, horizon=3)
    arguments.update(overrides)
    with pytest.raises(InputError, match=message) as error:
        WindowDataModule(**arguments)
    assert "\n" not in str(error.value)
