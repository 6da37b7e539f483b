"""The checkpoint door, at the edge: everything that reads, trusts, builds from or restores a checkpoint. The CLI and
the tools come in here; ``Forecaster`` and ``WindowDataModule`` only delegate their ``load_from_checkpoint`` to it.

A checkpoint is a file someone else may have written. On every way in (``--ckpt_path`` and ``fit --weights``, the
tools, ``load_from_checkpoint``, a Trainer of yours given ``CheckpointGuard``) it never:

- runs code or imports what the user did not name: read with ``weights_only=True`` (``reading``), its settings parsed
  while jsonargparse imports only this project, torch's optimizers and what the user named (``imports``);
- fetches anything: a URL is refused, a top-k path is a file of the run's folder (``restore``);
- reads, quotes or changes a file outside what the run names: its settings are parsed without reading the files they
  name (``settings``), and a recorded checkpoint path outside the run's folder is never read or deleted;
- allocates beyond its stored tensors: each tensor's storage checked, its settings built on the meta device and
  compared with its weights before any memory is taken;
- writes non-finite forecasts: its weights finite, its scaling finite with scales above zero;
- overrides the config's optimizer, schedule, early-stopping or machine settings: ``TAKEN``, the one table of what
  each command takes (the tools and ``load_from_checkpoint``, which no config comes with, take its settings);
- resumes to other weights than the uninterrupted run: a resumed fit's state is restored exactly.

What Lightning or torch refuse of a hand-edited file is left to their own error: a non-zero exit, nothing written.
"""

from project.checkpoints.reading import checkpoint_inputs, data_state, read_checkpoint
from project.checkpoints.restore import CheckpointGuard
from project.checkpoints.settings import TAKEN, load_data_state, load_from_checkpoint

__all__ = [
    "TAKEN",
    "CheckpointGuard",
    "checkpoint_inputs",
    "data_state",
    "load_data_state",
    "load_from_checkpoint",
    "read_checkpoint",
]
