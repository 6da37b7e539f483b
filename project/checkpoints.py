"""A checkpoint read before anything trusts it, its settings as a command's defaults, and whether the model and data
a command built can take its weights. Every problem is one line."""

from __future__ import annotations

import inspect
from pathlib import Path

import torch
from torch import nn

from project.data.datamodule import WindowDataModule
from project.data.splits import Split
from project.errors import InputError
from project.files import check_name_lengths
from project.imports import built_component, check_recorded_imports, component_class, is_component_spec
from project.model.distributions import Distribution
from project.model.network import build_network
from project.training.module import OPTIMIZATION_BASES, Forecaster, check_finite_weights
from project.training.regimes import Regime

SIZES = "init_args.sizes."  # the data's sizes among a network's flattened settings


def class_path_of(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def read_checkpoint(path: str | Path, resuming: bool = True) -> tuple[dict, set[str]]:
    """The checkpoint at ``path``, checked before anything is built from it: a finite checkpoint of this template whose
    settings this version's classes take, every import path it records passing ``project.imports``' rule; and the
    dotted strings it holds that did not pass, which a parser given its settings must never import. Unpickled with
    ``weights_only=True`` (reading runs no code). ``resuming``: its optimizer and scheduler will be built (a command
    that only forecasts or scores never builds them, so they are not looked at)."""
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
    data = checkpoint.get("datamodule_hyper_parameters", {})
    if not isinstance(data, dict):
        raise InputError(f"{path}: its data settings are {type(data).__name__}, not a mapping of settings")
    refused = recorded_imports(checkpoint, path, resuming)
    check_recorded_components(checkpoint, path, resuming)
    for base, settings in ((Forecaster, checkpoint["hyper_parameters"]), (WindowDataModule, data)):
        cls = recorded_class(settings, base, path)
        try:  # a setting the class does not take (Python's own check): the checkpoint of another version
            inspect.signature(cls).bind(**{k: v for k, v in settings.items() if not k.startswith("_")})
        except TypeError as error:
            raise InputError(
                f"{path}: its settings do not fit this version's {cls.__name__} ({error}); retrain it, or use it "
                "with the version that wrote it"
            ) from None
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    return checkpoint, refused


def recorded_imports(checkpoint: dict, path: str | Path, resuming: bool = True) -> set[str]:
    """Every import path the checkpoint's model and data settings record, checked under ``project.imports``' rule (the
    first refused is one line naming it and ``path``); the optimizer's and scheduler's only when ``resuming``. Returns
    the dotted strings that did not pass, for ``project.imports.parser_never_imports``."""
    unused = () if resuming else tuple(OPTIMIZATION_BASES)
    model = check_recorded_imports(checkpoint["hyper_parameters"], "model", f"{path}: ", skip=unused)
    return model | check_recorded_imports(checkpoint.get("datamodule_hyper_parameters", {}), "data", f"{path}: ")


def check_recorded_components(checkpoint: dict, path: str | Path, resuming: bool = True) -> None:
    """Each component the checkpoint records (the network and its distribution, the regime, the data split; the
    optimizer and scheduler when ``resuming``) is of the class its place takes and takes its recorded settings
    (Python's own signature check): refused in one line naming the checkpoint, before anything is built."""
    model = checkpoint["hyper_parameters"]
    network = model.get("network")
    if not is_component_spec(network):
        raise InputError(
            f"{path}: it records no network (a class_path and init_args); was it written by this template?"
        )
    recorded = [
        (network, "network", nn.Module),
        ((network.get("init_args") or {}).get("distribution"), "distribution", Distribution),
        (model.get("regime"), "regime", Regime),
        *((model.get(name), name, base) for name, base in OPTIMIZATION_BASES.items() if resuming),
        (checkpoint.get("datamodule_hyper_parameters", {}).get("split"), "data split", Split),
    ]
    for spec, what, base in recorded:
        if not is_component_spec(spec):
            continue
        cls = component_class(spec, what, base, f"{path}: ")
        try:
            if inspect.isabstract(cls):
                raise TypeError(f"{cls.__name__} is abstract")
            inspect.signature(cls).bind_partial(**(spec.get("init_args") or {}))
        except TypeError as error:
            raise InputError(
                f"{path}: its {what} {spec['class_path']} does not take the settings recorded for it ({error}); was "
                "it written by another version, or edited?"
            ) from None


def load_checkpoint(path: str | Path) -> tuple[dict, Forecaster]:
    """The checkpoint at ``path`` (``read_checkpoint``) and its ``Forecaster`` (CPU, eval mode) with its weights, as the
    tools and scripts open one."""
    checkpoint, _ = read_checkpoint(path)  # the tools build with project.imports, not a parser
    settings = {k: v for k, v in checkpoint["hyper_parameters"].items() if not k.startswith("_")}
    model_class = recorded_class(checkpoint["hyper_parameters"], Forecaster, path)
    components = {"network": build_network(settings.get("network"), f"{path}: ")}
    if "regime" in settings:
        components["regime"] = built_component(settings["regime"], "regime", Regime, f"{path}: ")
    try:
        module = model_class(**{**settings, **components})
    except (InputError, TypeError, ValueError) as error:
        raise InputError(
            f"{path}: its settings do not build a {model_class.__name__} ({str(error).splitlines()[0]})"
        ) from None
    check_weights_fit(path, checkpoint, module)
    module.load_state_dict(checkpoint["state_dict"])  # found finite by read_checkpoint: not checked again
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


def checkpoint_defaults(checkpoint: dict, linked: tuple[str, ...], reads_a_file: bool, resuming: bool) -> dict:
    """The model and data sections a config would give for the checkpoint (its classes and settings): the parser's
    defaults for a command with ``--ckpt_path``, so that the user's configs and flags win by the parser's own rule.
    ``linked``: the settings the CLI's links give (never defaults); where the data is cached is this run's choice, and
    so is the embedded data's ``synthetic`` when the command ``reads_a_file`` of its own. The optimizer and scheduler
    only when ``resuming``: a command that forecasts or scores never builds them."""
    left_out = (*linked, *(() if resuming else OPTIMIZATION_BASES))
    model = {k: v for k, v in checkpoint["hyper_parameters"].items() if not k.startswith("_") and k not in left_out}
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


def check_weights_fit(path: str | Path, checkpoint: dict, model: Forecaster) -> None:
    """Refuse in one line weights that a model built from the checkpoint's settings cannot take (a missing, an unknown
    or a resized tensor: a file edited or written by another version), before Lightning loads them."""
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    recorded = {name: tuple(value.shape) for name, value in checkpoint["state_dict"].items()}
    resized = [name for name in expected.keys() & recorded.keys() if expected[name] != recorded[name]]
    differences = [  # in torch's words, as load_state_dict would say it
        ("Missing key(s)", sorted(expected.keys() - recorded.keys())),
        ("Unexpected key(s)", sorted(recorded.keys() - expected.keys())),
        ("size mismatch for", sorted(resized)),
    ]
    if any(names for _, names in differences):
        said = "; ".join(f"{words}: {', '.join(names)}" for words, names in differences if names)
        raise InputError(f"{path}: its weights do not fit the settings it records ({said[:200]})")


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
