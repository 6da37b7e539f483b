"""Numeric domains, declared once, as types on this project's signatures: ``batch_size: PositiveInt`` is
``Annotated[int, Domain(...)]``. ``--help`` prints the domain beside the type; ``check_arguments``, called by a class
when built, refuses a value outside it in one line (``null`` takes the option's default), and the CLI names the option
as a config does. ``tests/test_domains.py`` fails for a numeric option of ``fit --help`` without a domain."""

from __future__ import annotations

import math
import numbers
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from project.errors import OptionError


@dataclass(frozen=True)
class Domain:
    """The values an option accepts: ``holds(value)``, described for the error message as ``description``."""

    description: str
    holds: Callable[[Any], bool]

    def __repr__(self) -> str:  # what --help prints beside the type: Annotated[int, a positive integer]
        return self.description


def is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_integer(value: Any) -> bool:
    return is_number(value) and float(value).is_integer()


def at_least(low: int, description: str | None = None) -> Domain:
    return Domain(description or f"an integer >= {low}", lambda v: is_integer(v) and v >= low)


def between(description: str, holds: Callable[[float], bool]) -> Domain:
    """The finite numbers for which ``holds`` is true."""
    return Domain(description, lambda v: is_number(v) and holds(v))


# The types this project's signatures use.
PositiveInt = Annotated[int, at_least(1, "a positive integer")]
NonNegativeInt = Annotated[int, at_least(0, "a non-negative integer")]
AtLeastTwo = Annotated[int, at_least(2)]
PositiveFloat = Annotated[float, between("a finite number > 0", lambda v: v > 0)]
Fraction = Annotated[float, between("a number in (0, 1]", lambda v: 0 < v <= 1)]
Probability = Annotated[float, between("a number in [0, 1]", lambda v: 0 <= v <= 1)]
OpenUnitInterval = Annotated[float, between("a number in (0, 1)", lambda v: 0 < v < 1)]
DropoutRate = Annotated[float, between("a number in [0, 1)", lambda v: 0 <= v < 1)]
UnitLevels = Annotated[
    list[float], Domain("a list of numbers in (0, 1)", lambda v: all(is_number(q) and 0 < q < 1 for q in v))
]
# A patch length, or "auto": resolved from the data's look-back and horizon (project.model.auto_patch_length).
PatchLength = Annotated[
    int | Literal["auto"], Domain("a positive integer or 'auto'", lambda v: v == "auto" or (is_integer(v) and v >= 1))
]


def declared_domains(cls: type) -> dict[str, Domain]:
    """The domains a class's ``__init__`` declares on its arguments' types: name → ``Domain``."""
    hints = typing.get_type_hints(cls.__init__, include_extras=True)
    return {name: domain for name, hint in hints.items() if (domain := _domain_of(hint)) is not None}


def check_arguments(cls: type, arguments: Mapping[str, Any], prefix: str = "") -> None:
    """Refuse (one line) the first of ``arguments`` outside the domain ``cls.__init__`` declares for it; messages name
    it as ``prefix`` + its name (``model.network.init_args.d_model`` from the command line)."""
    domains = declared_domains(cls)
    for name, value in arguments.items():
        if (domain := domains.get(name)) is None or value is None:
            continue
        try:
            holds = domain.holds(value)
        except TypeError:  # a value of the wrong kind altogether
            holds = False
        if not holds:
            raise OptionError(prefix + name, f"must be {domain.description}; got {value!r}", cls)


def _domain_of(hint: Any) -> Domain | None:
    """The ``Domain`` of ``Annotated[..., Domain]``, also inside ``X | None``."""
    if typing.get_origin(hint) is Annotated:
        return next((meta for meta in hint.__metadata__ if isinstance(meta, Domain)), None)
    return next((d for arg in typing.get_args(hint) if (d := _domain_of(arg)) is not None), None)
