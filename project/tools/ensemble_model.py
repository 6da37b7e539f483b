"""Several trained forecasters as one: the mean of their point forecasts and, for models with a distribution, the
pool of their sample paths, whose quantiles are reported: the equal-weight mixture of the members' distributions
when each draws as many paths (``num_samples``; otherwise each weighs by its number of paths).

``Ensemble`` is a LightningModule for Lightning's own loops, ``trainer.predict`` (through ``ForecastWriter``, the CSV
of one model's ``predict``) and ``trainer.test`` (``test/<score>``, as a model logs them), and it forecasts like a
``Forecaster`` (``forecast(batch, horizon)``), so that what evaluates one model (backtest) evaluates it too. Its
members read the same batches: the data module of one of them, which the caller checks (``project.tools``' checkpoint
commands check that the members were trained on the same columns and scaling).

A mixture of calibrated members is not itself calibrated: each member's paths keep the interval scale its own
calibration gave them, and the pool is wider where the members disagree.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import lightning as L
import torch
from torch import Tensor, nn
from torchmetrics import MeanMetric

from project.errors import InputError
from project.training.metrics import forecast_scores, score_names
from project.training.module import Forecast, Forecaster, prediction_of, quantiles_of


def combined(forecasts: Sequence[Forecast], levels: Sequence[float]) -> Forecast:
    """One forecast of several of the same values: the mean of their points and, when they have sample paths, the
    paths pooled along the sample dimension (N, K₁ + K₂ + …, T, F) with the quantiles at ``levels`` of the pool."""
    point = torch.stack([forecast.point for forecast in forecasts]).mean(dim=0)
    if forecasts[0].samples is None:
        return Forecast(point)
    samples = torch.cat([forecast.samples for forecast in forecasts], dim=1)
    return Forecast(point, quantiles_of(samples, list(levels)), samples)


class Ensemble(L.LightningModule):
    """Trained forecasters whose forecasts are combined (``combined``) into one: their points averaged, their paths
    pooled.

    The ensemble takes its first member's ``predict_horizon``, ``interval`` (which evaluation scores) and
    ``prediction_quantiles``; each member forecasts with its own settings (samples, normalisation, calibration).

    Args:
        members: Two or more forecasters (``Forecaster``, eval mode) with the same context length, horizon, number of
            targets, and all with a distribution or none; refused in one line, naming the member, otherwise.
        names: What the messages call each member (its checkpoint); default ``member 0``, ``member 1``, ….
    """

    def __init__(self, members: Sequence[Forecaster], names: Sequence[str] | None = None) -> None:
        super().__init__()
        names = [str(name) for name in names] if names is not None else [f"member {i}" for i in range(len(members))]
        check_members(members, names)
        self.members = nn.ModuleList(members)
        first = members[0]
        # What evaluation and backtest read from a model's hparams, as the first member has them.
        settings = ("context_length", "horizon", "predict_horizon", "interval")
        self.save_hyperparameters({name: first.hparams[name] for name in settings}, logger=False)
        self.prediction_quantiles = list(first.prediction_quantiles)
        self.has_distribution = first.has_distribution
        # As a Forecaster keeps its scores: a sum and a count per score, NaN kept rather than averaged away.
        scores = score_names(self.has_distribution)
        self.test_scores = nn.ModuleDict({name: MeanMetric(nan_strategy=math.nan) for name in scores})

    def setup(self, stage: str) -> None:
        for member in self.members:  # what each checks of the device it runs on (a CUDA graph needs CUDA)
            member.setup(stage)

    def forward(self, batch: dict[str, Tensor] | Tensor, horizon: int | None = None) -> Tensor:
        """The ensemble's point forecast (N, horizon, F) of a batch (or of a bare context tensor)."""
        return self.forecast(batch, horizon).point

    def forecast(self, batch: dict[str, Tensor] | Tensor, horizon: int | None = None) -> Forecast:
        """Every member's free-running forecast of ``horizon`` steps (default: the trained horizon), combined."""
        forecasts = [member.forecast(batch, horizon) for member in self.members]
        return combined(forecasts, self.prediction_quantiles)

    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> dict[str, Tensor]:
        """The combined forecast in original units, with the window and series it belongs to, as a model's."""
        return prediction_of(batch, self.forecast(batch, self.hparams.predict_horizon or self.hparams.horizon))

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> Forecast:
        """Scores the combined forecast of the batch, logged as ``test/<score>`` like a model's."""
        target = batch["target"]
        forecast = self.forecast(batch, target.shape[1])
        per_value = forecast_scores(
            forecast.point, target, batch["loc"], batch["scale"], forecast.samples, self.hparams.interval
        )
        for name, values in per_value.items():
            self.test_scores[name].update(values)
            self.log(f"test/{name}", self.test_scores[name])
        return forecast


def check_members(members: Sequence[Forecaster], names: Sequence[str]) -> None:
    """Refuse in one line members that cannot be combined: fewer than two, or one whose context length, horizon,
    number of targets or having a distribution differs from the first's, named with both values."""
    if len(members) < 2:
        raise InputError(f"an ensemble needs at least two members; got {len(members)}")
    expected = shared_settings(members[0])
    for member, name in zip(members[1:], names[1:], strict=True):
        differing = [
            f"{setting}={value!r} ({names[0]}: {expected[setting]!r})"
            for setting, value in shared_settings(member).items()
            if value != expected[setting]
        ]
        if differing:
            raise InputError(
                f"{name} does not forecast what {names[0]} does: {', '.join(differing)}; an ensemble's members "
                "forecast the same values from the same windows"
            )


def shared_settings(member: Forecaster) -> dict[str, object]:
    """The settings of a member that every other member shares, so that they forecast the same values from the same
    batches."""
    return {
        "context_length": member.hparams.context_length,
        "horizon": member.hparams.horizon,
        "n_targets": member.network.n_targets,
        "has_distribution": member.has_distribution,
    }
