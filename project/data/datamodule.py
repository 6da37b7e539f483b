"""The LightningDataModule: one series or thousands, with covariates, as forecasting windows (``project.data.windows``
documents the batch format)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Literal

import lightning as L
import numpy as np
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset, DistributedSampler

from project import rules
from project.data.panel import PanelSettings, build_panel, cached_panel
from project.data.sampling import EvaluationShard, ResumableLoader, TrainingOrder
from project.data.scaling import Scaler, Scaling
from project.data.splits import Split, as_split
from project.data.synthetic import synthetic_panel, synthetic_series
from project.data.table import DATAFRAME_SOURCE, check_file, read_table
from project.data.windows import ForecastOrigins, PanelWindows, split_windows
from project.domains import NonNegativeInt, PositiveInt
from project.errors import InputError
from project.model.network import InputSizes, component_spec

SplitName = Literal["train", "val", "test"]


class WindowDataModule(L.LightningDataModule):
    """Reads, checks, splits and scales one or many time series and serves forecasting windows.

    Args:
        source: A CSV or Parquet file in long format (one row per series and time step), or a
            ``pandas.DataFrame`` (from Python). Empty: the embedded synthetic data chosen by ``synthetic``.
        synthetic: Embedded data when ``source`` is empty: ``series`` (one hourly series of five channels) or
            ``panel`` (daily sales of 36 store × product series with prices, promotions and store covariates).
        time_column: Column of timestamps, unique and increasing within each series, for splits by date, calendar
            features and dated predictions; its frequency (hours, business days, month starts…) is inferred.
        id_columns: Columns identifying a series (e.g. ``[store, product]``). Empty: the table is one series.
        target_columns: Columns to forecast; predictions are fed back as inputs. Empty: every numeric column not
            named in another role.
        past_covariates: Numeric columns known only up to the forecast start (e.g. footfall, temperature).
        future_covariates: Numeric columns known over the forecast horizon too (prices, promotions, holidays); to
            forecast into the future, add rows after each series' last target with these filled, targets empty.
        static_covariates: Columns constant within a series (store, category, size): text or category columns
            become learned embeddings, numeric ones are scaled across series.
        calendar_features: Sine/cosine features of every calendar cycle longer than the data's step (hour of day …
            month of year) as future covariates; needs ``time_column``. Empty: on whenever there is one.
        context_length: Time steps the model sees before the forecast (the look-back window).
        horizon: Time steps to forecast in training, validation and test.
        predict_horizon: Time steps ``predict`` forecasts; empty: ``horizon``. Up to the model's ``max_horizon``.
        stride: Step between consecutive training windows of a series.
        eval_stride: Step between consecutive validation and test windows (1: every window, as benchmarks do).
        batch_size: Windows per batch and per device.
        num_workers: DataLoader worker processes; they share the memory-mapped matrix.
        split: How each series' rows are split, by class_path: ``Fractions`` (empty: 70/10/20% of each series' rows),
            ``Dates`` (the same dates for every series) or ``LastRows`` (the last rows of each series).
        fill_missing: What to do with missing or infinite values in observed rows: ``none`` (an error naming the
            column, row and series), ``ffill`` (carry the last valid value forward) or ``interpolate``.
        scaling: Fitted on training rows: ``per_series`` (each series by its own mean and standard deviation, the
            default with ``id_columns``), ``global`` (one for all series, the default without), ``mean_abs`` (by
            each series' mean absolute value, as DeepAR: finite for near-constant or mostly-zero series) or ``none``.
        cache_dir: Folder where a file source's matrix is written once and memory-mapped (shared by workers and
            DDP ranks). Empty: keep it in memory.
    """

    def __init__(
        self,
        source: str | Path | pd.DataFrame | None = None,
        synthetic: Literal["series", "panel"] = "series",
        time_column: str | None = None,
        id_columns: list[str] | None = None,
        target_columns: list[str] | None = None,
        past_covariates: list[str] | None = None,
        future_covariates: list[str] | None = None,
        static_covariates: list[str] | None = None,
        calendar_features: bool | None = None,
        context_length: PositiveInt = 12,
        horizon: PositiveInt = 12,
        predict_horizon: PositiveInt | None = None,
        stride: PositiveInt = 1,
        eval_stride: PositiveInt = 1,
        batch_size: PositiveInt = 64,
        num_workers: NonNegativeInt = 0,
        split: Split | None = None,
        fill_missing: Literal["none", "ffill", "interpolate"] = "none",
        scaling: Scaling | None = None,
        cache_dir: str | None = ".cache/data",
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["source", "split"])
        # A checkpoint records the class and arguments, never an object (None: the default Fractions).
        self.hparams["split"] = component_spec(split) if isinstance(split, Split) else split
        # A path is saved, absolute, so that `predict --ckpt_path` alone finds the data it was trained on, from any
        # folder; a DataFrame is not.
        self.hparams["source"] = (
            None if source is None or isinstance(source, pd.DataFrame) else str(Path(source).absolute())
        )
        self.context_length, self.horizon = context_length, horizon
        self.predict_horizon = predict_horizon or horizon
        self.stride, self.eval_stride = stride, eval_stride
        self.batch_size, self.num_workers = batch_size, num_workers
        self.shuffle_seed: int | None = None  # the run's seed, drawn when training starts; kept in checkpoints
        self._training_loader: ResumableLoader | None = None  # the fit's, whose position checkpoints keep
        self._resume_position: dict | None = None  # a resumed fit's position, until its training loader is built
        # Several processes may read fewer windows than others (EvaluationShard), even none.
        self.allow_zero_length_dataloader_with_multiple_devices = True

        if source is None:
            time_column = time_column or ("timestamp" if synthetic == "series" else "date")
            self.source_name = f"synthetic {synthetic}"
        named = DATAFRAME_SOURCE if isinstance(source, pd.DataFrame) else self.hparams["source"]
        given = {**self.hparams, "source": named}
        rules.check(rules.options(data={**given, "time_column": time_column}))
        if calendar_features is None:
            calendar_features = time_column is not None
        settings = PanelSettings(
            time_column=time_column,
            id_columns=tuple(id_columns or ()),
            target_columns=tuple(target_columns or ()),
            past_covariates=tuple(past_covariates or ()),
            future_covariates=tuple(future_covariates or ()),
            static_covariates=tuple(static_covariates or ()),
            calendar_features=calendar_features,
            fill_missing=fill_missing,
        )
        if source is None:
            frame = synthetic_series() if synthetic == "series" else synthetic_panel()
            self.panel = build_panel(frame, settings, self.source_name)
        elif isinstance(source, pd.DataFrame) or not cache_dir:
            frame, self.source_name = read_table(source)
            self.panel = build_panel(frame, settings, self.source_name)
        else:
            self.source_name = str(check_file(source))
            self.panel = cached_panel(Path(self.source_name), settings, Path(cache_dir))
        self.scaling: Scaling = scaling or ("per_series" if settings.id_columns else "global")
        self.split_rows = self._split_rows(as_split(split))
        self.scaler: Scaler | None = None
        self._datasets: dict[tuple, Dataset] = {}

    @property
    def target_names(self) -> list[str]:
        return self.panel.roles.targets

    @property
    def input_sizes(self) -> InputSizes:
        """What the network is told about its inputs (linked into its ``sizes``); the calendar features count among
        the future covariates, and the model adds an "unknown" embedding to each categorical static covariate."""
        roles = self.panel.roles
        return InputSizes(
            n_targets=len(roles.targets),
            n_past_covariates=len(roles.past),
            n_future_covariates=len(roles.future) + len(roles.calendar),
            static_cardinalities=tuple(len(vocabulary) for vocabulary in self.panel.categories),
            n_static_reals=len(roles.static_real),
        )

    def setup(self, stage: str | None = None) -> None:
        if self.scaler is None:  # restored from a checkpoint otherwise (load_state_dict)
            self.scaler = Scaler.fit(self.panel, self.split_rows[:, 0], self.scaling)
            self._datasets.clear()

    def train_dataloader(self) -> DataLoader:
        dataset = self.split("train")
        if self.shuffle_seed is None:
            self.shuffle_seed = int(torch.initial_seed() % 2**31)
        sampler = TrainingOrder(dataset, self.shuffle_seed, *self._process(), current_epoch=self._current_epoch)
        loader = ResumableLoader(dataset, sampler=sampler, batches_done=self._batches_done, **self._loader_settings())
        if self._resume_position is not None:
            # Lightning hands a loader its saved position only when it builds the loader after restoring the
            # checkpoint; Trainer.estimated_stepping_batches (the run's length, read in configure_optimizers and
            # on_fit_start) builds it before (Lightning-AI/pytorch-lightning#20550), so the data module carries it.
            loader.load_state_dict(self._resume_position)
            self._resume_position = None
        self._training_loader = loader
        return loader

    def val_dataloader(self) -> DataLoader:
        return self._evaluation_loader("val")

    def test_dataloader(self) -> DataLoader:
        return self._evaluation_loader("test")

    def predict_dataloader(self) -> DataLoader:
        # Shards padded with repeated windows (the writer keeps each once): a process without a window would skip
        # predict's hooks and leave the others waiting to gather the forecasts.
        dataset, (rank, world_size) = self.predict_dataset(), self._process()
        sampler = DistributedSampler(dataset, world_size, rank, shuffle=False, drop_last=False)
        return DataLoader(dataset, sampler=sampler, **self._loader_settings())

    @classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: str | Path,
        hparams_file: str | Path | None = None,
        trusted: tuple[str, ...] | list[str] = (),
        **overrides: object,
    ) -> WindowDataModule:
        """The data module a checkpoint records, with its column roles and scaling: Lightning's
        ``load_from_checkpoint``, through the checkpoint door (``project.checkpoints``: nothing is imported outside this
        project but the import paths in ``trusted``). ``hparams_file`` replaces the recorded settings, as in Lightning;
        ``overrides`` replace single settings (``source`` to read other data)."""
        from project.checkpoints import load_from_checkpoint  # the door at the edge, which builds this class

        return load_from_checkpoint(cls, checkpoint_path, trusted, overrides, hparams_file)

    def state_dict(self) -> dict:
        self.setup()
        return {
            **self._column_roles(),
            "categories": self.panel.categories,
            "frequency": self.panel.frequency,
            "scaler": self.scaler.state_dict(self.panel),
            "shuffle_seed": self.shuffle_seed,
            "from_dataframe": self.source_name == DATAFRAME_SOURCE,
            "training_position": None if self._training_loader is None else self._training_loader.state_dict(),
        }

    def load_state_dict(self, state_dict: dict) -> None:
        """A checkpoint's state of the data: its columns must be this data's, and its scaling statistics finite, with
        scales above zero (``Scaler.from_state``), or the forecasts would be another data's or NaN; a refusal names the
        checkpoint, when a Trainer restores it."""
        where = f"{self.trainer.ckpt_path}: " if self.trainer is not None and self.trainer.ckpt_path else ""
        for role, columns in self._column_roles().items():
            if state_dict.get(role) != columns:
                recorded = " ".join(repr(state_dict.get(role)).split())
                raise InputError(
                    f"{where}its data state's {role} are {recorded:.200}; {self.source_name} has {columns}"
                )
        try:
            scaler = Scaler.from_state(state_dict.get("scaler") or {}, self.panel, self.split_rows[:, 0])
        except InputError as error:
            raise InputError(f"{where}its data state's {error}") from None
        self._use_vocabularies(state_dict.get("categories") or self.panel.categories)
        if self.panel.frequency is None and state_dict.get("frequency"):
            self.panel.frequency = state_dict["frequency"]  # too few rows here to infer it: trust the training data
        self.shuffle_seed = state_dict.get("shuffle_seed")  # a resumed run keeps its training order
        if self.trainer is not None:  # a Trainer resuming the fit, not a tool reading the data's settings
            self._resume_position = state_dict.get("training_position")
        self.scaler = scaler
        self._datasets.clear()

    def split(self, name: SplitName, stride: int | None = None) -> PanelWindows:
        """The windows whose targets lie in split ``name``; contexts may reach back into the previous split."""
        stride = stride or (self.stride if name == "train" else self.eval_stride)
        key = (name, stride)
        if key not in self._datasets:
            self.setup()
            column = {"train": 0, "val": 1, "test": 2}[name]
            start = np.zeros(self.panel.n_series, dtype=np.int64) if column == 0 else self.split_rows[:, column - 1]
            first, count = split_windows(self.split_rows[:, column], start, self.context_length, self.horizon, stride)
            self._datasets[key] = PanelWindows(
                self.panel, self.scaler, self.context_length, self.horizon, first, count, stride
            )
        return self._datasets[key]

    def predict_dataset(self) -> ForecastOrigins:
        if ("predict",) not in self._datasets:
            self.setup()
            self._datasets[("predict",)] = ForecastOrigins(
                self.panel, self.scaler, self.context_length, self.predict_horizon, self.source_name
            )
        return self._datasets[("predict",)]

    def _column_roles(self) -> dict[str, list[str]]:
        """The columns of each role, as checkpoints store them and compare them with the data."""
        roles = self.panel.roles
        return {
            "targets": roles.targets,
            "past_covariates": roles.past,
            "future_covariates": roles.future,
            "calendar": roles.calendar,
            "static_categorical": roles.static_categorical,
            "static_real": roles.static_real,
        }

    def _split_rows(self, split: Split) -> np.ndarray:
        """(series, 3) local rows ending the train, validation and test targets of each series, after checking that
        every split has a window; series too short to train on are counted in one warning."""
        observed, window = self.panel.observed, self.context_length + self.horizon
        cuts = split.rows(observed, None if self.panel.timestamps is None else self._rows_before)
        rows = np.stack([np.clip(np.asarray(c, dtype=np.int64), 0, observed) for c in cuts], axis=1)
        single, longest = self.panel.n_series == 1, int(observed.max())
        if longest < window + 2 * self.horizon:
            subject = f"has {longest} rows" if single else f"has no series longer than {longest} rows"
            raise InputError(
                f"{self.source_name}: {subject}; a training window and a validation and test horizon need at least "
                f"context_length + 3 * horizon = {window + 2 * self.horizon}"
            )
        starts = np.column_stack([np.zeros(len(rows), dtype=np.int64), rows[:, :2]])
        counts = [split_windows(rows[:, c], starts[:, c], self.context_length, self.horizon, 1)[1] for c in range(3)]
        for column, (name, needed) in enumerate((("train", window), ("val", self.horizon), ("test", self.horizon))):
            if counts[column].sum() == 0:
                most = int((rows[:, column] - starts[:, column]).max())
                amount = f"{max(0, most)} of {longest} rows" if single else f"at most {most} rows in a series"
                raise InputError(
                    f"{self.source_name}: the {name} split ({split.description()}) has {amount}; it needs at least "
                    f"{needed} (context_length={self.context_length}, horizon={self.horizon})"
                )
        if not single and (counts[0] == 0).any():
            warnings.warn(
                f"{self.source_name}: {int((counts[0] == 0).sum())} of {len(rows)} series have fewer than "
                f"context_length + horizon = {window} training rows and give no training window",
                stacklevel=2,
            )
        return rows

    def _rows_before(self, date: str) -> np.ndarray:
        """Per series, the number of observed rows strictly before ``date``."""
        moment = pd.Timestamp(date)
        if self.panel.timezone:
            moment = (moment.tz_localize(self.panel.timezone) if moment.tz is None else moment).tz_convert(None)
        moment = np.datetime64(moment.to_datetime64(), "ns")
        rows = np.zeros(self.panel.n_series, dtype=np.int64)
        for series in range(self.panel.n_series):
            observed = self.panel.timestamps[self.panel.rows(series)][: self.panel.observed[series]]
            rows[series] = np.searchsorted(observed, moment, side="left")
        return rows

    def _use_vocabularies(self, trained: list[list[str]]) -> None:
        """Re-code categorical static covariates with the training vocabulary; unseen values become "unknown"."""
        for column, vocabulary in enumerate(trained):
            ours = self.panel.categories[column]
            if ours == vocabulary:
                continue
            lookup = {label: code + 1 for code, label in enumerate(vocabulary)}
            labels = [ours[code - 1] if code > 0 else None for code in self.panel.static_categorical[:, column]]
            unseen = sorted({label for label in labels if label not in lookup})
            if unseen:
                name = self.panel.roles.static_categorical[column]
                warnings.warn(
                    f"{self.source_name}: static covariate '{name}' has values the model never saw in training "
                    f"({', '.join(map(str, unseen[:5]))}{', …' if len(unseen) > 5 else ''}); they use the unknown "
                    "category's embedding",
                    stacklevel=3,
                )
            self.panel.static_categorical[:, column] = [lookup.get(label, 0) for label in labels]
            self.panel.categories[column] = list(vocabulary)

    def _process(self) -> tuple[int, int]:
        return (0, 1) if self.trainer is None else (self.trainer.global_rank, self.trainer.world_size)

    def _current_epoch(self) -> int:
        return 0 if self.trainer is None else self.trainer.current_epoch

    def _batches_done(self) -> int:
        return 0 if self.trainer is None else self.trainer.fit_loop.epoch_loop.batch_progress.current.processed

    def _evaluation_loader(self, name: SplitName) -> DataLoader:
        dataset = self.split(name)
        return DataLoader(dataset, sampler=EvaluationShard(dataset, *self._process()), **self._loader_settings())

    def _loader_settings(self) -> dict:
        # A generator of its own, so that creating a loader does not consume the global random state that
        # dropout uses: a resumed run then draws the same dropout masks as an uninterrupted one.
        return dict(
            batch_size=self.batch_size,
            num_workers=self.num_workers,
            persistent_workers=self.num_workers > 0,
            generator=torch.Generator(),
        )
