"""Every command that takes a checkpoint reads its file once: the CLI's own read (``read_checkpoint``: weights only,
checked, weights found finite) is the one the parser's defaults, the checks and Lightning's restore all use."""

from unittest import mock

import pytest
import torch

from tests.helpers import BASE, cli


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
def test_a_command_reads_the_checkpoint_it_is_given_once(command, trained_run, tmp_path):
    ckpt = trained_run / "checkpoints" / "last.ckpt"
    given = [argument.format(ckpt=ckpt) for argument in command]
    if "--weights={ckpt}" not in command:
        given.append(f"--ckpt_path={ckpt}")
    outputs = [f"--predictions.output={tmp_path / 'out.csv'}", "--trainer.logger=false"]
    if given[0] == "fit":
        outputs.append(f"--checkpoint.dirpath={tmp_path / 'checkpoints'}")
    reads = []
    load = torch.load

    def counted(path, *arguments, **options):
        reads.append(str(path))
        return load(path, *arguments, **options)

    with mock.patch.object(torch, "load", counted):
        assert cli(*given, *outputs) == 0
    assert reads == [str(ckpt)]
