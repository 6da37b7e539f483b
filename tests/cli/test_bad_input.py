"""Every bad input a user or a hostile file can give: one line ``error: …`` naming what was expected, exit code 2,
no traceback, nothing overwritten. One table, so the count is visible and grows."""

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch
from jsonargparse import get_loader

from project.cli import datamodule_from_config
from tests.helpers import BASE, SMALL_MODEL, assert_refused_in_one_line, cli, frame_of_row_numbers, refusal_of


def write(frame: pd.DataFrame, path: Path) -> str:
    frame.to_csv(path, index=False)
    return str(path)


def file(path: Path, content: str | bytes) -> str:
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return str(path)


def with_value(frame: pd.DataFrame, row: int, column: str, value) -> pd.DataFrame:
    frame = frame.copy()
    if not isinstance(value, float):
        frame[column] = frame[column].astype(object)
    frame.loc[row, column] = value
    return frame


def wide_table(columns: int) -> str:
    """A CSV of three rows and ``columns`` numeric columns."""
    return "\n".join([",".join(f"c{i}" for i in range(columns)), *[",".join(["1.5"] * columns)] * 3]) + "\n"


def data(tmp: Path, frame: pd.DataFrame | None = None, *extra: str, name: str = "series.csv") -> list[str]:
    """Arguments for a fit on ``frame`` (written as a CSV) with a time column 'time'."""
    frame = frame_of_row_numbers() if frame is None else frame
    return [
        f"--data.source={write(frame, tmp / name)}",
        "--data.time_column=time",
        "--data.context_length=5",
        "--data.horizon=3",
        "--data.calendar_features=false",
        *extra,
    ]


def panel(tmp: Path, change=None, *extra: str) -> list[str]:
    frames = []
    for store in ("a", "b"):
        frame = frame_of_row_numbers(60, 1)
        frame["store"], frame["region"] = store, {"a": "north", "b": "south"}[store]
        frames.append(frame)
    frame = pd.concat(frames, ignore_index=True)
    frame = change(frame) if change else frame
    return data(tmp, frame, "--data.id_columns=[store]", "--data.target_columns=[c0]", *extra)


def split(name: str, arguments: str) -> str:
    """``--data.split`` as a flow mapping: the class ``project.data.<name>`` with its ``arguments``."""
    return f"--data.split={{class_path: project.data.{name}, init_args: {{{arguments}}}}}"


DATA_CASES = {  # name → (data arguments given the test folder, expected message as a regex)
    "wrong suffix": (lambda t, c: [f"--data.source={__file__}"], r"expected a .csv or .parquet file; got '.py'"),
    "empty file": (lambda t, c: [f"--data.source={file(t / 'e.csv', '')}"], r"the file is empty"),
    "header only": (lambda t, c: [f"--data.source={file(t / 'h.csv', 'time,a' + chr(10))}"], r"the table has no rows"),
    "a table too wide": (
        lambda t, c: [f"--data.source={file(t / 'wide.csv', wide_table(10_001))}"],
        r"wide.csv: 10001 columns; a table holds at most 10000$",
    ),
    "unknown column": (lambda t, c: data(t, None, "--data.target_columns=[c0, nope]"), r"column 'nope' not found"),
    "unknown time column": (lambda t, c: [*data(t), "--data.time_column=when"], r"column 'when' not found"),
    "non-numeric target": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 3, "c1", "oops"), "--data.target_columns=[c0, c1]"),
        r"column 'c1' must be numeric; got dtype (object|str); row 3 has 'oops'",
    ),
    "column dropped silently": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 7, "c1", "-")),
        r"column 'c1' is numeric except row 7 \('-'\); clean it, or name the columns to forecast in target_columns",
    ),
    "overflows float32": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 9, "c0", 1e39)),
        r"column 'c0' has 1e\+39 at row 9, beyond float32's range",
    ),
    "bad timestamp": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 4, "time", "yesterday")),
        r"column 'time' must hold timestamps in one format and time zone: time data \"yesterday\"",
    ),
    "mixed time-zone offsets": (
        lambda t, c: data(
            t,
            frame_of_row_numbers().assign(
                time=[f"2024-03-30 {h % 24:02d}:00:00+0{1 + (h >= 30)}:00" for h in range(200)]
            ),
        ),
        r"column 'time' must hold timestamps in one format and time zone: Mixed timezones detected",
    ),
    "duplicate timestamps": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 5, "time", "2020-01-01 04:00:00")),
        r"column 'time' has duplicate timestamps; row 5 repeats 2020-01-01 04:00:00",
    ),
    "several series without their id columns": (
        lambda t, c: panel(t, None, "--data.id_columns=null"),
        r"row 60 \(2020-01-01 00:00:00\) comes before row 59 \(2020-01-03 11:00:00\); several series in one table\? "
        r"name the columns that identify them in id_columns$",
    ),
    "the embedded panel without its id columns": (
        lambda t, c: ["--data.synthetic=panel"],
        r"^(data\.)?synthetic panel holds 36 series, one per store and product; set id_columns=\[store, product\]",
    ),
    "unsorted timestamps": (
        lambda t, c: data(t, frame_of_row_numbers().iloc[[0, 2, 1, *range(3, 200)]]),
        r"must be sorted in increasing time; row 2 \(2020-01-01 01:00:00\) comes before row 1",
    ),
    "too few rows": (lambda t, c: data(t, frame_of_row_numbers(rows=10)), r"has 10 rows; .* need at least .* = 14"),
    "empty validation split": (
        lambda t, c: data(t, None, split("Fractions", "train: 0.9, val: 0.01, test: 0.09")),
        r"the val split \(fractions 0.9/0.01/0.09\) has 2 of 200 rows; it needs at least 3",
    ),
    "fractions above one": (
        lambda t, c: data(t, None, split("Fractions", "train: 0.8, val: 0.2, test: 0.2")),
        r"must be at most 1; got 0.8 \+ 0.2 \+ 0.2 = 1.2",
    ),
    "zero fraction": (
        lambda t, c: data(t, None, split("Fractions", "test: 0.0")),
        r'split.init_args.test": Not of type Fraction',
    ),
    "a date that is not one": (
        lambda t, c: data(
            t,
            None,
            split("Dates", "val_start: soon, test_start: 2020-01-03"),
        ),
        r"val_start must be a date or timestamp; got 'soon'",
    ),
    "zero context": (
        lambda t, c: data(t, None, "--data.context_length=0"),
        r'data.context_length": Not of type PositiveInt',
    ),
    "negative horizon": (
        lambda t, c: data(t, None, "--data.horizon=-2"),
        r'data.horizon": Not of type PositiveInt: -2',
    ),
    "date split without time column": (
        lambda t, c: [
            *data(t),
            "--data.time_column=null",
            split("Dates", "val_start: 2020-01-02, test_start: 2020-01-03"),
        ],
        r"a split by dates \(val_start, test_start, test_end\) needs time_column",
    ),
    "dates out of order": (
        lambda t, c: data(
            t,
            None,
            split("Dates", "val_start: 2020-01-03, test_start: 2020-01-02"),
        ),
        r"val_start=2020-01-03 must be before test_start=2020-01-02",
    ),
    "missing id column": (lambda t, c: panel(t, None, "--data.id_columns=[shop]"), r"column 'shop' not found"),
    "static covariate that varies": (
        lambda t, c: panel(t, lambda f: with_value(f, 70, "region", "west"), "--data.static_covariates=[region]"),
        r"static covariate 'region' must be constant within each series; it changes from 'south' to 'west' at row "
        r"70 in series 'b'",
    ),
    "covariate also a target": (
        lambda t, c: data(t, None, "--data.target_columns=[c0, c1]", "--data.past_covariates=[c1]"),
        r"column 'c1' is listed as target_columns and as past_covariates; give each column one role",
    ),
}
# What the CLI adds: exit code 2, one line, nothing overwritten. A few data cases check that the data's own errors
# arrive that way too; the others are raised by WindowDataModule alone and tested on it directly (faster).
CLI_CASES = {  # name → (arguments given the test folder and a trained checkpoint, expected message as a regex)
    "missing file": (lambda t, c: ["--data.source=no/such.csv"], r"^error: no/such.csv: data file not found$"),
    "zero stride": (
        lambda t, c: data(t, None, "--data.stride=0"),
        r'^error: Parser key "data.stride": Not of type PositiveInt: 0 does not conform to restriction v>0$',
    ),
    "nan": (
        lambda t, c: data(t, with_value(frame_of_row_numbers(), 17, "c1", np.nan)),
        r"^error: .*column 'c1' has a missing or infinite value at row 17; set fill_missing",
    ),
    "duplicate timestamps in a series": (
        lambda t, c: panel(t, lambda f: with_value(f, 65, "time", "2020-01-01 04:00:00")),
        r"^error: .*duplicate timestamps in series 'b'; row 65 repeats 2020-01-01 04:00:00",
    ),
    "d_model not divisible by nhead": (
        lambda t, c: ["--model.network.init_args.d_model=30", "--model.network.init_args.nhead=4"],
        r"d_model must be divisible by nhead; got d_model=30, nhead=4",
    ),
    "bptt without the rollout's dropout": (
        lambda t, c: ["--model.regime.gradient=bptt", "--model.regime.rollout_dropout=false"],
        r"FreeRunning: rollout_dropout=false applies to the no-grad rollout of gradient=detach",
    ),
    "calendar features without a time column": (
        lambda t, c: [*data(t), "--data.time_column=null", "--data.calendar_features=true"],
        r"calendar_features=true derives features from the timestamps; set time_column",
    ),
    "truncated checkpoint": (
        lambda t, c: [f"--ckpt_path={file(t / 'cut.ckpt', c.read_bytes()[:5000])}"],
        r"cut.ckpt: cannot read the checkpoint; is it truncated or not a checkpoint\?",
    ),
    "a CSV as checkpoint": (
        lambda t, c: [f"--ckpt_path={write(frame_of_row_numbers(), t / 'x.ckpt')}"],
        r"x.ckpt: cannot read the checkpoint",
    ),
    "a plain torch.save dict as checkpoint": (
        lambda t, c: [f"--ckpt_path={saved({'weights': torch.ones(2)}, t / 'p.ckpt')}"],
        r"p.ckpt: not a checkpoint written by `python -m project.cli fit`",
    ),
    "a checkpoint of non-finite weights": (
        lambda t, c: [f"--ckpt_path={poisoned(c, t / 'nan.ckpt')}"],
        r"nan.ckpt: the checkpoint holds non-finite weights",
    ),
    "fit into an existing run folder": (
        lambda t, c: [f"--trainer.logger.init_args.save_dir={c.parents[3]}", "--trainer.logger.init_args.version=0"],
        r"version_0 already holds a run; choose another trainer.logger.init_args.version, or resume it",
    ),
}


def saved(state: dict, path: Path) -> Path:
    torch.save(state, path)
    return path


def poisoned(checkpoint: Path, path: Path) -> Path:
    state = torch.load(checkpoint, weights_only=False)
    next(iter(state["state_dict"].values())).fill_(float("nan"))
    return saved(state, path)


@pytest.fixture
def checkpoint(trained_run) -> Path:
    return trained_run / "checkpoints" / "last.ckpt"


def test_the_tables_count_every_case():
    assert len(DATA_CASES) + len(CLI_CASES) >= 35


read_as_the_cli_does = get_loader("yaml")  # jsonargparse's YAML: a date stays the string it was given


def data_settings(arguments: list[str]) -> dict:
    """``--data.name=value`` arguments as the WindowDataModule settings the CLI would pass (values read as YAML)."""
    settings = {}
    for argument in arguments:
        name, value = argument.removeprefix("--data.").split("=", 1)
        settings[name] = read_as_the_cli_does(value)
    return settings


@pytest.mark.parametrize("case", DATA_CASES)
def test_bad_data_is_refused_in_one_line_by_the_datamodule(case, tmp_path):
    arguments, message = DATA_CASES[case]
    refused = refusal_of(lambda: datamodule_from_config(data_settings(arguments(tmp_path, None))).setup("fit"))
    # Built from Python, an argument is named as the class names it; the CLI names it as a config does (data.…).
    assert re.search(message.removeprefix("data."), refused), refused


@pytest.mark.fast_cases(5)
@pytest.mark.parametrize("case", CLI_CASES)
def test_bad_input_ends_in_one_line_and_exit_code_2(case, tmp_path, checkpoint, capsys):
    arguments, message = CLI_CASES[case]
    subcommand = "validate" if "checkpoint" in case and "fit into" not in case else "fit"
    before = {path: path.stat().st_mtime_ns for path in checkpoint.parent.parent.rglob("*") if path.is_file()}
    code = cli(subcommand, "--config", BASE, *SMALL_MODEL, *arguments(tmp_path, checkpoint), "--trainer.max_steps=1")
    assert re.search(message, assert_refused_in_one_line(code, capsys))
    after = {path: path.stat().st_mtime_ns for path in checkpoint.parent.parent.rglob("*") if path.is_file()}
    assert after == before  # nothing the earlier run wrote was touched


def test_a_bad_split_date_names_the_setting_and_the_checkpoint(checkpoint, tmp_path, capsys):
    dates = '{class_path: project.data.Dates, init_args: {val_start: "x", test_start: "2020-01-14"}}'
    refused = assert_refused_in_one_line(cli("fit", "--config", BASE, f"--data.split={dates}"), capsys)
    assert refused == "error: val_start must be a date or timestamp; got 'x'"
    recorded = torch.load(checkpoint, weights_only=True)
    recorded["datamodule_hyper_parameters"]["split"] = {
        "class_path": "project.data.Dates",
        "init_args": {"val_start": "not-a-date", "test_start": "2020-01-14"},
    }
    path = saved(recorded, tmp_path / "dated.ckpt")
    code = cli("predict", f"--ckpt_path={path}", f"--predictions.output={tmp_path / 'out.csv'}")
    assert assert_refused_in_one_line(code, capsys) == (
        f"error: {path}: val_start must be a date or timestamp; got 'not-a-date'"
    )
