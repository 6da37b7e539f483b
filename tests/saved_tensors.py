"""Deterministic memory accounting: bytes autograd keeps alive for backward, which the tests assert on and the
benchmark (``project/tools/bench.py``, run from the repository root) reports."""

from __future__ import annotations

from collections.abc import Iterable

import torch
from torch import Tensor
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode


class SavedTensorsMeter:
    """Counts the bytes of every storage saved for backward inside the ``with`` block, each storage once.

    Unlike allocator statistics this does not depend on the device, the allocator or timing, so tests can
    assert on it. Storages of ``exclude`` (usually the model's parameters) are not counted: they are in memory
    whatever the training regime.
    """

    def __init__(self, exclude: Iterable[Tensor] = ()) -> None:
        self._excluded = {t.untyped_storage().data_ptr() for t in exclude}
        self._storages: dict[int, int] = {}
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, lambda tensor: tensor)

    @property
    def bytes(self) -> int:
        return sum(self._storages.values())

    def _pack(self, tensor: Tensor) -> Tensor:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in self._excluded:
            # Saved tensors stay alive until backward, so a storage address is never reused inside the block.
            self._storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    def __enter__(self) -> SavedTensorsMeter:
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._hooks.__exit__(*exc_info)


class LargestStorage(TorchDispatchMode):
    """The largest storage any operation inside the ``with`` block created on a real device (a meta tensor takes no
    memory): what loading a checkpoint allocated at most, asserted without reading the allocator."""

    def __init__(self) -> None:
        super().__init__()
        self.bytes = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        output = func(*args, **(kwargs or {}))
        for tensor in pytree.tree_leaves(output):
            if isinstance(tensor, Tensor) and tensor.device.type != "meta":
                self.bytes = max(self.bytes, tensor.untyped_storage().nbytes())
        return output
