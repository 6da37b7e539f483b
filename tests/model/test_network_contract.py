"""The contract every network keeps (``project.model.network.ForecastNetwork``), checked for each class in NETWORKS.

To check your own network, add one line to NETWORKS (``tests/helpers.py``): a name, the class and the arguments of a
small instance (the sizes the data links into it — ``n_targets``, covariate counts, static cardinalities and reals —
and its ``distribution`` are given by the tests). The help test of every network's options
(``tests/cli/test_domains.py``) reads the same table.
"""

from __future__ import annotations

import textwrap

import pytest
import torch

from project.data import WindowDataModule
from project.model import ForecastNetwork, GRUForecaster
from project.model.decoding import generate
from project.training.module import Forecaster
from project.training.regimes import REGIMES, RegimeOptions, ScheduledSampling
from project.training.runs import read_scalars
from tests.helpers import (
    BASE,
    BASELINE_PATHS,
    COVARIATES,
    NETWORKS,
    baseline_path,
    cli,
    config,
    distribution,
    learnable_series,
    only_run,
    quick_fit_arguments,
    quiet_trainer,
    users_module,
    warmup_cosine,
    with_sizes,
)
from tests.reference_loops import naive_free_running

TARGETS, CONTEXT, HORIZON = 3, 8, 5


def network(name: str, **sizes) -> ForecastNetwork:
    """A small float64 network of ``name`` with covariates, in eval mode (dropout off)."""
    network_class, small = NETWORKS[name]
    if isinstance(sizes.get("distribution"), str):  # a short name, as the parametrised tests give it
        sizes["distribution"] = distribution(sizes["distribution"])
    if isinstance(sizes.get("baseline_path"), str):
        sizes["baseline_path"] = baseline_path(sizes["baseline_path"], CONTEXT, HORIZON)
    return network_class(**with_sizes({"n_targets": TARGETS, **small, **COVARIATES, **sizes})).double().eval()


def inputs(batch: int = 4, horizon: int = HORIZON) -> dict[str, torch.Tensor]:
    return {
        "context": torch.randn(batch, CONTEXT, TARGETS, dtype=torch.float64),
        "past_covariates": torch.randn(batch, CONTEXT, 2, dtype=torch.float64),
        "future_covariates": torch.randn(batch, CONTEXT + horizon, 3, dtype=torch.float64),
        "static_categorical": torch.stack([torch.randint(0, 5, (batch,)), torch.randint(0, 3, (batch,))], dim=1),
        "static_real": torch.randn(batch, 1, dtype=torch.float64),
    }


def encoded_and_tgt(model: ForecastNetwork):
    batch = inputs()
    context = batch.pop("context")
    return model.encode(context, **batch), torch.randn(4, HORIZON, TARGETS, dtype=torch.float64)


@pytest.mark.parametrize("name", NETWORKS)
def test_the_network_claims_the_protocol(name):
    model = network(name)
    assert isinstance(model, ForecastNetwork)
    assert isinstance(model, torch.nn.Module)
    assert model.patch_length >= 1
    assert model.n_targets == TARGETS


@pytest.mark.parametrize("name", NETWORKS)
def test_decoding_is_causal(name):
    """Without a baseline path: a path is a function of the context alone, added to every position's output (held by
    test_the_forecast_is_the_baseline_path_plus_the_residual_at_every_parameter_of_the_location), so it cannot make a
    position read a later one."""
    model = network(name)
    encoded, tgt = encoded_and_tgt(model)
    full = model.decode(tgt, encoded)
    for t in range(HORIZON - 1):
        changed = tgt.clone()
        changed[:, t + 1 :] += torch.randn_like(changed[:, t + 1 :])
        torch.testing.assert_close(model.decode(changed, encoded)[:, : t + 1], full[:, : t + 1], rtol=0, atol=1e-12)
        assert not torch.allclose(model.decode(changed, encoded)[:, t + 1 :], full[:, t + 1 :])


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("distribution", ["none", "normal", "quantile"])
@pytest.mark.parametrize("name", NETWORKS)
def test_cached_decode_matches_full_decode(name, distribution, path):
    model = network(name, distribution=distribution, baseline_path=path)
    encoded, tgt = encoded_and_tgt(model)
    full = model.decode(tgt, encoded)
    cache = model.new_cache(HORIZON)
    cached = torch.cat([model.decode(tgt[:, t : t + 1], encoded, cache) for t in range(HORIZON)], dim=1)
    assert full.shape == (4, HORIZON, TARGETS, model.distribution.n_parameters)
    torch.testing.assert_close(cached, full, rtol=0, atol=1e-10)


def loss_and_every_gradient(model, forecast, target):
    model.zero_grad()
    loss = model.distribution.loss(forecast(), target)
    loss.backward()
    return loss.detach(), [torch.zeros_like(p) if p.grad is None else p.grad.clone() for p in model.parameters()]


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("gradient", ["detach", "bptt"])
@pytest.mark.parametrize("name", NETWORKS)
def test_free_running_has_the_loss_and_every_gradient_of_the_naive_loop(name, gradient, path):
    model = network(name, baseline_path=path).train()  # no dropout in these networks: train mode is what training runs
    batch = inputs()
    context, target = batch.pop("context"), torch.randn(4, HORIZON, TARGETS, dtype=torch.float64)

    def fast():
        encoded, start = model.encode(context, **batch), model.start_of(context)
        return REGIMES[f"free_running_{gradient}"].forecast(model, encoded, start, target, RegimeOptions())

    fast_loss, fast_gradients = loss_and_every_gradient(model, fast, target)
    slow_loss, slow_gradients = loss_and_every_gradient(
        model, lambda: naive_free_running(model, context, target, gradient, **batch), target
    )
    torch.testing.assert_close(fast_loss, slow_loss, rtol=1e-10, atol=0)
    assert len(fast_gradients) == len(list(model.parameters()))
    for fast_gradient, slow_gradient in zip(fast_gradients, slow_gradients):
        torch.testing.assert_close(fast_gradient, slow_gradient, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("regime", REGIMES)
@pytest.mark.parametrize("name", NETWORKS)
def test_every_regime_trains_the_network(name, regime):
    """Without a baseline path: the path's own gradients, and what it changes in what is fed back, are held exactly by
    the free-running test above and the fit below, both with every path."""
    chosen = REGIMES[regime]
    if chosen.scheduled:  # a schedule, outside a fit that would size it
        chosen = ScheduledSampling(steps=10)
    net = network(name).float().train()
    module = Forecaster(net, context_length=CONTEXT, horizon=HORIZON, regime=chosen)
    batch = {key: value.float() if value.is_floating_point() else value for key, value in inputs().items()}
    batch["target"] = torch.randn(4, HORIZON, TARGETS)
    module.training_loss(batch).backward()
    gradients = [parameter.grad for parameter in module.parameters()]
    assert all(gradient is not None and torch.isfinite(gradient).all() for gradient in gradients)
    assert any(gradient.abs().sum() > 0 for gradient in gradients)


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("name", NETWORKS)
def test_generate_gives_sample_paths_and_a_point_path_of_the_right_shapes(name, path):
    model = network(name, distribution="normal", baseline_path=path)
    batch = inputs(batch=2, horizon=6)
    context = batch.pop("context")
    with torch.no_grad():
        paths = generate(model, context, 6, num_samples=7, generator=torch.Generator().manual_seed(0), **batch)
        point = generate(model, context, 6, **batch)
    assert paths.shape == (2, 7, 6, TARGETS)
    assert point.shape == (2, 6, TARGETS)
    assert torch.isfinite(paths).all()
    assert paths.std(dim=1).min() > 0


@pytest.mark.parametrize("path", ["linear", "seasonal_naive"])
@pytest.mark.parametrize("distribution", ["none", "normal", "student_t", "quantile"])
@pytest.mark.parametrize("name", NETWORKS)
def test_the_forecast_is_the_baseline_path_plus_the_residual_at_every_parameter_of_the_location(
    name, distribution, path
):
    with_path = network(name, distribution=distribution, baseline_path=path)
    without = network(name, distribution=distribution)
    without.load_state_dict(with_path.state_dict(), strict=False)  # the same weights, less the path's own
    batch = inputs()
    context, tgt = batch.pop("context"), torch.randn(4, HORIZON, TARGETS, dtype=torch.float64)
    residual = without.decode(tgt, without.encode(context, **batch))
    full = with_path.decode(tgt, with_path.encode(context, **batch))
    values = with_path.baseline_path.forecast(context, HORIZON)  # (N, T, F)
    location = {"none": [0], "normal": [0], "student_t": [0], "quantile": [0, 1, 2]}[distribution]
    for index in range(full.shape[-1]):  # the location's parameters moved by the path, the others untouched
        moved = values if index in location else 0.0
        torch.testing.assert_close(full[..., index], residual[..., index] + moved, rtol=0, atol=1e-12)


def trained(name: str, tmp_path, path: str = "none") -> tuple[Forecaster, WindowDataModule]:
    """A Forecaster around the network, fitted for a few steps on two channels, with its last checkpoint saved."""
    datamodule = WindowDataModule(learnable_series(300), context_length=8, horizon=4, batch_size=16)
    datamodule.setup("fit")
    network_class, small = NETWORKS[name]
    net = network_class(datamodule.input_sizes, **small, baseline_path=baseline_path(path, 8, 4))
    module = Forecaster(net, context_length=8, horizon=4, lr_scheduler=warmup_cosine(1))
    trainer = quiet_trainer(max_steps=3, limit_val_batches=1)
    trainer.fit(module, datamodule)
    trainer.save_checkpoint(tmp_path / "last.ckpt")
    return module, datamodule


@pytest.mark.parametrize("path", BASELINE_PATHS)
@pytest.mark.parametrize("name", NETWORKS)
def test_a_forecaster_fits_predicts_and_its_checkpoint_restores_the_same_network(name, path, tmp_path):
    module, datamodule = trained(name, tmp_path, path)
    predictions = quiet_trainer(limit_predict_batches=1).predict(module, datamodule)
    assert predictions[0]["point"].shape[1:] == (4, 2)
    assert torch.isfinite(predictions[0]["point"]).all()
    restored = Forecaster.load_from_checkpoint(tmp_path / "last.ckpt")
    assert type(restored.network) is type(module.network)
    assert type(restored.network.baseline_path) is type(module.network.baseline_path)
    assert restored.network.baseline_path.init_args == module.network.baseline_path.init_args
    for (key, value), (_, expected) in zip(restored.state_dict().items(), module.state_dict().items()):
        torch.testing.assert_close(value, expected, rtol=0, atol=0, msg=key)


USER_NETWORK = '''
"""A user's network, written outside the template: a linear map of the last value, fed back step by step."""

import torch
from torch import nn

from project.model.distributions import Distribution, PointForecast
from project.model.network import ONE_TARGET, InputSizes, init_args


class Cache:
    """Positions decoded so far (a linear step needs nothing else)."""

    def __init__(self):
        self.length = 0


class MyNetwork(nn.Module):
    patch_length = 1

    def __init__(self, sizes: InputSizes = ONE_TARGET, distribution: Distribution | None = None, scale: float = 1.0):
        """Args:
            sizes: Target channels and covariates (linked from the data).
            distribution: What the head predicts, and its loss.
            scale: Initial scale of the step.
        """
        super().__init__()
        self.init_args = init_args(locals())
        self.n_targets = sizes.n_targets
        self.distribution = distribution or PointForecast()
        self.step = nn.Linear(self.n_targets, self.n_targets * self.distribution.n_parameters)

    def encode(self, context, past_covariates=None, future_covariates=None, static_categorical=None,
               static_real=None):
        return None

    def decode(self, tgt, encoded, cache=None):
        if cache is not None:
            cache.length += tgt.shape[1]
        return self.distribution.constrain(self.step(tgt).view(*tgt.shape, -1))

    def new_cache(self, steps=None):
        return Cache()

    def start_of(self, context):
        return context[:, -1:]
'''


@pytest.mark.slow
@pytest.mark.parametrize("only_sizes", [False, True], ids=["with-options", "only-the-linked-sizes"])
def test_a_users_own_network_trains_through_the_cli_even_with_the_linked_sizes_as_its_only_argument(
    only_sizes, tmp_path, monkeypatch
):
    source, own = textwrap.dedent(USER_NETWORK), ["--model.network.class_path=usermod.MyNetwork"]
    if only_sizes:
        arguments = "sizes: InputSizes = ONE_TARGET, distribution: Distribution | None = None, scale: float = 1.0"
        source = source.replace(arguments, "sizes: InputSizes").replace(
            "distribution or PointForecast()", "PointForecast()"
        )
        own.append("--test_after_fit=false")
    else:
        own.append("--model.network.init_args.scale=2.0")
    users_module(tmp_path, "usermod", source, monkeypatch)
    logs = tmp_path / "logs"
    assert cli("fit", "--config", BASE, *own, *quick_fit_arguments(logs)) == 0
    (checkpoint,) = logs.glob("*/version_0/checkpoints/last.ckpt")
    spec = torch.load(checkpoint, weights_only=True)["hyper_parameters"]["network"]
    assert spec["class_path"] == "usermod.MyNetwork"
    assert spec["init_args"]["sizes"]["n_targets"] == 5


@pytest.mark.slow
def test_the_gru_config_trains_tests_and_predicts_through_the_cli_and_its_checkpoint_restores_a_gru(tmp_path):
    """Stacked on configs/base.yaml, as its header says: base.yaml's transformer-only settings (patch_length: auto,
    channel_independent) drop with the class choice. fit tests the best checkpoint after training, as `make train`
    does."""
    logs, network = (
        tmp_path / "logs",
        ["--model.network.init_args.hidden_size=8", "--model.network.init_args.num_layers=1"],
    )
    arguments = ["--config", config("base.yaml"), "--config", config("networks/gru.yaml"), *network]
    assert cli("fit", *arguments, *quick_fit_arguments(logs)) == 0
    run = only_run(logs)
    assert "test/mse" in read_scalars(run)
    checkpoint = run / "checkpoints" / "last.ckpt"
    assert type(Forecaster.load_from_checkpoint(checkpoint).network) is GRUForecaster
    output = tmp_path / "predictions.csv"
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    assert output.is_file()
    assert len(output.read_text().splitlines()) > 1
