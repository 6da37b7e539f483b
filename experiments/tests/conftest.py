"""The studies' tests use the template's fixtures (tests/conftest.py): the short runs they read checkpoints from,
the real-data folder, and the per-test seed and working folder."""

from tests.conftest import (  # noqa: F401  (fixtures, registered by being names of this module)
    _cache_in_tmp,
    _seed,
    data_dir,
    etth1,
    hostile_checkpoint,
    user_run,
)
