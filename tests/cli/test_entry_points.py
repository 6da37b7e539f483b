"""Every command writes through the one output guard and opens checkpoints through the one checked reader.

Read from the source, so that a new command (a module with a ``main``) is held to the same rules on the day it is
added: a file is written only inside a function handed to ``files.write_atomically`` (checked beforehand with
``files.check_output`` or the tools' ``check_output_folder``), nothing is deleted, no module but ``project.checkpoints``
unpickles anything, and no module but ``project.checkpoints.imports`` imports a module by name; and, run, that no
command imports a module a checkpoint names unless the user named it too (``tests/checkpoints/test_imports.py`` tries
it at random).
"""

import ast
import re
import shlex
import sys
from pathlib import Path

import pytest
import torch

from project.errors import InputError
from tests.helpers import (
    IMPORTS_WRITE_A_FILE,
    assert_refused_without_importing,
    checkpoint_naming_a_module_beside_it,
    exit_code,
)

PACKAGE = Path(__file__).resolve().parents[2] / "project"
EXPERIMENTS = PACKAGE.parent / "experiments"  # the studies' scripts, while the folder is there (read, not imported)
WRITES = {"write_text", "write_bytes", "to_csv", "to_parquet", "savefig", "save", "dump", "writerows", "touch"}
DELETES = {"rmtree", "unlink", "rmdir", "os.remove", "os.rename", "os.replace", "shutil.move"}
LOADS = {"load", "load_from_checkpoint", "loads"}
GUARDS = {"check_output", "check_output_folder"}


def modules() -> list[Path]:
    studies = [p for p in EXPERIMENTS.glob("*.py")] if EXPERIMENTS.is_dir() else []
    return sorted(p for p in [*PACKAGE.rglob("*.py"), *studies] if p.name != "__init__.py")


def entry_points() -> list[Path]:
    return [path for path in modules() if "__main__" in path.read_text()]


def calls(tree: ast.AST) -> list[ast.Call]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call)]


def called_name(call: ast.Call) -> str:
    function = call.func
    return function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")


def dotted(node: ast.AST) -> str:
    return f"{dotted(node.value)}.{node.attr}" if isinstance(node, ast.Attribute) else getattr(node, "id", "")


def writers(tree: ast.Module) -> set[ast.AST]:
    """The lambdas and functions handed to ``write_atomically``, and the module's functions they call."""
    functions = {node.name: node for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)}
    found: set[ast.AST] = set()
    for call in calls(tree):
        if called_name(call) == "write_atomically" and len(call.args) > 1:
            writer = call.args[1]
            found.add(functions.get(getattr(writer, "id", None), writer))
    pending = list(found)
    while pending:
        for call in calls(pending.pop()):
            callee = functions.get(called_name(call))
            if callee is not None and callee not in found:
                found.add(callee)
                pending.append(callee)
    return found


def inside(node: ast.AST, scopes: set[ast.AST]) -> bool:
    return any(node in set(ast.walk(scope)) for scope in scopes)


def test_the_entry_points_are_found():
    names = {path.stem for path in entry_points()}
    assert {"cli", "runs"} <= names
    if (PACKAGE / "tools").is_dir():  # the optional tools, while they are there
        assert {"export", "backtest", "tune", "bench", "datasets", "figure"} <= names
    if EXPERIMENTS.is_dir():  # and the studies
        assert {"m4", "etth1", "depth", "your_data", "intermittent", "report"} <= names


@pytest.mark.parametrize("path", entry_points(), ids=lambda p: p.stem)
def test_an_entry_point_writes_only_through_the_output_guard_and_deletes_nothing(path):
    tree = ast.parse(path.read_text())
    allowed = writers(tree)
    for call in calls(tree):
        name, target = called_name(call), dotted(call.func)
        where = f"{path.name}:{call.lineno} {target}"
        if name in WRITES or (
            name == "open" and any(isinstance(a, ast.Constant) and "w" in str(a.value) for a in call.args[1:])
        ):
            assert inside(call, allowed), f"{where} writes outside files.write_atomically"
        assert not {name, target} & DELETES, f"{where} deletes or renames"
    if allowed:
        assert {called_name(call) for call in calls(tree)} & GUARDS, f"{path.name} writes without check_output"


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_the_checkpoint_reader_unpickles(path):
    """``Forecaster.load_from_checkpoint`` and ``WindowDataModule.load_from_checkpoint`` read through it too."""
    if path.name == "reading.py" and path.parent.name == "checkpoints":
        return
    for call in calls(ast.parse(path.read_text())):
        target = dotted(call.func)
        unpickles = target in ("torch.load", "pickle.load", "pickle.loads") or target.endswith(
            "super().load_from_checkpoint"
        )
        assert not unpickles, f"{path.name}:{call.lineno} {target}: open checkpoints with project.checkpoints"


def functions_calling(name: str) -> set[str]:
    """``file:function`` of every function in the package (and the studies) that calls ``name``."""
    return {
        f"{path.name}:{node.name}"
        for path in modules()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef) and any(called_name(call) == name for call in calls(node))
    }


def test_one_function_parses_a_checkpoints_settings_and_one_builds_from_them():
    """The CLI and ``load_from_checkpoint`` parse a checkpoint's settings through ``parsed_settings``, under the
    import allowlist, and build its model on the meta device first; the tools and both classes'
    ``load_from_checkpoint`` build through the door's ``load_from_checkpoint``."""
    # and datamodule_from_config, which parses a config's data section (a study's preset), not a checkpoint
    assert functions_calling("parse_object") == {"settings.py:parsed_settings", "cli.py:datamodule_from_config"}
    assert functions_calling("parsed_settings") == {"settings.py:load_from_checkpoint", "cli.py:_checkpoint_defaults"}
    assert functions_calling("model_on_meta") == {"settings.py:load_from_checkpoint", "cli.py:_checkpoint_defaults"}
    builders = {"module.py:load_from_checkpoint", "datamodule.py:load_from_checkpoint"}
    if (PACKAGE / "tools").is_dir():
        builders |= {"checkpoint_commands.py:load_checkpoint", "checkpoint_commands.py:datamodule_from_checkpoint"}
        builders |= {"backtest.py:refit"}  # the checkpoint's model untrained, refitted at each origin
    assert functions_calling("load_from_checkpoint") == builders


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_the_import_rule_imports_modules_by_name(path):
    """A class path read from a file is imported through ``project.checkpoints.imports`` alone, which holds the rule of
    what a checkpoint may name."""
    if path.name == "imports.py":
        return
    for call in calls(ast.parse(path.read_text())):
        target = dotted(call.func)
        assert target not in ("importlib.import_module", "__import__"), f"{path.name}:{call.lineno} {target}"


@pytest.mark.fast_cases(1)
@pytest.mark.parametrize("named", ["network", "model", "data"])
def test_a_checkpoint_naming_a_module_beside_it_runs_no_code_through_any_entry_point(
    named, user_run, tmp_path, monkeypatch, capsys
):
    """As with ``python -m``: no command imports the module unless the user names the class themselves (the tools:
    tests/tools/test_tool_guards.py)."""
    from project import cli

    path = checkpoint_naming_a_module_beside_it(named, user_run, tmp_path, monkeypatch)
    commands = {
        f"cli {subcommand}": (cli.cli_main, [subcommand, f"--ckpt_path={path}", "--trainer.logger=false"])
        for subcommand in ("fit", "validate", "test", "predict")
    }
    assert_refused_without_importing(commands, tmp_path, capsys)


@pytest.mark.parametrize("named", ["network", "model"])
def test_the_python_api_imports_nothing_a_checkpoint_names_beside_it(named, user_run, tmp_path, monkeypatch):
    """``Forecaster.load_from_checkpoint`` in a folder holding ``model_utils.py`` (on sys.path, as ``python -c`` and
    notebooks put it): the class is refused in one line before Lightning or jsonargparse imports it."""
    from project.training.module import Forecaster

    path = checkpoint_naming_a_module_beside_it(named, user_run, tmp_path, monkeypatch)
    with pytest.raises(
        InputError, match=r"model_utils\.Net \(at model[^)]*\), outside this project; nothing was imported"
    ):
        Forecaster.load_from_checkpoint(path)
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


def _lambda_scheduler(function: str) -> dict:
    return {"class_path": "torch.optim.lr_scheduler.LambdaLR", "init_args": {"lr_lambda": function}}


# Every place and spelling in which a checkpoint's settings can name code for the parser to import, not only a
# component's class_path: (section, setting, value, whether the parser refuses an import path, not a malformed value).
IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE = {
    "a scheduler's callable": ("hyper_parameters", "lr_scheduler", _lambda_scheduler("model_utils.f"), True),
    "a class path inside a list": (
        "hyper_parameters",
        "lr_scheduler",
        {
            "class_path": "torch.optim.lr_scheduler.SequentialLR",
            "init_args": {"schedulers": [{"class_path": "model_utils.Net", "init_args": {}}], "milestones": []},
        },
        True,
    ),
    "an optimizer as a plain string": ("hyper_parameters", "optimizer", "model_utils.Net", True),
    "an optimizer as JSON": ("hyper_parameters", "optimizer", '{"class_path": "model_utils.Net"}', True),
    "a number given as an import path": (
        "hyper_parameters",
        "optimizer",
        {"class_path": "torch.optim.AdamW", "init_args": {"lr": "model_utils.f"}},
        False,
    ),
    "the data split's class path": ("datamodule_hyper_parameters", "split", {"class_path": "model_utils.Net"}, True),
    "the data split as YAML": ("datamodule_hyper_parameters", "split", "class_path: model_utils.Net", True),
    "the regime as a YAML mapping": ("hyper_parameters", "regime", "{class_path: model_utils.Net}", True),
    "a function the process has imported": ("hyper_parameters", "lr_scheduler", _lambda_scheduler("os._exit"), True),
    "a list of callables as YAML": (
        "hyper_parameters",
        "lr_scheduler",
        _lambda_scheduler("[model_utils.f, model_utils.f]"),
        False,
    ),
    "a list of os._exit as YAML": (
        "hyper_parameters",
        "lr_scheduler",
        _lambda_scheduler("[os._exit, os._exit]"),
        False,
    ),
    "a name starting with a non-ASCII letter": (
        "hyper_parameters",
        "lr_scheduler",
        _lambda_scheduler("model_utils.éf"),
        True,
    ),
    "a fullwidth letter": ("hyper_parameters", "lr_scheduler", _lambda_scheduler("model_utils.ｆ"), True),
    "a config file beside it": ("hyper_parameters", "regime", "evil.yaml", True),
}
HIDDEN_IN_THE_OPTIMIZATION = [
    k
    for k, (_, setting, _, _) in IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE.items()
    if setting in ("optimizer", "lr_scheduler")
]


def checkpoint_hiding(case: str, user_run, folder: Path, monkeypatch) -> Path:
    """A copy of the user's checkpoint holding the import path of ``case``, beside a ``model_utils.py`` that writes
    ``IMPORTED`` when imported (and defines ``f`` and ``Net``), in the working directory and on sys.path."""
    (folder / "model_utils.py").write_text(
        IMPORTS_WRITE_A_FILE + "def f(step):\n    return 1.0\n\nclass Net:\n    pass\n"
    )
    (folder / "evil.yaml").write_text("class_path: model_utils.Net\n")  # a config file naming the module
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    checkpoint = torch.load(user_run[2], weights_only=True)
    section, setting, value, _ = IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE[case]
    checkpoint[section][setting] = value
    path = folder / "model.ckpt"
    torch.save(checkpoint, path)
    return path


def assert_refused_in_one_line(error: str, path: Path, case: str) -> None:
    """One line naming the checkpoint; an import path refused says so and how to trust it."""
    assert error.count("\n") == 0, error
    assert str(path) in error, error
    if IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE[case][3]:
        assert re.search(
            r"the checkpoint names \S+( \(at [^)]+\))?, outside this project; nothing was imported: ", error
        )


@pytest.mark.fast_cases(4)
@pytest.mark.parametrize("case", IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE)
def test_an_import_path_anywhere_in_a_checkpoint_is_refused_before_import_by_the_cli(
    case, user_run, tmp_path, monkeypatch, capsys
):
    from project import cli

    path = checkpoint_hiding(case, user_run, tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as exit:
        cli.cli_main(["fit", f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.max_steps=1"])
    assert exit.value.code == 2
    assert_refused_in_one_line(capsys.readouterr().err.strip().removeprefix("error: "), path, case)
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


@pytest.mark.parametrize("case", IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE)
def test_an_import_path_anywhere_in_a_checkpoint_is_refused_before_import_by_the_python_api(
    case, user_run, tmp_path, monkeypatch
):
    from project.data import WindowDataModule
    from project.training.module import Forecaster

    path = checkpoint_hiding(case, user_run, tmp_path, monkeypatch)
    loads = WindowDataModule if IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE[case][0].startswith("datamodule") else Forecaster
    with pytest.raises(InputError) as refused:
        loads.load_from_checkpoint(path)
    assert_refused_in_one_line(str(refused.value), path, case)
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


@pytest.mark.slow
@pytest.mark.parametrize("subcommand", ["predict", "validate", "test"])
def test_a_command_that_only_forecasts_never_builds_or_imports_the_checkpoints_optimizer(
    subcommand, user_run, tmp_path, monkeypatch
):
    """The optimizer and scheduler are needed only to resume: ``predict``, ``validate`` and ``test`` leave the
    checkpoint's records of them unread, whatever they name. The three commands leave them out in one place
    (``TAKEN``, read by ``ForecastCLI._checkpoint_defaults``): ``predict`` meets every spelling, the other two
    the first."""
    from project import cli

    for case in HIDDEN_IN_THE_OPTIMIZATION if subcommand == "predict" else HIDDEN_IN_THE_OPTIMIZATION[:1]:
        path = checkpoint_hiding(case, user_run, tmp_path, monkeypatch)
        output = [f"--predictions.output={tmp_path / 'forecasts.csv'}", "--overwrite=true"]
        arguments = [subcommand, f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.limit_test_batches=1"]
        arguments += ["--trainer.limit_val_batches=1", "--trainer.limit_predict_batches=1"]
        arguments += output if subcommand == "predict" else []
        cli.cli_main(arguments)  # returns: no error
        assert not (tmp_path / "IMPORTED").exists(), case
        assert "model_utils" not in sys.modules, case


def test_a_class_the_user_names_is_trusted_and_nothing_else_they_typed(user_run, tmp_path, monkeypatch, capsys):
    """The import paths the user names as a class or a callable are allowed; a dotted value they typed (an output file
    ``forecast.csv``) is no import path, so a checkpoint naming ``forecast.csv`` as its regime imports nothing."""
    from project import cli

    path = checkpoint_hiding("the regime as a YAML mapping", user_run, tmp_path, monkeypatch)
    (tmp_path / "forecast.py").write_text(IMPORTS_WRITE_A_FILE + "class csv:\n    pass\n")
    checkpoint = torch.load(path, weights_only=True)
    checkpoint["hyper_parameters"]["regime"] = {"class_path": "forecast.csv"}
    torch.save(checkpoint, path)
    output = ["--predictions.output=forecast.csv", "--overwrite=true"]
    assert exit_code(cli.cli_main, ["predict", f"--ckpt_path={path}", "--trainer.logger=false", *output]) == 2
    assert "names forecast.csv (at model.regime), outside this project" in capsys.readouterr().err
    assert not (tmp_path / "IMPORTED").exists()
    assert "forecast" not in sys.modules


@pytest.mark.slow
def test_the_advice_to_trust_an_import_path_works_pasted_as_it_is(user_run, tmp_path, monkeypatch, capsys):
    """A callable that is an argument of a component (a scheduler's ``lr_lambda``) is trusted by naming the whole
    component: the option alone would meet the default scheduler, which takes no such argument."""
    from project import cli

    path = checkpoint_hiding("a scheduler's callable", user_run, tmp_path, monkeypatch)
    fit = ["fit", f"--ckpt_path={path}", "--trainer.logger=false", f"--checkpoint.dirpath={tmp_path / 'c'}"]
    fit += [f"--trainer.max_steps={torch.load(path, weights_only=True)['global_step'] + 1}", "--test_after_fit=false"]
    assert exit_code(cli.cli_main, fit) == 2
    advice = re.fullmatch(r"error: .*: pass (.+) to trust it", capsys.readouterr().err.strip())[1]
    assert advice.startswith("--model.lr_scheduler=")
    try:
        cli.cli_main([*fit, *shlex.split(advice)])  # returns: trusted, imported and trained
    finally:
        sys.modules.pop("model_utils", None)  # the other tests see a process that never imported it
    assert (tmp_path / "IMPORTED").exists()
