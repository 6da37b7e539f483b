"""Many series with covariates: windows within a series, aligned covariates, per-series scaling, the cache."""

import warnings

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

from project.data.datamodule import WindowDataModule
from project.training import TeacherForcing
from tests.helpers import adamw, quiet_trainer, tiny_module, warmup_cosine

LENGTHS = {"a": 30, "b": 22, "c": 41}


def encoded_panel(lengths=LENGTHS, start="2021-03-01") -> pd.DataFrame:
    """Three series of different lengths and start dates whose value is 1000 × series number + row: every value
    says which series and which row it comes from. ``known`` is a future covariate equal to the value plus 0.5."""
    frames = []
    for number, (name, length) in enumerate(lengths.items(), start=1):
        rows = np.arange(length)
        frames.append(
            pd.DataFrame(
                {
                    "series": name,
                    "time": pd.date_range(start, periods=length, freq="D") + pd.Timedelta(days=3 * number),
                    "value": 1000.0 * number + rows,
                    "known": 1000.0 * number + rows + 0.5,
                }
            )
        )
    return pd.concat(frames, ignore_index=True).sort_values(["time", "series"])  # series interleaved: fine


def panel_module(frame=None, **overrides) -> WindowDataModule:
    arguments = dict(
        time_column="time",
        id_columns=["series"],
        target_columns=["value"],
        future_covariates=["known"],
        calendar_features=False,
        context_length=4,
        horizon=3,
        scaling="none",
    )
    return WindowDataModule(encoded_panel() if frame is None else frame, **{**arguments, **overrides})


def test_windows_of_three_series_match_a_hand_computed_example_and_never_mix_series():
    datamodule = panel_module(stride=1)
    # 70/10/20% of each series' rows, rounded: a 21/3/6, b 15/3/4, c 29/4/8.
    assert datamodule.split_rows.tolist() == [[21, 24, 30], [15, 18, 22], [29, 33, 41]]
    windows = datamodule.split("train")
    # Training windows: targets within the training rows, contexts from row 0 on: 21 - 7 + 1 = 15, 9 and 23.
    assert windows.count.tolist() == [15, 9, 23]
    first_b = windows[15]
    assert first_b["context"][:, 0].tolist() == [2000, 2001, 2002, 2003]
    assert first_b["target"][:, 0].tolist() == [2004, 2005, 2006]
    # Validation windows: targets in rows [21, 24) of a, so contexts reach back into the training rows.
    assert datamodule.split("val")[0]["context"][:, 0].tolist() == [1017, 1018, 1019, 1020]
    for split in ("train", "val", "test"):
        windows = datamodule.split(split)
        for index in range(len(windows)):
            item = windows[index]
            values = torch.cat([item["context"], item["target"]])[:, 0]
            series, row = values // 1000, values % 1000
            assert (series == series[0]).all(), f"{split} window {index} mixes series"
            assert (row.diff() == 1).all(), f"{split} window {index} is not consecutive rows"
            assert series[0] == item["series"] + 1


def test_decoder_step_j_sees_the_future_covariates_of_time_t_plus_j():
    datamodule = panel_module()
    for index in range(len(datamodule.split("train"))):
        item = datamodule.split("train")[index]
        # future_covariates covers the context then the horizon: row S + j belongs to target step j.
        torch.testing.assert_close(item["future_covariates"][4:, 0], item["target"][:, 0] + 0.5, rtol=0, atol=0)
        torch.testing.assert_close(item["future_covariates"][:4, 0], item["context"][:, 0] + 0.5, rtol=0, atol=0)


def test_a_model_learns_a_target_it_can_only_know_from_an_aligned_future_covariate():
    """The target is white noise that is also given, at the same time step, as a known covariate."""
    rng = np.random.default_rng(0)
    frames = []
    for name in ("x", "y"):
        noise = rng.normal(size=600)
        frames.append(pd.DataFrame({"series": name, "value": noise, "known": noise}))
    frame = pd.concat(frames, ignore_index=True)
    L.seed_everything(0)
    datamodule = WindowDataModule(
        frame,
        id_columns=["series"],
        target_columns=["value"],
        future_covariates=["known"],
        context_length=8,
        horizon=4,
        batch_size=32,
        scaling="none",
    )
    module = tiny_module(
        n_targets=1,
        n_future_covariates=1,
        optimizer=adamw(1e-2),
        lr_scheduler=warmup_cosine(5),
        regime=TeacherForcing(),
    )
    quiet_trainer(max_steps=150, limit_val_batches=0).fit(module, datamodule)
    validated = quiet_trainer().validate(module, datamodule, verbose=False)[0]
    assert validated["val/mse"] < 0.05  # white noise: 1.0 without the covariate (or with a misaligned one)


def test_per_series_scaling_uses_each_series_training_rows_and_round_trips_through_the_checkpoint():
    frame = encoded_panel()
    trained = panel_module(frame, scaling="per_series")
    trained.setup("fit")
    for series, (name, _) in enumerate(LENGTHS.items()):
        rows = frame[frame["series"] == name].sort_values("time")["value"].to_numpy()
        training_rows = rows[: trained.split_rows[series, 0]]
        np.testing.assert_allclose(trained.scaler.loc[series, 0], training_rows.mean())
        np.testing.assert_allclose(trained.scaler.scale[series, 0], training_rows.std())
    changed = frame.copy()
    changed["value"] *= 7  # would fit other statistics
    restored = panel_module(changed, scaling="per_series")
    restored.load_state_dict(trained.state_dict())
    np.testing.assert_array_equal(restored.scaler.loc, trained.scaler.loc)
    np.testing.assert_array_equal(restored.scaler.scale, trained.scaler.scale)


def test_mean_abs_scaling_divides_each_series_by_its_mean_absolute_training_value_and_round_trips():
    frame = encoded_panel()
    frame.loc[frame["series"] == "b", "value"] = 0.0  # only zeros: the mean absolute value of every series' rows
    frame.loc[frame["series"] == "c", "value"] = 5.0 + 1e-9 * np.arange((frame["series"] == "c").sum())
    trained = panel_module(frame, scaling="mean_abs")
    trained.setup("fit")
    training = [
        frame[frame["series"] == name].sort_values("time")["value"].to_numpy()[: trained.split_rows[series, 0]]
        for series, name in enumerate(LENGTHS)
    ]
    np.testing.assert_array_equal(trained.scaler.loc[:, 0], 0.0)
    np.testing.assert_allclose(trained.scaler.scale[0, 0], np.abs(training[0]).mean())
    all_rows = np.concatenate(training)
    np.testing.assert_allclose(trained.scaler.scale[1, 0], np.abs(all_rows).mean())  # zeros: all series' value
    np.testing.assert_allclose(trained.scaler.scale[2, 0], 5.0)  # near constant: finite, where std would be ~1e-8
    restored = panel_module(frame.assign(value=frame["value"] * 7), scaling="mean_abs")
    restored.load_state_dict(trained.state_dict())
    np.testing.assert_array_equal(restored.scaler.scale, trained.scaler.scale)


def test_series_too_short_for_a_window_are_skipped_with_one_warning():
    with pytest.warns(UserWarning, match=r"1 of 4 series have fewer than context_length \+ horizon = 7 training rows"):
        datamodule = panel_module(encoded_panel({**LENGTHS, "d": 8}))
    assert datamodule.split("train").count.tolist()[-1] == 0


def test_an_unseen_category_at_predict_time_uses_the_unknown_embedding_with_a_warning():
    frame = encoded_panel()
    frame["shop"] = frame["series"].map({"a": "north", "b": "south", "c": "north"})
    trained = panel_module(frame, static_covariates=["shop"])
    assert trained.input_sizes.static_cardinalities == (2,)
    trained.setup("fit")
    frame["shop"] = frame["series"].map({"a": "north", "b": "east", "c": "south"})
    later = panel_module(frame, static_covariates=["shop"])
    with pytest.warns(
        UserWarning, match=r"static covariate 'shop' has values the model never saw in training \(east\)"
    ):
        later.load_state_dict(trained.state_dict())
    assert later.panel.static_categorical[:, 0].tolist() == [1, 0, 2]  # north, unknown, south in training's codes


def test_a_memory_mapped_panel_serves_identical_batches_to_two_workers(tmp_path):
    path = tmp_path / "panel.csv"
    encoded_panel().to_csv(path, index=False)
    in_memory = panel_module(path, cache_dir=None, batch_size=2)
    mapped = panel_module(path, cache_dir=str(tmp_path / "cache"), batch_size=2, num_workers=2)
    assert isinstance(mapped.panel.values, np.memmap)
    assert len(list((tmp_path / "cache").iterdir())) == 1
    again = panel_module(path, cache_dir=str(tmp_path / "cache"))  # read from the cache, not the CSV
    np.testing.assert_array_equal(again.panel.values, in_memory.panel.values)
    for datamodule in (in_memory, mapped):
        datamodule.setup("fit")
    batches = [list(datamodule.val_dataloader()) for datamodule in (in_memory, mapped)]
    assert len(batches[0]) == len(batches[1]) > 1
    for expected, served in zip(*batches):
        for key in expected:
            torch.testing.assert_close(served[key], expected[key], rtol=0, atol=0)


def test_future_rows_are_not_training_data_and_feed_predict():
    frame = encoded_panel()
    future = frame.groupby("series").tail(1).copy()
    future["time"] += pd.Timedelta(days=1)
    future["value"] = np.nan
    for step in range(3):
        shifted = future.copy()
        shifted["time"] += pd.Timedelta(days=step)
        shifted["known"] += 1 + step
        frame = pd.concat([frame, shifted])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # future rows are not missing data
        datamodule = panel_module(frame)
    assert datamodule.panel.observed.tolist() == list(LENGTHS.values())
    datamodule.setup("predict")
    batch = next(iter(datamodule.predict_dataloader()))
    assert batch["future_covariates"].shape == (3, 7, 1)
    # The horizon's known covariates continue those of the context: last context row + 1, + 2, + 3.
    last_context = batch["future_covariates"][:, 3, 0]
    torch.testing.assert_close(batch["future_covariates"][:, 4:, 0], last_context[:, None] + torch.tensor([1, 2, 3.0]))
