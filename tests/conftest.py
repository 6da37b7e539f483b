import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from filelock import FileLock

from tests.helpers import (
    BASE,
    SMALL_MODEL,
    CreatesAFileWhenUnpickled,
    cli,
    config,
    frame_of_row_numbers,
    only_run,
    quick_fit_arguments,
)


def pytest_configure(config):
    """Ctrl-C reaches the CLI as in a terminal, however the suite was started. A shell starts a background job
    (``make test-slow &``, ``nohup``) with SIGINT ignored, and an ignored signal is inherited through ``exec`` by
    every process started below it, so the tests that stop a run with SIGINT would see nothing happen; a handler is
    not inherited, so with Python's own here each CLI process starts with Ctrl-C at its default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


TOOLS = Path(__file__).parent / "tools"


@pytest.hookimpl(tryfirst=True)  # before pytest's -m deselects by the marks added here
def pytest_collection_modifyitems(config, items):
    """The tiers (the Makefile's ``make test`` and ``make test-slow``): the optional tools' tests are marked ``tools``,
    and of a grid marked ``fast_cases(n)`` the cases after the n-th are marked ``slow``. Every case runs in CI, the
    first tier keeps a few of each refusal grid: the path every case of it takes."""
    cases_seen = Counter()
    for item in items:
        if TOOLS in item.path.parents:
            item.add_marker(pytest.mark.tools)
        if (marker := item.get_closest_marker("fast_cases")) is not None:
            grid = (item.path, item.originalname)
            if cases_seen[grid] >= marker.args[0]:
                item.add_marker(pytest.mark.slow)
            cases_seen[grid] += 1


@pytest.fixture(scope="session")
def data_dir(request) -> Path:
    """The folder of public datasets, or a skip when none was given."""
    folder = request.config.getoption("--data-dir")
    if not folder or not Path(folder).is_dir():
        pytest.skip("real-data test: pass --data-dir or set FORECAST_DATA_DIR to a folder with ETTh1.csv")
    return Path(folder)


@pytest.fixture
def etth1(data_dir) -> Path:
    path = data_dir / "ETTh1.csv"
    if not path.is_file():
        pytest.skip(f"{path} not found")
    return path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


@pytest.fixture(autouse=True)
def _cache_in_tmp(tmp_path, monkeypatch):
    """Data caches and default log folders of in-process runs go to the test's own folder."""
    monkeypatch.chdir(tmp_path)


def made_once(tmp_path_factory, name: str, make: Callable[[Path], Path]) -> Path:
    """What ``make(folder)`` returns, made once for the whole run: by the first of pytest-xdist's workers to ask,
    under a lock, while the others wait and then read the path it wrote down. The runs below are read, never
    changed ("leave it as found"), so every worker can share one."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's temporary folder, shared by its workers
    folder, made = root / name, root / f"{name}.made"
    with FileLock(f"{folder}.lock"):
        if not made.exists():
            folder.mkdir()
            made.write_text(str(make(folder)))
    return Path(made.read_text())


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory) -> Path:
    """One short CLI fit on the embedded data, tested after training: the run folder that the CLI and bad-input
    tests read checkpoints from. Leave it as found."""

    def fit(log_dir: Path) -> Path:
        assert cli("fit", "--config", BASE, *quick_fit_arguments(log_dir, steps=4)) == 0
        return only_run(log_dir)

    return made_once(tmp_path_factory, "trained_run", fit)


@pytest.fixture(scope="session")
def panel_run(tmp_path_factory) -> Path:
    """One short CLI fit of configs/panel.yaml's model (past, future and static covariates, per-window
    normalisation), its test period three horizons (42 days) of every series: the checkpoint that the predict,
    export and backtest tests share. Leave it as found."""
    return made_once(tmp_path_factory, "panel_run", fit_panel)


def fit_panel(log_dir: Path) -> Path:
    arguments = [
        *SMALL_MODEL,
        "--data.split=LastRows",
        "--data.split.val_size=14",
        "--data.split.test_size=42",
        *quick_fit_arguments(log_dir, steps=3),
    ]
    assert cli("fit", "--config", BASE, "--config", config("panel.yaml"), *arguments, "--test_after_fit=false") == 0
    return only_run(log_dir, "synthetic_panel") / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def quantile_panel_run(tmp_path_factory) -> Path:
    """The same panel model with a quantile head and sampled feedback: the checkpoint of the tests of sample paths,
    quantiles and bands (predict, figures). Leave it as found."""
    return made_once(tmp_path_factory, "quantile_panel_run", fit_quantile_panel)


def fit_quantile_panel(log_dir: Path) -> Path:
    arguments = [
        *SMALL_MODEL,
        *quick_fit_arguments(log_dir),
        "--model.network.init_args.distribution=Quantiles",
        "--model.num_samples=20",
        "--model.regime.feedback=sample",
    ]
    assert cli("fit", "--config", BASE, "--config", config("panel.yaml"), *arguments) == 0
    return only_run(log_dir, "synthetic_panel") / "checkpoints" / "last.ckpt"


@pytest.fixture(scope="session")
def user_run(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A short fit on a user's CSV named ``forecasts.csv`` (a name backtest writes), logged beside it: the folder,
    the CSV and the run's checkpoint. Shared by the guard tests of the CLI and the tools; leave the folder as found."""

    def fit(folder: Path) -> Path:
        source = folder / "forecasts.csv"
        frame_of_row_numbers(400).to_csv(source, index=False)
        arguments = [f"--data.source={source}", "--data.time_column=time", *SMALL_MODEL, *quick_fit_arguments(folder)]
        assert cli("fit", "--config", BASE, *arguments, "--test_after_fit=false") == 0
        return only_run(folder, "forecasts") / "checkpoints" / "last.ckpt"

    checkpoint = made_once(tmp_path_factory, "user_run", fit)
    folder = checkpoint.parents[3]  # <folder>/forecasts/version_0/checkpoints/last.ckpt
    return folder, folder / "forecasts.csv", checkpoint


@pytest.fixture
def hostile_checkpoint(user_run, tmp_path) -> tuple[Path, Path]:
    """A copy of the user's checkpoint that would create ``marker`` when unpickled: the file and the marker."""
    marker = tmp_path / "marker"
    checkpoint = torch.load(user_run[2], weights_only=False)
    checkpoint["callbacks"] = CreatesAFileWhenUnpickled(marker)
    path = tmp_path / "hostile.ckpt"
    torch.save(checkpoint, path)
    return path, marker
