"""A seed decides a run: two runs of the CLI with the same ``seed_everything`` train the same weights, and two
different seeds train different ones. Results over seeds rest on both: a table whose seeds agreed to the last digit
would otherwise be one run counted twice."""

import pytest
import torch

from tests.helpers import BASE, cli, only_run, quick_fit_arguments


def trained_weights(log_dir, seed: int) -> dict[str, torch.Tensor]:
    arguments = [*quick_fit_arguments(log_dir, steps=3), f"--seed_everything={seed}", "--test_after_fit=false"]
    assert cli("fit", "--config", BASE, *arguments) == 0
    checkpoint = only_run(log_dir) / "checkpoints" / "last.ckpt"
    return torch.load(checkpoint, weights_only=True)["state_dict"]


@pytest.mark.slow
def test_two_seeds_train_different_weights_and_one_seed_the_same(tmp_path):
    first, again, other = (trained_weights(tmp_path / name, seed) for name, seed in [("a", 0), ("b", 0), ("c", 1)])
    assert first.keys() == again.keys() == other.keys()
    for name in first:
        torch.testing.assert_close(first[name], again[name], rtol=0, atol=0, msg=f"seed 0 twice: {name} differs")
    differing = [name for name in first if not torch.equal(first[name], other[name])]
    assert differing, "seeds 0 and 1 trained the same weights"
    assert any("weight" in name for name in differing)
