"""The data's calendar: its frequency and calendar features as known covariates.

The frequency is pandas' (business days, month or quarter starts…), so that monthly forecasts land on period starts
rather than "last date + the usual number of days"; gaps in that calendar are reported once, never re-gridded.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from pandas.tseries.frequencies import to_offset
from pandas.tseries.offsets import BaseOffset, Tick

# Cyclic features, each used when the data's step (in days) lies in [shortest, longest] and is shorter than its
# cycle: (name, cycle length in days, value in cycle units, cycle length in those units, shortest, longest step).
# Daily and weekly data get the season from day_of_year, monthly data from month_of_year.
_CYCLES = (
    ("minute_of_hour", 1 / 24, lambda t: t.minute + t.second / 60, 60.0, 0, np.inf),
    ("hour_of_day", 1.0, lambda t: t.hour + t.minute / 60, 24.0, 0, np.inf),
    ("day_of_week", 7.0, lambda t: t.day_of_week + t.hour / 24, 7.0, 0, np.inf),
    ("day_of_year", 365.25, lambda t: t.day_of_year - 1 + t.hour / 24, 365.25, 0, 27.0),
    ("month_of_year", 365.25, lambda t: t.month - 1 + (t.day - 1) / 31, 12.0, 27.0, np.inf),
)


def infer_frequency(series: Sequence[pd.DatetimeIndex], source_name: str, column: str) -> BaseOffset | None:
    """The frequency of the longest series' timestamps (None below two rows), with one warning for gaps."""
    longest = max(series, key=len)
    if len(longest) < 2:
        return None
    frequency = _frequency(longest)
    _warn_about_gaps(series, frequency, source_name, column)
    return frequency


def calendar_feature_names(frequency: BaseOffset | None) -> list[str]:
    """Names of the sine/cosine pairs of every cycle longer than the data's step."""
    return [f"{name}_{part}" for name, *_ in _visible_cycles(frequency) for part in ("sin", "cos")]


def calendar_features(timestamps: pd.DatetimeIndex, frequency: BaseOffset | None) -> np.ndarray:
    """Features (rows, 2 · cycles) in [-1, 1], in the order of ``calendar_feature_names``."""
    columns = []
    for _, _, value, length, *_ in _visible_cycles(frequency):
        angle = 2 * np.pi * np.asarray(value(timestamps), dtype=np.float64) / length
        columns += [np.sin(angle), np.cos(angle)]
    return np.stack(columns, axis=1).astype(np.float32) if columns else np.zeros((len(timestamps), 0), np.float32)


def _visible_cycles(frequency: BaseOffset | None) -> list[tuple]:
    if frequency is None:
        return []
    if isinstance(frequency, Tick):
        step = pd.Timedelta(frequency)
    else:  # a typical step: a month is about 30 days
        step = pd.Series(pd.date_range("2001-01-01", periods=13, freq=frequency)).diff().iloc[1:].median()
    days = step / pd.Timedelta(days=1)
    return [cycle for cycle in _CYCLES if days < cycle[1] and cycle[4] <= days <= cycle[5]]


# The calendars a most common step of (low, high) days suggests.
_MONTHS = ("JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC")
_CALENDARS = (
    (1, 1, ["B"]),
    (7, 7, [f"W-{day}" for day in ("MON", "TUE", "WED", "THU", "FRI", "SAT", "SUN")]),
    (28, 31, ["MS", "ME"]),
    (89, 92, [f"Q{edge}-{month}" for edge in ("S", "E") for month in _MONTHS]),
    (365, 366, ["YS", "YE"]),
)


def _frequency(timestamps: pd.DatetimeIndex) -> BaseOffset:
    """Pandas' inferred frequency; for data with gaps, where pandas infers nothing, the calendar that fits every
    timestamp with the fewest missing steps among those the most common step suggests (that step when none fits)."""
    if len(timestamps) >= 3:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pandas 3 announces that infer_freq will return an offset
            inferred = pd.infer_freq(timestamps)
        if inferred is not None:
            return to_offset(inferred)
    steps = pd.Series(timestamps).diff().iloc[1:]
    usual = steps.mode().iloc[0]
    days = usual / pd.Timedelta(days=1)
    suggested = [name for low, high, names in _CALENDARS if low <= days <= high for name in names]
    candidates = [to_offset(usual), *map(to_offset, suggested)]
    fitting = [(len(_grid(timestamps, c)), c) for c in candidates if timestamps.isin(_grid(timestamps, c)).all()]
    return min(fitting, key=lambda pair: pair[0])[1] if fitting else candidates[0]


def _grid(timestamps: pd.DatetimeIndex, frequency: BaseOffset) -> pd.DatetimeIndex:
    return pd.date_range(start=timestamps[0], end=timestamps[-1], freq=frequency)


def _warn_about_gaps(series: Sequence[pd.DatetimeIndex], frequency: BaseOffset, source_name: str, column: str) -> None:
    """One warning for all series whose timestamps miss steps of, or fall off, the calendar of ``frequency``."""
    irregular, missing, example = 0, 0, None
    for index, timestamps in enumerate(series):
        if len(timestamps) < 2:
            continue
        grid = _grid(timestamps, frequency)
        on_grid = timestamps.isin(grid)
        if on_grid.all() and len(grid) == len(timestamps):
            continue
        irregular += 1
        missing += max(0, len(grid) - int(on_grid.sum()))
        if example is None:
            off = np.flatnonzero(~on_grid)
            row = int(off[0]) if len(off) else int(np.flatnonzero(~grid[: len(timestamps)].isin(timestamps))[0])
            example = (index, row, timestamps[min(row, len(timestamps) - 1)])
    if irregular:
        which = "" if len(series) == 1 else f" in {irregular} of {len(series)} series (first: series {example[0]})"
        warnings.warn(
            f"{source_name}: column '{column}' is not regularly spaced at its frequency {frequency.freqstr}{which}: "
            f"{missing} missing steps, first near row {example[1]} ({example[2]})",
            stacklevel=3,
        )
