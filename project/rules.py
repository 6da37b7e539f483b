"""Option combinations that cannot mean what they say, listed in one place: the model's (``RULES``) and the
data's (``DATA_RULES``).

Each rule is a one-line description (printed at the end of ``python -m project.cli fit --help``) and a check on
the ``Forecaster``'s or the ``WindowDataModule``'s settings; ``check_settings`` raises the first broken rule as an
``InputError`` at start-up, before any data is read or any step is trained. Options that merely have no effect in
some mode are refused only when set to something other than their default, so that switching modes never needs
edits elsewhere in a config. A rule reads what a distribution declares about itself (``probabilistic``), never its
name, so a new distribution needs no edit here. Rules about one component sit in it: ``PointForecast``'s
``huber_delta``, ``Quantiles``' levels, and a regime's options and what it needs of the distribution (its ``check``,
``project.training.regimes``); numeric domains are the signatures' types (``project.domains``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from project.errors import InputError


@dataclass(frozen=True)
class Rule:
    description: str
    broken: Callable[[dict, dict], str | None]  # (settings, defaults) → the error message, or None


def ends_inside_a_patch(horizon: int, patch_length: int, n_future_covariates: int) -> bool:
    """Whether a forecast of ``horizon`` steps cannot be made with future covariates: it would end inside a patch,
    whose token holds the covariates of all its steps, beyond the last one asked for."""
    return bool(n_future_covariates) and horizon % patch_length != 0


def _changed(settings: dict, defaults: dict, *names: str) -> list[str]:
    return [name for name in names if settings[name] != defaults[name]]


RULES: tuple[Rule, ...] = (
    Rule(
        "context_length and horizon are multiples of the network's patch_length",
        lambda s, d: next(
            (
                f"{name}={s[name]} must be a multiple of patch_length={s['patch_length']}"
                for name in ("context_length", "horizon")
                if s[name] % s["patch_length"]
            ),
            None,
        ),
    ),
    Rule(
        "with future covariates, predict_horizon is a multiple of the network's patch_length",
        lambda s, d: (
            f"predict_horizon={s['predict_horizon']} must be a multiple of patch_length={s['patch_length']} with "
            "future covariates: a patch's token holds the covariates of all its steps, beyond the last one asked for"
            if s["predict_horizon"] is not None
            and ends_inside_a_patch(s["predict_horizon"], s["patch_length"], s["n_future_covariates"])
            else None
        ),
    ),
    Rule(
        "num_samples, prediction_quantiles and interval apply to a probabilistic distribution",
        lambda s, d: (
            None
            if s["probabilistic"] or not (changed := _changed(s, d, "num_samples", "prediction_quantiles", "interval"))
            else f"{', '.join(changed)} apply to the sample paths of a distribution; the network's PointForecast "
            "forecasts points"
        ),
    ),
    Rule(
        "horizon and predict_horizon are at most max_horizon",
        lambda s, d: next(
            (
                f"{name}={s[name]} exceeds max_horizon={s['max_horizon']}, the longest forecast the model is set up "
                "for; raise max_horizon"
                for name in ("horizon", "predict_horizon")
                if s["max_horizon"] is not None and s[name] is not None and s[name] > s["max_horizon"]
            ),
            None,
        ),
    ),
)


DATA_RULES: tuple[Rule, ...] = (
    Rule(
        "synthetic and synthetic_rows apply to the embedded data (no source)",
        lambda s, d: (
            None
            if s["source"] is None or not (changed := _changed(s, d, "synthetic", "synthetic_rows"))
            else f"{', '.join(changed)} choose the embedded data; data.source={s['source']} is read instead"
        ),
    ),
    Rule(
        "calendar_features: true needs a time_column",
        lambda s, d: (
            None
            if not s["calendar_features"] or s["time_column"] is not None
            else "calendar_features=true derives features from the timestamps; set time_column (or leave "
            "calendar_features empty: on whenever there is a time column)"
        ),
    ),
)


def describe_rules() -> str:
    """Every rule, numbered (the help formatter reflows lines into one paragraph): what ``fit --help`` prints."""
    rules = [f"model: {rule.description}" for rule in RULES] + [f"data: {rule.description}" for rule in DATA_RULES]
    return "Option rules, checked at start-up (project/rules.py): " + " ".join(
        f"({number}) {rule};" for number, rule in enumerate(rules, start=1)
    )


def check_settings(settings: dict, defaults: dict, rules: tuple[Rule, ...] = RULES) -> None:
    """Raise the first broken rule as a one-line ``InputError``."""
    for rule in rules:
        message = rule.broken(settings, defaults)
        if message:
            raise InputError(message)
