"""Reading a table and checking its columns: every problem is one line naming the file, column, row or series."""

from __future__ import annotations

import csv
import re
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from project.errors import InputError
from project.files import check_name_lengths

# What errors call a source given as a DataFrame (a path is named by itself).
DATAFRAME_SOURCE = "the DataFrame"
# Columns a table may have: far above any table this project forecasts (a panel is long, not wide), far below the
# 200,000 columns whose per-column checks take minutes.
MAX_COLUMNS = 10_000


def read_table(source: str | Path | pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The table of ``source`` (a CSV or Parquet path, or a DataFrame) and the name errors call it by."""
    if isinstance(source, pd.DataFrame):
        check_width(DATAFRAME_SOURCE, source.shape[1])
        return source, DATAFRAME_SOURCE
    path = check_file(source)
    if path.suffix.lower() == ".csv":  # counted from the header before pandas reads every column
        check_width(str(path), _header_width(path))
    try:
        frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: cannot read the table ({reason})") from None
    check_width(str(path), frame.shape[1])
    if frame.empty:
        raise InputError(f"{path}: the table has no rows; expected a header row and data rows")
    return frame, str(path)


def check_width(source_name: str, columns: int) -> None:
    """Refuse a table wider than ``MAX_COLUMNS`` before any work per column (which would take minutes)."""
    if columns > MAX_COLUMNS:
        raise InputError(f"{source_name}: {columns} columns; a table holds at most {MAX_COLUMNS}")


def _header_width(path: Path) -> int:
    with open(path, newline="", encoding="utf-8", errors="replace") as lines:
        try:
            return len(next(csv.reader(lines), []))
        except csv.Error:  # a header field too long for the csv module: pandas says what is wrong with it
            return 0


def check_file(source: str | Path) -> Path:
    """``source`` as a Path, after checking that it is a CSV or Parquet file with something in it."""
    path = check_name_lengths(source)
    if not path.is_file():
        raise InputError(f"{path}: data file not found")
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise InputError(f"{path}: expected a .csv or .parquet file; got '{path.suffix}'")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty; expected a header row and data rows")
    return path


def check_columns_exist(source_name: str, frame: pd.DataFrame, columns: list[str]) -> None:
    for column in columns:
        if column not in frame.columns:
            raise InputError(
                f"{source_name}: column '{column}' not found; available: {', '.join(map(str, frame.columns))}"
            )


def is_numeric(column: pd.Series) -> bool:
    """Numbers a model can read; booleans are numeric to pandas but are flags, not measurements."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def check_numeric(source_name: str, frame: pd.DataFrame, columns: list[str]) -> None:
    """Every column in ``columns`` holds numbers; a column with a stray text cell names the first bad row."""
    for column in columns:
        if not is_numeric(frame[column]):
            bad_row = _first_non_number(frame[column])
            detail = "" if bad_row is None else f"; row {bad_row} has {frame[column].iloc[bad_row]!r}"
            raise InputError(
                f"{source_name}: column '{column}' must be numeric; got dtype {frame[column].dtype}{detail}"
            )


def numeric_columns(source_name: str, frame: pd.DataFrame, excluded: set[str]) -> list[str]:
    """Every numeric column not in ``excluded``, for when the user names no targets. A column of numbers with a stray
    text cell (``n/a``, ``-``) is an error naming the row, not left out without a word."""
    chosen = []
    for name in frame.columns:
        if name in excluded:
            continue
        column = frame[name]
        if is_numeric(column):
            chosen.append(str(name))
        elif (
            not pd.api.types.is_bool_dtype(column)
            and pd.to_numeric(column.dropna(), errors="coerce").notna().mean() >= 0.9
        ):
            bad_row = _first_non_number(column)
            problem = (
                "holds numbers stored as text"
                if bad_row is None
                else f"is numeric except row {bad_row} ({column.iloc[bad_row]!r})"
            )
            raise InputError(
                f"{source_name}: column '{name}' {problem}; clean it, or name the columns to forecast in target_columns"
            )
    if not chosen:
        raise InputError(f"{source_name}: expected at least one numeric column to forecast; found none")
    return chosen


def parse_timestamps(source_name: str, frame: pd.DataFrame, column: str) -> pd.Series:
    """The time column as datetimes; unparsable cells and mixed time-zone offsets name the row."""
    check_columns_exist(source_name, frame, [column])
    raw = frame[column]
    try:
        with warnings.catch_warnings():  # pandas 2 warns of its pandas 3 behaviour, the refusal below
            warnings.simplefilter("ignore", FutureWarning)
            parsed = pd.to_datetime(raw, errors="coerce")
    except (ValueError, TypeError):
        parsed = None  # pandas refuses a column mixing offsets such as +01:00 and +02:00 (a daylight-saving change)
    if parsed is not None and not pd.api.types.is_datetime64_any_dtype(parsed):
        parsed = None  # pandas 2 (which statsforecast's extra installs) keeps such a column as Python objects
    if parsed is not None and not parsed.isna().any():
        return parsed
    # pandas takes the first cell's offset (or its lack of one) for the column's and blanks or refuses the cells with
    # another, so its blanks can be valid timestamps. Each cell's own offset is compared with the first cell's
    # instead, in growing prefixes: a daylight-saving change in the first week of ten million rows reads a few
    # thousand of them, and a blank caps the search at its row.
    end = len(raw) if parsed is None else int(np.flatnonzero(parsed.isna().to_numpy())[0]) + 1
    reference = _utc_offsets(raw.iloc[:1])[0]
    start, size = 0, 4096
    while start < end:
        stop = min(end, start + size)
        chunk = raw.iloc[start:stop]
        offsets = _utc_offsets(chunk)
        readable = (
            pd.to_datetime(chunk, format="ISO8601", utc=True, errors="coerce").notna().to_numpy()
            | ~np.isnan(offsets)
            | (parsed is not None and parsed.iloc[start:stop].notna().to_numpy())
        )
        same_offset = (offsets == reference) | (np.isnan(offsets) & np.isnan(reference))
        problems = ~readable | ~same_offset
        if problems.any():
            row = start + int(np.flatnonzero(problems)[0])
            if readable[row - start] and row > 0:
                raise InputError(
                    f"{source_name}: column '{column}' mixes time-zone offsets (row 0 is {raw.iloc[0]!r}, row {row} "
                    f"is {raw.iloc[row]!r}); convert the timestamps to UTC or to one offset"
                )
            raise InputError(f"{source_name}: column '{column}' must hold timestamps; row {row} has {raw.iloc[row]!r}")
        start, size = stop, size * 2
    if parsed is None:  # every cell has the first one's offset, yet pandas refused: zones it tells apart
        raise InputError(
            f"{source_name}: column '{column}' mixes time zones (row 0 is {raw.iloc[0]!r}); convert the timestamps "
            "to UTC or to one offset"
        )
    # Readable, with the first row's offset, yet blank to pandas: written in another format or zone than row 0.
    raise InputError(
        f"{source_name}: column '{column}' must hold timestamps in one format and time zone; row 0 is "
        f"{raw.iloc[0]!r}, row {end - 1} is {raw.iloc[end - 1]!r}"
    )


# A UTC designator after a time of day (``…:00``, ``…:00.123``), so that a date such as ``2020-01-01`` is not read
# as the offset -01.
_OFFSET = re.compile(
    r":\d{2}(?:\.\d+)?\s*(?:(?P<utc>Z|UTC|GMT)|(?P<sign>[+-])(?P<hours>\d{2}):?(?P<minutes>\d{2})?)\s*$"
)


def _utc_offsets(raw: pd.Series) -> np.ndarray:
    """Each cell's UTC offset in minutes, read from its text (a Timestamp's ends in its offset too); NaN where it
    has none (a naive time, a missing or unreadable cell)."""
    parts = raw.astype(str).str.extract(_OFFSET)
    hours = pd.to_numeric(parts["hours"], errors="coerce").to_numpy(dtype=np.float64)
    minutes = pd.to_numeric(parts["minutes"], errors="coerce").fillna(0).to_numpy(dtype=np.float64)
    sign = np.where(parts["sign"].to_numpy(dtype=object) == "-", -1.0, 1.0)
    return np.where(parts["utc"].notna().to_numpy(), 0.0, sign * (hours * 60 + minutes))


def check_float32_range(source_name: str, columns: list[str], values: np.ndarray, where: Callable[[int], str]) -> None:
    """Training runs in float32: a value finite in float64 but infinite once cast would surface only as a diverged
    training. ``where(row)`` names the series of a row (`` in series 'b'``) when the table holds several."""
    with np.errstate(over="ignore"):
        too_large = np.isfinite(values) & ~np.isfinite(values.astype(np.float32))
    if too_large.any():
        row, column = (int(i) for i in np.argwhere(too_large)[0])
        raise InputError(
            f"{source_name}: column '{columns[column]}' has {values[row, column]:g} at row {row}{where(row)}, beyond "
            f"float32's range (±{np.finfo(np.float32).max:.3g}); rescale the column"
        )


def _first_non_number(column: pd.Series) -> int | None:
    bad = (pd.to_numeric(column, errors="coerce").isna() & column.notna()).to_numpy()
    return int(np.flatnonzero(bad)[0]) if bad.any() else None
