"""Options that cannot mean what they say together: the template's rules, in one table.

A rule reads settings by the names a config gives them (``model.context_length``, ``model.network``) and says in one
line why they cannot go together. ``check`` runs the table on whatever settings are known, skipping a rule whose
settings are not all there: the CLI runs it on the parsed config before any class is built (a bad combination is
refused before the data is read), and ``Forecaster``, ``WindowDataModule`` and ``NaiveComparison`` run it on their own
arguments, for a class built in Python. A component (a network, a distribution, a regime) is given as its class or
the object: a rule reads only what it declares about itself (``probabilistic``, ``new_fixed_shape_cache``), never its
name. A rule about one class's own arguments sits in that class (``Fractions``' shares, ``Quantiles``' levels).
"""

from __future__ import annotations

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
    def refusal(length: int, patch: int) -> str | None:
        return f"{name}={length} must be a multiple of patch_length={patch}" if length % patch else None

    return refusal


def _predict_horizon_in_patches(predict_horizon: int | None, patch: int, n_future_covariates: int) -> str | None:
    if predict_horizon is None or not ends_inside_a_patch(predict_horizon, patch, n_future_covariates):
        return None
    return (
        f"predict_horizon={predict_horizon} must be a multiple of patch_length={patch} with future covariates: a "
        "patch's token holds the covariates of all its steps, beyond the last one asked for"
    )


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


def _calendar_needs_a_time_column(calendar_features: bool | None, time_column: str | None) -> str | None:
    if not calendar_features or time_column is not None:
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
        ("model.predict_horizon", "model.network.patch_length", "model.network.n_future_covariates"),
        _predict_horizon_in_patches,
    ),
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
    Rule(("data.calendar_features", "data.time_column"), _calendar_needs_a_time_column),
    # A callback against the model.
    Rule(
        ("naive_comparison.enabled", "naive_comparison.season", "model.context_length"),
        _seasonal_naive_within_the_context,
    ),
)
