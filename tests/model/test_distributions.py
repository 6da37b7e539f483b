"""Output distributions and probabilistic scores against hand-computed values and the reference package."""

import math
import sys

import numpy as np
import properscoring
import pytest
import torch

from project.errors import InputError
from project.model import ForecastTransformer
from project.model.distributions import Normal, PointForecast, Quantiles, StudentT
from project.training.metrics import central_interval, crps_from_samples


def test_normal_negative_log_likelihood_matches_the_formula():
    parameters = torch.tensor([[0.5, 2.0], [-1.0, 0.5]], dtype=torch.float64)
    target = torch.tensor([1.5, -1.0], dtype=torch.float64)
    expected = np.mean([0.5 * 0.5**2 + math.log(2.0), math.log(0.5)]) + 0.5 * math.log(2 * math.pi)
    assert Normal().loss(parameters, target).item() == pytest.approx(expected, rel=1e-12)


def test_student_t_negative_log_likelihood_matches_torch_distributions():
    parameters = torch.tensor([[0.5, 2.0, 3.0], [-1.0, 0.5, 7.5]], dtype=torch.float64)
    target = torch.tensor([1.5, 0.2], dtype=torch.float64)
    reference = torch.distributions.StudentT(parameters[:, 2], parameters[:, 0], parameters[:, 1])
    expected = -reference.log_prob(target).mean()
    torch.testing.assert_close(StudentT().loss(parameters, target), expected, rtol=1e-12, atol=0)


def test_pinball_loss_matches_hand_computed_values():
    quantiles = Quantiles((0.1, 0.5, 0.9))
    parameters = torch.tensor([[0.0, 1.0, 2.0]], dtype=torch.float64)
    target = torch.tensor([3.0], dtype=torch.float64)
    # Errors 3, 2, 1 above every quantile: 0.1·3, 0.5·2, 0.9·1 → mean 0.7333…
    assert quantiles.loss(parameters, target).item() == pytest.approx((0.3 + 1.0 + 0.9) / 3)
    below = torch.tensor([-1.0], dtype=torch.float64)  # 1, 2, 3 below: 0.9·1, 0.5·2, 0.1·3
    assert quantiles.loss(parameters, below).item() == pytest.approx((0.9 + 1.0 + 0.3) / 3)


def test_quantiles_never_cross_and_the_median_is_the_point_forecast():
    quantiles = Quantiles((0.05, 0.25, 0.5, 0.75, 0.95))
    constrained = quantiles.constrain(torch.randn(1000, 5) * 5)
    assert (constrained.diff(dim=-1) > 0).all()
    torch.testing.assert_close(quantiles.point(constrained), constrained[:, 2])


def test_sampling_matches_the_distributions_moments():
    generator = torch.Generator().manual_seed(0)
    normal = torch.tensor([2.0, 0.5], dtype=torch.float64).expand(200_000, 2)
    draws = Normal().sample(normal, generator)
    assert draws.mean().item() == pytest.approx(2.0, abs=0.01)
    assert draws.std().item() == pytest.approx(0.5, abs=0.01)
    student = torch.tensor([0.0, 1.0, 5.0], dtype=torch.float64).expand(200_000, 3)
    assert StudentT().sample(student, generator).var().item() == pytest.approx(5 / 3, rel=0.05)  # df / (df - 2)
    quantiles = Quantiles((0.1, 0.5, 0.9))
    draws = quantiles.sample(torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64).expand(200_000, 3), generator)
    assert ((draws > -1) & (draws < 1)).double().mean().item() == pytest.approx(0.8, abs=0.005)


def test_reparameterised_draws_carry_gradients_to_the_parameters():
    for distribution, raw in ((Normal(), torch.randn(8, 2)), (StudentT(), torch.randn(8, 3))):
        parameters = distribution.constrain(raw.requires_grad_())
        distribution.sample(parameters, torch.Generator().manual_seed(0)).sum().backward()
        assert (raw.grad.abs().sum(dim=0) > 0).all()


def test_undoing_a_scaling_transforms_the_distribution():
    loc, scale = torch.tensor([10.0]), torch.tensor([3.0])
    normal = Normal().affine(torch.tensor([[1.0, 2.0]]), loc, scale)
    torch.testing.assert_close(normal, torch.tensor([[13.0, 6.0]]))
    point = PointForecast().affine(torch.tensor([[1.0]]), loc, scale)
    torch.testing.assert_close(point, torch.tensor([[13.0]]))


def test_crps_from_samples_equals_the_reference_package():
    generator = np.random.default_rng(0)
    samples = generator.normal(size=(6, 50, 4, 2))
    target = generator.normal(size=(6, 4, 2))
    expected = properscoring.crps_ensemble(target, np.moveaxis(samples, 1, -1))
    ours = crps_from_samples(torch.from_numpy(samples), torch.from_numpy(target))
    np.testing.assert_allclose(ours.numpy(), expected, rtol=1e-10, atol=1e-12)


def test_crps_from_samples_averages_to_torchmetrics_crps():
    from torchmetrics.functional.regression import continuous_ranked_probability_score

    generator = torch.Generator().manual_seed(0)
    samples = torch.randn(40, 30, dtype=torch.float64, generator=generator)  # 40 values, 30 draws each
    target = torch.randn(40, dtype=torch.float64, generator=generator)
    expected = continuous_ranked_probability_score(samples, target)
    torch.testing.assert_close(crps_from_samples(samples, target).mean(), expected, rtol=1e-12, atol=1e-14)


def test_crps_of_identical_draws_is_the_absolute_error():
    samples = torch.full((3, 10, 2), 1.5, dtype=torch.float64)
    target = torch.tensor([[1.0, 2.0], [0.0, 1.5], [3.0, -1.0]], dtype=torch.float64)
    torch.testing.assert_close(crps_from_samples(samples, target), (target - 1.5).abs())


def test_the_central_interval_holds_the_requested_share_of_draws():
    draws = torch.randn(1, 100_000, dtype=torch.float64)
    lower, upper = central_interval(draws, 0.8)
    assert (lower.item(), upper.item()) == pytest.approx((-1.2816, 1.2816), abs=0.02)


def test_quantile_levels_must_include_the_median():
    with pytest.raises(InputError, match=r"levels must be increasing and include the median 0.5"):
        Quantiles([0.1, 0.9])


def test_huber_delta_applies_to_the_huber_loss_only():
    with pytest.raises(InputError, match=r"huber_delta applies to loss=huber; got loss=mse"):
        PointForecast("mse", huber_delta=2.0)


def test_smape_is_m4s_percentage_and_torchmetrics_fraction_times_100():
    from torchmetrics.functional import symmetric_mean_absolute_percentage_error

    from project.training.metrics import forecast_scores, symmetric_percentage_errors

    forecast, actual = torch.tensor([110.0, 180.0, 0.0, -5.0]), torch.tensor([100.0, 200.0, 0.0, 5.0])
    errors = symmetric_percentage_errors(forecast, actual)
    torch.testing.assert_close(errors, torch.tensor([2000 / 210, 4000 / 380, 0.0, 200.0]))
    expected = 100 * symmetric_mean_absolute_percentage_error(forecast[:2], actual[:2])
    torch.testing.assert_close(forecast_scores(forecast[:2], actual[:2])["smape"].mean(), expected)


USER_DISTRIBUTION = '''
"""A user's distribution, written outside the template: a Laplace head trained by its negative log-likelihood."""

import torch
from torch.nn import functional as F

from project.model.distributions import Distribution


class Laplace(Distribution):
    n_parameters = 2

    def __init__(self, min_scale: float = 1e-3):
        """Args:
            min_scale: Smallest scale the head may predict.
        """
        self.min_scale = min_scale

    @property
    def init_args(self):
        return {"min_scale": self.min_scale}

    def constrain(self, raw):
        return torch.stack([raw[..., 0], F.softplus(raw[..., 1]) + self.min_scale], dim=-1)

    def loss(self, parameters, target):
        loc, scale = parameters.unbind(-1)
        return -torch.distributions.Laplace(loc, scale).log_prob(target).mean()

    def point(self, parameters):
        return parameters[..., 0]

    def sample(self, parameters, generator=None):
        loc, scale = parameters.unbind(-1)
        uniform = torch.rand(loc.shape, generator=generator, dtype=loc.dtype, device=loc.device) - 0.5
        return loc - scale * uniform.sign() * torch.log1p(-2 * uniform.abs())

    def affine(self, parameters, loc, scale):
        return torch.stack([parameters[..., 0] * scale + loc, parameters[..., 1] * scale], dim=-1)
'''


@pytest.mark.slow
def test_a_users_own_distribution_trains_through_the_cli_and_its_checkpoint_predicts(tmp_path, monkeypatch, capsys):
    from tests.helpers import BASE, assert_refused_in_one_line, cli, quick_fit_arguments, users_module

    users_module(tmp_path, "userdist", USER_DISTRIBUTION, monkeypatch)
    logs, named = tmp_path / "logs", "--model.network.init_args.distribution=userdist.Laplace"
    options = ["--model.network.init_args.distribution.min_scale=0.01", "--model.num_samples=4"]
    assert cli("fit", "--config", BASE, named, *options, *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    spec = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["network"]["init_args"]["distribution"]
    assert spec == {"class_path": "userdist.Laplace", "init_args": {"min_scale": 0.01}}
    output = tmp_path / "predictions.csv"
    predict = ["predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false"]
    capsys.readouterr()
    monkeypatch.delitem(sys.modules, "userdist")  # as in a new process: imported only if trusted
    assert assert_refused_in_one_line(cli(*predict), capsys).endswith(  # the checkpoint alone names no code
        "outside this project; nothing was imported: pass --model.network.init_args.distribution=userdist.Laplace "
        "to trust it"
    )
    assert cli(*predict[:2], named, *predict[2:]) == 0
    assert "_q0.9" in output.read_text().splitlines()[0]  # quantiles of the Laplace paths


@pytest.mark.parametrize("count", [0, -1, 1.5, 10**9, True])
def test_a_distribution_asking_for_an_impossible_head_is_one_line_before_any_layer_is_allocated(count):
    class Odd(PointForecast):
        n_parameters = count

    with pytest.raises(InputError, match=r"^Odd.n_parameters must be an integer in 1..1024"):
        ForecastTransformer(distribution=Odd())


@pytest.mark.parametrize("index", [2, -1, 0.5, None])
def test_a_point_index_outside_the_distributions_parameters_is_one_line_when_the_network_is_built(index):
    class Odd(PointForecast):
        n_parameters, point_index = 2, index

    with pytest.raises(InputError) as refused:
        ForecastTransformer(distribution=Odd())
    assert str(refused.value) == (
        f"Odd.point_index must be an integer in 0..1 (one of its n_parameters=2 parameters); got {index!r}"
    )
