"""The one adapter to jsonargparse's error text (``project.option_errors``): each fragment it relies on is pinned to
the message jsonargparse writes today, so a release that rewords one fails here instead of changing what users read.
The messages users see end to end: ``tests/test_cli.py::test_a_bad_model_or_data_option_is_named_as_a_config_names_it``.
"""

import argparse

import pytest
from lightning.pytorch.cli import LightningArgumentParser

from project import option_errors
from project.cli import DEFAULT_CLASSES
from project.data import WindowDataModule
from project.option_errors import readable_error
from project.training.module import Forecaster


@pytest.fixture(scope="module")
def jsonargparse_message():
    """jsonargparse's own message for arguments given to the model and data as the CLI declares them (subclass mode),
    before any adapter reads it."""
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_lightning_class_args(Forecaster, "model", subclass_mode=True)
    parser.add_lightning_class_args(WindowDataModule, "data", subclass_mode=True)
    parser.set_defaults(DEFAULT_CLASSES)

    def message(*arguments: str) -> str:
        with pytest.raises(argparse.ArgumentError) as raised:
            parser.parse_args(list(arguments))
        return str(raised.value)

    return message


@pytest.mark.parametrize(
    ("fragment", "argument"),
    [
        ("KEY", "--model.cuda_graph=bogus"),
        ("NO_UNION_MEMBER", "--model.cuda_graph=bogus"),
        ("ATTEMPTS", "--data.batch_size=abc"),
        ("ATTEMPTS_END", "--data.batch_size=abc"),
        ("GIVEN_VALUE", "--model=5"),
        ("NOT_ACCEPTED", "--model.network.init_args.hidden_size=64"),
    ],
)
def test_each_fragment_the_adapter_reads_is_in_jsonargparses_message(fragment, argument, jsonargparse_message):
    assert getattr(option_errors, fragment) in jsonargparse_message(argument)


def test_a_nested_value_is_given_as_jsonargparse_writes_it(jsonargparse_message):
    message = jsonargparse_message("--model.optimizer.init_args.lr=abc")
    given = message.rpartition(option_errors.GIVEN_VALUE)[2].strip()
    assert option_errors.NESTED_VALUE.fullmatch(given).groups() == ("optimizer.init_args.lr", "'abc'")
    assert option_errors.FIRST_KEY.match(message)[1] == "model"
    inner = readable_error(message)  # the attempt the CLI prints, the class's own argument named inside it
    assert option_errors.FIRST_KEY.findall(" ".join(inner.split()))[-1] == "lr"
    assert f"{option_errors.GIVEN_VALUE}abc{option_errors.GOT_VALUE}" in inner


def test_jsonargparse_lists_one_attempt_per_union_member_the_none_one_last(jsonargparse_message):
    message = jsonargparse_message("--model.cuda_graph=bogus")
    attempts = message.partition(option_errors.ATTEMPTS)[2].partition(option_errors.ATTEMPTS_END)[0]
    items = [line for line in attempts.splitlines() if line.startswith(option_errors.ATTEMPT)]
    assert items == [
        f"{option_errors.ATTEMPT}{option_errors.CLASS_PROBLEM}project.training.module.Forecaster':",
        f"{option_errors.ATTEMPT}{option_errors.NONE_ATTEMPT}",
    ]


def test_jsonargparse_names_the_failing_option_on_the_line_after_the_class(jsonargparse_message):
    lines = [line.strip() for line in jsonargparse_message("--model.network.d_model=abc").splitlines()]
    start = lines.index(f"- {option_errors.CLASS_PROBLEM}project.training.module.Forecaster':")
    assert lines[start + 1 : start + 4] == [
        f"{option_errors.KEY}network{option_errors.KEY_END}",
        f"{option_errors.CLASS_PROBLEM}project.model.ForecastTransformer':",
        f"{option_errors.KEY}d_model{option_errors.KEY_END}",
    ]


@pytest.mark.parametrize(
    ("arguments", "readable"),
    [
        (
            ["--model.cuda_graph=bogus"],
            "Parser key \"model.cuda_graph\":\n  Expected a <class 'bool'>. Got value: bogus",
        ),
        (["--data.batch_size=abc"], "Parser key \"data.batch_size\":\n  Expected a <class 'int'>. Got value: abc"),
        (
            ["--model.network.d_model=abc"],
            "Parser key \"model.network.init_args.d_model\":\n  Expected a <class 'int'>. Got value: abc",
        ),
        (
            ["--model.nonexistent=3"],
            "Parser key \"model\": Option 'nonexistent' is not accepted (project.training.module.Forecaster)",
        ),
        (
            ["--data=project.nothing.X"],
            "Parser key \"data\": module 'project' has no attribute 'nothing' (project.nothing.X)",
        ),
        (["--model=5"], 'Parser key "model": 5: Expected a dot import path string: 5'),
    ],
)
def test_a_bad_model_or_data_option_reads_as_that_option(arguments, readable, jsonargparse_message):
    assert readable_error(jsonargparse_message(*arguments)) == readable


def test_any_other_message_is_left_as_it_is():
    for message in ["Option 'x' is not accepted", "Parser key \"trainer.max_epochs\":\n  Expected a <class 'int'>"]:
        assert readable_error(message) == message
