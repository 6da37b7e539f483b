"""Data: reading and checking tables, windows, the DataModule and the embedded synthetic series."""

from project.data.datamodule import WindowDataModule
from project.data.splits import Dates, Fractions, LastRows, Split
from project.errors import InputError

__all__ = ["Dates", "Fractions", "InputError", "LastRows", "Split", "WindowDataModule"]
