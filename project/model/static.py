"""The static covariates of a series as one vector, shared by the networks (each adds it to its inputs)."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from project.model.network import InputSizes


class StaticEmbedding(nn.Module):
    """One vector per series from its static covariates: a learned embedding per category (index 0 is "unknown",
    for categories not seen in training) and a linear map of the numeric ones, summed."""

    def __init__(self, sizes: InputSizes, d_model: int) -> None:
        super().__init__()
        self.categories = nn.ModuleList(nn.Embedding(count + 1, d_model) for count in sizes.static_cardinalities)
        self.reals = nn.Linear(sizes.n_static_reals, d_model) if sizes.n_static_reals else None

    def forward(self, categorical: Tensor | None, reals: Tensor | None) -> Tensor:
        parts = [embedding(categorical[:, i]) for i, embedding in enumerate(self.categories)]
        if self.reals is not None:
            parts.append(self.reals(reals))
        return torch.stack(parts).sum(0)  # (N, d_model)
