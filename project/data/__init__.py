"""Data: reading and checking tables, windows, the DataModule and the embedded synthetic series."""

from project.data.datamodule import InputError, WindowDataModule

__all__ = ["InputError", "WindowDataModule"]
