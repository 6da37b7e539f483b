"""Several forecasters as one (``project.tools.ensemble_model``): how forecasts are combined, exactly, and which members
are refused. The command-line tool and backtest are tested in tests/tools/test_ensemble.py."""

import pytest
import torch
from torch.utils.data import DataLoader

from project.errors import InputError
from project.tools.ensemble_model import Ensemble, combined
from project.training.metrics import forecast_scores, score_names
from project.training.module import Forecast, prediction_of
from tests.helpers import quiet_trainer, tiny_module

SPLIT = (slice(0, 4), slice(4, 6))  # the batches of 6 windows in fours


def forecast_with_samples(seed: int, draws: int) -> Forecast:
    generator = torch.Generator().manual_seed(seed)
    samples = torch.randn(3, draws, 4, 2, generator=generator, dtype=torch.float64)  # (N, K, T, F)
    return Forecast(samples.median(dim=1).values, None, samples)


def members(count: int = 3, **settings) -> list:
    """``count`` tiny models (2 targets, context 8, horizon 4) in float64 and eval mode, each its own weights."""
    models = []
    for seed in range(count):
        torch.manual_seed(seed)
        models.append(tiny_module(**settings).double().eval())
    return models


def batch(windows: int = 3) -> dict:
    return {
        "context": torch.randn(windows, 8, 2, dtype=torch.float64),
        "target": torch.randn(windows, 4, 2, dtype=torch.float64),
        "loc": torch.randn(windows, 1, 2, dtype=torch.float64),
        "scale": torch.rand(windows, 1, 2, dtype=torch.float64) + 0.5,
        "window": torch.arange(windows),
        "series": torch.zeros(windows, dtype=torch.long),
    }


def test_the_combined_point_forecast_is_the_mean_of_the_members_points():
    points = [torch.randn(3, 4, 2, dtype=torch.float64) for _ in range(3)]
    forecast = combined([Forecast(point) for point in points], [0.1, 0.9])
    torch.testing.assert_close(forecast.point, (points[0] + points[1] + points[2]) / 3, rtol=0, atol=1e-15)
    assert forecast.samples is None
    assert forecast.quantiles is None


def test_combined_sample_paths_are_the_members_paths_pooled_and_the_quantiles_are_the_pools():
    forecasts = [forecast_with_samples(seed, draws) for seed, draws in ((0, 5), (1, 7), (2, 6))]
    levels = [0.1, 0.5, 0.9]
    forecast = combined(forecasts, levels)
    assert forecast.samples.shape == (3, 18, 4, 2)  # the draws of every member, 5 + 7 + 6
    assert torch.equal(forecast.samples, torch.cat([f.samples for f in forecasts], dim=1))
    pool = forecast.samples
    for position, level in enumerate(levels):  # (N, T, F) at each level, from the pool's 18 draws
        expected = torch.quantile(pool, level, dim=1)
        torch.testing.assert_close(forecast.quantiles[..., position], expected, rtol=0, atol=0)
    mean_of_points = torch.stack([f.point for f in forecasts]).mean(dim=0)
    torch.testing.assert_close(forecast.point, mean_of_points, rtol=0, atol=0)


def test_an_ensemble_forecasts_what_combining_its_members_forecasts_gives():
    models = members(distribution="normal", num_samples=5)
    ensemble = Ensemble(models)
    given = batch()
    with torch.no_grad():
        forecast = ensemble.forecast(given)
        expected = combined([model.forecast(given) for model in models], models[0].prediction_quantiles)
    torch.testing.assert_close(forecast.point, expected.point, rtol=0, atol=0)
    torch.testing.assert_close(forecast.samples, expected.samples, rtol=0, atol=0)
    assert forecast.samples.shape[1] == 15  # 3 members × 5 paths
    assert not torch.equal(models[0].forecast(given).point, models[1].forecast(given).point)  # members differ


def test_an_ensembles_prediction_is_what_a_models_predict_step_returns_for_the_combined_forecast():
    models = members()
    ensemble, given = Ensemble(models), batch()
    with torch.no_grad():
        prediction = ensemble.predict_step(given, 0)
        expected = prediction_of(given, combined([model.forecast(given) for model in models], []))
        single = models[0].predict_step(given, 0)
    assert prediction.keys() == expected.keys() == single.keys()
    for key in expected:
        torch.testing.assert_close(prediction[key], expected[key], rtol=0, atol=0)


def test_an_ensemble_has_what_backtest_and_the_forecast_writer_read_of_a_model():
    models = members(distribution="normal", prediction_quantiles=[0.25, 0.75], interval=0.5)
    ensemble = Ensemble(models)
    assert (ensemble.hparams.context_length, ensemble.hparams.horizon) == (8, 4)
    assert ensemble.hparams.predict_horizon is None
    assert ensemble.hparams.interval == 0.5
    assert ensemble.prediction_quantiles == [0.25, 0.75]


def test_an_ensembles_test_scores_are_those_of_its_combined_forecasts():
    models = members(distribution="normal", num_samples=5)
    ensemble, given = Ensemble(models), batch(windows=6)
    windows = [{key: value[row] for key, value in given.items()} for row in range(6)]
    (logged,) = quiet_trainer().test(ensemble, DataLoader(windows, batch_size=4), verbose=False)
    assert set(logged) == {f"test/{name}" for name in score_names(True)}
    with torch.no_grad():  # the loader's two batches (each its own draws), scored as one
        forecasts = [ensemble.forecast({key: value[part] for key, value in given.items()}) for part in SPLIT]
    samples, point = torch.cat([f.samples for f in forecasts]), torch.cat([f.point for f in forecasts])
    expected = forecast_scores(point, given["target"], given["loc"], given["scale"], samples, ensemble.hparams.interval)
    for name, values in expected.items():  # a mean over every value, logged in float32
        assert logged[f"test/{name}"] == pytest.approx(values.mean().item(), rel=1e-6), name


@pytest.mark.parametrize("probabilistic", [False, True])
def test_score_names_are_the_scores_forecast_scores_gives(probabilistic):
    given = batch()
    samples = torch.randn(3, 5, 4, 2, dtype=torch.float64) if probabilistic else None
    scores = forecast_scores(given["target"] + 1, given["target"], given["loc"], given["scale"], samples, 0.8)
    assert sorted(scores) == sorted(score_names(probabilistic))


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"horizon": 8}, "horizon=8 (member 0: 4)"),
        ({"context_length": 12}, "context_length=12 (member 0: 8)"),
        ({"n_targets": 3}, "n_targets=3 (member 0: 2)"),
        ({"distribution": "normal"}, "has_distribution=True (member 0: False)"),
    ],
)
def test_a_member_that_forecasts_something_else_is_refused_naming_it(settings, said):
    other = tiny_module(**settings)
    with pytest.raises(InputError) as refused:
        Ensemble([*members(2), other])
    assert str(refused.value) == (
        f"member 2 does not forecast what member 0 does: {said}; an ensemble's members forecast the same values from "
        "the same windows"
    )


def test_an_ensemble_of_one_is_refused():
    with pytest.raises(InputError, match="an ensemble needs at least two members; got 1"):
        Ensemble(members(1))


def test_an_ensemble_refuses_what_its_members_refuse_of_the_device_in_one_line():
    models = [*members(1), tiny_module(cuda_graph=True)]
    with pytest.raises(InputError, match="cuda_graph needs a CUDA device; this run is on cpu"):
        quiet_trainer(accelerator="cpu").test(Ensemble(models), DataLoader([{"context": torch.zeros(8, 2)}]))
