"""The errors the template reports to the user in one line (``error: …``, exit code 2), never as a traceback."""


class InputError(ValueError):
    """Bad user input. The message is one line naming the file, column or argument and what was expected."""


class TrainingDiverged(RuntimeError):
    """The training loss or the weights stopped being finite; the message names the step and the last good
    checkpoint."""
