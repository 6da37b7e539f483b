"""Bad values the reliability review found slipping through or misreported: each ends in one line naming the file,
the column, the row (and the series) and what was expected."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from project.data import WindowDataModule, table
from project.errors import InputError
from tests.helpers import refusal_of

ROWS = 30


def stores(tmp_path: Path, change=None) -> str:
    """Three stores (1, 2, 3) of 30 daily rows, written as a CSV after ``change(frame)``; its path."""
    frames = []
    for store in (1, 2, 3):
        frames.append(
            pd.DataFrame(
                {
                    "date": pd.date_range("2021-01-01", periods=ROWS, freq="D").strftime("%Y-%m-%d"),
                    "store": store,
                    "sales": np.arange(ROWS, dtype=np.float64) + 100 * store,
                    "footfall": np.arange(ROWS, dtype=np.float64),
                    "price": np.full(ROWS, 2.5),
                    "region": {1: "north", 2: "south", 3: "north"}[store],
                    "size": float(store),
                }
            )
        )
    frame = pd.concat(frames, ignore_index=True).astype({"region": object})
    frame = change(frame) if change else frame
    path = tmp_path / "stores.csv"
    frame.to_csv(path, index=False)
    return str(path)


def one_series(tmp_path: Path, times: list[str]) -> str:
    frame = pd.DataFrame({"time": times, "value": np.arange(len(times), dtype=np.float64)})
    path = tmp_path / "series.csv"
    frame.to_csv(path, index=False)
    return str(path)


def error_of(source: str, tmp_path: Path, **columns) -> str:
    """The message with which reading ``source`` and setting up for fit fails."""
    arguments = dict(context_length=4, horizon=2, calendar_features=False, cache_dir=str(tmp_path / "cache"))
    message = refusal_of(lambda: WindowDataModule(source=source, **{**arguments, **columns}).setup("fit"))
    assert message.startswith(source)
    return message


STORE_COLUMNS = dict(
    time_column="date",
    id_columns=["store"],
    target_columns=["sales"],
    past_covariates=["footfall"],
    future_covariates=["price"],
    static_covariates=["region", "size"],
)


def with_cell(row: int, column: str, value):
    def change(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.copy()
        frame.loc[row, column] = value
        return frame

    return change


@pytest.mark.parametrize("column", ["sales", "footfall", "price", "size"])
def test_a_value_beyond_float32_in_any_numeric_role_names_the_column_row_and_series(column, tmp_path):
    # Row 65 is the sixth row of store 3. The static column holds it on every row of store 3: constant, it passed.
    rows = range(2 * ROWS, 3 * ROWS) if column == "size" else [65]

    def huge(frame: pd.DataFrame) -> pd.DataFrame:
        return frame.assign(**{column: frame[column].where(~frame.index.isin(rows), 1e39)})

    message = error_of(stores(tmp_path, huge), tmp_path, **STORE_COLUMNS)
    first = rows[0]
    assert f"column '{column}' has 1e+39 at row {first} in series 3, beyond float32's range" in message


def test_a_value_just_past_the_largest_float32_is_refused_and_the_largest_itself_is_kept(tmp_path):
    largest = float(np.finfo(np.float32).max)
    arguments = dict(context_length=4, horizon=2, calendar_features=False, cache_dir=str(tmp_path / "cache"))
    kept = WindowDataModule(source=stores(tmp_path, with_cell(4, "footfall", largest)), **STORE_COLUMNS, **arguments)
    assert np.isfinite(kept.panel.values).all()
    message = error_of(stores(tmp_path, with_cell(4, "footfall", 3.5e38)), tmp_path, **STORE_COLUMNS)
    assert "column 'footfall' has 3.5e+38 at row 4 in series 1, beyond float32's range" in message


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (with_cell(70, "region", np.nan), "static covariate 'region' is missing at row 70 in series 3"),
        (with_cell(70, "region", "  "), "static covariate 'region' is missing at row 70 in series 3"),
        (
            lambda frame: frame.assign(region=frame["region"].where(frame["store"] != 2, np.nan)),
            f"static covariate 'region' is missing at row {ROWS} in series 2",
        ),
        (with_cell(41, "size", np.nan), "static covariate 'size' is missing or infinite at row 41 in series 2"),
        (  # plain numbers
            with_cell(41, "size", 7.0),
            "static covariate 'size' must be constant within each series; it changes from 2.0 to 7.0 at row 41",
        ),
    ],
    ids=[
        "an empty category",
        "a category of spaces",
        "a category missing for a whole series",
        "a missing number",
        "a varying number",
    ],
)
def test_a_missing_or_varying_static_covariate_says_which_and_names_the_row_and_series(change, said, tmp_path):
    message = error_of(stores(tmp_path, change), tmp_path, **STORE_COLUMNS)
    assert said in message
    assert "missing" not in said or "changes from" not in message


def hours(first: int, count: int, offset: str = "") -> list[str]:
    return [f"2020-01-01 {h:02d}:00{offset}" for h in range(first, first + count)]


@pytest.mark.parametrize(
    ("times", "said"),
    [
        ([*hours(0, 12, "+00:00"), *hours(12, 10, "+01:00")], "Mixed timezones detected"),
        ([*hours(0, 9), *hours(9, 13, "+01:00")], "unconverted data remains"),
        ([*hours(0, 6, "+01:00"), "yesterday", *hours(7, 13, "+01:00")], '"yesterday"'),
        ([*hours(0, 7), "3000-01-08 00:00", *hours(8, 14)], "3000-01-08"),
    ],
    ids=["an offset that changes", "naive then an offset", "a word", "a year past 2262"],
)
def test_a_time_column_pandas_cannot_read_is_one_line_naming_the_file_and_column_in_pandas_words(times, said, tmp_path):
    source = one_series(tmp_path, times)
    message = error_of(source, tmp_path, time_column="time")
    assert message.startswith(f"{source}: column 'time' must hold timestamps in one format and time zone: ")
    assert said in message


def test_an_empty_time_cell_names_its_row(tmp_path):
    times = hours(0, 20, "+01:00")
    times[6] = ""
    message = error_of(one_series(tmp_path, times), tmp_path, time_column="time")
    assert message.endswith("column 'time' must hold timestamps; row 6 is empty")


def test_an_empty_dataframe_is_one_line():
    with pytest.raises(InputError, match=r"^the DataFrame: has 0 rows;"):
        WindowDataModule(pd.DataFrame({"value": pd.Series([], dtype=float)}), context_length=4, horizon=2)


# -- Files that would cost a slow, large read: refused from their size, their ends or their first rows ---------------

WIDE_ROW_ADVICE = "(quote values that hold commas, or name every column in the header)"


def unread(*arguments, **options):
    raise AssertionError("the table was read whole")


def test_a_first_row_wider_than_the_header_is_refused_before_pandas_reads_the_file(tmp_path, monkeypatch):
    # pandas would read the extra fields as an index: a 12 MB file of such rows took 106 s and 2.9 GB.
    path = tmp_path / "wide_rows.csv"
    path.write_text("time,value\n" + ("2021-01-01," + ",".join(["1.5"] * 1000) + "\n") * 3)
    monkeypatch.setattr(pd, "read_csv", unread)
    message = error_of(str(path), tmp_path, time_column="time")
    assert message == f"{path}: line 2 has 1001 fields; the header has 2 columns {WIDE_ROW_ADVICE}"
    assert not (tmp_path / "cache").exists()


def test_a_later_row_wider_than_the_header_names_its_line_counting_quoted_commas_and_line_breaks(tmp_path):
    rows = [
        '2021-01-01,"north, coast",1.0',  # line 2
        '2021-01-02,"two\nlines",2.0',  # lines 3 and 4
        *(f"2021-01-{day:02d},inland,{day}.0" for day in range(3, 20)),  # lines 5 to 21
        "2021-01-20,inland,20.0,21.0",  # line 22
        "2021-01-21,inland,21.0",
    ]
    path = tmp_path / "notes.csv"
    path.write_text("\n".join(["time,note,value", *rows]) + "\n")
    message = error_of(str(path), tmp_path, time_column="time", target_columns=["value"])
    assert message == f"{path}: line 22 has 4 fields; the header has 3 columns {WIDE_ROW_ADVICE}"
    assert not (tmp_path / "cache").exists()


def test_commas_and_line_breaks_inside_quotes_are_not_counted_as_fields(tmp_path):
    path = tmp_path / "notes.csv"
    path.write_text('time,note,value\n2021-01-01,"north, coast, bay",1.0\n2021-01-02,"two\nlines",2.0\n')
    frame, _ = table.read_table(path)
    assert frame["note"].tolist() == ["north, coast, bay", "two\nlines"]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_file_past_the_size_bound_is_refused_from_its_size_before_any_read(suffix, tmp_path, monkeypatch):
    path = tmp_path / f"huge{suffix}"
    with open(path, "wb") as data:  # sparse: the size costs no disk, and a read would be all NUL bytes
        data.write(b"time,value\n")
        data.truncate(table.MAX_TABLE_BYTES + 1)
    monkeypatch.setattr(pd, "read_csv", unread)
    monkeypatch.setattr(pd, "read_parquet", unread)
    message = error_of(str(path), tmp_path, time_column="time")
    path.unlink()
    bound = table.MAX_TABLE_BYTES
    assert message == (
        f"{path}: {bound + 1:,} bytes; a table file holds at most {bound:,} ({bound / 2**30:g} GiB, MAX_TABLE_BYTES in "
        "project/data/table.py), as it is read whole into memory; keep the rows and columns you forecast in a smaller "
        "file, or raise the bound if this machine's memory holds the table several times over"
    )
    assert not (tmp_path / "cache").exists()


def test_a_sparse_csv_within_the_size_bound_is_refused_as_not_text(tmp_path, monkeypatch):
    # pandas would read the hole as one cell: 300 MB of NUL bytes took 8 s and 3.5 GB.
    path = tmp_path / "holey.csv"
    with open(path, "wb") as data:
        data.write(b"time,value\n2021-01-01,1.5\n")
        data.truncate(64 * 2**20)
    monkeypatch.setattr(pd, "read_csv", unread)
    message = error_of(str(path), tmp_path, time_column="time")
    assert message == (
        f"{path}: byte 26 is NUL; a CSV is UTF-8 text (is this a sparse or binary file, or UTF-16 text? save it as a "
        "UTF-8 CSV)"
    )
    assert not (tmp_path / "cache").exists()


def test_a_parquet_file_too_wide_is_refused_from_its_schema_before_its_data_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "MAX_COLUMNS", 5)  # six columns stand for 10,001: written in milliseconds
    path = tmp_path / "wide.parquet"
    pd.DataFrame({f"c{i}": [1.5, 2.5] for i in range(6)}).to_parquet(path)
    monkeypatch.setattr(pd, "read_parquet", unread)
    message = error_of(str(path), tmp_path)
    assert message == f"{path}: 6 columns; a table holds at most 5"
    assert not (tmp_path / "cache").exists()


def test_a_parquet_files_named_index_is_not_counted_among_its_columns(tmp_path, monkeypatch):
    monkeypatch.setattr(table, "MAX_COLUMNS", 5)
    path = tmp_path / "indexed.parquet"
    pd.DataFrame({f"c{i}": [1.5, 2.5] for i in range(5)}, index=pd.Index(["a", "b"], name="key")).to_parquet(path)
    frame, _ = table.read_table(path)
    assert list(frame.columns) == [f"c{i}" for i in range(5)]


@pytest.mark.parametrize(
    ("header", "said"),
    [
        ("time,y,y", "columns 2 and 3 are both named 'y'; give each column a name of its own"),
        ("time,,y", "column 2 has no name; name every column in the header"),
        (",time,y", "column 1 has no name; name every column in the header (a table written with its index? write"),
    ],
)
def test_a_blank_or_repeated_column_name_is_one_line_not_a_column_pandas_renamed(header, said, tmp_path):
    """pandas reads them as ``y.1`` and ``Unnamed: 1``, which would train as columns the user never named."""
    path = tmp_path / "named.csv"
    path.write_text(header + "\n" + "".join(f"2021-01-{day:02d},{day},{day}\n" for day in range(1, 29)))
    assert said in error_of(str(path), tmp_path, time_column="time")


def test_numbers_in_the_time_column_are_one_line_not_nanoseconds_since_1970(tmp_path):
    """Unix seconds would be read as nanoseconds: forecasts dated 1970."""
    frame = pd.DataFrame({"time": 1_600_000_000 + 3600 * np.arange(ROWS), "value": np.arange(ROWS, dtype=float)})
    frame.to_csv(path := tmp_path / "seconds.csv", index=False)
    assert error_of(str(path), tmp_path, time_column="time") == (
        f"{path}: column 'time' holds numbers (1600000000 in row 0), not dates or timestamps; write it as dates "
        "(pandas.to_datetime(column, unit='s') reads Unix seconds), or leave time_column empty"
    )
