"""The domains of this project's numeric options, as jsonargparse types: ``batch_size: PositiveInt`` is refused by the
parser under its own key (``model.network.init_args.d_model``), from a config, the command line or a checkpoint's
settings, and ``--help`` prints the type's name. The parser checks them; a class built in Python takes what it is given,
and torch says what it cannot use."""

from __future__ import annotations

from typing import Literal

from jsonargparse.typing import (
    ClosedUnitInterval,
    NonNegativeInt,
    OpenUnitInterval,
    PositiveFloat,
    PositiveInt,
    restricted_number_type,
)

AtLeastTwo = restricted_number_type("AtLeastTwo", int, (">=", 2))
Fraction = restricted_number_type("Fraction", float, [(">", 0), ("<=", 1)])  # a share of the rows: (0, 1]
DropoutRate = restricted_number_type("DropoutRate", float, [(">=", 0), ("<", 1)])
Probability = ClosedUnitInterval
UnitLevels = list[OpenUnitInterval]
# A patch length, or "auto": resolved from the data's look-back and horizon (project.model.auto_patch_length).
PatchLength = PositiveInt | Literal["auto"]

__all__ = [
    "AtLeastTwo",
    "DropoutRate",
    "Fraction",
    "NonNegativeInt",
    "OpenUnitInterval",
    "PatchLength",
    "PositiveFloat",
    "PositiveInt",
    "Probability",
    "UnitLevels",
    "restricted_number_type",
]
