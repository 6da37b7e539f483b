"""Hyperparameter search with Optuna: each trial an ordinary ``fit`` with its own log folder.

    python -m project.tune --config configs/base.yaml --search configs/search.yaml --trials 20

Optuna's TPE sampler proposes the options named in the search space (``configs/search.yaml``); a median pruner
stops trials whose validation loss falls behind (Optuna's Lightning callback, reading ``val/loss`` after every
validation). The study lives in an RDB storage, a SQLite file by default, so several processes (or nodes, with a
database server's URL) can work on one study at once, and a study that was stopped resumes: ``--trials`` is the
number of finished trials the study should have, and trials of processes that died are retried. The best trial's
settings are printed and written as a complete config that ``fit --config`` accepts.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import yaml

from project.errors import InputError, reported_in_one_line
from project.files import check_output, write_atomically

SPACE_KINDS = ("float", "int", "choice")


class TrialFailed(RuntimeError):
    """A trial whose fit stopped with an error: Optuna records it as failed and the study goes on."""


def load_space(path: Path) -> dict[str, dict]:
    """The search space: option → ``{float: [low, high], log: bool}``, ``{int: [low, high]}`` or ``{choice: […]}``."""
    if not path.is_file():
        raise InputError(f"{path}: search space not found")
    space = yaml.safe_load(path.read_text()) or {}
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


def merged_config(configs: list[Path], overrides: dict) -> dict:
    """The configs merged as ``--config`` stacks them, with dotted ``overrides`` applied on top."""
    merged: dict = {}
    for path in configs:
        _deep_update(merged, yaml.safe_load(path.read_text()) or {})
    for option, value in overrides.items():
        *sections, name = option.split(".")
        level = merged
        for section in sections:
            level = level.setdefault(section, {})
        level[name] = value
    return merged


def command_line_overrides(arguments: list[str]) -> dict:
    """``--a.b=value`` / ``--a.b value`` arguments as dotted options with YAML-parsed values."""
    overrides, position = {}, 0
    while position < len(arguments):
        token = arguments[position]
        if not token.startswith("--"):
            raise InputError(f"unexpected argument {token!r}; options to pass to fit look like --model.d_model=64")
        key, equals, value = token[2:].partition("=")
        if not equals:
            position += 1
            value = arguments[position] if position < len(arguments) else ""
        overrides[key] = yaml.safe_load(value)
        position += 1
    return overrides


def objective(trial, args: argparse.Namespace, extra: list[str], space: dict[str, dict]) -> float:
    from optuna_integration import PyTorchLightningPruningCallback

    from project.cli import cli_main

    settings = suggest(trial, space)
    arguments = ["fit"]
    for config in args.config:
        arguments += ["--config", str(config)]
    arguments += [
        *extra,
        *(f"--{option}={value}" for option, value in settings.items()),
        f"--trainer.logger.init_args.save_dir={args.logs}",
        f"--trainer.logger.init_args.name={args.study}",
        f"--trainer.logger.init_args.version=trial_{trial.number}",
        "--test_after_fit=false",
    ]
    pruning = PyTorchLightningPruningCallback(trial, monitor="val/loss")
    try:
        cli = cli_main(arguments, extra_callbacks=[pruning])
    except SystemExit as stopped:  # the trial's settings were refused (its error line is printed): this trial fails
        raise TrialFailed(f"trial {trial.number} stopped with exit code {stopped.code}") from None
    score = cli.trainer.checkpoint_callback.best_model_score if cli.trainer.checkpoint_callback else None
    if score is None:
        score = cli.trainer.callback_metrics.get("val/loss")
    if score is None:
        raise InputError("the trial validated nothing: set trainer.limit_val_batches and check_val_every_n_epoch")
    return float(score)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tune", description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, action="append", required=True, help="configs to stack, as fit")
    parser.add_argument("--search", type=Path, default=Path("configs/search.yaml"), help="the search space")
    parser.add_argument("--trials", type=int, default=20, help="finished trials the study should have")
    parser.add_argument("--study", default="tune", help="study name: its runs log under <logs>/<study>/trial_N")
    parser.add_argument("--storage", default=None, help="Optuna RDB URL (default: sqlite:///<logs>/<study>.db)")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs"), help="where trials are logged")
    parser.add_argument("--output", type=Path, default=None, help="best config (default: <logs>/<study>-best.yaml)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--seed", type=int, default=0, help="the TPE sampler's seed")
    args, extra = parser.parse_known_args(argv)  # anything else goes to every trial's fit
    with reported_in_one_line():
        run(args, extra)


def run(args: argparse.Namespace, extra: list[str]) -> None:
    import optuna
    from optuna.storages import RDBStorage, RetryHeartbeatStaleTrialCallback
    from optuna.study import MaxTrialsCallback
    from optuna.trial import TrialState

    space = load_space(args.search)
    overrides = command_line_overrides(extra)
    output = args.output or args.logs / f"{args.study}-best.yaml"
    check_output(output, overwrite=args.overwrite)
    args.logs.mkdir(parents=True, exist_ok=True)
    storage = RDBStorage(
        args.storage or f"sqlite:///{args.logs / f'{args.study}.db'}",
        heartbeat_interval=60,  # a trial whose process died is marked failed after the grace period, and retried
        grace_period=180,
        heartbeat_stale_trial_callback=RetryHeartbeatStaleTrialCallback(max_retry=1),
    )
    study = optuna.create_study(
        study_name=args.study,
        storage=storage,
        load_if_exists=True,
        direction="minimize",
        sampler=optuna.samplers.TPESampler(seed=args.seed),
        pruner=optuna.pruners.MedianPruner(n_startup_trials=2),
    )
    finished = (TrialState.COMPLETE, TrialState.PRUNED)
    remaining = args.trials - len(study.get_trials(states=finished))
    if remaining > 0:
        study.optimize(
            lambda trial: objective(trial, args, extra, space),
            n_trials=remaining,
            callbacks=[MaxTrialsCallback(args.trials, states=finished)],
            catch=(TrialFailed,),
        )
    best = study.best_trial
    config = merged_config(args.config, {**overrides, **best.params})
    text = yaml.safe_dump(config, sort_keys=False)
    count = len(study.get_trials(states=finished))
    header = f"# The best of {count} trials of study '{args.study}': val/loss {best.value:.6g}\n"
    write_atomically(output, lambda temporary: temporary.write_text(header + text))
    print(f"best trial {best.number}: val/loss {best.value:.6g}, {best.params}")
    print(f"Wrote {output}; train it with: python -m project.cli fit --config {output}")


def _deep_update(target: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            _deep_update(target[key], value)
        else:
            target[key] = value


if __name__ == "__main__":
    main()
