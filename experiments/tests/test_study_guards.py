"""The studies behind the same guards as the CLI and the tools: no checkpoint runs code through them."""

import pytest

from experiments import m4
from experiments.results import best_epoch, forecast_split
from project.errors import InputError
from tests.helpers import (
    assert_refused_in_one_line,
    assert_refused_without_importing,
    checkpoint_naming_a_module_beside_it,
    exit_code,
)


def test_a_checkpoint_that_would_run_code_is_refused_by_the_studies(hostile_checkpoint, user_run, capsys):
    path, marker = hostile_checkpoint
    output = path.parent / "out.md"
    arguments = ["--data", str(user_run[1]), "--ckpt_path", str(path), "--output", str(output)]
    assert "cannot read the checkpoint" in assert_refused_in_one_line(exit_code(m4.main, arguments), capsys)
    for read in (best_epoch, lambda p: forecast_split(p, None, "test")):
        with pytest.raises(InputError, match="cannot read the checkpoint"):
            read(path)
    assert not marker.exists()
    assert not output.exists()


@pytest.mark.parametrize("named", ["network", "model"])
def test_a_checkpoint_naming_a_module_beside_it_runs_no_code_through_the_m4_study(
    named, user_run, tmp_path, monkeypatch, capsys
):
    """The study builds each checkpoint's model before it reads the data (its own, never the checkpoint's data
    class, which it therefore never parses or imports)."""
    path = checkpoint_naming_a_module_beside_it(named, user_run, tmp_path, monkeypatch)
    any_file = tmp_path / "m4.csv"
    any_file.write_text("series,value\n")
    tools = {
        "m4": (m4.main, ["--data", str(any_file), "--ckpt_path", str(path), "--output", str(tmp_path / "m4.md")]),
    }
    assert_refused_without_importing(tools, tmp_path, capsys)
