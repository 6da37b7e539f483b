"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, the model (``Forecaster``, or the subclass ``--model`` names) and the data
(``WindowDataModule``, or the subclass ``--data`` names) from the configs; this file only wires them: values the
data decides are linked into the model, the default callbacks are added (and left out when the Trainer flag that
needs them is off), a checkpoint is checked before anything loads it and compared with what the user set, the run is
named after its data, and every problem ends in one line and a non-zero exit code.
"""

from __future__ import annotations

import sys

from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI, SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_info
from lightning.pytorch.utilities.exceptions import SIGTERMException

from project.checkpoints import (
    check_checkpoint_matches,
    check_data_fits_checkpoint,
    checkpoint_data_settings,
    checkpoint_inputs,
    checkpoint_model_settings,
    keep_forecasting_choices,
    read_checkpoint,
)
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.figures import ForecastFigures
from project.imports import CLI_TRUST, trust
from project.model.distributions import DEFAULT_QUANTILES
from project.option_errors import ForecastArgumentParser
from project.predictions import ForecastWriter
from project.rules import describe_rules
from project.run_folders import (
    check_the_run_folder_is_new,
    check_writable_folders,
    drop_the_data_cache_without_logs,
    keeps_checkpoints_without_a_logger,
    name_the_run,
    no_logger,
    resume_last_run,
)
from project.settings import check_options, explicit_settings, input_files, named_classes
from project.training.callbacks import ForecastCheckpoint, RandomState
from project.training.module import Forecaster, longest_forecast

# Decided by the data and linked into the network, so a user sets them once (or never) under `data:`. A network
# class receives those of its __init__ arguments that have these names (jsonargparse skips the others).
LINKED_FROM_DATA = ("n_targets", "n_past_covariates", "n_future_covariates", "static_cardinalities", "n_static_reals")
LINKED_SETTINGS = ("context_length", "horizon", "predict_horizon")
MODEL, DATA = "model.init_args", "data.init_args"  # subclass mode: a class_path, and its arguments under init_args
NETWORK = f"{MODEL}.network.init_args"
DEFAULT_CLASSES = {
    "model": {
        "class_path": "project.training.module.Forecaster",
        "init_args": {"network": {"class_path": "project.model.ForecastTransformer"}},
    },
    "data": {"class_path": "project.data.WindowDataModule"},
}
# The network's arguments that are linked (from the data or the model's own options), never set by the user.
LINKED_INTO_NETWORK = (*LINKED_FROM_DATA, "distribution", "quantile_levels", "max_length")
EXIT_SIGTERM = 143  # 143 = 128 + SIGTERM, what schedulers expect of a terminated job


class RunConfig(SaveConfigCallback):
    """Saves the run's config.yaml in its log folder, and nowhere when there is none (logger off, or a logger
    without a local folder such as MLflow's): LightningCLI would otherwise write, and with overwriting replace, a
    config.yaml in the working directory."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if trainer.logger is not None and trainer.logger.log_dir is not None:
            super().setup(trainer, pl_module, stage)


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
        parser.add_argument(
            "--overwrite", type=bool, default=False, help="replace an existing --predictions.output file"
        )
        parser.link_arguments("overwrite", "predictions.overwrite")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        given = sys.argv[1:] if args is None else args
        try:
            super().parse_arguments(parser, args)
        except InputError as error:
            if '"model.network' in str(error) and any(str(a).startswith("--ckpt_path") for a in given):
                # The network's options are parsed before the checkpoint is read, against the class the command
                # line and configs name: the default transformer unless told otherwise.
                raise InputError(
                    f"{error} (network options are checked against the network the command line and configs name, "
                    "project.model.ForecastTransformer by default, not the checkpoint's: name the checkpoint's "
                    "network with --model.network.class_path before them)"
                ) from None
            raise
        subcommand = self.config.get("subcommand")
        if subcommand is None:
            return
        config = self.config[subcommand]
        self.explicit = explicit_settings(given, config, subcommand, self.config.get("config"))
        self.checkpoint: dict | None = None
        check_options(config)
        name_the_run(config, self.explicit)
        if config.get("ckpt_path") == "last" and subcommand == "fit":
            resume_last_run(config)
        if config.get("ckpt_path"):
            trust(named_classes(self.explicit), CLI_TRUST)
            checkpoint = self.checkpoint = read_checkpoint(config.ckpt_path)
            check_checkpoint_matches(config.ckpt_path, checkpoint, self.explicit, LINKED_INTO_NETWORK)
            data = checkpoint_data_settings(checkpoint, config.ckpt_path, self.explicit.get("data", {}))
            self.config = parser.parse_object({subcommand: {"data": data}}, self.config)
            name_the_run(self.config[subcommand], self.explicit)
        config = self.config[subcommand]
        drop_the_data_cache_without_logs(config, self.explicit)
        check_writable_folders(config)
        # Every file the run reads, for the output guards: never replaced, not even with --overwrite.
        self.inputs = [config.data.init_args.get("source"), *input_files(config)]
        if self.checkpoint is not None:  # the checkpoint and the data it was trained on
            self.inputs += checkpoint_inputs(config.ckpt_path, self.checkpoint)

    def _parse_ckpt_path(self) -> None:
        """The model's settings from the checkpoint that ``parse_arguments`` read and checked, not from a second read
        of the file (as LightningCLI does), which could find another file there."""
        checkpoint = getattr(self, "checkpoint", None)
        if checkpoint is None:
            return
        settings = {self.config.subcommand: {"model": checkpoint_model_settings(checkpoint)}}
        self.config = self.parser.parse_object(settings, self.config)

    def before_instantiate_classes(self) -> None:
        subcommand = self.config.get("subcommand")
        if subcommand and self.config[subcommand].get("ckpt_path"):
            keep_forecasting_choices(self.config[subcommand], self.explicit.get("model", {}))

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
        if no_logger(trainer_config.get("logger")):
            callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
            if not keeps_checkpoints_without_a_logger(self.explicit):
                trainer_config["enable_checkpointing"] = False
        if trainer_config.get("enable_checkpointing") is False:
            callbacks = [c for c in callbacks if not isinstance(c, ForecastCheckpoint)]
        return self._instantiate_trainer(trainer_config, [*callbacks, RandomState(), *self.extra_callbacks])

    def before_validate(self) -> None:
        self._check_data_fits_checkpoint()

    def before_test(self) -> None:
        self._check_data_fits_checkpoint()

    def before_predict(self) -> None:
        self._check_data_fits_checkpoint()
        for callback in self.trainer.callbacks:
            if isinstance(callback, ForecastWriter):  # the run's inputs are never replaced by its output
                callback.inputs = self.inputs

    def _check_data_fits_checkpoint(self) -> None:
        if self.checkpoint is not None:
            config = self.config[self.subcommand]
            network, source = self.model.hparams["network"]["init_args"], config.data.init_args.get("source")
            check_data_fits_checkpoint(self.checkpoint, config.ckpt_path, network, source, LINKED_FROM_DATA)

    def before_fit(self) -> None:
        self._check_data_fits_checkpoint()
        check_the_run_folder_is_new(self.trainer.logger, self.explicit, self.config.fit.get("ckpt_path"))

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
                save_config_callback=RunConfig,
                save_config_kwargs={"overwrite": True},  # before_fit refuses an existing run folder itself
            )
    except SIGTERMException as stopped:
        saved = getattr(stopped, "latest_checkpoint", None)  # noted by ForecastCheckpoint when it saved the state
        resume = f"; {saved} holds the current step; continue with --ckpt_path last" if saved else ""
        print(f"error: stopped by SIGTERM{resume or '; no checkpoint holds the current step'}", file=sys.stderr)
        raise SystemExit(EXIT_SIGTERM) from None


if __name__ == "__main__":
    cli_main()
