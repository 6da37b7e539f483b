"""Data: reading and checking tables, windows, the DataModule and the embedded synthetic series."""

from project.data.datamodule import WindowDataModule
from project.errors import InputError

__all__ = ["InputError", "WindowDataModule"]
