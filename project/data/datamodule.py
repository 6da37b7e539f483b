"""A table of timestamps and numeric channels, as forecasting windows: files, cleaning, splits, scaling, loaders.

Windows are views into one tensor of the whole series (``Tensor.unfold``), so memory stays about the size of
the series whatever the window length. Splits are chronological; a validation or test window may take its
context from rows before its split, never its target. Scaling is fitted on training rows only and travels in
the checkpoint, so ``validate``/``test``/``predict`` scale exactly as training did.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

import lightning as L
import numpy as np
import pandas as pd
import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset

from project.data.synthetic import synthetic_series


class InputError(ValueError):
    """Bad user input. The message is one line naming the file, column or argument and what was expected."""


class StandardScaler:
    """Per-channel standardisation ``(x - mean) / std`` with statistics from the training rows only."""

    def __init__(self, mean: Tensor, std: Tensor) -> None:
        self.mean, self.std = mean, std

    @classmethod
    def fit(cls, rows: Tensor) -> StandardScaler:
        # A constant channel would divide by zero; leave it unscaled instead.
        std = rows.std(dim=0, unbiased=False)
        return cls(rows.mean(dim=0), torch.where(std > 0, std, torch.ones_like(std)))

    def transform(self, values: Tensor) -> Tensor:
        return (values - self.mean.to(values)) / self.std.to(values)

    def inverse_transform(self, values: Tensor) -> Tensor:
        return values * self.std.to(values) + self.mean.to(values)


class WindowDataset(Dataset):
    """(context, target) pairs of shapes (context_length, F) and (horizon, F), all views into ``series``.

    Windows are anchored at the end of ``series``: the last window's target ends on its last row, and with
    ``stride`` > 1 it is the oldest rows that are skipped.
    """

    def __init__(self, series: Tensor, context_length: int, horizon: int, stride: int = 1) -> None:
        window_length = context_length + horizon
        self.first_row = (len(series) - window_length) % stride
        self.windows = series[self.first_row :].unfold(0, window_length, stride)  # (W, F, window_length), a view
        self.context_length, self.stride = context_length, stride

    def __len__(self) -> int:
        return self.windows.shape[0]

    def __getitem__(self, index: int) -> tuple[Tensor, Tensor]:
        window = self.windows[index].T  # (window_length, F)
        return window[: self.context_length], window[self.context_length :]

    def target_start(self, index: int) -> int:
        """Row of ``series`` where window ``index``'s target begins."""
        return self.first_row + index * self.stride + self.context_length


class ContextDataset(Dataset):
    """The last ``context_length`` rows of a series: one input for a forecast into the unknown future."""

    def __init__(self, series: Tensor, context_length: int) -> None:
        self.context = series[-context_length:]

    def __len__(self) -> int:
        return 1

    def __getitem__(self, index: int) -> tuple[Tensor]:
        return (self.context,)


class WindowDataModule(L.LightningDataModule):
    """Reads, checks, splits and scales a multichannel time series and serves forecasting windows.

    Args:
        source: A CSV or Parquet file, or a ``pandas.DataFrame`` (from Python). Empty: the embedded synthetic
            series (five hourly channels, see ``project.data.synthetic``), so that nothing needs downloading.
        time_column: Column of timestamps. Parsed and checked: unique, increasing; irregular spacing is reported.
            Needed for splitting by date and for timestamps in prediction files.
        feature_columns: Channels to model, in order. Empty: every numeric column except ``time_column``.
        context_length: Time steps the model sees before the forecast (the look-back window).
        horizon: Time steps to forecast.
        stride: Step between consecutive training windows.
        eval_stride: Step between consecutive validation and test windows (1: every window, as benchmarks do).
        batch_size: Windows per batch and per device.
        num_workers: DataLoader worker processes.
        train_fraction: Share of rows, from the start, for training (when not splitting by date).
        val_fraction: Share of rows after the training rows for validation.
        test_fraction: Share of rows after the validation rows for testing; what is left after it is unused.
        val_start: First timestamp of the validation split; with ``test_start`` it replaces the fractions.
        test_start: First timestamp of the test split.
        test_end: Timestamp after the last test row (exclusive). Empty: the end of the data.
        fill_missing: What to do with missing or infinite values: ``none`` (an error naming the column and row),
            ``ffill`` (carry the last valid value forward) or ``interpolate`` (linear in time).
        scale: Standardise each channel with the training rows' mean and standard deviation.
        predict_windows: What ``predict`` forecasts: ``last`` (the future after the last row) or ``test`` (every
            test window, for inspection against the truth).
        synthetic_rows: Length of the embedded synthetic series, when ``source`` is empty.
    """

    def __init__(
        self,
        source: str | Path | pd.DataFrame | None = None,
        time_column: str | None = None,
        feature_columns: list[str] | None = None,
        context_length: int = 12,
        horizon: int = 12,
        stride: int = 1,
        eval_stride: int = 1,
        batch_size: int = 64,
        num_workers: int = 0,
        train_fraction: float = 0.7,
        val_fraction: float = 0.1,
        test_fraction: float = 0.2,
        val_start: str | None = None,
        test_start: str | None = None,
        test_end: str | None = None,
        fill_missing: Literal["none", "ffill", "interpolate"] = "none",
        scale: bool = True,
        predict_windows: Literal["last", "test"] = "last",
        synthetic_rows: int = 10_000,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["source"])
        for name in ("context_length", "horizon", "stride", "eval_stride", "batch_size", "synthetic_rows"):
            _check_positive(name, locals()[name])
        if num_workers < 0:
            raise InputError(f"num_workers must be >= 0; got {num_workers}")
        self.context_length, self.horizon = context_length, horizon
        self.stride, self.eval_stride = stride, eval_stride
        self.batch_size, self.num_workers = batch_size, num_workers
        self.predict_windows = predict_windows
        self.scale = scale

        if source is None:
            frame, self.source_name = synthetic_series(synthetic_rows), "synthetic data"
            time_column = time_column or "timestamp"
        elif isinstance(source, pd.DataFrame):
            frame, self.source_name = source, "the DataFrame"
        else:
            frame, self.source_name = _read_table(Path(source)), str(source)

        # The usual step between timestamps dates forecasts past the last row.
        self.timestamps, self.time_step = (
            (None, None) if time_column is None else self._parse_timestamps(frame, time_column)
        )
        self.feature_names = self._feature_columns(frame, feature_columns, time_column)
        values = self._clean(frame[self.feature_names], fill_missing)
        self.raw = torch.from_numpy(values)  # (rows, F) float32, in original units
        self.boundaries = self._split_rows(train_fraction, val_fraction, test_fraction, val_start, test_start, test_end)
        self.scaler: StandardScaler | None = None
        self.series: Tensor | None = None  # (rows, F), scaled

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    # -- Lightning hooks ---------------------------------------------------------------------------------------

    def setup(self, stage: str | None = None) -> None:
        if self.scaler is None:  # restored from a checkpoint otherwise (load_state_dict)
            train_end = self.boundaries[0]
            self._use_scaler(self._fitted_scaler(self.raw[:train_end]))

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.split("train", self.stride), shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.split("val", self.eval_stride))

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.split("test", self.eval_stride))

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.predict_dataset())

    def state_dict(self) -> dict:
        return {
            "feature_names": list(self.feature_names),
            "scaler_mean": self.scaler.mean.tolist(),
            "scaler_std": self.scaler.std.tolist(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        trained_on = state_dict["feature_names"]
        if trained_on != self.feature_names:
            raise InputError(
                f"{self.source_name}: the checkpoint was trained on columns {trained_on}; "
                f"the data has {self.feature_names}"
            )
        mean, std = (torch.tensor(state_dict[key], dtype=torch.float32) for key in ("scaler_mean", "scaler_std"))
        self._use_scaler(StandardScaler(mean, std))

    # -- Windows -----------------------------------------------------------------------------------------------

    def split(self, name: Literal["train", "val", "test"], stride: int = 1) -> WindowDataset:
        """The windows whose targets lie in split ``name``; contexts may reach back into the previous split."""
        start, end = self.split_rows(name)
        return WindowDataset(
            self._scaled()[self._context_start(start) : end], self.context_length, self.horizon, stride
        )

    def split_rows(self, name: Literal["train", "val", "test"]) -> tuple[int, int]:
        """Rows ``[start, end)`` whose values are targets of split ``name``."""
        train_end, val_end, test_end = self.boundaries
        return {"train": (0, train_end), "val": (train_end, val_end), "test": (val_end, test_end)}[name]

    def predict_dataset(self) -> Dataset:
        if self.predict_windows == "test":
            return self.split("test", self.eval_stride)
        return ContextDataset(self._scaled(), self.context_length)

    def forecast_timestamps(self, window: int) -> pd.DatetimeIndex | None:
        """Timestamps of the ``horizon`` forecast steps of prediction window ``window`` (None without a time column)."""
        if self.timestamps is None:
            return None
        if self.predict_windows == "last":
            last = self.timestamps.iloc[-1]
            return pd.DatetimeIndex([last + self.time_step * (i + 1) for i in range(self.horizon)])
        target_start = self._context_start(self.split_rows("test")[0]) + self.predict_dataset().target_start(window)
        return pd.DatetimeIndex(self.timestamps.iloc[target_start : target_start + self.horizon])

    def inverse_transform(self, values: Tensor) -> Tensor:
        """Scaled values (…, F) back in the original units of each channel."""
        return self.scaler.inverse_transform(values)

    # -- Internals ---------------------------------------------------------------------------------------------

    def _context_start(self, split_start: int) -> int:
        """Evaluation windows may take their context from the rows before their split; training windows may not."""
        return max(0, split_start - self.context_length)

    def _fitted_scaler(self, rows: Tensor) -> StandardScaler:
        if self.scale:
            return StandardScaler.fit(rows)
        return StandardScaler(torch.zeros(self.n_features), torch.ones(self.n_features))

    def _use_scaler(self, scaler: StandardScaler) -> None:
        self.scaler = scaler
        self.series = scaler.transform(self.raw)

    def _scaled(self) -> Tensor:
        if self.series is None:
            self.setup()
        return self.series

    def _loader(self, dataset: Dataset, shuffle: bool = False) -> DataLoader:
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
        )

    def _parse_timestamps(self, frame: pd.DataFrame, column: str) -> tuple[pd.Series, pd.Timedelta | None]:
        """The parsed, checked time column and its most common step."""
        _check_columns_exist(self.source_name, frame, [column])
        parsed = pd.to_datetime(frame[column], errors="coerce")
        if parsed.isna().any():
            row = _first(parsed.isna())
            raise InputError(
                f"{self.source_name}: column '{column}' must hold timestamps; row {row} has {frame[column].iloc[row]!r}"
            )
        steps = parsed.diff().iloc[1:]  # steps.iloc[i] leads to row i + 1
        if (steps == pd.Timedelta(0)).any():
            row = _first(steps == pd.Timedelta(0)) + 1
            raise InputError(
                f"{self.source_name}: column '{column}' has duplicate timestamps; row {row} repeats {parsed.iloc[row]}"
            )
        if (steps < pd.Timedelta(0)).any():
            row = _first(steps < pd.Timedelta(0)) + 1
            raise InputError(
                f"{self.source_name}: column '{column}' must be sorted in increasing time; row {row} "
                f"({parsed.iloc[row]}) comes before row {row - 1} ({parsed.iloc[row - 1]})"
            )
        usual = steps.mode().iloc[0] if len(steps) else None
        irregular = steps != usual
        if irregular.any():
            row = _first(irregular) + 1
            warnings.warn(
                f"{self.source_name}: column '{column}' is not regularly spaced: {int(irregular.sum())} steps differ "
                f"from the usual {usual}, first before row {row} ({parsed.iloc[row]})",
                stacklevel=3,
            )
        return parsed.reset_index(drop=True), usual

    def _feature_columns(self, frame: pd.DataFrame, requested: list[str] | None, time_column: str | None) -> list[str]:
        if requested is not None:
            if not requested:
                raise InputError("feature_columns must name at least one column; got an empty list")
            _check_columns_exist(self.source_name, frame, requested)
            for column in requested:
                if not _is_numeric(frame[column]):
                    raise InputError(
                        f"{self.source_name}: column '{column}' must be numeric; got dtype {frame[column].dtype}"
                    )
            return list(requested)
        numeric = [column for column in frame.columns if column != time_column and _is_numeric(frame[column])]
        if not numeric:
            raise InputError(f"{self.source_name}: expected at least one numeric column; found none")
        return [str(column) for column in numeric]

    def _clean(self, features: pd.DataFrame, fill_missing: str) -> np.ndarray:
        values = features.to_numpy(dtype=np.float64, copy=True)
        missing = ~np.isfinite(values)
        if missing.any():
            if fill_missing == "none":
                row, channel = (int(i) for i in np.argwhere(missing)[0])
                when = "" if self.timestamps is None else f" ({self.timestamps.iloc[row]})"
                raise InputError(
                    f"{self.source_name}: column '{self.feature_names[channel]}' has a missing or infinite value "
                    f"at row {row}{when}; set fill_missing to ffill or interpolate, or clean the data"
                )
            filled = pd.DataFrame(np.where(missing, np.nan, values))
            if fill_missing == "interpolate":
                filled = filled.interpolate(method="linear", limit_direction="both")
            # Leading gaps have nothing to carry forward: take the first valid value instead.
            values = filled.ffill().bfill().to_numpy()
            if not np.isfinite(values).all():
                channel = int(np.flatnonzero(~np.isfinite(values).all(axis=0))[0])
                raise InputError(
                    f"{self.source_name}: column '{self.feature_names[channel]}' has no valid value to fill from"
                )
        return values.astype(np.float32)

    def _split_rows(
        self,
        train_fraction: float,
        val_fraction: float,
        test_fraction: float,
        val_start: str | None,
        test_start: str | None,
        test_end: str | None,
    ) -> tuple[int, int, int]:
        rows = len(self.raw)
        if val_start is not None or test_start is not None or test_end is not None:
            if self.timestamps is None:
                raise InputError("val_start/test_start/test_end split by date and need time_column; got none")
            if val_start is None or test_start is None:
                raise InputError(
                    f"splitting by date needs both val_start and test_start; got val_start={val_start}, "
                    f"test_start={test_start}"
                )
            boundaries = [int(self.timestamps.searchsorted(pd.Timestamp(date))) for date in (val_start, test_start)] + [
                rows if test_end is None else int(self.timestamps.searchsorted(pd.Timestamp(test_end)))
            ]
            described = f"val_start={val_start}, test_start={test_start}, test_end={test_end}"
        else:
            fractions = {"train_fraction": train_fraction, "val_fraction": val_fraction, "test_fraction": test_fraction}
            for name, fraction in fractions.items():
                if not 0 < fraction <= 1:
                    raise InputError(f"{name} must be in (0, 1]; got {fraction}")
            if sum(fractions.values()) > 1 + 1e-9:
                raise InputError(
                    f"train_fraction + val_fraction + test_fraction must be at most 1; got "
                    f"{train_fraction} + {val_fraction} + {test_fraction} = {sum(fractions.values()):g}"
                )
            cumulative = np.cumsum([train_fraction, val_fraction, test_fraction])
            boundaries = [min(rows, round(rows * share)) for share in cumulative]
            described = f"fractions {train_fraction}/{val_fraction}/{test_fraction}"

        train_end, val_end, end = boundaries
        window = self.context_length + self.horizon
        if rows < window + 2 * self.horizon:
            raise InputError(
                f"{self.source_name}: has {rows} rows; a training window and a validation and test horizon need at "
                f"least context_length + 3 * horizon = {window + 2 * self.horizon}"
            )
        needed = {"train": window, "val": self.horizon, "test": self.horizon}
        for name, (start, stop) in zip(needed, [(0, train_end), (train_end, val_end), (val_end, end)]):
            if stop - start < needed[name]:
                raise InputError(
                    f"{self.source_name}: the {name} split ({described}) has {max(0, stop - start)} of {rows} rows; "
                    f"it needs at least {needed[name]} (context_length={self.context_length}, horizon={self.horizon})"
                )
        return train_end, val_end, end


def _read_table(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise InputError(f"{path}: data file not found")
    if path.suffix.lower() == ".csv":
        return pd.read_csv(path)
    if path.suffix.lower() in (".parquet", ".pq"):
        return pd.read_parquet(path)
    raise InputError(f"{path}: expected a .csv or .parquet file; got '{path.suffix}'")


def _check_columns_exist(source_name: str, frame: pd.DataFrame, columns: list[str]) -> None:
    for column in columns:
        if column not in frame.columns:
            available = ", ".join(map(str, frame.columns))
            raise InputError(f"{source_name}: column '{column}' not found; available: {available}")


def _is_numeric(column: pd.Series) -> bool:
    """Numbers a model can read; booleans are numeric to pandas but are flags, not measurements."""
    return pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column)


def _first(mask: pd.Series) -> int:
    """Position of the first True in ``mask``."""
    return int(np.flatnonzero(mask.to_numpy())[0])


def _check_positive(name: str, value: int) -> None:
    if not isinstance(value, int) or value <= 0:
        raise InputError(f"{name} must be a positive integer; got {value}")
