"""Baseline paths (``project.model.paths``): what each shipped one forecasts, its one-line refusals, and a path given
by class_path from the CLI, a config file and a user's own module. That the regimes, the cache, sampling and
checkpoints keep their guarantees with every shipped path is tested where they are (``tests/training/test_regimes.py``,
``tests/model/test_network_contract.py``, parametrised over ``BASELINE_PATHS``)."""

import sys
import textwrap

import pytest
import torch

from project.errors import InputError
from project.model import ForecastTransformer, InputSizes, LinearPath, NoPath, SeasonalNaivePath
from project.model.network import network_spec
from project.training.module import Forecaster
from tests.helpers import BASE, TINY, assert_refused_in_one_line, cli, quick_fit_arguments, refusal_of, users_module


def test_seasonal_naive_repeats_the_last_season_of_the_context():
    context = torch.arange(2 * 7 * 2, dtype=torch.float64).view(2, 7, 2)  # (N, S, F)
    forecast = SeasonalNaivePath(season=3, context_length=7).forecast(context, 8)
    expected = context[:, [4, 5, 6, 4, 5, 6, 4, 5]]
    torch.testing.assert_close(forecast, expected, rtol=0, atol=0)


def test_the_linear_path_starts_as_repeat_last_and_maps_the_look_back_less_its_last_value():
    context = torch.randn(3, 6, 2, dtype=torch.float64)
    path = LinearPath(context_length=6, horizon=4).double()
    torch.testing.assert_close(path.forecast(context, 4), context[:, -1:].expand(-1, 4, -1), rtol=0, atol=0)
    with torch.no_grad():
        path.weight.copy_(torch.randn(4, 6, dtype=torch.float64))
        path.bias.copy_(torch.randn(4, dtype=torch.float64))
    last = context[:, -1:]
    expected = torch.einsum("hs,nsf->nhf", path.weight, context - last) + path.bias[:, None] + last  # one map, shared
    torch.testing.assert_close(path.forecast(context, 4), expected, rtol=0, atol=1e-12)
    longer = path.forecast(context, 7)  # beyond its horizon: the path's last value, held
    torch.testing.assert_close(longer[:, :4], expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(longer[:, 4:], expected[:, -1:].expand(-1, 3, -1), rtol=0, atol=1e-12)


def test_no_path_adds_nothing_and_no_weight():
    assert NoPath().forecast(torch.randn(2, 4, 1), 3) is None
    torch.manual_seed(0)
    default = ForecastTransformer(InputSizes(n_targets=2), **TINY)
    torch.manual_seed(0)
    explicit = ForecastTransformer(InputSizes(n_targets=2), **TINY, baseline_path=NoPath())
    assert list(default.state_dict()) == list(explicit.state_dict())
    context, tgt = torch.randn(3, 8, 2), torch.randn(3, 4, 2)
    torch.testing.assert_close(
        explicit.decode(tgt, explicit.encode(context)), default.decode(tgt, default.encode(context)), rtol=0, atol=0
    )


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (
            lambda: SeasonalNaivePath(season=13, context_length=12),
            "SeasonalNaivePath: season=13 must be at most context_length=12 (the path repeats the context's last "
            "season)",
        ),
        (
            lambda: SeasonalNaivePath(season=5).forecast(torch.randn(2, 4, 1), 3),
            "SeasonalNaivePath: season=5 must be at most the context's 4 steps",
        ),
        (
            lambda: ForecastTransformer(baseline_path=torch.nn.Linear(2, 2)),
            "ForecastTransformer's baseline_path is a Linear, not a project.model.paths.BaselinePath",
        ),
    ],
)
def test_a_path_refuses_a_bad_value_in_one_line(build, message):
    assert message in refusal_of(build)


def test_a_season_longer_than_the_context_is_refused_in_one_line_from_the_cli(tmp_path, capsys):
    path = ["--model.network.init_args.baseline_path=project.model.SeasonalNaivePath"]
    path.append("--model.network.init_args.baseline_path.season=13")
    code = cli("fit", "--config", BASE, *path, *quick_fit_arguments(tmp_path / "logs"))
    assert assert_refused_in_one_line(code, capsys) == (
        "error: SeasonalNaivePath: season=13 must be at most context_length=12 (the path repeats the context's last "
        "season)"
    )
    assert not (tmp_path / "logs").exists()


@pytest.mark.slow
def test_a_path_given_by_class_path_in_a_config_trains_and_its_checkpoint_restores_it(tmp_path):
    preset = tmp_path / "seasonal.yaml"
    preset.write_text(
        textwrap.dedent(
            """\
            model:
              network:
                init_args:
                  baseline_path:
                    class_path: project.model.SeasonalNaivePath
                    init_args: {season: 4}
            """
        )
    )
    logs = tmp_path / "logs"
    assert cli("fit", "--config", BASE, "--config", str(preset), *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    spec = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["network"]["init_args"]["baseline_path"]
    assert spec == {
        "class_path": "project.model.paths.SeasonalNaivePath",
        "init_args": {"season": 4, "context_length": 12},
    }
    path = Forecaster.load_from_checkpoint(checkpoint).network.baseline_path
    assert type(path) is SeasonalNaivePath
    assert (path.season, path.context_length) == (4, 12)


@pytest.mark.slow
def test_the_linear_path_from_the_command_line_is_sized_by_the_data_its_weights_restored_and_it_predicts(tmp_path):
    logs = tmp_path / "logs"
    path = "--model.network.init_args.baseline_path=project.model.LinearPath"
    assert cli("fit", "--config", BASE, path, "--data.context_length=16", *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    weights = torch.load(checkpoint, weights_only=True)["state_dict"]["network.baseline_path.weight"]
    assert weights.shape == (12, 16)  # the data's horizon × its context length, linked
    assert weights.abs().sum() > 0  # trained from its zero start (repeat-last) with the network
    restored = Forecaster.load_from_checkpoint(checkpoint).network.baseline_path
    torch.testing.assert_close(restored.weight, weights, rtol=0, atol=0)
    output = tmp_path / "predictions.csv"  # the checkpoint's settings as the parser's defaults, the path's links too
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    assert len(output.read_text().splitlines()) > 1


USER_PATH = '''
"""A user's baseline path, written outside the template: the context's mean, held over the horizon."""

from project.model.paths import BaselinePath


class ContextMean(BaselinePath):
    def __init__(self, weight: float = 1.0):
        """Args:
            weight: How much of the mean the path holds.
        """
        super().__init__()
        self.weight = weight

    @property
    def init_args(self):
        return {"weight": self.weight}

    def forecast(self, context, steps):
        return self.weight * context.mean(dim=1, keepdim=True).expand(-1, steps, -1)
'''


@pytest.mark.slow
def test_a_users_own_path_trains_through_the_cli_and_the_network_forecasts_the_residual_over_it(tmp_path, monkeypatch):
    users_module(tmp_path, "userpath", USER_PATH, monkeypatch)
    logs = tmp_path / "logs"
    path = ["--model.network.init_args.baseline_path=userpath.ContextMean"]
    path.append("--model.network.init_args.baseline_path.weight=0.5")
    assert cli("fit", "--config", BASE, *path, *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    spec = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["network"]["init_args"]["baseline_path"]
    assert spec == {"class_path": "userpath.ContextMean", "init_args": {"weight": 0.5}}
    monkeypatch.delitem(sys.modules, "userpath")  # as in a new process: imported only if trusted
    with pytest.raises(InputError, match=r"names userpath\.ContextMean \(at model\.network\.init_args\.baseline_path"):
        Forecaster.load_from_checkpoint(checkpoint)  # the checkpoint alone names no code
    network = Forecaster.load_from_checkpoint(checkpoint, trusted=["userpath.ContextMean"]).network
    spec = network_spec(network)
    arguments = {**spec["init_args"], "sizes": InputSizes(**spec["init_args"]["sizes"])}
    residual = type(network)(**{**arguments, "distribution": network.distribution, "baseline_path": None})
    residual.load_state_dict(network.state_dict())
    residual.eval()  # as the loaded network is: no dropout
    context, tgt = torch.randn(3, 12, 5), torch.randn(3, 12, 5)
    covariates = {"future_covariates": torch.randn(3, 24, network.n_future_covariates)}  # the calendar's
    with torch.no_grad():
        full = network.decode(tgt, network.encode(context, **covariates))
        mean = context.mean(dim=1, keepdim=True).unsqueeze(-1)  # (N, 1, F, 1)
        expected = residual.decode(tgt, residual.encode(context, **covariates)) + 0.5 * mean
    torch.testing.assert_close(full, expected, rtol=0, atol=1e-6)
