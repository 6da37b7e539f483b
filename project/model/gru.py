"""A GRU encoder–decoder forecaster: the second ``ForecastNetwork``, and the smallest one to copy from.

The encoder's last hidden state starts the decoder, which reads the previous target value and the future covariates
of the step it forecasts; the static embedding is added to every input of both. A recurrent decoder is causal by
construction, and its cache is just its hidden state.

Shapes: N batch (times K sample paths), S context, T decoder length, F targets, C covariates, L layers, H hidden size.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor, nn
from typing_extensions import Unpack

from project.domains import DropoutRate, PositiveInt
from project.errors import InputError
from project.model.distributions import Distribution
from project.model.network import ONE_TARGET, Covariates, InputSizes, StaticEmbedding, set_up, with_baseline_path
from project.model.paths import BaselinePath


@dataclass
class GRUEncoded:
    """The encoder's last hidden state (L, N, H), the static embedding (N, 1, H), the forecast steps' future
    covariates (N, T, C_f) and the baseline path's forecast (N, max_length, F; None without a path)."""

    hidden: Tensor
    static: Tensor | None = None
    future: Tensor | None = None
    baseline: Tensor | None = None


class GRUCache:
    """The decoder's hidden state after the positions decoded so far, (L, N, H), and how many there were; owned like a
    ``KVCache``. Empty (``hidden`` None) until the first call, which starts from the encoder's state."""

    def __init__(self) -> None:
        self.hidden: Tensor | None = None
        self.length = 0


class GRUForecaster(nn.Module):
    """GRU encoder–decoder with covariates and a distribution head; one time step per token.

    Args:
        sizes: The sizes of its inputs (target channels, covariates, static covariates), linked from the data.
        hidden_size: Width H of the hidden state of both GRUs.
        num_layers: Stacked GRU layers in the encoder and in the decoder.
        dropout: Dropout between stacked layers (off in ``eval()``).
        distribution: What the head predicts and trains with, by class_path, as in ``ForecastTransformer``.
        baseline_path: What the network forecasts the residual over, by class_path, as in ``ForecastTransformer``.
        max_length: Time steps the baseline path's forecast covers, linked from the context length and
            ``max_horizon`` as the transformer's positional encoding is (unused without a path).
    """

    patch_length = 1  # a recurrent decoder steps through time one value at a time

    def __init__(
        self,
        sizes: InputSizes = ONE_TARGET,
        hidden_size: PositiveInt = 64,
        num_layers: PositiveInt = 2,
        dropout: DropoutRate = 0.0,
        distribution: Distribution | None = None,
        baseline_path: BaselinePath | None = None,
        max_length: PositiveInt = 1024,
    ) -> None:
        super().__init__()
        set_up(self, locals())
        self.max_length = max_length
        self.static_embedding = StaticEmbedding(sizes, hidden_size) if sizes.has_static else None
        self.encoder_input = nn.Linear(self.n_targets + self.n_past_covariates + self.n_future_covariates, hidden_size)
        self.decoder_input = nn.Linear(sizes.n_targets + sizes.n_future_covariates, hidden_size)
        self.encoder = nn.GRU(hidden_size, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.decoder = nn.GRU(hidden_size, hidden_size, num_layers, batch_first=True, dropout=dropout)
        self.head = nn.Linear(hidden_size, sizes.n_targets * self.distribution.n_parameters)

    def encode(self, context: Tensor, **covariates: Unpack[Covariates]) -> GRUEncoded:
        length, past, future = context.shape[1], covariates.get("past_covariates"), covariates.get("future_covariates")
        self._check("context", context, self.n_targets)
        inputs = [context]
        if self.n_past_covariates:
            inputs.append(self._check("past_covariates", past, self.n_past_covariates, length))
        if self.n_future_covariates:
            inputs.append(self._check("future_covariates", future, self.n_future_covariates)[:, :length])
        static = None
        if self.static_embedding is not None:
            categorical, real = covariates.get("static_categorical"), covariates.get("static_real")
            static = self.static_embedding(categorical, real).unsqueeze(1)  # (N, 1, H)
        x = self.encoder_input(torch.cat(inputs, dim=-1))  # (N, S, H)
        _, hidden = self.encoder(x if static is None else x + static)  # (L, N, H)
        future = future[:, length:] if self.n_future_covariates else None
        return GRUEncoded(hidden, static, future, self.baseline_path.forecast(context, self.max_length))

    def decode(self, tgt: Tensor, encoded: GRUEncoded, cache: GRUCache | None = None) -> Tensor:
        self._check("tgt", tgt, self.n_targets)
        offset, steps = (0 if cache is None else cache.length), tgt.shape[1]
        inputs, future = [tgt], encoded.future
        if future is not None:
            if offset + steps > future.shape[1]:
                raise ValueError(f"future_covariates cover {future.shape[1]} forecast steps; got {offset + steps}")
            inputs.append(future[:, offset : offset + steps])
        x = self.decoder_input(torch.cat(inputs, dim=-1))  # (N, T, H)
        hidden = encoded.hidden if cache is None or cache.hidden is None else cache.hidden
        output, hidden = self.decoder(x if encoded.static is None else x + encoded.static, hidden.contiguous())
        if cache is not None:
            cache.hidden, cache.length = hidden, offset + steps
        raw = self.head(output).view(*tgt.shape, self.distribution.n_parameters)
        return with_baseline_path(self, self.distribution.constrain(raw), encoded.baseline, offset)

    def new_cache(self, steps: int | None = None) -> GRUCache:
        return GRUCache()

    def start_of(self, context: Tensor) -> Tensor:
        return context[:, -1:]

    def _check(self, name: str, values: Tensor | None, width: int, length: int | None = None) -> Tensor:
        if values is None or values.dim() != 3 or values.shape[-1] != width or (length and values.shape[1] != length):
            got = None if values is None else tuple(values.shape)
            raise InputError(f"{name} must have shape (N, {length or 'length'}, {width}); got {got}")
        return values
