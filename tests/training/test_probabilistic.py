"""Probabilistic forecasts end to end: calibrated intervals on data whose true distribution is known, and the
files a user gets."""

import math

import lightning as L
import numpy as np
import pandas as pd
import pytest
import torch

from project.data import WindowDataModule
from project.errors import InputError
from project.model.distributions import Quantiles
from project.training import TeacherForcing
from project.training.calibration import IntervalCalibration
from project.training.module import Forecaster
from tests.helpers import adamw, cli, only_run, quiet_trainer, tiny_module, warmup_cosine

PHI, SIGMA = 0.8, 1.0


def gaussian_ar1(rows: int = 12_000, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    values = np.zeros(rows)
    for t in range(1, rows):
        values[t] = PHI * values[t - 1] + SIGMA * rng.normal()
    return pd.DataFrame({"y": values})


def true_crps(last: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """CRPS of the exact h-step predictive N(φʰ y, σ² (1 − φ²ʰ) / (1 − φ²)) of an AR(1)."""
    steps = torch.arange(1, target.shape[1] + 1, dtype=target.dtype).view(1, -1, 1)
    mean = PHI**steps * last
    std = SIGMA * torch.sqrt((1 - PHI ** (2 * steps)) / (1 - PHI**2))
    z = (target - mean) / std
    normal = torch.distributions.Normal(0.0, 1.0)
    return std * (z * (2 * normal.cdf(z) - 1) + 2 * normal.log_prob(z).exp() - 1 / math.sqrt(math.pi))


@pytest.mark.slow
def test_on_a_gaussian_ar1_the_80_percent_interval_covers_80_percent_and_crps_is_near_the_truths():
    L.seed_everything(0)
    datamodule = WindowDataModule(
        gaussian_ar1(),
        context_length=8,
        horizon=4,
        batch_size=64,
        scaling="none",
        eval_stride=2,
    )
    module = tiny_module(
        n_targets=1,
        distribution="normal",
        regime=TeacherForcing(),
        optimizer=adamw(3e-3),
        lr_scheduler=warmup_cosine(20),
        num_samples=200,
    )
    quiet_trainer(max_steps=400, limit_val_batches=0).fit(module, datamodule)
    (scores,) = quiet_trainer().test(module, datamodule, verbose=False)
    assert 0.75 <= scores["test/coverage"] <= 0.85
    truth = torch.cat([true_crps(b["context"][:, -1:], b["target"]) for b in datamodule.test_dataloader()]).mean()
    assert abs(scores["test/crps"] - truth.item()) <= 0.1 * truth.item()


def test_a_checkpoint_with_a_distribution_restores_it_and_predict_writes_its_quantiles(quantile_panel_run, tmp_path):
    checkpoint = quantile_panel_run
    restored = Forecaster.load_from_checkpoint(checkpoint)
    assert type(restored.distribution) is Quantiles
    assert restored.distribution.levels == [0.1, 0.5, 0.9]
    assert restored.regime.feedback == "sample"
    output = tmp_path / "forecast.csv"
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    forecast = pd.read_csv(output)
    assert list(forecast.columns[-4:]) == ["sales", "sales_q0.1", "sales_q0.5", "sales_q0.9"]
    assert (forecast["sales_q0.1"] <= forecast["sales_q0.5"]).all()
    assert (forecast["sales_q0.5"] <= forecast["sales_q0.9"]).all()


def test_a_checkpoint_written_before_interval_calibration_is_refused_in_one_line(tmp_path):
    """No compatibility shim for last week's layout: its weights do not fit, and the reader says so."""
    module = tiny_module(distribution="normal")
    trainer = quiet_trainer(max_steps=0)
    trainer.strategy.connect(module)
    path = tmp_path / "old.ckpt"
    trainer.save_checkpoint(path)
    checkpoint = torch.load(path, weights_only=False)
    del checkpoint["state_dict"]["interval_scale"]
    torch.save(checkpoint, path)
    with pytest.raises(InputError, match=r"its weights do not fit the settings it records \(Missing key\(s\)"):
        Forecaster.load_from_checkpoint(path)


def test_validation_and_test_log_crps_coverage_and_width_beside_the_point_metrics(quantile_panel_run):
    from project.training.runs import read_scalars

    logged = read_scalars(quantile_panel_run.parents[1])  # the run was tested after fitting
    for split in ("val", "test"):
        assert {f"{split}/crps", f"{split}/coverage", f"{split}/width", f"{split}/mse"} <= set(logged)
    assert "test/crps_original_units" in logged


def test_validation_calibrates_the_interval_to_hold_80_percent_of_its_targets():
    """Split conformal: the scale one validation finds makes the same forecasts cover 80% of its targets."""
    L.seed_everything(0)
    datamodule = WindowDataModule(gaussian_ar1(3000), context_length=8, horizon=4, batch_size=64, scaling="none")
    module = tiny_module(n_targets=1, distribution="normal", num_samples=50)  # untrained: badly calibrated
    calibrated = lambda: quiet_trainer(callbacks=[IntervalCalibration()])  # noqa: E731
    before = calibrated().validate(module, datamodule, verbose=False)[0]["val/coverage"]
    assert abs(before - 0.8) > 0.05
    assert module.interval_scale.item() != 1.0
    after = calibrated().validate(module, datamodule, verbose=False)[0]
    assert after["val/coverage"] == pytest.approx(0.8, abs=0.005)
    assert after["val/interval_scale"] == module.interval_scale.item()
    uncalibrated = tiny_module(n_targets=1, distribution="normal", num_samples=50)
    scores = quiet_trainer(callbacks=[IntervalCalibration(enabled=False)]).validate(uncalibrated, datamodule)[0]
    assert uncalibrated.interval_scale.item() == 1.0
    assert "val/interval_scale" not in scores


def test_calibration_widens_intervals_that_are_too_narrow_to_hold_80_percent():
    L.seed_everything(0)
    datamodule = WindowDataModule(gaussian_ar1(3000), context_length=8, horizon=4, batch_size=64, scaling="none")
    module = tiny_module(n_targets=1, distribution="normal", num_samples=50)
    module.interval_scale.fill_(0.05)  # paths squeezed to a twentieth of their spread
    calibrated = lambda: quiet_trainer(callbacks=[IntervalCalibration()])  # noqa: E731
    too_narrow = calibrated().validate(module, datamodule, verbose=False)[0]
    assert too_narrow["val/coverage"] < 0.3
    assert module.interval_scale.item() > 0.05 * 5
    fixed = calibrated().validate(module, datamodule, verbose=False)[0]
    assert fixed["val/coverage"] == pytest.approx(0.8, abs=0.005)
    assert fixed["val/width"] > 3 * too_narrow["val/width"]


def test_a_checkpoint_keeps_its_calibrated_scale_for_test_and_predict_from_python(tmp_path):
    """The scale lives in the model's weights: Forecaster.load_from_checkpoint (export, backtest, figures) uses it
    with no callback at all."""
    L.seed_everything(0)
    datamodule = WindowDataModule(gaussian_ar1(3000), context_length=8, horizon=4, batch_size=64, scaling="none")
    module = tiny_module(n_targets=1, distribution="normal", num_samples=50)
    trainer = quiet_trainer(callbacks=[IntervalCalibration()])
    trainer.validate(module, datamodule, verbose=False)
    trainer.save_checkpoint(tmp_path / "calibrated.ckpt")
    restored = Forecaster.load_from_checkpoint(tmp_path / "calibrated.ckpt")
    scale = module.interval_scale.item()
    assert restored.interval_scale.item() == scale != 1.0
    L.seed_everything(0)
    tested = quiet_trainer().test(restored, datamodule, verbose=False)[0]
    restored.interval_scale.fill_(1.0)
    L.seed_everything(0)
    as_drawn = quiet_trainer().test(restored, datamodule, verbose=False)[0]
    assert tested["test/width"] == pytest.approx(scale * as_drawn["test/width"], rel=1e-4)


@pytest.mark.slow
def test_interval_calibration_is_removed_in_one_config_line(quantile_panel_run, tmp_path):
    from project.training.runs import read_scalars

    for enabled in ("true", "false"):
        assert (
            cli(
                "validate",
                f"--ckpt_path={quantile_panel_run}",
                f"--trainer.default_root_dir={tmp_path / enabled}",
                "--trainer.limit_val_batches=2",
                f"--interval_calibration.enabled={enabled}",
            )
            == 0
        )
        logged = read_scalars(only_run(tmp_path / enabled, "lightning_logs"))
        assert "val/coverage" in logged
        assert ("val/interval_scale" in logged) == (enabled == "true")


def test_a_checkpoint_records_whether_its_fit_calibrated_the_intervals(quantile_panel_run):
    """What a refit (backtest) reads to calibrate as the fit did."""
    checkpoint = torch.load(quantile_panel_run, weights_only=True)
    assert IntervalCalibration.enabled_in(checkpoint)
    checkpoint["callbacks"][IntervalCalibration.__qualname__] = IntervalCalibration(enabled=False).state_dict()
    assert not IntervalCalibration.enabled_in(checkpoint)
