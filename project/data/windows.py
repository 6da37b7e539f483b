"""Forecasting windows over a ``Panel``, as batches of named tensors.

A window is ``context_length`` rows of one series followed by ``horizon`` rows of the same series, never straddling
two series. Windows are not stored: ``__getitem__`` slices the panel's matrix (a view) and standardises that slice.

The batch format, documented once (every tensor float32 unless noted; N windows, S context, T horizon, F targets):

    context            (N, S, F)      targets of the context window, scaled
    target             (N, T, F)      targets to forecast, scaled (absent when forecasting into the unknown)
    past_covariates    (N, S, C_p)    observed covariates over the context, scaled          (when there are any)
    future_covariates  (N, S + T, C_f) known covariates over context and horizon, scaled,
                                      calendar features last                                (when there are any)
    static_categorical (N, C_c) int64 category codes, 0 = unknown                          (when there are any)
    static_real        (N, C_r)       numeric static covariates, scaled across series       (when there are any)
    series             (N,) int64     index of the series in the panel
    window             (N,) int64     index of the window in its dataset
    loc, scale         (N, 1, F)      the scaling of the targets: original = scaled * scale + loc
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torch.utils.data import Dataset

from project.data.calendar import calendar_features
from project.data.panel import Panel
from project.data.scaling import Scaler, series_key
from project.errors import InputError


class PanelWindows(Dataset):
    """Every window of one split: ``count[s]`` windows in series s, the first with its target at local row
    ``first_target[s]``, each ``stride`` rows after the previous one."""

    def __init__(
        self,
        panel: Panel,
        scaler: Scaler,
        context_length: int,
        horizon: int,
        first_target: np.ndarray,
        count: np.ndarray,
        stride: int,
    ) -> None:
        self.panel, self.scaler = panel, scaler
        self.context_length, self.horizon, self.stride = context_length, horizon, stride
        self.first_target, self.count = first_target.astype(np.int64), count.astype(np.int64)
        self.cumulative = np.cumsum(self.count)

    def __len__(self) -> int:
        return int(self.cumulative[-1]) if len(self.cumulative) else 0

    def locate(self, index: int) -> tuple[int, int]:
        """(series, local row of the target's first step) of window ``index``."""
        if not 0 <= index < len(self):
            raise IndexError(f"window {index} out of range for {len(self)} windows")
        series = int(np.searchsorted(self.cumulative, index, side="right"))
        before = int(self.cumulative[series - 1]) if series else 0
        return series, int(self.first_target[series]) + (index - before) * self.stride

    def target_timestamps(self, index: int) -> pd.DatetimeIndex | None:
        series, target_start = self.locate(index)
        timestamps = self.panel.series_timestamps(series)
        return None if timestamps is None else timestamps[target_start : target_start + self.horizon]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        series, target_start = self.locate(index)
        start = int(self.panel.series_start[series]) + target_start - self.context_length
        end = start + self.context_length + self.horizon
        return _window(self.panel, self.scaler, series, index, start, end, self.context_length)


class ForecastOrigins(Dataset):
    """One window per series whose context is its last ``context_length`` observed rows: forecasts into the
    unknown future. Known future covariates come from the series' future rows (rows after its last target), the
    calendar from the dates that follow; a missing one is an error naming the series and date."""

    def __init__(self, panel: Panel, scaler: Scaler, context_length: int, horizon: int, source_name: str) -> None:
        self.panel, self.scaler = panel, scaler
        self.context_length, self.horizon = context_length, horizon
        self.series = np.flatnonzero(panel.observed >= context_length)
        short = np.flatnonzero(panel.observed < context_length)
        if len(short):  # left out of the forecasts, and said so once
            named = ", ".join(repr(series_key(panel, int(series))) for series in short[:5])
            more = f" and {len(short) - 5} more" if len(short) > 5 else ""
            warnings.warn(
                f"{source_name}: {len(short)} series have fewer than {context_length} observed rows (the context "
                f"length) and are not forecast: {named}{more}",
                stacklevel=2,
            )
        roles = panel.roles
        first = len(roles.targets) + len(roles.past)
        for index, series in enumerate(self.series if roles.future else ()):
            end = int(panel.series_start[series] + panel.observed[series])
            known = np.full((horizon, len(roles.future)), np.nan)  # steps past the series' last row are missing
            block = panel.values[end : min(end + horizon, int(panel.series_start[series + 1]))]
            known[: len(block)] = block[:, first : first + len(roles.future)]
            missing = np.argwhere(~np.isfinite(known))
            if len(missing):
                step, column = (int(i) for i in missing[0])
                when = self.target_timestamps(index)
                raise InputError(
                    f"{source_name}: future covariate '{roles.future[column]}' is missing for step {step + 1} of the "
                    f"{horizon} to forecast{'' if when is None else f' ({when[step]})'}"
                    f"{panel.describe_series(int(series))}; add rows after the last target with the known covariates "
                    "and empty targets"
                )

    def __len__(self) -> int:
        return len(self.series)

    def target_timestamps(self, index: int) -> pd.DatetimeIndex | None:
        series = int(self.series[index])
        timestamps = self.panel.series_timestamps(series)
        if timestamps is None or self.panel.offset is None:
            return None
        last = timestamps[int(self.panel.observed[series]) - 1]
        return pd.date_range(start=last, periods=self.horizon + 1, freq=self.panel.offset)[1:]

    def __getitem__(self, index: int) -> dict[str, Tensor]:
        series = int(self.series[index])
        end = int(self.panel.series_start[series] + self.panel.observed[series])
        roles = self.panel.roles
        item = _window(self.panel, self.scaler, series, index, end - self.context_length, end, self.context_length)
        if roles.future or roles.calendar:
            # The series' rows after its last target; the calendar comes from the dates and may reach past them.
            future_end = min(end + self.horizon, int(self.panel.series_start[series + 1]))
            future = _scaled_rows(self.panel, self.scaler, series, end, future_end)
            known = np.zeros((self.horizon, item["future_covariates"].shape[1]), dtype=np.float32)
            known[: len(future)] = future[:, len(roles.targets) + len(roles.past) :]
            if roles.calendar:
                known[:, -len(roles.calendar) :] = calendar_features(self.target_timestamps(index), self.panel.offset)
            item["future_covariates"] = torch.cat([item["future_covariates"], torch.from_numpy(known)], dim=0)
        return item


def split_windows(
    observed_end: np.ndarray, split_start: np.ndarray, context_length: int, horizon: int, stride: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per series: the local row of the first window's target and the number of windows whose targets lie in
    rows ``[split_start, observed_end)``. Contexts may reach back before ``split_start`` but not before row 0.
    Windows are anchored at the end: the last target ends on the split's last row; a ``stride`` > 1 skips the oldest."""
    earliest = np.maximum(split_start, context_length)
    latest = observed_end - horizon
    count = np.where(latest >= earliest, (latest - earliest) // stride + 1, 0)
    first = latest - (count - 1) * stride
    return first.astype(np.int64), count.astype(np.int64)


def _scaled_rows(panel: Panel, scaler: Scaler, series: int, start: int, end: int) -> np.ndarray:
    """Rows ``[start, end)`` of the matrix, the scaled columns standardised with the series' statistics (a copy)."""
    rows = np.array(panel.values[start:end], dtype=np.float32)
    scaled = panel.roles.scaled_columns
    rows[:, :scaled] = (rows[:, :scaled] - scaler.loc[series]) / scaler.scale[series]
    return rows


def _window(
    panel: Panel, scaler: Scaler, series: int, index: int, start: int, end: int, context_length: int
) -> dict[str, Tensor]:
    """Window ``index`` as the batch format above: rows ``[start, end)`` of ``series``, context then target."""
    roles = panel.roles
    targets, past = len(roles.targets), len(roles.past)
    values = torch.from_numpy(_scaled_rows(panel, scaler, series, start, end))
    item = {"context": values[:context_length, :targets]}
    if len(values) > context_length:
        item["target"] = values[context_length:, :targets]
    if roles.past:
        item["past_covariates"] = values[:context_length, targets : targets + past]
    if roles.future or roles.calendar:
        item["future_covariates"] = values[:, targets + past :]
    if roles.static_categorical:
        item["static_categorical"] = torch.from_numpy(panel.static_categorical[series])
    if roles.static_real:
        static = (panel.static_real[series] - scaler.static_loc) / scaler.static_scale
        item["static_real"] = torch.from_numpy(static.astype(np.float32))
    item["series"] = torch.tensor(series)
    item["window"] = torch.tensor(index)
    item["loc"] = torch.from_numpy(scaler.loc[series, :targets].astype(np.float32)).unsqueeze(0)
    item["scale"] = torch.from_numpy(scaler.scale[series, :targets].astype(np.float32)).unsqueeze(0)
    return item
