"""What a command decides between parsing its options and building anything, around the checkpoint it reads
(``project.checkpoints.CommandCheckpoint``): before it, what the user set and every option in its domain, and which
run folder it logs in (``--ckpt_path last`` finds its checkpoint); after it, the folders the run writes and the files
it must never replace. Each step is one line of error when it fails, before any data is read or any class is built."""

from __future__ import annotations

from collections.abc import Mapping

from jsonargparse import Namespace

from project import run_folders, settings
from project.domains import check_arguments
from project.imports import imported_class
from project.lightning_domains import LIGHTNING_DOMAINS, check_accelerator, check_domains
from project.training.callbacks import ForecastCheckpoint
from project.training.naive_comparison import NaiveComparison


def before_the_checkpoint(parsed: Namespace, given: list[str], callbacks: Mapping[str, type]) -> dict:
    """What the user set for the subcommand ``parsed`` holds (``settings.explicit_settings``), once every option is
    checked to be inside its domain (``callbacks``: this project's callback classes by config section) and the run
    is placed (named, or ``--ckpt_path last`` resolved)."""
    subcommand = parsed.subcommand
    config = parsed[subcommand]
    explicit = settings.explicit_settings(given, config, subcommand, parsed.get("config"))
    check_options(config, callbacks)
    run_folders.place_the_run(config, explicit, resume_last=subcommand == "fit")
    return explicit


def after_the_checkpoint(config: Namespace, explicit: dict) -> list[str]:
    """The files the run reads (configs, data), once the run is named after its data (the checkpoint's, when the
    user named none) and the folders it writes are checked writable: its outputs never replace those files, not even
    with ``--overwrite``."""
    run_folders.name_the_run(config, explicit)
    run_folders.drop_the_data_cache_without_logs(config, explicit)
    run_folders.check_writable_folders(config)
    return settings.input_files(config)


def check_options(config: Namespace, callbacks: Mapping[str, type]) -> None:
    """Every numeric option of a parsed ``config`` inside its domain, checked before anything is built: the data's,
    the model's, the network's, its distribution's, the regime's, the learning-rate scheduler's and this project's
    ``callbacks``' (section → class) by the types on their classes' signatures (``project.domains``), the others by
    ``LIGHTNING_DOMAINS``; then the rules between sections that a class checks again when built from Python, and an
    accelerator this machine has."""
    flat = {settings.user_facing(name): value for name, value in config.items()}
    check_domains({name: flat[name] for name in LIGHTNING_DOMAINS if name in flat})
    sections = {"data.": config.get("data"), "model.": config.get("model")}  # the data first: it sets the links
    sections["model.network.init_args."] = network = config.get("model.init_args.network")
    init_args = network.get("init_args") if hasattr(network, "get") else None
    sections["model.network.init_args.distribution.init_args."] = init_args.get("distribution") if init_args else None
    for component in ("regime", "lr_scheduler"):  # the optimizer is torch's: it checks its own arguments
        sections[f"model.{component}.init_args."] = config.get(f"model.init_args.{component}")
    for prefix, spec in sections.items():
        owner = imported_class(spec.get("class_path")) if hasattr(spec, "get") else None
        if isinstance(owner, type):  # a class that cannot be imported is jsonargparse's to report
            check_arguments(owner, dict(spec.get("init_args") or {}), prefix)
    for section, owner in callbacks.items():
        check_arguments(owner, dict(config.get(section) or {}), f"{section}.")
    if (config.get("naive_comparison") or {}).get("enabled", True):
        NaiveComparison.check_season(config.naive_comparison.get("season"), config.data.init_args.get("context_length"))
    ForecastCheckpoint.check_save_last((config.get("checkpoint") or {}).get("save_last"))
    check_accelerator(config.trainer.get("accelerator"))
