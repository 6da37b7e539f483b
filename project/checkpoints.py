"""Reading a checkpoint before anything trusts it, rebuilding the data it was trained on, and checking it against
what the user set (``project.settings``) before the CLI uses it.

Every problem is one line: a missing, truncated or foreign file, a diverged run's non-finite weights.
"""

from __future__ import annotations

import inspect
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import torch

from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.files import check_name_lengths
from project.imports import CLI_TRUST, built_component, checkpoint_class, component_class, imported_class, trust
from project.model import resolved_patch_length
from project.model.network import build_network
from project.settings import flattened, named_classes
from project.training.module import Forecaster, check_finite_weights, longest_sequence
from project.training.regimes import Regime

# Settings a checkpoint may be used with at other values: they choose what is forecast (or compared with), not
# what was learned.
FREE_AFTER_TRAINING = ("predict_horizon", "max_horizon", "num_samples", "prediction_quantiles")
# Data settings that change the network's shape or what its inputs mean: given explicitly, they must equal the
# checkpoint's (the others, such as the file, the splits or the batch size, may change after training).
SHAPING_DATA_SETTINGS = (
    "target_columns", "past_covariates", "future_covariates", "static_covariates", "calendar_features", "scaling",
    "context_length", "horizon",
)  # fmt: skip


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path``, checked to be a finite ``Forecaster`` checkpoint of this template whose weights
    fit the settings it records. Unpickled with ``weights_only=True``: a file cannot run code by being read.

    The classes it names are imported only under ``project.imports``' rule: the project's own, or one the user
    trusted (``project.imports.trust``).

    Every command and script opens checkpoints through this function, ``load_forecaster`` or ``load_checkpoint``.
    """
    return load_checkpoint(path)[0]


def load_forecaster(path: str | Path) -> Forecaster:
    """The ``Forecaster`` (or the subclass it was trained as) of the checkpoint at ``path``, read by
    ``read_checkpoint``, on the CPU, in eval mode."""
    return load_checkpoint(path)[1]


def load_checkpoint(path: str | Path) -> tuple[dict, Forecaster]:
    """The checked checkpoint at ``path`` and its ``Forecaster`` (CPU, eval mode), for a command that needs both:
    checking the weights builds the model anyway, so it is read and built once."""
    path = check_name_lengths(path)
    if not path.is_file():
        raise InputError(f"{path}: checkpoint not found")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # torch raises many types for a truncated, foreign or code-carrying file
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else type(error).__name__
        raise InputError(
            f"{path}: cannot read the checkpoint; is it truncated or not a checkpoint? ({reason})"
        ) from None
    if (
        not isinstance(checkpoint, dict)
        or not isinstance(checkpoint.get("state_dict"), dict)
        or not isinstance(checkpoint.get("hyper_parameters"), dict)
        or not checkpoint["hyper_parameters"]
    ):
        raise InputError(
            f"{path}: not a checkpoint written by `python -m project.cli fit` (it has no state_dict and "
            "hyper_parameters)"
        )
    settings = {k: v for k, v in checkpoint["hyper_parameters"].items() if not k.startswith("_")}
    model_class = recorded_class(checkpoint["hyper_parameters"], Forecaster, path)
    recorded_class(checkpoint.get("datamodule_hyper_parameters", {}), WindowDataModule, path)  # refused here, not later
    unknown = sorted(set(settings) - init_arguments(model_class))
    if unknown:
        written_by = (
            "an earlier version of this project"
            if model_class.__module__.startswith("project.")
            else f"another version of {model_class.__module__}"
        )
        raise InputError(
            f"{path}: written by {written_by}: its settings {', '.join(unknown)} are not {model_class.__name__}'s; "
            "retrain it, or use it with the version that wrote it"
        )
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    network = build_network(settings.get("network"), f"{path}: ")
    components = {"network": network}
    if "regime" in settings:
        components["regime"] = built_component(settings["regime"], "regime", Regime, f"{path}: ")
    check_optimizer_classes(settings, path)
    try:
        module = model_class(**{**settings, **components})
    except (InputError, TypeError, ValueError) as error:
        raise InputError(
            f"{path}: its settings do not build a {model_class.__name__} ({str(error).splitlines()[0]})"
        ) from None
    state = dict(checkpoint["state_dict"])
    module.on_load_checkpoint({"state_dict": state})
    try:
        module.load_state_dict(state)
    except RuntimeError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        raise InputError(
            f"{path}: its weights do not fit the settings it records ({' '.join(lines[1:3])[:200]})"
        ) from None
    return checkpoint, module.eval()


def check_optimizer_classes(settings: dict, path: str | Path) -> None:
    """The optimizer and learning-rate scheduler a checkpoint records, checked under ``project.imports``' rule (torch's
    own, the project's, or trusted) though nothing builds them to forecast: the CLI gives a checkpoint's settings to
    the parser, which imports what they name."""
    bases = {"optimizer": torch.optim.Optimizer, "lr_scheduler": torch.optim.lr_scheduler.LRScheduler}
    for name, base in bases.items():
        spec = settings.get(name)
        if isinstance(spec, dict) and "class_path" in spec:
            component_class(spec, name, base, f"{path}: ")


def init_arguments(cls: type) -> set[str]:
    """The argument names ``cls(...)`` takes, also through a subclass's ``**kwargs`` passed on to its parents."""
    names: set[str] = set()
    for klass in cls.__mro__:
        parameters = inspect.signature(klass.__init__).parameters.values()
        names |= {p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
        if not any(p.kind is p.VAR_KEYWORD for p in parameters):
            break
    return names - {"self"}


def recorded_class(hyper_parameters: dict, base: type, path: str | Path) -> type:
    """The class a checkpoint was trained with (LightningCLI records it as ``_class_path``), ``base`` when it records
    none; imported under ``project.imports``' rule, and refused unless it is ``base`` or a subclass of it."""
    class_path = hyper_parameters.get("_class_path")
    if class_path is None:
        return base
    what = "data class" if issubclass(base, WindowDataModule) else "model class"
    recorded = checkpoint_class(class_path, what, f"{path}: ")
    if not (isinstance(recorded, type) and issubclass(recorded, base)):
        raise InputError(f"{path}: its class {class_path} is not a {base.__name__} subclass")
    return recorded


def datamodule_from_checkpoint(checkpoint: dict, path: str | Path, overrides: dict | None = None) -> WindowDataModule:
    """The data module (the class it was trained with) with the checkpoint's data settings, its source included,
    and scaling, ``overrides`` aside."""
    trained = checkpoint.get("datamodule_hyper_parameters", {})
    settings = {k: v for k, v in trained.items() if not k.startswith("_")}
    settings.update(overrides or {})
    if "source" not in (overrides or {}):
        warn_if_relative_source(checkpoint, path)
    state = checkpoint.get(WindowDataModule.__qualname__, {})
    if state.get("from_dataframe") and settings.get("source") is None:
        raise InputError(f"{path}: the checkpoint was trained on a DataFrame, which it does not store; pass the data")
    datamodule = recorded_class(trained, WindowDataModule, path)(**settings)
    if state:
        datamodule.load_state_dict(state)
    return datamodule


def warn_if_relative_source(checkpoint: dict, path: str | Path) -> None:
    """One warning when the checkpoint records its data relative to the folder it was trained in (written before
    data paths were recorded absolute): it is read from the current folder, which may hold another file."""
    source = checkpoint.get("datamodule_hyper_parameters", {}).get("source")
    if source is not None and not Path(source).is_absolute():
        warnings.warn(
            f"{path} records its data as {source}, relative to the folder it was trained in (written by an earlier "
            f"version of this project): reading {Path(source).absolute()}; pass --data.source to be sure",
            stacklevel=2,
        )


def checkpoint_inputs(path: str | Path, checkpoint: dict, *sources: str | Path | None) -> list[str | Path]:
    """What a command that uses the checkpoint at ``path`` reads, for the output guards (``project.files``): the
    checkpoint, the data it was trained on (never replaced, even by a run that reads other data), and ``sources``."""
    trained_on = checkpoint.get("datamodule_hyper_parameters", {}).get("source")
    return [path, *(source for source in (trained_on, *sources) if source is not None)]


def check_checkpoint_matches(ckpt_path: str, checkpoint: dict, explicit: dict, linked: tuple[str, ...]) -> None:
    """Fail with one line when the user asks, on purpose, for a model or data shape other than the checkpoint's.

    The model is rebuilt from the checkpoint's hyperparameters (LightningCLI's ``ckpt_path`` handling); every model
    setting the user set explicitly (command line or config file, even at its default value) is compared, and so
    are the data settings that shape the network. Settings that only choose what to forecast may differ, and the
    network's ``linked`` arguments (set by the CLI's links, never by the user) are not compared.
    """
    trained = checkpoint.get("hyper_parameters", {})
    trained_model = flattened({name: value for name, value in trained.items() if not name.startswith("_")})
    trained_model["class_path"] = trained.get("_class_path", "project.training.module.Forecaster")
    given_model = {
        name: value
        for name, value in flattened(explicit.get("model", {})).items()
        if name not in FREE_AFTER_TRAINING and name.removeprefix("network.init_args.") not in linked
    }
    network = trained_model.get("network.class_path")
    inapplicable = [f"model.{name}" for name in given_model if name not in trained_model and name != "class_path"]
    if inapplicable:  # the checkpoint's class has no such setting: it would be ignored, not applied
        raise InputError(
            f"{ckpt_path} has no setting {', '.join(inapplicable)} (its model is {trained_model['class_path']}, its "
            f"network {network}); leave {'it' if len(inapplicable) == 1 else 'them'} out when using this checkpoint"
        )
    mismatches = [
        f"model.{name}={value!r} (checkpoint: {trained_model[name]!r})"
        for name, value in given_model.items()
        if not _same(name, _resolved(name, value, trained_model), trained_model[name])
    ]
    trained_data = {**checkpoint.get("datamodule_hyper_parameters", {})}
    trained_data.update({name: trained[name] for name in ("context_length", "horizon") if name in trained})
    # The scaling as it resolved, also when the checkpoint records the default (null), which a run's own config.yaml
    # gives too: either is the checkpoint's.
    recorded_scaling = trained_data.get("scaling")
    resolved_scaling = checkpoint.get(WindowDataModule.__qualname__, {}).get("scaler", {}).get("mode")
    trained_data["scaling"] = resolved_scaling or recorded_scaling
    mismatches += [
        f"data.{name}={value!r} (checkpoint: {trained_data[name]!r})"
        for name, value in explicit.get("data", {}).items()
        if name in SHAPING_DATA_SETTINGS
        and name in trained_data
        and value != trained_data[name]
        and not (name == "scaling" and value == recorded_scaling)
    ]
    if mismatches:
        raise InputError(f"{ckpt_path} was trained with other settings than the config: {', '.join(mismatches)}")


def _resolved(name: str, given: object, trained_model: dict) -> object:
    """A given ``patch_length`` (``auto`` included) as it resolves for the checkpoint's own context length and
    horizon."""
    if name.endswith("patch_length"):
        return resolved_patch_length(given, trained_model["context_length"], trained_model["horizon"])
    return given


def _same(name: str, given: object, trained: object) -> bool:
    """Equal settings; a class_path (the model's, the network's, the distribution's, …) by the class it names
    (``project.model.ForecastTransformer`` is ``project.model.transformer.ForecastTransformer``)."""
    if name.endswith("class_path") and isinstance(given, str) and isinstance(trained, str):
        return imported_class(given) is not None and imported_class(given) is imported_class(trained)
    if isinstance(given, tuple) and isinstance(trained, list):  # a tuple-typed option (AdamW's betas) as recorded
        return list(given) == trained
    return given == trained


def checkpoint_model_settings(checkpoint: dict) -> dict:
    """The model section a config would give for the checkpoint's model: its class and settings."""
    settings = {k: v for k, v in checkpoint["hyper_parameters"].items() if k != "_instantiator"}
    if "_class_path" in settings:
        settings = {"class_path": settings.pop("_class_path"), "dict_kwargs": settings}
    return settings


def checkpoint_data_settings(checkpoint: dict, ckpt_path: str, explicit_data: dict) -> dict:
    """The data section a config would give for the data the checkpoint was trained on (its class and settings,
    checked by ``read_checkpoint``), less what the user set (``explicit_data``): LightningCLI restores the model's
    settings from a checkpoint, not the data's."""
    trained = checkpoint.get("datamodule_hyper_parameters", {})
    data: dict = {"init_args": {k: v for k, v in trained.items() if not k.startswith("_") and k not in explicit_data}}
    if explicit_data.get("source") is not None:  # the embedded data's settings do not carry over to the user's file
        for name in ("synthetic", "synthetic_rows"):
            data["init_args"].pop(name, None)
    else:
        warn_if_relative_source(checkpoint, ckpt_path)
    class_path = explicit_data.get("class_path") or trained.get("_class_path")
    if class_path:  # given with the settings, or jsonargparse would take them for the default class's
        data["class_path"] = class_path
    return data


@dataclass
class CommandCheckpoint:
    """The checkpoint a command was given (``--ckpt_path``), read and checked once, at start-up, and what the
    command's later steps ask of it; empty (``checkpoint`` None) without one, when every step does nothing."""

    path: str | None = None
    checkpoint: dict | None = None
    explicit: dict = field(default_factory=dict)

    @classmethod
    def open(cls, parser, parsed, explicit: dict, linked: tuple[str, ...]) -> tuple[object, CommandCheckpoint]:
        """``parsed`` with the data settings of the checkpoint its subcommand names (the user's stand), and the
        checkpoint: read under the import rule (the classes the user named trusted), refused in one line when it
        does not match what the user set (``check_checkpoint_matches``; ``linked``: the network's linked
        arguments)."""
        config = parsed[parsed.subcommand]
        if not config.get("ckpt_path"):
            return parsed, cls(explicit=explicit)
        trust(named_classes(explicit), CLI_TRUST)
        checkpoint = read_checkpoint(config.ckpt_path)
        check_checkpoint_matches(config.ckpt_path, checkpoint, explicit, linked)
        data = checkpoint_data_settings(checkpoint, config.ckpt_path, explicit.get("data", {}))
        parsed = parser.parse_object({parsed.subcommand: {"data": data}}, parsed)
        return parsed, cls(str(config.ckpt_path), checkpoint, explicit)

    def inputs(self, *others: str | Path | None) -> list:
        """``others`` and, with a checkpoint, the checkpoint and the data it was trained on."""
        return list(others) if self.checkpoint is None else checkpoint_inputs(self.path, self.checkpoint, *others)

    def with_its_model(self, parser, parsed):
        """``parsed`` with the model's settings from the checkpoint read at start-up (LightningCLI would read the
        file a second time, and could find another file there)."""
        if self.checkpoint is None:
            return parsed
        return parser.parse_object({parsed.subcommand: {"model": checkpoint_model_settings(self.checkpoint)}}, parsed)

    def keep_forecasting_choices(self, config) -> None:
        """What the user chose for forecasting (not learning) stands in a subcommand's ``config`` whose model settings
        LightningCLI replaced with the checkpoint's."""
        if self.checkpoint is None:
            return
        model, data, explicit_model = config.model.init_args, config.data.init_args, self.explicit.get("model", {})
        for name in FREE_AFTER_TRAINING:
            if name in explicit_model:
                model[name] = explicit_model[name]
        if "max_horizon" in explicit_model and "max_length" in model.network.init_args:
            # The positional table is not a weight: it is sized again for the longer forecasts asked for.
            model.network.init_args.max_length = longest_sequence(data.context_length, data.horizon, model.max_horizon)

    def check_data_fits(self, config, model, sizes: tuple[str, ...]) -> None:
        """The ``sizes`` the data gives the network (targets, covariates, static categories, as linked from the data
        into ``model``'s network) must be the checkpoint's, or its weights cannot be loaded: refused in one line
        naming them, before any data is read."""
        if self.checkpoint is None:
            return
        given = model.hparams["network"]["init_args"]
        trained = self.checkpoint["hyper_parameters"].get("network", {}).get("init_args", {})
        differing = [
            f"{name}={given[name]!r} (checkpoint: {trained[name]!r})"
            for name in sizes
            if name in trained and name in given and given[name] != trained[name]
        ]
        if differing:
            source = config.data.init_args.get("source") or "the embedded data"
            raise InputError(
                f"{source} does not fit {self.path}: its columns give the network {', '.join(differing)}; use data "
                "with the checkpoint's targets, covariates and static categories"
            )
