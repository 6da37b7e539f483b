"""Every numeric option of this project's classes in ``fit --help`` has a domain on its class's signature, and a value
outside it ends in one line naming the option as a config does, with exit code 2. The Trainer and Lightning's callbacks
check their own options: what they refuse is one line too."""

import math
import re

import pytest

from project.cli import LINKED_INTO_NETWORK, LINKED_SETTINGS
from project.data import WindowDataModule
from project.domains import check_arguments, declared_domains
from project.errors import InputError
from project.training import ScheduledSampling, WarmupCosine
from project.training.figures import ForecastFigures
from project.training.module import Forecaster
from project.training.naive_comparison import NaiveComparison
from tests.helpers import BASE, cli, last_line
from tests.test_network_contract import NETWORKS as NETWORK_TABLE

NETWORKS = [f"{cls.__module__}.{cls.__qualname__}" for cls, _ in NETWORK_TABLE.values()]  # the contract's table
OWN_CLASSES = {  # the sections of this project's classes → the class whose signature declares their domains
    "model": Forecaster,
    "data": WindowDataModule,
    "forecast_figures": ForecastFigures,
    "naive_comparison": NaiveComparison,
    "model.network.init_args": NETWORK_TABLE["transformer"][0],
    "model.regime.init_args": ScheduledSampling,
    "model.lr_scheduler.init_args": WarmupCosine,
}
DOMAINS = {}  # every option's domain, by its dotted name, from the signatures
for section, owner in [*OWN_CLASSES.items(), *(("model.network.init_args", c) for c, _ in NETWORK_TABLE.values())]:
    DOMAINS.update({f"{section}.{name}": domain for name, domain in declared_domains(owner).items()})


# The sections of the classes this project does not own: they check their own options.
LIGHTNINGS = ("trainer.", "checkpoint.", "early_stopping.", "lr_monitor.", "seed_everything")


def check(name: str, value) -> None:
    """``value`` for the option ``name`` checked by its class's signature."""
    section, _, option = name.rpartition(".")
    check_arguments(OWN_CLASSES[section], {option: value}, f"{section}.")


NETWORK_OF: dict[str, str] = {}  # a network's option → the first network that has it
NOT_NUMBERS = {"trainer.max_time": "a duration (text, timedelta or a dict of units), not a number"}
CANDIDATES = {"int": [-5, 0, 51, 2**40], "float": [-5.0, 1.5, math.nan], "list": [[1.5]]}


def numeric_options(help_text: str) -> dict[str, str]:
    """``--name`` → its type, for the options of ``help_text`` whose type holds an int or a float."""
    options, name, text = {}, None, []
    for line in [*help_text.splitlines(), "  --end"]:
        start = re.match(r"^  --([\w.]+)", line)
        if start or not line.strip():
            kind = re.search(r"\(type: (.+?)(?:, default: [^)]*)?\)$", " ".join(text))
            numbers = re.sub(r"dict\[str, int\]", "", kind.group(1)) if kind else ""
            if name and re.search(r"\b(int|float)\b", numbers):
                options[name] = numbers
            name, text = (start.group(1) if start else None), []
        elif name:
            text.append(line.strip())
    return options


@pytest.fixture(scope="module")
def help_options(tmp_path_factory) -> dict[str, str]:
    """The numeric options of ``fit --help``, ``--model.help Forecaster``, ``--data.help WindowDataModule`` and each
    network's ``--model.network.help``, by the dotted names a config gives them (``model.network.init_args.d_model``);
    the linked arguments are not options."""
    import contextlib
    import io

    options = {}
    helps = [["--help"], ["--model.help", "Forecaster"], ["--data.help", "WindowDataModule"]]
    for arguments in [*helps, *(["--model.network.help", network] for network in NETWORKS)]:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            assert cli("fit", *arguments) == 0
        for name, kind in numeric_options(printed.getvalue()).items():
            if name in {f"model.{linked}" for linked in LINKED_SETTINGS}:
                continue  # set under data: and linked into the model
            if name.startswith(LIGHTNINGS):
                continue
            if not name.startswith(("model.network.", "network.")):
                options[name] = kind
                continue
            option = name.removeprefix("model.").removeprefix("network.").removeprefix("init_args.")
            if option.split(".")[0] not in LINKED_INTO_NETWORK:  # the data's sizes, the positional table
                options[f"model.network.init_args.{option}"] = kind
                NETWORK_OF.setdefault(f"model.network.init_args.{option}", arguments[-1])
    return options


def outside(name: str, kind: str):
    """A value of the option's type that its domain refuses."""
    family = "list" if "list[" in kind else ("float" if "float" in kind else "int")
    domain = DOMAINS[name]
    return next(value for value in CANDIDATES[family] if not domain.holds(value))


def test_the_walk_finds_the_numeric_options(help_options):
    expected = {"model.network.init_args.d_model", "model.network.init_args.hidden_size", "data.batch_size"}
    assert expected | {"model.network.init_args.dropout", "forecast_figures.num_windows"} <= set(help_options)
    assert len(help_options) >= 20


def test_every_numeric_option_has_a_domain(help_options):
    missing = sorted(set(help_options) - set(DOMAINS) - set(NOT_NUMBERS))
    assert not missing, f"declare their domains on the signatures (project/domains.py's types): {missing}"


@pytest.mark.slow  # a LightningCLI parse per option: about 40 s on two cores
def test_a_value_outside_its_domain_ends_in_one_line_and_exit_code_2(help_options, capsys):
    refused = {}
    for name, kind in help_options.items():
        if name in NOT_NUMBERS:
            continue
        value = outside(name, kind)
        spelled = ".nan" if isinstance(value, float) and math.isnan(value) else value
        network = [f"--model.network.class_path={NETWORK_OF[name]}"] if name in NETWORK_OF else []
        code = cli("fit", "--config", BASE, *network, "--trainer.max_steps=1", f"--{name}={spelled}")
        error = capsys.readouterr().err
        refused[name] = (code, "Traceback" not in error, last_line(error).startswith(f"error: {name} must be"))
    wrong = {name: result for name, result in refused.items() if result != (2, True, True)}
    assert not wrong, wrong


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("data.batch_size", 0),
        ("model.network.init_args.nhead", 0),
        ("model.network.init_args.dropout", 1.0),
        ("model.regime.init_args.steps", 0),
        ("model.lr_scheduler.init_args.warmup_steps", -1),
    ],
)
def test_edges_of_the_domains(name, value):
    with pytest.raises(InputError, match=rf"^{re.escape(name)} must be"):
        check(name, value)


@pytest.mark.fast_cases(2)
@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("--trainer.max_epochs=-5", "`max_epochs` must be a non-negative integer or -1"),
        ("--trainer.devices=0", "value is not a valid input"),
        ("--trainer.num_nodes=0", "`num_nodes` must be a positive integer"),
        ("--trainer.limit_train_batches=1.5", "invalid value 1.5 for limit_train_batches"),
        ("--checkpoint.save_top_k=-5", "Invalid value for save_top_k=-5"),
        ("--trainer.accelerator=abacus", "abacus"),
    ],
)
def test_what_lightning_refuses_of_its_own_options_is_one_line(option, message, capsys):
    assert cli("fit", "--config", BASE, "--trainer.logger=false", option) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert last_line(error).startswith("error: ")
    assert message in last_line(error)


SGD = ["--model.optimizer=torch.optim.SGD", "--model.optimizer.init_args.lr=0.1"]
STEP_LR = "--model.lr_scheduler=torch.optim.lr_scheduler.StepLR"


@pytest.mark.fast_cases(4)
@pytest.mark.parametrize(
    ("options", "line"),
    [
        (
            ["--model.optimizer.init_args.lr=-0.01"],
            "model.optimizer torch.optim.AdamW(lr=-0.01) is refused: Invalid learning rate: -0.01",
        ),
        (
            ["--model.optimizer.init_args.lr=1e308"],  # torch takes it, then fails inside the first step
            "model.optimizer torch.optim.AdamW(lr=1e+308) is refused: lr=1e+308 must be a finite number within the "
            "range of the parameters' torch.float32 (at most 3.4e+38)",
        ),
        (
            [*SGD, "--model.optimizer.init_args.momentum=-1"],
            "model.optimizer torch.optim.SGD(lr=0.1, momentum=-1.0, weight_decay=0.01) is refused: Invalid momentum "
            "value: -1.0",
        ),
        (
            ["--model.lr_scheduler=torch.optim.lr_scheduler.LRScheduler"],
            "model.lr_scheduler torch.optim.lr_scheduler.LRScheduler() is refused: NotImplementedError (an abstract "
            "class: name one that implements it)",
        ),
        (
            [STEP_LR, "--model.lr_scheduler.init_args.step_size=0"],  # torch takes it, then divides by it
            "model.lr_scheduler torch.optim.lr_scheduler.StepLR(step_size=0) fails on its first step: integer modulo "
            "by zero",
        ),
        (["--trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0 must be an integer ≥ 1"),
        (
            ["--model.lr_scheduler=torch.optim.lr_scheduler.ExponentialLR", "--model.lr_scheduler.init_args.gamma=-1"],
            "model.lr_scheduler torch.optim.lr_scheduler.ExponentialLR(gamma=-1.0) after one step: lr=-0.001 is "
            "negative: each step would climb the loss",
        ),
        (
            ["--checkpoint.monitor=val/mase"],
            "ForecastCheckpoint's monitor 'val/mase' is never logged; the model logs test/loss, ",
        ),
        (
            ["--early_stopping.monitor=val/accuracy"],
            "EarlyStopping's monitor 'val/accuracy' is never logged; the model logs test/loss, ",
        ),
        (
            [
                "--model.lr_scheduler=lightning.pytorch.cli.ReduceLROnPlateau",
                "--model.lr_scheduler.init_args.monitor=val/rmse",
            ],
            "model.lr_scheduler's monitor 'val/rmse' is never logged; the model logs",
        ),
        (
            ["--trainer.val_check_interval=0"],
            "trainer.val_check_interval=0 must be an integer ≥ 1 (batches) or in (0, 1]",
        ),
        (["--trainer.check_val_every_n_epoch=0"], "trainer.check_val_every_n_epoch=0 must be an integer ≥ 1, or null"),
        (
            ["--trainer.val_check_interval=100000"],
            "`val_check_interval` (100000) must be less than or equal to the number of the training batches (110).",
        ),
    ],
    ids=[
        "negative-lr",
        "lr-beyond-float32",
        "negative-momentum",
        "abstract-scheduler",
        "step-size-0",
        "accumulate-0",
        "negative-rate-after-a-step",
        "checkpoint-monitor-never-logged",
        "early-stopping-monitor-never-logged",
        "plateau-monitor-never-logged",
        "val-check-interval-0",
        "check-val-every-0-epochs",
        "val-check-interval-past-the-batches",
    ],
)
def test_an_optimizer_schedule_or_accumulation_that_cannot_train_is_one_line_before_training(
    options, line, tmp_path, capsys
):
    quick = ["--trainer.logger=false", "--trainer.max_steps=1", f"--checkpoint.dirpath={tmp_path}"]
    assert cli("fit", "--config", BASE, *quick, *options) == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert last_line(error).startswith(f"error: {line}")
    assert not list(tmp_path.iterdir())  # refused before the first step: no checkpoint


@pytest.mark.parametrize(
    ("options", "monitor"),
    [
        (["--model.lr_scheduler=null"], None),
        (["--model.lr_scheduler=torch.optim.lr_scheduler.ReduceLROnPlateau"], "val/loss"),
        (
            [
                "--model.lr_scheduler=lightning.pytorch.cli.ReduceLROnPlateau",
                "--model.lr_scheduler.init_args.monitor=val/mae",
            ],
            "val/mae",
        ),
    ],
    ids=["no-schedule", "torch-plateau-on-the-validation-loss", "lightning-plateau-on-its-own-monitor"],
)
def test_no_schedule_trains_at_a_constant_rate_and_a_plateau_steps_on_its_own_monitor(options, monitor, tmp_path):
    from lightning.pytorch.callbacks import Callback

    seen = {}

    class Record(Callback):
        def on_train_end(self, trainer, pl_module):
            configs = trainer.lr_scheduler_configs
            seen["monitor"] = configs[0].monitor if configs else None
            seen["lr"] = trainer.optimizers[0].param_groups[0]["lr"]

    quick = ["--trainer.logger=false", "--trainer.max_steps=2", f"--checkpoint.dirpath={tmp_path}"]
    from project.cli import cli_main

    cli_main(["fit", "--config", BASE, *quick, *options, "--test_after_fit=false"], extra_callbacks=[Record()])
    assert seen["monitor"] == monitor
    if monitor is None:
        assert seen["lr"] == 0.001  # the optimizer's rate throughout


def test_an_accelerator_this_machine_lacks_is_refused_in_one_line(capsys):
    pytest.importorskip("torch").cuda.is_available() and pytest.skip("this machine has a GPU")
    assert cli("fit", "--config", BASE, "--trainer.logger=false", "--trainer.accelerator=gpu") == 2
    error = capsys.readouterr().err
    assert "Traceback" not in error
    assert last_line(error).startswith("error: ")


HUBER_DELTA = "--model.network.init_args.distribution.init_args.huber_delta"


@pytest.mark.parametrize(
    ("option", "message"),
    [
        (f"{HUBER_DELTA}=-1", "huber_delta must be a finite number > 0"),
        (f"{HUBER_DELTA}=.inf", "huber_delta must be a finite number > 0"),
        ("--naive_comparison.season=13", "naive_comparison.season=13 must be at most model.context_length=12"),
        ("--checkpoint.save_last=link", "checkpoint.save_last=link would make last.ckpt a link"),
    ],
)
def test_a_distributions_or_callbacks_option_is_refused_in_one_line_before_training(option, message, tmp_path, capsys):
    quick = ["--trainer.logger=false", "--trainer.max_steps=1", f"--checkpoint.dirpath={tmp_path}"]
    assert cli("fit", "--config", BASE, *quick, option) == 2
    assert message in last_line(capsys.readouterr().err)
