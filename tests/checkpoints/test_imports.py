"""Whatever a checkpoint records, at any depth and in any spelling, nothing it names is imported unless the user named
it: jsonargparse's import policy, configured as an allowlist (``project.checkpoints.imports``), refuses it where the
parser would import it. Hypothesis places random import-path-like values (unicode names, YAML and JSON strings,
lists, file names and paths of config files) at random places of a checkpoint's recorded settings and of an
``hparams.yaml``, beside a module that writes a marker file when imported, and loads it every way there is."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
import torch
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from project.errors import InputError
from tests.helpers import cli

MARKER_MODULE = "marker_module"
# Imported, it writes the marker file with the stack that imported it (what a failure shows).
WRITES_A_MARKER = (
    "import traceback\nfrom pathlib import Path\nPath('IMPORTED').write_text(''.join(traceback.format_stack()))\n"
    "def f(step):\n    return 1.0\n"
)
SECTIONS = ("hyper_parameters", "datamodule_hyper_parameters")

identifier = st.from_regex(r"[A-Za-z_éｆΩ][A-Za-z0-9_éｆΩ]{0,8}", fullmatch=True)
module = st.sampled_from([MARKER_MODULE, "os", "subprocess", "builtins", "forecast", "project", "torch"])
import_path = st.builds(lambda m, names: ".".join([m, *names]), module, st.lists(identifier, min_size=1, max_size=2))


@st.composite
def spelled(draw) -> object:
    """An import path as a checkpoint may spell it: plain, as a component, inside YAML or JSON text, in a list, or as
    the name of a config file that names it (written beside the checkpoint)."""
    path = draw(import_path)
    spelling = draw(st.sampled_from(["plain", "component", "yaml", "yaml-line", "json", "list", "file"]))
    return {
        "plain": path,
        "component": {"class_path": path, "init_args": {}},
        "yaml": f"{{class_path: {path}}}",
        "yaml-line": f"class_path: {path}",
        "json": f'{{"class_path": "{path}"}}',
        "list": f"[{path}, {path}]",
        "file": ("file", path),
    }[spelling]


def places(tree: object, location: tuple = ()) -> list[tuple]:
    """Every place in the settings ``tree`` a value sits (dict keys and list items), as a path of keys."""
    found = [location] if location else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += places(value, (*location, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found += places(value, (*location, index))
    return found


def placed(settings: dict, location: tuple, value: object, new_key: str | None) -> None:
    owner = settings
    for key in location[:-1]:
        owner = owner[key]
    if new_key is not None and isinstance(owner, dict):
        owner[new_key] = value  # a setting no class takes
    else:
        owner[location[-1]] = value


@pytest.fixture(scope="module")
def recorded(user_run) -> Path:
    return user_run[2]


@pytest.fixture
def beside_a_marker_module(monkeypatch):
    """A fresh folder per example, the working directory and on sys.path, holding the marker module."""
    folders = []

    def folder() -> Path:
        made = Path(tempfile.mkdtemp())
        (made / f"{MARKER_MODULE}.py").write_text(WRITES_A_MARKER)
        (made / "forecast.py").write_text(WRITES_A_MARKER)
        monkeypatch.chdir(made)
        monkeypatch.syspath_prepend(str(made))
        folders.append(made)
        return made

    yield folder
    for made in folders:
        assert not (made / "IMPORTED").exists(), (made / "IMPORTED").read_text()
    assert MARKER_MODULE not in sys.modules
    assert "forecast" not in sys.modules


def hostile_copy(recorded: Path, folder: Path, data) -> tuple[Path, str]:
    """A copy of the checkpoint with a drawn value at a drawn place of one of its sections: its path and section."""
    checkpoint = torch.load(recorded, weights_only=True)
    section = data.draw(st.sampled_from(SECTIONS))
    settings = yaml.safe_load(yaml.safe_dump(checkpoint[section]))  # a deep copy of plain values
    location = data.draw(st.sampled_from(places(settings)))
    value = data.draw(spelled())
    if isinstance(value, tuple):  # the name of a config file naming the path, relative or absolute
        config = folder / "component.yaml"
        config.write_text(f"class_path: {value[1]}\n")
        value = data.draw(st.sampled_from([config.name, str(config)]))
    placed(settings, location, value, data.draw(st.sampled_from([None, "extra"])))
    checkpoint[section] = settings
    path = folder / "hostile.ckpt"
    torch.save(checkpoint, path)
    return path, section


def assert_one_line_naming(message: str | None, path: Path) -> None:
    """A refusal (None: the value was taken, and imported nothing) is one line naming the checkpoint."""
    if message is not None:
        assert "\n" not in message, message
        assert str(path) in message, message


def refusal(load) -> str | None:
    """What ``load()`` refused in one line (``InputError``), or None when it loaded."""
    try:
        load()
    except InputError as refused:
        return str(refused)
    return None


EXAMPLES = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)


@pytest.mark.slow
@pytest.mark.parametrize("hparams_file", [False, True], ids=["in-the-checkpoint", "in-an-hparams-file"])
@EXAMPLES
@given(data=st.data())
def test_the_python_api_imports_nothing_a_checkpoint_or_an_hparams_file_names_whatever_its_spelling(
    hparams_file, recorded, beside_a_marker_module, data
):
    from project.data import WindowDataModule
    from project.training.module import Forecaster

    folder = beside_a_marker_module()
    path, section = hostile_copy(recorded, folder, data)
    loads = Forecaster if section == "hyper_parameters" else WindowDataModule
    if hparams_file:  # the recorded checkpoint, the hostile settings beside it
        hparams = folder / "hparams.yaml"
        hparams.write_text(yaml.safe_dump(torch.load(path, weights_only=True)[section]))
        assert_one_line_naming(refusal(lambda: loads.load_from_checkpoint(recorded, hparams_file=hparams)), recorded)
    else:
        assert_one_line_naming(refusal(lambda: loads.load_from_checkpoint(path)), path)
    assert not (folder / "IMPORTED").exists(), (folder / "IMPORTED").read_text()


@pytest.mark.slow
@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_the_cli_imports_nothing_a_checkpoint_names_whatever_its_spelling(
    recorded, beside_a_marker_module, data, capsys
):
    folder = beside_a_marker_module()
    path, _ = hostile_copy(recorded, folder, data)
    subcommand = data.draw(st.sampled_from(["fit", "validate", "predict"]))
    arguments = [subcommand, f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.max_steps=1"]
    arguments += ["--trainer.limit_val_batches=1", "--test_after_fit=false"] if subcommand == "fit" else []
    arguments += ["--trainer.limit_val_batches=1"] if subcommand == "validate" else []
    arguments += [f"--predictions.output={folder / 'out.csv'}", "--trainer.limit_predict_batches=1"] * (
        subcommand == "predict"
    )
    code = cli(*arguments)
    error = capsys.readouterr().err.strip()
    assert code in (0, 2), error
    assert code == 0 or "\n" not in error  # one line: the checkpoint's setting, or the file or option it names
    assert not (folder / "IMPORTED").exists(), (folder / "IMPORTED").read_text()
