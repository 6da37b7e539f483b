"""Hyperparameter search with Optuna: each trial an ordinary ``fit`` with its own log folder.

    python -m project.tools.tune --config configs/base.yaml --search configs/search/default.yaml --trials 20

Optuna's TPE sampler proposes the options named in the search space (``configs/search/default.yaml``). A trial is
scored by the validation metric its checkpoints are chosen by (``checkpoint.monitor``: ``val/loss`` unless a config
or ``--checkpoint.monitor=val/mse`` says otherwise, which lets trials with different losses compare), at its best
checkpoint; a median pruner stops trials whose metric falls behind (Optuna's Lightning callback, reading it after
every validation). The study lives in an RDB storage, a SQLite file by default, so several processes (or nodes, with a
database server's URL) can work on one study at once, and a study that was stopped resumes: ``--trials`` is the
number of finished trials the study should have, and trials of processes that died are retried. SIGTERM (or
Ctrl+C) stops the study: its running trial is recorded as failed and the process exits with code 143 (130). Trial N
draws its settings from ``(--seed, N)``, so workers sharing a study never repeat each other. The best trial's
settings are printed and written as a complete config that ``fit --config`` accepts.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import itertools
import json
import logging
import signal
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

import yaml

from project.domains import PositiveInt
from project.errors import InputError, reported_in_one_line
from project.files import bounded_yaml, check_name_lengths, check_output, write_atomically
from project.training.callbacks import EXIT_SIGTERM

SEARCH_SPACE = Path(__file__).resolve().parents[2] / "configs" / "search" / "default.yaml"  # from any folder

SPACE_KINDS = ("float", "int", "choice")
ERROR_ATTR = "error"  # the user attribute holding a refused trial's error line, for a summary in any later process
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class TrialFailed(RuntimeError):
    """A trial whose fit stopped with an error: Optuna records it as failed and the study goes on."""


class Stopped(Exception):
    """SIGTERM or Ctrl+C: Optuna records the running trial as failed and the study ends.

    An Exception, not a KeyboardInterrupt: Lightning would turn a KeyboardInterrupt into ``SystemExit(1)``, which
    reads like a refused trial, and Optuna records a trial as failed only for an Exception or a KeyboardInterrupt.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class StopSignals:
    """SIGTERM and SIGINT for the duration of a study. Inside ``optimize`` a signal is noted and the running trial
    stops at its next training or validation step (a callback), so that no write to the study's storage or to a
    checkpoint is cut in half; outside it, or at a second signal, it stops at once."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self.trial: int | None = None  # the trial that a signal stopped
        self._deferring = False

    def handle(self, signum: int, frame) -> None:
        # Lightning's own SIGTERM handler calls this one too during a fit: it stops the fit at a step as well.
        first = self.signum is None
        self.signum = signum
        if not first or not self._deferring:
            raise Stopped(signum)

    def check(self) -> None:
        if self.signum is not None:
            raise Stopped(self.signum)

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():  # only the main thread may set handlers
            yield
            return
        previous = {signum: signal.signal(signum, self.handle) for signum in STOP_SIGNALS}
        try:
            yield
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @contextlib.contextmanager
    def deferred(self) -> Iterator[None]:
        self._deferring = True
        try:
            yield
        finally:
            self._deferring = False

    def end_study(self, study, trial) -> None:
        """An Optuna callback: a signal that came while a trial was being recorded ends the study there."""
        if self.signum is not None:
            study.stop()

    def callback(self):
        """A Lightning callback that stops the fit at the next step once a signal came."""
        from lightning.pytorch.callbacks import Callback

        signals = self

        class StopAtNextStep(Callback):
            # Ahead of Lightning's own check, which would end the fit through the CLI's SIGTERM message (advice
            # to resume the trial's run with --ckpt_path, which is not how a study resumes).
            def on_fit_start(self, trainer, pl_module) -> None:
                signals.check()  # a signal that came while the trial was set up, before Lightning listened

            def on_train_batch_end(self, *args) -> None:
                signals.check()

            def on_validation_batch_end(self, *args) -> None:
                signals.check()

        return StopAtNextStep()

    def message(self, stopped: Stopped) -> str:
        trial = f"; trial {self.trial} recorded as failed" if self.trial is not None else ""
        return f"{stopped}{trial}; run the same command to resume the study"


def read_yaml(path: str | Path) -> object:
    """The YAML file at ``path``, read by ``bounded_yaml`` (one line when missing)."""
    path = check_name_lengths(path)
    if not path.is_file():
        raise InputError(f"{path}: file not found")
    return bounded_yaml(path.read_text(), str(path))


def trial_seeded_sampler(seed: int):
    """Optuna's TPE sampler, its random streams reseeded before each trial from ``(seed, trial number)``.

    A sampler seeded once draws the same sequence in every process: workers sharing a study, or a study resumed,
    would try the settings of its first trials again. The storage numbers trials uniquely, so each trial draws
    its own. TPESampler keeps two streams: ``_rng`` for its candidates and ``_random_sampler`` for the
    ``n_startup_trials`` random trials; it has no public way to seed them (``reseed_rng`` draws from the OS).
    """
    import numpy as np
    import optuna

    class TrialSeededTPESampler(optuna.samplers.TPESampler):
        def before_trial(self, study, trial) -> None:
            candidates, startup = np.random.SeedSequence([seed % 2**32, trial.number]).generate_state(2)
            self._rng.rng.seed(int(candidates))
            self._random_sampler._rng.rng.seed(int(startup))
            super().before_trial(study, trial)

    return TrialSeededTPESampler(seed=seed)


def load_space(path: Path) -> dict[str, dict]:
    """The search space: option → ``{float: [low, high], log: bool}``, ``{int: [low, high]}`` or ``{choice: […]}``."""
    if not path.is_file():
        raise InputError(f"{path}: search space not found")
    space = read_yaml(path) or {}
    if not isinstance(space, dict):
        raise InputError(f"{path}: a search space maps options to their ranges; got {type(space).__name__}")
    for option, spec in space.items():
        kinds = [kind for kind in SPACE_KINDS if isinstance(spec, dict) and kind in spec]
        if len(kinds) != 1 or not option.startswith(("model.", "data.", "trainer.")):
            raise InputError(
                f"{path}: '{option}' must be a model./data./trainer. option with one of float: [low, high], "
                f"int: [low, high] or choice: [values]; got {spec!r}"
            )
    return space


def suggest(trial, space: dict[str, dict]) -> dict:
    values = {}
    for option, spec in space.items():
        if "float" in spec:
            low, high = spec["float"]
            values[option] = trial.suggest_float(option, float(low), float(high), log=bool(spec.get("log")))
        elif "int" in spec:
            low, high = spec["int"]
            values[option] = trial.suggest_int(option, int(low), int(high), log=bool(spec.get("log")))
        else:
            values[option] = trial.suggest_categorical(option, list(spec["choice"]))
    return values


def command_line_value(value: object) -> str:
    """A setting as the parser reads it back from the command line: a string as it is, anything else as JSON (which
    YAML reads), so that a choice of null is None, not the string 'None' that ``PositiveInt | None`` refuses."""
    return value if isinstance(value, str) else json.dumps(value)


def check_class_choices(space: dict[str, dict], config: dict, path: Path) -> None:
    """No choice replaces a class the configs give with ``init_args`` without restating them all: the parser keeps,
    in each trial, those of them its class accepts, and the written config (the choice as given) would not."""
    for option, spec in space.items():
        level, name = option_level(copy.deepcopy(config), option)
        given = level.get(name)
        arguments = given.get("init_args") if isinstance(given, dict) else None
        if not (isinstance(arguments, dict) and arguments):
            continue
        for choice in spec.get("choice", []):
            restated = choice.get("init_args") if isinstance(choice, dict) and "class_path" in choice else None
            if choice is not None and not (isinstance(restated, dict) and set(arguments) <= set(restated)):
                raise InputError(
                    f"{path}: '{option}' chooses {choice!r} where the configs give {given.get('class_path')} with "
                    f"init_args {', '.join(arguments)}, which a trial keeps where its class takes them and the written "
                    "config would not; give every one in each choice ({class_path: …, init_args: {…}}) or leave them "
                    "out of the configs"
                )


def merged_config(configs: list[Path], overrides: dict) -> dict:
    """The configs merged as ``--config`` stacks them, with dotted ``overrides`` applied on top."""
    merged: dict = {}
    for path in configs:
        _deep_update(merged, read_yaml(path) or {})
    for option, value in overrides.items():
        level, name = option_level(merged, option)
        if isinstance(value, str) and isinstance(level.get(name), dict) and Path(value).is_file():
            _deep_update(level[name], _section_file(value))  # `--data FILE`: the parser merges it into the section
        else:
            level[name] = value
    return merged


def option_level(config: dict, option: str) -> tuple[dict, str]:
    """The mapping of ``config`` that holds the dotted ``option``, and its key there, where the parser reads it: an
    argument of a class given by ``class_path`` under its ``init_args`` (``model.optimizer.lr`` is
    ``model.optimizer.init_args.lr``), and a class given by name (``optimizer: torch.optim.Adam``) or a section given
    as a file (``--data FILE``) made a mapping first; missing levels are added."""
    keys = option.split(".")
    level = config
    for section, below in itertools.pairwise(keys):
        value = level.get(section)
        if isinstance(value, str):  # a section's file, or a class by name
            value = _section_file(value) if Path(value).is_file() else {"class_path": value}
        level[section] = value if isinstance(value, dict) else {}
        level = level[section]
        if "class_path" in level and below not in ("class_path", "init_args"):
            if not isinstance(level.get("init_args"), dict):
                level["init_args"] = {}
            level = level["init_args"]
    return level, keys[-1]


def _section_file(path: str) -> dict:
    section = read_yaml(path) or {}
    if not isinstance(section, dict):
        raise InputError(f"{path}: a section file maps options to values; got {type(section).__name__}")
    return section


def command_line_overrides(arguments: list[str]) -> dict:
    """``--a.b=value`` / ``--a.b value`` arguments as dotted options with YAML-parsed values."""
    overrides, position = {}, 0
    while position < len(arguments):
        token = arguments[position]
        if not token.startswith("--"):
            raise InputError(
                f"unexpected argument {token!r}; options to pass to fit look like --model.optimizer.init_args.lr=0.01"
            )
        key, equals, value = token[2:].partition("=")
        if not equals:
            position += 1
            value = arguments[position] if position < len(arguments) else ""
        overrides[key] = bounded_yaml(value, f"--{key}")
        position += 1
    return overrides


def objective(
    trial, args: argparse.Namespace, extra: list[str], space: dict[str, dict], monitor: str, signals: StopSignals
) -> float:
    from optuna_integration import PyTorchLightningPruningCallback

    from project.cli import cli_main

    signals.trial = trial.number
    signals.check()  # a signal that came while this trial was asked for
    settings = suggest(trial, space)
    arguments = ["fit"]
    for config in args.config:
        arguments += ["--config", str(config)]
    arguments += [
        *extra,
        *(f"--{option}={command_line_value(value)}" for option, value in settings.items()),
        f"--trainer.logger.init_args.save_dir={args.logs}",
        f"--trainer.logger.init_args.name={args.study}",
        f"--trainer.logger.init_args.version=trial_{trial.number}",
        "--test_after_fit=false",
    ]
    pruning = PyTorchLightningPruningCallback(trial, monitor=monitor)
    try:
        with mock.patch.object(sys, "argv", sys.argv[:1]):  # the trial's arguments are its own, not tune's
            cli = cli_main(arguments, extra_callbacks=[pruning, signals.callback()])
    except SystemExit as stopped:
        if stopped.code == EXIT_SIGTERM:  # Lightning saw the SIGTERM first, and the CLI printed its line
            raise Stopped(signals.signum or signal.SIGTERM) from None
        signals.check()  # a signal may have surfaced as a refusal (a parser catching the exception it raised)
        # The trial's settings were refused; its error line is printed above, and the exception behind it (the
        # exit's context) names it for the study's summary.
        reason = _one_line(stopped.__context__) or f"it stopped with exit code {stopped.code}"
        trial.set_user_attr(ERROR_ATTR, reason)
        signals.trial = None  # recorded as failed for its settings, whatever comes next
        raise TrialFailed(f"trial {trial.number} was refused: {reason}") from None
    signals.check()
    signals.trial = None  # a signal from here on stops the study, not this trial
    score = cli.trainer.checkpoint_callback.best_model_score if cli.trainer.checkpoint_callback else None
    if score is None:
        score = cli.trainer.callback_metrics.get(monitor)
    if score is None:
        raise InputError("the trial validated nothing: set trainer.limit_val_batches and check_val_every_n_epoch")
    return float(score)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.tune", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, action="append", required=True, help="configs to stack, as fit")
    parser.add_argument(
        "--search",
        type=Path,
        default=SEARCH_SPACE,
        help="the search space",
    )
    parser.add_argument("--trials", type=PositiveInt, default=20, help="finished trials the study should have")
    parser.add_argument("--study", default="tune", help="study name: its runs log under <logs>/<study>/trial_N")
    parser.add_argument("--storage", default=None, help="Optuna RDB URL (default: sqlite:///<logs>/<study>.db)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where trials are logged")
    parser.add_argument("--output", type=Path, default=None, help="best config (default: <logs>/<study>-best.yaml)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument(
        "--seed", type=int, default=0, help="the sampler's seed: trial N draws from (seed, N), in any process"
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to every trial's fit
    args.argv = argv  # for the stamp of the config it writes (None: this process's command line)
    with reported_in_one_line():
        run(args, extra)


def run(args: argparse.Namespace, extra: list[str]) -> None:
    """The study, under SIGTERM/SIGINT handlers: a signal ends it with its running trial recorded as failed, one
    line on stderr and exit code 128 + the signal (143 for SIGTERM)."""
    signals = StopSignals()
    try:
        with signals.installed(), _failed_trials_without_traceback():
            _run(args, extra, signals)
    except Stopped as stopped:
        print(f"error: {signals.message(stopped)}", file=sys.stderr)
        raise SystemExit(128 + stopped.signum) from None


def _run(args: argparse.Namespace, extra: list[str], signals: StopSignals) -> None:
    import optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    space = load_space(args.search)
    overrides = command_line_overrides(extra)
    check_class_choices(space, merged_config(args.config, overrides), args.search)
    monitor, mode = scored_metric(args.config, overrides)
    url = args.storage or f"sqlite:///{args.logs / f'{args.study}.db'}"
    output = args.output or args.logs / f"{args.study}-best.yaml"
    given = overrides.get("data", merged_config(args.config, {}).get("data"))
    section_file = given if isinstance(given, str) else None  # `--data FILE`, opened by a data.* option below it
    data = merged_config(args.config, overrides).get("data") or {}
    if isinstance(data, str):
        data = _section_file(data) if Path(data).is_file() else {}
    source = data.get("source") or (data.get("init_args") or {}).get("source")  # the trials' data: an input too
    # Whatever a trial may read is an input too: a search space's choices may name files (data.source: [a.csv]).
    chosen = [value for spec in space.values() for value in spec.get("choice", []) if isinstance(value, str)]
    inputs = [args.search, *args.config, _sqlite_file(url), source, section_file, *chosen]
    check_output(output, inputs=inputs, overwrite=args.overwrite)
    args.logs.mkdir(parents=True, exist_ok=True)
    storage = RDBStorage(
        url,
        heartbeat_interval=60,  # a trial whose process died is marked failed after the grace period, and retried
        grace_period=180,
        heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
    )
    study = optuna.create_study(
        study_name=args.study,
        storage=storage,
        load_if_exists=True,
        direction="maximize" if mode == "max" else "minimize",
        sampler=trial_seeded_sampler(args.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2),
    )
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    remaining = args.trials - len(study.get_trials(states=finished))
    if remaining > 0:
        with signals.deferred():
            study.optimize(
                lambda trial: objective(trial, args, extra, space, monitor, signals),
                n_trials=remaining,
                callbacks=[MaxTrialsCallback(args.trials, states=finished), signals.end_study],
                catch=(TrialFailed,),
            )
        signals.check()
    trials = study.get_trials(deepcopy=False)
    if not any(trial.state == TrialState.COMPLETE for trial in trials):
        raise InputError(_none_completed(args.study, trials))
    best = study.best_trial
    config = merged_config(args.config, {**overrides, **best.params})
    text = yaml.safe_dump(config, sort_keys=False)
    count = len(study.get_trials(states=finished))
    from project.tools.stamp import stamp  # here: it imports torch, which the study's setup does not need

    header = f"# {stamp(args.argv)}\n# The best of {count} trials of study '{args.study}': {monitor} {best.value:.6g}\n"
    write_atomically(output, lambda temporary: temporary.write_text(header + text))
    print(f"best trial {best.number}: {monitor} {best.value:.6g}, with")
    for option, value in best.params.items():  # a line each: a search of many options stays readable
        print(f"  {option}: {value:.6g}" if isinstance(value, float) else f"  {option}: {value}")
    print(f"Wrote {output}; train it with: python -m project.cli fit --config {output}")


def scored_metric(configs: list[Path], overrides: dict) -> tuple[str, str]:
    """The metric trials are scored by and its direction (``min`` or ``max``): what their checkpoints are chosen
    by, so that a trial's score is the one of the checkpoint it would hand on."""
    checkpoint = merged_config(configs, overrides).get("checkpoint") or {}
    return str(checkpoint.get("monitor") or "val/loss"), str(checkpoint.get("mode") or "min")


def _none_completed(study: str, trials: list) -> str:
    from optuna.trial import TrialState

    failed = [trial for trial in trials if trial.state == TrialState.FAIL]
    if failed and len(failed) == len(trials):
        summary = f"all {len(trials)} trials of study '{study}' failed"
    else:
        summary = f"none of the {len(trials)} trials of study '{study}' completed"
    if failed:
        first = min(failed, key=lambda trial: trial.number)
        # No error attribute: the trial's process was stopped or died, or Optuna failed it.
        reason = first.user_attrs.get(ERROR_ATTR, "no error recorded (its process was stopped)")
        summary += f"; the first failure, trial {first.number}: {reason[:300]}"
    return summary


def _one_line(error: BaseException | None) -> str:
    """The error as one line, a bad option named as the CLI names it (``readable_error``)."""
    from project.option_errors import readable_error

    return " ".join(readable_error(str(error)).split()) if isinstance(error, Exception) else ""


def _sqlite_file(url: str) -> Path | None:
    """The database file of a SQLite storage URL, an input that no output may replace."""
    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


@contextlib.contextmanager
def _failed_trials_without_traceback() -> Iterator[None]:
    """Optuna logs a failed trial with its traceback; a refused or stopped trial already has its one line."""

    def without_traceback(record: logging.LogRecord) -> bool:
        if record.exc_info and isinstance(record.exc_info[1], (TrialFailed, Stopped)):
            record.exc_info = None
        return True

    logger = logging.getLogger("optuna.study._optimize")  # the module of Optuna's that logs failed trials
    logger.addFilter(without_traceback)
    try:
        yield
    finally:
        logger.removeFilter(without_traceback)


def _deep_update(target: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target[key] = value


if __name__ == "__main__":
    main()
