"""What the user set, in every spelling: the command line, ``--config`` files (``-c``, ``--conf``, ``-cPATH``, before
the subcommand too) and section files (``--data FILE``), whether or not a value equals its default.

The CLI compares these settings with a checkpoint's (``project.checkpoints.check_checkpoint_matches``), lets them
stand over the checkpoint's data settings, and lists the files they came from among the run's inputs.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from project.errors import InputError


def explicit_settings(args: list[str], config, subcommand: str, root_files: list) -> dict:
    """What the user set on the command line, in ``--config`` files (every spelling: ``-c``, ``--conf``, ``-cPATH``,
    before the subcommand too, ``root_files``) or in section files (``--data FILE``, ``--model FILE``), whether or not
    it equals a default, as a nested dict with the parsed values (``{"model": {"d_model": 128}, …}``). An option of
    the command line that is not in the parsed config (a class chosen after it has no such argument) is refused: it
    would be dropped without a word."""
    keys = {key: False for path in config.get("config") or [] for key in flattened(_yaml(path))}
    for path in root_files or []:  # `--config FILE fit`: the file's section of the subcommand
        keys.update({key: False for key in flattened(_yaml(path).get(subcommand) or {})})
    for name, path in config.items():
        if name.endswith("__path__") and path:  # a section given as a file: --data FILE
            section = name.removesuffix(".__path__")
            keys.update({f"{section}.{key}": False for key in flattened(_yaml(path))})
    for token in args:
        key = token[2:].partition("=")[0].removesuffix("+")  # `--option+=value` appends to a list
        if token.startswith("--") and not (len(key) >= 2 and "config".startswith(key)):  # --conf is --config
            keys[key] = True  # True: given on the command line
    explicit: dict = {}
    for key, on_command_line in sorted(keys.items()):
        key, stored_at = _in_subclass_mode(key)
        key = _with_init_args(config, key)
        try:
            value = config[key]
        except (KeyError, TypeError):
            if on_command_line and key.startswith(("model.init_args.", "data.init_args.")):  # classes may change
                owner = _class_owning(config, key)
                raise InputError(
                    f"--{stored_at} does not apply to {owner}, which a later option, a config or the checkpoint "
                    "chose: options apply in order; give it after the option that chooses the class, or leave it out"
                ) from None
            continue
        stored_at = user_facing(key)
        *sections, name = stored_at.split(".")
        level = explicit
        for section in sections:
            level = level.setdefault(section, {})
        if on_command_line and hasattr(value, "class_path") and not stored_at.endswith("init_args"):
            value = {"class_path": value.class_path}  # `--model.network=Class` names the class, not its defaults
        level[name] = value.as_dict() if hasattr(value, "as_dict") else value
    return explicit


def _with_init_args(config, key: str) -> str:
    """``key`` as it is stored: jsonargparse accepts a subclass's argument without ``init_args``
    (``model.init_args.network.d_model`` is ``model.init_args.network.init_args.d_model``)."""
    parts = key.split(".")
    for position in range(1, len(parts)):
        prefix = ".".join(parts[:position])
        if parts[position] not in ("init_args", "class_path", "dict_kwargs") and _has(config, f"{prefix}.class_path"):
            parts.insert(position, "init_args")
            return _with_init_args(config, ".".join(parts))
    return key


def _class_owning(config, key: str) -> str:
    """The class whose arguments ``key`` would be among (the nearest ``class_path`` above it), for messages."""
    parts = key.split(".")
    for position in range(len(parts) - 1, 0, -1):
        prefix = ".".join(parts[:position]).removesuffix(".init_args")
        if _has(config, f"{prefix}.class_path"):
            return str(config[f"{prefix}.class_path"])
    return "the options"


def _file(path) -> Path:
    """A config file's path, from jsonargparse's path object (its absolute form) or a plain one."""
    return Path(str(getattr(path, "absolute", path)))


def _has(config, key: str) -> bool:
    try:
        config[key]
    except (KeyError, TypeError):
        return False
    return True


def input_files(config) -> list[str | None]:
    """The files a run reads that its settings name: the data file (None for the embedded data), ``--config`` files
    and section files (``--data FILE``)."""
    sections = [path for name, path in config.items() if name.endswith("__path__")]
    configs = [str(_file(path)) for path in [*(config.get("config") or []), *sections] if path]
    return [config.data.init_args.get("source"), *configs]


def named_classes(explicit: dict) -> set[str]:
    """The class paths the user named (model, network, its distribution, regime, optimizer, learning-rate scheduler,
    data): the ones a checkpoint may name outside this project."""
    model, data = explicit.get("model", {}), explicit.get("data", {})
    network = model.get("network", {})
    distribution = network.get("init_args", network).get("distribution", {})
    named = [model.get("class_path"), data.get("class_path"), network.get("class_path")]
    for component in (distribution, model.get("regime"), model.get("optimizer"), model.get("lr_scheduler")):
        named.append(component.get("class_path") if isinstance(component, dict) else component)
    return {name for name in named if isinstance(name, str)}


def _yaml(path) -> dict:
    """A config file's settings (a jsonargparse path or a plain one); nothing for a config given inline."""
    file = _file(path) if path else None
    content = yaml.safe_load(file.read_text()) if file is not None and file.is_file() else None
    return content if isinstance(content, dict) else {}


def _in_subclass_mode(key: str) -> tuple[str, str]:
    """Where an option the user wrote lives in the parsed config, and the name it goes by everywhere else: the
    model's and data's arguments sit under ``init_args`` (``model.instance_norm`` is ``model.init_args.instance_norm``,
    ``--model=X`` sets ``model.class_path``)."""
    section, _, rest = key.partition(".")
    if section not in ("model", "data"):
        return key, key
    rest = rest.removeprefix("init_args.") if rest != "init_args" else ""
    if rest in ("", "class_path"):
        return f"{section}.class_path", f"{section}.class_path"
    return f"{section}.init_args.{rest}", f"{section}.{rest}"


def user_facing(name: str) -> str:
    """``model.init_args.instance_norm`` as users write it: ``model.instance_norm``."""
    for section in ("model.", "data."):
        if name.startswith(section + "init_args."):
            return section + name.removeprefix(section + "init_args.")
    return name


def flattened(tree: dict, prefix: str = "") -> dict:
    """A nested settings dict as its leaves under dotted keys (``network.init_args.d_model``): a section counts
    through the keys it sets, not its defaults; lists stay values."""
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(flattened(value, f"{prefix}{key}."))  # an empty section sets nothing
        else:
            flat[f"{prefix}{key}"] = value
    return flat
