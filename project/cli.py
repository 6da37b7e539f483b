"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, the model (``Forecaster``, or the subclass ``--model`` names) and the data
(``WindowDataModule``, or the subclass ``--data`` names) from the configs; this file only wires them: values the data
decides are linked into the model, and the default callbacks are added (less those whose Trainer feature is off).
The hooks call what decides the rest: what the user set (``project.settings``), a checkpoint's fit with it
(``project.checkpoints``), where the run writes (``project.run_folders``), a bad option (``project.option_errors``).
"""

from __future__ import annotations

import sys

from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from project import checkpoints, run_folders, settings
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.figures import ForecastFigures
from project.imports import CLI_TRUST, trust
from project.model.distributions import DEFAULT_QUANTILES
from project.option_errors import ForecastArgumentParser, network_options_hint
from project.predictions import ForecastWriter
from project.rules import describe_rules
from project.training.callbacks import ForecastCheckpoint, RandomState, stopped_by_sigterm
from project.training.module import Forecaster, longest_forecast

# Decided by the data and linked into the network, so a user sets them once (or never) under `data:`. A network
# class receives those of its __init__ arguments that have these names (jsonargparse skips the others).
LINKED_FROM_DATA = ("n_targets", "n_past_covariates", "n_future_covariates", "static_cardinalities", "n_static_reals")
LINKED_SETTINGS = ("context_length", "horizon", "predict_horizon")
MODEL, DATA = "model.init_args", "data.init_args"  # subclass mode: a class_path, and its arguments under init_args
NETWORK = f"{MODEL}.network.init_args"
DEFAULT_CLASSES = {
    "model": {"class_path": "project.training.module.Forecaster",
              "init_args": {"network": {"class_path": "project.model.ForecastTransformer"}}},
    "data": {"class_path": "project.data.WindowDataModule"},
}  # fmt: skip
# The network's arguments that are linked (from the data or the model's own options), never set by the user.
LINKED_INTO_NETWORK = (*LINKED_FROM_DATA, "distribution", "quantile_levels", "max_length")
EXIT_SIGTERM = 143  # 143 = 128 + SIGTERM, what schedulers expect of a terminated job
CALLBACK_DEFAULTS = {
    "checkpoint.monitor": "val/loss", "checkpoint.filename": "best-epoch{epoch}-step{step}",
    "checkpoint.auto_insert_metric_name": False, "checkpoint.save_last": True,
    "early_stopping.monitor": "val/loss", "early_stopping.patience": 10,
    # After each validation, so a run cut short by max_steps before validating still ends cleanly.
    "early_stopping.check_on_train_epoch_end": False,
    "lr_monitor.logging_interval": "step",
}  # fmt: skip


class ForecastCLI(LightningCLI):
    """LightningCLI for ``Forecaster`` and ``WindowDataModule``; ``extra_callbacks`` are added to the Trainer as
    objects, for callers that build them in Python (a hyperparameter search's pruning callback)."""

    def __init__(self, *args, extra_callbacks: list | None = None, **kwargs) -> None:
        self.extra_callbacks = list(extra_callbacks or [])
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.epilog = describe_rules()  # the end of `fit --help`: every option rule, from the one list
        # Forecaster, WindowDataModule and the transformer unless a config names other classes, so that configs set
        # `model.learning_rate` without a class_path, and `predict --ckpt_path X` alone parses (LightningCLI then
        # replaces the model with the checkpoint's class and arguments).
        parser.set_defaults(DEFAULT_CLASSES)
        for name in LINKED_FROM_DATA:  # attributes of the data module, once it has read the data
            parser.link_arguments(f"data.{name}", f"{NETWORK}.{name}", apply_on="instantiate")
        for name in LINKED_SETTINGS:
            parser.link_arguments(f"{DATA}.{name}", f"{MODEL}.{name}")
        # The head predicts what the model trains; the positional encoding covers the longest sequence asked of it.
        parser.link_arguments(f"{MODEL}.distribution", f"{NETWORK}.distribution")
        parser.link_arguments(
            f"{MODEL}.quantile_levels",
            f"{NETWORK}.quantile_levels",
            compute_fn=lambda levels: levels or list(DEFAULT_QUANTILES),
        )
        parser.link_arguments(
            (f"{DATA}.context_length", f"{DATA}.horizon", f"{MODEL}.max_horizon"),
            f"{NETWORK}.max_length",
            compute_fn=lambda context, horizon, longest: max(context, longest_forecast(horizon, longest)),
        )
        parser.add_lightning_class_args(ForecastCheckpoint, "checkpoint")
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.add_lightning_class_args(LearningRateMonitor, "lr_monitor")
        parser.add_lightning_class_args(ForecastFigures, "forecast_figures")
        parser.add_lightning_class_args(ForecastWriter, "predictions")
        parser.set_defaults(CALLBACK_DEFAULTS)
        parser.add_argument(
            "--test_after_fit", type=bool, default=True, help="fit: test the best checkpoint when training ends"
        )
        parser.add_argument(
            "--overwrite", type=bool, default=False, help="replace an existing --predictions.output file"
        )
        parser.link_arguments("overwrite", "predictions.overwrite")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        given = sys.argv[1:] if args is None else args
        try:
            super().parse_arguments(parser, args)
        except InputError as error:
            if hint := network_options_hint(error, given):
                raise InputError(f"{error} ({hint})") from None
            raise
        if (subcommand := self.config.get("subcommand")) is None:
            return
        config = self.config[subcommand]
        self.explicit = explicit = settings.explicit_settings(given, config, subcommand, self.config.get("config"))
        self.checkpoint: dict | None = None
        settings.check_options(config)
        run_folders.place_the_run(config, explicit, resume_last=subcommand == "fit")
        if config.get("ckpt_path"):
            trust(settings.named_classes(explicit), CLI_TRUST)
            self.checkpoint = checkpoints.read_checkpoint(config.ckpt_path)
            checkpoints.check_checkpoint_matches(config.ckpt_path, self.checkpoint, explicit, LINKED_INTO_NETWORK)
            data = checkpoints.checkpoint_data_settings(self.checkpoint, config.ckpt_path, explicit.get("data", {}))
            self.config = parser.parse_object({subcommand: {"data": data}}, self.config)
            config = self.config[subcommand]
            run_folders.name_the_run(config, explicit)
        run_folders.drop_the_data_cache_without_logs(config, explicit)
        run_folders.check_writable_folders(config)
        self.inputs = settings.input_files(config)  # for the output guards: never replaced, even with --overwrite
        if self.checkpoint is not None:  # the checkpoint and the data it was trained on
            self.inputs = checkpoints.checkpoint_inputs(config.ckpt_path, self.checkpoint, *self.inputs)

    def _parse_ckpt_path(self) -> None:
        """The model's settings from the checkpoint that ``parse_arguments`` read and checked, not from a second read
        of the file (as LightningCLI does), which could find another file there."""
        if getattr(self, "checkpoint", None) is not None:
            model = checkpoints.checkpoint_model_settings(self.checkpoint)
            self.config = self.parser.parse_object({self.config.subcommand: {"model": model}}, self.config)

    def before_instantiate_classes(self) -> None:
        if getattr(self, "checkpoint", None) is not None:
            checkpoints.keep_forecasting_choices(self.config[self.config.subcommand], self.explicit.get("model", {}))

    def after_instantiate_classes(self) -> None:
        if getattr(self, "checkpoint", None) is not None:  # before any subcommand reads data or loads weights
            config, network = self.config[self.subcommand], self.model.hparams["network"]["init_args"]
            source = config.data.init_args.get("source")
            checkpoints.check_data_fits_checkpoint(self.checkpoint, config.ckpt_path, network, source, LINKED_FROM_DATA)

    def _dump_config(self) -> None:
        super()._dump_config()
        # Lightning records the linked sizes into the network's dumped init_args, and fails when a network takes
        # no argument besides the linked ones (the dump then has no init_args to record them into).
        network = self.config_dump.get("model", {}).get("init_args", {}).get("network")
        if isinstance(network, dict):
            network["init_args"] = network.get("init_args") or {}

    def instantiate_trainer(self, **kwargs):
        """The Trainer with the default callbacks, less those whose Trainer feature the user turned off."""
        trainer_config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        callbacks = [self._get(self.config_init, key) for key in self._parser(self.subcommand).callback_keys]
        if run_folders.no_logger(trainer_config.get("logger")):
            callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
            if not run_folders.keeps_checkpoints_without_a_logger(self.explicit):
                trainer_config["enable_checkpointing"] = False
        if trainer_config.get("enable_checkpointing") is False:
            callbacks = [c for c in callbacks if not isinstance(c, ForecastCheckpoint)]
        return self._instantiate_trainer(trainer_config, [*callbacks, RandomState(), *self.extra_callbacks])

    def before_predict(self) -> None:
        for callback in self.trainer.callbacks:
            if isinstance(callback, ForecastWriter):  # the run's inputs are never replaced by its output
                callback.inputs = self.inputs

    def before_fit(self) -> None:
        run_folders.check_the_run_folder_is_new(self.trainer.logger, self.explicit, self.config.fit.get("ckpt_path"))

    def after_fit(self) -> None:
        if not self.config.fit.test_after_fit or self.trainer.fast_dev_run or self.trainer.interrupted:
            return
        callback = self.trainer.checkpoint_callback
        best = callback.best_model_path if callback else ""
        if not best:
            why = "checkpointing is off" if callback is None else "no validation ran"
            rank_zero_info(f"Testing the weights at the end of training: there is no best checkpoint ({why})")
        # The fit already logged every hyperparameter with the effective batch size; do not log them again.
        self.trainer.enable_autolog_hparams = False
        self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best or None)


def cli_main(args: list[str] | None = None, extra_callbacks: list | None = None) -> ForecastCLI | None:
    try:
        with reported_in_one_line():
            return ForecastCLI(
                Forecaster,
                WindowDataModule,
                subclass_mode_model=True,  # --model and --data may name subclasses of the two
                subclass_mode_data=True,
                parser_class=ForecastArgumentParser,
                args=args,
                extra_callbacks=extra_callbacks,
                auto_configure_optimizers=False,  # Forecaster.configure_optimizers is the one optimizer setup
                save_config_callback=run_folders.RunConfig,
                save_config_kwargs={"overwrite": True},  # before_fit refuses an existing run folder itself
            )
    except SIGTERMException as stopped:
        print(f"error: {stopped_by_sigterm(stopped)}", file=sys.stderr)
        raise SystemExit(EXIT_SIGTERM) from None


if __name__ == "__main__":
    cli_main()
