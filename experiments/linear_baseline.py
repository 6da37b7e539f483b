"""The linear baselines of the results tables: one least-squares linear map from the look-back window to the
horizon, shared by all channels (each channel is an independent sample), fitted on the training windows in closed
form; in NLinear's form (Zeng et al. 2023) it maps the look-back minus its last value and adds that value back."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset


class LinearBaseline:
    """Least-squares map ``y = W x + b`` from a channel's look-back (S values) to its horizon (H values).

    Fitted through the normal equations accumulated in float64 over the training windows, with a small ridge
    term so that a rank-deficient look-back (e.g. a constant channel) still has a unique solution. With
    ``relative_to_last`` (NLinear's form), inputs and outputs are taken relative to the look-back's last value,
    which makes the map indifferent to a window's level.
    """

    def __init__(self, ridge: float = 1e-3, relative_to_last: bool = False) -> None:
        self.ridge = ridge
        self.relative_to_last = relative_to_last
        self.weight: Tensor | None = None  # (S + 1, H), the last row is the intercept

    def fit(self, windows: Dataset, batch_size: int = 1024) -> LinearBaseline:
        gram = cross = None
        for batch in DataLoader(windows, batch_size=batch_size):
            last = self._last(batch["context"])
            inputs, outputs = self._design(batch["context"] - last), _per_channel(batch["target"] - last)
            if gram is None:
                gram = torch.zeros(inputs.shape[1], inputs.shape[1], dtype=torch.float64)
                cross = torch.zeros(inputs.shape[1], outputs.shape[1], dtype=torch.float64)
            gram += inputs.T @ inputs
            cross += inputs.T @ outputs
        gram += self.ridge * torch.eye(len(gram), dtype=torch.float64)
        self.weight = torch.linalg.solve(gram, cross)
        return self

    def __call__(self, context: Tensor) -> Tensor:
        """(N, S, F) → (N, H, F)."""
        batch, _, n_features = context.shape
        last = self._last(context)
        forecast = self._design(context - last) @ self.weight  # (N·F, H)
        return (forecast.reshape(batch, n_features, -1).transpose(1, 2) + last.double()).to(context.dtype)

    def _last(self, context: Tensor) -> Tensor:
        """What the inputs and outputs are taken relative to: (N, 1, F), zero unless ``relative_to_last``."""
        return context[:, -1:] if self.relative_to_last else torch.zeros_like(context[:, -1:])

    @staticmethod
    def _design(context: Tensor) -> Tensor:
        inputs = _per_channel(context)
        return torch.cat([inputs, torch.ones(len(inputs), 1, dtype=inputs.dtype)], dim=1)  # (N·F, S + 1)


def _per_channel(windows: Tensor) -> Tensor:
    """(N, length, F) → (N·F, length) in float64: every channel of every window as one sample."""
    return windows.transpose(1, 2).reshape(-1, windows.shape[1]).double()
