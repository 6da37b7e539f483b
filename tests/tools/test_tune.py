"""Hyperparameter search (an optional tool: it goes with project/tools)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import optuna
import pytest
import yaml

from project.tools import tune
from tests.helpers import BASE, REPOSITORY, SMALL_MODEL, assert_refused_in_one_line, cli, config, digests, last_line

TINY_TRIALS = [
    "--model.network.init_args.nhead=2",
    "--model.network.init_args.num_decoder_layers=1",
    "--model.network.init_args.dim_feedforward=32",
    "--trainer.max_epochs=2",
    "--trainer.limit_train_batches=3",
    "--trainer.limit_val_batches=2",
    "--trainer.enable_progress_bar=false",
    "--trainer.enable_model_summary=false",
    "--forecast_figures.every_n_epochs=0",
]
REFUSED = "--model.cuda_graph=bogus"  # refused by the parser: a trial that draws its settings and stops at once
FAIL, COMPLETE = optuna.trial.TrialState.FAIL, optuna.trial.TrialState.COMPLETE


def float_space(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(
        "model.optimizer.init_args.lr: {float: [0.0001, 0.01], log: true}\n"
        "model.network.init_args.dropout: {float: [0.0, 0.3]}\n"
    )
    return space


def load(tmp_path, study="tiny"):
    return optuna.load_study(study_name=study, storage=f"sqlite:///{tmp_path / 'logs' / f'{study}.db'}")


def exit_code(*arguments):
    with pytest.raises(SystemExit) as stopped:
        tune.main([str(argument) for argument in arguments])
    return stopped.value.code


@pytest.mark.slow
def test_a_study_completes_resumes_and_its_best_config_trains(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text(
        "model.optimizer.init_args.lr: {float: [0.0001, 0.01], log: true}\n"
        "model.network.init_args.d_model: {choice: [8, 16]}\n"
    )
    arguments = ["--config", BASE, "--search", str(space), "--logs", str(tmp_path / "logs"), "--study", "tiny"]
    tune.main([*arguments, "--trials", "2", *TINY_TRIALS])  # stopped after two trials…
    output = tmp_path / "logs" / "tiny-best.yaml"
    output.unlink()
    tune.main([*arguments, "--trials", "3", *TINY_TRIALS])  # …and resumed to three
    study = optuna.load_study(study_name="tiny", storage=f"sqlite:///{tmp_path / 'logs' / 'tiny.db'}")
    finished = [
        t for t in study.trials if t.state in (optuna.trial.TrialState.COMPLETE, optuna.trial.TrialState.PRUNED)
    ]
    assert len(finished) == 3
    assert sorted(p.name for p in (tmp_path / "logs" / "tiny").iterdir()) == ["trial_0", "trial_1", "trial_2"]
    best = yaml.safe_load(output.read_text())
    lr = study.best_trial.params["model.optimizer.init_args.lr"]
    assert best["model"]["optimizer"] == {
        "class_path": "torch.optim.AdamW",
        "init_args": {"lr": lr, "weight_decay": 0.01},
    }
    assert best["trainer"]["max_epochs"] == 2  # the trials' own settings travel with it
    assert (
        cli("fit", "--config", str(output), "--trainer.logger.init_args.save_dir=best", "--test_after_fit=false") == 0
    )


@pytest.mark.slow
def test_trials_with_different_losses_are_scored_by_the_metric_their_checkpoints_monitor(tmp_path):
    from project.training.runs import read_scalars

    space = tmp_path / "space.yaml"
    space.write_text("model.network.init_args.distribution.init_args.loss: {choice: [mse, mae]}\n")
    logs = tmp_path / "logs"
    arguments = ["--config", BASE, "--search", str(space), "--logs", str(logs), "--study", "losses", "--trials", "2"]
    tune.main([*arguments, "--checkpoint.monitor=val/mse", "--early_stopping.monitor=val/mse", *TINY_TRIALS])
    study = load(tmp_path, "losses")
    for trial in study.trials:
        logged = read_scalars(logs / "losses" / f"trial_{trial.number}")
        assert trial.value == pytest.approx(float(logged["val/mse"].min()), rel=1e-6)
    output = logs / "losses-best.yaml"
    stamp, header = output.read_text().splitlines()[:2]
    assert stamp.startswith("# Written by `python -m ")
    assert " at commit " in stamp
    assert header.startswith("# The best of 2 trials of study 'losses': val/mse ")
    assert yaml.safe_load(output.read_text())["checkpoint"]["monitor"] == "val/mse"


def test_a_search_space_entry_must_name_an_option_and_a_kind(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("lr: [0.001, 0.01]\n")
    code = exit_code("--config", BASE, "--search", space, "--logs", tmp_path)
    assert_refused_in_one_line(code, capsys, "'lr' must be a model./data./trainer. option")


def test_the_shipped_search_space_is_valid():
    """The studies' spaces (ETTh1, M4 Hourly) are checked in experiments/tests/test_study_failures.py."""
    assert set(tune.load_space(tune.Path(config("search/default.yaml")))) >= {"model.optimizer.init_args.lr"}


@pytest.mark.slow
def test_sigterm_stops_the_study_with_exit_code_143_and_records_its_running_trial_as_failed(tmp_path):
    logs, space = tmp_path / "logs", float_space(tmp_path)
    arguments = ["--config", BASE, "--search", space, "--logs", logs, "--study", "tiny", "--trials", "3"]
    endless = ["--trainer.max_epochs=1000", "--trainer.limit_train_batches=50", "--trainer.limit_val_batches=2"]
    options = [*SMALL_MODEL, "--trainer.enable_progress_bar=false", "--forecast_figures.every_n_epochs=0", *endless]
    environment = {**os.environ, "PYTHONWARNINGS": "ignore", "PYTHONPATH": str(REPOSITORY)}
    errors = tmp_path / "stderr.txt"  # a file, not a pipe that nobody reads while the trial starts and could fill
    with errors.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-m", "project.tools.tune", *map(str, arguments), *options],
            cwd=tmp_path,
            env=environment,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
    try:
        deadline = time.monotonic() + 120
        while not (logs / "tiny" / "trial_0").is_dir() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        time.sleep(1)  # into the trial's training steps
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=120)
    finally:
        process.kill()
    stderr = errors.read_text()
    assert process.returncode == 143, stderr
    assert last_line(stderr) == (
        "error: stopped by SIGTERM; trial 0 recorded as failed; run the same command to resume the study"
    )
    assert "Traceback" not in stderr
    assert [trial.state for trial in load(tmp_path).trials] == [FAIL]  # the study stopped, not went on


def test_sigterm_between_trials_stops_the_study_before_its_next_trial_and_restores_the_handler(tmp_path, monkeypatch):
    seeded = tune.trial_seeded_sampler

    def sampler_terminated_at_trial_1(seed):
        sampler = seeded(seed)
        ask = sampler.before_trial

        def before_trial(study, trial):
            if trial.number == 1:  # while the study asks for its second trial
                os.kill(os.getpid(), signal.SIGTERM)
            ask(study, trial)

        sampler.before_trial = before_trial
        return sampler

    monkeypatch.setattr(tune, "trial_seeded_sampler", sampler_terminated_at_trial_1)
    handler = signal.getsignal(signal.SIGTERM)
    logs = tmp_path / "logs"
    arguments = ["--config", BASE, "--search", float_space(tmp_path), "--logs", logs, "--study", "tiny"]
    assert exit_code(*arguments, "--trials", "3", REFUSED) == 143
    assert [trial.state for trial in load(tmp_path).trials] == [FAIL, FAIL]
    assert signal.getsignal(signal.SIGTERM) is handler


@pytest.mark.slow
def test_two_workers_on_one_study_never_repeat_parameters(tmp_path):
    arguments = ["--config", BASE, "--search", float_space(tmp_path), "--logs", tmp_path / "logs", "--study", "tiny"]
    for _ in range(2):  # two workers with the same seed, one after the other (each a refused-trials study: exit 2)
        assert exit_code(*arguments, "--trials", "2", "--seed", "7", REFUSED) == 2
    drawn = [tuple(sorted(trial.params.items())) for trial in load(tmp_path).trials]
    assert len(drawn) == 4
    assert len(set(drawn)) == 4


def test_workers_asking_at_the_same_time_draw_different_parameters_past_the_random_startup_trials(tmp_path):
    storage = f"sqlite:///{tmp_path / 'shared.db'}"
    workers = [
        optuna.create_study(study_name="shared", storage=storage, load_if_exists=True, sampler=sampler)
        for sampler in (tune.trial_seeded_sampler(0), tune.trial_seeded_sampler(0))
    ]
    drawn = []
    for _ in range(8):  # TPE proper after its 10 random startup trials
        asked = [(worker, worker.ask()) for worker in workers]
        for worker, trial in asked:
            drawn.append(trial.suggest_float("x", 0.0, 1.0))
            worker.tell(trial, (drawn[-1] - 0.3) ** 2)
    assert len(set(drawn)) == len(drawn) == 16


def test_a_study_whose_every_trial_is_refused_ends_in_one_line_naming_the_first_trials_error(tmp_path, capsys):
    arguments = ["--config", BASE, "--search", float_space(tmp_path), "--logs", tmp_path / "logs", "--study", "tiny"]
    message = assert_refused_in_one_line(exit_code(*arguments, "--trials", "2", REFUSED), capsys)
    assert message.startswith("error: all 2 trials of study 'tiny' failed; the first failure, trial 0: ")
    assert "Parser key \"model.cuda_graph\": Expected a <class 'bool'>" in message
    assert [trial.state for trial in load(tmp_path).trials] == [FAIL, FAIL]


@pytest.mark.parametrize(
    ("refused", "named"),
    [
        ("--trainer.precision=bogus", "Parser key \"trainer.precision\": Expected a <class 'int'>, given bogus"),
        ("--model.optimizer.init_args.lr=abc", 'Parser key "model.optimizer.init_args.lr": Expected a path but abc'),
    ],
)
def test_a_study_refused_for_a_union_option_names_the_option_and_value_not_the_union(refused, named, tmp_path, capsys):
    arguments = ["--config", BASE, "--search", float_space(tmp_path), "--logs", tmp_path / "logs", "--study", "tiny"]
    line = assert_refused_in_one_line(exit_code(*arguments, "--trials", "1", refused), capsys)
    assert line.startswith(f"error: all 1 trials of study 'tiny' failed; the first failure, trial 0: {named}")


@pytest.mark.parametrize("output", ["search space", "database", "database of --storage", "config"])
def test_an_output_that_is_an_input_is_refused_even_with_overwrite_and_stays_as_it_was(tmp_path, capsys, output):
    space, base = float_space(tmp_path), tmp_path / "base.yaml"
    shutil.copy(BASE, base)
    database = tmp_path / ("elsewhere.db" if output == "database of --storage" else "logs/tiny.db")
    database.parent.mkdir(exist_ok=True)
    optuna.create_study(study_name="tiny", storage=f"sqlite:///{database}")
    path = {"search space": space, "config": base}.get(output, database)
    before = digests(path)
    arguments = ["--config", base, "--search", space, "--logs", tmp_path / "logs", "--study", "tiny"]
    if output == "database of --storage":
        arguments += ["--storage", f"sqlite:///{database}"]
    code = exit_code(*arguments, "--output", path, "--overwrite")
    assert_refused_in_one_line(code, capsys, f"the output would replace the input {path}")
    assert digests(path) == before


@pytest.mark.parametrize("given", ["on the command line", "in a config", "in a section file", "in the search space"])
def test_the_data_the_trials_read_is_never_the_output_even_with_overwrite(tmp_path, capsys, given):
    data = tmp_path / "data.csv"
    data.write_text("timestamp,a\n2020-01-01,1\n")
    before = digests(data)
    source, space = [f"--data.source={data}"], float_space(tmp_path)
    if given == "in a config":
        (tmp_path / "data.yaml").write_text(f"data:\n  source: {data}\n")
        source = ["--config", tmp_path / "data.yaml"]
    if given == "in a section file":  # --data FILE
        (tmp_path / "data.yaml").write_text(f"source: {data}\n")
        source = ["--data", tmp_path / "data.yaml"]
    if given == "in the search space":  # a file it chooses from: data.source: {choice: [data.csv]}
        source = []
        space.write_text(f"data.source: {{choice: [{data}]}}\n")
    arguments = ["--config", BASE, *source, "--search", space, "--logs", tmp_path / "logs"]
    refused = assert_refused_in_one_line(exit_code(*arguments, "--output", data, "--overwrite"), capsys)
    assert refused.endswith(f"the output would replace the input {data}; choose another output path")
    assert digests(data) == before


def test_a_trial_refused_for_a_bad_option_prints_one_line_not_pages_of_usage(tmp_path, capsys):
    arguments = ["--config", BASE, "--search", float_space(tmp_path), "--logs", tmp_path / "logs", "--study", "tiny"]
    assert exit_code(*arguments, "--trials", "1", "--model.network.init_args.nhead=abc") == 2
    error = capsys.readouterr().err
    assert "usage:" not in error
    assert "LightningCLI's args parameter" not in error
    assert error.count('Parser key "model.network.init_args.nhead": Not of type PositiveInt: invalid literal') == 2


def test_trials_must_be_at_least_one(tmp_path, capsys):
    assert exit_code("--config", BASE, "--logs", tmp_path, "--trials", "0") == 2
    assert last_line(capsys.readouterr().err).endswith("error: argument --trials: invalid PositiveInt value: '0'")


@pytest.mark.slow
def test_the_selection_never_reads_the_test_rows(tmp_path):
    """Two studies on data whose test rows' targets are two different random series choose the same trial with the
    same validation losses: nothing of the test period reaches the search."""
    import numpy as np

    from project.data.synthetic import CHANNELS, synthetic_series

    frame = synthetic_series(n_rows=2000)
    test_rows = slice(int(0.8 * len(frame)), None)  # the default split's last 20%
    space = float_space(tmp_path)
    chosen = []
    for seed in (1, 2):
        data = frame.copy()
        data.loc[data.index[test_rows], list(CHANNELS)] = np.random.default_rng(seed).normal(
            size=(len(data.index[test_rows]), len(CHANNELS))
        )
        path = tmp_path / f"data_{seed}.csv"
        data.to_csv(path, index=False)
        logs = tmp_path / f"logs_{seed}"
        arguments = ["--config", BASE, "--search", space, "--logs", logs, "--study", "selection", "--trials", "2"]
        tune.main([str(a) for a in arguments] + [f"--data.source={path}", "--data.time_column=timestamp", *TINY_TRIALS])
        study = optuna.load_study(study_name="selection", storage=f"sqlite:///{logs / 'selection.db'}")
        chosen.append((study.best_trial.params, [trial.value for trial in study.trials]))
    assert chosen[0] == chosen[1]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model.network.init_args.dropout: {float: [0.0, 0.3]\n", "not a YAML file this project reads"),
        ("seed: !!python/object/apply:os.system ['true']\n", "not a YAML file this project reads"),
        ("- a list, not a mapping\n", "a search space maps options to their ranges"),
        ("seed:\n" + "- " * 3000 + "x\n", "space.yaml: nested deeper than 100 levels"),
        ("seed: " + "{a: " * 150 + "1" + "}" * 150 + "\n", "space.yaml: nested deeper than 100 levels"),
    ],
    ids=["malformed", "code", "a-list", "too-deep-for-the-parser", "too-deep"],
)
def test_a_malformed_or_code_carrying_search_space_is_one_line(tmp_path, capsys, text, message):
    space = tmp_path / "space.yaml"
    space.write_text(text)
    assert_refused_in_one_line(
        exit_code("--config", BASE, "--search", space, "--logs", tmp_path / "logs"), capsys, message
    )


def trials_without_training(monkeypatch, score: float = 0.5) -> list[list[str]]:
    """Every trial's fit replaced by one that scores ``score`` at once: the command lines the trials were given."""
    from types import SimpleNamespace

    import project.cli

    given = []

    def fit(arguments, extra_callbacks=None):
        given.append(arguments)
        checkpoint = SimpleNamespace(best_model_score=score)
        return SimpleNamespace(trainer=SimpleNamespace(checkpoint_callback=checkpoint, callback_metrics={}))

    monkeypatch.setattr(project.cli, "cli_main", fit)
    return given


def test_a_null_choice_a_class_s_argument_and_a_section_file_are_written_as_the_trial_read_them(
    tmp_path, monkeypatch, capsys
):
    """``PositiveInt | None`` given null (not the string 'None', which the parser refuses), an argument of the
    optimizer's class_path spelled without init_args (the parser reads it under init_args, and so must the written
    config), and a data.* choice over ``--data FILE`` (merged into the section, as the parser does)."""
    given = trials_without_training(monkeypatch)
    space, section = tmp_path / "space.yaml", tmp_path / "data.yaml"
    space.write_text(
        "model.max_horizon: {choice: [null]}\nmodel.optimizer.lr: {choice: [0.005]}\ndata.batch_size: {choice: [16]}\n"
    )
    section.write_text("num_workers: 1\n")
    output = tmp_path / "best.yaml"
    arguments = ["--config", BASE, "--search", space, "--logs", tmp_path / "logs", "--output", output, "--trials", "1"]
    tune.main([*map(str, arguments), "--data", str(section)])
    assert given[0][-7:-4] == ["--model.max_horizon=null", "--model.optimizer.lr=0.005", "--data.batch_size=16"]
    best = yaml.safe_load(output.read_text())
    assert best["model"]["max_horizon"] is None
    assert best["model"]["optimizer"] == {
        "class_path": "torch.optim.AdamW",
        "init_args": {"lr": 0.005, "weight_decay": 0.01},
    }
    assert best["data"]["num_workers"] == 1
    assert best["data"]["batch_size"] == 16
    assert best["data"]["context_length"] == 12  # the config's section, the file merged into it
    monkeypatch.undo()
    capsys.readouterr()
    assert cli("fit", "--config", str(output), "--print_config") == 0  # the parser reads the written config
    assert "lr: 0.005" in capsys.readouterr().out


def test_a_choice_of_class_over_a_class_given_with_init_args_is_one_line_before_any_trial(tmp_path, capsys):
    """A trial keeps the configs' init_args that its chosen class takes (jsonargparse's rule); the written config, the
    choice as given, would drop them: the best config would train another model than its trial."""
    space = tmp_path / "space.yaml"
    space.write_text("model.network.init_args.distribution: {choice: [project.model.Normal]}\n")
    logs, output = tmp_path / "logs", tmp_path / "best.yaml"
    assert exit_code("--config", BASE, "--search", space, "--logs", logs, "--output", output) == 2
    assert capsys.readouterr().err == (
        f"error: {space}: 'model.network.init_args.distribution' chooses 'project.model.Normal' where the configs "
        "give project.model.PointForecast with init_args loss, which a trial keeps where its class takes them and "
        "the written config would not; give every one in each choice ({class_path: …, init_args: {…}}) or leave "
        "them out of the configs\n"
    )
    assert not output.exists()
    assert not logs.exists()  # no study was begun
