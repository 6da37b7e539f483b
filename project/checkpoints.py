"""A checkpoint read before anything trusts it, its settings as a command's defaults, and whether the model and data
a command built can take its weights. Every problem is one line."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch

from project.data.datamodule import WindowDataModule
from project.errors import InputError
from project.files import check_name_lengths
from project.imports import built_component, component_class, is_component_spec
from project.model.network import build_network
from project.training.module import OPTIMIZATION_BASES, Forecaster, check_finite_weights
from project.training.regimes import Regime

SIZES = "init_args.sizes."  # the data's sizes among a network's flattened settings


def class_path_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def load_checkpoint(path: str | Path) -> tuple[dict, Forecaster]:
    """The checkpoint at ``path`` and its ``Forecaster`` (CPU, eval mode), as every command and script opens one:
    checked to be a finite checkpoint of this template whose weights fit the settings it records. Unpickled with
    ``weights_only=True`` (reading runs no code); the classes it names are imported under ``project.imports``' rule."""
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
    data = checkpoint.get("datamodule_hyper_parameters", {})
    data_class = recorded_class(data, WindowDataModule, path)  # refused here, not later
    data_settings = {k: v for k, v in data.items() if not k.startswith("_")}
    for cls, arguments in ((model_class, settings), (data_class, data_settings)):
        try:  # a setting the class does not take (Python's own check): the checkpoint of another version
            inspect.signature(cls).bind(**arguments)
        except TypeError as error:
            raise InputError(
                f"{path}: its settings do not fit this version's {cls.__name__} ({error}); retrain it, or use it "
                "with the version that wrote it"
            ) from None
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    network = build_network(settings.get("network"), f"{path}: ")
    components = {"network": network}
    if "regime" in settings:
        components["regime"] = built_component(settings["regime"], "regime", Regime, f"{path}: ")
    for name, base in OPTIMIZATION_BASES.items():  # nothing here builds them, but a command's parser imports them
        if is_component_spec(settings.get(name)):
            component_class(settings[name], name, base, f"{path}: ")
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


def recorded_class(hyper_parameters: dict, base: type, path: str | Path) -> type:
    """The class a checkpoint was trained with (LightningCLI records it as ``_class_path``), ``base`` when it records
    none; imported under ``project.imports``' rule, and refused unless it is ``base`` or a subclass of it."""
    if hyper_parameters.get("_class_path") is None:
        return base
    what = "data class" if issubclass(base, WindowDataModule) else "model class"
    return component_class({"class_path": hyper_parameters["_class_path"]}, what, base, f"{path}: ")


def checkpoint_inputs(path: str | Path | None, checkpoint: dict | None, *sources: str | Path | None) -> list:
    """What a command reads, for the output guards (``project.files``; a None is passed over): ``sources``, and with
    the checkpoint at ``path`` the checkpoint and its training data (never replaced, even by a run on other data)."""
    if checkpoint is None:
        return list(sources)
    return [path, checkpoint.get("datamodule_hyper_parameters", {}).get("source"), *sources]


def checkpoint_defaults(checkpoint: dict, linked: tuple[str, ...], reads_a_file: bool) -> dict:
    """The model and data sections a config would give for the checkpoint (its classes and settings): the parser's
    defaults for a command with ``--ckpt_path``, so that the user's configs and flags win by the parser's own rule.
    ``linked``: the settings the CLI's links give (never defaults); where the data is cached is this run's choice, and
    so is the embedded data's ``synthetic`` when the command ``reads_a_file`` of its own."""
    model = {k: v for k, v in checkpoint["hyper_parameters"].items() if not k.startswith("_") and k not in linked}
    network = model.get("network")
    if isinstance(network, dict):
        arguments = {k: v for k, v in (network.get("init_args") or {}).items() if k not in linked}
        model["network"] = {**network, "init_args": arguments}
    trained = checkpoint.get("datamodule_hyper_parameters", {})
    this_runs = ("cache_dir", "synthetic") if reads_a_file else ("cache_dir",)
    data = {k: v for k, v in trained.items() if not k.startswith("_") and k not in this_runs}
    return {
        "model": {
            "class_path": checkpoint["hyper_parameters"].get("_class_path", class_path_of(Forecaster)),
            "init_args": model,
        },
        "data": {"class_path": trained.get("_class_path", class_path_of(WindowDataModule)), "init_args": data},
    }


def check_checkpoint_fits(path: str | Path, checkpoint: dict, model: Forecaster, datamodule: WindowDataModule) -> None:
    """Refuse in one line, before the weights are loaded, a model or data that cannot take the checkpoint's weights or
    would read them otherwise: the sizes its columns give the network, the classes, the network's settings, the lengths,
    the normalisation and the scaling, each named with both values. What chooses only what is forecast or read
    (samples, quantiles, the data file, the batch size) may differ."""
    trained = checkpoint["hyper_parameters"]
    given_network, trained_network = flattened(model.hparams["network"]), flattened(trained.get("network", {}))
    differing = [
        f"{name.removeprefix(SIZES)}={value!r} (checkpoint: {trained_network[name]!r})"
        for name, value in given_network.items()
        if name.startswith(SIZES) and name in trained_network and value != trained_network[name]
    ]
    if differing:
        source = datamodule.hparams.get("source") or "the embedded data"
        raise InputError(
            f"{source} does not fit {path}: its columns give the network {', '.join(differing)}; use data with the "
            "checkpoint's targets, covariates and static categories"
        )
    compared = [("model.class_path", class_path_of(type(model)), trained.get("_class_path", class_path_of(Forecaster)))]
    compared += [  # the sizes were compared above; max_length sizes a table, no weight
        (f"model.network.{name}", value, trained_network.get(name))
        for name, value in given_network.items()
        if not name.startswith((SIZES, "init_args.max_length"))
    ]
    compared += [
        (f"{section}.{name}", model.hparams.get(name), trained.get(name))
        for section, name in (("data", "context_length"), ("data", "horizon"), ("model", "instance_norm"))
    ]
    scaler = checkpoint.get(WindowDataModule.__qualname__, {}).get("scaler", {})
    compared.append(("data.scaling", getattr(datamodule, "scaling", None), scaler.get("mode")))
    mismatches = [
        f"{name}={given!r} (checkpoint: {recorded!r})"
        for name, given, recorded in compared
        if recorded is not None and given != recorded
    ]
    if mismatches:
        raise InputError(f"{path} was trained with other settings than the config: {', '.join(mismatches)}")


def flattened(tree: dict, prefix: str = "") -> dict:
    """A nested settings dict as its leaves under dotted keys (``init_args.d_model``); lists stay values."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flattened(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
