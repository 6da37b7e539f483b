"""Every command writes through the one output guard and opens checkpoints through the one checked reader.

Read from the source, so that a new command (a module with a ``main``) is held to the same rules on the day it is
added: a file is written only inside a function handed to ``files.write_atomically`` (checked beforehand with
``files.check_output`` or the tools' ``check_output_folder``), nothing is deleted, no module but ``project.checkpoints``
unpickles anything, and no module but ``project.imports`` imports a module by name; and, run, that no command imports
a module a checkpoint names unless the user named it too.
"""

import ast
import re
import sys
from pathlib import Path

import pytest
import torch

from project.errors import InputError
from tests.helpers import exit_code

PACKAGE = Path(__file__).resolve().parents[1] / "project"
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
    """And the Python API's ``Forecaster.load_from_checkpoint`` and ``WindowDataModule.load_from_checkpoint``, whose
    import check (``project.imports.checkpoint_imports_checked``) reads the file's settings with ``weights_only=True``
    before Lightning's own loader runs."""
    if path.name == "checkpoints.py":
        return
    for call in calls(ast.parse(path.read_text())):
        target = dotted(call.func)
        if path.name == "imports.py" and _weights_only(call):
            continue
        if path.name in ("module.py", "datamodule.py") and _lightnings_own_after_the_check(call):
            continue
        unpickles = target in ("torch.load", "pickle.load", "pickle.loads") or target.endswith("load_from_checkpoint")
        assert not unpickles, f"{path.name}:{call.lineno} {target}: open checkpoints with project.checkpoints"


def _lightnings_own_after_the_check(call: ast.Call) -> bool:
    """``super().load_from_checkpoint(…)``: Lightning's loader, called once the classes passed the import rule."""
    func = call.func
    return (
        isinstance(func, ast.Attribute)
        and func.attr == "load_from_checkpoint"
        and isinstance(func.value, ast.Call)
        and dotted(func.value.func) == "super"
    )


def _weights_only(call: ast.Call) -> bool:
    """``torch.load(…, weights_only=True)``: a file cannot run code by being read so."""
    return dotted(call.func) == "torch.load" and any(
        k.arg == "weights_only" and isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords
    )


@pytest.mark.parametrize("path", modules(), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_only_the_import_rule_imports_modules_by_name(path):
    """A class path read from a file is imported through ``project.imports`` alone, which holds the rule of what a
    checkpoint may name."""
    if path.name == "imports.py":
        return
    for call in calls(ast.parse(path.read_text())):
        target = dotted(call.func)
        assert target not in ("importlib.import_module", "__import__"), f"{path.name}:{call.lineno} {target}"


IMPORTS_WRITE_A_FILE = "from pathlib import Path\nPath('IMPORTED').write_text('code ran')\n"


def checkpoint_naming_a_module_beside_it(named: str, user_run, folder: Path, monkeypatch) -> Path:
    """A copy of the user's checkpoint whose ``named`` class ("network", "model" or "data") is ``model_utils.Net``,
    beside a ``model_utils.py`` that writes ``IMPORTED`` when imported, in the working directory and on sys.path."""
    (folder / "model_utils.py").write_text(IMPORTS_WRITE_A_FILE)
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    checkpoint = torch.load(user_run[2], weights_only=True)
    recorded = {"network": checkpoint["hyper_parameters"]["network"], "model": checkpoint["hyper_parameters"]}
    recorded["data"] = checkpoint["datamodule_hyper_parameters"]
    recorded[named]["class_path" if named == "network" else "_class_path"] = "model_utils.Net"
    path = folder / "model.ckpt"
    torch.save(checkpoint, path)
    return path


def assert_refused_without_importing(commands: dict[str, tuple], folder: Path, capsys) -> None:
    """Each command (a main function and its arguments) ends in one line saying how to trust the class, exit code
    2, and the module's code never ran."""
    for command, (main, arguments) in commands.items():
        with pytest.raises(SystemExit) as exit:
            main(arguments)
        assert exit.value.code == 2, command
        error = capsys.readouterr().err.strip()
        assert error.count("\n") == 0, command
        assert "model_utils.Net, outside this project; nothing was imported: pass " in error, command
        assert not (folder / "IMPORTED").exists(), command
    assert "model_utils" not in sys.modules


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
    with pytest.raises(InputError, match=r"model_utils\.Net, outside this project; nothing was imported"):
        Forecaster.load_from_checkpoint(path)
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


def test_the_python_api_still_loads_a_checkpoint_of_the_projects_classes(user_run):
    from project.training.module import Forecaster

    model = Forecaster.load_from_checkpoint(user_run[2], map_location="cpu")
    assert type(model).__name__ == "Forecaster"


def _lambda_scheduler(function: str) -> dict:
    return {"class_path": "torch.optim.lr_scheduler.LambdaLR", "init_args": {"lr_lambda": function}}


# Every place a checkpoint's settings can name code for the parser to import, not only a component's class_path.
IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE = {
    "a scheduler's callable": ("hyper_parameters", "lr_scheduler", _lambda_scheduler("model_utils.f")),
    "a class path inside a list": (
        "hyper_parameters",
        "lr_scheduler",
        {
            "class_path": "torch.optim.lr_scheduler.SequentialLR",
            "init_args": {"schedulers": [{"class_path": "model_utils.Net", "init_args": {}}], "milestones": []},
        },
    ),
    "an optimizer as a plain string": ("hyper_parameters", "optimizer", "model_utils.Net"),
    "a number given as an import path": (
        "hyper_parameters",
        "optimizer",
        {"class_path": "torch.optim.AdamW", "init_args": {"lr": "model_utils.f"}},
    ),
    "the data split's class path": ("datamodule_hyper_parameters", "split", {"class_path": "model_utils.Net"}),
    "a function the process has imported": ("hyper_parameters", "lr_scheduler", _lambda_scheduler("os._exit")),
}
HIDDEN_IN_THE_OPTIMIZATION = [
    k for k, (_, setting, _) in IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE.items() if setting != "split"
]


def checkpoint_hiding(case: str, user_run, folder: Path, monkeypatch) -> Path:
    """A copy of the user's checkpoint holding the import path of ``case``, beside a ``model_utils.py`` that writes
    ``IMPORTED`` when imported (and defines ``f`` and ``Net``), in the working directory and on sys.path."""
    (folder / "model_utils.py").write_text(
        IMPORTS_WRITE_A_FILE + "def f(step):\n    return 1.0\n\nclass Net:\n    pass\n"
    )
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    checkpoint = torch.load(user_run[2], weights_only=True)
    section, setting, value = IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE[case]
    checkpoint[section][setting] = value
    path = folder / "model.ckpt"
    torch.save(checkpoint, path)
    return path


@pytest.mark.parametrize("case", IMPORT_PATHS_A_CHECKPOINT_MAY_HIDE)
def test_an_import_path_anywhere_in_a_checkpoint_is_refused_before_import_by_the_cli(
    case, user_run, tmp_path, monkeypatch, capsys
):
    from project import cli

    path = checkpoint_hiding(case, user_run, tmp_path, monkeypatch)
    with pytest.raises(SystemExit) as exit:
        cli.cli_main(["fit", f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.max_steps=1"])
    assert exit.value.code == 2
    error = capsys.readouterr().err.strip()
    assert error.count("\n") == 0
    assert re.search(r"model\.ckpt: the checkpoint names the .* outside this project; nothing was imported: ", error)
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
    with pytest.raises(InputError, match=r"model\.ckpt: the checkpoint names .* outside this project; nothing was "):
        loads.load_from_checkpoint(path)
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


@pytest.mark.parametrize("subcommand", ["predict", "validate", "test"])
def test_a_command_that_only_forecasts_never_builds_or_imports_the_checkpoints_optimizer(
    subcommand, user_run, tmp_path, monkeypatch
):
    """The optimizer and scheduler are needed only to resume: ``predict``, ``validate`` and ``test`` leave the
    checkpoint's records of them unread, whatever they name."""
    from project import cli

    for case in HIDDEN_IN_THE_OPTIMIZATION:
        path = checkpoint_hiding(case, user_run, tmp_path, monkeypatch)
        output = [f"--predictions.output={tmp_path / 'forecasts.csv'}", "--overwrite=true"]
        arguments = [subcommand, f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.limit_test_batches=1"]
        arguments += ["--trainer.limit_val_batches=1", *(output if subcommand == "predict" else [])]
        cli.cli_main(arguments)  # returns: no error
        assert not (tmp_path / "IMPORTED").exists(), case
        assert "model_utils" not in sys.modules, case


def test_the_parser_imports_nothing_the_walk_over_the_checkpoint_did_not_pass(user_run, tmp_path, monkeypatch, capsys):
    """The walk names what it refuses; the guarantee is jsonargparse's own import policy, which lets the parser import
    only what the walk passed: a value the walk did not take for an import path is refused where it would be
    imported."""
    from project import cli, imports

    path = checkpoint_hiding("a scheduler's callable", user_run, tmp_path, monkeypatch)
    findable = imports._findable
    monkeypatch.setattr(imports, "_findable", lambda top_level: top_level != "model_utils" and findable(top_level))
    assert exit_code(cli.cli_main, ["fit", f"--ckpt_path={path}", "--trainer.logger=false"]) == 2
    assert "model_utils.f" in capsys.readouterr().err
    assert not (tmp_path / "IMPORTED").exists()
    assert "model_utils" not in sys.modules


@pytest.mark.parametrize("names", ["fractions.Fraction", ["fractions.Fraction"]])
def test_trust_takes_one_class_path_as_a_string_or_a_list_of_them(names):
    from project.imports import checkpoint_class, trust

    with pytest.raises(InputError, match="outside this project; nothing was imported"):
        checkpoint_class("fractions.Fraction", "network", "")
    trust(names)  # a string is that one name, not its letters
    assert checkpoint_class("fractions.Fraction", "network", "").__name__ == "Fraction"
