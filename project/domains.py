"""The domain of every numeric option the command line takes, in one table, checked at start-up.

A value outside its domain is refused in one line before any data is read (``python -m project.cli`` checks the
whole config; ``Forecaster`` and ``WindowDataModule`` check their own sections when built from Python). Empty
(``null``) values are left to the option's own default. ``tests/test_domains.py`` walks ``fit --help`` (and
``--model.help``, ``--data.help``) and fails for a numeric option that is missing here.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from project.errors import InputError


@dataclass(frozen=True)
class Domain:
    """The values an option accepts: ``holds(value)``, described for the error message as ``description``."""

    description: str
    holds: Callable[[Any], bool]


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def _integer(value: Any) -> bool:
    return _number(value) and float(value).is_integer()


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
        return bool(value) and all(_integer(index) and index >= 0 for index in value)
    return _integer(value) and (value >= 1 or value == -1)


def _at_least(low: int, description: str | None = None) -> Domain:
    return Domain(description or f"an integer >= {low}", lambda v: _integer(v) and v >= low)


POSITIVE = _at_least(1, "a positive integer")
NON_NEGATIVE = _at_least(0, "a non-negative integer")
FINITE = Domain("a finite number", _number)
NON_NEGATIVE_NUMBER = Domain("a finite number >= 0", lambda v: _number(v) and v >= 0)
POSITIVE_NUMBER = Domain("a finite number > 0", lambda v: _number(v) and v > 0)
FRACTION = Domain("a number in (0, 1]", lambda v: _number(v) and 0 < v <= 1)
PROBABILITY = Domain("a number in [0, 1]", lambda v: _number(v) and 0 <= v <= 1)
# Lightning reads a float as a share of the batches and an integer as a number of them.
BATCHES = Domain(
    "a share in [0, 1] (float) or a number of batches >= 0 (integer)",
    lambda v: _number(v) and v >= 0 and (v <= 1 or float(v).is_integer()),  # the parser may read 2 as 2.0
)
SEED = Domain("an integer in [0, 2**32 - 1], or true/false", lambda v: isinstance(v, bool) or 0 <= v < 2**32)

DOMAINS: dict[str, Domain] = {
    "seed_everything": SEED,
    "trainer.devices": Domain(
        "a number of devices >= 1, -1 (all), 'auto' or a list of device indices",
        lambda v: _devices(v),
    ),
    "trainer.num_nodes": POSITIVE,
    "trainer.fast_dev_run": Domain("true/false or a number of batches >= 0", lambda v: isinstance(v, bool) or v >= 0),
    "trainer.max_epochs": _at_least(-1),
    "trainer.min_epochs": NON_NEGATIVE,
    "trainer.max_steps": _at_least(-1),
    "trainer.min_steps": NON_NEGATIVE,
    "trainer.limit_train_batches": BATCHES,
    "trainer.limit_val_batches": BATCHES,
    "trainer.limit_test_batches": BATCHES,
    "trainer.limit_predict_batches": BATCHES,
    "trainer.overfit_batches": BATCHES,
    "trainer.val_check_interval": Domain(
        "a share of an epoch in (0, 1] (float) or a number of batches >= 1 (integer)",
        lambda v: not _number(v) or (v >= 1 if isinstance(v, int) else 0 < v <= 1),
    ),
    "trainer.check_val_every_n_epoch": POSITIVE,
    "trainer.num_sanity_val_steps": _at_least(-1),
    "trainer.log_every_n_steps": POSITIVE,
    "trainer.accumulate_grad_batches": POSITIVE,
    "trainer.gradient_clip_val": NON_NEGATIVE_NUMBER,
    "trainer.reload_dataloaders_every_n_epochs": NON_NEGATIVE,
    "model.max_horizon": POSITIVE,
    "model.network.init_args.d_model": POSITIVE,
    "model.network.init_args.nhead": POSITIVE,
    "model.network.init_args.num_encoder_layers": POSITIVE,
    "model.network.init_args.num_decoder_layers": POSITIVE,
    "model.network.init_args.dim_feedforward": POSITIVE,
    "model.network.init_args.dropout": Domain("a number in [0, 1)", lambda v: _number(v) and 0 <= v < 1),
    "model.network.init_args.patch_length": POSITIVE,
    "model.network.init_args.max_length": POSITIVE,
    "model.network.init_args.hidden_size": POSITIVE,
    "model.network.init_args.num_layers": POSITIVE,
    "model.quantile_levels": Domain("a list of numbers in (0, 1)", lambda v: all(_number(q) and 0 < q < 1 for q in v)),
    "model.num_samples": _at_least(2),
    "model.season": _at_least(1),
    "model.interval": Domain("a number in (0, 1)", lambda v: _number(v) and 0 < v < 1),
    "model.prediction_quantiles": Domain(
        "a list of numbers in (0, 1)", lambda v: all(_number(q) and 0 < q < 1 for q in v)
    ),
    "model.huber_delta": POSITIVE_NUMBER,
    "model.schedule_steps": POSITIVE,
    "model.min_teacher_forcing": PROBABILITY,
    "model.learning_rate": POSITIVE_NUMBER,
    "model.weight_decay": NON_NEGATIVE_NUMBER,
    "model.warmup_steps": NON_NEGATIVE,
    "data.context_length": POSITIVE,
    "data.horizon": POSITIVE,
    "data.predict_horizon": POSITIVE,
    "data.stride": POSITIVE,
    "data.eval_stride": POSITIVE,
    "data.batch_size": POSITIVE,
    "data.num_workers": NON_NEGATIVE,
    "data.train_fraction": FRACTION,
    "data.val_fraction": FRACTION,
    "data.test_fraction": FRACTION,
    "data.val_size": POSITIVE,
    "data.test_size": POSITIVE,
    "data.synthetic_rows": POSITIVE,
    "data.shuffle_seed": Domain("an integer in [0, 2**63)", lambda v: _integer(v) and 0 <= v < 2**63),
    "checkpoint.save_top_k": _at_least(-1),
    "checkpoint.every_n_train_steps": NON_NEGATIVE,
    "checkpoint.every_n_epochs": NON_NEGATIVE,
    "early_stopping.min_delta": NON_NEGATIVE_NUMBER,
    "early_stopping.patience": NON_NEGATIVE,
    "early_stopping.stopping_threshold": FINITE,
    "early_stopping.divergence_threshold": FINITE,
    "forecast_figures.every_n_epochs": NON_NEGATIVE,
    "forecast_figures.num_windows": Domain("an integer in [1, 50]", lambda v: _integer(v) and 1 <= v <= 50),
}


def check_domains(settings: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse (one line) the first value of ``settings`` outside its domain; keys are dotted option names, read
    after ``prefix`` (``"model."`` for a ``Forecaster``'s own arguments)."""
    for name, value in settings.items():
        domain = DOMAINS.get(prefix + name)
        if domain is None or value is None:
            continue
        try:
            holds = domain.holds(value)
        except TypeError:  # a value of the wrong kind altogether
            holds = False
        if not holds:
            raise InputError(f"{prefix}{name} must be {domain.description}; got {value!r}")


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
