"""Every numeric option of this project's classes in ``fit --help`` has a parser type (``project.domains``), and a
value outside it ends in one line naming the option as a config does, with exit code 2. The Trainer and Lightning's
callbacks check their own options, torch its optimizers': what they refuse is one line too."""

import math
import re

import pytest

from project.cli import LINKED_INTO_NETWORK, LINKED_SETTINGS
from tests.helpers import BASE, assert_refused_in_one_line, cli, last_line
from tests.helpers import NETWORKS as NETWORK_TABLE

NETWORKS = [f"{cls.__module__}.{cls.__qualname__}" for cls, _ in NETWORK_TABLE.values()]  # the contract's table
# The sections of the classes this project does not own: they check their own options.
LIGHTNINGS = ("trainer.", "checkpoint.", "early_stopping.", "lr_monitor.", "seed_everything")
NOT_NUMBERS = {"trainer.max_time": "a duration (text, timedelta or a dict of units), not a number"}
OUTSIDE = {  # a value each parser type refuses
    "PositiveInt": 0,
    "NonNegativeInt": -1,
    "AtLeastTwo": 1,
    "Fraction": 0.0,
    "DropoutRate": 1.0,
    "ClosedUnitInterval": 1.5,
    "OpenUnitInterval": 1.0,
    "PositiveFloat": math.nan,
    "FigureWindows": 51,
}


def numeric_options(help_text: str) -> dict[str, str]:
    """``--name`` → its type, for the options of ``help_text`` whose type holds an int or a float."""
    options, name, text = {}, None, []
    for line in [*help_text.splitlines(), "  --end"]:
        start = re.match(r"^  --([\w.]+)", line)
        if start or not line.strip():
            kind = re.search(r"\(type: (.+?)(?:, default: [^)]*)?\)$", " ".join(text))
            numbers = re.sub(r"dict\[str, int\]", "", kind.group(1)) if kind else ""
            if name and re.search(r"\b(int|float|{})\b".format("|".join(OUTSIDE)), numbers):
                options[name] = numbers
            name, text = (start.group(1) if start else None), []
        elif name:
            text.append(line.strip())
    return options


NETWORK_OF: dict[str, str] = {}  # a network's option → the first network that has it


@pytest.fixture(scope="module")
def help_options() -> dict[str, str]:
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
            if name in {f"model.{linked}" for linked in LINKED_SETTINGS} or name.startswith(LIGHTNINGS):
                continue  # set under data: and linked into the model; Lightning's own
            if not name.startswith(("model.network.", "network.")):
                options[name] = kind
                continue
            option = name.removeprefix("model.").removeprefix("network.").removeprefix("init_args.")
            if option.split(".")[0] not in LINKED_INTO_NETWORK:  # the data's sizes, the positional table
                options[f"model.network.init_args.{option}"] = kind
                NETWORK_OF.setdefault(f"model.network.init_args.{option}", arguments[-1])
    return options


def parser_type(kind: str) -> str | None:
    return next((name for name in OUTSIDE if re.search(rf"\b{name}\b", kind)), None)


def test_the_walk_finds_the_numeric_options(help_options):
    expected = {"model.network.init_args.d_model", "model.network.init_args.hidden_size", "data.batch_size"}
    assert expected | {"model.network.init_args.dropout", "forecast_figures.num_windows"} <= set(help_options)
    assert len(help_options) >= 20


def test_every_numeric_option_has_a_parser_type(help_options):
    missing = sorted(name for name, kind in help_options.items() if parser_type(kind) is None)
    assert not missing, f"give them a type of project/domains.py: {missing}"


@pytest.mark.slow  # a LightningCLI parse per option: about 40 s on two cores
def test_a_value_outside_its_domain_ends_in_one_line_naming_the_option_and_exit_code_2(help_options, capsys):
    refused = {}
    for name, kind in help_options.items():
        value = OUTSIDE[parser_type(kind)]
        value = f"[{value}]" if kind.startswith("list[") else ".nan" if value is math.nan else value
        network = [f"--model.network.class_path={NETWORK_OF[name]}"] if name in NETWORK_OF else []
        code = cli("fit", "--config", BASE, *network, "--trainer.max_steps=1", f"--{name}={value}")
        error = capsys.readouterr().err
        refused[name] = (code, "Traceback" not in error, last_line(error).startswith(f'error: Parser key "{name}": '))
    wrong = {name: result for name, result in refused.items() if result != (2, True, True)}
    assert not wrong, wrong


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
    assert_refused_in_one_line(cli("fit", "--config", BASE, "--trainer.logger=false", option), capsys, message)


SGD = ["--model.optimizer=torch.optim.SGD", "--model.optimizer.init_args.lr=0.1"]
HUBER_DELTA = "model.network.init_args.distribution.init_args.huber_delta"


@pytest.mark.fast_cases(7)
@pytest.mark.parametrize(
    ("options", "line"),
    [
        ([f"--{HUBER_DELTA}=-1"], f'Parser key "{HUBER_DELTA}": Not of type PositiveFloat'),
        (["--naive_comparison.season=13"], "naive_comparison.season=13 must be at most model.context_length=12"),
        (["--checkpoint.save_last=link"], "checkpoint.save_last=link would make last.ckpt a link"),
        (
            ["--model.optimizer.init_args.lr=-0.01"],
            "model.optimizer: Invalid learning rate: -0.01",
        ),
        (
            [*SGD, "--model.optimizer.init_args.momentum=-1"],
            "model.optimizer: Invalid momentum value: -1.0",
        ),
        (
            ["--model.lr_scheduler=torch.optim.lr_scheduler.LRScheduler"],
            "model.lr_scheduler: NotImplementedError",
        ),
        (["--trainer.accumulate_grad_batches=0"], "trainer.accumulate_grad_batches=0 must be an integer ≥ 1"),
        (
            ["--checkpoint.monitor=val/mase"],
            "ForecastCheckpoint's monitor 'val/mase' is never logged; the model logs test/loss, ",
        ),
        (
            ["--early_stopping.monitor=val/accuracy"],
            "AnnealThenStop's monitor 'val/accuracy' is never logged; the model logs test/loss, ",
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
        "negative-huber-delta",
        "season-past-the-context",
        "save-last-link",
        "negative-lr",
        "negative-momentum",
        "abstract-scheduler",
        "accumulate-0",
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
    """And a distribution's or a callback's option."""
    quick = ["--trainer.logger=false", "--trainer.max_steps=1", f"--checkpoint.dirpath={tmp_path}"]
    assert assert_refused_in_one_line(cli("fit", "--config", BASE, *quick, *options), capsys).startswith(
        f"error: {line}"
    )
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
    assert_refused_in_one_line(
        cli("fit", "--config", BASE, "--trainer.logger=false", "--trainer.accelerator=gpu"), capsys
    )


def test_a_seed_lightning_would_refuse_is_refused_by_the_parser_under_its_key(capsys):
    line = assert_refused_in_one_line(cli("fit", "--config", BASE, "--seed_everything=-1"), capsys)
    assert line.startswith('error: Parser key "seed_everything": ')
