"""The one reader of jsonargparse's error text (``project.option_errors``): the words it reads are pinned to the
message jsonargparse writes today, so a release that rewords one fails here instead of changing what users read."""

import argparse

import pytest
from lightning.pytorch.cli import LightningArgumentParser

from project import option_errors
from project.cli import DEFAULT_CLASSES
from project.data import WindowDataModule
from project.option_errors import one_line, readable_error
from project.training.module import Forecaster


@pytest.fixture(scope="module")
def jsonargparse_message():
    """jsonargparse's own message for arguments given to the model and data as the CLI declares them (subclass mode),
    before any reader reads it."""
    parser = LightningArgumentParser(exit_on_error=False)
    parser.add_lightning_class_args(Forecaster, "model", subclass_mode=True)
    parser.add_lightning_class_args(WindowDataModule, "data", subclass_mode=True)
    parser.set_defaults(DEFAULT_CLASSES)

    def message(*arguments: str) -> str:
        with pytest.raises(argparse.ArgumentError) as raised:
            parser.parse_args(list(arguments))
        return str(raised.value)

    return message


def test_the_words_the_reader_reads_are_jsonargparses(jsonargparse_message):
    lines = [line.strip() for line in jsonargparse_message("--model.network.d_model=abc").splitlines()]
    assert [line for line in lines if option_errors.KEY.match(line)] == [
        'Parser key "model":',
        'Parser key "network":',
        'Parser key "d_model":',
    ]
    assert sum(bool(option_errors.CLASS_PROBLEM.match(line)) for line in lines) == 2
    assert all(any(line.startswith(words) for line in lines) for words in option_errors.NESTING)
    assert any(line.startswith(option_errors.ATTEMPT_END) for line in lines)
    assert option_errors.GIVEN_VALUE in jsonargparse_message("--model=5")
    assert option_errors.NOT_ACCEPTED in jsonargparse_message("--model.network.init_args.hidden_size=64")


@pytest.mark.parametrize(
    ("argument", "readable"),
    [
        ("--model.cuda_graph=bogus", "Parser key \"model.cuda_graph\": Expected a <class 'bool'>. Got value: bogus"),
        ("--data.batch_size=0", 'Parser key "data.batch_size": Not of type PositiveInt: 0 does not conform to'),
        ("--model.network.d_model=abc", 'Parser key "model.network.init_args.d_model": Not of type PositiveInt'),
        ("--data.split.init_args.test=0", 'Parser key "data.split.init_args.test": Not of type Fraction: 0 does'),
        ("--model.optimizer.init_args.lr=abc", 'Parser key "model.optimizer.init_args.lr": Expected a path but abc'),
        ("--model.nonexistent=3", "Parser key \"model\": Option 'nonexistent' is not accepted"),
        ("--model=5", 'Parser key "model": Expected a path but 5 either not accessible or invalid'),
    ],
)
def test_a_bad_option_reads_as_that_option_as_a_config_names_it(argument, readable, jsonargparse_message):
    assert one_line(jsonargparse_message(argument)).startswith(readable)


def test_any_other_message_is_left_as_it_is():
    for message in ["Option 'x' is not accepted", "something else\n  entirely"]:
        assert readable_error(message) == message
