"""The LightningModule: training regimes, losses, metrics and optimisation around an injected network."""

from __future__ import annotations

import functools
import inspect
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lightning as L
import torch
from lightning.pytorch.cli import LRSchedulerCallable, OptimizerCallable
from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import TensorBoardLogger
from torch import Tensor, nn
from torchmetrics import MeanMetric

from project import rules
from project.domains import AtLeastTwo, OpenUnitInterval, PositiveInt, UnitLevels
from project.errors import InputError, TrainingDiverged
from project.model.decoding import generate
from project.model.distributions import DEFAULT_QUANTILES, Distribution, check_distribution
from project.model.network import ForecastNetwork, component_spec, network_spec
from project.rules import DEFAULT_INTERVAL, DEFAULT_NUM_SAMPLES, ends_inside_a_patch, longest_forecast
from project.training.metrics import forecast_scores, score_names, unscale
from project.training.normalisation import Normalisation
from project.training.regimes import REGIMES, FreeRunning, Regime
from project.training.schedules import WarmupStableDecay, decaying_schedule

DEFAULT_REGIME = FreeRunning()  # free-running detach: immutable, so one instance serves every model
# Without a schedule that decays when validation stops improving, a fade on the run's own clock spans this share of
# its optimizer steps: about what the decoder-depth study used (ETTh1 100 of 212 steps, M4 Hourly 140 of about 280).
FADE_SHARE_OF_RUN = 0.5
COVARIATES = ("past_covariates", "future_covariates", "static_categorical", "static_real")
# What torch raises for an optimizer or scheduler setting it refuses, when built or first stepped.


@dataclass
class Forecast:
    """A forecast in the units of the batch (scaled): the point forecast (N, T, F), and for a model with a
    distribution the ``prediction_quantiles`` (N, T, F, Q) and the sample paths (N, K, T, F)."""

    point: Tensor
    quantiles: Tensor | None = None
    samples: Tensor | None = None


def quantiles_of(samples: Tensor, levels: list[float]) -> Tensor:
    """The quantiles (N, T, F, Q) at ``levels`` of sample paths (N, K, T, F), interpolated between draws."""
    return torch.quantile(samples, samples.new_tensor(levels), dim=1).permute(1, 2, 3, 0)


def prediction_of(batch: dict[str, Tensor], forecast: Forecast) -> dict[str, Tensor]:
    """What ``predict_step`` returns for a batch's ``forecast`` and what ``ForecastWriter`` writes: the point forecast
    and any quantiles in original units, with the window and series each belongs to."""
    loc, scale = batch["loc"], batch["scale"]
    prediction = {"window": batch["window"], "series": batch["series"], "point": unscale(forecast.point, loc, scale)}
    if forecast.quantiles is not None:
        prediction["quantiles"] = unscale(forecast.quantiles, loc.unsqueeze(-1), scale.unsqueeze(-1))
    return prediction


class ContextNorm:
    """A batch's windows scaled by ``normalisation``'s statistics of their context (None: left as they are)."""

    def __init__(self, context: Tensor, normalisation: Normalisation | None) -> None:
        self.enabled = normalisation is not None
        if normalisation is not None:
            self.loc, self.scale = normalisation.statistics(context)  # (N, 1, F) each

    def __call__(self, values: Tensor) -> Tensor:
        return (values - self.loc) / self.scale if self.enabled else values

    def inverse(self, values: Tensor) -> Tensor:
        return values * self.scale + self.loc if self.enabled else values


def longest_sequence(context_length: int, horizon: int, max_horizon: int | None = None) -> int:
    """The longest encoder or decoder sequence a model is asked for: what a positional table must cover."""
    return max(context_length, longest_forecast(horizon, max_horizon))


class Forecaster(L.LightningModule):
    """A forecaster trained with or without teacher forcing, around a network that owns the architecture.

    A batch is a dict of named tensors (the format is documented in ``project.data.windows``): ``context``
    (N, context_length, F), ``target`` (N, horizon, F) and the covariates the data has. Validation and test always
    forecast free-running, as at prediction time; the teacher-forced loss is logged as a diagnostic. Checkpoints are
    the door's at the edge (``project.checkpoints``): ``load_from_checkpoint`` delegates to it, and a Trainer of yours
    restores a checkpoint as the CLI does when given ``project.checkpoints.CheckpointGuard`` among its callbacks.

    Args:
        network: The network (a ``project.model.network.ForecastNetwork``) with its head's ``distribution``, whose loss
            it trains with; in a config, ``class_path: project.model.ForecastTransformer`` (or ``GRUForecaster``, or
            yours) and ``init_args``, the sizes the data decides linked from the data module.
        context_length: Time steps of each input window (linked from the data module).
        horizon: Time steps to forecast in training and evaluation (linked from the data module).
        predict_horizon: Time steps ``predict`` forecasts (linked from the data module); empty: ``horizon``.
        max_horizon: Longest forecast the model makes, in steps, when asked for more than ``horizon`` (a positional
            encoding is sized for it; steps beyond ``horizon`` were never trained on). Empty: 4 × horizon.
        normalisation: Scale each window by a location and a scale of its context (per channel), and undo it on the
            forecast: ``project.training.InstanceNorm`` (the look-back's mean and std, RevIN without the affine part),
            ``LastValueNorm`` (its last value and std) or yours, by class_path; empty: none. Never uses the target.
        regime: How the decoder is driven in training: ``project.training.FreeRunning`` (``gradient``: ``detach`` at
            teacher-forcing memory, or ``bptt``), ``TeacherForcing``, ``ScheduledSampling`` or yours, by class_path.
        num_samples: Sample paths drawn per window for evaluation and ``predict`` with a distribution.
        prediction_quantiles: Quantiles ``predict`` reports (and figures draw) from the sample paths.
        interval: Coverage of a distribution's central prediction interval, which evaluation scores (``coverage``,
            ``width``), ``IntervalCalibration`` aims at and figures draw; 0.8 is the 10%–90% interval.
        cuda_graph: Decode the no-grad rollouts (free-running training's first pass, evaluation, predict) by replaying
            one decode step captured as a CUDA graph: the same forecasts, far fewer kernel launches. Needs CUDA.
        optimizer: The optimizer (default: AdamW, ``lr`` 1e-3, ``weight_decay`` 0.01), given two parameter groups:
            weight matrices, and biases and norms (``weight_decay`` 0).
        lr_scheduler: The learning-rate schedule, stepped per optimizer step; default
            ``project.training.WarmupStableDecay`` (``configs/base.yaml``: ``WarmupCosine``); empty (``null``): the
            optimizer's rate throughout. A ``ReduceLROnPlateau`` is stepped per epoch on its
            ``monitor`` (Lightning's, ``lightning.pytorch.cli.ReduceLROnPlateau``) or on ``val/loss`` (torch's), in a
            run that validates every epoch (``trainer.check_val_every_n_epoch``).
    """

    def __init__(
        self,
        network: nn.Module,
        context_length: PositiveInt = 12,
        horizon: PositiveInt = 12,
        predict_horizon: PositiveInt | None = None,
        max_horizon: PositiveInt | None = None,
        normalisation: Normalisation | None = None,
        regime: Regime = DEFAULT_REGIME,
        num_samples: AtLeastTwo = DEFAULT_NUM_SAMPLES,
        prediction_quantiles: UnitLevels | None = None,
        interval: OpenUnitInterval = DEFAULT_INTERVAL,
        cuda_graph: bool = False,
        optimizer: OptimizerCallable = torch.optim.AdamW,
        lr_scheduler: LRSchedulerCallable | None = WarmupStableDecay,
    ) -> None:
        super().__init__()
        check_network(network)
        if not isinstance(regime, Regime):
            raise InputError(f"regime {regime!r} is not a project.training.regimes.Regime")
        regime.check(network.distribution)  # a regime of yours may refuse a distribution; the template's: rules.py
        # The components are recorded as the classes and arguments that rebuild them, never as objects (a checkpoint
        # is read with weights_only); as LightningCLI gives them, or from the objects built in Python.
        self.save_hyperparameters(ignore=["network", "regime", "normalisation"])
        recorded = {"network": network_spec(network), "regime": component_spec(regime)}
        recorded["normalisation"] = None if normalisation is None else component_spec(normalisation)
        given = {"optimizer": optimizer, "lr_scheduler": lr_scheduler}  # as recorded, where the record has them
        recorded |= {name: callable_spec(self.hparams.get(name, value)) for name, value in given.items()}
        self.save_hyperparameters({**self.hparams, **recorded})  # logged with the others
        self.max_horizon = longest_forecast(horizon, max_horizon)
        self.prediction_quantiles = prediction_quantiles or list(DEFAULT_QUANTILES)
        rules.check(rules.options(model={**self.hparams, "network": network, "regime": regime}))
        if ends_inside_a_patch(
            predict_horizon or horizon, network.patch_length, getattr(network, "n_future_covariates", 0)
        ):
            raise InputError(
                f"predict_horizon={predict_horizon} must be a multiple of patch_length={network.patch_length} with "
                "future covariates: a patch's token holds the covariates of all its steps, past the last one asked for"
            )
        self.regime, self.normalisation = regime, normalisation
        self.run_steps: float | None = None  # the run's optimizer steps, once fit starts (on_fit_start)
        self.optimizer, self.lr_scheduler = optimizer, lr_scheduler
        self.network: ForecastNetwork = network
        scores = ["loss", "loss_teacher_forced", *score_names(self.has_distribution)]
        # Every score as a sum and a count synchronised across processes: exact under DDP, unlike sync_dist's mean of
        # per-process means. A NaN forecast makes its scores NaN, never a finite mean of the other values:
        # nan_strategy=NaN keeps NaN and the weights; torchmetrics' "disable" would drop the weights passed to update.
        self.val_scores = torch.nn.ModuleDict({name: MeanMetric(nan_strategy=math.nan) for name in scores})
        self.test_scores = torch.nn.ModuleDict({name: MeanMetric(nan_strategy=math.nan) for name in scores})
        # The sample paths' spread around the point forecast is scaled by it: 1 until IntervalCalibration sets it; a
        # buffer, so that test and predict of a loaded checkpoint use the scale it was calibrated to.
        self.register_buffer("interval_scale", torch.ones(()))
        # The loss of one optimizer step: the mean over its accumulated micro-batches (and, under DDP, devices).
        self.step_loss = MeanMetric()
        self.epoch_loss = MeanMetric()

    @property
    def distribution(self) -> Distribution:
        """The network head's distribution: what the model trains with and samples from."""
        return self.network.distribution

    @property
    def has_distribution(self) -> bool:
        """Whether the model forecasts sample paths (a probabilistic distribution), not only points."""
        return self.network.distribution.probabilistic

    @classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: str | Path,
        map_location: str | torch.device | None = None,
        hparams_file: str | Path | None = None,
        trusted: tuple[str, ...] | list[str] = (),
        **overrides: Any,
    ) -> Forecaster:
        """The model a checkpoint records, with its weights, in eval mode: Lightning's ``load_from_checkpoint``, through
        the checkpoint door (``project.checkpoints``: nothing is imported outside this project and torch's optimizers
        but the import paths in ``trusted``). ``hparams_file`` replaces the recorded settings, as in Lightning;
        ``overrides`` replace single settings."""
        from project.checkpoints import load_from_checkpoint  # the door at the edge, which builds this class

        model = load_from_checkpoint(cls, checkpoint_path, trusted, overrides, hparams_file)
        return model.to(map_location).eval() if isinstance(map_location, (str, torch.device)) else model.eval()

    def forward(self, batch: dict[str, Tensor] | Tensor, horizon: int | None = None) -> Tensor:
        """Free-running point forecast (N, horizon, F) of a batch (or of a bare context tensor, without covariates)."""
        return self.forecast(batch, horizon).point

    def forecast(self, batch: dict[str, Tensor] | Tensor, horizon: int | None = None) -> Forecast:
        """Free-running forecast of ``horizon`` steps (default: the trained horizon), up to ``max_horizon``: the
        point path, or, with a distribution, ``num_samples`` sample paths with their mean and quantiles."""
        batch = batch if isinstance(batch, dict) else {"context": batch}
        horizon = self.hparams.horizon if horizon is None else horizon
        if not 0 < horizon <= self.max_horizon:
            raise InputError(
                f"horizon {horizon} is outside 1..max_horizon={self.max_horizon}; set the model's max_horizon at "
                "training time to forecast further"
            )
        norm = ContextNorm(batch["context"], self.normalisation)
        context = norm(batch["context"])
        covariates = {name: batch[name] for name in COVARIATES if name in batch}
        cuda_graph = self.hparams.cuda_graph
        if not self.has_distribution:
            return Forecast(norm.inverse(generate(self.network, context, horizon, cuda_graph=cuda_graph, **covariates)))
        generator = torch.Generator(context.device).manual_seed(0)
        paths = generate(self.network, context, horizon, self.hparams.num_samples, generator, cuda_graph, **covariates)
        samples = norm.inverse(paths.transpose(0, 1)).transpose(0, 1)  # (N, K, T, F)
        point = self.distribution.point_of_paths(samples)
        samples = point.unsqueeze(1) + self.interval_scale * (samples - point.unsqueeze(1))
        return Forecast(point, quantiles_of(samples, self.prediction_quantiles), samples)

    def training_forecast(self, batch: dict[str, Tensor], regime: Regime | None = None) -> Tensor:
        """Forecast parameters (N, T, F, n_parameters) whose loss has the gradient of ``regime`` (default: the
        configured one), in the units of the batch."""
        norm = ContextNorm(batch["context"], self.normalisation)
        context, target = norm(batch["context"]), norm(batch["target"])
        covariates = {name: batch[name] for name in COVARIATES if name in batch}
        encoded, start = self.network.encode(context, **covariates), self.network.start_of(context)
        regime = regime or self.regime
        options = regime.options(self.global_step, self.fade_done(), self.hparams.cuda_graph)
        forecast = regime.forecast(self.network, encoded, start, target, options)
        return self.distribution.affine(forecast, norm.loc, norm.scale) if norm.enabled else forecast

    def training_loss(self, batch: dict[str, Tensor], regime: Regime | None = None) -> Tensor:
        return self.distribution.loss(self.training_forecast(batch, regime), batch["target"])

    def teacher_forcing_probability(self) -> float:
        """The regime's share of true previous values at this optimizer step (a schedule's value, or a constant)."""
        return self.regime.teacher_forcing_probability(self.global_step, self.fade_done())

    def fade_done(self) -> float | None:
        """How far a fade (scheduled sampling's, with ``steps`` empty) has gone on the run's own clock, 1 at its end:
        the learning rate's decay, where the schedule decays when validation stops improving
        (``WarmupStableDecay``), else half of the run's optimizer steps; None outside fit, or in a run of unknown
        length without such a schedule."""
        schedule = decaying_schedule(self.trainer) if self._trainer is not None else None
        if schedule is not None:
            return schedule.decay_done(self.global_step)
        if self.run_steps is None or not math.isfinite(self.run_steps):
            return None
        return self.global_step / max(1, round(FADE_SHARE_OF_RUN * self.run_steps))  # past 1 after the fade

    def setup(self, stage: str) -> None:
        if self.hparams.cuda_graph and self.device.type != "cuda":
            raise InputError(f"cuda_graph needs a CUDA device; this run is on {self.device.type}")
        if stage == "fit":  # before any data is read or weight trained
            accumulate = self.trainer.accumulate_grad_batches  # Lightning divides by it without checking it
            if not (isinstance(accumulate, int) and accumulate >= 1):
                raise InputError(f"trainer.accumulate_grad_batches={accumulate} must be an integer ≥ 1")

    def on_fit_start(self) -> None:
        # Lightning divides by these unchecked: a zero is a ZeroDivisionError inside its loop otherwise.
        interval, every = self.trainer.val_check_interval, self.trainer.check_val_every_n_epoch
        if not ((isinstance(interval, int) and interval >= 1) or (isinstance(interval, float) and 0 < interval <= 1)):
            raise InputError(f"trainer.val_check_interval={interval} must be an integer ≥ 1 (batches) or in (0, 1]")
        if every is not None and not (isinstance(every, int) and every >= 1):
            raise InputError(f"trainer.check_val_every_n_epoch={every} must be an integer ≥ 1, or null")
        logged = self.logged_metrics()
        for callback in self.trainer.callbacks:  # a monitor never logged fails only after the first epoch otherwise
            monitor = getattr(callback, "monitor", None)
            if monitor is not None and monitor not in logged and not monitor.startswith("lr-"):
                raise InputError(
                    f"{type(callback).__name__}'s monitor {monitor!r} is never logged; the model logs "
                    f"{', '.join(sorted(logged))}"
                )
        # A regime may fade over the run's own clock (fade_done), which a run of unknown length may not have.
        self.run_steps = self._estimated_steps()
        self.regime.check_fade(self.fade_done() is not None)

    def on_train_start(self) -> None:
        # Runs with different devices or accumulation are comparable by the batch the optimizer sees. Logged
        # with every other hyperparameter again, because TensorBoard's HPARAMS tab keeps only the last set.
        datamodule = self.trainer.datamodule
        if self.logger is None or not hasattr(datamodule, "batch_size"):
            return
        effective = datamodule.batch_size * self.trainer.world_size * self.trainer.accumulate_grad_batches
        hyperparameters = {**datamodule.hparams_initial, **self.hparams_initial, "effective_batch_size": effective}
        # Values as Lightning logged them at the start (each logger sanitises lists its own way): MLflow refuses a
        # parameter logged again with another value.
        self.logger.log_hyperparams({k: v for k, v in hyperparameters.items() if not k.startswith("_")})
        if isinstance(self.logger, TensorBoardLogger) and self.trainer.is_global_zero:
            # The logger writes hparams.yaml only once, before this hook; rewrite it with the effective batch size.
            save_hparams_to_yaml(Path(self.logger.log_dir) / "hparams.yaml", self.logger.hparams)

    def training_step(self, batch: dict[str, Tensor], batch_index: int) -> Tensor:
        loss = self.training_loss(batch)
        diverged = not torch.isfinite(loss).item()
        if self._trainer is not None and self.trainer.world_size > 1:  # every process stops, or none does
            diverged = self.trainer.strategy.reduce_boolean_decision(diverged, all=False)
        if diverged:
            raise TrainingDiverged(
                f"training diverged: the loss is {loss.item()} at step {self.global_step}"
                f"{self._last_good_checkpoint()}; lower the learning rate or check the data"
            )
        self.step_loss.update(loss.detach())
        self.epoch_loss.update(loss.detach())
        self.log("train/loss_epoch", self.epoch_loss, on_step=False, on_epoch=True)
        if self.regime.scheduled:  # its curve is worth seeing beside the loss
            self.log("train/teacher_forcing_probability", self.teacher_forcing_probability())
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Logged here, once per optimizer step, so that with gradient accumulation the curve shows the loss of
        # the effective batch the optimizer used, not the noisier loss of the last micro-batch.
        self.log("train/loss", self.step_loss.compute(), on_step=True, on_epoch=False)
        self.step_loss.reset()

    def validation_step(self, batch: dict[str, Tensor], batch_index: int) -> Forecast:
        """Scores the batch's free-running forecast, and returns it for the callbacks that observe validation
        (``on_validation_batch_end``'s ``outputs``): the one forecast of the batch, never computed twice."""
        return self._evaluate(batch, "val", self.val_scores)

    def test_step(self, batch: dict[str, Tensor], batch_index: int) -> Forecast:
        return self._evaluate(batch, "test", self.test_scores)

    def predict_step(self, batch: dict[str, Tensor], batch_index: int) -> dict[str, Tensor]:
        """The forecast in original units, with the window and series it belongs to."""
        return prediction_of(batch, self.forecast(batch, self.hparams.predict_horizon or self.hparams.horizon))

    def on_save_checkpoint(self, checkpoint: dict) -> None:
        # A checkpoint of non-finite weights is worse than none: it would be kept as "best" or resumed from.
        if not all(torch.isfinite(p).all() for p in self.parameters()):
            raise TrainingDiverged(
                f"training diverged: the weights are not finite at step {self.global_step}; no checkpoint was written "
                f"then{self._last_good_checkpoint()}; lower the learning rate"
            )

    def _last_good_checkpoint(self) -> str:
        callback = self._trainer.checkpoint_callback if self._trainer is not None else None
        path = callback and (callback.last_model_path or callback.best_model_path)
        return f"; the last good checkpoint is {path}" if path else "; no checkpoint was saved before"

    def _evaluate(self, batch: dict, split: str, scores: torch.nn.ModuleDict) -> Forecast:
        target = batch["target"]
        forecast = self.forecast(batch, target.shape[1])
        per_value = forecast_scores(
            forecast.point, target, batch["loc"], batch["scale"], forecast.samples, self.hparams.interval
        )
        if self.has_distribution:
            # The free-running loss of a distribution is its CRPS: a proper score of the forecast paths.
            scores["loss"].update(per_value["crps"])
        else:
            scores["loss"].update(self.distribution.loss(forecast.point.unsqueeze(-1), target), target.numel())
        scores["loss_teacher_forced"].update(self.training_loss(batch, REGIMES["teacher_forcing"]), target.numel())
        for name, values in per_value.items():
            scores[name].update(values)
        for name, score in scores.items():
            self.log(f"{split}/{name}", score, prog_bar=split == "val" and name == "loss")
        return forecast

    def configure_optimizers(self):
        optimizer, scheduler = self._optimization()
        if hasattr(scheduler, "set_run_steps"):  # it decays to zero by the run's last optimizer step
            scheduler.set_run_steps(self._estimated_steps())
        if scheduler is None:
            return optimizer
        if isinstance(scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):  # stepped on what it monitors
            monitor = getattr(scheduler, "monitor", None) or "val/loss"
            if monitor not in self.logged_metrics():
                raise InputError(
                    f"model.lr_scheduler's monitor {monitor!r} is never logged; the model logs "
                    f"{', '.join(sorted(self.logged_metrics()))}"
                )
            if self.trainer.check_val_every_n_epoch is None:  # Lightning steps it per epoch, or per batch of an epoch
                raise InputError(
                    "model.lr_scheduler ReduceLROnPlateau is stepped after each epoch, and this run validates every "
                    f"trainer.val_check_interval={self.trainer.val_check_interval} batches across epochs "
                    "(check_val_every_n_epoch: null, base.yaml's budget); set trainer.check_val_every_n_epoch=1 "
                    "and trainer.val_check_interval=1.0 to use it"
                )
            schedule = {"scheduler": scheduler, "interval": "epoch", "monitor": monitor, "strict": False}
            return {"optimizer": optimizer, "lr_scheduler": schedule}
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def _estimated_steps(self) -> float:
        """The run's optimizer steps, which Lightning counts by setting up the training data: what it refuses there
        (``val_check_interval`` past the batches of an epoch) is one line in its words."""
        try:
            return self.trainer.estimated_stepping_batches
        except ValueError as error:
            raise InputError(" ".join(str(error).split())) from None

    def logged_metrics(self) -> set[str]:
        """The names this model logs, which a checkpoint, early stopping or a plateau schedule may monitor (a
        subclass that logs more adds its own)."""
        scores = {f"{split}/{name}" for split in ("val", "test") for name in self.val_scores}
        return {"train/loss", "train/loss_epoch", "train/teacher_forcing_probability", *scores}

    def _optimization(self) -> tuple[torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler | None]:
        """The optimizer and its schedule; what torch refuses of their settings is one line naming the option."""
        # Weight decay (the optimizer's own) on weight matrices only, not on biases and norms.
        groups = [
            {"params": [p for p in self.parameters() if p.dim() >= 2], "name": "weights"},
            {"params": [p for p in self.parameters() if p.dim() < 2], "weight_decay": 0.0, "name": "biases_and_norms"},
        ]
        optimizer = self._built("optimizer", groups)
        return optimizer, None if self.lr_scheduler is None else self._built("lr_scheduler", optimizer)

    def _built(self, what: str, argument: Any) -> Any:
        try:
            return getattr(self, what)(argument)
        except (NotImplementedError, TypeError, ValueError) as error:  # NotImplementedError: an abstract scheduler
            raise InputError(f"model.{what}: {str(error) or type(error).__name__}") from error


def callable_spec(value: Any) -> Any:
    """An optimizer or scheduler argument as a checkpoint records it: for a class or a ``functools.partial`` of one,
    its class_path and init_args with the class's defaults, as LightningCLI records a config's; else its name."""
    if value is None or isinstance(value, dict):  # none (no schedule), or a record already
        return value
    given: dict = {}
    if isinstance(value, functools.partial) and not value.args:
        value, given = value.func, dict(value.keywords)
    if not isinstance(value, type):
        return f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', type(value).__name__)}"
    parameters = list(inspect.signature(value).parameters.values())[1:]  # the first is the params or the optimizer
    defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
    arguments = {name: list(v) if isinstance(v, tuple) else v for name, v in {**defaults, **given}.items()}
    recordable = {name: v for name, v in arguments.items() if v is None or isinstance(v, (bool, int, float, str, list))}
    return {"class_path": f"{value.__module__}.{value.__qualname__}", "init_args": recordable}


def check_network(network: nn.Module) -> None:
    """The network has the members of the contract the training code calls (``ForecastNetwork``)."""
    name = type(network).__name__
    missing = [m for m in ("encode", "decode", "new_cache", "start_of") if not callable(getattr(network, m, None))]
    missing += [m for m in ("n_targets", "patch_length", "distribution") if not hasattr(network, m)]
    if not isinstance(network, nn.Module) or missing:
        raise InputError(
            f"network {name} is not a ForecastNetwork (project.model.network): an nn.Module with "
            f"{', '.join(missing) or 'encode, decode, new_cache, start_of'}"
        )
    check_distribution(network.distribution, f"network {name}")
