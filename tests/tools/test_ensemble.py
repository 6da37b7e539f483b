"""Predict, test and backtest from several checkpoints at once (an optional tool: it goes with project/tools). The
members are the suite's trained panel checkpoints and copies of them whose biases are shifted, so that every member
forecasts differently without training another model."""

import functools
import io
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from project.tools import backtest, ensemble
from project.tools.checkpoint_commands import datamodule_from_checkpoint, load_checkpoint
from project.training.metrics import unscale
from project.training.predictions import ForecastWriter, forecast_frame
from tests.helpers import assert_close_in_float32, assert_refused_in_one_line, digests, quiet_trainer

SHIFTS = (0.0, 0.05, 0.1)  # added to every bias of the trained model: one member each


def members_of(trained: Path, folder: Path) -> list[Path]:
    """A member per shift, each in a run folder of its own (``<folder>/run<k>/checkpoints/last.ckpt``), as seeds' runs
    are: the trained checkpoint copied (shift 0) or with every bias shifted, read and written as plain tensors."""
    paths = []
    for position, shift in enumerate(SHIFTS):
        path = folder / f"run{position}" / "checkpoints" / "last.ckpt"
        path.parent.mkdir(parents=True)
        if shift == 0:
            shutil.copy(trained, path)
        else:
            checkpoint = torch.load(trained, weights_only=True)
            for name, value in checkpoint["state_dict"].items():
                if name.endswith(".bias"):
                    value += shift
            torch.save(checkpoint, path)
        paths.append(path)
    return paths


@pytest.fixture
def point_members(panel_run, tmp_path) -> list[Path]:
    return members_of(panel_run, tmp_path / "point")


@pytest.fixture
def quantile_members(quantile_panel_run, tmp_path) -> list[Path]:
    return members_of(quantile_panel_run, tmp_path / "quantile")


def member_predictions(path: Path, output: Path) -> pd.DataFrame:
    """The forecasts one member's ``predict`` writes, by the loop and writer the ensemble's goes through (and
    ``python -m project.cli predict``'s)."""
    checkpoint, model = load_checkpoint(path)
    writer = ForecastWriter(str(output))
    quiet_trainer(callbacks=[writer]).predict(model, datamodule_from_checkpoint(checkpoint, path))
    return pd.read_csv(output)


def printed_table(capsys) -> pd.DataFrame:
    """The table ``ensemble test`` printed last, from its header (``model …``) on."""
    lines = capsys.readouterr().out.splitlines()
    header = max(i for i, line in enumerate(lines) if line.split()[:1] == ["model"])
    return pd.read_csv(io.StringIO("\n".join(lines[header:])), sep=r"\s+")


def test_predict_writes_the_mean_of_the_members_own_forecasts_in_a_models_csv(point_members, tmp_path):
    output = tmp_path / "ensemble.csv"
    ensemble.main(["predict", "--ckpt_path", *map(str, point_members), "--output", str(output)])
    written = pd.read_csv(output)
    own = [member_predictions(path, tmp_path / f"member{k}.csv") for k, path in enumerate(point_members)]
    assert list(written.columns) == list(own[0].columns)  # the columns of one model's predict CSV
    assert len(written) == 36 * 14  # a window per series, a row per step
    keys = [column for column in written.columns if column != "sales"]
    for forecasts in own:
        pd.testing.assert_frame_equal(written[keys], forecasts[keys])
    assert not np.allclose(own[0]["sales"], own[2]["sales"])  # the members do forecast differently
    mean = sum(forecasts["sales"].to_numpy(np.float64) for forecasts in own) / len(own)
    assert_close_in_float32(written["sales"], mean)


def test_predict_with_distributions_reports_the_quantiles_of_the_members_pooled_paths(quantile_members, tmp_path):
    output = tmp_path / "ensemble.csv"
    ensemble.main(["predict", "--ckpt_path", *map(str, quantile_members), "--output", str(output)])
    written = pd.read_csv(output)
    # Again from each member's own sample paths: pooled, their quantiles, in original units.
    checkpoint, first = load_checkpoint(quantile_members[0])
    models = [first, *(load_checkpoint(path)[1] for path in quantile_members[1:])]
    datamodule = datamodule_from_checkpoint(checkpoint, quantile_members[0])
    datamodule.setup("predict")
    parts = {"window": [], "series": [], "point": [], "quantiles": []}
    levels = first.prediction_quantiles
    with torch.no_grad():
        for batch in datamodule.predict_dataloader():
            forecasts = [model.forecast(batch, datamodule.predict_horizon) for model in models]
            pool = torch.cat([forecast.samples for forecast in forecasts], dim=1)  # (N, 3 × 20, T, F)
            assert pool.shape[1] == 3 * 20
            quantiles = torch.quantile(pool, torch.tensor(levels), dim=1).permute(1, 2, 3, 0)
            point = sum(forecast.point for forecast in forecasts) / len(forecasts)
            loc, scale = batch["loc"], batch["scale"]
            parts["quantiles"].append(unscale(quantiles, loc.unsqueeze(-1), scale.unsqueeze(-1)))
            parts["point"].append(unscale(point, loc, scale))
            parts["window"].append(batch["window"])
            parts["series"].append(batch["series"])
    expected = forecast_frame(datamodule, {key: torch.cat(values) for key, values in parts.items()}, levels)
    assert list(written.columns) == list(expected.columns)
    assert [f"sales_q{level:g}" for level in levels] == [c for c in written.columns if c.startswith("sales_q")]
    numbers = [column for column in written.columns if column.startswith("sales")]
    assert_close_in_float32(written[numbers].to_numpy(), expected[numbers].to_numpy())


def test_predict_writes_into_the_first_runs_folder_by_default_and_never_over_an_existing_file(point_members, capsys):
    arguments = ["predict", "--ckpt_path", *map(str, point_members[:2])]
    ensemble.main(arguments)
    written = point_members[0].parents[1] / "ensemble_predictions.csv"
    before = digests(written)
    assert assert_refused_in_one_line(lambda: ensemble.main(arguments), capsys) == (
        f"error: {written} already exists; choose another output path or pass --overwrite to replace it"
    )
    assert digests(written) == before
    ensemble.main([*arguments, "--overwrite"])


def test_test_prints_each_members_scores_and_the_ensembles(point_members, capsys):
    ensemble.main(["test", "--ckpt_path", *map(str, point_members)])
    table = printed_table(capsys)
    assert table["model"].tolist() == [*map(str, point_members), "ensemble"]
    assert {"mse", "mae", "smape", "mae_original_units"} <= set(table.columns)
    members, mean = table.iloc[:3], table.iloc[3]
    # The squared error of a mean of forecasts is at most the mean of their squared errors (convexity), value by
    # value; and the members' scores differ, so the ensemble is no single member.
    assert mean["mse"] <= members["mse"].mean()
    assert members["mse"].nunique() == 3


def test_a_backtest_of_several_checkpoints_scores_the_mean_of_the_members_backtests(point_members, tmp_path):
    arguments = ["--origins", "2"]
    for position, path in enumerate(point_members):
        backtest.main(["--ckpt_path", str(path), *arguments, "--output", str(tmp_path / f"member{position}")])
    backtest.main(["--ckpt_path", *map(str, point_members), *arguments, "--output", str(tmp_path / "ensemble")])
    assert {p.name for p in (tmp_path / "ensemble").iterdir()} == {"metrics.csv", "forecasts.csv", "backtest.png"}
    forecasts = pd.read_csv(tmp_path / "ensemble" / "forecasts.csv")
    own = [pd.read_csv(tmp_path / f"member{position}" / "forecasts.csv") for position in range(3)]
    mean = sum(member["sales"].to_numpy(np.float64) for member in own) / len(own)
    assert_close_in_float32(forecasts["sales"], mean)
    # The metrics are those of the ensemble's forecasts, recomputed from the table in float64.
    metrics = pd.read_csv(tmp_path / "ensemble" / "metrics.csv").set_index("origin")
    errors = forecasts["sales"].to_numpy(np.float64) - forecasts["sales_actual"].to_numpy(np.float64)
    assert_close_in_float32(metrics.loc["all", "mae_original_units"], np.abs(errors).mean())
    for origin, part in forecasts.groupby("origin"):
        error = part["sales"].to_numpy(np.float64) - part["sales_actual"].to_numpy(np.float64)
        assert_close_in_float32(metrics.loc[str(origin), "mae_original_units"], np.abs(error).mean())


def test_a_backtest_of_several_checkpoints_writes_into_the_first_runs_folder(point_members):
    backtest.main(["--ckpt_path", *map(str, point_members), "--origins", "1"])
    folder = point_members[0].parents[1] / "ensemble_backtest"
    assert {p.name for p in folder.iterdir()} == {"metrics.csv", "forecasts.csv", "backtest.png"}


def with_scaling_shifted(path: Path, folder: Path) -> Path:
    """A copy of the checkpoint whose data module recorded other scaling statistics (trained on other rows)."""
    checkpoint = torch.load(path, weights_only=True)
    scaler = checkpoint["WindowDataModule"]["scaler"]
    scaler["loc"] = [[value + 1 for value in row] for row in scaler["loc"]]
    copy = folder / "other_scaling.ckpt"
    torch.save(checkpoint, copy)
    return copy


def command_line(command: str, paths: list, output: Path, *options: str) -> tuple:
    """The main function and arguments of ``command`` (``predict``, ``test`` or ``backtest``) of ``paths``, writing
    to ``output`` (a CSV for predict, a folder for backtest; test writes nothing)."""
    if command == "backtest":
        return backtest.main, ["--ckpt_path", *map(str, paths), "--output", str(output), *options]
    written = ["--output", str(output)] if command == "predict" else []
    return ensemble.main, [command, "--ckpt_path", *map(str, paths), *written, *options]


@pytest.mark.parametrize("command", ["predict", "test", "backtest"])
def test_members_that_do_not_fit_together_are_refused_in_one_line(
    command, point_members, quantile_members, tmp_path, capsys
):
    first, second = point_members[:2]
    missing, other_scaling = tmp_path / "missing.ckpt", with_scaling_shifted(second, tmp_path)
    refusals = [
        ([first, missing], (), f"{missing}: checkpoint not found"),
        ([first, first], (), f"--ckpt_path: {first} is given twice; each member of an ensemble is one checkpoint"),
        (
            [first, other_scaling],
            (),
            f"{other_scaling} was trained on other data than {first} (in brackets): scaler (other scaling "
            "statistics); an ensemble's members read the same batches",
        ),
        (
            [first, quantile_members[0]],
            (),
            f"{quantile_members[0]} does not forecast what {first} does: has_distribution=True ({first}: False); "
            "an ensemble's members forecast the same values from the same windows",
        ),
    ]
    if command == "backtest":  # where one checkpoint is a backtest of its own
        refusals.append(
            (
                [first, second],
                ("--refit",),
                "--refit takes one checkpoint; got 2: a refit trains a fresh model from seed 0, so every member of an "
                "ensemble of seeds would be the same model. Backtest each with --refit",
            )
        )
    else:
        refusals.append(([first], (), f"--ckpt_path: an ensemble needs at least two checkpoints; got 1 ({first})"))
    before = digests(tmp_path)
    output = tmp_path / "output"
    for paths, options, message in refusals:
        main, arguments = command_line(command, paths, output, *options)
        assert assert_refused_in_one_line(functools.partial(main, arguments), capsys) == f"error: {message}"
        assert not output.exists()
    assert digests(tmp_path) == before  # nothing written, nothing changed


def test_an_output_that_would_replace_any_member_is_refused(point_members, capsys):
    before = digests(*point_members)
    main, arguments = command_line("predict", point_members, point_members[2], "--overwrite")
    assert assert_refused_in_one_line(lambda: main(arguments), capsys) == (
        f"error: {point_members[2]}: the output would replace the input {point_members[2]}; choose another output path"
    )
    assert digests(*point_members) == before
