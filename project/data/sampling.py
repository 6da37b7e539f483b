"""Which windows each process reads, in which order, and where a resumed run picks up.

A resumed run skips the batches it already trained on, so it reaches the parameters of a run never interrupted.
Both samplers subclass ``DistributedSampler`` so that Lightning keeps them instead of putting its own in their place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class TrainingOrder(DistributedSampler):
    """A permutation of the dataset drawn from ``seed + epoch`` only; process ``rank`` takes every ``world_size``-th
    index, the list padded with its own start so that every process has as many batches (as DDP needs).

    ``current_epoch`` (the Trainer's epochs completed) decides the epoch when given, not ``set_epoch``: Lightning sets
    a sampler's epoch from its epochs *processed*, which it counts twice for an epoch whose end a resumed run restarts
    (a checkpoint saved at an epoch's end), and the order of every later epoch would be another run's."""

    def __init__(
        self,
        dataset: Dataset,
        seed: int,
        rank: int = 0,
        world_size: int = 1,
        current_epoch: Callable[[], int] | None = None,
    ) -> None:
        super().__init__(dataset, num_replicas=world_size, rank=rank, shuffle=True, seed=seed, drop_last=False)
        self.resume_at: tuple[int, int] | None = None  # when resuming: (epoch, its indices already trained on)
        self.current_epoch = current_epoch

    def __iter__(self) -> Iterator[int]:
        if self.current_epoch is not None:
            self.epoch = self.current_epoch()
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        dtype = torch.int32 if self.total_size < 2**31 else torch.int64
        # A tensor, not a list: a Python int per window costs 36 bytes, 250 MB for 7 million windows.
        order = torch.randperm(len(self.dataset), generator=generator, dtype=dtype)
        # Padded with its own start to a multiple of the processes: positions n, n + 1, … read 0, 1, …
        shard = torch.cat([order, order[: self.total_size - len(order)]])[self.rank :: self.num_replicas]
        (epoch, skip), self.resume_at = self.resume_at or (self.epoch, 0), None
        skip = skip if epoch == self.epoch else 0  # an epoch that had ended: the next one is read whole
        return (index for part in shard[skip:].split(4096) for index in part.tolist())


class EvaluationShard(DistributedSampler):
    """Windows ``rank, rank + world_size, …`` in order: each window once over all processes, shards may differ in
    length by one (``DistributedSampler`` pads with repeated windows: DDP metrics would differ from one process's)."""

    def __init__(self, dataset: Dataset, rank: int = 0, world_size: int = 1) -> None:
        super().__init__(dataset, num_replicas=world_size, rank=rank, shuffle=False, drop_last=False)
        self.num_samples = len(range(rank, len(dataset), world_size))
        self.total_size = len(dataset)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.rank, len(self.dataset), self.num_replicas))


class ResumableLoader(DataLoader):
    """A training ``DataLoader`` whose position travels in Lightning's checkpoints (``state_dict``). ``batches_done``
    reports how many batches of the current epoch the Trainer has trained on; the loader's own iterator cannot tell,
    because the Trainer and the workers fetch batches ahead."""

    def __init__(self, *args, sampler: TrainingOrder, batches_done: Callable[[], int], **kwargs) -> None:
        super().__init__(*args, sampler=sampler, **kwargs)
        self._batches_done = batches_done

    def state_dict(self) -> dict:
        return {"epoch": self.sampler.epoch, "batches_done": self._batches_done()}

    def load_state_dict(self, state: dict) -> None:
        # Lightning loads this state and may draw the first batch before it announces the epoch (``set_epoch``), so
        # the epoch is restored here too; if it announces the next one (the saved epoch had ended), nothing is skipped.
        self.sampler.set_epoch(state["epoch"])
        self.sampler.resume_at = (state["epoch"], state["batches_done"] * self.batch_size)
