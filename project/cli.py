"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, the model (``Forecaster`` or the subclass ``--model`` names) and the data
(``WindowDataModule`` or ``--data``'s) from the configs; this file only wires them: the links, the default callbacks,
a network's ``patch_length: auto`` made an integer.
The hooks call what decides the rest: ``project.start_up`` (what the user set, the domains, where the run writes),
``project.checkpoints.CommandCheckpoint``, ``project.run_folders`` and ``project.option_errors`` (a bad option).
"""

from __future__ import annotations

import sys

from jsonargparse import Namespace
from lightning.pytorch.callbacks import EarlyStopping, LearningRateMonitor
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.exceptions import SIGTERMException

from project import run_folders
from project.checkpoints import CommandCheckpoint
from project.data import WindowDataModule
from project.errors import reported_in_one_line
from project.figures import ForecastFigures
from project.model import resolved_patch_length
from project.option_errors import ForecastArgumentParser
from project.predictions import ForecastWriter
from project.rules import describe_rules
from project.start_up import after_the_checkpoint, before_the_checkpoint
from project.training.calibration import IntervalCalibration
from project.training.callbacks import ForecastCheckpoint, RandomState, exit_after_sigterm
from project.training.module import Forecaster, longest_sequence
from project.training.naive_comparison import NaiveComparison

# Decided by the data and linked into the network (those of its arguments with these names), set once under `data:`.
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
LINKED_INTO_NETWORK = (*LINKED_FROM_DATA, "max_length")
CALLBACKS = {  # the default callbacks, by the config section that sets each
    "checkpoint": ForecastCheckpoint, "early_stopping": EarlyStopping, "lr_monitor": LearningRateMonitor,
    "forecast_figures": ForecastFigures, "predictions": ForecastWriter, "interval_calibration": IntervalCalibration,
    "naive_comparison": NaiveComparison,
}  # fmt: skip
CALLBACK_DEFAULTS = {
    "checkpoint.monitor": "val/loss", "checkpoint.filename": "best-epoch{epoch}-step{step}",
    "checkpoint.auto_insert_metric_name": False, "checkpoint.save_last": True,
    "early_stopping.monitor": "val/loss", "early_stopping.patience": 10,
    # After each validation, so a run cut short by max_steps before validating still ends cleanly.
    "early_stopping.check_on_train_epoch_end": False,
    "lr_monitor.logging_interval": "step",
}  # fmt: skip


def resolve_auto_patch(config: Namespace) -> None:
    """A network's ``patch_length: auto`` made the integer it means for the model's context length and horizon (linked
    from the data): before the network is built, and before the config is saved beside the run, which then records
    the integer the run used."""
    network, model = config.model.init_args.network.get("init_args"), config.model.init_args
    if network is not None and network.get("patch_length") is not None:  # a network without patches has none
        network.patch_length = resolved_patch_length(network.patch_length, model.context_length, model.horizon)


class ForecastCLI(LightningCLI):
    """LightningCLI for ``Forecaster`` and ``WindowDataModule``; ``extra_callbacks`` are added to the Trainer as
    objects, for callers that build them in Python (a hyperparameter search's pruning callback)."""

    def __init__(self, *args, extra_callbacks: list | None = None, **kwargs) -> None:
        self.extra_callbacks = list(extra_callbacks or [])
        self.explicit, self.checkpoint, self.inputs = {}, CommandCheckpoint(), []  # set once parsed
        super().__init__(*args, **kwargs)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.epilog = describe_rules()  # the end of `fit --help`: every option rule, from the one list
        # Default classes: configs set `model.instance_norm` without a class_path, and `predict --ckpt_path X`
        # alone parses (LightningCLI then replaces the model with the checkpoint's class and arguments).
        parser.set_defaults(DEFAULT_CLASSES)
        for name in LINKED_FROM_DATA:  # attributes of the data module, once it has read the data
            parser.link_arguments(f"data.{name}", f"{NETWORK}.{name}", apply_on="instantiate")
        for name in LINKED_SETTINGS:
            parser.link_arguments(f"{DATA}.{name}", f"{MODEL}.{name}")
        # The positional encoding covers the longest sequence asked of it.
        parser.link_arguments(
            (f"{DATA}.context_length", f"{DATA}.horizon", f"{MODEL}.max_horizon"),
            f"{NETWORK}.max_length",
            compute_fn=longest_sequence,
        )
        for section, callback in CALLBACKS.items():
            parser.add_lightning_class_args(callback, section)
        parser.set_defaults(CALLBACK_DEFAULTS)
        parser.add_argument("--test_after_fit", type=bool, default=True, help="fit: then test the best checkpoint")
        parser.add_argument("--overwrite", type=bool, default=False, help="replace an existing --predictions.output")
        parser.link_arguments("overwrite", "predictions.overwrite")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        super().parse_arguments(parser, args)
        if self.config.get("subcommand") is None:
            return
        self.explicit = before_the_checkpoint(self.config, sys.argv[1:] if args is None else args, CALLBACKS)
        self.config, self.checkpoint = CommandCheckpoint.open(parser, self.config, self.explicit, LINKED_INTO_NETWORK)
        self.inputs = self.checkpoint.inputs(*after_the_checkpoint(self.config[self.config.subcommand], self.explicit))

    def _parse_ckpt_path(self) -> None:  # the checkpoint read and checked at start-up, not a second read of the file
        self.config = self.checkpoint.with_its_model(self.parser, self.config)

    def before_instantiate_classes(self) -> None:
        self.checkpoint.keep_forecasting_choices(self.config[self.subcommand])
        resolve_auto_patch(self.config[self.subcommand])

    def after_instantiate_classes(self) -> None:  # before any subcommand reads data or loads weights
        self.checkpoint.check_data_fits(self.config[self.subcommand], self.model, LINKED_FROM_DATA)

    def _dump_config(self) -> None:
        super()._dump_config()
        run_folders.make_room_for_linked_sizes(self.config_dump)

    def instantiate_trainer(self, **kwargs):
        """The Trainer with the default callbacks, less those whose Trainer feature the user turned off."""
        trainer_config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        callbacks = [self._get(self.config_init, key) for key in self._parser(self.subcommand).callback_keys]
        callbacks = run_folders.callbacks_in_use(trainer_config, callbacks, self.explicit)
        return self._instantiate_trainer(trainer_config, [*callbacks, RandomState(), *self.extra_callbacks])

    def before_predict(self) -> None:  # the run's inputs are never replaced by its output
        for writer in (c for c in self.trainer.callbacks if isinstance(c, ForecastWriter)):
            writer.inputs = self.inputs

    def before_fit(self) -> None:
        run_folders.check_the_run_folder_is_new(self.trainer.logger, self.explicit, self.config.fit.ckpt_path)

    def after_fit(self) -> None:
        if self.config.fit.test_after_fit and not (self.trainer.fast_dev_run or self.trainer.interrupted):
            self.trainer.enable_autolog_hparams = False  # the fit logged them all, with the effective batch size
            best = run_folders.best_checkpoint(self.trainer)
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best)


def cli_main(args: list[str] | None = None, extra_callbacks: list | None = None) -> ForecastCLI | None:
    try:
        with reported_in_one_line():
            return ForecastCLI(
                Forecaster, WindowDataModule, args=args, extra_callbacks=extra_callbacks,
                subclass_mode_model=True, subclass_mode_data=True, parser_class=ForecastArgumentParser,
                auto_configure_optimizers=False,  # Forecaster.configure_optimizers is the one optimizer setup
                save_config_callback=run_folders.RunConfig,
                save_config_kwargs={"overwrite": True},  # before_fit refuses an existing run folder itself
            )  # fmt: skip
    except SIGTERMException as stopped:
        exit_after_sigterm(stopped)


if __name__ == "__main__":
    cli_main()
