"""Where a run writes: a folder named after its data, ``--ckpt_path last`` as the newest run's ``last.ckpt``, its
config.yaml in its folder, every folder checked before the work; nothing of an earlier run is overwritten."""

from __future__ import annotations

import inspect
from pathlib import Path

import lightning as L
from lightning.pytorch.callbacks import LearningRateMonitor, ModelCheckpoint
from lightning.pytorch.cli import SaveConfigCallback
from lightning.pytorch.utilities import rank_zero_info

from project.errors import InputError
from project.files import check_folder_writable, check_name_lengths
from project.rules import loaded_class
from project.training.callbacks import find_last_checkpoint, run_version


class RunConfig(SaveConfigCallback):
    """Saves the run's config.yaml in its log folder, and nowhere without one (LightningCLI would write, and replace,
    one in the working directory). The data file is recorded absolute, as in the checkpoint."""

    def setup(self, trainer, pl_module, stage: str) -> None:
        if trainer.logger is not None and trainer.logger.log_dir is not None:
            data = self.config.data.init_args
            if isinstance(data.get("source"), (str, Path)):
                data.source = str(Path(data.source).absolute())
            super().setup(trainer, pl_module, stage)


def place_the_run(config, resume_last: bool) -> None:
    """Log under the data's name (its file's stem, or ``synthetic_<series>``) unless the user named the run (the
    logger's ``name``, MLflow's ``run_name``); a run that writes no logs leaves no data cache behind either, unless
    the cache folder is set to other than the data module's default; and, for ``--ckpt_path last`` when
    ``resume_last``, resume the newest run."""
    logger, data = config.trainer.get("logger"), config.data
    if hasattr(logger, "get") and "init_args" in logger:
        key = next((k for k in ("name", "run_name") if k in logger.init_args), None)
        if key and logger.init_args[key] == default_of(logger.get("class_path"), key):
            source, synthetic = data.init_args.get("source"), data.init_args.get("synthetic", "series")
            logger.init_args[key] = Path(str(source)).stem if source else f"synthetic_{synthetic}"
    if no_logger(logger) and data.init_args.get("cache_dir") == default_of(data.get("class_path"), "cache_dir"):
        data.init_args.cache_dir = None
    if resume_last and config.get("ckpt_path") == "last":
        resume_last_run(config)


def resume_last_run(config) -> None:
    """``--ckpt_path last``: the last.ckpt of the run folder the user named (``trainer.logger.init_args.version``), or
    else of the newest ``version_N`` run, logged on in that run's folder (or a fresh start)."""
    logger = config.trainer.get("logger")
    init_args = logger.get("init_args", {}) if hasattr(logger, "get") else {}
    if "version" not in init_args:
        raise InputError("--ckpt_path last needs a logger with versioned run folders (TensorBoard or CSV)")
    save_dir = Path(init_args.get("save_dir") or config.trainer.get("default_root_dir") or ".")
    name = init_args.get("name") or "lightning_logs"
    version = init_args.get("version")
    if version is not None:  # a run the user named (seed_0): its own last.ckpt
        last = save_dir / name / str(version) / "checkpoints" / "last.ckpt"
        last = last if last.is_file() else None
    else:
        last = find_last_checkpoint(save_dir / name)
    if last is None:
        rank_zero_info(f"No last.ckpt under {save_dir / name}; starting from scratch")
        config.ckpt_path = None
        return
    config.ckpt_path = str(last)
    if version is None:
        init_args.version = run_version(last)


def check_the_run_folder_is_new(logger, logger_config, ckpt_path: str | None) -> None:
    """A run folder the user chose (``trainer.logger.init_args.version``) that already holds a run is refused, unless
    the run resumes from a checkpoint inside it: an earlier run is never overwritten."""
    init_args = logger_config.get("init_args") if hasattr(logger_config, "get") else None
    if logger is None or not hasattr(init_args, "get") or init_args.get("version") is None:
        return
    log_dir = Path(logger.log_dir)
    if ckpt_path and log_dir.resolve() in Path(ckpt_path).resolve().parents:
        return  # resuming the run in its own folder
    if log_dir.is_dir() and any(log_dir.iterdir()):
        raise InputError(
            f"{log_dir} already holds a run; choose another trainer.logger.init_args.version, or resume it "
            "with --ckpt_path last"
        )


def check_writable_folders(config) -> None:
    """The folders a run will write (checkpoints, logs, the data cache) refused at start-up when they cannot be."""
    logger = config.trainer.get("logger")
    loggers = logger if isinstance(logger, list) else [logger]
    folders = {"checkpoint.dirpath": config.get("checkpoint", {}).get("dirpath")}
    if logger is None or logger is True:  # Lightning's default logger writes under default_root_dir
        folders["trainer.default_root_dir"] = config.trainer.get("default_root_dir") or "."
    for position, entry in enumerate(loggers):
        if hasattr(entry, "get") and hasattr(entry.get("init_args"), "get"):
            where = "trainer.logger" + (f"[{position}]" if isinstance(logger, list) else "")
            folders[f"{where}.init_args.save_dir"] = entry.init_args.get("save_dir")
            for name in ("name", "version"):  # each a folder of the run's path
                if isinstance(entry.init_args.get(name), (str, int)):
                    check_name_lengths(str(entry.init_args.get(name)), f"{where}.init_args.{name}")
    if config.data.init_args.get("source") is not None:  # only a file's matrix is cached
        folders["data.cache_dir"] = config.data.init_args.get("cache_dir")
    for option, folder in folders.items():
        if folder:
            check_folder_writable(folder, option)


def no_logger(logger: object) -> bool:
    """``trainer.logger`` turns logging off (``false`` or an empty list); ``null`` is Lightning's default logger."""
    return logger is False or (isinstance(logger, list) and not logger)


def callbacks_in_use(trainer_config: dict, callbacks: list) -> list:
    """The default ``callbacks`` less those whose Trainer feature is off (no logger, no checkpointing). A run that logs
    nothing keeps checkpoints only in a folder the user names (``checkpoint.dirpath``), never piling up in the working
    directory; asking for them without one is refused."""
    if no_logger(trainer_config.get("logger")):
        callbacks = [c for c in callbacks if not isinstance(c, LearningRateMonitor)]
        checkpoint = next((c for c in callbacks if isinstance(c, ModelCheckpoint)), None)
        if checkpoint is None or checkpoint.dirpath is None:
            if trainer_config.get("enable_checkpointing"):
                raise InputError(
                    "trainer.enable_checkpointing=true with trainer.logger=false needs a folder for the checkpoints: "
                    "set --checkpoint.dirpath"
                )
            trainer_config["enable_checkpointing"] = False
    if trainer_config.get("enable_checkpointing") is False:
        callbacks = [c for c in callbacks if not isinstance(c, ModelCheckpoint)]
    return callbacks


def input_files(parsed) -> list[str | None]:
    """The files a run reads that its settings name: the data file (None for the embedded data), the ``--config``
    files (before the subcommand too) and section files (``--data FILE``)."""
    config = parsed[parsed.subcommand]
    paths = [*(parsed.get("config") or []), *(config.get("config") or [])]
    paths += [path for name, path in config.items() if name.endswith("__path__")]
    return [config.data.init_args.get("source"), *(str(getattr(p, "absolute", p)) for p in paths if p)]


def best_checkpoint(trainer: L.Trainer) -> str | None:
    """The fit's best checkpoint, to test after training; None (the weights as training left them), said why."""
    callback = trainer.checkpoint_callback
    if callback is not None and callback.best_model_path:
        return callback.best_model_path
    why = "checkpointing is off" if callback is None else "no validation ran"
    rank_zero_info(f"Testing the weights at the end of training: there is no best checkpoint ({why})")
    return None


def default_of(class_path: type | str | None, argument: str) -> object:
    """The default of the constructor ``argument`` of a class, or of the (imported) class a config names; None when
    it has none."""
    cls = class_path if isinstance(class_path, type) else loaded_class(class_path)
    parameter = inspect.signature(cls).parameters.get(argument) if isinstance(cls, type) else None
    return None if parameter is None or parameter.default is parameter.empty else parameter.default
