"""The errors the template reports to the user in one line (``error: …``, exit code 2), never as a traceback."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

from lightning.pytorch.utilities.exceptions import MisconfigurationException

EXIT_ERROR = 2


class InputError(ValueError):
    """Bad user input. The message is one line naming the file, column or argument and what was expected."""


class TrainingDiverged(RuntimeError):
    """The training loss or the weights stopped being finite; the message names the step and the last good
    checkpoint."""


@contextlib.contextmanager
def reported_in_one_line() -> Iterator[None]:
    """What every command runs its work in: these errors end the process with their message as one line on
    stderr and exit code 2."""
    try:
        yield
    except Exception as error:
        reported = reported_cause(error)
        if reported is None:
            raise
        print(f"error: {' '.join(str(reported).split())}", file=sys.stderr)  # one line, whatever a value quoted holds
        raise SystemExit(EXIT_ERROR) from None


def reported_cause(error: BaseException) -> Exception | None:
    """``error`` if it is one the user should read (the template's, or Lightning's refusal of a run's settings, as a
    restored epoch past ``max_epochs``), or the one it was raised from: jsonargparse builds the model and the data of
    the command line inside its type checks, and raises their error as the cause of its own."""
    while error is not None:
        if isinstance(error, (InputError, TrainingDiverged, MisconfigurationException)):
            return error
        error = error.__cause__
    return None
