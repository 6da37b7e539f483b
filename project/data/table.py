"""Reading a table and checking its columns: every problem is one line naming the file, column, row or series."""

from __future__ import annotations

import contextlib
import csv
import itertools
import warnings
from collections.abc import Callable, Iterator
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
# Bytes a table file may have. pandas reads a table whole, at one to several times its size in memory, so a file
# past this is a mistake (a sparse or runaway file) or needs a larger machine than the bound assumes: twice the
# ten-million-row panel of `project.tools.bench --suite panel` written as a CSV.
MAX_TABLE_BYTES = 4 * 2**30
# Bytes read at each end of a CSV to tell text from a sparse file's hole or binary data (NUL bytes).
_TEXT_PROBE_BYTES = 64 * 2**10


def read_table(source: str | Path | pd.DataFrame) -> tuple[pd.DataFrame, str]:
    """The table of ``source`` (a CSV or Parquet path, or a DataFrame) and the name errors call it by."""
    if isinstance(source, pd.DataFrame):
        check_width(DATAFRAME_SOURCE, source.shape[1])
        check_column_names(DATAFRAME_SOURCE, list(source.columns))
        return source, DATAFRAME_SOURCE
    path = check_file(source)
    frame = _read_csv(path) if path.suffix.lower() == ".csv" else _read_parquet(path)
    check_width(str(path), frame.shape[1])
    check_column_names(str(path), list(frame.columns))
    if frame.empty:
        raise InputError(f"{path}: the table has no rows; expected a header row and data rows")
    return frame, str(path)


def check_width(source_name: str, columns: int) -> None:
    """Refuse a table wider than ``MAX_COLUMNS`` before any work per column (which would take minutes)."""
    if columns > MAX_COLUMNS:
        raise InputError(f"{source_name}: {columns} columns; a table holds at most {MAX_COLUMNS}")


def check_column_names(source_name: str, names: list) -> None:
    """Every column has a name of its own: a blank name or one given twice would be read under another (pandas names
    them ``Unnamed: 1`` and ``y.1``), and a config that names it would pick a column the user did not mean."""
    seen: dict[str, int] = {}
    for position, name in enumerate(names):
        if not str(name).strip():
            hint = " (a table written with its index? write it with index=False)" if position == 0 else ""
            raise InputError(f"{source_name}: column {position + 1} has no name; name every column in the header{hint}")
        if str(name) in seen:
            raise InputError(
                f"{source_name}: columns {seen[str(name)] + 1} and {position + 1} are both named '{name}'; give "
                "each column a name of its own"
            )
        seen[str(name)] = position


def check_file(source: str | Path) -> Path:
    """``source`` as a Path, after checking that it is a CSV or Parquet file with something in it and at most
    ``MAX_TABLE_BYTES`` long (its size is read from the file system, so a sparse multi-GB file costs nothing)."""
    path = check_name_lengths(source)
    if not path.is_file():
        raise InputError(f"{path}: data file not found")
    if path.suffix.lower() not in (".csv", ".parquet", ".pq"):
        raise InputError(f"{path}: expected a .csv or .parquet file; got '{path.suffix}'")
    size = path.stat().st_size
    if size == 0:
        raise InputError(f"{path}: the file is empty; expected a header row and data rows")
    if size > MAX_TABLE_BYTES:
        raise InputError(
            f"{path}: {size:,} bytes; a table file holds at most {MAX_TABLE_BYTES:,} "
            f"({MAX_TABLE_BYTES / 2**30:g} GiB, MAX_TABLE_BYTES in project/data/table.py), as it is read whole into "
            "memory; keep the rows and columns you forecast in a smaller file, or raise the bound if this machine's "
            "memory holds the table several times over"
        )
    return path


def _read_csv(path: Path) -> pd.DataFrame:
    """The CSV at ``path``, after the checks that cost a few reads instead of pandas' whole one: text, not NUL bytes;
    a header of at most ``MAX_COLUMNS``; a first row no wider than the header. pandas reads a first row wider than
    the header as an index of its extra fields (a 12 MB file took 106 s and 2.9 GB); a later one it refuses at once,
    and the row is then found, to be named as the first one is."""
    _check_text(path)
    _check_rows_fit_header(path, rows=1)
    try:
        return pd.read_csv(path)
    except pd.errors.ParserError as error:
        _check_rows_fit_header(path, rows=None)
        raise _unreadable(path, error) from None
    except (pd.errors.EmptyDataError, UnicodeDecodeError, OSError, ValueError) as error:
        raise _unreadable(path, error) from None


def _read_parquet(path: Path) -> pd.DataFrame:
    """The Parquet file at ``path``, after counting its columns from its schema (the footer alone)."""
    try:
        import pyarrow.parquet as parquet  # the project's `parquet` extra; pandas reads Parquet with it too
    except ImportError:
        raise InputError(f"{path}: reading Parquet needs pyarrow; pip install 'pyarrow>=14'") from None
    try:
        schema = parquet.read_schema(path)
    except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid (not Parquet, a truncated footer) is a ValueError
        raise _unreadable(path, error) from None
    # pandas writes a named index as a column and reads it back as the index, not as one of the table's columns.
    index_columns = (schema.pandas_metadata or {}).get("index_columns", [])
    check_width(str(path), len(schema.names) - sum(isinstance(column, str) for column in index_columns))
    try:
        return pd.read_parquet(path)
    except (OSError, ValueError) as error:
        raise _unreadable(path, error) from None


def _unreadable(path: Path, error: Exception) -> InputError:
    reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return InputError(f"{path}: cannot read the table ({reason})")


def _check_text(path: Path) -> None:
    """A CSV is text: NUL bytes at its start or end are a sparse file's hole or binary data, which pandas would read
    as one enormous cell (300 MB of them took 8 s and 3.5 GB)."""
    size = path.stat().st_size
    tail_start = max(size - _TEXT_PROBE_BYTES, 0)
    with open(path, "rb") as data:
        head = data.read(_TEXT_PROBE_BYTES)
        data.seek(tail_start)
        tail = data.read(_TEXT_PROBE_BYTES)
    for start, block in ((0, head), (tail_start, tail)):
        if b"\0" in block:
            offset = start + block.index(b"\0")
            raise InputError(
                f"{path}: byte {offset} is NUL; a CSV is UTF-8 text (is this a sparse or binary file, or UTF-16 "
                "text? save it as a UTF-8 CSV)"
            )


def _check_rows_fit_header(path: Path, rows: int | None) -> None:
    """Refuse a header wider than ``MAX_COLUMNS`` or with a blank or repeated name, then the first of the first
    ``rows`` data rows (every row if None) with more fields than the header."""
    with contextlib.closing(_records(path)) as records:
        header = next(records, (1, []))[1]
        width = len(header)
        check_width(str(path), width)
        check_column_names(str(path), header)  # as written: pandas renames a blank or repeated name
        for line, fields in itertools.islice(records, rows):
            if len(fields) > width:
                raise InputError(
                    f"{path}: line {line} has {len(fields)} fields; the header has {width} columns (quote values "
                    "that hold commas, or name every column in the header)"
                )


def _records(path: Path) -> Iterator[tuple[int, list[str]]]:
    """The CSV's records that are not blank, header first, each with the line it starts on, split as pandas splits
    them (a quoted field may hold commas and line breaks). Ends at a record the csv module refuses (a field past its
    size limit): pandas then says what is wrong with it."""
    with open(path, newline="", encoding="utf-8", errors="replace") as lines:
        reader = csv.reader(lines)
        start = 1
        try:
            for fields in reader:
                if fields:
                    yield start, fields
                start = reader.line_num + 1
        except csv.Error:
            return


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
    """The time column as datetimes in nanoseconds, the unit the panel keeps. What pandas cannot read (a cell that is
    not a time, offsets that change within the column, a year outside 1677–2262) is one line naming the file and the
    column, in pandas' words."""
    check_columns_exist(source_name, frame, [column])
    raw, named = frame[column], f"{source_name}: column '{column}'"
    if is_numeric(raw):  # pandas would read numbers as nanoseconds since 1970: Unix seconds would all fall in 1970
        raise InputError(
            f"{named} holds numbers ({raw.iloc[0]} in row 0), not dates or timestamps; write it as dates "
            "(pandas.to_datetime(column, unit='s') reads Unix seconds), or leave time_column empty"
        )
    try:
        with warnings.catch_warnings():  # pandas 2 warns of its pandas 3 behaviour, the refusal below
            warnings.simplefilter("ignore", FutureWarning)
            parsed = pd.to_datetime(raw)
        if not pd.api.types.is_datetime64_any_dtype(parsed):  # pandas 2 keeps mixed offsets as Python objects
            raise ValueError("Mixed timezones detected")
        parsed = parsed.dt.as_unit("ns")
    except (ValueError, TypeError) as error:  # pandas' OutOfBoundsDatetime is a ValueError
        said = " ".join(str(error).split())
        raise InputError(f"{named} must hold timestamps in one format and time zone: {said}") from None
    if parsed.isna().any():
        raise InputError(f"{named} must hold timestamps; row {int(np.flatnonzero(parsed.isna())[0])} is empty")
    return parsed


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
