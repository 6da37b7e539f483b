"""The domains of the options of the classes this project does not own (LightningCLI's seed, the Trainer, Lightning's
callbacks), in one table that ``python -m project.cli`` checks at start-up; this project's own classes declare theirs
on their signatures (``project.domains``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from project.domains import (
    FINITE,
    NON_NEGATIVE,
    NON_NEGATIVE_NUMBER,
    POSITIVE,
    Domain,
    at_least,
    check_value,
    is_integer,
    is_number,
)
from project.errors import InputError


def _devices(value: Any) -> bool:
    """Lightning's ``devices``: a count, -1, ``auto``, or device indices as a list or a string such as ``"0,1"``
    (the command line hands over ``--trainer.devices 2`` as the string ``"2"``)."""
    if isinstance(value, str):
        text = value.strip()
        if text == "auto":
            return True
        if "," in text or (text.startswith("[") and text.endswith("]")):
            indices = [part.strip() for part in text.strip("[]").split(",") if part.strip()]
            return bool(indices) and all(index.isdigit() for index in indices)
        try:
            value = int(text)
        except ValueError:
            return False
    if isinstance(value, list):
        return bool(value) and all(is_integer(index) and index >= 0 for index in value)
    return is_integer(value) and (value >= 1 or value == -1)


# Lightning reads a float as a share of the batches and an integer as a number of them.
BATCHES = Domain(
    "a share in [0, 1] (float) or a number of batches >= 0 (integer)",
    lambda v: is_number(v) and v >= 0 and (v <= 1 or float(v).is_integer()),  # the parser may read 2 as 2.0
)
SEED = Domain("an integer in [0, 2**32 - 1], or true/false", lambda v: isinstance(v, bool) or 0 <= v < 2**32)
# The options of classes whose signatures are not this project's: LightningCLI's seed, the Trainer, Lightning's
# callbacks.
LIGHTNING_DOMAINS: dict[str, Domain] = {
    "seed_everything": SEED,
    "trainer.devices": Domain(
        "a number of devices >= 1, -1 (all), 'auto' or a list of device indices",
        _devices,
    ),
    "trainer.num_nodes": POSITIVE,
    "trainer.fast_dev_run": Domain("true/false or a number of batches >= 0", lambda v: isinstance(v, bool) or v >= 0),
    "trainer.max_epochs": at_least(-1),
    "trainer.min_epochs": NON_NEGATIVE,
    "trainer.max_steps": at_least(-1),
    "trainer.min_steps": NON_NEGATIVE,
    "trainer.limit_train_batches": BATCHES,
    "trainer.limit_val_batches": BATCHES,
    "trainer.limit_test_batches": BATCHES,
    "trainer.limit_predict_batches": BATCHES,
    "trainer.overfit_batches": BATCHES,
    "trainer.val_check_interval": Domain(
        "a share of an epoch in (0, 1] (float) or a number of batches >= 1 (integer)",
        lambda v: not is_number(v) or (v >= 1 if isinstance(v, int) else 0 < v <= 1),
    ),
    "trainer.check_val_every_n_epoch": POSITIVE,
    "trainer.num_sanity_val_steps": at_least(-1),
    "trainer.log_every_n_steps": POSITIVE,
    "trainer.accumulate_grad_batches": POSITIVE,
    "trainer.gradient_clip_val": NON_NEGATIVE_NUMBER,
    "trainer.reload_dataloaders_every_n_epochs": NON_NEGATIVE,
    "checkpoint.save_top_k": at_least(-1),
    "checkpoint.every_n_train_steps": NON_NEGATIVE,
    "checkpoint.every_n_epochs": NON_NEGATIVE,
    "early_stopping.min_delta": NON_NEGATIVE_NUMBER,
    "early_stopping.patience": NON_NEGATIVE,
    "early_stopping.stopping_threshold": FINITE,
    "early_stopping.divergence_threshold": FINITE,
}


def check_domains(settings: Mapping[str, Any]) -> None:
    """Refuse (one line) the first value of ``settings`` (dotted option names) outside its ``LIGHTNING_DOMAINS``."""
    for name, value in settings.items():
        check_value(name, value, LIGHTNING_DOMAINS.get(name))


def check_accelerator(accelerator: Any) -> None:
    """Refuse an accelerator Lightning does not know, or one this machine does not have, before a Trainer is built
    for it (Lightning would stop with a traceback). An Accelerator object passes as it is."""
    from lightning.pytorch.accelerators import AcceleratorRegistry

    if not isinstance(accelerator, str) or accelerator == "auto":
        return
    name = "cuda" if accelerator == "gpu" else accelerator
    known = sorted(AcceleratorRegistry.available_accelerators())
    if name not in known:
        raise InputError(f"trainer.accelerator must be auto, gpu or one of {', '.join(known)}; got {accelerator!r}")
    if not AcceleratorRegistry[name]["accelerator"].is_available():
        raise InputError(f"trainer.accelerator={accelerator}: this machine has none; use cpu or auto")
