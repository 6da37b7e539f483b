"""The tools' ``--trust CLASS_PATH …``: classes outside this project a checkpoint may name (``project.imports``)."""

from __future__ import annotations

import argparse

from project.imports import CLI_TRUST, trust

TOOL_TRUST = dict.fromkeys(CLI_TRUST, "--trust")


class TrustAction(argparse.Action):
    """Trusts the class paths as soon as they are parsed."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        trust(values, TOOL_TRUST)
        setattr(namespace, self.dest, values)


def trust_argument(parser: argparse.ArgumentParser) -> None:
    """Add ``--trust`` to a tool's parser; a refusal then names it."""
    trust([], TOOL_TRUST)
    parser.add_argument(
        "--trust", nargs="*", default=[], metavar="CLASS_PATH", action=TrustAction,
        help="classes outside this project that the checkpoint names (its network, distribution, model or data "
        "class) and that may be imported: importing runs the module's code",
    )  # fmt: skip
