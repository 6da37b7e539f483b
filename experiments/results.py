"""What the results scripts (``experiments.etth1``, ``experiments.m4``) share: training through the CLI exactly as
a user would (one run per seed, several at once with ``jobs``), finding a run's best checkpoint, timing it,
evaluating it on a split, and writing a Markdown table stamped with the command, the commit and the machine, and
sealed: its last line is the SHA-256 of the lines above it, so that a hand edit fails a test.

    python -m experiments.results experiments/README.md --overwrite   # copy every results table the page names into it
    python -m experiments.results --seal experiments/results/cpu_2core/bench.md   # a file a command wrote unsealed

A page names a table with a line ``<!-- experiments/results/NAME.md -->``; the table follows, up to ``<!-- end -->``.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pandas as pd
import torch
import yaml
from tensorboard.backend.event_processing.event_accumulator import SCALARS, EventAccumulator
from torch.utils.data import DataLoader

from project.cli import datamodule_from_config
from project.data import WindowDataModule
from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically
from project.tools.checkpoint_commands import load_checkpoint
from project.tools.stamp import run_commit, stamp
from project.training.metrics import forecast_scores, unscale
from project.training.module import Forecaster
from project.training.runs import find_runs, read_scalars

REPOSITORY = Path(__file__).resolve().parents[1]  # the studies read this repository's configs from any folder
BASE_CONFIG = REPOSITORY / "configs" / "base.yaml"
LARGEST_SEED = 2**32 - 1  # Lightning's seed_everything takes 0..2**32-1 and draws another seed for any other value


def repository_config(name: str) -> Path:
    """One of the template's config files (``panel.yaml``), wherever the study runs from."""
    return REPOSITORY / "configs" / name


def study_config(name: str) -> Path:
    """One of the studies' config files (``etth1.yaml``, ``search/etth1.yaml``), wherever the study runs from."""
    return REPOSITORY / "experiments" / "configs" / name


class RunFailed(InputError):
    """A training run a tool asked for did not finish: the message names the run and where it logged."""


def check_seeds(seeds: list[int]) -> list[int]:
    """``--seeds`` as given, or one line: each from 0 to ``LARGEST_SEED``, none twice (a seed's run has one name)."""
    if bad := [seed for seed in seeds if not 0 <= seed <= LARGEST_SEED]:
        raise InputError(f"--seeds takes integers from 0 to {LARGEST_SEED}; got {bad[0]}")
    if len(set(seeds)) < len(seeds):
        raise InputError(f"--seeds names a seed twice: {' '.join(map(str, seeds))}")
    return seeds


def check_distinct_outputs(outputs: dict[str, Path]) -> None:
    """One line when two of a command's outputs (option → path) are the same file: the second would replace the
    first."""
    seen: dict[Path, str] = {}
    for option, path in outputs.items():
        key = Path(os.path.abspath(path)).resolve()
        if key in seen:
            raise InputError(f"{option} and {seen[key]} are the same file ({path}); give each its own")
        seen[key] = option


def fit(
    configs: list[Path], arguments: list[str], logs: Path, name: str, threads: int | None = None
) -> tuple[Path, float]:
    """``python -m project.cli fit`` with ``configs`` stacked on base.yaml, logged as ``logs/name``, with ``threads``
    CPU threads when given; the run's folder and its wall-clock seconds (training and the test that follows)."""
    run_commit()  # the stamp names the code the runs ran at, not a commit made while they ran
    command = ["fit", "--config", str(BASE_CONFIG)]
    for config in configs:
        command += ["--config", str(config)]
    command += [f"--trainer.logger.init_args.save_dir={logs}", f"--trainer.logger.init_args.name={name}", *arguments]
    started = time.perf_counter()
    print("$ python -m project.cli", " ".join(command), flush=True)
    environment = {**os.environ, "OMP_NUM_THREADS": str(threads)} if threads else dict(os.environ)  # the fit's torch
    # this repository's project package, wherever the tool runs from (relative paths stay the user's)
    environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")]))
    done = subprocess.run([sys.executable, "-m", "project.cli", *command], env=environment)
    if done.returncode != 0:
        raise RunFailed(f"the run {name} failed (exit status {done.returncode}; its error is above), logged in {logs}")
    runs = find_runs(logs / name)
    if not runs:
        raise RunFailed(f"the run {name} logged nothing under {logs / name}: a tool reads its run's scores there")
    stamp_training(runs[-1])
    return runs[-1], time.perf_counter() - started


# What a run was trained at, in its own folder: a table written later from reused runs (``--reuse``) names it, since
# its own stamp names only the commit of the process that tabulates.
TRAINED = "trained.json"


def stamp_training(run: Path) -> None:
    """Write ``trained.json`` into the run's folder: the commit the run was trained at (``run_commit``) and the
    SHA-256 of the ``config.yaml`` Lightning saved there (None if it saved none)."""
    config = run / "config.yaml"
    digest = hashlib.sha256(config.read_bytes()).hexdigest() if config.is_file() else None
    text = json.dumps({"commit": run_commit(), "config_sha256": digest}) + "\n"
    write_atomically(run / TRAINED, lambda temporary: temporary.write_text(text))


def training_stamp(run: Path) -> str:
    """How a table names a run's training: ``commit <c>, config <first 12 hex digits>``, or that it predates the
    stamps."""
    path = run / TRAINED
    if not path.is_file():
        return "trained before runs were stamped"
    trained = json.loads(path.read_text())
    config = (trained["config_sha256"] or "none")[:12]
    return f"commit {trained['commit']}, config {config}"


def trained_line(runs: dict[str, Path]) -> str:
    """A table's line naming each run it reads (name → folder) with the commit and config it was trained at."""
    return (
        "Runs as trained (config: the first 12 hex digits of the SHA-256 of the run's config.yaml): "
        + "; ".join(f"{name} at {training_stamp(run)}" for name, run in runs.items())
        + "."
    )


def fit_seeds(
    configs: list[Path], arguments: list[str], logs: Path, name: str, seeds: list[int], jobs: int = 1
) -> list[tuple[Path, float]]:
    """``fit`` once per seed (``--seed_everything``), logged as ``logs/name_seedN``; ``jobs`` runs at a time, each
    with its share of the CPU's threads unless ``OMP_NUM_THREADS`` says otherwise."""
    threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 and "OMP_NUM_THREADS" not in os.environ else None

    def one(seed: int) -> tuple[Path, float]:
        return fit(configs, [*arguments, f"--seed_everything={seed}"], logs, f"{name}_seed{seed}", threads)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, seeds))


def seed_runs(logs: Path, name: str, seeds: list[int]) -> list[tuple[Path, float]]:
    """The latest run of each seed already in ``logs`` (as ``fit_seeds`` named them), with its seconds; one line
    naming the folder and the run when one is not there."""
    runs = []
    for seed in seeds:
        found = find_runs(logs / f"{name}_seed{seed}") if (logs / f"{name}_seed{seed}").is_dir() else []
        if not found:
            raise InputError(f"{logs}: no run {name}_seed{seed} logged there (train it first, or name its --logs)")
        runs.append(found[-1])
    return [(run, run_seconds(run)) for run in runs]


def tested_run(logs: Path, name: str) -> Path | None:
    """The latest run logged as ``logs/name`` if it reached its test, else None (what ``--reuse`` keeps)."""
    runs = find_runs(logs / name) if (logs / name).is_dir() else []
    return runs[-1] if runs and "test/mse" in read_scalars(runs[-1]) else None


def tested_scalars(run: Path) -> dict[str, pd.Series]:
    """The run's curves, or one line when it did not reach its test (a table row needs its test scores)."""
    curves = read_scalars(run)
    if not any(tag.startswith("test/") for tag in curves):
        raise RunFailed(f"the run {run} did not reach its test: no test scores logged there")
    return curves


def mean_std(values: list[float], digits: int = 3) -> str:
    """One value as it is; several as mean ± sample standard deviation."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.mean(values):.{digits}f} ± {statistics.stdev(values):.{digits}f}"


def at_best_validation(curves: dict[str, pd.Series], tag: str) -> float:
    """``tag``'s value at the validation whose loss was lowest (the checkpoint the run keeps), from a run's curves
    as ``read_scalars`` returns them (read once, then asked for several tags)."""
    best_step = curves["val/loss"].idxmin()
    return float(curves[tag].loc[best_step])


def run_seconds(run: str | Path) -> float:
    """Wall-clock seconds between the first and the last scalar the run logged (training to test)."""
    accumulator = EventAccumulator(str(run), size_guidance={SCALARS: 0})
    accumulator.Reload()
    times = [event.wall_time for tag in accumulator.Tags()["scalars"] for event in accumulator.Scalars(tag)]
    return max(times) - min(times) if times else 0.0


def preset_datamodule(preset: Path | None, data: Path | None, **overrides) -> WindowDataModule:
    """The data of the training runs, set up for testing: base.yaml's data settings, overridden by the preset's
    (None: base.yaml alone), the data file (None: the one the settings name, or the embedded data) and
    ``overrides``."""
    settings = yaml.safe_load(BASE_CONFIG.read_text())["data"]
    if preset is not None:
        settings.update(yaml.safe_load(preset.read_text())["data"])
    if data is not None:
        settings["source"] = str(data)
    windows = datamodule_from_config({**settings, **overrides})
    windows.setup("test")
    return windows


def data_options(options: Iterable[str]) -> dict:
    """The ``--data.key=value`` options among ``options`` as a ``data:`` mapping, values parsed as the CLI would."""
    pairs = (option.removeprefix("--data.").split("=", 1) for option in options if option.startswith("--data."))
    return {key: yaml.safe_load(value) for key, value in (pair for pair in pairs if len(pair) == 2)}


DISTRIBUTION_OPTION = "--model.network.init_args.distribution"


def distribution_name(hyper_parameters: dict) -> str | None:
    """The class name of a checkpoint's distribution (``Quantiles``, …), or None for a point forecast."""
    spec = hyper_parameters.get("network", {}).get("init_args", {}).get("distribution") or {}
    name = str(spec.get("class_path", "")).rpartition(".")[2]
    return None if name in ("", "PointForecast") else name


def best_checkpoint(run: Path) -> Path:
    """The run's one ``best-*.ckpt``, or one line naming the run."""
    found = sorted((run / "checkpoints").glob("best-*.ckpt"))
    if len(found) != 1:
        raise InputError(f"{run}: {len(found) or 'no'} best-*.ckpt in its checkpoints folder; a tool reads exactly one")
    return found[0]


def opened(checkpoint: str | Path) -> tuple[dict, Forecaster]:
    """The checkpoint and its model, read once in a study's process (a file rewritten since is read again): its epoch,
    settings, weights and forecasts all come from here."""
    path = Path(checkpoint).resolve()
    return _read_once(path, path.stat().st_mtime_ns if path.is_file() else None)


@functools.cache
def _read_once(path: Path, modified: int | None) -> tuple[dict, Forecaster]:
    return load_checkpoint(path)


def best_epoch(checkpoint: Path) -> int:
    return int(opened(checkpoint)[0]["epoch"]) + 1


def forecast_split(checkpoint: Path, datamodule, split: str, batch_size: int = 256) -> dict[str, torch.Tensor]:
    """The checkpoint's forecasts of every window of ``split``: ``point``, ``target`` and ``context`` in original
    units (windows, …), ``series`` (windows,) and ``scale`` (windows, 1, F); for a model with a distribution also,
    per value and on scaled values, ``crps``, ``covered`` (inside the model's central ``interval``) and ``width``
    (of that interval)."""
    model = opened(checkpoint)[1]
    parts: dict[str, list] = {}
    with torch.no_grad():
        for batch in DataLoader(datamodule.split(split), batch_size=batch_size):
            forecast = model.forecast(batch, batch["target"].shape[1])
            loc, scale = batch["loc"], batch["scale"]
            found = {
                "point": unscale(forecast.point, loc, scale),
                "target": unscale(batch["target"], loc, scale),
                "context": unscale(batch["context"], loc, scale),
                "series": batch["series"],
                "scale": scale,
            }
            if forecast.samples is not None:
                scores = forecast_scores(
                    forecast.point, batch["target"], samples=forecast.samples, interval=model.hparams.interval
                )
                found.update(crps=scores["crps"], covered=scores["coverage"], width=scores["width"])
            for key, value in found.items():
                parts.setdefault(key, []).append(value)
    return {key: torch.cat(values) for key, values in parts.items()}


def mean_forecast(members: list[dict[str, torch.Tensor]]) -> dict[str, torch.Tensor]:
    """The ``forecast_split`` results of several checkpoints on the same windows, as one forecast: the mean of their
    point forecasts (an ensemble over seeds; by convexity its absolute and squared errors are at most the members'
    mean, on any data)."""
    mean_point = torch.stack([member["point"] for member in members]).mean(0)
    return {**{key: members[0][key] for key in ("target", "context", "series", "scale")}, "point": mean_point}


def clock(row: dict) -> str:
    """A row's wall-clock column: published, measured (the mean over seeds, with each seed's best epoch), or not
    timed."""
    if row["model"].endswith("(published)"):
        return "published"
    if not row.get("seconds"):
        return "–"
    seconds = statistics.mean(row["seconds"])  # an ensemble's is the sum of its members'
    text = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.1f} s"
    epochs = row.get("best_epoch") or []
    return text + (f" (best epoch {', '.join(map(str, epochs))})" if epochs else "")


def seeds_column(row: dict) -> str:
    """How many seeds a row is over (or ensembles), or why it has none."""
    if row["model"].endswith("(published)"):
        return "–"
    if row.get("members"):
        return f"{row['members']}, one ensemble"
    return str(len(row["seeds"])) if row.get("seeds") else "deterministic"


def per_seed_lines(rows: list[dict], columns: dict[str, str]) -> str:
    """Under a table: each row's values per seed (``columns``: row key → label), from which its mean ± standard
    deviation is computed; rows over one seed, or none, have no line."""
    lines = []
    for row in rows:
        seeds = row.get("seeds") or []
        for key, label in columns.items():
            if len(seeds) > 1 and len(row.get(key) or []) == len(seeds):
                values = ", ".join(f"seed {seed}: {value:.3f}" for seed, value in zip(seeds, row[key]))
                lines.append(f"- {row['model']}, {label}: {values}")
    return "\n" + "\n".join(lines) + "\n" if lines else ""


def markdown_table(caption: str, header: list[str], rows: list[list[str]]) -> str:
    """A caption line and a Markdown table: the first column left-aligned, the others right-aligned."""
    lines = [caption, "", "| " + " | ".join(header) + " |", "|---|" + "---:|" * (len(header) - 1)]
    lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    return "\n".join(lines) + "\n"


def write_table(path: Path, table: str, argv: list[str] | None = None, runs: dict[str, Path] | None = None) -> None:
    """Write the table (its path checked with ``check_output`` before the runs began), stamped and sealed, and print
    it; with ``runs`` (name → folder), the stamp names the commit and config each was trained at."""
    text = f"{stamp(argv)}\n\n" + (f"{trained_line(runs)}\n\n" if runs else "") + table
    text = sealed(text if text.endswith("\n") else text + "\n")
    write_atomically(path, lambda temporary: temporary.write_text(text))
    print(text)


# A results file ends with its seal, the SHA-256 of every line above it: a figure, a decision cell or a stamp changed
# after the command wrote the file no longer gives it, and experiments/tests/test_results.py fails. A note added later
# goes below the seal and quotes no figure (the pages' rule, experiments.figure_checks.result_figures).
SEAL = re.compile(r"^<!-- sha256 of the lines above: ([0-9a-f]{64}) -->$", re.MULTILINE)


def sealed(text: str) -> str:
    """``text`` (whole lines) with its seal as the last line."""
    return f"{text}<!-- sha256 of the lines above: {hashlib.sha256(text.encode()).hexdigest()} -->\n"


def above_seal(text: str) -> str:
    """A results file's text as its command wrote it: without the seal and any note below it."""
    found = SEAL.search(text)
    return text if found is None else text[: found.start()]


def seal_problem(text: str) -> str | None:
    """Why a results file does not hold to its seal (it has none, or the lines above it changed), or None."""
    found = SEAL.search(text)
    if found is None:
        return "no seal (the SHA-256 line write_table ends a results file with)"
    if hashlib.sha256(text[: found.start()].encode()).hexdigest() != found[1]:
        return "the lines above its seal are not the ones sealed: changed since the command wrote them"
    return None


# A stamp's commit, and each reused run's ("Runs as trained: … at commit …"), as git abbreviates it.
STAMPED_COMMIT = re.compile(r"\bat commit ([0-9a-f]{7,40})\b")


def commits_outside(text: str, history: list[str]) -> list[str]:
    """The commits a results file's stamps name that are not in ``history`` (full hashes, ``git rev-list HEAD``)."""
    named = sorted(set(STAMPED_COMMIT.findall(text)))
    return [commit for commit in named if not any(full.startswith(commit) for full in history)]


# The files under experiments/results/ that no command writes, so none carries a seal: the searches' rules and
# records (search/, committed before their runs), a record of reruns, and the test-read history (each row names the
# files its figures are in, and a test reads them there); and the benchmark's CSV files, which pandas reads whole.
HAND_WRITTEN = ("m4_weekly_seeds_rebuilt_machine.md", "test_reads.md")


def is_sealed(name: str) -> bool:
    """Whether the results file ``name`` (relative to experiments/results/) is one a command wrote, and so sealed."""
    return not (name.startswith("search/") or name.endswith(".csv") or name in HAND_WRITTEN)


def seal(path: Path) -> None:
    """Seal a results file a command wrote without a seal: a file from before the seals, or from a tool outside
    experiments/ (``project.tools.bench``). One line for a file that has a seal already, whether it holds or not: a
    file changed by hand is written again by its command, not sealed again."""
    text = path.read_text() if path.is_file() else None
    if text is None or not text.endswith("\n"):
        raise InputError(f"{path}: {'not found' if text is None else 'cut short (it ends mid-line)'}; nothing sealed")
    if SEAL.search(text):
        problem = seal_problem(text)
        raise InputError(f"{path}: sealed already" + (f", and {problem}: rerun its command" if problem else ""))
    write_atomically(path, lambda temporary: temporary.write_text(sealed(text)))


# A marker is a line of its own, as the block's opening and end.
TABLE_BLOCK = re.compile(
    r"^(<!-- (experiments/results/[\w./-]+\.md) -->\n)(.*?)^(<!-- end -->)$", re.DOTALL | re.MULTILINE
)


def with_tables(page: str, root: Path) -> str:
    """The page with every named table block replaced by the current contents of its results file."""
    return TABLE_BLOCK.sub(lambda m: m[1] + (root / m[2]).read_text() + m[4], page)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.results", description=__doc__.split("\n")[0])
    parser.add_argument("pages", type=Path, nargs="*", help="Markdown pages whose results tables to refresh")
    parser.add_argument(
        "--overwrite", action="store_true", help="rewrite a page whose tables differ from experiments/results/"
    )
    parser.add_argument(
        "--seal",
        type=Path,
        nargs="+",
        default=[],
        metavar="FILE",
        help="append its seal to a results file a command wrote without one (never to a file edited by hand)",
    )
    args = parser.parse_args(argv)
    if not args.pages and not args.seal:
        parser.error("name the pages to refresh, or --seal the results files to seal")
    with reported_in_one_line():
        for path in args.seal:
            seal(path)
            print(f"Sealed {path}")
        for page in args.pages:
            if not page.is_file():
                raise InputError(f"{page}: page not found")
            text = page.read_text()
            refreshed = with_tables(text, Path.cwd())
            if refreshed == text:
                continue
            tables = [Path(block[2]) for block in TABLE_BLOCK.finditer(text)]
            check_output(page, inputs=tables, overwrite=args.overwrite)  # only the table blocks change
            write_atomically(page, lambda temporary, r=refreshed: temporary.write_text(r))
            print(f"Refreshed the tables of {page}")


if __name__ == "__main__":
    main()
