"""Many series in one array: a long-format table becomes one float32 matrix, per-series offsets and static values.

Series after series in ``values``, so a window is a slice of consecutive rows, never a copy made ahead of time. With
a ``cache_dir`` the matrix is written once to a ``.npy`` file and memory-mapped, so DataLoader workers and DDP ranks
share its pages instead of holding copies.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
from lightning.pytorch.utilities import rank_zero_info
from pandas.tseries.frequencies import to_offset
from pandas.tseries.offsets import BaseOffset

from project.data.calendar import calendar_feature_names, calendar_features, infer_frequency
from project.data.table import (
    check_columns_exist,
    check_float32_range,
    check_numeric,
    is_numeric,
    numeric_columns,
    parse_timestamps,
    read_table,
)
from project.errors import InputError

FillMissing = Literal["none", "ffill", "interpolate"]
CACHE_VERSION = 1


@dataclass
class ColumnRoles:
    """What each column of the table is for. ``calendar`` lists the derived calendar features."""

    targets: list[str]
    past: list[str] = field(default_factory=list)
    future: list[str] = field(default_factory=list)
    calendar: list[str] = field(default_factory=list)
    static_categorical: list[str] = field(default_factory=list)
    static_real: list[str] = field(default_factory=list)
    ids: list[str] = field(default_factory=list)

    @property
    def scaled_columns(self) -> int:
        """Leading columns of ``values`` that are standardised (the calendar is already in [-1, 1])."""
        return len(self.targets) + len(self.past) + len(self.future)


@dataclass
class Panel:
    """The rows of every series in one matrix, and what is constant per series. ``values`` (rows, columns) float32,
    columns in the order targets, past and future covariates, calendar; rows of series s are
    ``series_start[s]:series_start[s + 1]``, of which the first ``observed[s]`` have targets; the rest are future rows,
    empty targets with the known future covariates that ``predict`` reads. ``timestamps`` (rows,) datetime64[ns] or
    None (in UTC when ``timezone``). ``ids`` has one row per series (no columns for a single series);
    ``static_categorical`` (series, C) holds codes into ``categories`` starting at 1 (0 is "unknown"); ``static_real``
    (series, C) raw numbers."""

    values: np.ndarray
    series_start: np.ndarray
    observed: np.ndarray
    timestamps: np.ndarray | None
    ids: pd.DataFrame
    static_categorical: np.ndarray
    categories: list[list[str]]
    static_real: np.ndarray
    roles: ColumnRoles
    frequency: str | None
    timezone: str | None = None

    @property
    def n_series(self) -> int:
        return len(self.series_start) - 1

    @property
    def offset(self) -> BaseOffset | None:
        return None if self.frequency is None else to_offset(self.frequency)

    def rows(self, series: int) -> slice:
        return slice(int(self.series_start[series]), int(self.series_start[series + 1]))

    def series_timestamps(self, series: int) -> pd.DatetimeIndex | None:
        if self.timestamps is None:
            return None
        index = pd.DatetimeIndex(self.timestamps[self.rows(series)])
        return index if self.timezone is None else index.tz_localize("UTC").tz_convert(self.timezone)

    def describe_series(self, series: int) -> str:
        return series_name(self.ids, series)

    # Pickling for DataLoader workers started with "spawn": a memory-mapped matrix travels as its path, so each
    # worker maps the same file instead of receiving a copy.
    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        if isinstance(self.values, np.memmap) and self.values.filename:
            state["values"] = ("memmap", self.values.filename)
        return state

    def __setstate__(self, state: dict) -> None:
        if isinstance(state["values"], tuple):
            state["values"] = np.load(state["values"][1], mmap_mode="r")
        self.__dict__.update(state)


@dataclass(frozen=True)
class PanelSettings:
    """How to read a table into a ``Panel``; every field is a ``WindowDataModule`` argument of the same name."""

    time_column: str | None = None
    id_columns: tuple[str, ...] = ()
    target_columns: tuple[str, ...] = ()
    past_covariates: tuple[str, ...] = ()
    future_covariates: tuple[str, ...] = ()
    static_covariates: tuple[str, ...] = ()
    calendar_features: bool = True
    fill_missing: FillMissing = "none"


def build_panel(frame: pd.DataFrame, settings: PanelSettings, source_name: str) -> Panel:
    """Check ``frame`` and turn it into a ``Panel``; every problem is an ``InputError`` of one line."""
    roles = _column_roles(frame, settings, source_name)
    rows = _group_rows(frame, roles.ids, source_name)
    order, series_start = rows.order, rows.series_start
    timestamps, timezone = None, None
    if settings.time_column is not None:
        # In the data's own zone: the calendar is the local one.
        index = pd.DatetimeIndex(parse_timestamps(source_name, frame, settings.time_column))[order].as_unit("ns")
        timezone = None if index.tz is None else str(index.tz)
        # Stored as UTC without a zone, so that the matrix and its cache hold plain datetime64 values.
        timestamps = index.tz_convert(None).to_numpy() if timezone else index.to_numpy()
        _check_increasing(timestamps, rows, settings.time_column)

    numeric_names = [*roles.targets, *roles.past, *roles.future]
    numeric = frame[numeric_names].to_numpy(dtype=np.float64)
    check_float32_range(source_name, numeric_names, numeric, rows.series_of_table_row)
    numeric = numeric[order]
    # Each series' rows up to its last row with a target; the rest are future rows. No series is empty.
    ends = np.where(np.isfinite(numeric[:, : len(roles.targets)]).any(axis=1), np.arange(1, len(numeric) + 1), 0)
    observed = np.zeros(len(series_start) - 1, dtype=np.int64)
    if len(numeric):  # reduceat needs rows; an empty table is refused by the row counts, in one line
        observed = np.maximum(np.maximum.reduceat(ends, series_start[:-1]) - series_start[:-1], 0).astype(np.int64)
    numeric = _fill_missing(numeric, observed, numeric_names, rows, settings.fill_missing)

    frequency, calendar = None, np.zeros((len(numeric), 0), dtype=np.float32)
    if timestamps is not None:
        per_series = [index[series_start[s] : series_start[s + 1]] for s in range(len(series_start) - 1)]
        offset = infer_frequency(per_series, source_name, settings.time_column)
        frequency = None if offset is None else offset.freqstr
        if settings.calendar_features:
            roles.calendar = calendar_feature_names(offset)
            calendar = calendar_features(index, offset)

    static_categorical, categories, static_real = _static_values(frame, roles, rows)
    return Panel(
        values=np.concatenate([numeric.astype(np.float32), calendar], axis=1),
        series_start=series_start,
        observed=observed,
        timestamps=timestamps,
        ids=rows.ids,
        static_categorical=static_categorical,
        categories=categories,
        static_real=static_real,
        roles=roles,
        frequency=frequency,
        timezone=timezone,
    )


_ARRAYS = ("series_start", "observed", "static_categorical", "static_real")
_META = ("categories", "frequency", "timezone")


def cached_panel(path: Path, settings: PanelSettings, cache_dir: Path) -> Panel:
    """The panel of the file ``path`` from ``cache_dir``, built and written there the first time; ``values`` is
    memory-mapped either way. The key is every setting that shapes the matrix and the file's path, size, inode,
    modification and change times, not its contents: an edit that sets the modification time back still moves the
    change time, and a replaced file has another inode. Entries are written to a temporary folder and renamed, so a
    reader never sees half of one and two processes writing the same entry do not collide."""
    stat = path.resolve().stat()
    identity = {
        "file": str(path.resolve()),
        "size": stat.st_size,
        "inode": stat.st_ino,
        "mtime_ns": stat.st_mtime_ns,
        "ctime_ns": stat.st_ctime_ns,
        "version": CACHE_VERSION,
        "settings": settings.__dict__,
    }
    key = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    entry = cache_dir / f"{path.stem}-{key}"
    if not (entry / "meta.json").is_file():
        _write_entry(build_panel(read_table(path)[0], settings, str(path)), entry)
    meta = json.loads((entry / "meta.json").read_text())
    arrays = np.load(entry / "arrays.npz")
    return Panel(
        values=np.load(entry / "values.npy", mmap_mode="r"),
        timestamps=arrays["timestamps"].view("datetime64[ns]") if "timestamps" in arrays else None,
        ids=pd.read_json(entry / "ids.json", orient="split", dtype=False),
        roles=ColumnRoles(**meta["roles"]),
        **{name: arrays[name] for name in _ARRAYS},
        **{name: meta[name] for name in _META},
    )


def _write_entry(panel: Panel, entry: Path) -> None:
    entry.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{entry.name}-", dir=entry.parent))
    try:
        np.save(staging / "values.npy", panel.values)
        arrays = {name: getattr(panel, name) for name in _ARRAYS}
        if panel.timestamps is not None:
            arrays["timestamps"] = panel.timestamps.astype("datetime64[ns]").view(np.int64)
        np.savez(staging / "arrays.npz", **arrays)
        panel.ids.to_json(staging / "ids.json", orient="split", index=False)
        meta = {"roles": panel.roles.__dict__, **{name: getattr(panel, name) for name in _META}}
        (staging / "meta.json").write_text(json.dumps(meta))
        try:
            os.replace(staging, entry)
        except OSError:
            if not (entry / "meta.json").is_file():  # lost a race to another writer of the same entry: fine
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _column_roles(frame: pd.DataFrame, settings: PanelSettings, source_name: str) -> ColumnRoles:
    """Each named column exists and has one role; targets default to every other numeric column."""
    roles = ("id_columns", "target_columns", "past_covariates", "future_covariates", "static_covariates")
    named = {role: list(getattr(settings, role)) for role in roles}
    seen: dict[str, str] = {settings.time_column: "time_column"} if settings.time_column else {}
    for role, columns in named.items():
        check_columns_exist(source_name, frame, columns)
        for column in columns:
            if column in seen:
                raise InputError(
                    f"{source_name}: column '{column}' is listed as {seen[column]} and as {role}; give each column "
                    "one role"
                )
            seen[column] = role
    targets = named["target_columns"]
    check_numeric(source_name, frame, named["past_covariates"] + named["future_covariates"] + targets)
    if not targets:
        targets = numeric_columns(source_name, frame, excluded=set(seen))
        left_out = [str(c) for c in frame.columns if c not in seen and c not in targets]
        note = f"; left out (not numeric): {', '.join(left_out)}" if left_out else ""
        rank_zero_info(f"{source_name}: forecasting every numeric column: {', '.join(targets)}{note}")
    static = named["static_covariates"]
    categorical = [c for c in static if not is_numeric(frame[c])]  # text, category and boolean columns
    return ColumnRoles(
        targets=[str(c) for c in targets],
        past=named["past_covariates"],
        future=named["future_covariates"],
        static_categorical=categorical,
        static_real=[c for c in static if c not in categorical],
        ids=named["id_columns"],
    )


@dataclass
class _Rows:
    """The table's rows put series after series: position i holds table row ``order[i]``; how messages name them."""

    source_name: str
    order: np.ndarray
    series_start: np.ndarray
    ids: pd.DataFrame

    def series_at(self, position: int) -> str:
        """The series of a sorted position, as messages name it (`` in series 'b'``)."""
        return series_name(self.ids, int(np.searchsorted(self.series_start, position, side="right") - 1))

    def series_of_table_row(self, row: int) -> str:
        return "" if self.ids.shape[1] == 0 else self.series_at(int(np.flatnonzero(self.order == row)[0]))


def _group_rows(frame: pd.DataFrame, id_columns: list[str], source_name: str) -> _Rows:
    """A stable order putting each series' rows together (series sorted by id), the offsets, and the ids."""
    if not id_columns:
        one_series = np.array([0, len(frame)], dtype=np.int64)
        return _Rows(source_name, np.arange(len(frame)), one_series, pd.DataFrame(index=range(1)))
    for column in id_columns:
        if (missing := frame[column].isna().to_numpy()).any():
            row = int(np.flatnonzero(missing)[0])
            raise InputError(f"{source_name}: column '{column}' identifies series but row {row} has no value")
    codes = frame.groupby(id_columns, sort=True, observed=True).ngroup().to_numpy()
    order = np.argsort(codes, kind="stable")
    series_start = np.concatenate([[0], np.cumsum(np.bincount(codes))]).astype(np.int64)
    ids = frame[id_columns].iloc[order[series_start[:-1]]].reset_index(drop=True)
    return _Rows(source_name, order, series_start, ids)


def series_name(ids: pd.DataFrame, series: int) -> str:
    """`` in series 'a'`` or `` in series ('a', 1)`` for messages; empty for a single series."""
    if ids.shape[1] == 0:
        return ""
    values = ids.iloc[series].tolist()
    return f" in series {values[0]!r}" if len(values) == 1 else f" in series {tuple(values)!r}"


def _check_increasing(timestamps: np.ndarray, rows: _Rows, column: str) -> None:
    steps = np.diff(timestamps)
    same_series = np.ones(len(steps), dtype=bool)
    same_series[rows.series_start[1:-1] - 1] = False  # a step from one series to the next is not a step in time
    zero = np.timedelta64(0, "ns")
    # Without id columns a table of several series repeats and restarts its times: say what is more likely missing.
    ids = (
        "" if rows.ids.shape[1] else "; several series in one table? name the columns that identify them in id_columns"
    )
    if (duplicate := same_series & (steps == zero)).any():
        at = int(np.flatnonzero(duplicate)[0]) + 1
        raise InputError(
            f"{rows.source_name}: column '{column}' has duplicate timestamps{rows.series_at(at)}; row "
            f"{int(rows.order[at])} repeats {pd.Timestamp(timestamps[at])}{ids}"
        )
    if (unsorted := same_series & (steps < zero)).any():
        at = int(np.flatnonzero(unsorted)[0]) + 1
        raise InputError(
            f"{rows.source_name}: column '{column}' must be sorted in increasing time{rows.series_at(at)}; row "
            f"{int(rows.order[at])} ({pd.Timestamp(timestamps[at])}) comes before row {int(rows.order[at - 1])} "
            f"({pd.Timestamp(timestamps[at - 1])}){ids}"
        )


def _fill_missing(
    numeric: np.ndarray, observed: np.ndarray, columns: list[str], rows: _Rows, fill_missing: FillMissing
) -> np.ndarray:
    """Missing or infinite values of observed rows: an error naming column and row, or filled within each series.
    Future rows keep their gaps: their targets are unknown by definition, and ``predict``, the only step that reads
    them, reports a missing future covariate there."""
    starts, lengths = rows.series_start[:-1], np.diff(rows.series_start)
    observed_row = np.arange(len(numeric)) < np.repeat(starts + observed, lengths)
    missing = ~np.isfinite(numeric) & observed_row[:, None]
    if not missing.any():
        return numeric
    if fill_missing == "none":
        position, column = (int(i) for i in np.argwhere(missing)[0])
        raise InputError(
            f"{rows.source_name}: column '{columns[column]}' has a missing or infinite value at row "
            f"{int(rows.order[position])}{rows.series_at(position)}; set fill_missing to ffill or interpolate, or "
            "clean the data"
        )
    filled = numeric.copy()
    for series, (start, count) in enumerate(zip(starts, observed, strict=True)):
        own = slice(start, start + count)
        block = pd.DataFrame(np.where(np.isfinite(numeric[own]), numeric[own], np.nan))
        if fill_missing == "interpolate":
            block = block.interpolate(method="linear", limit_direction="both")
        # Leading gaps have nothing to carry forward: take the first valid value instead.
        filled[own] = block.ffill().bfill().to_numpy()
        if not np.isfinite(filled[own]).all():
            column = int(np.flatnonzero(~np.isfinite(filled[own]).all(axis=0))[0])
            raise InputError(
                f"{rows.source_name}: column '{columns[column]}' has no valid value to fill from"
                f"{series_name(rows.ids, series)}"
            )
    return filled


def _static_values(
    frame: pd.DataFrame, roles: ColumnRoles, rows: _Rows
) -> tuple[np.ndarray, list[list[str]], np.ndarray]:
    """Per-series static covariates: category codes (1-based, vocabulary sorted) and numbers; each must be present
    on every row and constant within a series."""
    first_rows = rows.series_start[:-1]
    codes = np.zeros((len(first_rows), len(roles.static_categorical)), dtype=np.int64)
    categories = []
    for index, column in enumerate(roles.static_categorical):
        text = frame[column].astype(str)
        # A blank cell is as missing as NaN, not a category "" of its own; looked for among the distinct labels.
        label_codes, distinct = pd.factorize(text)
        blank = [code for code, label in enumerate(distinct) if not str(label).strip()]
        _check_present(column, frame[column].isna().to_numpy() | np.isin(label_codes, blank), rows)
        labels = text.to_numpy()[rows.order]
        _check_constant(labels, column, rows)
        vocabulary = sorted(set(labels[first_rows].tolist()))
        lookup = {label: code + 1 for code, label in enumerate(vocabulary)}
        codes[:, index] = [lookup[label] for label in labels[first_rows]]
        categories.append(vocabulary)
    static_real = np.zeros((len(first_rows), 0), dtype=np.float32)
    if roles.static_real:
        reals = frame[roles.static_real].to_numpy(dtype=np.float64)
        # Before the constant check, which would call a series-wide 1e39 constant and a single one a change.
        check_float32_range(rows.source_name, roles.static_real, reals, rows.series_of_table_row)
        for index, column in enumerate(roles.static_real):
            _check_present(column, ~np.isfinite(reals[:, index]), rows, "missing or infinite")
        reals = reals[rows.order]
        for index, column in enumerate(roles.static_real):
            _check_constant(reals[:, index], column, rows)
        static_real = reals[first_rows].astype(np.float32)
    return codes, categories, static_real


def _check_present(column: str, missing: np.ndarray, rows: _Rows, what: str = "missing") -> None:
    """``missing`` (rows of the original table) is all False; otherwise name the first such row and its series."""
    if missing.any():
        row = int(np.flatnonzero(missing)[0])
        raise InputError(
            f"{rows.source_name}: static covariate '{column}' is {what} at row {row}{rows.series_of_table_row(row)}; "
            "expected the series' value on every one of its rows"
        )


def _check_constant(values: np.ndarray, column: str, rows: _Rows) -> None:
    first_of_own_series = np.repeat(values[rows.series_start[:-1]], np.diff(rows.series_start))
    differs = values != first_of_own_series
    if differs.any():
        position = int(np.flatnonzero(differs)[0])
        # As Python values: numpy scalars would print as np.float64(3.0).
        before, after = (array[position : position + 1].tolist()[0] for array in (first_of_own_series, values))
        raise InputError(
            f"{rows.source_name}: static covariate '{column}' must be constant within each series; it changes from "
            f"{before!r} to {after!r} at row {int(rows.order[position])}{rows.series_at(position)}"
        )
