"""What a resumed fit takes from a checkpoint (``project.training.resume``): the state it names, checked, and nothing
else; the settings that decide training come from the run's config, never from the file."""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path

import lightning as L
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from lightning.pytorch.plugins.precision import MixedPrecision
from lightning.pytorch.trainer.states import TrainerFn

from project import checkpoints
from project.checkpoints import read_checkpoint
from project.cli import cli_main
from project.data import WindowDataModule
from project.errors import InputError
from project.training.module import Forecaster
from project.training.resume import restorable
from tests.helpers import (
    BASE,
    CreatesAFileWhenUnpickled,
    assert_refused_in_one_line,
    cli,
    digests,
    last_line,
    quiet_trainer,
)
from tests.saved_tensors import LargestStorage

FIT_CALLBACKS = ("ForecastCheckpoint", "EarlyStopping", "RandomState")


def tampered(source: Path, folder: Path, change: Callable[[dict], object], name: str = "tampered") -> Path:
    """A copy of the checkpoint at ``source`` in ``folder``, changed by ``change``."""
    checkpoint = torch.load(source, weights_only=False)
    change(checkpoint)
    path = folder / f"{name}.ckpt"
    torch.save(checkpoint, path)
    return path


def callback_state(checkpoint: dict, name: str) -> dict:
    return next(state for key, state in checkpoint["callbacks"].items() if key.startswith(name))


def resume(checkpoint: Path, folder: Path, *options: str) -> int:
    """``fit --ckpt_path checkpoint`` for two more steps with a validation after each (the trained run stopped at step
    4), its checkpoints in ``folder``/checkpoints and no log: the exit code."""
    return cli(
        "fit",
        "--config",
        BASE,
        f"--ckpt_path={checkpoint}",
        "--trainer.max_steps=6",
        "--trainer.limit_train_batches=4",
        "--trainer.limit_val_batches=2",
        "--trainer.val_check_interval=1",
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
        f"--checkpoint.dirpath={folder / 'checkpoints'}",
        "--test_after_fit=false",
        *options,
    )


@pytest.fixture(scope="module")
def untouched_resume(trained_run, tmp_path_factory) -> dict:
    """The last checkpoint of the trained run resumed as it was written: what every changed copy must end on."""
    folder = tmp_path_factory.mktemp("untouched")
    assert resume(trained_run / "checkpoints" / "last.ckpt", folder) == 0
    return torch.load(folder / "checkpoints" / "last.ckpt", weights_only=False)


def set_in_groups(name: str, value: object) -> Callable[[dict], None]:
    def change(checkpoint: dict) -> None:
        for group in checkpoint["optimizer_states"][0]["param_groups"]:
            group[name] = value

    return change


def set_in_callback(name: str, key: str, value: object) -> Callable[[dict], None]:
    return lambda checkpoint: callback_state(checkpoint, name).__setitem__(key, value)


def set_in_schedule(**values: object) -> Callable[[dict], None]:
    return lambda checkpoint: checkpoint["lr_schedulers"][0].update(values)


def set_in_loops(*keys: str, value: object) -> Callable[[dict], None]:
    def change(checkpoint: dict) -> None:
        owner = checkpoint["loops"]
        for key in keys[:-1]:
            owner = owner[key]
        owner[keys[-1]] = value

    return change


# What a checkpoint may hold that the resumed run does not take: it ends exactly as the untouched checkpoint's resume.
NOT_TAKEN = {
    "optimizer maximize": set_in_groups("maximize", True),
    "optimizer negative weight decay": set_in_groups("weight_decay", -0.1),
    "optimizer betas 1.5": set_in_groups("betas", (1.5, 0.999)),
    "optimizer NaN rate": set_in_groups("lr", math.nan),
    "optimizer initial rate": set_in_groups("initial_lr", 10.0),
    "schedule negative base rates": set_in_schedule(base_lrs=[-1e-3, -1e-3], _last_lr=[5.0, 5.0], run_steps=1),
    "schedule counters": set_in_schedule(last_epoch=10**6, _step_count=3),
    "early stopping patience": set_in_callback("EarlyStopping", "patience", 0),
    "early stopping thresholds": set_in_callback("EarlyStopping", "stopping_reason_message", "/etc/passwd"),
}


@pytest.mark.slow
@pytest.mark.parametrize("change", NOT_TAKEN.values(), ids=NOT_TAKEN.keys())
def test_what_a_resumed_fit_does_not_take_changes_nothing_it_trains(change, trained_run, untouched_resume, tmp_path):
    """The optimizer's and schedule's settings are the config's; a callback's settings are its config's; nothing
    outside the named state is restored. The run ends on the untouched resume's weights and state, bit for bit."""
    assert resume(tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change), tmp_path) == 0
    resumed = torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False)
    assert resumed["global_step"] == untouched_resume["global_step"] == 6
    for name, expected in untouched_resume["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], expected), name
    groups = [{k: v for k, v in g.items() if k != "params"} for g in resumed["optimizer_states"][0]["param_groups"]]
    untouched = untouched_resume["optimizer_states"][0]["param_groups"]
    assert groups == [{k: v for k, v in g.items() if k != "params"} for g in untouched]
    assert resumed["lr_schedulers"] == untouched_resume["lr_schedulers"]
    assert callback_state(resumed, "EarlyStopping") == callback_state(untouched_resume, "EarlyStopping")


# A malformed entry of the named state: one line naming the checkpoint and the entry, before any step.
MALFORMED = {
    "no loops": (lambda c: c.pop("loops"), "its fit loop's progress must be a mapping; got NoneType"),
    "a negative counter": (
        set_in_loops("fit_loop", "epoch_loop.batch_progress", "total", "ready", value=-5),
        "its fit loop's progress.epoch_loop.batch_progress.total.ready must be an integer in 0..2147483647; got -5",
    ),
    "a counter of text": (
        set_in_loops("fit_loop", "epoch_progress", "current", "completed", value="abc"),
        "its fit loop's progress.epoch_progress.current.completed must be an integer in 0..2147483647; got 'abc'",
    ),
    "a counter past any run": (
        set_in_loops("fit_loop", "epoch_loop.state_dict", "_batches_that_stepped", value=2**40),
        "_batches_that_stepped must be an integer in 0..2147483647",
    ),
    "stages out of order": (
        set_in_loops("fit_loop", "epoch_loop.batch_progress", "total", "completed", value=99),
        "its fit loop's progress.epoch_loop.batch_progress.total counts [4, 4, 4, 99] for ready, started, processed, "
        "completed; each at most the last",
    ),
    "a flag of text": (
        set_in_loops("fit_loop", "epoch_loop.batch_progress", "is_last_batch", value="yes"),
        "is_last_batch must be true or false",
    ),
    "callbacks not a mapping": (lambda c: c.update(callbacks=[]), "its callbacks must be a mapping; got list"),
    "a callback state not a mapping": (
        lambda c: c["callbacks"].update({k: 5 for k in c["callbacks"] if k.startswith("ForecastCheckpoint")}),
        "its ForecastCheckpoint state must be a mapping; got int",
    ),
    "a NaN score": (
        set_in_callback("ForecastCheckpoint", "current_score", torch.tensor(math.nan)),
        "its ForecastCheckpoint state: current_score must be a number in [-inf, inf]; got tensor(nan)",
    ),
    "a negative wait": (
        set_in_callback("EarlyStopping", "wait_count", -1),
        "its EarlyStopping state: wait_count must be an integer in 0..2147483647; got -1",
    ),
    "a generator state of the wrong size": (
        set_in_callback("RandomState", "torch", torch.zeros(3, dtype=torch.uint8)),
        f"its RandomState state: torch: a generator's state is {tuple(torch.get_rng_state().shape)} bytes; got (3,)",
    ),
    "a generator state torch refuses": (
        set_in_callback("RandomState", "torch", torch.zeros_like(torch.get_rng_state())),
        "its RandomState state: torch refuses its generator state (Invalid mt19937 state)",
    ),
    "no optimizer state": (lambda c: c.pop("optimizer_states"), "holds no optimizer state to resume"),
    "a moment of another shape": (
        lambda c: c["optimizer_states"][0]["state"][0].update(exp_avg=torch.zeros(3)),
        "its optimizer state of parameter 0: exp_avg must be a tensor of shape (16, 11), finite; got a tensor of "
        "shape (3,)",
    ),
    "a NaN moment": (
        lambda c: c["optimizer_states"][0]["state"][0]["exp_avg_sq"].fill_(math.nan),
        "its optimizer state of parameter 0: exp_avg_sq must be a tensor of shape (16, 11), finite; got a tensor of "
        "shape (16, 11)",
    ),
    "a moment as a number": (
        lambda c: c["optimizer_states"][0]["state"][0].update(exp_avg=0),
        "its optimizer state of parameter 0: exp_avg must be a tensor of shape (16, 11), finite; got 0",
    ),
    "a state this optimizer does not keep": (
        lambda c: c["optimizer_states"][0]["state"][0].update(momentum_buffer=torch.zeros(16, 11)),
        "its optimizer state of parameter 0 holds step, exp_avg, exp_avg_sq, momentum_buffer; this optimizer keeps "
        "step, exp_avg, exp_avg_sq",
    ),
    "a negative step count": (
        lambda c: c["optimizer_states"][0]["state"][0].update(step=torch.tensor(-1.0)),
        "its optimizer state of parameter 0: step must be a non-negative whole number; got -1.0",
    ),
    "other parameter groups": (
        lambda c: c["optimizer_states"][0]["param_groups"].pop(),
        "its optimizer state does not have this optimizer's 2 parameter groups",
    ),
    "a version Lightning cannot read": (
        lambda c: c.update({"pytorch-lightning_version": "not-a-version"}),
        "written by Lightning 'not-a-version'; this template resumes Lightning 2's",
    ),
    "a Lightning 1 checkpoint": (
        lambda c: c.update({"pytorch-lightning_version": "1.9.0"}),
        "written by Lightning '1.9.0'; this template resumes Lightning 2's",
    ),
    "a zero scale": (
        lambda c: c["WindowDataModule"]["scaler"]["scale"][0].__setitem__(1, 0.0),
        "its data state's scaler.scale must be finite numbers > 0; got 0.0 at (0, 1)",
    ),
    "a scale of the wrong length": (
        lambda c: c["WindowDataModule"]["scaler"]["scale"][0].pop(),
        "its data state's scaler.scale must be finite numbers > 0 of shape (1, 5) (series, columns); got shape (1, 4)",
    ),
    "a negative shuffle seed": (
        lambda c: c["WindowDataModule"].update(shuffle_seed=-1),
        "its data state's shuffle_seed must be an integer in 0..2**32-1; got -1",
    ),
    "a training position of text": (
        lambda c: c["WindowDataModule"].update(training_position="x"),
        "its data state's training_position must be an epoch and the batches done in it; got 'x'",
    ),
}


@pytest.mark.fast_cases(1)
@pytest.mark.parametrize(("change", "said"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_entry_of_the_state_a_fit_resumes_is_one_line_before_any_step(
    change, said, trained_run, tmp_path, capsys
):
    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert assert_refused_in_one_line(resume(path, tmp_path), capsys, said).startswith(f"error: {path}")
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").iterdir())


@pytest.mark.slow
def test_a_checkpoint_path_outside_the_run_folder_is_never_fetched_read_or_deleted(
    trained_run, tmp_path, monkeypatch, capsys
):
    """A URL as the best checkpoint of a run whose loops say it is finished, and a top-k record that climbs out of
    the folder: dropped. The file outside survives the run's new best checkpoints, and the test after fit tests the
    weights the run has (none of the recorded best checkpoints is its own): nothing is fetched."""
    fetched = []
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", lambda *args, **kwargs: fetched.append(args))
    victim = tmp_path / "victim.txt"
    victim.write_text("the user's file")
    climbing = str(tmp_path / "checkpoints" / ".." / "victim.txt")

    def change(checkpoint: dict) -> None:
        state = callback_state(checkpoint, "ForecastCheckpoint")
        state.pop("dirpath")
        state.update(
            best_model_path="http://127.0.0.1:9/best.ckpt",
            kth_best_model_path=climbing,
            kth_value=torch.tensor(math.inf),  # any validation is a new top-k checkpoint, which replaces the k-th
            best_k_models={climbing: torch.tensor(-1.0), "http://127.0.0.1:9/best.ckpt": torch.tensor(-2.0)},
        )

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert resume(path, tmp_path) == 0
    assert victim.read_text() == "the user's file"
    resumed = callback_state(torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=False), "Forecast")
    assert [Path(p).parent for p in resumed["best_k_models"]] == [tmp_path / "checkpoints"]
    # Its loops at the step the run ends: nothing to train, so fit goes straight to the test of the best checkpoint.
    assert resume(path, tmp_path / "finished", "--test_after_fit=true", "--trainer.max_steps=4") == 0
    assert "test MAE in original units" in capsys.readouterr().err  # the weights it has: no best checkpoint is its own
    assert not fetched


@pytest.mark.parametrize(
    ("arguments", "refused"),
    [
        (
            ["predict", "--ckpt_path=http://127.0.0.1:9/best.ckpt"],
            "error: http://127.0.0.1:9/best.ckpt: a checkpoint is read from a file on this machine, never from a URL",
        ),
        (
            ["fit", "--config", BASE, "--trainer.plugins=lightning.pytorch.plugins.TorchCheckpointIO"],
            "error: trainer.plugins gives a CheckpointIO; the CLI reads checkpoints through "
            "project.checkpoints.CheckpointReader (local files only, checked): subclass it to change how",
        ),
        (  # Lightning's --weights_only chooses how its own loader unpickles: false could only mislead
            ["predict", "--weights_only=false", "--ckpt_path=x.ckpt"],
            "error: --weights_only=false would let predict unpickle a checkpoint's code; every checkpoint is read with "
            "weights_only=True (project.checkpoints.read_checkpoint)",
        ),
    ],
    ids=["url", "checkpoint-io", "weights-only-false"],
)
def test_a_checkpoint_read_from_a_url_or_by_another_reader_is_refused_in_one_line(arguments, refused, capsys):
    assert assert_refused_in_one_line(cli(*arguments), capsys) == refused


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


def test_settings_that_would_build_a_model_larger_than_its_weights_are_refused_before_it_is_built(
    trained_run, tmp_path, capsys
):
    """A feed-forward width of 2**24 in the settings (4.8 GB of weights) beside the small weights of the file: the
    settings are built on the meta device and compared with the weights first."""

    def change(checkpoint: dict) -> None:
        checkpoint["hyper_parameters"]["network"]["init_args"]["dim_feedforward"] = 2**24

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    with LargestStorage() as largest, pytest.raises(InputError, match="its weights do not fit the settings it records"):
        Forecaster.load_from_checkpoint(path)
    assert largest.bytes < 10**6
    code = cli("predict", f"--ckpt_path={path}", f"--predictions.output={tmp_path / 'out.csv'}")
    assert_refused_in_one_line(code, capsys, "its weights do not fit the settings it records")
    assert not (tmp_path / "out.csv").exists()


def test_a_fit_from_someone_elses_weights_starts_fresh_from_them(trained_run, tmp_path):
    """``fit --weights``: the checkpoint's weights and settings, with a fresh optimizer, schedule and loops. At a rate
    of 0 the weights stay the checkpoint's bit for bit, while the steps and the optimizer's step counts are this
    run's own."""
    source = trained_run / "checkpoints" / "last.ckpt"
    folder = tmp_path / "checkpoints"
    arguments = [f"--weights={source}", "--model.optimizer.init_args.lr=0", "--trainer.max_steps=2"]
    arguments += ["--trainer.logger=false", f"--checkpoint.dirpath={folder}", "--test_after_fit=false"]
    assert cli("fit", "--config", BASE, *arguments) == 0
    given, trained = torch.load(source, weights_only=True), torch.load(folder / "last.ckpt", weights_only=True)
    assert given["global_step"] == 4
    assert trained["global_step"] == 2
    assert {float(state["step"]) for state in trained["optimizer_states"][0]["state"].values()} == {2.0}
    for name, expected in given["state_dict"].items():
        assert torch.equal(trained["state_dict"][name], expected), name


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (["fit", "--weights=W", "--ckpt_path=W"], "--weights starts a fit from a checkpoint's weights, --ckpt_path "),
        (["predict", "--weights=W"], "predict reads a checkpoint's weights with --ckpt_path"),
    ],
)
def test_weights_and_a_resume_are_one_or_the_other(arguments, said, trained_run, capsys):
    source = str(trained_run / "checkpoints" / "last.ckpt")
    assert_refused_in_one_line(cli(*(argument.replace("=W", f"={source}") for argument in arguments)), capsys, said)


def test_a_setting_that_names_a_file_is_refused_naming_the_file_never_quoting_it(trained_run, tmp_path, capsys):
    secret = tmp_path / "secret.txt"
    secret.write_text("password: hunter2\n")

    def change(checkpoint: dict) -> None:
        checkpoint["hyper_parameters"]["network"]["init_args"]["distribution"] = str(secret)

    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    line = assert_refused_in_one_line(cli("predict", f"--ckpt_path={path}"), capsys)
    assert line.startswith(f'error: {path}: Parser key "model.network.init_args.distribution": ')
    assert "hunter2" not in line


def test_the_machines_resources_are_the_runs_own_never_a_checkpoints(trained_run, tmp_path, capsys):
    """A checkpoint's ``num_workers`` is not predict's; more CPU processes than cores is one line before any starts."""
    path = tampered(
        trained_run / "checkpoints" / "last.ckpt",
        tmp_path,
        lambda c: c.update(datamodule_hyper_parameters={**c["datamodule_hyper_parameters"], "num_workers": 24}),
    )
    ran = cli_main(["predict", f"--ckpt_path={path}", f"--predictions.output={tmp_path / 'out.csv'}"])
    assert ran.datamodule.num_workers == 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    too_many = max(2, cores) + 1
    devices = ["--trainer.accelerator=cpu", f"--trainer.devices={too_many}", "--trainer.logger=false"]
    assert assert_refused_in_one_line(cli("fit", "--config", BASE, *devices), capsys) == (
        f"error: trainer.devices={too_many} on the CPU starts that many processes; this machine gives this run "
        f"{cores} cores: at most one process each (or two, to try DDP on one core)"
    )


def test_a_seed_lightning_would_refuse_is_refused_by_the_parser_under_its_key(capsys):
    line = assert_refused_in_one_line(cli("fit", "--config", BASE, "--seed_everything=-1"), capsys)
    assert line.startswith('error: Parser key "seed_everything": ')


# The Lightning state a checkpoint carries beside its weights and settings, where the property test places values.
LIGHTNING_STATE = ("loops", "callbacks", "optimizer_states", "lr_schedulers", "WindowDataModule")
WRITES_A_MARKER = "from pathlib import Path\nPath('IMPORTED').write_text('code ran')\ndef f(step):\n    return 1.0\n"


def state_places(tree: object, location: tuple = ()) -> list[tuple]:
    """Every place a value sits in ``tree`` (mappings and lists; a tensor is one value), as a path of keys."""
    found = [location] if location else []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += state_places(value, (*location, key))
    elif isinstance(tree, list) and len(tree) < 100:  # a tuple (betas) is one value
        for index, value in enumerate(tree):
            found += state_places(value, (*location, index))
    return found


def hostile_values(outside: Path) -> st.SearchStrategy:
    """Values a checkpoint's state may hold: out of range, of the wrong kind, paths and URLs leading out of the run,
    import paths, tensors of other shapes, a view of few stored values, and an object that runs code when read."""
    return st.one_of(
        st.integers(min_value=-(2**40), max_value=2**40),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(
            [
                None,
                True,
                "x",
                [],
                {},
                str(outside / "victim.txt"),
                "checkpoints/../outside/victim.txt",
                "http://127.0.0.1:9/best.ckpt",
                "marker_module.f",
                "2.6.6",
                "0.9.0",
            ]
        ),
        st.sampled_from(["zeros", "nan", "view", "bytes", "code"]).map(
            lambda kind: {
                "zeros": torch.zeros(3),
                "nan": torch.full((16, 11), math.nan),
                "view": torch.zeros(1).expand(2**20),
                "bytes": torch.zeros(5056, dtype=torch.uint8),
                "code": CreatesAFileWhenUnpickled(outside / "unpickled"),
            }[kind]
        ),
    )


@pytest.mark.slow
@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_random_values_anywhere_in_a_checkpoints_state_run_no_code_touch_nothing_outside_and_write_no_nan(
    trained_run, data, capsys, monkeypatch
):
    """Through every way in (a resumed fit, validate, predict, both load_from_checkpoint): no code runs, no file
    outside the run's folder is read from a URL or changed, nothing non-finite is written, and each run either
    trains as its config says (the optimizer's settings and the early stopping's patience are the config's) or stops
    with one line. The resumed run's folder holds the trained run's checkpoints, so that the paths its state records
    are its own (and kept) until a drawn value changes them."""
    with tempfile.TemporaryDirectory() as folder:
        one_hostile_checkpoint(Path(folder), trained_run, data, capsys, monkeypatch)


def one_hostile_checkpoint(folder: Path, trained_run: Path, data, capsys, monkeypatch) -> None:
    monkeypatch.chdir(folder)
    monkeypatch.syspath_prepend(str(folder))
    (folder / "marker_module.py").write_text(WRITES_A_MARKER)
    outside = folder / "outside"
    outside.mkdir()
    (outside / "victim.txt").write_text("the user's file")
    before = digests(outside)
    fetched = []
    monkeypatch.setattr(torch.hub, "load_state_dict_from_url", lambda *args, **kwargs: fetched.append(args))

    (folder / "checkpoints").mkdir()
    for kept in (trained_run / "checkpoints").glob("best-*.ckpt"):
        shutil.copy(kept, folder / "checkpoints" / kept.name)
    checkpoint = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)
    section = data.draw(st.sampled_from([*LIGHTNING_STATE, "epoch", "global_step", "pytorch-lightning_version"]))
    location = data.draw(st.sampled_from(state_places({section: checkpoint[section]})))
    owner = checkpoint
    for key in location[:-1]:
        owner = owner[key]
    owner[location[-1]] = data.draw(hostile_values(outside))
    path = folder / "hostile.ckpt"
    torch.save(checkpoint, path)

    way = data.draw(st.sampled_from(["fit", "validate", "predict", "model", "data"]))
    if way in ("model", "data"):
        loads = Forecaster if way == "model" else WindowDataModule
        try:
            loads.load_from_checkpoint(path)
            refused = ""
        except InputError as error:
            refused = str(error)
        assert not refused or ("\n" not in refused and str(path) in refused), refused
    else:
        if way == "fit":
            code = resume(path, folder)
        else:
            output = [f"--predictions.output={folder / 'out.csv'}"] if way == "predict" else []
            code = cli(way, f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.limit_val_batches=2", *output)
        error = capsys.readouterr().err
        event(f"{way} exits {code}")
        assert code in (0, 2), error[-2000:]
        if code == 2:
            assert "Traceback" not in error
            assert last_line(error).startswith("error: ")
        elif way == "fit":
            resumed = torch.load(folder / "checkpoints" / "last.ckpt", weights_only=True)
            assert all(torch.isfinite(value).all() for value in resumed["state_dict"].values())
            groups = resumed["optimizer_states"][0]["param_groups"]
            assert [(g["betas"], g["eps"], g["maximize"], g["weight_decay"]) for g in groups] == [
                ((0.9, 0.999), 1e-8, False, 0.01),  # tests/configs/tiny.yaml's AdamW, its weight matrices
                ((0.9, 0.999), 1e-8, False, 0.0),  # and the biases and norms
            ]
            assert resumed["lr_schedulers"][0]["base_lrs"] == [1e-3, 1e-3]
            assert callback_state(resumed, "EarlyStopping")["patience"] == 10
        elif way == "predict":
            assert pd.read_csv(folder / "out.csv").select_dtypes("number").notna().all().all()
    assert not (folder / "IMPORTED").exists()
    assert not (outside / "unpickled").exists()
    assert digests(outside) == before
    assert not fetched
    assert "marker_module" not in sys.modules


def test_the_gradient_scalers_scale_is_restored_and_its_factors_are_the_configs(trained_run):
    """fp16 mixed precision (a CUDA run's; on the CPU Lightning uses bf16 and no scaler: the plugin is given one)."""
    trainer = quiet_trainer(plugins=[MixedPrecision("16-mixed", "cpu", torch.amp.GradScaler("cpu"))])
    trainer.state.fn = TrainerFn.FITTING
    checkpoint = torch.load(trained_run / "checkpoints" / "last.ckpt", weights_only=True)
    saved = {"scale": 1024.0, "growth_factor": 100.0, "backoff_factor": 0.9, "growth_interval": 1, "_growth_tracker": 7}
    restored, _ = restorable({**checkpoint, "MixedPrecision": saved}, trainer)
    assert restored["MixedPrecision"] == {
        **trainer.precision_plugin.state_dict(),
        "scale": 1024.0,
        "_growth_tracker": 7,
    }
    with pytest.raises(InputError, match=r"the gradient scaler's scale must be a finite number in \(0, inf\]; got -1"):
        restorable({**checkpoint, "MixedPrecision": {**saved, "scale": -1.0}}, trainer)


class Counter(L.Callback):
    """A user's callback that counts the training batches and keeps the count in checkpoints."""

    def __init__(self) -> None:
        self.batches = 0

    def on_train_batch_end(self, *args) -> None:
        self.batches += 1

    def state_dict(self) -> dict:
        return {"batches": self.batches}

    def load_state_dict(self, state_dict: dict) -> None:
        self.batches = state_dict["batches"]


class CheckedCounter(Counter):
    """The same callback, checking what it restores: a resumed fit takes its state."""

    def checked_state(self, saved: dict, where: str) -> dict:
        if not (isinstance(saved.get("batches"), int) and saved["batches"] >= 0):
            raise InputError(f"{where}: batches must be a non-negative integer")
        return {"batches": saved["batches"]}


@pytest.mark.slow
@pytest.mark.parametrize(("callback", "counted"), [("Counter", 2), ("CheckedCounter", 4)])
def test_a_callback_of_yours_restores_its_state_only_when_it_checks_it(callback, counted, tmp_path):
    folder = tmp_path / "checkpoints"
    arguments = ["--config", BASE, f"--trainer.callbacks+=tests.cli.test_resume.{callback}", "--trainer.logger=false"]
    arguments += [f"--checkpoint.dirpath={folder}", "--test_after_fit=false", "--trainer.limit_val_batches=1"]
    assert cli("fit", *arguments, "--trainer.max_steps=2") == 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert cli("fit", *arguments, "--trainer.max_steps=4", f"--ckpt_path={folder / 'last.ckpt'}") == 0
    dropped = [w for w in caught if "the saved state of Counter is not restored" in str(w.message)]
    assert len(dropped) == (callback == "Counter")
    assert callback_state(torch.load(folder / "last.ckpt", weights_only=True), callback)["batches"] == counted


@pytest.mark.slow
def test_a_plateau_schedules_counters_and_lowered_rates_are_restored_within_the_configs(tmp_path, capsys):
    plateau = ["--model.lr_scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau", "--trainer.logger=false"]
    plateau += [f"--checkpoint.dirpath={tmp_path / 'first'}", "--test_after_fit=false", "--trainer.limit_val_batches=1"]
    plateau += ["--trainer.limit_train_batches=2"]
    assert cli("fit", "--config", BASE, *plateau, "--trainer.max_steps=4") == 0
    last = tmp_path / "first" / "last.ckpt"
    (schedule,) = torch.load(last, weights_only=True)["lr_schedulers"]
    assert 0 < schedule["best"] < math.inf

    def lowered(checkpoint: dict) -> None:
        checkpoint["lr_schedulers"][0].update(_last_lr=[1e-4, 1e-4], num_bad_epochs=2)

    resumed = [*plateau, "--trainer.max_steps=5", f"--checkpoint.dirpath={tmp_path / 'resumed'}"]
    assert cli("fit", "--config", BASE, *resumed, f"--ckpt_path={tampered(last, tmp_path, lowered)}") == 0
    resumed_state = torch.load(tmp_path / "resumed" / "last.ckpt", weights_only=True)
    assert [group["lr"] for group in resumed_state["optimizer_states"][0]["param_groups"]] == [1e-4, 1e-4]
    assert resumed_state["lr_schedulers"][0]["best"] == schedule["best"]

    def raised(checkpoint: dict) -> None:
        checkpoint["lr_schedulers"][0]["_last_lr"] = [5.0, 5.0]

    path = tampered(last, tmp_path, raised, "raised")
    code = cli("fit", "--config", BASE, *resumed, f"--ckpt_path={path}")
    assert assert_refused_in_one_line(code, capsys).endswith(
        f"{path}: its ReduceLROnPlateau state: _last_lr must be a finite number in [0, 0.001]; got 5.0"
    )


@pytest.mark.slow
def test_a_run_budgeted_in_epochs_resumes_from_an_epochs_end_bit_for_bit(tmp_path):
    """A budget in epochs (tests/configs/tiny.yaml's, or a user's ``--trainer.max_epochs``), where Lightning restarts
    its loops otherwise than mid-epoch: a run killed after an epoch's end (its last.ckpt written there) ends on the
    uninterrupted weights."""
    arguments = ["fit", "--config", BASE, "--trainer.max_epochs=2", "--trainer.limit_train_batches=3"]
    arguments += ["--trainer.limit_val_batches=1", "--trainer.logger=false", "--test_after_fit=false"]
    arguments += ["--model.network.init_args.dropout=0.2"]
    assert cli(*arguments, f"--checkpoint.dirpath={tmp_path / 'whole'}") == 0
    first_epoch = [*arguments, "--trainer.max_epochs=1", f"--checkpoint.dirpath={tmp_path / 'cut'}"]
    assert cli(*first_epoch) == 0  # the same first epoch: its last.ckpt is saved at the epoch's end
    stopped = torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)
    assert stopped["global_step"] == 3
    resume_the_cut = [f"--checkpoint.dirpath={tmp_path / 'cut'}", f"--ckpt_path={tmp_path / 'cut' / 'last.ckpt'}"]
    assert cli(*arguments, *resume_the_cut) == 0
    whole = torch.load(tmp_path / "whole" / "last.ckpt", weights_only=True)
    resumed = torch.load(tmp_path / "cut" / "last.ckpt", weights_only=True)
    assert resumed["global_step"] == whole["global_step"] == 6
    for name, expected in whole["state_dict"].items():
        assert torch.equal(resumed["state_dict"][name], expected), name


@pytest.mark.slow
def test_a_run_budgeted_in_steps_with_validations_across_epochs_resumes_bit_for_bit(tmp_path):
    """base.yaml's budget: ``max_steps``, a validation every N batches counted across epochs. A run cut after 7 steps
    (mid-epoch, between two validations) and resumed ends on the weights of the run never cut, with its validations
    at the same steps."""
    arguments = ["fit", "--config", BASE, "--trainer.max_epochs=null", "--trainer.limit_train_batches=4"]
    arguments += ["--trainer.val_check_interval=5", "--trainer.check_val_every_n_epoch=null"]
    arguments += ["--trainer.limit_val_batches=1", "--test_after_fit=false", "--model.network.init_args.dropout=0.2"]
    arguments += ["--model.lr_scheduler.init_args.decay=constant"]  # a decay sized to max_steps differs when cut
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    logged = [f"--trainer.logger.init_args.save_dir={tmp_path}", "--trainer.enable_progress_bar=false"]
    assert cli(*arguments, *logged, "--trainer.max_steps=12", f"--checkpoint.dirpath={whole}") == 0
    assert cli(*arguments, *logged, "--trainer.max_steps=7", f"--checkpoint.dirpath={cut}") == 0
    assert torch.load(cut / "last.ckpt", weights_only=True)["global_step"] == 7
    resumed = [f"--checkpoint.dirpath={cut}", f"--ckpt_path={cut / 'last.ckpt'}", "--trainer.max_steps=12"]
    assert cli(*arguments, *logged, *resumed) == 0
    expected, actual = (torch.load(path / "last.ckpt", weights_only=True) for path in (whole, cut))
    assert actual["global_step"] == expected["global_step"] == 12
    for name, value in expected["state_dict"].items():
        assert torch.equal(actual["state_dict"][name], value), name
    kept = ({checkpoint.name for checkpoint in path.glob("best-*.ckpt")} for path in (whole, cut))
    assert next(kept) == next(kept) != set()  # the best one, named by the epoch and step of its validation


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
    monkeypatch.setattr(checkpoints, "MAX_CHECKPOINT_ITEMS", 100)
    wide = tampered(path, tmp_path, lambda checkpoint: checkpoint["callbacks"].update(wide=list(range(200))), "wide")
    with pytest.raises(InputError, match=f"{wide}: it holds more than 100 values; is it a checkpoint"):
        read_checkpoint(wide)
