"""The studies' tests use the template's fixtures (tests/conftest.py): the short runs they read checkpoints from,
the real-data folder, and the per-test seed and working folder; and a file shaped like ETTh1 for the studies that read
its columns."""

import numpy as np
import pandas as pd
import pytest

from tests.conftest import (  # noqa: F401  (fixtures, registered by being names of this module)
    _cache_in_tmp,
    _seed,
    data_dir,
    etth1,
    hostile_checkpoint,
    user_run,
)


@pytest.fixture
def etth1_shaped(tmp_path):
    """A CSV with ETTh1's columns and dates (a daily cycle and noise): enough for the preset's split."""
    hours = pd.date_range("2016-07-01", periods=17420, freq="h")
    noise = np.random.default_rng(0).normal(size=(len(hours), 7))
    values = np.sin(2 * np.pi * np.arange(len(hours)) / 24)[:, None] + 0.1 * noise
    frame = pd.DataFrame(values, columns=["HUFL", "HULL", "MUFL", "MULL", "LUFL", "LULL", "OT"])
    frame.insert(0, "date", hours.strftime("%Y-%m-%d %H:%M:%S"))
    path = tmp_path / "ETTh1.csv"
    frame.to_csv(path, index=False)
    return path
