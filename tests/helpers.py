"""Running the CLI the way a user does (a fresh Python process from the repository root, or in-process for
speed), and the small models and data the tests share."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import re
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

from project.cli import cli_main
from project.errors import InputError
from project.model import GRUForecaster
from project.model.distributions import Normal, PointForecast, Quantiles, StudentT
from project.model.network import InputSizes
from project.model.paths import LinearPath, SeasonalNaivePath
from project.model.transformer import ForecastTransformer
from project.training import WarmupCosine, WarmupStableDecay
from project.training.module import Forecaster

REPOSITORY = Path(__file__).resolve().parents[1]
# The suite's own config (configs/base.yaml with a tiny network): users edit configs/, not what the tests run.
BASE = str(REPOSITORY / "tests" / "configs" / "tiny.yaml")

# The tiny network of BASE, for runs that stack a preset with a network of its own (panel.yaml) on top of it.
SMALL_MODEL = [
    "--model.network.init_args.d_model=16",
    "--model.network.init_args.nhead=2",
    "--model.network.init_args.num_encoder_layers=1",
    "--model.network.init_args.num_decoder_layers=1",
    "--model.network.init_args.dim_feedforward=32",
]


def config(name: str) -> str:
    """Absolute path of a file in configs/, for runs whose working directory is a test folder."""
    return str(REPOSITORY / "configs" / name)


def run_cli(
    *arguments: str, timeout: int = 600, cwd: Path = REPOSITORY, python_path: tuple[Path, ...] = ()
) -> subprocess.CompletedProcess:
    """``python -m project.cli …`` in a fresh process; ``python_path``: folders of the user's own modules."""
    path = os.pathsep.join(str(folder) for folder in (REPOSITORY, *python_path))
    environment = {**os.environ, "PYTHONWARNINGS": "ignore", "COLUMNS": "200", "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-m", "project.cli", *arguments],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=environment,
    )


def assert_ok(result: subprocess.CompletedProcess) -> None:
    """A fresh process of ``run_cli`` exited 0; else its output's ends, to see why."""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]


def cli(*arguments: str) -> int:
    """``python -m project.cli …`` in this process (imports paid once); the exit code (0 when it returns)."""
    try:
        cli_main(list(arguments))
    except SystemExit as exit:
        return exit.code if isinstance(exit.code, int) else (0 if exit.code is None else 1)
    return 0


def users_module(folder: Path, name: str, source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A user's own module ``name`` written to ``folder`` and importable in this process, as a folder on
    ``PYTHONPATH`` makes it for ``python -m project.cli`` (tests/cli/test_cli.py runs that once in a fresh process). A
    module of that name an earlier test imported is dropped from ``sys.modules``, so this test imports its own."""
    (folder / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, name, raising=False)


def last_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[-1] if lines else ""


def quick_fit_arguments(log_dir: Path, steps: int = 2) -> list[str]:
    """Overrides that keep a base.yaml run to a few steps, logging under ``log_dir``."""
    return [
        f"--trainer.max_steps={steps}",
        f"--trainer.limit_train_batches={steps}",
        "--trainer.limit_val_batches=2",
        "--trainer.limit_test_batches=2",
        f"--trainer.logger.init_args.save_dir={log_dir}",
        "--trainer.enable_progress_bar=false",
        "--trainer.enable_model_summary=false",
    ]


def only_run(log_dir: Path, name: str = "synthetic_series") -> Path:
    """The single version folder a CLI run wrote under ``log_dir``."""
    (version,) = sorted((log_dir / name).iterdir())
    return version


FLOAT32_EPSILON = float(np.finfo(np.float32).eps)
# Roundings a float32 result may differ by when the same sums run in another order: other process layouts, thread
# counts or batch compositions. Generous for the few-hundred-term sums of these tests, and still 10,000 times
# tighter than any error a test is there to catch.
FLOAT32_ROUNDINGS = 64


def float32_tolerance(scale: float) -> float:
    """The absolute tolerance for float32 results of size ``scale`` computed in another order."""
    return FLOAT32_ROUNDINGS * FLOAT32_EPSILON * abs(float(scale))


def assert_close_in_float32(actual, expected, scale: float | None = None) -> None:
    """``actual`` equals ``expected`` up to float32 rounding at the values' scale (the largest magnitude of
    ``expected`` unless given): an absolute tolerance, so that a value near zero beside large ones is not held to
    a relative precision that float32 sums in another order cannot give."""
    expected = np.asarray(expected, dtype=np.float64)
    scale = float(np.abs(expected).max()) if scale is None else scale
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), expected, rtol=0, atol=float32_tolerance(scale))


SIZES = tuple(field.name for field in dataclasses.fields(InputSizes))  # as the tests give them: n_targets=2, …


def with_sizes(arguments: dict) -> dict:
    """Network ``arguments`` with the sizes given one by one (``n_targets=2``) gathered into ``sizes``."""
    sizes = {name: arguments.pop(name) for name in SIZES if name in arguments}
    return {**arguments, "sizes": InputSizes(**sizes)} if sizes else arguments


def small_model(dtype: torch.dtype = torch.float64, **overrides) -> ForecastTransformer:
    """A small model in eval mode: dropout off, so cached and parallel decoding compute the same function."""
    arguments = dict(n_targets=5, d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2)
    arguments.update(dropout=0.0, dim_feedforward=64)
    arguments.update(overrides)
    arguments["distribution"] = distribution(
        arguments.pop("distribution", "none"), arguments.pop("quantile_levels", None)
    )
    return ForecastTransformer(**with_sizes(arguments)).to(dtype).eval()


DISTRIBUTIONS = {"none": PointForecast, "normal": Normal, "student_t": StudentT, "quantile": Quantiles}


def distribution(name: str, quantile_levels=None, loss: str | None = None, huber_delta: float | None = None):
    """The distribution object a short name stands for in these tests (``"quantile"`` is ``Quantiles``), with the
    levels or point loss given."""
    if name == "quantile" and quantile_levels is not None:
        return Quantiles(quantile_levels)
    if name == "none" and (loss or huber_delta is not None):
        return PointForecast(loss or "mse", 1.0 if huber_delta is None else huber_delta)
    return DISTRIBUTIONS[name]()


BASELINE_PATHS = ("none", "linear", "seasonal_naive")  # every shipped baseline path, by a short name


def baseline_path(name: str, context_length: int, horizon: int, season: int = 3):
    """The baseline path a short name stands for: None (the default, no path), a ``LinearPath`` with random weights
    (at its zero start it would be repeat-last) or a ``SeasonalNaivePath`` of ``season`` steps."""
    if name == "seasonal_naive":
        return SeasonalNaivePath(season, context_length)
    if name == "linear":
        path = LinearPath(context_length, horizon)
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            path.weight.copy_(torch.randn(path.weight.shape, generator=generator) / context_length)
            path.bias.copy_(torch.randn(path.bias.shape, generator=generator) / 4)
        return path
    assert name == "none", name
    return None


def adamw(lr: float = 1e-3, weight_decay: float = 0.01) -> functools.partial:
    """The optimizer argument of a ``Forecaster``: AdamW at these settings (the default's, unless told others)."""
    return functools.partial(torch.optim.AdamW, lr=lr, weight_decay=weight_decay)


def warmup_cosine(warmup_steps: int = 100, decay: str = "cosine") -> functools.partial:
    """The lr_scheduler argument of a ``Forecaster``: ``WarmupCosine`` with this warm-up (100 unless told)."""
    return functools.partial(WarmupCosine, warmup_steps=warmup_steps, decay=decay)


def relative_difference(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).abs().max() / expected.abs().max()).item()


TINY = dict(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=1, dim_feedforward=32, dropout=0.0)
NETWORK_ARGUMENTS = (
    "n_targets",
    "n_past_covariates",
    "n_future_covariates",
    "static_cardinalities",
    "n_static_reals",
    "d_model",
    "nhead",
    "num_encoder_layers",
    "num_decoder_layers",
    "dim_feedforward",
    "dropout",
    "patch_length",
    "channel_independent",
    "checkpoint_layers",
)


def forecaster(network_class=ForecastTransformer, **arguments) -> Forecaster:
    """A ``Forecaster`` around ``network_class``, the arguments split between the two as the CLI splits them: the
    network gets its own, with the distribution a short name stands for, and a positional table for its context and
    horizons."""
    network_arguments = {name: arguments.pop(name) for name in NETWORK_ARGUMENTS if name in arguments}
    network_arguments["distribution"] = distribution(
        arguments.pop("distribution", "none"),
        arguments.pop("quantile_levels", None),
        arguments.pop("loss", None),
        arguments.pop("huber_delta", None),
    )
    if network_class is ForecastTransformer:
        horizon = arguments.get("horizon", 12)
        longest = arguments.get("max_horizon") or 4 * horizon
        network_arguments["max_length"] = max(arguments.get("context_length", 12), longest)
    return Forecaster(network_class(**with_sizes(network_arguments)), **arguments)


def tiny_module(**overrides) -> Forecaster:
    arguments = dict(TINY, n_targets=2, context_length=8, horizon=4)
    arguments.update(overrides)
    return forecaster(**arguments)


def learnable_series(rows: int = 1200) -> pd.DataFrame:
    """Two noiseless, phase-shifted cycles: easy to learn, impossible to forecast by repeating the last value."""
    steps = np.arange(rows)
    return pd.DataFrame({"a": np.sin(2 * np.pi * steps / 12), "b": np.cos(2 * np.pi * steps / 7)})


def quiet_trainer(**overrides) -> L.Trainer:
    arguments = dict(logger=False, enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False)
    arguments.update(overrides)
    return L.Trainer(**arguments)


class CreatesAFileWhenUnpickled:
    """What a hostile checkpoint carries: unpickling it would call ``open(path, "w")``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (str(self.path), "w"))


def digests(*paths: Path) -> dict[Path, str]:
    """The SHA-256 of every file at or under ``paths``: compared before and after a command to prove it left them
    byte-identical."""
    files = [f for p in paths for f in ([p] if p.is_file() else sorted(p.rglob("*"))) if f.is_file()]
    return {f: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}


def assert_refused_in_one_line(code_or_callable, capsys, message: str = "") -> str:
    """A refusal as the user sees it: exit code 2, no traceback, and a last line of stderr that starts ``error: `` and
    contains ``message`` (or matches it as a regular expression). ``code_or_callable``: the exit code ``cli(…)``
    returned, or what to call (a tool's ``lambda: main(arguments)``), which must stop with SystemExit. The line."""
    if callable(code_or_callable):
        with pytest.raises(SystemExit) as stopped:
            code_or_callable()
        code_or_callable = stopped.value.code
    error = capsys.readouterr().err
    assert code_or_callable == 2, error[-2000:]
    assert "Traceback" not in error
    line = last_line(error)
    assert line.startswith("error: "), line
    assert message in line or re.search(message, line), line
    return line


def refusal_of(build, refused: type[Exception] = InputError) -> str:
    """A refusal as a class built in Python raises it: ``build()`` raises ``refused`` with a one-line message, which
    is returned. The command-line twin: ``assert_refused_in_one_line``."""
    with pytest.raises(refused) as raised:
        build()
    message = str(raised.value)
    assert "\n" not in message, message
    return message


def exit_code(main, arguments: list[str]) -> int:
    """The exit code with which a tool's ``main(arguments)`` stops."""
    with pytest.raises(SystemExit) as stopped:
        main(arguments)
    return stopped.value.code


def frame_of_row_numbers(rows: int = 200, n_features: int = 2) -> pd.DataFrame:
    """Every value is its row number (plus 1000 per channel), so windows show which rows they hold."""
    values = np.arange(rows, dtype=np.float64)[:, None] + np.arange(n_features)[None] * 1000
    frame = pd.DataFrame(values, columns=[f"c{i}" for i in range(n_features)])
    frame.insert(0, "time", pd.date_range("2020-01-01", periods=rows, freq="h"))
    return frame


COVARIATES = dict(n_past_covariates=2, n_future_covariates=3, static_cardinalities=[4, 2], n_static_reals=1)


def covariates_for(batch: int, context: int, horizon: int, dtype=torch.float64) -> dict:
    """Random covariates of a batch, of the sizes COVARIATES gives a network."""
    return {
        "past_covariates": torch.randn(batch, context, 2, dtype=dtype),
        "future_covariates": torch.randn(batch, context + horizon, 3, dtype=dtype),
        "static_categorical": torch.stack([torch.randint(0, 5, (batch,)), torch.randint(0, 3, (batch,))], dim=1),
        "static_real": torch.randn(batch, 1, dtype=dtype),
    }


def unroll_by_full_redecoding(model, src, steps):
    """A free-running forecast of ``steps`` steps that decodes the whole sequence again at each step, no cache."""
    encoded = model.encode(src)
    sequence = src[:, -1:]
    for _ in range(steps):
        sequence = torch.cat([sequence, model.decode(sequence, encoded)[:, -1:, :, 0]], dim=1)
    return sequence[:, 1:]


# The networks the contract (tests/model/test_network_contract.py) and the help test of their options
# (tests/cli/test_domains.py) check: add yours here.
NETWORKS = {  # a name → the class and the arguments of a small instance, besides the sizes the data links
    "transformer": (
        ForecastTransformer,
        dict(d_model=16, nhead=2, num_encoder_layers=1, num_decoder_layers=2, dim_feedforward=32, dropout=0.0),
    ),
    "gru": (GRUForecaster, dict(hidden_size=16, num_layers=2)),
}


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
        assert "names model_utils.Net (at " in error, command
        assert "outside this project; nothing was imported: pass " in error, command
        assert not (folder / "IMPORTED").exists(), command
    assert "model_utils" not in sys.modules


class Terminate(L.Callback):
    """Sends this process ``signal_name`` once (or ``times`` in a row: Ctrl-C pressed twice), as a scheduler pre-empting
    the job would (SIGTERM) or Ctrl-C in the terminal (SIGINT), at ``where`` in the run, at optimizer step ``step``:
    ``batch_end`` right after the step, ``forward`` or ``backward`` inside the next batch's, ``micro_batch`` between
    the first two micro-batches of the next step (with ``accumulate_grad_batches`` > 1), ``validation`` inside the
    validation that follows the step."""

    def __init__(self, step: int, signal_name: str = "SIGTERM", where: str = "batch_end", times: int = 1) -> None:
        self.step, self.signal, self.where, self.times, self.sent = step, getattr(signal, signal_name), where, times, 0

    def _send(self, *args) -> None:
        while self.sent < self.times:
            self.sent += 1
            os.kill(os.getpid(), self.signal)

    def _here(self, trainer, where: str) -> bool:
        return self.where == where and trainer.global_step == self.step and not trainer.sanity_checking

    def on_train_batch_start(self, trainer, pl_module, *args):
        if self._here(trainer, "forward"):  # inside the first layer the batch's forward calls

            def inside_a_layer(*hook_arguments) -> None:  # a pre-hook returning None leaves the layer's input as is
                self._send()
                handle.remove()

            handle = torch.nn.modules.module.register_module_forward_pre_hook(inside_a_layer)

    def on_before_backward(self, trainer, pl_module, loss):
        if self._here(trainer, "backward"):
            loss.register_hook(lambda gradient: self._send())

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_index):
        if self._here(trainer, "batch_end") or (
            self._here(trainer, "micro_batch") and (batch_index + 1) % trainer.accumulate_grad_batches
        ):
            self._send()

    def on_validation_batch_start(self, trainer, *args):
        if self._here(trainer, "validation"):
            self._send()


def tampered(source: Path, folder: Path, change: Callable[[dict], object], name: str = "tampered") -> Path:
    """A copy of the checkpoint at ``source`` in ``folder``, changed by ``change``."""
    checkpoint = torch.load(source, weights_only=False)
    change(checkpoint)
    path = folder / f"{name}.ckpt"
    torch.save(checkpoint, path)
    return path


class ScriptedValidation(L.LightningModule):
    """One weight trained on ten batches an epoch; the n-th validation logs ``losses[n]`` (the last one thereafter) as
    ``val/loss``. With ``decay_share``: a ``WarmupStableDecay`` without warm-up, its decay that share of the steps
    before it; else SGD's constant rate."""

    def __init__(self, losses: list[float], decay_share: float | None = None) -> None:
        super().__init__()
        self.weight, self.losses, self.checks = torch.nn.Parameter(torch.zeros(())), losses, 0
        self.decay_share = decay_share

    def training_step(self, batch, batch_index):
        return (self.weight - batch.sum()) ** 2

    def validation_step(self, batch, batch_index):
        pass

    def on_validation_epoch_end(self):
        self.log("val/loss", self.losses[min(self.checks, len(self.losses) - 1)])
        self.checks += 1

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.01)
        if self.decay_share is None:
            return optimizer
        scheduler = WarmupStableDecay(optimizer, warmup_steps=0, decay_share=self.decay_share)
        scheduler.set_run_steps(self.trainer.estimated_stepping_batches)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step"}}

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.ones(10, 1), batch_size=1)

    def val_dataloader(self):
        return torch.utils.data.DataLoader(torch.ones(1, 1), batch_size=1)
