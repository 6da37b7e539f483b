"""The combination rules (``project/rules.py``), one table: the CLI refuses each on the parsed config in one line,
before any class is built or the data read (the data file named here does not exist), and the class built in Python
refuses it too."""

import sys

import pytest

from project import rules
from project.errors import InputError
from tests.helpers import BASE, assert_refused_in_one_line, cli

FREE_RUNNING = "--model.regime=project.training.FreeRunning"
QUANTILES = "--model.network.init_args.distribution=project.model.Quantiles"
CASES = {  # a rule → the options that break it, and the line
    "context_length, a multiple of the patch": (
        ["--model.network.init_args.patch_length=5"],
        "context_length=12 must be a multiple of patch_length=5",
    ),
    "horizon, a multiple of the patch": (
        ["--data.context_length=10", "--model.network.init_args.patch_length=5"],
        "horizon=12 must be a multiple of patch_length=5",
    ),
    "sampling settings on a point forecast": (
        ["--model.num_samples=50", "--model.interval=0.9"],
        "num_samples, interval apply to the sample paths of a distribution; the network's PointForecast",
    ),
    "horizon within max_horizon": (["--model.max_horizon=6"], "horizon=12 exceeds max_horizon=6"),
    "predict_horizon within max_horizon": (["--data.predict_horizon=60"], "predict_horizon=60 exceeds max_horizon=48"),
    "cuda_graph on a network without a fixed-shape cache": (
        ["--model.cuda_graph=true", "--model.network=project.model.gru.GRUForecaster"],
        "cuda_graph needs a network with new_fixed_shape_cache; GRUForecaster has none",
    ),
    "sample feedback on a point forecast": (
        [FREE_RUNNING, "--model.regime.init_args.feedback=sample"],
        "FreeRunning: feedback=sample draws from a predicted distribution",
    ),
    "bptt through draws that cannot be differentiated": (
        [FREE_RUNNING, "--model.regime.init_args.gradient=bptt", "--model.regime.init_args.feedback=sample", QUANTILES],
        "FreeRunning: gradient=bptt with feedback=sample differentiates through the draws, which Quantiles cannot",
    ),
    "target_columns empty": (["--data.target_columns=[]"], "target_columns must name at least one column"),
    "the embedded data and a file": (
        ["--data.synthetic=panel"],
        r"synthetic chooses the embedded data; data.source=.*never-read\.csv is read instead",
    ),
    "the naive comparison's season within the context": (
        ["--naive_comparison.season=13"],
        "naive_comparison.season=13 must be at most model.context_length=12",
    ),
}


@pytest.mark.fast_cases(4)
@pytest.mark.parametrize("case", CASES)
def test_the_cli_refuses_a_rule_before_any_class_is_built_or_the_data_read(case, tmp_path, capsys):
    options, line = CASES[case]
    missing = f"--data.source={tmp_path / 'never-read.csv'}"
    assert_refused_in_one_line(cli("fit", "--config", BASE, missing, *options), capsys, line)


def test_the_embedded_panel_needs_its_series_ids(capsys):
    assert_refused_in_one_line(cli("fit", "--config", BASE, "--data.synthetic=panel"), capsys, "set id_columns=")


def test_a_rule_whose_settings_are_not_all_known_is_left_to_the_class_that_knows_them():
    rules.check({"model.context_length": 12})  # the network's patch length is not known: nothing to refuse
    with pytest.raises(InputError, match=r"^context_length=12 must be a multiple of patch_length=5$"):
        rules.check({"model.context_length": 12, "model.network.patch_length": 5})


def test_every_rule_of_the_table_runs_on_the_cli_s_parsed_config(monkeypatch):
    """The CLI gives the rules every option they read (``rules.options`` on the parsed config, before any class is
    built): a rule whose options the CLI stage lacks would be skipped there, so it fails here."""
    given = []
    check = rules.check
    monkeypatch.setattr(rules, "check", lambda settings: given.append(settings) or check(settings))
    monkeypatch.setattr("project.cli.ForecastCLI.instantiate_classes", lambda self: sys.exit(0))  # build nothing
    assert cli("fit", "--config", BASE) == 0
    (settings,) = given
    missing = [option for rule in rules.RULES for option in rule.options if option not in settings]
    assert not missing, f"the CLI stage cannot run the rules reading {missing}"
