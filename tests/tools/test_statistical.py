"""The statistical floor (an optional tool: it needs statsforecast, the ``baselines`` extra)."""

import numpy as np
import pytest

from project.errors import InputError
from project.tools.m4 import scores

pytest.importorskip("statsforecast")

from project.tools.statistical import STATISTICAL_MODELS, forecast_origins, panel_forecasts


def seasonal_panel(n_series: int = 3, length: int = 96, season: int = 12) -> list[np.ndarray]:
    """Noisy seasonal series at different levels: what AutoETS and AutoTheta forecast well."""
    rng = np.random.default_rng(0)
    steps = np.arange(length)
    return [
        level * (1 + 0.3 * np.sin(2 * np.pi * steps / season)) + rng.normal(0, 0.05 * level, length)
        for level in (10.0, 100.0, 1000.0)[:n_series]
    ]


@pytest.mark.parametrize("name", ["AutoETS", "AutoTheta"])
def test_a_fit_on_the_training_rows_beats_repeat_last_on_later_origins(name):
    panel, horizon, train_length = seasonal_panel(), 6, 72
    origins = [72, 78, 84, 90]
    forecasts, seconds = panel_forecasts(name, panel, [train_length] * 3, [origins] * 3, horizon, 12, progress=None)
    actual = np.stack([[values[o : o + horizon] for o in origins] for values in panel]).reshape(-1, horizon)
    model = np.stack(forecasts).reshape(-1, horizon)
    last = np.stack([[np.repeat(values[o - 1], horizon) for o in origins] for values in panel]).reshape(-1, horizon)
    insample = [values[:train_length] for values in panel for _ in origins]
    assert scores(model, actual, insample)[0] < scores(last, actual, insample)[0]
    assert seconds > 0


def test_a_forecast_never_depends_on_its_own_targets():
    (values,) = seasonal_panel(n_series=1)
    changed = values.copy()
    changed[80:] = -values[80:]  # everything from the second origin on
    before, after = (forecast_origins("AutoETS", v, 72, [72, 80], 6, 12) for v in (values, changed))
    np.testing.assert_array_equal(before, after)


def test_an_origin_inside_the_training_rows_is_refused():
    (values,) = seasonal_panel(n_series=1)
    with pytest.raises(InputError, match="training rows"):
        forecast_origins("AutoETS", values, 72, [60], 6, 12)


def test_the_models_are_statsforecasts():
    from statsforecast import models

    assert all(hasattr(models, name) for name in STATISTICAL_MODELS)
