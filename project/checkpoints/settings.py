"""A checkpoint's settings: what each way in takes of them (``TAKEN``), parsed once while the import policy holds and
without reading a file a setting names, the model built from them on the meta device and checked against the weights
before any memory is taken; the model and data module the Python API and the tools build from a checkpoint."""

from __future__ import annotations

import contextlib
import copy
import json
import shlex
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import lightning as L
import torch
from jsonargparse import ArgumentParser, Namespace
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context

from project.checkpoints.imports import allow_only, import_policy_kept, refused_import
from project.checkpoints.reading import SECTIONS, data_state, read_checkpoint
from project.errors import InputError, reported_cause
from project.files import bounded_yaml, check_name_lengths
from project.option_errors import bounded_yaml_loading, one_line
from project.training.module import Forecaster

MAX_SAID = 1000  # characters of a parser's message quoted: a value it read may be long
PYTHON_TRUST = "pass trusted=['{path}']"  # how the Python API trusts an import path a checkpoint names
# What builds an optimizer and a schedule: only a resumed fit trains on with them.
OPTIMIZATION = ("model.optimizer", "model.lr_scheduler")
# How many workers load the data and where it is cached: this machine's, the run's own choice.
MACHINE = ("data.num_workers", "data.cache_dir")
# The model's settings its weights are read with (a checkpoint predating one records none).
LENGTHS = (("data", "context_length"), ("data", "horizon"), ("model", "normalisation"))


@dataclass(frozen=True)
class Taken:
    """What one way in takes from a checkpoint: its settings, less ``settings_left_out`` (as a config names them), as
    the run's defaults (the user's configs and flags win); and which of the state Lightning restores (``restored``:
    the weights, and the data module's scaling and vocabularies; ``training``: a fit's progress too, its optimizer's
    and schedule's settings the config's)."""

    settings_left_out: tuple[str, ...]
    restored: str  # "weights", "training" or "" (the CLI loads the weights itself)
    training_order: bool = False  # the data module's shuffle seed and position


TAKEN = {
    "fit --ckpt_path": Taken(MACHINE, "training", training_order=True),  # resume your own run
    "fit --weights": Taken((*MACHINE, *OPTIMIZATION), ""),  # start from someone else's weights, everything else fresh
    "validate, test, predict": Taken((*MACHINE, *OPTIMIZATION), "weights"),
}


def way_in(subcommand: str, weights: bool) -> Taken:
    """The row of ``TAKEN`` for a CLI command."""
    if subcommand == "fit":
        return TAKEN["fit --weights" if weights else "fit --ckpt_path"]
    return TAKEN["validate, test, predict"]


def checkpoint_config(checkpoint: dict, section: str, default_class: type, left_out: Iterable[str] = ()) -> dict:
    """A checkpoint's model or data ``section`` as a config names it, less the settings ``left_out``: its class
    (LightningCLI records it as ``_class_path``; ``default_class`` where it records none) and its settings."""
    recorded = checkpoint.get(SECTIONS[section], {})
    settings = {k: copy.deepcopy(v) for k, v in recorded.items() if not k.startswith("_")}
    for name in left_out:
        if name.startswith(f"{section}."):
            settings.pop(name.removeprefix(f"{section}."), None)
    default = f"{default_class.__module__}.{default_class.__qualname__}"
    return {"class_path": recorded.get("_class_path", default), "init_args": settings}


def reading_a_file(data_settings: dict, source: object) -> None:
    """A checkpoint's data settings, given a data file (``source``) over them, read it in place of the embedded data
    they record (``synthetic``, left to the data module's default)."""
    if source is not None:
        data_settings.pop("synthetic", None)


def section_parser(**sections: type) -> ArgumentParser:
    """A parser of a checkpoint's sections as a config has them (each a class_path and init_args, the class ``model``
    or ``data`` or a subclass), with sub-configs off: jsonargparse would read a string a component's setting holds as
    the path of that component's config file, a file the run never named (``add_subclass_arguments`` turns them on)."""
    parser = ArgumentParser(exit_on_error=False)
    for section, cls in sections.items():
        action = parser.add_argument(f"--{section}", type=cls, required=True, sub_configs=False)
        action.sub_add_kwargs = {"fail_untyped": False, "sub_configs": False}  # as add_subclass_arguments sets it
    return parser


def parsed_settings(
    parser: ArgumentParser, config: dict, path: str | Path, trusted: Iterable[str] = (), how_to_trust: str = ""
) -> Namespace:
    """The one parse of a checkpoint's settings (``config``: its sections as ``checkpoint_config`` gives them), by
    ``parser`` (``section_parser``), while jsonargparse may import only this project, torch's optimizers and
    ``trusted`` and reads YAML within a config's bounds. A refusal is one line naming the checkpoint."""
    with import_policy_kept(), bounded_yaml_loading():
        allow_only(trusted)
        try:
            return parser.parse_object(config)
        except Exception as error:  # the parser's refusal, or a trusted module's own error when imported
            raise InputError(refusal(path, config, error, how_to_trust or PYTHON_TRUST)) from None


@contextlib.contextmanager
def building(path: str | Path, config: dict, trusted: Iterable[str], how_to_trust: str) -> Iterator[None]:
    """Classes built from a checkpoint's settings: under the same import policy, recording their settings as given
    (as LightningCLI records a config's, never the objects built from them); a class's refusal names the checkpoint."""
    recorded = next(iter(config.values()))
    given = {"_class_path": recorded["class_path"], **recorded["init_args"]}
    with import_policy_kept(), _given_hyperparameters_context(given, "lightning.pytorch.cli.instantiate_module"):
        allow_only(trusted)
        try:
            yield
        except (InputError, TypeError, ValueError) as error:
            raise InputError(refusal(path, config, error, how_to_trust or PYTHON_TRUST)) from None


def model_on_meta(
    parsed: Namespace, checkpoint: dict, path: str | Path, trusted: Iterable[str] = (), how_to_trust: str = ""
) -> L.LightningModule:
    """The model the checkpoint's parsed settings (``parsed.model``) describe, built on the meta device (no memory),
    and its weights' shapes checked against the checkpoint's: settings that would build a larger model than its
    stored weights are refused before any memory is taken."""
    config = {"model": parsed.model.as_dict()}
    with torch.device("meta"), building(path, config, trusted, how_to_trust):
        model = section_parser(model=Forecaster).instantiate(Namespace(model=parsed.model)).model
    check_weights_fit(path, checkpoint, model)
    return model


def load_from_checkpoint(
    cls: type,
    path: str | Path,
    trusted: Iterable[str] = (),
    overrides: dict | None = None,
    hparams_file: str | Path | None = None,
    checkpoint: dict | None = None,
    weights: bool = True,
    how_to_trust: str = "",
) -> L.LightningModule | L.LightningDataModule:
    """What ``Forecaster.load_from_checkpoint`` and ``WindowDataModule.load_from_checkpoint`` do, and the tools: the
    checkpoint at ``path`` read once (or ``checkpoint``, read already), ``cls`` (or the subclass it records) built from
    its settings (or, as Lightning's ``hparams_file``, those of that YAML file) and ``overrides``, parsed once; a model
    built on the meta device first, then for real, with its weights (``weights=False``: untrained, for a refit); a data
    module with its state (the scaling and vocabularies the weights read)."""
    checkpoint = read_checkpoint(path) if checkpoint is None else checkpoint
    section = "data" if issubclass(cls, L.LightningDataModule) else "model"
    if hparams_file is not None:
        checkpoint = {**checkpoint, SECTIONS[section]: read_hparams_file(hparams_file)}
    config = {section: checkpoint_config(checkpoint, section, cls)}
    config[section]["init_args"].update(overrides or {})
    if section == "data":
        reading_a_file(config["data"]["init_args"], (overrides or {}).get("source"))
    parser = section_parser(**{section: cls})
    parsed = parsed_settings(parser, config, path, trusted, how_to_trust)
    if section == "model":
        model_on_meta(parsed, checkpoint, path, trusted, how_to_trust)
    with building(path, config, trusted, how_to_trust):
        built = parser.instantiate(parsed)[section]
    if section == "model" and weights:
        built.load_state_dict(checkpoint["state_dict"])  # found finite by read_checkpoint
    elif section == "data":
        load_data_state(built, checkpoint, path)
    return built


def load_data_state(
    datamodule: L.LightningDataModule, checkpoint: dict, path: str | Path, training_order: bool = True
) -> None:
    """The data module's state the checkpoint at ``path`` records (its scaling, vocabularies, frequency and, unless not
    ``training_order``, the training order's seed and position) loaded into ``datamodule``, which checks it."""
    state = data_state(checkpoint, training_order=training_order)
    if state:
        try:
            datamodule.load_state_dict(state)
        except InputError as error:
            raise InputError(f"{path}: {error}") from None


def refusal(path: str | Path, config: dict, error: BaseException, how_to_trust: str) -> str:
    """The one line for an error raised while a parser read a checkpoint's settings (``config``): an import path the
    policy refused, with where it sits and how to trust it; or the parser's or a class's own words."""
    refused = refused_import(error)
    if refused is None:
        cause = reported_cause(error)
        said = one_line(str(cause if cause is not None else error))
        return f"{path}: {said[:MAX_SAID]}{'…' if len(said) > MAX_SAID else ''}"
    where = setting_holding(config, refused)
    where = where.removesuffix(".class_path") if where else where  # the component, as its option names it
    how = f"name {refused} in a config"
    if where:  # the option that names it, pasted alone: the whole component where it is one of its arguments
        component, spec = max(_components(config), key=lambda found: refused in str(found[1]) and len(found[0]))
        setting, value = (where, refused) if spec.get("class_path") == refused else (_named(component), spec)
        value = value if isinstance(value, str) else shlex.quote(json.dumps(value))
        how = how_to_trust.format(path=refused, setting=setting, value=value)
    return (
        f"{path}: the checkpoint names {refused}{f' (at {where})' if where else ''}, outside this project; nothing "
        f"was imported: {how} to trust it"
    )


def _named(location: str) -> str:
    """A location in a checkpoint's settings as a config names the option: a section's own arguments without
    ``init_args`` (``model.network``), those of the classes below with it."""
    return location.replace(".init_args.", ".", 1)


def _components(config: object, location: str = "") -> Iterator[tuple[str, dict]]:
    """Every component (a mapping with a ``class_path``) in ``config``, with where it sits."""
    if isinstance(config, dict):
        if "class_path" in config:
            yield location, config
        for key, value in config.items():
            yield from _components(value, f"{location}.{key}" if location else str(key))
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            yield from _components(value, f"{location}[{index}]")


def setting_holding(config: object, value: str, location: str = "") -> str | None:
    """Where in ``config`` a string holding ``value`` sits, as a config names the option (``model.network.class_path``);
    for the message only: what is imported is the parser's decision."""
    if isinstance(config, str):
        return location if value in config else None
    items = config.items() if isinstance(config, dict) else enumerate(config) if isinstance(config, list) else ()
    for key, inner in items:
        here = f"{location}[{key}]" if isinstance(key, int) else f"{location}.{key}" if location else str(key)
        if (found := setting_holding(inner, value, here)) is not None:
            return _named(found) if not location else found
    return None


def read_hparams_file(path: str | Path) -> dict:
    """The settings of an ``hparams.yaml`` (Lightning's ``hparams_file``), read as plain YAML within a config's
    bounds: given to the parser like a checkpoint's own."""
    path = check_name_lengths(path)
    if not path.is_file():
        raise InputError(f"{path}: hparams file not found")
    settings = bounded_yaml(path.read_text(encoding="utf-8", errors="replace"), str(path))
    if not isinstance(settings, dict):
        raise InputError(f"{path}: expected a mapping of settings, found {type(settings).__name__}")
    return settings


def check_weights_fit(path: str | Path, checkpoint: dict, model: torch.nn.Module) -> None:
    """Refuse in one line weights that a model built from the checkpoint's settings cannot take (a missing, an unknown
    or a resized tensor), before they are loaded: built on the meta device, the model has taken no memory yet."""
    expected = {name: tuple(value.shape) for name, value in model.state_dict().items()}
    recorded = {name: tuple(getattr(value, "shape", ())) for name, value in checkpoint["state_dict"].items()}
    resized = [name for name in expected.keys() & recorded.keys() if expected[name] != recorded[name]]
    differences = [  # in torch's words, as load_state_dict would say it
        ("Missing key(s)", sorted(expected.keys() - recorded.keys())),
        ("Unexpected key(s)", sorted(recorded.keys() - expected.keys())),
        ("size mismatch for", sorted(resized)),
    ]
    if any(names for _, names in differences):
        said = "; ".join(f"{words}: {', '.join(names)}" for words, names in differences if names)
        raise InputError(f"{path}: its weights do not fit the settings it records ({said[:200]})")


def check_checkpoint_fits(path: str | Path, checkpoint: dict, model: L.LightningModule, datamodule) -> None:
    """Refuse in one line, before the weights are loaded, a model or data of the user's config that would read the
    checkpoint's weights otherwise than it was trained: the sizes the data's columns give the network, the classes,
    the network's settings, the lengths, the normalisation and the scaling, each named with both values. What chooses
    only what is forecast or read (samples, quantiles, the data file, the batch size) may differ."""
    trained = checkpoint["hyper_parameters"]
    given_network, trained_network = flattened(model.hparams["network"]), flattened(trained.get("network", {}))
    sizes = "init_args.sizes."
    differing = [
        f"{name.removeprefix(sizes)}={value!r} (checkpoint: {trained_network[name]!r})"
        for name, value in given_network.items()
        if name.startswith(sizes) and name in trained_network and value != trained_network[name]
    ]
    if differing:
        source = datamodule.hparams.get("source") or "the embedded data"
        raise InputError(
            f"{source} does not fit {path}: its columns give the network {', '.join(differing)}; use data with the "
            "checkpoint's targets, covariates and static categories"
        )
    scaler = data_state(checkpoint).get("scaler") or {}
    compared = [
        ("model.class_path", f"{type(model).__module__}.{type(model).__qualname__}", trained.get("_class_path")),
        *((f"{section}.{name}", model.hparams.get(name), trained.get(name)) for section, name in LENGTHS),
        ("data.scaling", getattr(datamodule, "scaling", None), scaler.get("mode")),
    ]
    compared = [(name, given, recorded) for name, given, recorded in compared if recorded is not None]
    # Each network setting the checkpoint records (max_length sizes a table, no weight); a component given where it
    # records none (a baseline path added) is named by its class_path.
    compared += [
        (f"model.network.{name}", given_network.get(name, given_network.get(f"{name}.class_path")), value)
        for name, value in trained_network.items()
        if not name.startswith((sizes, "init_args.max_length"))
        and (value is not None or f"{name}.class_path" in given_network)
    ]
    mismatches = [
        f"{name}={given!r} (checkpoint: {recorded!r})" for name, given, recorded in compared if given != recorded
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
