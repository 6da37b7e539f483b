"""Benchmark: what the key/value cache and the training regimes cost in time and memory.

    python -m project.bench                       # CPU, the README's tables
    python -m project.bench --precision 16-mixed  # on a GPU, with torch.cuda.max_memory_allocated too

Training: one optimizer step per regime (forward, loss, backward, AdamW), median over ``--repeats`` steps after a
warm-up, and the bytes autograd saves for backward (each storage once, parameters excluded): a deterministic
memory measure that is the same on every machine. Inference: ``generate`` with the cache against re-decoding the
whole prefix at every step. Results are printed and saved as CSV and Markdown under ``--output``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import platform
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from project.model.transformer import ForecastTransformer
from project.training import regimes
from project.training.memory import SavedTensorsMeter
from project.training.naive import naive_free_running, naive_generate

N_FEATURES, CONTEXT_LENGTH = 5, 12
NAIVE = "naive loop (as posted)"
REGIMES = ("teacher forcing", NAIVE, "free-running detach", "free-running BPTT", "scheduled sampling")


@dataclass
class TrainingRow:
    horizon: int
    regime: str
    step_ms: float | None
    time_ratio: float | None
    saved_mb: float | None
    memory_ratio: float | None
    peak_mb: float | None
    note: str = ""


@dataclass
class InferenceRow:
    horizon: int
    cached_ms: float
    naive_ms: float
    speedup: float


def forecast_for(regime: str, model: ForecastTransformer, src: Tensor, target: Tensor) -> Tensor:
    if regime == NAIVE:
        return naive_free_running(model, src, target, feedback="partial")
    memory, start = model.encode(src), model.start_of(src)
    if regime == "teacher forcing":
        return regimes.teacher_forced(model, memory, start, target)
    if regime == "free-running detach":
        return regimes.free_running_detached(model, memory, start, target.shape[1])
    if regime == "free-running BPTT":
        return regimes.free_running_bptt(model, memory, start, target.shape[1])
    return regimes.scheduled_sampling(model, memory, start, target, teacher_forcing_probability=0.5)


def median_ms(function: Callable[[], object], repeats: int, device: torch.device, warm_up: bool = True) -> float:
    if warm_up:
        function()  # allocator, kernels, caches
    times = []
    for _ in range(repeats):
        _synchronize(device)
        start = time.perf_counter()
        function()
        _synchronize(device)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def benchmark_training(args: argparse.Namespace, device: torch.device) -> list[TrainingRow]:
    model = _model(args, device).train()
    rows: list[TrainingRow] = []
    naive_cost: tuple[int, float, float] | None = None  # (horizon, step seconds, saved bytes) of the last run
    for horizon in args.horizons:
        src = torch.randn(args.batch_size, CONTEXT_LENGTH, N_FEATURES, device=device)
        target = torch.randn(args.batch_size, horizon, N_FEATURES, device=device)
        measured = []
        for regime in REGIMES:
            skip = _naive_skip_reason(naive_cost, horizon, args) if regime == NAIVE and naive_cost else ""
            if skip:
                row = TrainingRow(horizon, regime, None, None, None, None, None, note=skip)
            else:
                try:
                    row = _measure_training_step(regime, model, src, target, args, device)
                except torch.OutOfMemoryError:
                    row = TrainingRow(horizon, regime, None, None, None, None, None, note="out of memory")
            if regime == NAIVE and row.step_ms is not None:
                naive_cost = (horizon, row.step_ms / 1000, row.saved_mb * 2**20)
            measured.append(row)
        teacher = measured[0]
        for row in measured:
            if row.step_ms is not None and teacher.step_ms:
                row.time_ratio = row.step_ms / teacher.step_ms
                row.memory_ratio = row.saved_mb / teacher.saved_mb
            print(_training_line(row), flush=True)
        rows += measured
    return rows


def _measure_training_step(regime, model, src, target, args, device) -> TrainingRow:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "16-mixed")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with _autocast(args.precision, device):
            loss = (forecast_for(regime, model, src, target).float() - target).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    with SavedTensorsMeter(exclude=model.parameters()) as meter, _autocast(args.precision, device):
        forecast = forecast_for(regime, model, src, target)
    forecast.float().sum().backward()
    model.zero_grad(set_to_none=True)
    peak = _peak_bytes(step, device)
    # The naive loop is slow enough that one timed step suffices; the measurement above was its warm-up.
    step_ms = median_ms(step, 1, device, warm_up=False) if regime == NAIVE else median_ms(step, args.repeats, device)
    return TrainingRow(
        target.shape[1], regime, step_ms, None, meter.bytes / 2**20, None, None if peak is None else peak / 2**20
    )


def benchmark_inference(args: argparse.Namespace, device: torch.device) -> list[InferenceRow]:
    model = _model(args, device).eval()
    src = torch.randn(args.batch_size, CONTEXT_LENGTH, N_FEATURES, device=device)
    rows = []
    with torch.no_grad(), _autocast(args.precision, device):
        for horizon in args.horizons:
            cached = median_ms(lambda h=horizon: model.generate(src, h), args.repeats, device)
            naive = median_ms(lambda h=horizon: naive_generate(model, src, h), args.repeats, device)
            rows.append(InferenceRow(horizon, cached, naive, naive / cached))
            print(f"inference  horizon {horizon:>3}: cached {cached:9.1f} ms, naive {naive:9.1f} ms", flush=True)
    return rows


def _model(args: argparse.Namespace, device: torch.device) -> ForecastTransformer:
    torch.manual_seed(0)
    model = ForecastTransformer(
        n_features=N_FEATURES, d_model=args.d_model, max_length=max(*args.horizons, CONTEXT_LENGTH)
    )
    return model.to(device)


def _peak_bytes(step: Callable[[], None], device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    step()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - baseline


def _naive_skip_reason(cost: tuple[int, float, float], horizon: int, args: argparse.Namespace) -> str:
    """The naive loop's time and memory grow with the square of the horizon: extrapolate before running it."""
    measured_horizon, seconds, saved = cost
    growth = (horizon / measured_horizon) ** 2
    if seconds * growth > args.naive_max_seconds:
        limit = f"--naive-max-seconds {args.naive_max_seconds:g}"
        return f"skipped: ~{seconds * growth:.0f} s per step expected (limit {limit})"
    if saved * growth > args.naive_max_gb * 2**30:
        return f"skipped: ~{saved * growth / 2**30:.0f} GB expected (limit --naive-max-gb {args.naive_max_gb:g})"
    return ""


def _autocast(precision: str, device: torch.device):
    if precision == "32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16 if precision == "bf16-mixed" else torch.float16)


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _training_line(row: TrainingRow) -> str:
    if row.step_ms is None:
        return f"training   horizon {row.horizon:>3} {row.regime:<24} {row.note}"
    return (
        f"training   horizon {row.horizon:>3} {row.regime:<24} {row.step_ms:9.1f} ms ({row.time_ratio:5.2f}x)"
        f" {row.saved_mb:9.1f} MB saved ({row.memory_ratio:5.2f}x)"
    )


def _format(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}{unit}"


def markdown(training: list[TrainingRow], inference: list[InferenceRow], header: str) -> str:
    gpu = any(row.peak_mb is not None for row in training)
    lines = [
        header,
        "",
        "| horizon | regime | step time | vs teacher forcing | saved for backward | vs teacher forcing |",
    ]
    lines[-1] += " peak GPU memory |" if gpu else ""
    lines.append("|---:|---|---:|---:|---:|---:|" + ("---:|" if gpu else ""))
    for row in training:
        cells = [
            str(row.horizon),
            row.regime,
            row.note or _format(row.step_ms, " ms"),
            _format(row.time_ratio, "x", 2),
            _format(row.saved_mb, " MB"),
            _format(row.memory_ratio, "x", 2),
        ] + ([_format(row.peak_mb, " MB")] if gpu else [])
        lines.append("| " + " | ".join(cells) + " |")
    if inference:
        lines += [
            "",
            "| horizon | `generate` with cache | re-decoding the prefix | speed-up |",
            "|---:|---:|---:|---:|",
        ]
        lines += [
            f"| {r.horizon} | {r.cached_ms:,.1f} ms | {r.naive_ms:,.1f} ms | {r.speedup:.1f}x |" for r in inference
        ]
    return "\n".join(lines) + "\n"


def _write_csv(path: Path, rows: list) -> None:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m project.bench", description=__doc__.split("\n")[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=[12, 48, 96], help="forecast horizons T")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=128, help="model width (3+3 layers, 8 heads, ff 512)")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per measurement (median)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, … (auto: cuda when available)")
    parser.add_argument("--precision", choices=["32", "bf16-mixed", "16-mixed"], default="32")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    parser.add_argument(
        "--naive-max-seconds", type=float, default=60.0, help="skip naive steps expected to take longer"
    )
    parser.add_argument("--naive-max-gb", type=float, default=8.0, help="skip naive steps expected to save more")
    parser.add_argument(
        "--gpu-memory-gb", type=float, default=None, help="cap this process's GPU memory, e.g. 4 to emulate a 4 GB card"
    )
    parser.add_argument("--skip-inference", action="store_true")
    parser.add_argument("--output", type=Path, default=Path("bench_results"), help="folder for CSV and Markdown")
    args = parser.parse_args(argv)
    for name in ("horizons", "batch_size", "d_model", "repeats"):
        values = getattr(args, name) if name == "horizons" else [getattr(args, name)]
        if any(v <= 0 for v in values):
            parser.error(f"--{name.replace('_', '-')} must be positive; got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_arguments(argv)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.gpu_memory_gb and device.type == "cuda":
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.gpu_memory_gb * 2**30 / total), device)
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{platform.machine()} CPU"
    header = (
        f"batch {args.batch_size}, d_model {args.d_model}, 3+3 layers, context {CONTEXT_LENGTH}, {N_FEATURES} "
        f"features, precision {args.precision}, {hardware} ({torch.get_num_threads()} threads), "
        f"torch {torch.__version__}"
    )
    print(header, flush=True)
    training = benchmark_training(args, device)
    inference = [] if args.skip_inference else benchmark_inference(args, device)
    args.output.mkdir(parents=True, exist_ok=True)
    _write_csv(args.output / "training.csv", training)
    if inference:
        _write_csv(args.output / "inference.csv", inference)
    table = markdown(training, inference, f"`python -m project.bench` — {header}")
    (args.output / "bench.md").write_text(table)
    print("\n" + table)


if __name__ == "__main__":
    main()
