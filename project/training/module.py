"""The LightningModule: training regimes, losses, metrics and optimisation around ``ForecastTransformer``."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

import lightning as L
import torch
from lightning.pytorch.core.saving import save_hparams_to_yaml
from lightning.pytorch.loggers import TensorBoardLogger
from torch import Tensor, nn
from torchmetrics import MeanAbsoluteError, MeanMetric, MeanSquaredError, MetricCollection
from torchmetrics.regression import SymmetricMeanAbsolutePercentageError

from project.model.transformer import ForecastTransformer
from project.training import regimes

TrainingMode = Literal["teacher_forcing", "free_running", "scheduled_sampling"]
LOSSES = {"mse": nn.MSELoss, "mae": nn.L1Loss, "huber": nn.HuberLoss}


class ContextNorm:
    """Instance normalisation with statistics of the context window only (RevIN without the affine part).

    Each sample's channels are shifted and scaled by their mean and standard deviation over the *context*; the
    target window never contributes, so nothing about the future leaks into the inputs.
    """

    def __init__(self, context: Tensor, eps: float = 1e-5) -> None:
        self.mean = context.mean(dim=1, keepdim=True)  # (N, 1, F)
        self.std = (context.var(dim=1, keepdim=True, unbiased=False) + eps).sqrt()

    def __call__(self, values: Tensor) -> Tensor:
        return (values - self.mean) / self.std

    def inverse(self, values: Tensor) -> Tensor:
        return values * self.std + self.mean


class Forecaster(L.LightningModule):
    """An encoder–decoder transformer forecaster trained with or without teacher forcing.

    A batch is ``(context, target)`` of shapes (N, context_length, F) and (N, horizon, F). Validation and test
    always forecast free-running, as at prediction time; the teacher-forced loss is logged as a diagnostic.

    Args:
        n_features: Channels F of the series (linked from the data module).
        context_length: Time steps of each input window (linked from the data module).
        horizon: Time steps to forecast (linked from the data module).
        d_model: Width of the transformer's token embeddings.
        nhead: Attention heads.
        num_encoder_layers: Encoder layers over the context window.
        num_decoder_layers: Causal decoder layers.
        dim_feedforward: Hidden width of each feed-forward block.
        dropout: Dropout on embeddings and residual branches.
        patch_length: Time steps per token; each decoder step then forecasts this many steps at once.
        channel_independent: Model every channel as its own univariate sequence with shared weights.
        checkpoint_layers: Activation checkpointing of the encoder and decoder layers: less memory, more compute.
        instance_norm: Normalise each window by its context's per-channel mean and std, and undo it on the
            forecast (RevIN without the affine part). Statistics never use the target.
        training_mode: ``teacher_forcing`` (true previous values in, one parallel pass), ``free_running`` (the
            model's own predictions fed back, as at prediction time) or ``scheduled_sampling`` (a per-position
            coin between the two, with a decaying teacher-forcing probability).
        feedback: For ``free_running``: ``detach`` (no gradient through fed-back predictions; computed as a
            no-grad cached rollout plus one parallel pass, at teacher-forcing memory) or ``bptt`` (gradient
            through every fed-back prediction; a differentiable cached unroll).
        loss: Training loss: ``mse``, ``mae`` or ``huber``.
        huber_delta: Threshold between the quadratic and linear parts of the Huber loss.
        teacher_forcing_schedule: For ``scheduled_sampling``: ``linear``, ``exponential`` or ``inverse_sigmoid``
            decay of the teacher-forcing probability (Bengio et al. 2015).
        schedule_steps: Optimizer steps over which the teacher-forcing probability decays.
        min_teacher_forcing: Floor of the teacher-forcing probability.
        learning_rate: Peak learning rate of AdamW.
        weight_decay: AdamW weight decay, applied to weight matrices only (not biases or norms).
        warmup_steps: Optimizer steps of linear learning-rate warm-up from zero.
        lr_schedule: After warm-up: ``cosine`` decay to zero at the last step, or ``constant``.
    """

    def __init__(
        self,
        n_features: int = 5,
        context_length: int = 12,
        horizon: int = 12,
        d_model: int = 128,
        nhead: int = 8,
        num_encoder_layers: int = 3,
        num_decoder_layers: int = 3,
        dim_feedforward: int = 512,
        dropout: float = 0.1,
        patch_length: int = 1,
        channel_independent: bool = False,
        checkpoint_layers: bool = False,
        instance_norm: bool = False,
        training_mode: TrainingMode = "free_running",
        feedback: Literal["detach", "bptt"] = "detach",
        loss: Literal["mse", "mae", "huber"] = "mse",
        huber_delta: float = 1.0,
        teacher_forcing_schedule: regimes.TeacherForcingSchedule = "inverse_sigmoid",
        schedule_steps: int = 1000,
        min_teacher_forcing: float = 0.0,
        learning_rate: float = 1e-3,
        weight_decay: float = 0.01,
        warmup_steps: int = 100,
        lr_schedule: Literal["cosine", "constant"] = "cosine",
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        for name, length in (("context_length", context_length), ("horizon", horizon)):
            if length % patch_length:
                raise ValueError(f"{name}={length} must be a multiple of patch_length={patch_length}")
        self.model = ForecastTransformer(
            n_features=n_features,
            d_model=d_model,
            nhead=nhead,
            num_encoder_layers=num_encoder_layers,
            num_decoder_layers=num_decoder_layers,
            dim_feedforward=dim_feedforward,
            dropout=dropout,
            max_length=max(context_length, horizon) // patch_length,
            patch_length=patch_length,
            channel_independent=channel_independent,
            checkpoint_layers=checkpoint_layers,
        )
        self.loss = LOSSES[loss](delta=huber_delta) if loss == "huber" else LOSSES[loss]()
        metrics = MetricCollection(
            {"mse": MeanSquaredError(), "mae": MeanAbsoluteError(), "smape": SymmetricMeanAbsolutePercentageError()}
        )
        self.val_metrics = metrics.clone(prefix="val/")
        self.test_metrics = metrics.clone(prefix="test/")
        self.val_repeat_last = MeanSquaredError()
        self.test_repeat_last = MeanSquaredError()
        # The loss of one optimizer step: the mean over its accumulated micro-batches (and, under DDP, devices).
        self.step_loss = MeanMetric()
        self.epoch_loss = MeanMetric()

    # -- Forecasting -------------------------------------------------------------------------------------------

    def forward(self, context: Tensor, horizon: int | None = None) -> Tensor:
        """Free-running forecast (N, horizon, F) from ``context`` (N, context_length, F)."""
        horizon = horizon or self.hparams.horizon
        norm = self._context_norm(context)
        return norm.inverse(self.model.generate(norm(context), horizon))

    def training_forecast(self, context: Tensor, target: Tensor, mode: TrainingMode | None = None) -> Tensor:
        """Forecasts whose loss has the gradient of training regime ``mode`` (default: the configured one)."""
        norm = self._context_norm(context)
        context, target = norm(context), norm(target)
        memory, start = self.model.encode(context), self.model.start_of(context)
        mode, horizon = mode or self.hparams.training_mode, target.shape[1]
        if mode == "teacher_forcing":
            forecast = regimes.teacher_forced(self.model, memory, start, target)
        elif mode == "scheduled_sampling":
            probability = self.teacher_forcing_probability()
            forecast = regimes.scheduled_sampling(self.model, memory, start, target, probability)
        elif self.hparams.feedback == "bptt":
            forecast = regimes.free_running_bptt(self.model, memory, start, horizon)
        else:
            forecast = regimes.free_running_detached(self.model, memory, start, horizon)
        return norm.inverse(forecast)

    def teacher_forcing_probability(self) -> float:
        return regimes.teacher_forcing_probability(
            self.global_step,
            self.hparams.teacher_forcing_schedule,
            self.hparams.schedule_steps,
            self.hparams.min_teacher_forcing,
        )

    def _context_norm(self, context: Tensor) -> ContextNorm | _Identity:
        return ContextNorm(context) if self.hparams.instance_norm else _Identity()

    # -- Lightning hooks ---------------------------------------------------------------------------------------

    def on_train_start(self) -> None:
        # Runs with different devices or accumulation are comparable by the batch the optimizer sees. Logged
        # with every other hyperparameter again, because TensorBoard's HPARAMS tab keeps only the last set.
        datamodule = self.trainer.datamodule
        if self.logger is None or not hasattr(datamodule, "batch_size"):
            return
        effective = datamodule.batch_size * self.trainer.world_size * self.trainer.accumulate_grad_batches
        hyperparameters = {**datamodule.hparams_initial, **self.hparams_initial, "effective_batch_size": effective}
        self.logger.log_hyperparams({k: v for k, v in hyperparameters.items() if not k.startswith("_")})
        if isinstance(self.logger, TensorBoardLogger) and self.trainer.is_global_zero:
            # The logger writes hparams.yaml only once, before this hook; rewrite it with the effective batch size.
            save_hparams_to_yaml(Path(self.logger.log_dir) / "hparams.yaml", self.logger.hparams)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_index: int) -> Tensor:
        context, target = batch
        loss = self.loss(self.training_forecast(context, target), target)
        self.step_loss.update(loss.detach())
        self.epoch_loss.update(loss.detach())
        self.log("train/loss_epoch", self.epoch_loss, on_step=False, on_epoch=True)
        if self.hparams.training_mode == "scheduled_sampling":
            self.log("train/teacher_forcing_probability", self.teacher_forcing_probability())
        return loss

    def on_before_optimizer_step(self, optimizer: torch.optim.Optimizer) -> None:
        # Logged here, once per optimizer step, so that with gradient accumulation the curve shows the loss of
        # the effective batch the optimizer used, not the noisier loss of the last micro-batch.
        self.log("train/loss", self.step_loss.compute(), on_step=True, on_epoch=False)
        self.step_loss.reset()

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_index: int) -> None:
        self._evaluate(batch, "val", self.val_metrics, self.val_repeat_last)

    def test_step(self, batch: tuple[Tensor, Tensor], batch_index: int) -> None:
        self._evaluate(batch, "test", self.test_metrics, self.test_repeat_last)

    def predict_step(self, batch: tuple[Tensor, ...], batch_index: int) -> Tensor:
        return self(batch[0])

    def _evaluate(self, batch, split: str, metrics: MetricCollection, repeat_last: MeanSquaredError) -> None:
        context, target = batch
        forecast = self(context, target.shape[1])
        teacher_forced = self.training_forecast(context, target, mode="teacher_forcing")
        self.log(f"{split}/loss", self.loss(forecast, target), sync_dist=True, prog_bar=split == "val")
        self.log(f"{split}/loss_teacher_forced", self.loss(teacher_forced, target), sync_dist=True)
        metrics.update(forecast, target)
        self.log_dict(metrics)
        repeat_last.update(context[:, -1:].expand_as(target).contiguous(), target)
        self.log(f"{split}/mse_repeat_last", repeat_last)

    def configure_optimizers(self):
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [
            {"params": decay, "weight_decay": self.hparams.weight_decay, "name": "weights"},
            {"params": no_decay, "weight_decay": 0.0, "name": "biases_and_norms"},
        ]
        optimizer = torch.optim.AdamW(groups, lr=self.hparams.learning_rate)
        total_steps = self.trainer.estimated_stepping_batches
        warmup, schedule = self.hparams.warmup_steps, self.hparams.lr_schedule

        def learning_rate_factor(step: int) -> float:
            if step < warmup:
                return (step + 1) / warmup
            if schedule == "constant" or not math.isfinite(total_steps):
                return 1.0
            progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
            return 0.5 * (1.0 + math.cos(math.pi * progress))

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, learning_rate_factor)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}


class _Identity:
    """Stands in for ``ContextNorm`` when instance normalisation is off."""

    def __call__(self, values: Tensor) -> Tensor:
        return values

    def inverse(self, values: Tensor) -> Tensor:
        return values
