"""How each series' rows are split into training, validation and test: a component given by ``class_path``, e.g.
``data.split: {class_path: project.data.LastRows, init_args: {val_size: 48, test_size: 48}}``. Yours is a subclass
with ``rows`` and its arguments in ``init_args`` (what ``description`` names); the data module checks that every
split holds a window.
"""

from __future__ import annotations

import itertools
from abc import ABC, abstractmethod

import numpy as np
import pandas as pd

from project.domains import Fraction, PositiveInt
from project.errors import InputError


class Split(ABC):
    """Where the train, validation and test rows of each series end. ``init_args``: the constructor's arguments,
    recorded in checkpoints so that they can rebuild it."""

    init_args: dict

    @abstractmethod
    def rows(self, observed: np.ndarray, rows_before) -> list[np.ndarray]:
        """Three arrays (series,): the local rows ending each series' train, validation and test targets, given its
        ``observed`` rows and ``rows_before(date)`` (each series' observed rows strictly before a timestamp; None when
        the data has no time column)."""

    def description(self) -> str:
        """The split as the messages name it: its arguments (``val_size=48, test_size=48``)."""
        return ", ".join(f"{name}={value}" for name, value in self.init_args.items())


class Fractions(Split):
    """Shares of each series' rows, from its start: training, then validation, then test.

    Args:
        train: Share of each series' rows for training.
        val: Share after the training rows, for validation.
        test: Share after the validation rows, for testing.
    """

    def __init__(self, train: Fraction = 0.7, val: Fraction = 0.1, test: Fraction = 0.2) -> None:
        self.init_args = {"train": train, "val": val, "test": test}
        if (total := train + val + test) > 1 + 1e-9:
            raise InputError(f"train + val + test must be at most 1; got {train} + {val} + {test} = {total:g}")
        self.shares = (train, val, test)

    def rows(self, observed: np.ndarray, rows_before) -> list[np.ndarray]:
        return [np.minimum(observed, np.round(observed * share)) for share in np.cumsum(self.shares)]

    def description(self) -> str:
        return "fractions " + "/".join(str(share) for share in self.shares)


class Dates(Split):
    """The same dates for every series (needs the data's ``time_column``).

    Args:
        val_start: First timestamp of the validation split.
        test_start: First timestamp of the test split.
        test_end: Timestamp after the last test row (exclusive). Empty: the end of each series.
    """

    def __init__(self, val_start: str, test_start: str, test_end: str | None = None) -> None:
        self.init_args = given = {"val_start": val_start, "test_start": test_start, "test_end": test_end}
        ordered = []
        for name, date in given.items():
            if date is not None:
                try:
                    ordered.append((name, pd.Timestamp(date)))
                except (ValueError, TypeError):
                    raise InputError(f"{name} must be a date or timestamp; got {date!r}") from None
        for (earlier, first), (later, second) in itertools.pairwise(ordered):
            if first >= second:
                raise InputError(f"{earlier}={given[earlier]} must be before {later}={given[later]}")
        self.dates = (val_start, test_start, test_end)

    def rows(self, observed: np.ndarray, rows_before) -> list[np.ndarray]:
        if rows_before is None:
            raise InputError("a split by dates (val_start, test_start, test_end) needs time_column; got none")
        val_start, test_start, test_end = self.dates
        end = observed if test_end is None else np.minimum(rows_before(test_end), observed)
        return [rows_before(val_start), rows_before(test_start), end]


class LastRows(Split):
    """The last rows of each series: the test rows at the end, the validation rows before them (M4's rule).

    Args:
        val_size: Validation rows before the test rows of each series.
        test_size: Test rows at the end of each series (e.g. the competition horizon).
    """

    def __init__(self, val_size: PositiveInt, test_size: PositiveInt) -> None:
        self.init_args = {"val_size": val_size, "test_size": test_size}
        self.sizes = (val_size, test_size)

    def rows(self, observed: np.ndarray, rows_before) -> list[np.ndarray]:
        val_size, test_size = self.sizes
        return [observed - test_size - val_size, observed - test_size, observed]


def as_split(split: Split | None) -> Split:
    """A split as given, or ``Fractions()`` for none."""
    if split is None:
        return Fractions()
    if not isinstance(split, Split):
        raise InputError(
            f"split must be a project.data.splits.Split (Fractions, Dates, LastRows or yours); got {split!r}"
        )
    return split
