"""One series: windows, splits, scaling and files, as the DataModule promised before panels (unchanged)."""

import os

import numpy as np
import pandas as pd
import pytest
import torch
from jsonargparse import ArgumentParser

from project.data.datamodule import WindowDataModule
from project.data.panel import PanelSettings, build_panel
from project.data.scaling import Scaler
from project.data.splits import Dates, Fractions, LastRows, Split
from project.data.windows import PanelWindows, split_windows
from project.errors import InputError
from tests.helpers import frame_of_row_numbers


def row_numbers(datamodule, **overrides) -> WindowDataModule:
    arguments = dict(time_column="time", context_length=5, horizon=3, calendar_features=False)
    return WindowDataModule(datamodule, **{**arguments, **overrides})


def windows_of(rows: int, context: int, horizon: int, stride: int = 1) -> PanelWindows:
    panel = build_panel(frame_of_row_numbers(rows, 1).drop(columns="time"), PanelSettings(), "test")
    first, count = split_windows(np.array([rows]), np.array([0]), context, horizon, stride)
    return PanelWindows(panel, Scaler.fit(panel, np.array([rows]), "none"), context, horizon, first, count, stride)


def original(item: dict, name: str) -> torch.Tensor:
    return item[name] * item["scale"] + item["loc"]


def target_rows(datamodule: WindowDataModule, split: str) -> set[int]:
    """Original row numbers of every target value of ``split``."""
    windows = datamodule.split(split, stride=1)
    return {int(row) for i in range(len(windows)) for row in original(windows[i], "target")[:, 0]}


def test_windows_match_a_hand_computed_example():
    windows = windows_of(rows=10, context=3, horizon=2)
    assert len(windows) == 6
    assert windows[0]["context"][:, 0].tolist() == [0, 1, 2]
    assert windows[0]["target"][:, 0].tolist() == [3, 4]
    assert windows[5]["context"][:, 0].tolist() == [5, 6, 7]
    assert windows[5]["target"][:, 0].tolist() == [8, 9]


def test_stride_skips_the_oldest_rows_and_keeps_the_last_window():
    windows = windows_of(rows=10, context=3, horizon=2, stride=2)
    assert len(windows) == 3
    assert [windows[i]["context"][0, 0].item() for i in range(3)] == [1, 3, 5]
    assert windows[2]["target"][:, 0].tolist() == [8, 9]
    assert [windows.locate(i)[1] for i in range(3)] == [4, 6, 8]


def test_no_validation_or_test_target_row_is_a_training_target():
    datamodule = row_numbers(frame_of_row_numbers())
    datamodule.setup("fit")
    train, val, test = (target_rows(datamodule, split) for split in ("train", "val", "test"))
    assert train.isdisjoint(val)
    assert train.isdisjoint(test)
    assert val.isdisjoint(test)
    assert (max(train), min(val), max(val), min(test), max(test)) == (139, 140, 159, 160, 199)
    first_val_context = original(datamodule.split("val")[0], "context")
    assert first_val_context[:, 0].tolist() == [135, 136, 137, 138, 139]


def test_scaler_never_sees_test_rows():
    """Its statistics are those of the training rows alone, and stay the same whatever the later rows hold."""
    frame = frame_of_row_numbers()
    changed = frame.copy()
    changed.loc[140:, ["c0", "c1"]] *= 1000
    scalers = []
    for data in (frame, changed):
        datamodule = row_numbers(data)
        datamodule.setup("fit")
        scalers.append(datamodule.scaler)
    training_rows = frame[["c0", "c1"]].to_numpy()[:140]
    np.testing.assert_allclose(scalers[0].loc[0], training_rows.mean(0))
    np.testing.assert_allclose(scalers[0].scale[0], training_rows.std(0))
    np.testing.assert_array_equal(scalers[0].loc, scalers[1].loc)
    np.testing.assert_array_equal(scalers[0].scale, scalers[1].scale)


def test_a_datamodule_restored_from_a_checkpoint_scales_identically():
    trained = row_numbers(frame_of_row_numbers())
    trained.setup("fit")
    other_data = frame_of_row_numbers()
    other_data[["c0", "c1"]] *= 3  # different rows would fit a different scaler
    restored = row_numbers(other_data)
    restored.load_state_dict(trained.state_dict())
    np.testing.assert_array_equal(restored.scaler.loc, trained.scaler.loc)
    np.testing.assert_array_equal(restored.scaler.scale, trained.scaler.scale)
    item = restored.split("train")[0]
    expected = (other_data[["c0", "c1"]].to_numpy()[:5] - trained.scaler.loc[0]) / trained.scaler.scale[0]
    np.testing.assert_allclose(item["context"].numpy(), expected, rtol=1e-6)


def test_restoring_a_checkpoint_trained_on_other_columns_fails():
    trained = row_numbers(frame_of_row_numbers())
    trained.setup("fit")
    renamed = row_numbers(frame_of_row_numbers().rename(columns={"c1": "other"}))
    trained_with = r"data state's targets are \['c0', 'c1'\]; the DataFrame has \['c0', 'other'\]"
    with pytest.raises(InputError, match=trained_with):
        renamed.load_state_dict(trained.state_dict())


def test_windows_carry_the_scaling_that_takes_them_back_to_original_units():
    datamodule = row_numbers(frame_of_row_numbers())
    datamodule.setup("fit")
    item = datamodule.split("test")[0]
    assert original(item, "target")[:, 0].tolist() == [160, 161, 162]
    assert original(item, "target")[:, 1].tolist() == [1160, 1161, 1162]


def test_csv_and_parquet_files_load_like_the_dataframe(tmp_path):
    frame = frame_of_row_numbers()
    frame.to_csv(tmp_path / "series.csv", index=False)
    frame.to_parquet(tmp_path / "series.parquet")
    loaded = [
        row_numbers(source, cache_dir=str(tmp_path / "cache"))
        for source in (frame, str(tmp_path / "series.csv"), tmp_path / "series.parquet")
    ]
    for datamodule in loaded[1:]:
        np.testing.assert_array_equal(datamodule.panel.values, loaded[0].panel.values)
        assert datamodule.target_names == ["c0", "c1"]
        assert isinstance(datamodule.panel.values, np.memmap)  # file sources are memory-mapped from the cache


def test_an_edit_that_keeps_the_files_size_and_time_is_read_again_not_taken_from_the_cache(tmp_path):
    path = tmp_path / "series.csv"
    frame_of_row_numbers().to_csv(path, index=False)
    before = row_numbers(str(path), cache_dir=str(tmp_path / "cache")).panel.values[0, 0]
    stat = path.stat()
    text = path.read_text()
    path.write_text(text.replace(",0.0,1000.0", ",9.0,1000.0", 1))  # the first row's c0: as many bytes as before
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert (path.stat().st_size, path.stat().st_mtime_ns) == (stat.st_size, stat.st_mtime_ns)
    after = row_numbers(str(path), cache_dir=str(tmp_path / "cache")).panel.values[0, 0]
    assert (before, after) == (0.0, 9.0)


def test_a_series_too_short_to_forecast_is_named_in_one_warning():
    frame = frame_of_row_numbers(30)
    short = frame.iloc[:3].assign(id="tiny")
    datamodule = row_numbers(pd.concat([frame.assign(id="long"), short]), id_columns=["id"], split=LastRows(3, 3))
    with pytest.warns(UserWarning, match=r"1 series have fewer than 5 observed rows .* not forecast: 'tiny'$"):
        datamodule.predict_dataset()


@pytest.mark.parametrize(
    ("split", "rows"),
    [
        (Dates("2020-01-05 00:00", "2020-01-06 00:00", "2020-01-07 00:00"), [96, 120, 144]),
        (LastRows(val_size=10, test_size=6), [184, 194, 200]),  # the last rows
    ],
    ids=["by-timestamps", "by-sizes"],
)
def test_a_split_by_timestamps_or_sizes_ends_each_split_at_its_row(split, rows):
    assert row_numbers(frame_of_row_numbers(), split=split).split_rows.tolist() == [rows]


def test_a_split_is_recorded_as_its_class_and_arguments_and_rebuilt_from_them():
    """What a checkpoint holds (weights_only: no object), and what rebuilds the same rows from it."""
    datamodule = row_numbers(frame_of_row_numbers(), split=LastRows(val_size=10, test_size=6))
    recorded = datamodule.hparams["split"]
    assert recorded == {"class_path": "project.data.splits.LastRows", "init_args": {"val_size": 10, "test_size": 6}}
    parser = ArgumentParser()
    parser.add_subclass_arguments(Split, "split")
    rebuilt = parser.instantiate(parser.parse_object({"split": recorded})).split  # as a checkpoint's parser does
    assert row_numbers(frame_of_row_numbers(), split=rebuilt).split_rows.tolist() == [[184, 194, 200]]
    assert row_numbers(frame_of_row_numbers()).hparams["split"] is None  # the default Fractions()


def test_predict_forecasts_the_future_after_the_last_row():
    datamodule = row_numbers(frame_of_row_numbers())
    datamodule.setup("predict")
    batch = next(iter(datamodule.predict_dataloader()))
    assert batch["context"].shape == (1, 5, 2)
    assert (batch["context"] * batch["scale"] + batch["loc"])[0, :, 0].tolist() == [195, 196, 197, 198, 199]
    timestamps = datamodule.predict_dataset().target_timestamps(0)
    assert list(timestamps) == list(pd.date_range("2020-01-09 08:00", periods=3, freq="h"))


def test_every_test_window_knows_its_timestamps():
    frame = frame_of_row_numbers()
    datamodule = row_numbers(frame)
    windows = datamodule.split("test")
    assert len(windows) == 40 - 3 + 1
    for index in (0, len(windows) - 1):
        first_target_row = int(original(windows[index], "target")[0, 0])
        assert windows.target_timestamps(index)[0] == frame["time"].iloc[first_target_row]


def test_embedded_synthetic_data_needs_no_source():
    datamodule = WindowDataModule()
    assert datamodule.input_sizes.n_targets == 5
    assert len(datamodule.panel.values) == 10_000
    datamodule.setup("fit")
    batch = next(iter(datamodule.train_dataloader()))
    assert batch["context"].shape == (64, 12, 5)
    assert batch["target"].shape == (64, 12, 5)
    assert batch["future_covariates"].shape == (64, 24, 6)  # hour of day, day of week, day of year: sin and cos


def test_windowing_a_million_rows_allocates_about_the_series_not_the_windows():
    rows, n_features = 1_000_000, 5
    frame = pd.DataFrame(np.random.default_rng(0).normal(size=(rows, n_features)), columns=list("abcde"))
    datamodule = WindowDataModule(frame, context_length=96, horizon=96, split=Fractions(0.9, 0.05, 0.05))
    datamodule.setup("fit")
    assert datamodule.panel.values.nbytes == rows * n_features * 4  # the one matrix: ~20 MB
    for split in ("train", "val", "test"):
        windows = datamodule.split(split)
        assert windows.panel.values is datamodule.panel.values
        index_bytes = sum(getattr(windows, name).nbytes for name in ("first_target", "count", "cumulative"))
        assert index_bytes <= 64  # a few numbers per series, not N windows × 192 rows (~3.5 GB)


def test_etth1_loads_with_the_12_4_4_month_split_of_the_ltsf_benchmarks(etth1):
    datamodule = WindowDataModule(
        etth1,
        time_column="date",
        context_length=336,
        horizon=96,
        split=Dates(val_start="2017-06-26", test_start="2017-10-24", test_end="2018-02-21"),
        calendar_features=False,
    )
    datamodule.setup("fit")
    assert datamodule.input_sizes.n_targets == 7
    assert datamodule.target_names[-1] == "OT"
    assert datamodule.split_rows.tolist() == [[8640, 11520, 14400]]
    assert [len(datamodule.split(split)) for split in ("train", "val", "test")] == [8209, 2785, 2785]


def test_missing_values_can_be_filled():
    frame = frame_of_row_numbers(rows=60)
    frame.loc[10, "c0"] = np.nan
    frame.loc[20, "c1"] = np.inf
    frame.loc[0, "c1"] = np.nan
    carried = row_numbers(frame, fill_missing="ffill").panel.values
    assert (carried[10, 0], carried[20, 1], carried[0, 1]) == (9, 1019, 1001)
    interpolated = row_numbers(frame, fill_missing="interpolate").panel.values
    assert (interpolated[10, 0], interpolated[20, 1]) == (10, 1020)
    assert np.isfinite(interpolated).all()


def test_irregular_timestamps_are_reported():
    frame = frame_of_row_numbers().drop(index=[50, 51]).reset_index(drop=True)
    with pytest.warns(UserWarning, match=r"'time' is not regularly spaced at its frequency h: 2 missing steps"):
        row_numbers(frame)


@pytest.mark.parametrize("windows", [7, 10, 13])
@pytest.mark.parametrize("processes", [1, 2, 3, 4])
def test_the_training_order_shards_one_shuffle_padded_with_its_start(windows, processes):
    from project.data.sampling import TrainingOrder

    shards = [list(TrainingOrder(range(windows), seed=3, rank=r, world_size=processes)) for r in range(processes)]
    order = torch.randperm(windows, generator=torch.Generator().manual_seed(3), dtype=torch.int32).tolist()
    padded = order + order[: -windows % processes]
    assert {len(shard) for shard in shards} == {len(padded) // processes}
    assert [padded[r::processes] for r in range(processes)] == shards
    assert all(isinstance(index, int) for index in shards[0])
