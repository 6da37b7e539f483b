"""How a checkpoint is read (``project.checkpoints.reading``): once, from a file on this machine, with
``weights_only=True``; its tensors whole and its weights finite before anything is built from it."""

from pathlib import Path

import pytest
import torch

from project.checkpoints import reading
from project.checkpoints.reading import read_checkpoint
from project.errors import InputError
from project.training.module import Forecaster
from tests.helpers import assert_refused_in_one_line, cli, tampered, tiny_module
from tests.saved_tensors import LargestStorage


def test_a_checkpoint_that_would_run_code_is_refused_by_every_command(hostile_checkpoint, capsys):
    path, marker = hostile_checkpoint
    for subcommand in ("fit", "validate", "test", "predict"):
        assert_refused_in_one_line(
            cli(subcommand, f"--ckpt_path={path}", "--trainer.logger=false"), capsys, "cannot read the checkpoint"
        )
    assert not marker.exists()


def test_a_checkpoint_is_never_read_from_a_url(capsys):
    assert assert_refused_in_one_line(cli("predict", "--ckpt_path=http://127.0.0.1:9/best.ckpt"), capsys) == (
        "error: http://127.0.0.1:9/best.ckpt: a checkpoint is read from a file on this machine, never from a URL"
    )


def test_a_tensor_stored_as_a_view_of_few_values_is_refused_before_it_is_expanded(trained_run, tmp_path):
    """A 2**30-element view of one stored number (a zero stride) in a file of kilobytes: refused without allocating
    its shape."""

    def change(checkpoint: dict) -> None:
        checkpoint["state_dict"]["network.encoder_embedding.bias"] = torch.zeros(1).expand(2**30)

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert path.stat().st_size < 200_000
    with LargestStorage() as largest, pytest.raises(InputError, match=r"a tensor of shape \(1073741824,\) is stored"):
        Forecaster.load_from_checkpoint(path)
    assert largest.bytes < 10**6


def test_a_checkpoint_of_lists_that_share_or_hold_themselves_is_read_at_once(trained_run, tmp_path, monkeypatch):
    """Unpickling allows a list that holds itself and a chain of lists each holding the next twice (2**60 paths in a
    file of kilobytes): each is walked once. Past ``MAX_CHECKPOINT_ITEMS`` values, one line."""

    def change(checkpoint: dict) -> None:
        chain, itself = [0], []
        for _ in range(60):
            chain = [chain, chain]
        itself.append(itself)
        checkpoint["callbacks"].update(chain=chain, itself=itself)

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert read_checkpoint(path)["callbacks"]["chain"]
    monkeypatch.setattr(reading, "MAX_CHECKPOINT_ITEMS", 100)
    wide = tampered(path, tmp_path, lambda checkpoint: checkpoint["callbacks"].update(wide=list(range(200))), "wide")
    with pytest.raises(InputError, match=f"{wide}: it holds more than 100 values; is it a checkpoint"):
        read_checkpoint(wide)


def test_loading_a_checkpoint_with_non_finite_weights_is_an_error(tmp_path: Path):
    module = tiny_module()
    path = tmp_path / "nan.ckpt"
    state = {"state_dict": {k: v.fill_(float("nan")) for k, v in module.state_dict().items()}}
    torch.save({**state, "hyper_parameters": dict(module.hparams), "pytorch-lightning_version": "2.6.0"}, path)
    with pytest.raises(InputError, match="non-finite weights"):
        Forecaster.load_from_checkpoint(path)
