"""Pictures of forecasts, logged to TensorBoard during training (``ForecastFigures``) and drawn from a checkpoint by
the optional tool ``python -m project.tools.figure``."""

from __future__ import annotations

import lightning as L
import torch
from matplotlib.figure import Figure
from torch import Tensor
from torch.utils.data import default_collate

from project.domains import NonNegativeInt, restricted_number_type
from project.training.metrics import central_interval, unscale


def plot_forecasts(
    context: Tensor,
    target: Tensor,
    forecast: Tensor,
    channel_names: list[str],
    band: tuple[Tensor, Tensor] | None = None,
    window_names: list[str] | None = None,
    band_name: str = "interval",
) -> Figure:
    """One row per window, one column per channel: the context, the truth after it, the forecast (the median
    of a distribution) and, when given, the band between its lower and upper quantiles."""
    n_windows, context_length, n_channels = context.shape
    # A bare Figure, not pyplot: no global state and no display backend, so it works on any server.
    figure = Figure(figsize=(2.6 * n_channels, 1.9 * n_windows))
    axes = figure.subplots(n_windows, n_channels, squeeze=False, sharex=True)
    past = range(-context_length + 1, 1)
    future = range(1, target.shape[1] + 1)
    for window in range(n_windows):
        for channel in range(n_channels):
            axis = axes[window, channel]
            axis.plot(past, context[window, :, channel], color="0.4", linewidth=1)
            axis.plot(future, target[window, :, channel], color="black", linewidth=1, label="truth")
            if band is not None:
                ends = [end[window, :, channel] for end in band]  # lower, upper
                axis.fill_between(future, *ends, color="tab:red", alpha=0.2, linewidth=0, label=band_name)
            axis.plot(future, forecast[window, :, channel], color="tab:red", linewidth=1.2, label="forecast")
            axis.axvline(0.5, color="0.8", linewidth=0.8)
            if window == 0:
                axis.set_title(channel_names[channel], fontsize=9)
            if channel == 0 and window_names:
                axis.set_ylabel(window_names[window], fontsize=7)
            axis.tick_params(labelsize=7)
    axes[0, -1].legend(fontsize=7, loc="upper right")
    figure.tight_layout()
    return figure


def forecast_figure(model: L.LightningModule, datamodule, split: str, num_windows: int) -> Figure:
    """Free-running forecasts of ``num_windows`` windows spread evenly over ``split``, in original units."""
    windows = datamodule.split(split)
    picks = torch.linspace(0, len(windows) - 1, min(num_windows, len(windows))).round().long().tolist()
    batch = {key: value.to(model.device) for key, value in default_collate([windows[i] for i in picks]).items()}
    with torch.no_grad():
        forecast = model.forecast(batch, batch["target"].shape[1])
    loc, scale = batch["loc"].cpu(), batch["scale"].cpu()
    original = lambda x: unscale(x.float().cpu(), loc, scale)  # noqa: E731
    band = None
    if forecast.samples is not None:
        band = tuple(original(end) for end in central_interval(forecast.samples.float(), model.hparams.interval))
    names = None
    if datamodule.panel.roles.ids:
        names = [datamodule.panel.describe_series(int(s)).removeprefix(" in series ") for s in batch["series"]]
    context, target, point = (original(batch["context"]), original(batch["target"]), original(forecast.point))
    label = f"{model.hparams.interval:.0%} interval"
    return plot_forecasts(context, target, point, datamodule.target_names, band, names, label)


# One subplot row per window: more than 50 rows make a figure nobody reads.
FigureWindows = restricted_number_type("FigureWindows", int, [(">=", 1), ("<=", 50)])


class ForecastFigures(L.Callback):
    """Every ``every_n_epochs`` validation epochs, log a figure of free-running forecasts for fixed windows.

    Args:
        every_n_epochs: Epochs between figures; 0 turns figures off.
        num_windows: Validation windows to draw, spread evenly over the validation split (the same each time).
    """

    def __init__(self, every_n_epochs: NonNegativeInt = 1, num_windows: FigureWindows = 3) -> None:
        self.every_n_epochs, self.num_windows = every_n_epochs, num_windows

    def on_validation_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if not self.every_n_epochs or trainer.sanity_checking or trainer.current_epoch % self.every_n_epochs:
            return
        if not trainer.is_global_zero or not hasattr(getattr(trainer.logger, "experiment", None), "add_figure"):
            return
        figure = forecast_figure(pl_module, trainer.datamodule, "val", self.num_windows)
        trainer.logger.experiment.add_figure("val/forecasts", figure, global_step=trainer.global_step)
