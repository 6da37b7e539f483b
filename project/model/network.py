"""What the training code asks of a network, the ``ForecastNetwork`` protocol, and what the networks share.

The training code, the decoding (``project.model.decoding``: rollouts, sampling, CUDA graphs, written once for every
network) and the tools call only what is listed here. ``tests/model/test_network_contract.py`` checks a class against
the contract: add yours to the ``NETWORKS`` table of ``tests/helpers.py``.

Shapes: N series, S context length, T decoder length, F = ``n_targets`` target channels, P = ``patch_length``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Protocol, TypedDict, runtime_checkable

import torch
from torch import Tensor, nn
from typing_extensions import Unpack  # typing's own from Python 3.11 on

from project.errors import InputError
from project.model.distributions import Distribution, PointForecast, check_distribution
from project.model.paths import BaselinePath, NoPath, check_baseline_path


@dataclass(frozen=True)
class InputSizes:
    """What the data decides about a network's inputs, linked from the data module (``data.input_sizes``) into the
    network's ``sizes`` argument; a checkpoint records it as a dict, which its parser makes this again.

    Attributes:
        n_targets: Target channels F: forecast, and fed back as decoder inputs.
        n_past_covariates: Covariates observed only over the context window.
        n_future_covariates: Covariates known over the context and the forecast steps (calendar features included).
        static_cardinalities: Categories of each categorical static covariate.
        n_static_reals: Numeric static covariates.
    """

    n_targets: int = 1
    n_past_covariates: int = 0
    n_future_covariates: int = 0
    static_cardinalities: tuple[int, ...] = ()
    n_static_reals: int = 0

    def __post_init__(self) -> None:  # a checkpoint or a config gives a list
        object.__setattr__(self, "static_cardinalities", tuple(self.static_cardinalities))

    @property
    def has_static(self) -> bool:
        return bool(self.static_cardinalities) or self.n_static_reals > 0


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


class Covariates(TypedDict, total=False):
    """The covariates a batch may hold beside its context, under the batch format's names (``project.data.windows``),
    as ``encode`` takes them: past covariates (N, S, C_p), future covariates over the context and the forecast
    (N, S + T, C_f), static covariates (N, C_c) long and (N, C_r)."""

    past_covariates: Tensor
    future_covariates: Tensor
    static_categorical: Tensor
    static_real: Tensor


ONE_TARGET = InputSizes()  # a network's default: one target channel, no covariates


@runtime_checkable
class ForecastNetwork(Protocol):
    """An encoder–decoder forecaster whose decoder can run one position at a time.

    Guarantees the training code relies on (the regimes are exact only if they hold):

    - **Causality.** ``decode(tgt, encoded)[:, t]`` depends only on ``encoded`` and ``tgt[:, : t + 1]`` (rounded up
      to the end of the patch holding step t). ``free_running_detach`` computes a whole free-running forecast in
      one parallel pass because of it.
    - **Cached decoding equals full decoding.** Decoding ``tgt`` one patch at a time, passing the same ``cache``
      (from ``new_cache``) to every call, returns what one call on the whole ``tgt`` returns, and is differentiable
      the same way. Dropout, if any, must not make the two differ in ``eval()`` mode.
    - **Patches.** A token is ``patch_length`` consecutive time steps: every length given to ``decode`` (and the
      context given to ``encode``) is a positive multiple of it, and ``decode`` returns one forecast per input time
      step, the value ``patch_length`` steps after it.
    - **Shapes.** ``decode`` returns the distribution's constrained parameters (N, T, F, ``distribution.n_parameters``).
      ``encoded`` is whatever ``encode`` returns; the training code only passes it back to ``decode``.

    Attributes:
        n_targets: Target channels F, forecast and fed back.
        patch_length: Time steps per decoder token P (1 for one token per step).
        distribution: The output head's distribution (a ``project.model.distributions.Distribution``, an argument
            of the network given by class_path): the head's size, the loss, what is fed back and how draws are made.
        init_args: The constructor's arguments, so that a checkpoint can rebuild the network
            (``set_up(self, locals())``, or ``self.init_args = init_args(locals())``, as the first line after
            ``super().__init__()``). Its ``sizes: InputSizes`` argument is linked from the data.

    Optional members, used when present:
        ``baseline_path``: what the network forecasts the residual over (a ``project.model.paths.BaselinePath``, an
            argument given by class_path; ``set_up`` makes it ``NoPath`` when none is given). The training code never
            reads it: ``decode`` returns the full forecast, its distribution's location moved by the path's values
            (``with_baseline_path``), so every guarantee above is about the full forecast.
        ``share_encoded(encoded, samples)``: the same conditioning for ``samples`` sample paths per series, rows
            ordered (series, sample), without copying the encoder's output. Without it, ``generate`` encodes the
            inputs repeated ``samples`` times: the same paths, more work.
        ``new_fixed_shape_cache(encoded, steps)``: a cache of fixed shapes with a ``position`` tensor (0-dim, long) that
            the caller sets before each one-token ``decode``: what CUDA graphs (``cuda_graph``) and export need.
    """

    n_targets: int
    patch_length: int
    distribution: Distribution
    init_args: dict[str, Any]

    def encode(self, context: Tensor, **covariates: Unpack[Covariates]) -> Any:
        """Context targets (N, S, F) and the batch's ``Covariates`` → what ``decode`` conditions on."""

    def decode(self, tgt: Tensor, encoded: Any, cache: Any = None) -> Tensor:
        """Decoder inputs (N, T, F) → parameters (N, T, F, n_parameters) of the values P steps later. With a
        ``cache``, ``tgt`` holds only the positions after those already decoded into it."""

    def new_cache(self, steps: int | None = None) -> Any:
        """An empty cache for one batch's incremental decoding of (up to) ``steps`` time steps."""

    def start_of(self, context: Tensor) -> Tensor:
        """The first decoder input (N, P, F), taken from the context: usually its last patch."""


def set_up(network: nn.Module, frame_locals: dict[str, Any]) -> None:
    """What every network's ``__init__`` starts with, right after ``super().__init__()``, as ``set_up(self,
    locals())``: its arguments recorded in ``init_args``, its
    ``distribution`` (a ``PointForecast`` when none is given), its ``baseline_path`` (``NoPath`` when none is given)
    and the input widths of its ``sizes``."""
    network.init_args = init_args(frame_locals)
    network.distribution = frame_locals.get("distribution") or PointForecast()
    check_distribution(network.distribution, type(network).__name__)
    network.baseline_path = frame_locals.get("baseline_path") or NoPath()
    check_baseline_path(network.baseline_path, type(network).__name__)
    sizes = frame_locals["sizes"]
    network.n_targets, network.n_past_covariates = sizes.n_targets, sizes.n_past_covariates
    network.n_future_covariates = sizes.n_future_covariates


def init_args(frame_locals: dict[str, Any]) -> dict[str, Any]:
    """A constructor's arguments from its ``locals()`` (before any other local is made), as a checkpoint records them:
    tuples as lists, a component such as the distribution as its class_path and init_args."""
    return {name: _recorded(value) for name, value in frame_locals.items() if name not in ("self", "__class__")}


def _recorded(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_recorded(v) for v in value]
    if isinstance(value, (int, float)) and not isinstance(value, bool):  # a parser type (PositiveInt) as a plain number
        return int(value) if isinstance(value, int) else float(value)
    if isinstance(value, (Distribution, BaselinePath)):
        return component_spec(value)
    if isinstance(value, InputSizes):
        return {name: _recorded(v) for name, v in asdict(value).items()}
    return value


def component_spec(component: object) -> dict[str, Any]:
    """How checkpoints and configs name a network, distribution or regime: ``{"class_path": ..., "init_args": ...}``."""
    cls = type(component)
    arguments = getattr(component, "init_args", None)
    if not isinstance(arguments, dict):
        raise InputError(
            f"{cls.__qualname__} must record its constructor arguments in self.init_args (see "
            "project.model.network.init_args), so that checkpoints can rebuild it"
        )
    return {"class_path": f"{cls.__module__}.{cls.__qualname__}", "init_args": init_args(arguments)}


def with_baseline_path(network: nn.Module, parameters: Tensor, baseline: Tensor | None, start: int | Tensor) -> Tensor:
    """Decoded ``parameters`` (N, T, F, n_parameters) of forecast steps ``start``.. moved by the network's baseline
    path: ``baseline`` (N, steps, F) is the path's forecast its ``encode`` kept (None without a path). A tensor
    ``start`` (a fixed-shape cache's position) is gathered, so that a step's shapes do not depend on it."""
    if baseline is None:
        if not isinstance(getattr(network, "baseline_path", None), (NoPath, type(None))):
            raise InputError(
                f"{type(network).__name__} forecasts the residual over its baseline path, and the encoded state it "
                "decodes holds no forecast of the path; decode what its encode returns"
            )
        return parameters
    length = parameters.shape[1]
    if isinstance(start, Tensor):
        values = baseline.index_select(1, start + torch.arange(length, device=start.device))
    elif start + length > baseline.shape[1]:
        raise ValueError(
            f"the baseline path was forecast for {baseline.shape[1]} steps; decoding step {start + length} needs it "
            "for every step up to it (raise the network's max_length)"
        )
    else:
        values = baseline[:, start : start + length]
    return network.distribution.shift(parameters, values)


network_spec = component_spec  # how a checkpoint and a config name a network
