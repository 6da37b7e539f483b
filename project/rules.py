"""Options that cannot mean what they say together: the template's rules, in one table.

A rule reads settings by the names a config gives them (``model.context_length``, ``model.network``) and says in one
line why they cannot go together. ``options`` is the one mapping from the sections' arguments to those names: the CLI
gives it the parsed config and runs every rule before any class is built or the data read; ``Forecaster``,
``WindowDataModule`` and ``NaiveComparison`` give it their own arguments, for a class built in Python, and ``check``
skips a rule whose settings one class does not know. A component (a network, a distribution, a regime) is the class
the parser imported or the object: a rule reads only what it declares about itself (``probabilistic``,
``new_fixed_shape_cache``), never its name. A rule about one class's own arguments sits in that class (``Fractions``'
shares, ``Quantiles``' levels, the ``Forecaster``'s predict horizon against its network's patches).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from project.errors import InputError
from project.model.distributions import DEFAULT_QUANTILES

# The defaults of the sampling settings, which a point forecast leaves as they are (Forecaster's signature).
DEFAULT_NUM_SAMPLES = 100
DEFAULT_INTERVAL = 0.8


def longest_forecast(horizon: int, max_horizon: int | None = None) -> int:
    """The longest forecast a model is set up for: ``max_horizon``, or 4 × the trained horizon when it is empty."""
    return max_horizon or 4 * horizon


def ends_inside_a_patch(horizon: int, patch_length: int, n_future_covariates: int) -> bool:
    """Whether a forecast of ``horizon`` steps cannot be made with future covariates: it would end inside a patch,
    whose token holds the covariates of all its steps, beyond the last one asked for."""
    return bool(n_future_covariates) and horizon % patch_length != 0


@dataclass(frozen=True)
class Rule:
    """``refusal(*values of options)``: why the settings ``options`` cannot go together, or None."""

    options: tuple[str, ...]
    refusal: Callable[..., str | None]


def check(settings: Mapping[str, Any]) -> None:
    """Refuse in one line the first rule of ``RULES`` that ``settings`` (option name → value) break."""
    for rule in RULES:
        known = all(option in settings for option in rule.options)
        if known and (why := rule.refusal(*(settings[option] for option in rule.options))) is not None:
            raise InputError(why)


def name_of(component: Any) -> str:
    return component.__name__ if isinstance(component, type) else type(component).__name__


def _multiple_of_patch(name: str) -> Callable[[int, int], str | None]:
    def refusal(length: int, patch: int | None) -> str | None:  # None: a network without patches
        return f"{name}={length} must be a multiple of patch_length={patch}" if patch and length % patch else None

    return refusal


def _sampling_without_a_distribution(
    num_samples: int, prediction_quantiles: Any, interval: float, distribution: Any
) -> str | None:
    """Set to other than their defaults (the default quantiles, however given, included), they would do nothing."""
    given = {
        "num_samples": num_samples != DEFAULT_NUM_SAMPLES,
        "prediction_quantiles": tuple(prediction_quantiles or DEFAULT_QUANTILES) != DEFAULT_QUANTILES,
        "interval": interval != DEFAULT_INTERVAL,
    }
    changed = [name for name, differs in given.items() if differs]
    if not changed or getattr(distribution, "probabilistic", True):
        return None
    return (
        f"{', '.join(changed)} apply to the sample paths of a distribution; the network's PointForecast forecasts "
        "points"
    )


def _within_max_horizon(name: str) -> Callable[[int | None, int, int | None], str | None]:
    def refusal(length: int | None, horizon: int, max_horizon: int | None) -> str | None:
        longest = longest_forecast(horizon, max_horizon)
        if length is None or length <= longest:
            return None
        return (
            f"{name}={length} exceeds max_horizon={longest}, the longest forecast the model is set up for; raise "
            "max_horizon"
        )

    return refusal


def _cuda_graph_needs_a_fixed_shape_cache(cuda_graph: bool, network: Any) -> str | None:
    if not cuda_graph or hasattr(network, "new_fixed_shape_cache"):
        return None
    return f"cuda_graph needs a network with new_fixed_shape_cache; {name_of(network)} has none"


def _sample_feedback_needs_a_distribution(regime: Any, feedback: str | None, distribution: Any) -> str | None:
    if feedback != "sample" or getattr(distribution, "probabilistic", True):
        return None
    return (
        f"{name_of(regime)}: feedback=sample draws from a predicted distribution; give the network a probabilistic "
        "distribution (model.network.init_args.distribution: Normal, StudentT, Quantiles or yours)"
    )


def _bptt_through_draws_needs_reparameterisation(
    regime: Any, feedback: str | None, gradient: str | None, distribution: Any
) -> str | None:
    if gradient != "bptt" or feedback != "sample" or getattr(distribution, "reparameterised", True):
        return None
    return (
        f"{name_of(regime)}: gradient=bptt with feedback=sample differentiates through the draws, which "
        f"{name_of(distribution)} cannot (no reparameterisation); use Normal or StudentT, or feedback=mean"
    )


def _seasonal_naive_within_the_context(enabled: bool, season: int | None, context_length: int) -> str | None:
    if not enabled or not season or not context_length or season <= context_length:
        return None
    return (
        f"naive_comparison.season={season} must be at most model.context_length={context_length} (the seasonal-naive "
        "forecast repeats the context's last season)"
    )


def _some_target_columns(target_columns: list | None) -> str | None:
    if target_columns is None or target_columns:
        return None
    return "target_columns must name at least one column, or be left out to use every numeric one"


def _embedded_or_a_source(synthetic: str, source: str | None) -> str | None:
    """``source``: the name of what is read (a path, named whole: a cut one would name another file)."""
    if source is None or synthetic == "series":
        return None
    return f"synthetic chooses the embedded data; data.source={source} is read instead"


def _embedded_panel_needs_its_ids(synthetic: str, source: Any, id_columns: list | None) -> str | None:
    if source is not None or synthetic != "panel" or id_columns:
        return None
    return (
        "synthetic panel holds 36 series, one per store and product; set id_columns=[store, product] "
        "(configs/panel.yaml does)"
    )


def _calendar_needs_a_time_column(calendar_features: bool | None, time_column: str | None, source: Any) -> str | None:
    """``source`` None: the embedded data, which brings its own time column."""
    if not calendar_features or time_column is not None or source is None:
        return None
    return (
        "calendar_features=true derives features from the timestamps; set time_column (or leave calendar_features "
        "empty: on whenever there is a time column)"
    )


RULES = (
    # The model: its lengths, sampling settings and decoding against its network and distribution.
    Rule(("model.context_length", "model.network.patch_length"), _multiple_of_patch("context_length")),
    Rule(("model.horizon", "model.network.patch_length"), _multiple_of_patch("horizon")),
    Rule(
        ("model.num_samples", "model.prediction_quantiles", "model.interval", "model.network.distribution"),
        _sampling_without_a_distribution,
    ),
    # The horizon twice: the length checked, and what an empty max_horizon is sized from.
    Rule(("model.horizon", "model.horizon", "model.max_horizon"), _within_max_horizon("horizon")),
    Rule(("model.predict_horizon", "model.horizon", "model.max_horizon"), _within_max_horizon("predict_horizon")),
    Rule(("model.cuda_graph", "model.network"), _cuda_graph_needs_a_fixed_shape_cache),
    # The regime against the distribution it trains.
    Rule(
        ("model.regime", "model.regime.feedback", "model.network.distribution"), _sample_feedback_needs_a_distribution
    ),
    Rule(
        ("model.regime", "model.regime.feedback", "model.regime.gradient", "model.network.distribution"),
        _bptt_through_draws_needs_reparameterisation,
    ),
    # The data: what to read and which columns.
    Rule(("data.target_columns",), _some_target_columns),
    Rule(("data.synthetic", "data.source"), _embedded_or_a_source),
    Rule(("data.synthetic", "data.source", "data.id_columns"), _embedded_panel_needs_its_ids),
    Rule(("data.calendar_features", "data.time_column", "data.source"), _calendar_needs_a_time_column),
    # A callback against the model.
    Rule(
        ("naive_comparison.enabled", "naive_comparison.season", "model.context_length"),
        _seasonal_naive_within_the_context,
    ),
)


def options(model: Any = None, data: Any = None, naive_comparison: Any = None) -> dict[str, Any]:
    """The settings the rules read, named as a config names them, from each section's arguments (a mapping, a
    ``jsonargparse.Namespace`` or an object): the parsed config's, where a component is a ``class_path`` and its
    ``init_args`` and the rules read the class the parser imported; or a class's own in Python, where a component is
    the object. What a section does not hold is left out, and the rules that read it wait for the class that knows
    it; a component's argument it does not take is None."""
    sections = {"model": model, "data": data, "naive_comparison": naive_comparison}
    settings = {}
    for option in OPTIONS:
        section, _, name = option.partition(".")
        if sections[section] is not None and "." not in name:  # a section's own argument
            settings[option] = _given(sections[section], name)
    if model is not None:  # its components: the class, and what the rules read of its arguments
        network = _component(settings.get("model.network", UNKNOWN))
        regime = _component(settings.get("model.regime", UNKNOWN))
        settings |= {
            "model.network": network[0],
            "model.network.patch_length": _inner(network[1], "patch_length"),
            "model.network.distribution": _component(_inner(network[1], "distribution"))[0],
            "model.regime": regime[0],
            "model.regime.feedback": _inner(regime[1], "feedback"),
            "model.regime.gradient": _inner(regime[1], "gradient"),
        }
    return {option: value for option, value in settings.items() if value is not UNKNOWN}


UNKNOWN = object()  # a setting the arguments given do not hold


def _given(arguments: Any, name: str) -> Any:
    """A section's argument: a mapping's or a Namespace's entry, or an object's attribute; UNKNOWN where it has none."""
    if isinstance(arguments, Mapping) or hasattr(arguments, "as_dict"):  # a jsonargparse Namespace
        return arguments.get(name, UNKNOWN)
    return getattr(arguments, name, UNKNOWN)


def _inner(component: Any, name: str) -> Any:
    """A known component's argument (None where it takes none); UNKNOWN for a component not known."""
    if component is UNKNOWN:
        return UNKNOWN
    found = _given(component, name) if component is not None else None
    return None if found is UNKNOWN else found


def _component(value: Any) -> tuple[Any, Any]:
    """A component as the rules read it: the class a ``class_path`` names (looked up among the modules the parser
    imported, never imported here) and its ``init_args``; or the object, which is both."""
    class_path = _inner(value, "class_path") if value is not UNKNOWN else None
    if isinstance(class_path, str):
        return loaded_class(class_path), _inner(value, "init_args") or {}
    return value, value


def loaded_class(class_path: object) -> Any:
    """What the dotted ``class_path`` names in a module already imported (by the parser, which checked it), or None:
    looked up, never imported, so that a class path a value merely holds runs no code."""
    if not isinstance(class_path, str) or "." not in class_path:
        return None
    module_name, _, name = class_path.rpartition(".")
    return getattr(sys.modules.get(module_name), name, None)


OPTIONS = tuple(dict.fromkeys(option for rule in RULES for option in rule.options))  # every option a rule reads
