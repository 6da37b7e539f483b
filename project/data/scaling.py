"""Scaling fitted on training rows only; the statistics travel in every checkpoint, keyed by series id, so that
``validate``, ``test`` and ``predict`` scale exactly as training did, on the same data or new data of the same series.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Literal

import numpy as np

from project.data.panel import Panel
from project.errors import InputError

Scaling = Literal["per_series", "global", "mean_abs", "none"]
PER_SERIES: tuple[Scaling, ...] = ("per_series", "mean_abs")  # modes whose statistics are kept per series id


@dataclass
class Scaler:
    """``(x - loc[s]) / scale[s]`` for the first ``loc.shape[1]`` columns of the panel, per series ``s``;
    ``static_loc``/``static_scale`` standardise the numeric static covariates across series."""

    mode: Scaling
    loc: np.ndarray  # (series, scaled columns) float64
    scale: np.ndarray
    static_loc: np.ndarray  # (static reals,)
    static_scale: np.ndarray

    @classmethod
    def fit(cls, panel: Panel, train_rows: np.ndarray, mode: Scaling) -> Scaler:
        """Statistics of the first ``train_rows[s]`` rows of each series s (its training rows). A series with fewer
        than two (it starts after training) takes those of all series' training rows, never its own later rows."""
        columns = panel.roles.scaled_columns
        means, squared_deviations, absolute_means = np.zeros((3, panel.n_series, columns))
        counts = np.zeros(panel.n_series)
        for series in range(panel.n_series):
            start = int(panel.series_start[series])
            block = np.asarray(panel.values[start : start + int(train_rows[series]), :columns], dtype=np.float64)
            if len(block):
                means[series] = block.mean(0)
                squared_deviations[series] = ((block - means[series]) ** 2).sum(0)
                absolute_means[series] = np.abs(block).mean(0)
            counts[series] = len(block)
        # All series' training rows together, combined from the per-series sums (Chan et al.'s parallel variance).
        total = max(1.0, counts.sum())
        overall_mean = (counts[:, None] * means).sum(0) / total
        overall_deviations = squared_deviations.sum(0) + (counts[:, None] * (means - overall_mean) ** 2).sum(0)
        overall_std = _std(overall_deviations / total, overall_mean)
        loc, scale = np.zeros((panel.n_series, columns)), np.ones((panel.n_series, columns))  # as for "none"
        if mode == "global":
            loc, scale = np.tile(overall_mean, (panel.n_series, 1)), np.tile(overall_std, (panel.n_series, 1))
        elif mode == "mean_abs":
            # A series without training rows, or with only zeros there, takes all series' mean absolute value.
            overall_absolute = (counts[:, None] * absolute_means).sum(0) / total
            scale = np.where(absolute_means > 0, absolute_means, np.where(overall_absolute > 0, overall_absolute, 1.0))
        elif mode != "none":
            enough = counts[:, None] >= 2
            loc = np.where(enough, means, overall_mean)
            own_std = _std(squared_deviations / np.maximum(counts, 1)[:, None], means)
            scale = np.where(enough, own_std, overall_std)
        static = panel.static_real.astype(np.float64)
        static_loc, static_scale = np.zeros(static.shape[1]), np.ones(static.shape[1])
        if mode != "none" and len(static):
            static_loc, static_scale = static.mean(0), _std(static.var(0), static.mean(0))
        return cls(mode, loc, scale, static_loc, static_scale)

    def state_dict(self, panel: Panel) -> dict:
        kept = slice(None) if self.mode in PER_SERIES else slice(1)  # one row when every series shares it
        state = {"mode": self.mode, "static_loc": self.static_loc.tolist(), "static_scale": self.static_scale.tolist()}
        state["loc"], state["scale"] = self.loc[kept].tolist(), self.scale[kept].tolist()
        if self.mode in PER_SERIES:
            state["series"] = [series_key(panel, s) for s in range(panel.n_series)]
        return state

    @classmethod
    def from_state(cls, state: dict, panel: Panel, train_rows: np.ndarray) -> Scaler:
        """The checkpoint's statistics for ``panel``'s series, matched by id; an unseen series is scaled by its own
        training rows, with a warning. Statistics that cannot scale the panel are refused in one line: not finite, a
        scale not positive, or not one row (a mode every series shares) or one per recorded series, of one value per
        scaled column."""
        mode = state.get("mode")
        if mode not in ("per_series", "global", "mean_abs", "none"):
            raise InputError(f"scaler.mode must be per_series, global, mean_abs or none; got {mode!r:.40}")
        series = state.get("series") if mode in PER_SERIES else [""]
        if not (isinstance(series, list) and series and all(isinstance(key, str) for key in series)):
            raise InputError("scaler.series must list the series ids the statistics belong to")
        rows, columns, statics = len(series), panel.roles.scaled_columns, panel.static_real.shape[1]
        loc, scale = _statistics(state, "loc", (rows, columns)), _statistics(state, "scale", (rows, columns), True)
        static = (_statistics(state, "static_loc", (statics,)), _statistics(state, "static_scale", (statics,), True))
        if mode not in PER_SERIES:
            return cls(mode, np.tile(loc, (panel.n_series, 1)), np.tile(scale, (panel.n_series, 1)), *static)
        row_of = {key: row for row, key in enumerate(series)}
        rows = np.array([row_of.get(series_key(panel, s), -1) for s in range(panel.n_series)])
        own = cls.fit(panel, train_rows, mode)
        unseen = rows < 0
        if unseen.any():
            warnings.warn(
                f"{int(unseen.sum())} of {panel.n_series} series are not in the checkpoint's scaling statistics; "
                "they are scaled by their own training rows",
                stacklevel=2,
            )
        loc = np.where(unseen[:, None], own.loc, loc[np.maximum(rows, 0)])
        scale = np.where(unseen[:, None], own.scale, scale[np.maximum(rows, 0)])
        return cls(mode, loc, scale, *static)


def _statistics(state: dict, name: str, shape: tuple[int, ...], positive: bool = False) -> np.ndarray:
    """The recorded statistics ``name`` as an array of ``shape``: finite numbers (positive ones for a scale)."""
    try:
        values = np.asarray(state.get(name), dtype=np.float64)
    except (TypeError, ValueError):
        values = np.full(0, np.nan)
    kind = "finite numbers > 0" if positive else "finite numbers"
    if values.shape != shape:
        raise InputError(f"scaler.{name} must be {kind} of shape {shape} (series, columns); got shape {values.shape}")
    bad = ~np.isfinite(values) | ((values <= 0) if positive else False)
    if bad.any():
        where = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"scaler.{name} must be {kind}; got {values[where]} at {where}")
    return values


def series_key(panel: Panel, series: int) -> str:
    """A series' id as a string key (its id values joined by '|'); '' for a single series."""
    return "|".join(str(value) for value in panel.ids.iloc[series].tolist())


def _std(variance: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """Standard deviations, with 1 for constant columns (which would divide by zero); a deviation below 1e-10 of
    the mean is rounding in the mean of a constant, not variation."""
    std = np.sqrt(np.maximum(variance, 0.0))
    return np.where(std > 1e-10 * np.abs(mean), std, 1.0)
