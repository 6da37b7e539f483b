"""What a command decides between parsing its options and building anything, around the checkpoint it reads
(``project.checkpoints.CommandCheckpoint``): before it, what the user set and every option in its domain, and which
run folder it logs in (``--ckpt_path last`` finds its checkpoint); after it, the folders the run writes and the files
it must never replace. Each step is one line of error when it fails, before any data is read or any class is built."""

from __future__ import annotations

from collections.abc import Mapping

from jsonargparse import Namespace

from project import run_folders, settings


def before_the_checkpoint(parsed: Namespace, given: list[str], callbacks: Mapping[str, type]) -> dict:
    """What the user set for the subcommand ``parsed`` holds (``settings.explicit_settings``), once every option is
    checked to be inside its domain (``callbacks``: this project's callback classes by config section) and the run
    is placed (named, or ``--ckpt_path last`` resolved)."""
    subcommand = parsed.subcommand
    config = parsed[subcommand]
    explicit = settings.explicit_settings(given, config, subcommand, parsed.get("config"))
    settings.check_options(config, callbacks)
    run_folders.place_the_run(config, explicit, resume_last=subcommand == "fit")
    return explicit


def after_the_checkpoint(config: Namespace, explicit: dict) -> list[str]:
    """The files the run reads (configs, data), once the folders it writes are checked writable: its outputs never
    replace them, not even with ``--overwrite``."""
    run_folders.drop_the_data_cache_without_logs(config, explicit)
    run_folders.check_writable_folders(config)
    return settings.input_files(config)
