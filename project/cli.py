"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, ``Forecaster`` and ``WindowDataModule`` from the configs; this file only wires
them: values the data decides are linked into the model, the default callbacks are added, and a checkpoint's
hyperparameters are checked against the config so that a mismatch is an error instead of a silent surprise.
"""

from __future__ import annotations

import sys

import torch
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI

from project.data import InputError, WindowDataModule
from project.figures import ForecastFigures
from project.predictions import ForecastWriter
from project.training.module import Forecaster

# Set by the data, so a user sets them once under `data:` and the model follows.
LINKED_FROM_DATA = ("n_features", "context_length", "horizon")


class ForecastCLI(LightningCLI):
    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.link_arguments("data.n_features", "model.n_features", apply_on="instantiate")
        parser.link_arguments("data.context_length", "model.context_length")
        parser.link_arguments("data.horizon", "model.horizon")
        parser.add_lightning_class_args(ModelCheckpoint, "checkpoint")
        parser.set_defaults(
            {
                "checkpoint.monitor": "val/loss",
                "checkpoint.filename": "best-epoch{epoch}-step{step}",
                "checkpoint.auto_insert_metric_name": False,
                "checkpoint.save_last": True,
            }
        )
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults(
            {
                "early_stopping.monitor": "val/loss",
                "early_stopping.patience": 10,
                # After each validation, so a run cut short by max_steps before validating still ends cleanly.
                "early_stopping.check_on_train_epoch_end": False,
            }
        )
        parser.add_lightning_class_args(LearningRateMonitor, "lr_monitor")
        parser.set_defaults({"lr_monitor.logging_interval": "step"})
        parser.add_lightning_class_args(ForecastFigures, "forecast_figures")
        parser.add_lightning_class_args(ForecastWriter, "predictions")
        parser.add_argument(
            "--test_after_fit", type=bool, default=True, help="fit: test the best checkpoint when training ends"
        )

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        super().parse_arguments(parser, args)
        # LightningCLI then replaces the model's settings with the checkpoint's (--ckpt_path); keep what the user
        # asked for, to compare.
        self.config_as_given = self.config.clone()

    def after_fit(self) -> None:
        if not self.config.fit.test_after_fit or self.trainer.fast_dev_run or self.trainer.interrupted:
            return
        best = self.trainer.checkpoint_callback.best_model_path if self.trainer.checkpoint_callback else ""
        # The fit already logged every hyperparameter with the effective batch size; do not log them again.
        self.trainer.enable_autolog_hparams = False
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best or None)

    def before_instantiate_classes(self) -> None:
        subcommand = self.config.get("subcommand")
        ckpt_path = subcommand and self.config[subcommand].get("ckpt_path")
        if ckpt_path:
            defaults = self._parser(subcommand).get_defaults().as_dict()
            check_checkpoint_matches(ckpt_path, self.config_as_given[subcommand].as_dict(), defaults)


def check_checkpoint_matches(ckpt_path: str, config, defaults: dict) -> None:
    """Fail with one line when the config asks for a model or data shape other than the checkpoint's.

    The model is rebuilt from the checkpoint's hyperparameters (LightningCLI's ``ckpt_path`` handling); only
    values the user set on purpose (different from the defaults) and values the data decides are compared.
    """
    try:
        checkpoint = torch.load(ckpt_path, map_location="cpu", weights_only=True)
    except (OSError, RuntimeError) as error:
        raise InputError(f"{ckpt_path}: cannot read the checkpoint ({error})") from None
    trained = checkpoint.get("hyper_parameters", {})
    model_config, data_config = config["model"], config["data"]
    mismatches = [
        f"model.{name}={model_config[name]!r} (checkpoint: {trained[name]!r})"
        for name in trained
        if name in model_config
        and name not in LINKED_FROM_DATA
        and model_config[name] != defaults["model"].get(name)
        and model_config[name] != trained[name]
    ]
    mismatches += [
        f"data.{name}={data_config[name]!r} (checkpoint: {trained[name]!r})"
        for name in LINKED_FROM_DATA[1:]
        if name in trained and data_config[name] != trained[name]
    ]
    if mismatches:
        raise InputError(f"{ckpt_path} was trained with other settings than the config: {', '.join(mismatches)}")


def cli_main(args: list[str] | None = None) -> ForecastCLI | None:
    try:
        return ForecastCLI(
            Forecaster,
            WindowDataModule,
            args=args,
        )
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None


if __name__ == "__main__":
    cli_main()
