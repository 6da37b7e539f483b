"""Hyperparameter search (an optional tool: delete project/tune.py, configs/search.yaml and this file)."""

import optuna
import pytest
import yaml

from project import tune
from tests.helpers import BASE, cli, config

TINY_TRIALS = [
    "--model.nhead=2", "--model.num_decoder_layers=1", "--model.dim_feedforward=32",
    "--trainer.max_epochs=2", "--trainer.limit_train_batches=3", "--trainer.limit_val_batches=2",
    "--trainer.enable_progress_bar=false", "--trainer.enable_model_summary=false",
    "--forecast_figures.every_n_epochs=0",
]  # fmt: skip


def test_a_study_completes_resumes_and_its_best_config_trains(tmp_path):
    space = tmp_path / "space.yaml"
    space.write_text("model.learning_rate: {float: [0.0001, 0.01], log: true}\nmodel.d_model: {choice: [8, 16]}\n")
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
    assert best["model"]["learning_rate"] == study.best_trial.params["model.learning_rate"]
    assert best["trainer"]["max_epochs"] == 2  # the trials' own settings travel with it
    assert (
        cli("fit", "--config", str(output), "--trainer.logger.init_args.save_dir=best", "--test_after_fit=false") == 0
    )


def test_a_search_space_entry_must_name_an_option_and_a_kind(tmp_path, capsys):
    space = tmp_path / "space.yaml"
    space.write_text("learning_rate: [0.001, 0.01]\n")
    with pytest.raises(SystemExit) as stopped:
        tune.main(["--config", BASE, "--search", str(space), "--logs", str(tmp_path)])
    assert stopped.value.code == 2
    assert "'learning_rate' must be a model./data./trainer. option" in capsys.readouterr().err


def test_the_shipped_search_space_is_valid():
    assert set(tune.load_space(tune.Path(config("search.yaml")))) >= {"model.learning_rate", "model.d_model"}
    assert yaml.safe_load(open(config("search.yaml")))  # noqa: SIM115
