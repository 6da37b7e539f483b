"""The tools behind the same guards as the CLI: no output replaces an input, no checkpoint runs code, no folder is
deleted, and a bad option ends in one line (an optional tool's test: delete it with project/tools)."""

import functools

import pytest
import torch

from project.tools import backtest, ensemble, export, figure
from tests.helpers import (
    assert_refused_in_one_line,
    assert_refused_without_importing,
    checkpoint_naming_a_module_beside_it,
    digests,
    exit_code,
    last_line,
)


def test_a_checkpoint_that_would_run_code_is_refused_by_every_tool(hostile_checkpoint, user_run, capsys):
    path, marker = hostile_checkpoint
    output = path.parent / "out"
    tools = {
        "export": (export.main, [str(path), "--output", str(output)]),
        "figure": (figure.main, [str(path), "--output", f"{output}.png"]),
        "backtest": (backtest.main, ["--ckpt_path", str(path), "--output", str(output)]),
        "ensemble": (ensemble.main, ["predict", "--ckpt_path", str(user_run[2]), str(path), "--output", str(output)]),
    }
    for main, arguments in tools.values():
        assert_refused_in_one_line(functools.partial(main, arguments), capsys, "cannot read the checkpoint")
    assert not marker.exists()
    assert not output.exists()


@pytest.mark.parametrize("named", ["network", "model", "data"])
def test_a_checkpoint_naming_a_module_beside_it_runs_no_code_through_any_tool(
    named, user_run, tmp_path, monkeypatch, capsys
):
    """Export builds the model alone: it never parses the checkpoint's data class, which it therefore never imports."""
    path = checkpoint_naming_a_module_beside_it(named, user_run, tmp_path, monkeypatch)
    tools = {
        "export": (export.main, [str(path), "--output", str(tmp_path / "export")]),
        "figure": (figure.main, [str(path), "--output", str(tmp_path / "out.png")]),
        "backtest": (backtest.main, ["--ckpt_path", str(path), "--output", str(tmp_path / "bt")]),
        "ensemble": (ensemble.main, ["test", "--ckpt_path", str(path), str(user_run[2])]),
    }
    if named == "data":
        del tools["export"]
    assert_refused_without_importing(tools, tmp_path, capsys)


def test_an_export_into_a_folder_of_the_users_files_replaces_none_of_them(user_run, capsys):
    folder, _, checkpoint = user_run
    before = digests(folder)
    code = export.main([str(checkpoint), "--format", "torch_export", "--output", str(folder), "--overwrite"])
    assert code is None
    assert all(digests(*before)[path] == digest for path, digest in before.items())  # every input byte-identical
    assert {"encoder.pt2", "decoder_step.pt2", "model.json"} <= {p.name for p in folder.iterdir()}
    for name in ("encoder.pt2", "decoder_step.pt2", "model.json"):
        (folder / name).unlink()


def test_an_export_aimed_at_an_existing_file_is_refused_and_leaves_no_partial_folder(user_run, tmp_path, capsys):
    target = tmp_path / "notes.txt"
    target.write_text("mine\n")
    refused = assert_refused_in_one_line(
        lambda: export.main([str(user_run[2]), "--output", str(target), "--overwrite"]), capsys
    )
    assert refused == f"error: {target} is a file; expected a folder to write encoder.onnx, " + (
        "decoder_step.onnx, model.json into"
    )
    assert target.read_text() == "mine\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]


def test_export_refuses_a_horizon_longer_than_the_model_can_serve(user_run, tmp_path, capsys):
    arguments = [str(user_run[2]), "--output", str(tmp_path / "export"), "--horizon", "1000"]
    message = r"--horizon 1000 exceeds 48, the longest forecast .* is set up for"
    assert_refused_in_one_line(lambda: export.main(arguments), capsys, message)
    assert not (tmp_path / "export").exists()


def test_a_backtest_never_replaces_the_training_data_in_its_output_folder(user_run, capsys):
    folder, source, checkpoint = user_run
    before = digests(source)
    arguments = ["--ckpt_path", str(checkpoint), "--output", str(folder), "--overwrite"]
    assert assert_refused_in_one_line(lambda: backtest.main(arguments), capsys) == (
        f"error: {source}: the output would replace the input {source}; choose another output path"
    )
    assert digests(source) == before


@pytest.mark.parametrize(
    ("tool", "arguments", "refused"),
    [
        (export, ["x.ckpt", "--horizon", "-5"], "argument --horizon: invalid PositiveInt value: '-5'"),
        (export, ["x.ckpt", "--batch-size", "0"], "argument --batch-size: invalid PositiveInt value: '0'"),
        (backtest, ["--ckpt_path", "x.ckpt", "--step", "0"], "argument --step: invalid PositiveInt value: '0'"),
        (backtest, ["--ckpt_path", "x.ckpt", "--origins", "0"], "argument --origins: invalid PositiveInt value: '0'"),
        (backtest, ["--ckpt_path", "x", "--refit-epochs", "0"], "argument --refit-epochs: invalid PositiveInt value"),
        (figure, ["x.ckpt", "--windows", "0"], "argument --windows: invalid FigureWindows value: '0'"),
        (figure, ["x.ckpt", "--windows", "100000"], "argument --windows: invalid FigureWindows value: '100000'"),
    ],
)
def test_a_tools_count_outside_its_domain_is_refused_by_its_parser(tool, arguments, refused, capsys):
    """A parser type (project/domains.py), before any file is read: the checkpoint named need not exist."""
    assert exit_code(tool.main, arguments) == 2  # argparse's line: "python -m project.tools.…: error: argument …"
    assert refused in last_line(capsys.readouterr().err)


@pytest.mark.parametrize(
    ("class_path", "message"),
    [
        ("..x.Net", 'Parser key "model.network": Unexpected import path format: ..x.Net'),
        ("this.Net", "the checkpoint names this.Net (at model.network), outside this project; nothing was imported"),
        ("raising_module.Net", "broken on import"),
    ],
)
def test_a_checkpoint_naming_a_bad_or_broken_class_is_refused_in_one_line(
    class_path, message, user_run, tmp_path, monkeypatch, capsys
):
    (tmp_path / "raising_module.py").write_text("raise RuntimeError('broken on import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    checkpoint = torch.load(user_run[2], weights_only=True)
    checkpoint["hyper_parameters"]["network"]["class_path"] = class_path
    path = tmp_path / "model.ckpt"
    torch.save(checkpoint, path)
    with pytest.raises(SystemExit) as exit:  # the one module is trusted: importing it is what fails
        figure.main([str(path), "--output", str(tmp_path / "out.png"), "--trust", "raising_module.Net"])
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert error.startswith(f"error: {path}: ")
    assert message in error


def test_the_figure_tool_never_replaces_the_data_a_checkpoint_was_trained_on(user_run, tmp_path, capsys):
    """Not even when it draws other data, and not with --overwrite."""
    from tests.helpers import frame_of_row_numbers

    _, source, checkpoint = user_run
    other = tmp_path / "other.csv"
    frame_of_row_numbers(400).to_csv(other, index=False)
    before = digests(source)
    arguments = [str(checkpoint), "--source", str(other), "--output", str(source), "--overwrite"]
    assert assert_refused_in_one_line(lambda: figure.main(arguments), capsys).endswith(
        f"the output would replace the input {source}; choose another output path"
    )
    assert digests(source) == before


def test_the_figure_tool_refuses_a_checkpoint_path_longer_than_the_file_system_allows(tmp_path, capsys):
    assert_refused_in_one_line(
        lambda: figure.main([str(tmp_path / ("x" * 300 + ".ckpt"))]),
        capsys,
        "has 305 bytes; a file or folder name has at most 255",
    )


@pytest.mark.parametrize("tool", [export, backtest])
def test_an_output_folder_name_longer_than_the_file_system_allows_is_one_line(tool, user_run, tmp_path, capsys):
    arguments = ["--output", str(tmp_path / ("x" * 300))]
    arguments = [str(user_run[2]), *arguments] if tool is export else ["--ckpt_path", str(user_run[2]), *arguments]
    assert_refused_in_one_line(
        lambda: tool.main(arguments), capsys, "has 300 bytes; a file or folder name has at most 255"
    )
