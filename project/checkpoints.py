"""A checkpoint read once before anything trusts it, its settings built by a parser that imports only what is allowed
(``project.imports``), and whether a model and data can take its weights. Every problem is one line naming the
checkpoint.

Every way in parses a checkpoint's settings with ``parsed_checkpoint``: the CLI with LightningCLI's parser, whose
defaults they then become; everything else (the tools, ``Forecaster.load_from_checkpoint``,
``WindowDataModule.load_from_checkpoint``) through ``built_from_checkpoint``.
"""

from __future__ import annotations

import contextlib
import copy
import json
import shlex
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

import lightning as L
import torch
import yaml
from jsonargparse import ArgumentError, ArgumentParser, Namespace
from lightning.pytorch.core.mixins.hparams_mixin import _given_hyperparameters_context
from lightning.pytorch.plugins import TorchCheckpointIO
from packaging.version import InvalidVersion, Version

from project.errors import InputError, reported_cause
from project.files import bounded_yaml, check_name_lengths, check_settings_bounds
from project.imports import allow_only, import_policy_kept, refused_import
from project.option_errors import one_line

SIZES = "init_args.sizes."  # the data's sizes among a network's flattened settings
SECTIONS = {"model": "hyper_parameters", "data": "datamodule_hyper_parameters"}  # a config's section → a checkpoint's
MAX_SAID = 1000  # characters of a parser's message quoted: a value it read may be a whole file
PYTHON_TRUST = "pass trusted=['{path}']"  # how the Python API trusts an import path a checkpoint names
# What builds an optimizer and a scheduler: only a run that resumes training needs them.
OPTIMIZATION = ("optimizer", "lr_scheduler")
# What a data module's state records of how one run went through its data, not of the data.
TRAINING_ORDER = ("shuffle_seed", "training_position")
# Values in a checkpoint's containers: far above a checkpoint's (a panel of 100,000 series records a few per series),
# far below what takes minutes to walk.
MAX_CHECKPOINT_ITEMS = 10_000_000


def read_checkpoint(path: str | Path) -> dict:
    """The checkpoint at ``path``, read once (``weights_only=True``: reading runs no code) and checked before anything
    is built from it: a checkpoint of this template, its settings within the bounds of a config, its weights finite."""
    if "://" in str(path):  # torch.hub would fetch it, Lightning would unpickle it
        raise InputError(f"{path}: a checkpoint is read from a file on this machine, never from a URL")
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
    for key in SECTIONS.values():
        if not isinstance(checkpoint.get(key, {}), dict):
            raise InputError(f"{path}: its {key} are {type(checkpoint[key]).__name__}, not a mapping of settings")
        check_settings_bounds(checkpoint.get(key, {}), f"{path}: its {key}")
    data_state(checkpoint, path)
    check_tensor_storage(checkpoint, f"{path}: ")
    check_finite_weights(checkpoint["state_dict"], f"{path}: ")
    return checkpoint


def data_state(checkpoint: dict, path: str | Path) -> dict:
    """The data module's state the checkpoint at ``path`` records (its columns, scaling, training order): Lightning
    keeps it under the name of the data module's class, which the settings record; {} where it has none."""
    class_path = str(checkpoint.get("datamodule_hyper_parameters", {}).get("_class_path") or "WindowDataModule")
    # Under the name the settings record, or (a class path edited since) under the template's data module's.
    state = checkpoint.get(class_path.rsplit(".", 1)[-1], checkpoint.get("WindowDataModule", {}))
    if not isinstance(state, dict):
        raise InputError(f"{path}: its data state must be a mapping; got {type(state).__name__}")
    return state


class CheckpointReader(TorchCheckpointIO):
    """How the Trainer reads a checkpoint (Lightning's ``CheckpointIO`` plugin, which the CLI gives it): a file on this
    machine through ``read_checkpoint``, never a URL, written by Lightning 2 (whose loader would otherwise migrate an
    older layout); a checkpoint the CLI has read already is handed over (``read_once``), not read again. What the run
    then takes from it: ``project.training.resume``."""

    def __init__(self) -> None:
        super().__init__()
        self._read: dict[Path, dict] = {}

    def read_once(self, path: str | Path, checkpoint: dict) -> None:
        self._read[Path(path).resolve()] = checkpoint

    def load_checkpoint(self, path: str | Path, map_location: object = None, weights_only: bool | None = None) -> dict:
        checkpoint = self._read.pop(Path(path).resolve(), None) if "://" not in str(path) else None
        checkpoint = checkpoint or read_checkpoint(path)
        version = checkpoint.get("pytorch-lightning_version")
        try:
            written_by_lightning_2 = Version(version) >= Version("2.0")
        except (TypeError, InvalidVersion):
            written_by_lightning_2 = False
        if not written_by_lightning_2:
            raise InputError(f"{path}: written by Lightning {version!r:.40}; this template resumes Lightning 2's")
        return checkpoint


def checkpoint_config(checkpoint: dict, section: str, default_class: str) -> dict:
    """A checkpoint's model or data ``section`` as a config names it: its class (LightningCLI records it as
    ``_class_path``; ``default_class`` where it records none) and its settings, less Lightning's own keys."""
    recorded = checkpoint.get(SECTIONS[section], {})
    settings = {k: v for k, v in recorded.items() if not k.startswith("_")}
    return {"class_path": recorded.get("_class_path", default_class), "init_args": copy.deepcopy(settings)}


def without(settings: dict, names: Iterable[str]) -> dict:
    """``settings`` less the dotted ``names`` (``network.init_args.sizes``) it holds; changed in place."""
    for name in names:
        *parents, leaf = name.split(".")
        owner = settings
        for parent in parents:
            owner = owner.get(parent) if isinstance(owner, dict) else None
        if isinstance(owner, dict):
            owner.pop(leaf, None)
    return settings


def parsed_checkpoint(
    parser: ArgumentParser, config: dict, path: str | Path, trusted: Iterable[str] = (), how_to_trust: str = ""
) -> Namespace:
    """The one parse of a checkpoint's settings (``config``: its sections as ``checkpoint_config`` gives them): by
    ``parser``, while jsonargparse may import only this project, torch's optimizers and ``trusted``. Whatever it
    refuses is one line naming the checkpoint (``refusal``); ``how_to_trust`` says how to trust an import path."""
    with import_policy_kept():
        allow_only(trusted)
        try:
            return parser.parse_object(config)
        except (ArgumentError, InputError, TypeError, ValueError) as error:
            raise InputError(refusal(path, config, error, how_to_trust or PYTHON_TRUST)) from None


def built_from_checkpoint(
    cls: type,
    checkpoint: dict,
    path: str | Path,
    trusted: Iterable[str] = (),
    overrides: dict | None = None,
    how_to_trust: str = "",
    weights: bool = True,
    hparams_file: str | Path | None = None,
) -> object:
    """The one way an object is built from a checkpoint outside the CLI: ``cls`` (a ``LightningModule`` or a
    ``LightningDataModule``) or the subclass the checkpoint records, from its recorded settings (or, as Lightning's
    ``hparams_file``, those of that YAML file) and ``overrides`` (``parsed_checkpoint``), built while the same import
    policy holds; then its weights (a model; ``weights=False``: untrained, for a refit) or its state (a data module)
    loaded."""
    section = "data" if issubclass(cls, L.LightningDataModule) else "model"
    if hparams_file is not None:
        checkpoint = {**checkpoint, SECTIONS[section]: read_hparams_file(hparams_file)}
    config = checkpoint_config(checkpoint, section, f"{cls.__module__}.{cls.__qualname__}")
    config["init_args"].update(overrides or {})
    parser = ArgumentParser(exit_on_error=False)
    parser.add_subclass_arguments(cls, section, required=True, fail_untyped=False)
    parsed = parsed_checkpoint(parser, {section: config}, path, trusted, how_to_trust)
    # Recorded again as given, as LightningCLI records a config's settings (never the objects built from them).
    recorded = {"_class_path": config["class_path"], **config["init_args"]}

    def build() -> object:
        with import_policy_kept(), _given_hyperparameters_context(recorded, "lightning.pytorch.cli.instantiate_module"):
            allow_only(trusted)
            try:
                return parser.instantiate(parsed)[section]
            except (InputError, TypeError, ValueError) as error:  # a class refused a recorded setting
                raise InputError(refusal(path, {section: config}, error, how_to_trust or PYTHON_TRUST)) from None

    if section == "model":  # its settings checked against its weights on the meta device, before any memory is taken
        with torch.device("meta"):
            check_weights_fit(path, checkpoint, build())
    built = build()
    if section == "model" and weights:
        built.load_state_dict(checkpoint["state_dict"])  # found finite by read_checkpoint
    elif section == "data":
        load_data_state(built, checkpoint, path)
    return built


def load_data_state(
    datamodule: L.LightningDataModule, checkpoint: dict, path: str | Path, training_order: bool = True
) -> None:
    """The data module's state the checkpoint at ``path`` records (its scaling, vocabularies, frequency and, unless not
    ``training_order``, the training order's seed and position) loaded into ``datamodule``, which checks it: a refusal
    names the checkpoint."""
    state = data_state(checkpoint, path)
    if not training_order:
        state = {key: value for key, value in state.items() if key not in TRAINING_ORDER}
    if state:
        try:
            datamodule.load_state_dict(state)
        except InputError as error:
            raise InputError(f"{path}: {error}") from None


def refusal(path: str | Path, config: dict, error: BaseException, how_to_trust: str) -> str:
    """The one line for an error raised while a parser read a checkpoint's settings (``config``): an import path the
    policy refused, with where it sits and how to trust it; or the parser's or a class's own words, a class's argument
    named as a config names it, and a file a setting names (which the parser reads as that setting's config) named
    but never quoted."""
    refused = refused_import(error)
    if refused is None:
        cause = reported_cause(error)
        said = one_line(str(cause if cause is not None else error))
        quoted = setting_holding(config, lambda value: _quotes_the_file(value, said))
        if quoted is not None:
            return (
                f"{path}: its setting {quoted[0]} names the file {quoted[1][:200]}, which is not a setting this "
                "class takes (the file's content is not shown)"
            )
        return f"{path}: {said[:MAX_SAID]}{'…' if len(said) > MAX_SAID else ''}"
    where = setting_holding(config, lambda value: refused in value)
    where = where[0].removesuffix(".class_path") if where else where  # the component, as its option names it
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


def _quotes_the_file(value: str, said: str) -> bool:
    """Whether ``said`` (a parser's message) quotes what the file ``value`` names holds: one of its lines, or a value
    YAML reads from it (the parser reads a file a setting names as that setting's config)."""
    path = Path(value)
    if not path.is_file():
        return False
    with open(path, encoding="utf-8", errors="replace") as file:
        text = file.read(MAX_SAID * 64)
    pieces = {line.strip() for line in text.splitlines()}
    with contextlib.suppress(yaml.YAMLError):
        pieces |= {str(leaf) for leaf in _leaves(yaml.safe_load(text))}
    return any(len(piece) >= 3 and piece[:40] in said for piece in pieces)


def _leaves(value: object) -> Iterator[object]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _leaves(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _leaves(inner)
    else:
        yield value


def _named(location: str) -> str:
    """A location in a checkpoint's settings as a config names the option: a section's own arguments without
    ``init_args`` (``model.network``), those of the classes below with it."""
    return location.replace(".init_args.", ".", 1)


def _components(config: object, location: str = "") -> Iterator[tuple[str, dict]]:
    """Every component (a mapping with a ``class_path``) in ``config``, with where it sits (``model.init_args.network``:
    ``_named`` gives the option)."""
    if isinstance(config, dict):
        if "class_path" in config:
            yield location, config
        for key, value in config.items():
            yield from _components(value, f"{location}.{key}" if location else str(key))
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            yield from _components(value, f"{location}[{index}]")


def setting_holding(config: object, holds: Callable[[str], bool], location: str = "") -> tuple[str, str] | None:
    """Where in ``config`` the first string value that ``holds`` sits, as a config names it
    (``model.network.class_path``), and the value: for the message only; what is imported or read is the parser's
    decision."""
    if isinstance(config, dict):
        for key, value in config.items():
            inner = f"{location}.{key}" if location else str(key)
            if (found := setting_holding(value, holds, inner)) is not None:
                where, value = found
                return (_named(where) if not location else where), value
    elif isinstance(config, (list, tuple)):
        for index, value in enumerate(config):
            if (found := setting_holding(value, holds, f"{location}[{index}]")) is not None:
                return found
    elif isinstance(config, str):
        try:
            return (location, config) if holds(config) else None
        except (OSError, ValueError):  # a string no file system takes as a path
            return None
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


def checkpoint_inputs(path: str | Path | None, checkpoint: dict | None, *sources: str | Path | None) -> list:
    """What a command reads, for the output guards (``project.files``; a None is passed over): ``sources``, and with
    the checkpoint at ``path`` the checkpoint and its training data (never replaced, even by a run on other data)."""
    if checkpoint is None:
        return list(sources)
    return [path, checkpoint.get("datamodule_hyper_parameters", {}).get("source"), *sources]


def check_tensor_storage(value: object, where: str = "") -> None:
    """Refuse, anywhere in a checkpoint, a tensor that is not a dense CPU tensor whose stored bytes cover its shape (a
    view repeating a few stored values, a zero stride, would be expanded to its whole shape by the first operation on
    it; a meta or sparse tensor fails any), and containers past ``MAX_CHECKPOINT_ITEMS`` (shared or self-containing
    lists, which unpickling allows, would be walked forever). Each container is walked once."""
    pending, seen, items = [value], set(), 0
    while pending:
        item = pending.pop()
        if isinstance(item, torch.Tensor):
            dense = item.layout == torch.strided and item.device.type == "cpu" and not item.is_quantized
            if not dense:
                kind = f"{str(item.layout).removeprefix('torch.')}{', quantized' if item.is_quantized else ''}"
                raise InputError(f"{where}it holds a tensor that is not a dense one on the CPU ({kind}, {item.device})")
            if item.numel() * item.element_size() > item.untyped_storage().nbytes():
                raise InputError(
                    f"{where}a tensor of shape {tuple(item.shape)} is stored in {item.untyped_storage().nbytes()} "
                    "bytes (a view that repeats its values); a checkpoint stores each tensor whole"
                )
        elif isinstance(item, (dict, list, tuple)) and id(item) not in seen:
            seen.add(id(item))
            inner = item.values() if isinstance(item, dict) else item
            items += len(inner)
            if items > MAX_CHECKPOINT_ITEMS:
                raise InputError(f"{where}it holds more than {MAX_CHECKPOINT_ITEMS} values; is it a checkpoint?")
            pending.extend(inner)


def check_finite_weights(state: dict, where: str = "") -> None:
    """A diverged run's weights are refused wherever a checkpoint is loaded; ``where`` prefixes the message."""
    tensors = [value for value in state.values() if isinstance(value, torch.Tensor) and torch.is_floating_point(value)]
    if not all(torch.isfinite(value).all() for value in tensors):
        raise InputError(f"{where}the checkpoint holds non-finite weights (a diverged run); use an earlier checkpoint")


def check_weights_fit(path: str | Path, checkpoint: dict, model: torch.nn.Module) -> None:
    """Refuse in one line weights that a model built from the checkpoint's settings cannot take (a missing, an unknown
    or a resized tensor: a file edited or written by another version), before they are loaded."""
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
    model_class = f"{type(model).__module__}.{type(model).__qualname__}"
    compared = [("model.class_path", model_class, trained.get("_class_path"))]
    compared += [  # the sizes were compared above; max_length sizes a table, no weight
        (f"model.network.{name}", value, trained_network.get(name))
        for name, value in given_network.items()
        if not name.startswith((SIZES, "init_args.max_length"))
    ]
    compared += [
        (f"{section}.{name}", model.hparams.get(name), trained.get(name))
        for section, name in (("data", "context_length"), ("data", "horizon"), ("model", "normalisation"))
    ]
    # A component where the checkpoint has none (a baseline path added): named as the option, not as weights.
    parents = dict.fromkeys(  # in order, once each
        parent
        for name in given_network
        if name not in trained_network and (parent := _recorded_parent(name, trained_network)) is not None
    )
    added = [
        f"model.network.{name}={given_network.get(name + '.class_path')!r} (checkpoint: {trained_network[name]!r})"
        for name in parents
    ]
    if added:
        raise InputError(f"{path} was trained with other settings than the config: {', '.join(added)}")
    scaler = data_state(checkpoint, path).get("scaler")
    recorded_scaling = scaler.get("mode") if isinstance(scaler, dict) else None
    compared.append(("data.scaling", getattr(datamodule, "scaling", None), recorded_scaling))
    mismatches = [
        f"{name}={given!r} (checkpoint: {recorded!r})"
        for name, given, recorded in compared
        if recorded is not None and given != recorded
    ]
    if mismatches:
        raise InputError(f"{path} was trained with other settings than the config: {', '.join(mismatches)}")


def _recorded_parent(name: str, recorded: dict) -> str | None:
    """The setting above the dotted ``name`` that ``recorded`` holds as a value (``init_args.baseline_path: None``)."""
    parts = name.split(".")
    return next((p for i in range(len(parts) - 1, 0, -1) if (p := ".".join(parts[:i])) in recorded), None)


def flattened(tree: dict, prefix: str = "") -> dict:
    """A nested settings dict as its leaves under dotted keys (``init_args.d_model``); lists stay values."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flattened(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat
