"""A bad option reported as that option, in one line: the one adapter to jsonargparse's error text.

In subclass mode jsonargparse reports a bad model (or data) option as the whole ``model`` matching none of
``Forecaster | None``, with both attempts; ``readable_error`` keeps the first. ``tests/test_option_errors.py`` pins each
fragment below to jsonargparse's wording.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator, Mapping

from jsonargparse import get_loader, set_loader
from lightning.pytorch.cli import LightningArgumentParser
from lightning.pytorch.utilities.exceptions import MisconfigurationException

from project.errors import InputError, OptionError, reported_cause
from project.files import bounded_yaml
from project.imports import loaded_class

# The fragments of jsonargparse's messages that readable_error relies on, each pinned by a test.
KEY = 'Parser key "'  # `Parser key "model":` opens the error of one option
KEY_END = '":'
NO_UNION_MEMBER = "Does not validate against any of the Union subtypes"
ATTEMPTS = "Errors:"  # the attempts, one per Union member, each a `    - ` item
ATTEMPT = "    - "
ATTEMPTS_END = "\n  Given value type:"
NONE_ATTEMPT = "Expected a <class 'NoneType'>"  # the attempt for `None`, never the user's problem
CLASS_PROBLEM = "Problem with given class_path '"  # `Problem with given class_path 'X':`
GIVEN_VALUE = "Given value: "
NOT_ACCEPTED = "is not accepted"  # `Option 'hidden_size' is not accepted`: not an argument of the class
GOT_VALUE = ". Got value: "  # `Given value: abc. Got value: Namespace(…)`: what the class was given, after the value
NESTED_VALUE = re.compile(r"NestedArg\(key='([^']+)', val=(.+)\)")  # the value of `Given value: NestedArg(…)`
FIRST_KEY = re.compile(re.escape(KEY) + "(.+?)" + re.escape(KEY_END))  # the option an error line opens with
QUOTED_CLASS_PATH = re.compile(re.escape(CLASS_PROBLEM) + "([^']+)':")  # X of `Problem with given class_path 'X':`
MAX_GIVEN = 80  # characters of a refused value quoted before the reason
KEY_LINE = re.compile(re.escape(KEY) + "(.+)" + re.escape(KEY_END))  # network of `Parser key "network":`
# Why a network option is not accepted, when the user meant a checkpoint's network.
NETWORK_OPTIONS = (
    "network options are checked against the network the command line and configs name, "
    "project.model.ForecastTransformer unless they name another; with --ckpt_path, name the checkpoint's network "
    "with --model.network.class_path before them"
)


_load_yaml = get_loader("yaml")


def _bounded_config(text: str, path: object = None) -> object:
    """jsonargparse's YAML loader with ``bounded_yaml``'s bounds, naming the file jsonargparse read it from (a
    ``--config`` file; inline configs and values have none)."""
    # jsonargparse gives a file's name and reads it from the file's own folder (its rule for relative paths)
    return bounded_yaml(text, source=os.path.abspath(path) if path else "a config", load=_load_yaml)


set_loader("yaml", _bounded_config)  # configs, inline configs and values


class ForecastArgumentParser(LightningArgumentParser):
    """LightningCLI's parser, with a bad model or data option reported as that option (see ``readable_error``), as
    one error line without the usage text (``--help`` has it): a search that runs many fits reports each bad
    option once, not pages of usage."""

    def error(self, message: str, ex: Exception | None = None):
        if self.exit_on_error:  # the parser the user called; the inner ones raise for jsonargparse to try the next type
            line = one_line(message)
            if line.startswith(f"{KEY}model.network") and NOT_ACCEPTED in line:
                line += f" ({NETWORK_OPTIONS})"
            raise InputError(line) from ex  # one line
        super().error(readable_error(message), ex)


def one_line(message: str) -> str:
    """jsonargparse's message (``readable_error``), or any other, as one line."""
    return " ".join(readable_error(message).split())


def readable_error(message: str) -> str:
    """jsonargparse's message for a bad option of the model or the data, as the option and what was expected:
    ``Parser key "model.instance_norm": Expected …``; any other message as it is."""
    section = next((name for name in ("model", "data") if message.startswith(f"{KEY}{name}{KEY_END}")), None)
    if section is None or NO_UNION_MEMBER not in message:
        return message
    errors: list[list[str]] = []
    for line in message.partition(ATTEMPTS)[2].partition(ATTEMPTS_END)[0].splitlines():
        if line.startswith(ATTEMPT):
            errors.append([line[len(ATTEMPT) :].strip()])
        elif errors and line.strip():
            errors[-1].append(line.strip())
    errors = [error for error in errors if error != [NONE_ATTEMPT]]
    if not errors:
        return message
    first, *rest = errors[0]
    quoted = QUOTED_CLASS_PATH.match(first)
    if quoted is None:
        given = message.splitlines()[-1].partition(GIVEN_VALUE)[2]  # the last line: what the user gave
        if len(given) > MAX_GIVEN:  # a whole section's settings (a checkpoint's): the reason says which part
            given = given[: MAX_GIVEN - 1] + "…"
        return f"{KEY}{section}{KEY_END} {given}: {' '.join([first, *rest])}"
    if rest and rest[0].startswith(KEY):
        lines = [rest[0].replace(KEY, f"{KEY}{section}.", 1), *rest[1:]]
        while len(lines) >= 3 and lines[1].startswith(CLASS_PROBLEM) and (inner := KEY_LINE.match(lines[2])):
            # an error inside the network: named as a config names it, model.network.init_args.d_model
            lines = [lines[0].removesuffix(KEY_END) + f".init_args.{inner[1]}{KEY_END}", *lines[3:]]
        return "\n  ".join(lines)
    return f"{KEY}{section}{KEY_END} {' '.join(rest)} ({quoted[1]})"


def option_and_value(line: str) -> str:
    """A bad option's one-line error as the option and the value refused (``trainer.precision=bogus is refused``),
    for a summary of many errors (a study's failed trials); a line without the value given, as it is."""
    keys = FIRST_KEY.findall(line)
    if not line.startswith(KEY) or GIVEN_VALUE not in line:
        return line
    # The innermost option named, as a config names it: an argument of a class given by class_path is under init_args.
    option = keys[0] if len(keys) == 1 else f"{keys[0]}.init_args.{keys[-1]}"
    given = line.rpartition(GIVEN_VALUE)[2].partition(GOT_VALUE)[0].strip()
    if nested := NESTED_VALUE.fullmatch(given):  # an argument of the section's class, keyed below the section
        option, given = f"{option.split('.')[0]}.{nested[1]}", nested[2].strip("'")
    return f"{option}={given} is refused"


@contextlib.contextmanager
def named_for_the_config(config, sections: Mapping[str, type]) -> Iterator[None]:
    """While the CLI builds the classes of ``config``: a class's own check names its argument (``d_model must be
    …``), and here it is named as a config names it (``model.network.init_args.d_model must be …``), once, for every
    class (``sections``: the sections of classes given without a class_path, the callbacks). What a class this
    project does not own refuses (the Trainer, Lightning's callbacks) is one line as Lightning words it."""
    try:
        yield
    except Exception as error:
        cause = reported_cause(error)
        if isinstance(cause, OptionError) and (path := option_path(config, cause, sections)):
            raise cause.named(path) from None
        if cause is None and isinstance(error, (MisconfigurationException, ValueError)):
            raise InputError(" ".join(str(error).split())) from None
        raise


def option_path(config, error: OptionError, sections: Mapping[str, type]) -> str | None:
    """Where ``config`` sets the argument ``error.option`` of ``error.owner``, as users write it
    (``model.network.init_args.d_model``); None when it sets it nowhere."""
    for key, value in config.items():
        if key.endswith("class_path") and isinstance(owner := loaded_class(value), type):
            candidate = f"{key.removesuffix('class_path')}init_args.{error.option}"
            if issubclass(owner, error.owner) and candidate in config:
                return (
                    candidate.replace(".init_args.", ".", 1) if candidate.startswith(("model.", "data.")) else candidate
                )
    section = next((name for name, cls in sections.items() if issubclass(error.owner, cls)), None)
    return f"{section}.{error.option}" if section else None
