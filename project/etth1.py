"""Reproduce the README's ETTh1 results table end to end: baselines, then every training regime.

    python -m project.etth1 --data ../shared/data/ETTh1.csv

ETTh1 (Zhou et al. 2021, CC BY-ND 4.0) is not part of this repository; pass the path to your copy. The protocol is
the long-horizon benchmarks' (configs/etth1.yaml): look-back 336, horizon 96, 12/4/4-month split, scaling fitted
on the training months, MSE/MAE on scaled values over every test window (stride 1). Each regime is trained with
the same model and budget by ``python -m project.cli fit``, which then tests the best checkpoint (by validation
loss); the baselines are measured on the same windows. The table is printed and written to ``--output``.
"""

from __future__ import annotations

import argparse
import platform
import subprocess
import sys
import time
from pathlib import Path

import torch
import yaml
from torch.utils.data import DataLoader

from project.data import WindowDataModule
from project.runs import find_runs, read_scalars
from project.training.baselines import LinearBaseline, repeat_last

BASE_CONFIG, CONFIG = Path("configs/base.yaml"), Path("configs/etth1.yaml")  # etth1.yaml is a preset on base
REGIMES = {  # table row → (run name, CLI arguments)
    "teacher forcing": ("teacher_forcing", ["--model.training_mode=teacher_forcing"]),
    "free-running (detach)": ("free_running_detach", ["--model.training_mode=free_running", "--model.feedback=detach"]),
    "free-running (BPTT)": ("free_running_bptt", ["--model.training_mode=free_running", "--model.feedback=bptt"]),
    "scheduled sampling": ("scheduled_sampling", ["--model.training_mode=scheduled_sampling"]),
}
PUBLISHED = {  # multivariate ETTh1, horizon 96, as reported by the papers (MSE, MAE)
    "PatchTST/64 (Nie et al. 2023)": (0.370, 0.400),
    "DLinear (Zeng et al. 2023)": (0.375, 0.399),
    "FEDformer (Zhou et al. 2022)": (0.376, 0.419),
    "Autoformer (Wu et al. 2021)": (0.449, 0.459),
    "Informer (Zhou et al. 2021)": (0.865, 0.713),
    "repeat-last": (1.295, 0.713),
}


def datamodule(data: Path) -> WindowDataModule:
    # The same data settings as the training runs: base.yaml's, overridden by the ETTh1 preset's.
    base, preset = (yaml.safe_load(path.read_text())["data"] for path in (BASE_CONFIG, CONFIG))
    settings = {**base, **preset, "source": str(data)}
    datamodule = WindowDataModule(**settings)
    datamodule.setup("test")
    return datamodule


def measure_baselines(data: Path) -> list[dict]:
    windows = datamodule(data)
    test = windows.split("test", windows.eval_stride)
    baselines = {  # name → how to get the forecast function (fitting, when there is any, is timed too)
        "repeat-last (measured)": lambda: lambda context: repeat_last(context, windows.horizon),
        "least-squares linear map, shared across channels (measured)": lambda: LinearBaseline().fit(
            windows.split("train")
        ),
    }
    rows = []
    for name, fitted in baselines.items():
        started = time.perf_counter()
        mse, mae = errors(fitted(), test)
        rows.append(_row(name, mse, mae, time.perf_counter() - started))
    return rows


def errors(forecast, windows) -> tuple[float, float]:
    """Mean squared and mean absolute error of ``forecast(context)`` over every window."""
    squared = absolute = count = 0.0
    for context, target in DataLoader(windows, batch_size=512):
        error = forecast(context).float() - target
        squared, absolute, count = squared + error.pow(2).sum(), absolute + error.abs().sum(), count + error.numel()
    return float(squared / count), float(absolute / count)


def train_and_test(regime: str, data: Path, logs: Path, extra: list[str]) -> dict:
    name, arguments = REGIMES[regime]
    logger = [f"--trainer.logger.init_args.save_dir={logs}", f"--trainer.logger.init_args.name={name}"]
    configs = ["--config", str(BASE_CONFIG), "--config", str(CONFIG)]
    common = [*configs, f"--data.source={data}", *arguments, *logger, *extra]
    start = time.perf_counter()
    _cli("fit", *common)  # trains, then tests the best checkpoint (test_after_fit)
    seconds = time.perf_counter() - start
    run = find_runs(logs / name)[-1]
    (best,) = (run / "checkpoints").glob("best-*.ckpt")
    tested = read_scalars(run)
    epochs = int(torch.load(best, map_location="cpu", weights_only=False)["epoch"]) + 1
    return _row(regime, tested["test/mse"].iloc[-1], tested["test/mae"].iloc[-1], seconds, best_epoch=epochs)


def _cli(*arguments: str) -> None:
    command = [sys.executable, "-m", "project.cli", *arguments]
    print("$", " ".join(command[1:]), flush=True)
    subprocess.run(command, check=True)


def _row(name: str, mse, mae, seconds: float | None, best_epoch: int | None = None) -> dict:
    return {"model": name, "mse": float(mse), "mae": float(mae), "seconds": seconds, "best_epoch": best_epoch}


def markdown(rows: list[dict], hardware: str) -> str:
    lines = [
        f"ETTh1, horizon 96, look-back 336, test MSE/MAE on scaled values; {hardware}.",
        "",
        "| model | test MSE | test MAE | wall-clock (train + test) |",
        "|---|---:|---:|---:|",
    ]
    for row in rows:
        seconds = row["seconds"]
        clock = "published" if seconds is None else f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"
        if row.get("best_epoch"):
            clock += f" (best epoch {row['best_epoch']})"
        lines.append(f"| {row['model']} | {row['mse']:.3f} | {row['mae']:.3f} | {clock} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.etth1", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("../shared/data/ETTh1.csv"), help="path to ETTh1.csv")
    parser.add_argument("--regimes", nargs="*", default=list(REGIMES), choices=list(REGIMES), metavar="REGIME")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where the runs are logged")
    parser.add_argument("--output", type=Path, default=Path("results/etth1.md"), help="Markdown table to write")
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    if not args.data.is_file():
        parser.error(f"{args.data}: ETTh1.csv not found; download it from https://github.com/zhouhaoyi/ETDataset")
    rows = measure_baselines(args.data)
    rows += [train_and_test(regime, args.data, args.logs, extra) for regime in args.regimes]
    rows += [_row(f"{name} (published)", mse, mae, None) for name, (mse, mae) in PUBLISHED.items()]
    hardware = (
        f"{platform.machine()} CPU, {torch.get_num_threads()} threads"
        if not torch.cuda.is_available()
        else torch.cuda.get_device_name()
    )
    table = markdown(rows, hardware)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(table)
    print(table)


if __name__ == "__main__":
    main()
