"""Benchmark: what the key/value cache and the training regimes cost in time and memory.

    python -m project.tools.bench                                   # CPU: training, inference and sampling tables
    python -m project.tools.bench --device cuda --precision 16-mixed   # on a GPU, with torch.cuda.max_memory_allocated
    python -m project.tools.bench --suite panel                     # a 10-million-row panel: memory and first batch
    python -m project.tools.bench --suite profile                   # where a 96-step rollout and BPTT spend their time

Every time is the median of ``--repeats`` calls after a warm-up, the naive loops' and re-decoding's too, so that
both sides of a ratio are measured alike. Training: one optimizer step per regime (forward, loss, backward,
AdamW), timed round-robin over the regimes (the posted loop after them, alone), and the bytes autograd saves for
backward (each storage once, parameters excluded): a deterministic memory measure that is the same on every
machine. Inference: ``generate`` with the cache against re-decoding the whole prefix at every step. Sampling: 100
sample paths per series, cached, against re-decoding the prefix of the same N·100 rows (what Hugging Face's
``TimeSeriesTransformer.generate`` does). Results are printed and saved as CSV and Markdown under ``--output``.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import gc
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor
from torch.utils import benchmark

from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically
from project.model.decoding import generate, rollout
from project.model.distributions import Distribution, Normal
from project.model.network import InputSizes
from project.model.transformer import ForecastTransformer
from project.tools.stamp import stamp
from project.training.regimes import REGIMES, RegimeOptions

N_FEATURES, CONTEXT_LENGTH = 5, 12
NAIVE = "naive_loop_as_posted"
GRAPHED = "free_running_detach_cuda_graph"  # on a GPU: the no-grad rollout replayed as a CUDA graph
TRAINING_ROWS = ("teacher_forcing", NAIVE, "free_running_detach", "free_running_bptt", "scheduled_sampling")


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
    naive_ms: float | None
    speedup: float | None
    cached_peak_mb: float | None = None
    naive_peak_mb: float | None = None
    graph_ms: float | None = None  # on a GPU: the cached rollout replayed as a CUDA graph
    note: str = ""


def forecast_for(regime: str, model: ForecastTransformer, src: Tensor, target: Tensor) -> Tensor:
    if regime == NAIVE:  # the tests' reference loop (tests/ is importable from the repository root)
        from tests.reference_loops import naive_free_running

        return naive_free_running(model, src, target, "partial")
    encoded, start = model.encode(src), model.start_of(src)
    options = RegimeOptions(teacher_forcing_probability=0.5, cuda_graph=regime == GRAPHED)
    return REGIMES[regime.removesuffix("_cuda_graph")].forecast(model, encoded, start, target, options)


def median_ms(function: Callable[[], object], repeats: int, warm_up: bool = True) -> float:
    """Median milliseconds of ``repeats`` single calls (after one untimed call), timed by torch.utils.benchmark's
    Timer, which synchronises CUDA around each."""
    if warm_up:
        function()  # allocator, kernels, caches
    timer = benchmark.Timer(stmt="function()", globals={"function": function})
    return 1000 * statistics.median(timer.timeit(1).median for _ in range(repeats))


def benchmark_training(args: argparse.Namespace, device: torch.device) -> list[TrainingRow]:
    model = _model(args, device).train()
    rows: list[TrainingRow] = []
    naive_cost: tuple[int, float, float] | None = None  # (horizon, step seconds, saved bytes) of the last run
    for horizon in args.horizons:
        src = torch.randn(args.batch_size, CONTEXT_LENGTH, N_FEATURES, device=device)
        target = torch.randn(args.batch_size, horizon, N_FEATURES, device=device)
        rows_here = TRAINING_ROWS + ((GRAPHED,) if device.type == "cuda" else ())
        measured, steps = {}, {}
        for regime in rows_here:
            if regime != NAIVE:
                measured[regime], steps[regime] = _training_step(regime, model, src, target, args, device)
        # Round-robin over the regimes, one step each per round: a drift in the machine's speed during the run (a
        # shared VM's neighbours) then weighs on every regime alike instead of on whichever was being timed.
        for regime, step_ms in _interleaved_median_ms(steps, args.repeats).items():
            measured[regime].step_ms = step_ms
        # The naive loop goes last: when it runs out of memory, nothing it held can crowd out the other rows.
        skip = _naive_skip_reason(naive_cost, horizon, args) if naive_cost else ""
        if skip:
            measured[NAIVE] = TrainingRow(horizon, NAIVE, None, None, None, None, None, note=skip)
        else:
            measured[NAIVE], naive_step = _training_step(NAIVE, model, src, target, args, device)
            if naive_step is not None:  # timed like the others: warmed up, the median of --repeats steps
                measured[NAIVE].step_ms = median_ms(naive_step, args.repeats, warm_up=False)
            if measured[NAIVE].step_ms is not None:
                naive_cost = (horizon, measured[NAIVE].step_ms / 1000, measured[NAIVE].saved_mb * 2**20)
        ordered = [measured[regime] for regime in rows_here]
        teacher = ordered[0]
        for row in ordered:
            if row.step_ms is not None and teacher.step_ms:
                row.time_ratio = row.step_ms / teacher.step_ms
                row.memory_ratio = row.saved_mb / teacher.saved_mb
            print(_training_line(row), flush=True)
        rows += ordered
    return rows


def _training_step(regime, model, src, target, args, device):
    """The regime's row with its saved bytes (and GPU peak) measured, and its optimizer step, warmed up, to time;
    None for the step when measuring ran out of memory."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(device.type, enabled=args.precision == "16-mixed")

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with _autocast(args.precision, device):
            loss = (forecast_for(regime, model, src, target)[..., 0].float() - target).pow(2).mean()
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()

    from tests.saved_tensors import SavedTensorsMeter  # the tests' meter, from the repository root

    horizon = target.shape[1]
    try:
        with SavedTensorsMeter(exclude=model.parameters()) as meter, _autocast(args.precision, device):
            forecast = forecast_for(regime, model, src, target)
        forecast.float().sum().backward()
        del forecast
        model.zero_grad(set_to_none=True)
        peak = _peak_bytes(step, device)
        step()  # warm-up: allocator, kernels, caches
    except torch.OutOfMemoryError:
        out_of_memory = True
    else:
        out_of_memory = False
    if out_of_memory:  # outside the except block, whose traceback holds the tensors
        model.zero_grad(set_to_none=True)
        _empty_cache(device)
        return TrainingRow(horizon, regime, None, None, None, None, None, note="out of memory"), None
    peak_mb = None if peak is None else peak / 2**20
    return TrainingRow(horizon, regime, None, None, meter.bytes / 2**20, None, peak_mb), step


def _interleaved_median_ms(steps: dict[str, Callable[[], None] | None], repeats: int) -> dict[str, float]:
    times: dict[str, list[float]] = {regime: [] for regime, step in steps.items() if step is not None}
    for _ in range(repeats):
        for regime in times:
            times[regime].append(median_ms(steps[regime], 1, warm_up=False))
    return {regime: statistics.median(values) for regime, values in times.items()}


def benchmark_inference(args: argparse.Namespace, device: torch.device, samples: int | None) -> list[InferenceRow]:
    """``generate`` with the cache against re-decoding the prefix every step: one path per series, or ``samples``
    sample paths per series (N·samples rows)."""
    from tests.reference_loops import naive_generate  # the tests' reference loop, from the repository root

    model = _model(args, device, Normal() if samples else None).eval()
    src = torch.randn(args.batch_size, CONTEXT_LENGTH, N_FEATURES, device=device)
    rows, naive_seconds = [], None
    label = "sampling " if samples else "inference"
    with torch.inference_mode(), _autocast(args.precision, device):
        for horizon in args.horizons:
            cached = lambda h=horizon: generate(model, src, h, num_samples=samples)  # noqa: E731
            naive = lambda h=horizon: naive_generate(model, src, h, num_samples=samples)  # noqa: E731
            cached_ms = median_ms(cached, args.repeats)
            cached_peak = _peak_bytes(cached, device)
            row = InferenceRow(horizon, cached_ms, None, None, _megabytes(cached_peak))
            if device.type == "cuda":
                graphed = lambda h=horizon: generate(model, src, h, num_samples=samples, cuda_graph=True)  # noqa: E731
                row.graph_ms = median_ms(graphed, args.repeats)
            expected = naive_seconds and naive_seconds[1] * (horizon / naive_seconds[0]) ** 2
            if expected and expected > args.naive_max_seconds:
                row.note = f"skipped: ~{expected:.0f} s expected (limit --naive-max-seconds {args.naive_max_seconds:g})"
            else:
                try:
                    row.naive_peak_mb = _megabytes(_peak_bytes(naive, device))
                    row.naive_ms = median_ms(naive, args.repeats)  # as the cached side: warm-up, median
                    row.speedup = row.naive_ms / cached_ms
                    naive_seconds = (horizon, row.naive_ms / 1000)
                except torch.OutOfMemoryError:
                    row.note = "out of memory"
                if row.note == "out of memory":
                    _empty_cache(device)
            rows.append(row)
            naive_text = row.note or f"naive {row.naive_ms:9.1f} ms ({row.speedup:.1f}x)"
            graph_text = "" if row.graph_ms is None else f", CUDA graph {row.graph_ms:9.1f} ms"
            print(f"{label}  horizon {horizon:>3}: cached {cached_ms:9.1f} ms{graph_text}, {naive_text}", flush=True)
    return rows


def _model(
    args: argparse.Namespace, device: torch.device, distribution: Distribution | None = None
) -> ForecastTransformer:
    torch.manual_seed(0)
    model = ForecastTransformer(
        InputSizes(n_targets=N_FEATURES),
        d_model=args.d_model,
        max_length=max(*args.horizons, CONTEXT_LENGTH),
        distribution=distribution,
    )
    return model.to(device)


def _peak_bytes(function: Callable[[], object], device: torch.device) -> int | None:
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    baseline = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    function()
    torch.cuda.synchronize(device)
    return torch.cuda.max_memory_allocated(device) - baseline


def _megabytes(value: int | None) -> float | None:
    return None if value is None else value / 2**20


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


def _empty_cache(device: torch.device) -> None:
    if device.type == "cuda":
        gc.collect()  # the failed attempt's graph may sit in reference cycles
        torch.cuda.empty_cache()


def _training_line(row: TrainingRow) -> str:
    if row.step_ms is None:
        return f"training   horizon {row.horizon:>3} {row.regime:<24} {row.note}"
    return (
        f"training   horizon {row.horizon:>3} {row.regime:<24} {row.step_ms:9.1f} ms ({row.time_ratio:5.2f}x)"
        f" {row.saved_mb:9.1f} MiB saved ({row.memory_ratio:5.2f}x)"
    )


def _format(value: float | None, unit: str = "", digits: int = 1) -> str:
    return "–" if value is None else f"{value:,.{digits}f}{unit}"


def markdown(
    training: list[TrainingRow], inference: list[InferenceRow], sampling: list[InferenceRow], header: str
) -> str:
    gpu = any(row.peak_mb is not None for row in training) or any(r.cached_peak_mb is not None for r in inference)
    lines = [header, ""]
    if training:
        lines.append("| horizon | regime | step time | vs teacher forcing | saved for backward | vs teacher forcing |")
        lines[-1] += " peak GPU memory |" if gpu else ""
        lines.append("|---:|---|---:|---:|---:|---:|" + ("---:|" if gpu else ""))
        for row in training:
            cells = [
                str(row.horizon),
                f"`{row.regime}`",
                row.note or _format(row.step_ms, " ms"),
                _format(row.time_ratio, "x", 2),
                _format(row.saved_mb, " MiB"),
                _format(row.memory_ratio, "x", 2),
            ] + ([_format(row.peak_mb, " MiB")] if gpu else [])
            lines.append("| " + " | ".join(cells) + " |")
    for rows, title in ((inference, "`generate`, one path"), (sampling, "`generate(num_samples=100)`")):
        if not rows:
            continue
        head = f"| horizon | {title} with cache | re-decoding the prefix | speed-up |"
        head += " cache, as a CUDA graph | peak GPU memory (cache / re-decoding) |" if gpu else ""
        lines += ["", head, "|---:|---:|---:|---:|" + ("---:|---:|" if gpu else "")]
        for r in rows:
            cells = [str(r.horizon), _format(r.cached_ms, " ms"), r.note or _format(r.naive_ms, " ms")]
            cells.append(_format(r.speedup, "x"))
            if gpu:
                cells.append(_format(r.graph_ms, " ms"))
                cells.append(f"{_format(r.cached_peak_mb, ' MiB')} / {_format(r.naive_peak_mb, ' MiB')}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# -- A large panel: memory and time to the first batch -------------------------------------------------------------


def benchmark_panel(args: argparse.Namespace) -> str:
    """Write a panel of ``--panel-rows`` rows (8 value columns, ``--panel-series`` series) as Parquet, build its
    memory-mapped cache once, then, in a fresh process, open it and read batches with two workers, reporting the
    peak resident memory above the process's baseline against the size of the matrix, and the time to the first
    batch."""
    import numpy as np
    import pandas as pd

    # The Parquet file and its cache are as large as the panel: removed with the temporary folder.
    with tempfile.TemporaryDirectory(prefix="panel-bench-") as temporary:
        folder = Path(temporary)
        rows, series = args.panel_rows, args.panel_series
        rng = np.random.default_rng(0)
        lengths = rng.integers(int(0.5 * rows / series), int(1.5 * rows / series), series)
        lengths = np.maximum(lengths * rows // lengths.sum(), 400)
        frame = pd.DataFrame(rng.standard_normal((int(lengths.sum()), 8)).astype(np.float32), columns=list("abcdefgh"))
        frame.insert(0, "series", np.repeat(np.arange(series), lengths))
        path = folder / "panel.parquet"
        write_atomically(path, lambda temporary, table=frame: table.to_parquet(temporary))
        matrix_mb = frame[list("abcdefgh")].to_numpy().nbytes / 2**20
        del frame
        settings = dict(
            id_columns=["series"],
            target_columns=["a", "b"],
            past_covariates=["c", "d", "e"],
            future_covariates=["f", "g", "h"],
            context_length=96,
            horizon=24,
            batch_size=256,
            cache_dir=str(folder / "cache"),
        )
        started = time.perf_counter()
        _panel_child(path, settings, build_only=True)
        build_seconds = time.perf_counter() - started
        measure = f"from project.tools.bench import _panel_child; _panel_child({str(path)!r}, {settings!r})"
        child = subprocess.run(
            [sys.executable, "-c", measure],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONWARNINGS": "ignore"},
        )
        if child.returncode != 0:  # its last line is the error; the table would have no measurement
            last = (child.stderr.strip().splitlines() or ["no output"])[-1]
            raise InputError(f"the panel suite's measuring process failed (exit status {child.returncode}): {last}")
        measured = dict(line.split("=", 1) for line in child.stdout.split() if "=" in line)
    peak_mb = float(measured["peak_mb"])
    return (
        "\n".join(
            [
                f"`python -m project.tools.bench --suite panel`: {int(lengths.sum()):,} rows × 8 columns, "
                f"{series:,} series, float32 matrix {matrix_mb:,.0f} MiB; {platform.machine()} CPU",
                "",
                "| step | result |",
                "|---|---:|",
                f"| read the Parquet file, check it, write the memory-mapped cache (once) | {build_seconds:.1f} s |",
                f"| open the cache, serve the first training batch (2 workers) | {float(measured['first_s']):.2f} s |",
                f"| read {measured['batches']} batches of 256 windows | {float(measured['read_s']):.1f} s |",
                f"| peak memory above the start (PSS of process and 2 workers) | {peak_mb:,.0f} MiB = "
                f"{peak_mb / matrix_mb:.2f}× the matrix |",
            ]
        )
        + "\n"
    )


def _panel_child(path: str, settings: dict, build_only: bool = False, batches: int = 200) -> None:
    """In a fresh process: open the panel's cache and read batches with two workers; print the peak memory above
    the starting point (proportional set size of this process and its workers: pages they share, such as the
    memory-mapped matrix, counted once) and the times."""
    from project.data import WindowDataModule

    datamodule = WindowDataModule(path, num_workers=0 if build_only else 2, **settings)
    if build_only:
        return
    del datamodule
    meter = _PeakMemory()
    started = time.perf_counter()
    datamodule = WindowDataModule(path, num_workers=2, **settings)
    datamodule.setup("fit")
    loader = datamodule.train_dataloader()
    iterator = iter(loader)
    next(iterator)
    first = time.perf_counter() - started
    batches = min(batches, len(loader))
    for _ in range(batches - 1):
        next(iterator)
    read = time.perf_counter() - started - first
    peak = meter.stop()
    print(f"peak_mb={peak:.1f} first_s={first:.3f} read_s={read:.2f} batches={batches}")


class _PeakMemory:
    """Samples the proportional set size (Linux /proc) of this process and its children every 20 ms."""

    def __init__(self) -> None:
        import threading

        self.baseline, self.peak = self._current(), 0.0
        self._running = True
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def stop(self) -> float:
        self._running = False
        self._thread.join()
        return self.peak - self.baseline

    def _sample(self) -> None:
        while self._running:
            self.peak = max(self.peak, self._current())
            time.sleep(0.02)

    @staticmethod
    def _current() -> float:
        pids = [os.getpid()]
        with contextlib.suppress(OSError):
            pids += [int(p) for p in Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()]
        total = 0
        for pid in pids:
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        return total / 1024  # kibibytes → MiB


# -- Where the rollout spends its time ---------------------------------------------------------------------------


def profile_rollouts(args: argparse.Namespace, device: torch.device) -> str:
    """The top operators, by self time, of a 96-step no-grad cached rollout (what ``detach`` and scheduled sampling
    add to teacher forcing) and of a 96-step differentiable unroll with its backward (BPTT); batch ``--batch-size``,
    in train mode as training runs them."""
    from torch.profiler import ProfilerActivity, profile

    model = _model(args, device).train()
    src = torch.randn(args.batch_size, CONTEXT_LENGTH, N_FEATURES, device=device)
    with torch.no_grad():
        encoded = model.encode(src)

    def no_grad_rollout() -> None:
        with torch.no_grad():
            rollout(model, encoded, model.start_of(src), 96)

    def bptt_unroll_and_backward() -> None:
        rollout(model, model.encode(src), model.start_of(src), 96)[0].sum().backward()

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    sort = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    sections = []
    for title, function in (
        ("96-step no-grad cached rollout", no_grad_rollout),
        ("96-step differentiable unroll (BPTT) and its backward", bptt_unroll_and_backward),
    ):
        function()  # warm-up
        with profile(activities=activities) as profiler:
            function()
        sections.append(f"{title}\n{profiler.key_averages().table(sort_by=sort, row_limit=15)}")
    return "\n\n".join(sections)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m project.tools.bench", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--suite",
        nargs="+",
        default=["training", "inference", "sampling"],
        choices=["training", "inference", "sampling", "panel", "profile"],
        help="what to measure",
    )
    parser.add_argument("--horizons", type=int, nargs="+", default=[12, 48, 96], help="forecast horizons T")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--d-model", type=int, default=128, help="model width (3+3 layers, 8 heads, ff 512)")
    parser.add_argument("--samples", type=int, default=100, help="sample paths per series in the sampling suite")
    parser.add_argument("--repeats", type=int, default=5, help="timed steps per measurement (median)")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:1, … (auto: cuda when available)")
    parser.add_argument("--precision", choices=["32", "bf16-mixed", "16-mixed"], default="32")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (default: torch's choice)")
    parser.add_argument(
        "--naive-max-seconds",
        type=float,
        default=60.0,
        help="skip a naive measurement whose single call is expected to take longer",
    )
    parser.add_argument("--naive-max-gb", type=float, default=8.0, help="skip naive steps expected to save more")
    parser.add_argument(
        "--gpu-memory-gb", type=float, default=None, help="cap this process's GPU memory, e.g. 4 to emulate a 4 GB card"
    )
    parser.add_argument("--panel-rows", type=int, default=10_000_000, help="rows of the panel suite")
    parser.add_argument("--panel-series", type=int, default=10_000, help="series of the panel suite")
    parser.add_argument("--output", type=Path, default=Path("bench_results"), help="folder for CSV and Markdown")
    parser.add_argument("--overwrite", action="store_true", help="replace result files already in --output")
    args = parser.parse_args(argv)
    for name in ("horizons", "batch_size", "d_model", "repeats", "samples"):
        values = getattr(args, name) if name == "horizons" else [getattr(args, name)]
        if any(v <= 0 for v in values):
            parser.error(f"--{name.replace('_', '-')} must be positive; got {getattr(args, name)}")
    return args


def main(argv: list[str] | None = None) -> None:
    with reported_in_one_line():
        run(parse_arguments(argv), argv)


def run(args: argparse.Namespace, argv: list[str] | None = None) -> None:
    """The suites ``args`` names; ``argv`` is the command line the tables are stamped with (this process's when
    None)."""
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(args.device)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.gpu_memory_gb and device.type == "cuda":
        device = torch.device("cuda", device.index if device.index is not None else torch.cuda.current_device())
        total = torch.cuda.get_device_properties(device).total_memory
        torch.cuda.set_per_process_memory_fraction(min(1.0, args.gpu_memory_gb * 2**30 / total), device)
    hardware = torch.cuda.get_device_name(device) if device.type == "cuda" else f"{platform.machine()} CPU"
    header = (
        f"batch {args.batch_size}, d_model {args.d_model}, 3+3 layers, context {CONTEXT_LENGTH}, {N_FEATURES} "
        f"features, precision {args.precision}, {hardware} ({torch.get_num_threads()} threads), "
        f"torch {torch.__version__}"
    )
    print(header, flush=True)
    files = {"profile": "profile.txt", "panel": "panel.md", "training": "training.csv", "inference": "inference.csv"}
    planned = [files.get(suite, "sampling.csv") for suite in args.suite]
    planned += ["bench.md"] if {"training", "inference", "sampling"} & set(args.suite) else []
    for name in planned:  # before measuring, so that a refused output costs nothing
        check_output(args.output / name, overwrite=args.overwrite)
    outputs: dict[str, str] = {}
    if "profile" in args.suite:  # every file starts with the command, commit and machine that wrote it
        outputs["profile.txt"] = f"{stamp(argv)}\n\n{header}\n\n{profile_rollouts(args, device)}"
        print(outputs["profile.txt"])
    if "panel" in args.suite:
        outputs["panel.md"] = f"{stamp(argv)}\n\n{benchmark_panel(args)}"
        print(outputs["panel.md"])
    training = benchmark_training(args, device) if "training" in args.suite else []
    inference = benchmark_inference(args, device, None) if "inference" in args.suite else []
    sampling = benchmark_inference(args, device, args.samples) if "sampling" in args.suite else []
    if training or inference or sampling:
        outputs["bench.md"] = markdown(training, inference, sampling, f"{stamp(argv)}\n\n{header}")
        print("\n" + outputs["bench.md"])
    tables = {"training.csv": training, "inference.csv": inference, "sampling.csv": sampling}
    for name, text in outputs.items():
        write_atomically(args.output / name, lambda temporary, t=text: temporary.write_text(t))
    for name, rows in tables.items():
        if rows:
            write_atomically(args.output / name, lambda temporary, r=rows: _write_csv(temporary, r))


def _write_csv(path: Path, rows: list) -> None:
    with path.open("w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=list(asdict(rows[0])))
        writer.writeheader()
        writer.writerows(asdict(row) for row in rows)


if __name__ == "__main__":
    main()
