"""A bad option reported as that option, in one line: the one reader of jsonargparse's error text.

jsonargparse reports an option of a class given by ``class_path`` as the whole section matching none of its types
(``Forecaster | None``), one attempt per type, each nesting the error of the class's own option. ``readable_error``
follows the first attempt down to the option and its reason: ``Parser key "model.network.init_args.d_model": Not of
type PositiveInt: 0 does not conform to restriction v>0``. ``tests/cli/test_option_errors.py`` pins the words it reads.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterator

from jsonargparse import get_loader, set_loader
from lightning.pytorch.cli import LightningArgumentParser

from project.errors import InputError
from project.files import bounded_yaml

# The words of jsonargparse's messages that readable_error reads, each pinned by a test.
# `Parser key "model":` opens the error of one option. An inner parser's error, already made readable, has its reason
# on the same line; a callable's argument closes the line of why the callable was refused (`…: Parser key "lr":`).
KEY = re.compile(r'^(?:- )?(.*: )?Parser key "(.+?)":(.*)$')
CLASS_PROBLEM = re.compile(r"^(?:- )?Problem with given class_path '[^']+':$")  # the next key is the class's argument
NESTING = ("Does not validate against any of the Union subtypes", "Subtypes:", "Errors:")
ATTEMPT_END = ("- Expected a <class 'NoneType'>", "Given value type:")  # after the first attempt
GIVEN_VALUE = "\n  Given value: "  # the value the section was given, on the message's last line
SCALAR = re.compile(r"[^\s{}\[\](),']{1,80}")  # a value given on the command line, quoted beside the reason
NOT_ACCEPTED = "is not accepted"  # `Option 'hidden_size' is not accepted`: not an argument of the class
SECTIONS = ("model", "data")  # named without init_args, as the CLI names them: model.network
# Why a network option is not accepted, when the user meant a checkpoint's network.
NETWORK_OPTIONS = (
    "network options are checked against the network the command line and configs name, "
    "project.model.ForecastTransformer unless they name another; with --ckpt_path, name the checkpoint's network "
    "with --model.network.class_path before them"
)


@contextlib.contextmanager
def bounded_yaml_loading() -> Iterator[None]:
    """While it holds, jsonargparse reads YAML (configs, inline configs, values) within ``bounded_yaml``'s bounds, each
    file named in the message; its own loader is back afterwards (nothing stays installed in jsonargparse)."""
    load_yaml = get_loader("yaml")

    def bounded(text: str, path: object = None) -> object:
        # jsonargparse gives a file's name and reads it from the file's own folder (its rule for relative paths)
        return bounded_yaml(text, source=os.path.abspath(path) if path else "a config", load=load_yaml)

    set_loader("yaml", bounded)
    try:
        yield
    finally:
        set_loader("yaml", load_yaml)


class ForecastArgumentParser(LightningArgumentParser):
    """LightningCLI's parser, with a bad model or data option reported as that option (see ``readable_error``), as
    one error line without the usage text (``--help`` has it): a search that runs many fits reports each bad
    option once, not pages of usage."""

    def error(self, message: str, ex: Exception | None = None):
        if self.exit_on_error:  # the parser the user called; the inner ones raise for jsonargparse to try the next type
            line = one_line(message)
            if line.startswith('Parser key "model.network') and NOT_ACCEPTED in line:
                line += f" ({NETWORK_OPTIONS})"
            raise InputError(line) from ex  # one line
        super().error(readable_error(message), ex)


def one_line(message: str) -> str:
    """jsonargparse's message (``readable_error``), or any other, as one line."""
    return " ".join(readable_error(message).split())


def readable_error(message: str) -> str:
    """jsonargparse's message for a bad option as that option, named as a config names it, and the reason:
    ``Parser key "data.split.init_args.test": Not of type Fraction: …``; a message of another shape as it is."""
    keys, under_class, reason = [], False, None
    for line in (line.strip() for line in message.splitlines()):
        if line.startswith(ATTEMPT_END) or (reason is not None and line.startswith("- ")):
            break
        if key := KEY.match(line):
            a_class_argument = (under_class or key[1]) and not (len(keys) == 1 and keys[0] in SECTIONS)
            keys.append(key[2] if not keys else (".init_args." if a_class_argument else ".") + key[2])
            under_class = False
            reason = key[3].strip() or None
        elif CLASS_PROBLEM.match(line):
            under_class = True
        elif line and not line.startswith(NESTING):
            reason = line.removeprefix("- ") if reason is None else f"{reason} {line}"
    if not keys or reason is None:
        return message
    given = message.rpartition(GIVEN_VALUE)[2] if GIVEN_VALUE in message else ""
    if SCALAR.fullmatch(given) and given not in reason:  # a section's settings, or a file's, are never quoted
        reason += f", given {given}"
    return f'Parser key "{"".join(keys)}": {reason}'
