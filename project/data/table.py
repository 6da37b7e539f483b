"""Reading a table and checking its columns: every problem is one line naming the file, column, row or series.

Nothing here knows about windows or models; ``project.data.panel`` turns the checked table into arrays.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from project.errors import InputError

FLOAT32_MAX = float(np.finfo(np.float32).max)


def read_table(source: str | Path | pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The table of ``source`` (a CSV or Parquet path, or a DataFrame) and the name errors call it by."""
    if isinstance(source, pd.DataFrame):
        return source, "the DataFrame"
    path = check_file(source)
    try:
        frame = pd.read_csv(path) if path.suffix.lower() == ".csv" else pd.read_parquet(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ValueError) as error:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise InputError(f"{path}: cannot read the table ({reason})") from None
    if frame.empty:
        raise InputError(f"{path}: the table has no rows; expected a header row and data rows")
    return frame, str(path)


def check_file(source: str | Path) -> Path:
    """``source`` as a Path, after checking that it is a CSV or Parquet file with something in it."""
    path = Path(source)
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
            available = ", ".join(map(str, frame.columns))
            raise InputError(f"{source_name}: column '{column}' not found; available: {available}")


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
    """Every numeric column not in ``excluded``, for when the user names no targets.

    A column that is mostly numbers but has a stray text cell (``n/a``, ``-``) would otherwise be left out without a
    word; it is an error naming the row instead.
    """
    chosen = []
    for column in frame.columns:
        if column in excluded:
            continue
        if is_numeric(frame[column]):
            chosen.append(str(column))
        elif _mostly_numbers(frame[column]):
            bad_row = _first_non_number(frame[column])
            problem = (
                "holds numbers stored as text"
                if bad_row is None
                else f"is numeric except row {bad_row} ({frame[column].iloc[bad_row]!r})"
            )
            raise InputError(
                f"{source_name}: column '{column}' {problem}; clean it, or name the columns to forecast in "
                "target_columns"
            )
    if not chosen:
        raise InputError(f"{source_name}: expected at least one numeric column to forecast; found none")
    return chosen


def parse_timestamps(source_name: str, frame: pd.DataFrame, column: str) -> pd.Series:
    """The time column as datetimes; unparsable cells and mixed time-zone offsets name the row."""
    check_columns_exist(source_name, frame, [column])
    raw = frame[column]
    try:
        parsed = pd.to_datetime(raw, errors="coerce")
    except (ValueError, TypeError):
        # pandas refuses a column mixing offsets such as +01:00 and +02:00 (a daylight-saving change).
        offsets = [pd.Timestamp(value).utcoffset() if isinstance(value, str | pd.Timestamp) else None for value in raw]
        row = next((i for i, offset in enumerate(offsets) if offset != offsets[0]), 0)
        raise InputError(
            f"{source_name}: column '{column}' mixes time-zone offsets (row 0 is {raw.iloc[0]!r}, row {row} is "
            f"{raw.iloc[row]!r}); convert the timestamps to UTC or to one offset"
        ) from None
    if parsed.isna().any():
        row = int(np.flatnonzero(parsed.isna().to_numpy())[0])
        raise InputError(f"{source_name}: column '{column}' must hold timestamps; row {row} has {raw.iloc[row]!r}")
    return parsed


def check_float32_range(source_name: str, columns: list[str], values: np.ndarray) -> None:
    """Training runs in float32: a value finite in float64 but beyond float32's range would become infinite."""
    too_large = np.isfinite(values) & (np.abs(values) > FLOAT32_MAX)
    if too_large.any():
        row, column = (int(i) for i in np.argwhere(too_large)[0])
        raise InputError(
            f"{source_name}: column '{columns[column]}' has {values[row, column]:g} at row {row}, beyond float32's "
            f"range (±{FLOAT32_MAX:.3g}); rescale the column"
        )


def _mostly_numbers(column: pd.Series) -> bool:
    present = column.dropna()
    if present.empty or pd.api.types.is_bool_dtype(column):
        return False
    parsed = pd.to_numeric(present, errors="coerce")
    return bool(parsed.notna().mean() >= 0.9)


def _first_non_number(column: pd.Series) -> int | None:
    parsed = pd.to_numeric(column, errors="coerce")
    bad = (parsed.isna() & column.notna()).to_numpy()
    return int(np.flatnonzero(bad)[0]) if bad.any() else None
