"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, the model (``Forecaster``, or the subclass ``--model`` names) and the data
(``WindowDataModule``, or the subclass ``--data`` names) from the configs; this file only wires them: values the
data decides are linked into the model, the default callbacks are added (and left out when the Trainer flag that
needs them is off), a checkpoint is checked before anything loads it and compared with what the user set, the run is
named after its data, and every problem ends in one line and a non-zero exit code.
"""

from __future__ import annotations

import sys
from pathlib import Path

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
    find_last_checkpoint,
    keep_forecasting_choices,
    read_checkpoint,
)
from project.data import WindowDataModule
from project.domains import check_options
from project.errors import InputError, reported_in_one_line
from project.figures import ForecastFigures
from project.files import check_folder_writable
from project.imports import CLI_TRUST, trust
from project.model.distributions import DEFAULT_QUANTILES
from project.option_errors import ForecastArgumentParser
from project.predictions import ForecastWriter
from project.rules import describe_rules
from project.settings import explicit_settings, input_files, named_classes
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
        self._name_the_run(config)
        if config.get("ckpt_path") == "last" and subcommand == "fit":
            self._resume_last_run(config)
        if config.get("ckpt_path"):
            trust(named_classes(self.explicit), CLI_TRUST)
            checkpoint = self.checkpoint = read_checkpoint(config.ckpt_path)
            check_checkpoint_matches(config.ckpt_path, checkpoint, self.explicit, LINKED_INTO_NETWORK)
            data = checkpoint_data_settings(checkpoint, config.ckpt_path, self.explicit.get("data", {}))
            self.config = parser.parse_object({subcommand: {"data": data}}, self.config)
            self._name_the_run(self.config[subcommand])
        config = self.config[subcommand]
        if _no_logger(config.trainer.get("logger")) and "cache_dir" not in self.explicit.get("data", {}):
            config.data.init_args.cache_dir = None  # a run that writes no logs leaves no data cache behind either
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
        if _no_logger(trainer_config.get("logger")):
            callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
            # Without a logger there is no run folder: checkpoints would land in the working directory, and
            # pile up there run after run. They are written only where the user names a folder.
            explicit = self.explicit
            named_folder = explicit.get("checkpoint", {}).get("dirpath")
            if explicit.get("trainer", {}).get("enable_checkpointing") and not named_folder:
                raise InputError(
                    "trainer.enable_checkpointing=true with trainer.logger=false needs a folder for the checkpoints: "
                    "set --checkpoint.dirpath"
                )
            if not named_folder:
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
        logger = self.trainer.logger
        version = self.explicit.get("trainer", {}).get("logger", {})
        version = version.get("init_args", {}).get("version") if isinstance(version, dict) else None
        resuming = self.config.fit.get("ckpt_path") and logger is not None and self._inside(self.config.fit.ckpt_path)
        if logger is not None and version is not None and not resuming:
            log_dir = Path(logger.log_dir)
            if log_dir.is_dir() and any(log_dir.iterdir()):
                raise InputError(
                    f"{log_dir} already holds a run; choose another trainer.logger.init_args.version, or resume it "
                    "with --ckpt_path last"
                )

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

    def _resume_last_run(self, config) -> None:
        """``--ckpt_path last``: the newest run's last.ckpt, logged on in that run's folder (or a fresh start)."""
        logger = config.trainer.get("logger")
        init_args = logger.get("init_args", {}) if hasattr(logger, "get") else {}
        if "version" not in init_args:
            raise InputError("--ckpt_path last needs a logger with versioned run folders (TensorBoard or CSV)")
        save_dir = Path(init_args.get("save_dir") or config.trainer.get("default_root_dir") or ".")
        name = init_args.get("name") or "lightning_logs"
        last = find_last_checkpoint(save_dir / name)
        if last is None:
            rank_zero_info(f"No last.ckpt under {save_dir / name}; starting from scratch")
            config.ckpt_path = None
            return
        config.ckpt_path = str(last)
        if hasattr(logger, "get") and "init_args" in logger:
            logger.init_args.version = int(last.parts[-3].split("_")[-1])

    def _name_the_run(self, config) -> None:
        """Log under the data's name (the file's stem, or the embedded data's), unless the config names the run.

        The name goes where the logger keeps it: ``name`` (TensorBoard, CSV, W&B) or ``run_name`` (MLflow)."""
        logger = config.trainer.get("logger")
        if not (hasattr(logger, "get") and "init_args" in logger):
            return
        key = next((k for k in ("name", "run_name") if k in logger.init_args), None)
        explicit_logger = self.explicit.get("trainer", {}).get("logger")
        named = isinstance(explicit_logger, dict) and key in explicit_logger.get("init_args", {})
        if key and not named:
            logger.init_args[key] = self._run_name(config)

    @staticmethod
    def _run_name(config) -> str:
        data = config.data.init_args
        source = data.get("source")
        return Path(str(source)).stem if source else f"synthetic_{data.get('synthetic', 'series')}"

    def _inside(self, path: str) -> bool:
        return Path(self.trainer.logger.log_dir).resolve() in Path(path).resolve().parents


def check_writable_folders(config) -> None:
    """The folders a run will write (checkpoints, logs, the data cache) refused at start-up, in one line, when they
    cannot be written: not after an epoch of training."""
    logger = config.trainer.get("logger")
    loggers = logger if isinstance(logger, list) else [logger]
    folders = {"checkpoint.dirpath": config.get("checkpoint", {}).get("dirpath")}
    if logger is None or logger is True:  # Lightning's default logger writes under default_root_dir
        folders["trainer.default_root_dir"] = config.trainer.get("default_root_dir") or "."
    for position, entry in enumerate(loggers):
        if hasattr(entry, "get") and hasattr(entry.get("init_args"), "get"):
            where = "trainer.logger" + (f"[{position}]" if isinstance(logger, list) else "")
            folders[f"{where}.init_args.save_dir"] = entry.init_args.get("save_dir")
    if config.data.init_args.get("source") is not None:  # only a file's matrix is cached
        folders["data.cache_dir"] = config.data.init_args.get("cache_dir")
    for option, folder in folders.items():
        if folder:
            check_folder_writable(folder, option)


def _no_logger(logger: object) -> bool:
    """``trainer.logger`` turns logging off (``false`` or an empty list); ``null`` is Lightning's default logger."""
    return logger is False or (isinstance(logger, list) and not logger)


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
