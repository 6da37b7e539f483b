"""What a Trainer restores from a checkpoint (``project.checkpoints.restore``, the ``CheckpointGuard``): the state the
table names, and nothing else; the settings that decide training come from the run's config, never from the file. A
hand-edited entry either cannot harm (each harm: a test below) or ends in the framework's own error, writing
nothing."""

from __future__ import annotations

import math
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import lightning as L
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from lightning.pytorch.callbacks import ModelCheckpoint
from lightning.pytorch.loops.fit_loop import _FitLoop

from project.checkpoints import CheckpointGuard
from project.checkpoints.restore import MAX_COUNT, replay_schedule
from project.checkpoints.restore import callback_state as restored_state
from project.cli import cli_main
from project.data import WindowDataModule
from project.errors import InputError
from project.training.callbacks import AnnealThenStop
from project.training.module import Forecaster
from tests.helpers import (
    BASE,
    CreatesAFileWhenUnpickled,
    assert_refused_in_one_line,
    cli,
    digests,
    last_line,
    tampered,
)


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
    "early stopping patience": set_in_callback("AnnealThenStop", "patience", 0),
    "early stopping thresholds": set_in_callback("AnnealThenStop", "stopping_reason_message", "/etc/passwd"),
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
    assert callback_state(resumed, "AnnealThenStop") == callback_state(untouched_resume, "AnnealThenStop")


# An entry that would cause harm if restored as it is: one line naming the checkpoint and the entry, before any step.
HARMFUL = {
    "a negative counter, which would train for ever": (
        set_in_loops("fit_loop", "epoch_loop.batch_progress", "total", "ready", value=-5),
        "its fit loop.epoch_loop.batch_progress.total.ready must be an integer in 0..2147483647, a step count of a "
        "run; got -5",
    ),
    "a counter past any run": (
        set_in_loops("fit_loop", "epoch_loop.state_dict", "_batches_that_stepped", value=2**40),
        "_batches_that_stepped must be an integer in 0..2147483647",
    ),
    "a zero scale, which would forecast NaN": (
        lambda c: c["WindowDataModule"]["scaler"]["scale"][0].__setitem__(1, 0.0),
        "its data state's scaler.scale must be finite numbers > 0; got 0.0 at (0, 1)",
    ),
    "a scale of the wrong length": (
        lambda c: c["WindowDataModule"]["scaler"]["scale"][0].pop(),
        "its data state's scaler.scale must be finite numbers > 0 of shape (1, 5) (series, columns); got shape (1, 4)",
    ),
    "no optimizer state (a weights-only checkpoint)": (
        lambda c: c.pop("optimizer_states"),
        "holds no optimizer state to resume (saved with save_weights_only?); start from its weights with fit --weights",
    ),
}


@pytest.mark.fast_cases(1)
@pytest.mark.parametrize(("change", "said"), HARMFUL.values(), ids=HARMFUL.keys())
def test_a_state_entry_that_would_cause_harm_is_one_line_before_any_step(change, said, trained_run, tmp_path, capsys):
    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert assert_refused_in_one_line(resume(path, tmp_path), capsys, said).startswith(f"error: {path}")
    assert not (tmp_path / "checkpoints").exists() or not list((tmp_path / "checkpoints").iterdir())


def framework_refusal(command: Callable[[], int]) -> int:
    """The exit code a fresh ``python -m project.cli`` process would end with: 1 for an exception the template does not
    turn into its one line (a traceback of the framework's own)."""
    try:
        return command()
    except Exception:
        return 1


# What a hand-edited file may hold that harms nothing: Lightning or torch refuse it in their own words (a traceback,
# exit code 1) before the first step. The template's own sentences for these went (issue 76).
REFUSED_BY_THE_FRAMEWORK = {
    "a generator state torch refuses": set_in_callback("RandomState", "torch", torch.zeros(3, dtype=torch.uint8)),
    "a moment of another shape": lambda c: c["optimizer_states"][0]["state"][0].update(exp_avg=torch.zeros(3)),
    "other parameter groups": lambda c: c["optimizer_states"][0]["param_groups"].pop(),
    "a NaN moment (the run stops as diverged)": lambda c: c["optimizer_states"][0]["state"][0]["exp_avg_sq"].fill_(
        math.nan
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("change", REFUSED_BY_THE_FRAMEWORK.values(), ids=REFUSED_BY_THE_FRAMEWORK.keys())
def test_a_hand_edited_entry_that_harms_nothing_ends_in_the_frameworks_error_before_a_step_is_saved(
    change, trained_run, tmp_path
):
    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, change)
    assert framework_refusal(lambda: resume(path, tmp_path)) != 0
    for written in (tmp_path / "checkpoints").glob("*.ckpt"):  # at most the restored step, saved again as it was
        checkpoint = torch.load(written, weights_only=True)
        assert checkpoint["global_step"] == 4, written
        assert all(torch.isfinite(value).all() for value in checkpoint["state_dict"].values())


def test_the_guard_reads_the_checkpoint_before_lightning_restores_anything_and_steps_the_schedule_after(
    trained_run, tmp_path, monkeypatch
):
    """The guard is the strategy's reader: Lightning restores what it returns, the callbacks, loops and optimizer
    after it; the schedule is stepped to the restored step once training starts, after the optimizer's state."""
    events = []

    def recorded(owner: object, name: str, event_name: str) -> None:
        method = getattr(owner, name)

        def record(*args, **kwargs):
            events.append(event_name)
            return method(*args, **kwargs)

        monkeypatch.setattr(owner, name, record)

    recorded(CheckpointGuard, "read", "read")
    recorded(ModelCheckpoint, "load_state_dict", "callbacks")
    recorded(_FitLoop, "load_state_dict", "loops")
    recorded(torch.optim.Optimizer, "load_state_dict", "optimizer")
    recorded(torch.optim.lr_scheduler.LRScheduler, "step", "schedule")
    assert resume(trained_run / "checkpoints" / "last.ckpt", tmp_path) == 0
    first = {event: events.index(event) for event in ("read", "callbacks", "loops", "optimizer")}
    assert first == dict(sorted(first.items(), key=lambda item: item[1])), events
    assert events.count("read") == 1
    assert "schedule" in events[first["optimizer"] :]


def test_a_trainer_of_yours_given_the_guard_restores_what_the_cli_does(trained_run, tmp_path):
    """``L.Trainer(callbacks=[CheckpointGuard()])`` from Python: a checkpoint's optimizer settings (``maximize``, a NaN
    rate) give way to the model's own, as ``fit --ckpt_path`` does."""
    path = tampered(trained_run / "checkpoints" / "last.ckpt", tmp_path, set_in_groups("maximize", True))
    path = tampered(path, tmp_path, set_in_groups("lr", math.nan), "nan-rate")
    model, datamodule = Forecaster.load_from_checkpoint(path), WindowDataModule.load_from_checkpoint(path)
    trainer = L.Trainer(
        callbacks=[CheckpointGuard()],
        max_steps=6,
        limit_train_batches=4,
        limit_val_batches=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(model.train(), datamodule=datamodule, ckpt_path=path)
    assert trainer.global_step == 6
    groups = trainer.optimizers[0].param_groups
    assert [group["maximize"] for group in groups] == [False, False]
    assert all(math.isfinite(group["lr"]) for group in groups)
    assert all(torch.isfinite(parameter).all() for parameter in model.parameters())


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


@pytest.mark.slow
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


@pytest.mark.slow
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
    outside the run's folder is read from a URL or changed, nothing non-finite is written, and each run either trains
    as its config says (the optimizer's settings and the early stopping's patience are the config's) or stops (one
    line, or the framework's own error: exit code 1). The resumed run's folder holds the trained run's checkpoints, so
    that the paths its state records are its own (and kept) until a drawn value changes them."""
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
        except Exception:  # the framework's own error
            refused = ""
        assert not refused or ("\n" not in refused and str(path) in refused), refused
    else:
        if way == "fit":
            code = framework_refusal(lambda: resume(path, folder))
        else:
            output = [f"--predictions.output={folder / 'out.csv'}"] if way == "predict" else []
            arguments = [f"--ckpt_path={path}", "--trainer.logger=false", "--trainer.limit_val_batches=2", *output]
            code = framework_refusal(lambda: cli(way, *arguments))
        error = capsys.readouterr().err
        event(f"{way} exits {code}")
        assert code in (0, 1, 2), error[-2000:]
        if code == 2:
            assert "Traceback" not in error
            assert last_line(error).startswith("error: ")
        elif code == 1:
            pass  # the framework's refusal; what it may not have done is checked below
        elif way == "fit":
            resumed = torch.load(folder / "checkpoints" / "last.ckpt", weights_only=True)
            assert all(torch.isfinite(value).all() for value in resumed["state_dict"].values())
            groups = resumed["optimizer_states"][0]["param_groups"]
            assert [(g["betas"], g["eps"], g["maximize"], g["weight_decay"]) for g in groups] == [
                ((0.9, 0.999), 1e-8, False, 0.01),  # tests/configs/tiny.yaml's AdamW, its weight matrices
                ((0.9, 0.999), 1e-8, False, 0.0),  # and the biases and norms
            ]
            assert resumed["lr_schedulers"][0]["base_lrs"] == [1e-3, 1e-3]
            assert callback_state(resumed, "AnnealThenStop")["patience"] == 10
        elif way == "predict":
            assert pd.read_csv(folder / "out.csv").select_dtypes("number").notna().all().all()
    assert not (folder / "IMPORTED").exists()
    assert not (outside / "unpickled").exists()
    assert digests(outside) == before
    assert not fetched
    assert "marker_module" not in sys.modules


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


@pytest.mark.slow
def test_a_callback_of_yours_restores_its_own_state(tmp_path):
    folder = tmp_path / "checkpoints"
    arguments = ["--config", BASE, "--trainer.callbacks+=tests.checkpoints.test_restore.Counter"]
    arguments += ["--trainer.logger=false", f"--checkpoint.dirpath={folder}", "--test_after_fit=false"]
    arguments += ["--trainer.limit_val_batches=1"]
    assert cli("fit", *arguments, "--trainer.max_steps=2") == 0
    assert cli("fit", *arguments, "--trainer.max_steps=4", f"--ckpt_path={folder / 'last.ckpt'}") == 0
    assert callback_state(torch.load(folder / "last.ckpt", weights_only=True), "Counter")["batches"] == 4


@pytest.mark.slow
def test_a_plateau_schedules_counters_and_lowered_rates_are_restored_within_the_configs(tmp_path):
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

    raised_run = [*plateau, "--trainer.max_steps=5", f"--checkpoint.dirpath={tmp_path / 'raised'}"]
    assert cli("fit", "--config", BASE, *raised_run, f"--ckpt_path={tampered(last, tmp_path, raised, 'raised')}") == 0
    rates = torch.load(tmp_path / "raised" / "last.ckpt", weights_only=True)["optimizer_states"][0]["param_groups"]
    assert all(0 < group["lr"] <= 1e-3 for group in rates)  # never above the config's rate


@pytest.mark.parametrize(("saved", "restored"), [(math.nan, 1e-3), (5.0, 1e-3), (0.0, 1e-6), (1e-4, 1e-4)])
def test_a_plateaus_saved_rate_is_restored_between_its_min_lr_and_the_configs_rate(saved, restored):
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1e-3)  # the config's rate
    plateau = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, min_lr=1e-6)
    replay_schedule(plateau, {"_last_lr": [saved]}, steps=0)
    assert plateau.optimizer.param_groups[0]["lr"] == restored


def test_a_counter_past_the_runs_steps_replays_the_schedule_no_further_than_the_run():
    """A step counter within the loops' bound (up to MAX_COUNT, two billion) but past the run: the schedule is stepped
    the run's steps, not the counter's, before the first batch."""
    stepped = []
    schedule = type("Counted", (), {"step": lambda self: stepped.append(1)})()
    trainer = SimpleNamespace(
        global_step=MAX_COUNT // 10**6,
        estimated_stepping_batches=7,
        lr_scheduler_configs=[SimpleNamespace(scheduler=schedule)],
    )
    guard = CheckpointGuard()
    guard._schedules = [{}]
    guard.on_train_start(trainer, None)
    assert len(stepped) == 7


def test_early_stoppings_saved_best_weights_are_refused_when_not_finite():
    stopping = AnnealThenStop(monitor="val/loss")
    saved = {"best_weights": {"layer.weight": torch.tensor([1.0, math.nan])}, "wait_count": 1}
    with pytest.raises(InputError, match=r"^run\.ckpt: its AnnealThenStop's best weights: .*non-finite weights"):
        restored_state(stopping, saved, "run.ckpt: its ")
    assert restored_state(stopping, {**saved, "best_weights": {"layer.weight": torch.ones(2)}})["wait_count"] == 1


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


@pytest.mark.slow
def test_a_run_stopped_while_its_learning_rate_decays_resumes_bit_for_bit(tmp_path):
    """The default schedule's progress beside the step (where the decay started) comes from the checkpoint: a run
    whose validation stops improving at once (a ``min_delta`` nothing reaches) starts its decay at step 4, where early
    stopping would stop, and ends at step 8; stopped by SIGTERM at step 6 and resumed, it ends on the uninterrupted
    run's weights, at the same step."""
    arguments = ["fit", "--config", BASE, "--trainer.max_steps=50", "--trainer.limit_train_batches=5"]
    arguments += ["--trainer.val_check_interval=2", "--trainer.check_val_every_n_epoch=null"]
    arguments += ["--trainer.limit_val_batches=1", "--test_after_fit=false", "--model.network.init_args.dropout=0.2"]
    arguments += ["--model.lr_scheduler=project.training.WarmupStableDecay", "--model.lr_scheduler.warmup_steps=0"]
    arguments += [
        "--model.lr_scheduler.decay_share=1.0",
        "--early_stopping.patience=1",
        "--early_stopping.min_delta=1e9",
    ]
    arguments += ["--trainer.logger=false", "--trainer.enable_progress_bar=false"]
    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert cli(*arguments, f"--checkpoint.dirpath={whole}") == 0
    expected = torch.load(whole / "last.ckpt", weights_only=True)
    assert expected["global_step"] == 8
    assert expected["lr_schedulers"][0]["decay_start"] == 4
    stop = ["--trainer.callbacks+=tests.helpers.Terminate", "--trainer.callbacks.step=6"]
    stop += ["--trainer.callbacks.signal_name=SIGTERM", "--trainer.callbacks.where=batch_end"]
    assert cli(*arguments, f"--checkpoint.dirpath={cut}", *stop) == 143
    assert torch.load(cut / "last.ckpt", weights_only=True)["global_step"] == 6
    assert cli(*arguments, f"--checkpoint.dirpath={cut}", f"--ckpt_path={cut / 'last.ckpt'}") == 0
    actual = torch.load(cut / "last.ckpt", weights_only=True)
    assert actual["global_step"] == 8
    for name, value in expected["state_dict"].items():
        assert torch.equal(actual["state_dict"][name], value), name
