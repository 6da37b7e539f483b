"""Every command that takes a checkpoint reads its file once, parses its settings once and builds its model at most
twice (once on the meta device, against the weights, and once for real): the CLI's own read (``read_checkpoint``) is
the one the parser's defaults, the checks and Lightning's restore all use."""

import functools
from unittest import mock

import pytest
import torch

import project.cli
from project.training.module import Forecaster
from tests.helpers import BASE, cli


@pytest.mark.fast_cases(1)
@pytest.mark.parametrize(
    "command",
    [
        ["predict"],
        ["validate"],
        ["test"],
        ["fit", "--trainer.max_steps=6", "--test_after_fit=false"],  # resumes the run's whole state
        ["fit", "--config", BASE, "--weights={ckpt}", "--trainer.max_steps=1", "--test_after_fit=false"],
    ],
    ids=["predict", "validate", "test", "fit-resume", "fit-weights"],
)
def test_a_command_reads_the_checkpoint_once_parses_its_settings_once_and_builds_at_most_twice(
    command, trained_run, tmp_path
):
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    given = [argument.format(ckpt=ckpt) for argument in command]
    if "--weights={ckpt}" not in command:
        given.append(f"--ckpt_path={ckpt}")
    outputs = [f"--predictions.output={tmp_path / 'out.csv'}", "--trainer.logger=false"]
    if given[0] == "fit":
        outputs.append(f"--checkpoint.dirpath={tmp_path / 'checkpoints'}")
    calls = {"read": [], "parse": 0, "build": 0}
    load, parse, build = torch.load, project.cli.parsed_settings, Forecaster.__init__

    def read(path, *arguments, **options):
        calls["read"].append(str(path))
        return load(path, *arguments, **options)

    def parsed(*arguments, **options):  # the one parse of a checkpoint's settings
        calls["parse"] += 1
        return parse(*arguments, **options)

    @functools.wraps(build)  # its signature, which the parser reads
    def built(self, *arguments, **options):
        calls["build"] += 1
        return build(self, *arguments, **options)

    with (
        mock.patch.object(torch, "load", read),
        mock.patch.object(project.cli, "parsed_settings", parsed),
        mock.patch.object(Forecaster, "__init__", built),
    ):
        assert cli(*given, *outputs) == 0
    assert calls == {"read": [str(ckpt)], "parse": 1, "build": 2}
