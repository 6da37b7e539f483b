"""The model's MAE beside the naive forecasts' on the same windows, as a callback."""

from __future__ import annotations

import math
import sys
from functools import partial

import lightning as L
from lightning.pytorch.utilities import rank_zero_only
from torchmetrics import MeanMetric

from project import rules
from project.domains import PositiveInt
from project.training.baselines import repeat_last, seasonal_naive
from project.training.metrics import unscale

SPLITS = ("val", "test")


class NaiveComparison(L.Callback):
    """Validation and test score repeat-last (and seasonal naive, with ``season``) on the model's windows and log
    their MAE in original units beside the model's (``{split}/mae_repeat_last_original_units``, …). ``test`` and
    ``validate`` print them in one line, and one warning line when the model is worse than any of them.

    Args:
        season: Season of the seasonal-naive forecast, in steps (24 for hourly data with a daily cycle, 12 for
            monthly data); at most the model's ``context_length``. Empty: repeat-last only.
        enabled: Score and print the naive forecasts; false (``--naive_comparison.enabled=false``) leaves them out.
    """

    def __init__(self, season: PositiveInt | None = None, enabled: bool = True) -> None:
        self.season, self.enabled = season, enabled
        self.naive = {"repeat_last": repeat_last}
        if season:
            self.naive["seasonal_naive"] = partial(seasonal_naive, season=season)
        # Sums and counts synchronised across processes when computed: exact under DDP. A NaN value makes the
        # score NaN (nan_strategy=NaN), never a finite mean of the others.
        self.scores = {split: {name: MeanMetric(nan_strategy=math.nan) for name in self.naive} for split in SPLITS}

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        model = {"context_length": pl_module.hparams.get("context_length")}
        rules.check(rules.options(naive_comparison=self, model=model))

    def on_validation_batch_end(self, trainer, pl_module, outputs, batch: dict, batch_idx: int, dataloader_idx=0):
        if not trainer.sanity_checking:
            self._update("val", batch, pl_module)

    def on_test_batch_end(self, trainer, pl_module, outputs, batch: dict, batch_idx: int, dataloader_idx=0) -> None:
        self._update("test", batch, pl_module)

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._log("val", pl_module)

    def on_test_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._log("test", pl_module)

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.state.fn == "validate":  # a `validate` run; fit's validations are read in TensorBoard
            self._print("val", trainer)

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self._print("test", trainer)

    def _update(self, split: str, batch: dict, pl_module: L.LightningModule) -> None:
        if not self.enabled:
            return
        loc, scale = batch["loc"], batch["scale"]
        context, target = unscale(batch["context"], loc, scale), unscale(batch["target"], loc, scale)
        for name, naive in self.naive.items():
            score = self.scores[split][name] = self.scores[split][name].to(pl_module.device)
            score.update((naive(context, target.shape[1]) - target).abs())

    def _log(self, split: str, pl_module: L.LightningModule) -> None:
        for name, score in self.scores[split].items():
            if score.update_count:  # computed once on every process: already the mean over all of them
                pl_module.log(f"{split}/mae_{name}_original_units", score.compute())
            score.reset()

    @rank_zero_only
    def _print(self, split: str, trainer: L.Trainer) -> None:
        if self.enabled and f"{split}/mae_original_units" in trainer.callback_metrics:  # not when nothing was evaluated
            print(naive_comparison(split, trainer.callback_metrics, self.season), file=sys.stderr)


def naive_comparison(split: str, metrics: dict, season: int | None) -> str:
    """One line comparing ``{split}/mae_original_units`` with the naive forecasts' MAE logged beside it, and a second
    line, a warning, naming every naive forecast that did better."""
    model = float(metrics[f"{split}/mae_original_units"])
    naive = {
        "repeat-last": metrics.get(f"{split}/mae_repeat_last_original_units"),
        f"seasonal naive (season {season})": metrics.get(f"{split}/mae_seasonal_naive_original_units"),
    }
    naive = {name: float(mae) for name, mae in naive.items() if mae is not None}
    line = f"{split} MAE in original units: model {model:.6g}, " + ", ".join(f"{n} {m:.6g}" for n, m in naive.items())
    better = [name for name, mae in naive.items() if mae < model]
    if better:
        line += f"\nwarning: the model's {split} MAE is worse than {' and '.join(better)} on the same windows"
    return line
