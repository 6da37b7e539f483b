"""Command line: ``python -m project.cli {fit,validate,test,predict} --config configs/base.yaml``.

LightningCLI builds the Trainer, model and data from the configs; this file wires them: the links, the default
callbacks, a checkpoint's settings as the parser's defaults, ``patch_length: auto`` made an integer, the rules on the
parsed config. Where a run writes: ``project.run_folders``; everything about checkpoints: ``project.checkpoints``.
"""

from __future__ import annotations

import os
from dataclasses import asdict

from jsonargparse import ArgumentError, ArgumentParser
from jsonargparse.typing import restricted_number_type
from lightning.pytorch.accelerators import CPUAccelerator
from lightning.pytorch.callbacks import LearningRateMonitor
from lightning.pytorch.cli import LightningArgumentParser, LightningCLI
from lightning.pytorch.utilities.exceptions import MisconfigurationException, SIGTERMException

from project import rules, run_folders
from project.checkpoints import CheckpointGuard, checkpoint_inputs, imports, read_checkpoint
from project.checkpoints.settings import (
    check_checkpoint_fits,
    checkpoint_config,
    load_data_state,
    model_on_meta,
    parsed_settings,
    reading_a_file,
    section_parser,
    way_in,
)
from project.data import WindowDataModule
from project.errors import InputError, reported_cause, reported_in_one_line
from project.model import resolved_patch_length
from project.option_errors import ForecastArgumentParser, bounded_yaml_loading, one_line
from project.training.calibration import IntervalCalibration
from project.training.callbacks import (
    EXIT_SIGINT,
    EXIT_SIGTERM,
    AnnealThenStop,
    CtrlCBetweenSteps,
    ForecastCheckpoint,
    RandomState,
    ValidateEachEpochAtLeast,
    exit_after_signal,
)
from project.training.figures import ForecastFigures
from project.training.module import Forecaster, longest_sequence
from project.training.naive_comparison import NaiveComparison
from project.training.predictions import ForecastWriter

LINKED_SETTINGS = ("context_length", "horizon", "predict_horizon")
MODEL, DATA = "model.init_args", "data.init_args"  # subclass mode: a class_path, and its arguments under init_args
NETWORK = f"{MODEL}.network.init_args"
DEFAULT_CLASSES = {
    "model": {
        "class_path": "project.training.module.Forecaster",
        "init_args": {"network": {"class_path": "project.model.ForecastTransformer"}},
    },
    "data": {
        "class_path": "project.data.WindowDataModule",
        "init_args": {"split": {"class_path": "project.data.Fractions"}},
    },
}
LINKED_INTO_NETWORK = ("sizes", "max_length")  # the network's arguments a link gives, never the user
# The settings a link gives (from the data, or the model's own options): never a default taken from a checkpoint.
LINKED = (
    *(f"model.init_args.{name}" for name in LINKED_SETTINGS),
    *(f"model.init_args.network.init_args.{name}" for name in LINKED_INTO_NETWORK),
    *(f"model.init_args.network.init_args.baseline_path.init_args.{name}" for name in ("context_length", "horizon")),
)
CLI_TRUST = "pass --{setting}={value}"  # how a user of the CLI trusts an import path: the option that names it
CALLBACKS = {  # the default callbacks, by the config section that sets each
    "checkpoint": ForecastCheckpoint,
    "early_stopping": AnnealThenStop,
    "lr_monitor": LearningRateMonitor,
    "forecast_figures": ForecastFigures,
    "predictions": ForecastWriter,
    "interval_calibration": IntervalCalibration,
    "naive_comparison": NaiveComparison,
}
CALLBACK_DEFAULTS = {
    "checkpoint.monitor": "val/loss",
    "checkpoint.filename": "best-epoch{epoch}-step{step}",
    "checkpoint.auto_insert_metric_name": False,
    "checkpoint.save_last": True,
    "early_stopping.monitor": "val/loss",
    "early_stopping.patience": 10,
    # After each validation, so a run cut short by max_steps before validating still ends cleanly.
    "early_stopping.check_on_train_epoch_end": False,
    "lr_monitor.logging_interval": "step",
}


# The seeds Lightning (and numpy) take: a parser type, so that a seed outside is refused under its own key.
Seed = restricted_number_type("Seed", int, [(">=", 0), ("<=", 2**32 - 1)])


class ForecastCLI(LightningCLI):
    """LightningCLI for ``Forecaster`` and ``WindowDataModule``."""

    checkpoint: dict | None = None  # the one --ckpt_path (or fit's --weights) names, read once parsed
    inputs: tuple | list = ()  # the files the run reads, never replaced by its outputs
    guard: CheckpointGuard  # how the Trainer reads a checkpoint: the one the CLI read is handed over

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        parser.add_argument(
            "--seed_everything",
            type=bool | Seed,
            default=self.seed_everything_default,
            help="an integer in 0..2**32-1: seed_everything with it before the classes are built; true: a random seed",
        )

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        # Default classes: configs set `model.cuda_graph` without a class_path, and `predict --ckpt_path X`
        # alone parses (the checkpoint's classes and settings then become the defaults).
        parser.set_defaults(DEFAULT_CLASSES)
        parser.link_arguments("data.input_sizes", f"{NETWORK}.sizes", compute_fn=asdict, apply_on="instantiate")
        for name in LINKED_SETTINGS:
            parser.link_arguments(f"{DATA}.{name}", f"{MODEL}.{name}")
        # The positional encoding covers the longest sequence asked of it.
        parser.link_arguments(
            (f"{DATA}.context_length", f"{DATA}.horizon", f"{MODEL}.max_horizon"),
            f"{NETWORK}.max_length",
            compute_fn=longest_sequence,
        )
        # A baseline path's lengths are the data's, where its class takes them (NoPath and yours may not).
        for name in ("context_length", "horizon"):
            parser.link_arguments(f"{DATA}.{name}", f"{NETWORK}.baseline_path.init_args.{name}")
        for section, callback in CALLBACKS.items():
            parser.add_lightning_class_args(callback, section)
        parser.set_defaults(CALLBACK_DEFAULTS)
        parser.add_argument("--test_after_fit", type=bool, default=True, help="fit: then test the best checkpoint")
        parser.add_argument(
            "--weights",
            type=str | None,
            default=None,
            help="fit: start from this checkpoint's weights and settings with a fresh optimizer, schedule, loops and "
            "callbacks (a checkpoint from elsewhere); --ckpt_path resumes your own run's whole state",
        )
        parser.add_argument("--overwrite", type=bool, default=False, help="replace an existing --predictions.output")
        parser.link_arguments("overwrite", "predictions.overwrite")

    def parse_arguments(self, parser: LightningArgumentParser, args) -> None:
        """The user's configs and flags are parsed with jsonargparse's default denylist enforced. With
        ``--ckpt_path`` (or fit's ``--weights``), the checkpoint's settings that the command takes
        (``project.checkpoints.TAKEN``) are parsed once, while the import policy allows only this project, torch's
        optimizers and the classes and callables the user named; its model is built on the meta device and checked
        against its weights; the settings become the parser's defaults, and the arguments are parsed again:
        jsonargparse's own precedence (defaults < config files < command line) decides what wins."""
        imports.enforce_default_denylist()
        super().parse_arguments(parser, args)
        subcommand = self.config.get("subcommand")
        if subcommand is None:
            return
        self.guard = CheckpointGuard()
        run_folders.place_the_run(self.config[subcommand], resume_last=subcommand == "fit")
        ckpt_path = self.config[subcommand].get("ckpt_path") or self._weights(subcommand)
        if ckpt_path:
            self.checkpoint = read_checkpoint(ckpt_path)
            self._parser(subcommand).set_defaults(self._checkpoint_defaults(subcommand, ckpt_path))
            super().parse_arguments(parser, args)
            run_folders.place_the_run(self.config[subcommand], resume_last=subcommand == "fit")
            if not self._weights(subcommand):  # Lightning restores from the checkpoint read here, not from the file
                self.guard.hand_over(ckpt_path, self.checkpoint)
        run_folders.check_writable_folders(self.config[subcommand])
        self.inputs = checkpoint_inputs(ckpt_path, self.checkpoint, *run_folders.input_files(self.config))

    def _checkpoint_defaults(self, subcommand: str, ckpt_path: str) -> dict:
        """The checkpoint's settings the command takes, parsed once and checked on the meta device, as the parser's
        defaults: less what a link gives, and less the embedded data's ``synthetic`` when the command reads a file."""
        left_out = way_in(subcommand, bool(self._weights(subcommand))).settings_left_out
        config = {
            section: checkpoint_config(self.checkpoint, section, default, left_out)
            for section, default in (("model", Forecaster), ("data", WindowDataModule))
        }
        reading_a_file(config["data"]["init_args"], self.config[subcommand].data.init_args.get("source"))
        trusted = imports.named_imports(self.config[subcommand])  # the user's classes and callables
        parser = section_parser(model=Forecaster, data=WindowDataModule)
        parsed = parsed_settings(parser, config, ckpt_path, trusted, CLI_TRUST)
        model_on_meta(parsed, self.checkpoint, ckpt_path, trusted, CLI_TRUST)
        for name in LINKED:
            if name in parsed:
                del parsed[name]
        return {section: parsed[section].as_dict() for section in config}

    def _weights(self, subcommand: str) -> str | None:
        """fit's ``--weights``, refused beside ``--ckpt_path`` and outside fit (whose ``--ckpt_path`` takes weights)."""
        config = self.config[subcommand]
        if config.get("weights") and (subcommand != "fit" or config.get("ckpt_path")):
            why = "give one" if subcommand == "fit" else f"{subcommand} reads a checkpoint's weights with --ckpt_path"
            raise InputError(f"--weights starts a fit from a checkpoint's weights, --ckpt_path resumes a run: {why}")
        return config.get("weights")

    def _parse_ckpt_path(self) -> None:  # the checkpoint's settings are the parser's defaults already
        pass

    def before_instantiate_classes(self) -> None:
        """A network's ``patch_length: auto`` made the integer it means for the context length and horizon, before the
        network is built and the config saved (which records the integer); then the rules (``project.rules``) on the
        parsed config, before any class is built or the data read."""
        config = self.config[self.subcommand]
        model = config.model.init_args
        network = model.network.get("init_args")
        if network is not None and network.get("patch_length") is not None:  # a network without patches has none
            network.patch_length = resolved_patch_length(network.patch_length, model.context_length, model.horizon)
        rules.check(rules.options(model=model, data=config.data.init_args, naive_comparison=config.naive_comparison))

    def instantiate_classes(self) -> None:
        """What a class refuses of its settings, this project's or Lightning's (the Trainer, its callbacks), as one line
        in the class's own words; with a checkpoint, naming it: its settings may be what was refused."""
        try:
            super().instantiate_classes()
        except (InputError, MisconfigurationException, ValueError) as error:
            said = " ".join(str(reported_cause(error) or error).split())
            ckpt_path = self.config[self.subcommand].ckpt_path or self._weights(self.subcommand)
            raise InputError(f"{ckpt_path}: {said}" if self.checkpoint is not None else said) from None

    def after_instantiate_classes(self) -> None:  # before any subcommand loads weights
        if self.checkpoint is not None:
            ckpt_path = self.config[self.subcommand].ckpt_path or self._weights(self.subcommand)
            check_checkpoint_fits(ckpt_path, self.checkpoint, self.model, self.datamodule)
            if self._weights(self.subcommand):  # the weights, and the data's scaling and vocabularies they read
                self.model.load_state_dict(self.checkpoint["state_dict"])
                order = way_in(self.subcommand, weights=True).training_order
                load_data_state(self.datamodule, self.checkpoint, ckpt_path, training_order=order)

    def _dump_config(self) -> None:
        super()._dump_config()
        # An empty init_args for a network given without one: Lightning records the linked sizes into it.
        network = self.config_dump.get("model", {}).get("init_args", {}).get("network")
        if isinstance(network, dict):
            network["init_args"] = network.get("init_args") or {}

    def instantiate_trainer(self, **kwargs):
        """The Trainer with the default callbacks, less those whose Trainer feature the user turned off, and the
        checkpoint guard (``project.checkpoints.CheckpointGuard``: how it reads and restores a checkpoint)."""
        trainer_config = {**self._get(self.config_init, "trainer", default={}), **kwargs}
        callbacks = [self._get(self.config_init, key) for key in self._parser(self.subcommand).callback_keys]
        callbacks = [*run_folders.callbacks_in_use(trainer_config, callbacks), self.guard]
        trainer = self._instantiate_trainer(trainer_config, callbacks)
        cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        if isinstance(trainer.accelerator, CPUAccelerator) and trainer.num_devices > max(2, cores):
            raise InputError(
                f"trainer.devices={trainer.num_devices} on the CPU starts that many processes; this machine gives this "
                f"run {cores} cores: at most one process each (or two, to try DDP on one core)"
            )
        return trainer

    def before_predict(self) -> None:  # the run's inputs are never replaced by its output
        for writer in (c for c in self.trainer.callbacks if isinstance(c, ForecastWriter)):
            writer.inputs = self.inputs

    def before_fit(self) -> None:
        config = self.config.fit
        run_folders.check_the_run_folder_is_new(self.trainer.logger, config.trainer.get("logger"), config.ckpt_path)

    def after_fit(self) -> None:
        if self.config.fit.test_after_fit and not (self.trainer.fast_dev_run or self.trainer.interrupted):
            self.trainer.enable_autolog_hparams = False  # the fit logged them all, with the effective batch size
            best = run_folders.best_checkpoint(self.trainer)
            self.trainer.test(self.model, datamodule=self.datamodule, ckpt_path=best)


def datamodule_from_config(settings: dict) -> WindowDataModule:
    """The data module a config's ``data`` section describes (as YAML reads it: a split as ``class_path`` and
    ``init_args``), parsed and built by jsonargparse as the CLI would; a refusal is one line naming the option."""
    parser = ArgumentParser(exit_on_error=False)
    parser.add_class_arguments(WindowDataModule, "data", fail_untyped=False)
    try:
        return parser.instantiate(parser.parse_object({"data": settings})).data
    except (ArgumentError, ValueError) as error:  # a class's own refusal, or the parser's
        raise reported_cause(error) or InputError(one_line(str(error))) from None


def cli_main(args: list[str] | None = None, extra_callbacks: list | None = None) -> ForecastCLI | None:
    """The CLI; ``extra_callbacks`` are added to the Trainer as objects, for callers that build them in Python (a
    hyperparameter search's pruning callback)."""
    try:
        with reported_in_one_line(), imports.import_policy_kept(), bounded_yaml_loading():
            return ForecastCLI(
                Forecaster,
                WindowDataModule,
                args=args,
                trainer_defaults={
                    "callbacks": [
                        RandomState(),
                        CtrlCBetweenSteps(),
                        ValidateEachEpochAtLeast(),
                        *(extra_callbacks or []),
                    ]
                },
                subclass_mode_model=True,
                subclass_mode_data=True,
                parser_class=ForecastArgumentParser,
                auto_configure_optimizers=False,  # Forecaster.configure_optimizers is the one optimizer setup
                save_config_callback=run_folders.RunConfig,
                save_config_kwargs={"overwrite": True},  # before_fit refuses an existing run folder itself
            )
    except SIGTERMException as stopped:
        exit_after_signal(stopped, "SIGTERM", EXIT_SIGTERM)
    except KeyboardInterrupt as stopped:  # Ctrl-C before or after Lightning's loops
        exit_after_signal(stopped, "Ctrl-C", EXIT_SIGINT)
    except SystemExit as stopped:
        # Lightning ends a run stopped by Ctrl-C with exit code 1, raised while it handles the KeyboardInterrupt.
        if isinstance(stopped.__context__, KeyboardInterrupt):
            exit_after_signal(stopped.__context__, "Ctrl-C", EXIT_SIGINT)
        raise


if __name__ == "__main__":
    cli_main()
