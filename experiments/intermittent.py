"""Does the panel recipe beat the naive forecasts on short, intermittent series? A check on data like retail's.

    python -m experiments.intermittent            # writes data/intermittent_panel.csv if absent, then the table

The data: a synthetic monthly panel (``intermittent_panel``) of 350 store × product series of 3 to 5 years, levels
from about one unit a month to about a thousand, a fifth of the series selling in only some months, prices and
promotions known in advance, the store's size and the product's category as static covariates. The last 6 months
of each series are the test months, the 6 before them the validation months.

A few recipes (``RECIPES``: the scaling, the loss, per-window normalisation) are each trained once on the training
months with ``configs/panel.yaml``'s network and compared by their validation MAE in original units, beside
repeat-last and seasonal naive (12 months) on the same validation windows. The best is trained once per seed and
tested once per seed; the table gives both steps, so the choice is seen to be made on validation only, each seed's
test MAE, and in the same run the statistical floor on the same windows: AutoETS and AutoTheta
(``experiments.statistical``, the ``baselines`` extra; ``--statistical`` with no name leaves them out) fitted per
series on its training months.

    python -m experiments.intermittent --floor    # the statistical floor alone

``--floor`` trains nothing: on the same validation and test windows it scores repeat-last, seasonal naive, AutoETS
and AutoTheta only, MAE in original units as above; ``experiments/results/intermittent_floor.md`` adds AutoARIMA
(``--floor --statistical AutoETS AutoTheta AutoARIMA``, about a minute).
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.results import (
    at_best_validation,
    check_seeds,
    data_options,
    fit,
    markdown_table,
    mean_std,
    preset_datamodule,
    repository_config,
    tested_scalars,
    write_table,
)
from experiments.statistical import STATISTICAL_MODELS, floor_maes, statistical_label, statistical_model
from project.data import WindowDataModule
from project.errors import reported_in_one_line
from project.files import check_output, write_atomically
from project.tools.stamp import hardware, run_commit
from project.training.runs import read_scalars

PANEL_CONFIG = repository_config("panel.yaml")
SEASON, HORIZON = 12, 6
DATA_SETTINGS = [  # the column roles of the monthly panel, on top of configs/panel.yaml's
    "--data.synthetic=series",  # the embedded data's default: a source is given
    "--data.time_column=month",
    "--data.id_columns=[store, product]",
    "--data.target_columns=[sales]",
    "--data.past_covariates=[]",
    "--data.future_covariates=[price, promotion]",
    "--data.static_covariates=[store_size, category]",
    "--data.calendar_features=false",
    "--data.context_length=12",
    f"--data.horizon={HORIZON}",
    f"--data.split={{class_path: project.data.LastRows, init_args: {{val_size: {HORIZON}, test_size: {HORIZON}}}}}",
    f"--data.eval_stride={HORIZON}",  # one validation and one test window per series
    f"--naive_comparison.season={SEASON}",
    "--trainer.max_epochs=10",
]
LOSS = "--model.network.init_args.distribution.init_args.loss"  # of the point forecast every recipe trains
MSE, MAE = f"{LOSS}=mse", f"{LOSS}=mae"
RECIPES = {  # name → its settings, each complete (configs/panel.yaml sets them too); chosen by validation MAE
    "per-series scaling, MSE (configs/panel.yaml before this check)": [
        "--data.scaling=per_series",
        MSE,
        "--model.normalisation=null",
    ],
    "per-series scaling, MAE": ["--data.scaling=per_series", MAE, "--model.normalisation=null"],
    "mean-absolute scaling, MAE": ["--data.scaling=mean_abs", MAE, "--model.normalisation=null"],
    "mean-absolute scaling, MAE, per-window normalisation": [
        "--data.scaling=mean_abs",
        MAE,
        "--model.normalisation=project.training.InstanceNorm",
    ],
}
NAIVE = {
    "repeat-last": "mae_repeat_last_original_units",
    f"seasonal naive ({SEASON})": "mae_seasonal_naive_original_units",
}


def intermittent_panel(n_stores: int = 10, n_products: int = 35, months: int = 60, seed: int = 0) -> pd.DataFrame:
    """Monthly sales of ``n_stores × n_products`` series that end in the same month and start 3 to 5 years before
    it: Poisson counts around a level spread over three orders of magnitude, a yearly season, a price elasticity
    and promotions, and for a fifth of the series whole months without sales."""
    rng = np.random.default_rng(seed)
    calendar = pd.date_range("2020-01-01", periods=months, freq="MS")
    frames = []
    for store in range(n_stores):
        for product in range(n_products):
            length = int(rng.integers(36, months + 1))
            t = np.arange(months - length, months)
            base_price = float(rng.uniform(1, 50))
            price = base_price * (1 + 0.1 * rng.standard_normal(length)).clip(0.5, 1.5)
            promotion = (rng.random(length) < 0.15).astype(int)
            season = 1 + 0.3 * np.sin(2 * np.pi * (t + rng.integers(12)) / 12)
            trend = np.exp(rng.normal(0, 0.01) * (t - t[0]))
            mean = np.exp(rng.normal(2.5, 1.5)) * season * trend * (price / base_price) ** -1.5 * 1.6**promotion
            sells = rng.random(length) >= (rng.uniform(0.3, 0.8) if rng.random() < 0.2 else 0.0)
            sales = rng.poisson(mean) * sells
            frames.append(
                pd.DataFrame(
                    {
                        "month": calendar[t].strftime("%Y-%m-%d"),
                        "store": f"s{store:02d}",
                        "product": f"p{product:02d}",
                        "store_size": ("small", "large")[store % 2],
                        "category": f"c{product % 5}",
                        "sales": sales.astype(float),
                        "price": price.round(2),
                        "promotion": promotion,
                    }
                )
            )
    return pd.concat(frames, ignore_index=True)


def markdown(
    selection: list[list[str]], tested: list[str], floor: list[list[str]], per_seed: str, n_series: int
) -> str:
    beside = ", beside the statistical floor on the same windows (fitted per series on the training months)"
    caption = (
        f"Synthetic intermittent monthly panel, {n_series} series, horizon {HORIZON}: MAE in original units, "
        f"validation for the choice, test once per seed for the chosen recipe{beside if floor else ''}; {hardware()}."
    )
    header = ["recipe", "split", "model MAE", "repeat-last MAE", f"seasonal naive ({SEASON}) MAE", "seeds"]
    return markdown_table(caption, header, [*selection, tested, *floor]) + "\n" + per_seed + "\n"


def data_settings() -> dict:
    """``DATA_SETTINGS``' ``--data.key=value`` options as a ``data:`` mapping (values parsed as the CLI would)."""
    return data_options(DATA_SETTINGS)


def panel_windows(data: Path, extra: list[str] = ()) -> WindowDataModule:
    """The panel's windows as the recipes are scored on them (with the ``--data.*`` options of ``extra`` that every
    run is given), set up for testing."""
    settings = {key: value for key, value in {**data_settings(), **data_options(extra)}.items() if key != "synthetic"}
    return preset_datamodule(PANEL_CONFIG, data, synthetic="series", **settings)


def floor_table(data: Path, statistical: tuple[str, ...] = ("AutoETS", "AutoTheta")) -> str:
    """``experiments.statistical.floor_maes`` on the recipes' windows as a table, no model trained."""
    windows = panel_windows(data)
    maes, seconds = floor_maes(windows, statistical, SEASON, SEASON)
    rows = []
    for name, errors in maes.items():
        label = f"{statistical_label(name, SEASON)}, statsforecast, per series" if name in seconds else name
        took = f"{seconds[name]:.0f} s" if name in seconds else "–"
        rows.append([f"{label} (measured)", *(f"{errors[s]:.3f}" for s in ("val", "test")), took])
    caption = (
        f"Synthetic intermittent monthly panel, {windows.panel.n_series} series, horizon {HORIZON}: MAE in "
        f"original units on the recipes' validation and test windows, no model trained; {hardware()}."
    )
    return markdown_table(caption, ["forecast", "validation MAE", "test MAE", "wall-clock"], rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m experiments.intermittent", description=__doc__.split("\n")[0])
    parser.add_argument("--data", type=Path, default=Path("data/intermittent_panel.csv"), help="written if absent")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2], help="the chosen recipe's test runs")
    parser.add_argument("--logs", type=Path, default=Path("lightning_logs/intermittent"), help="where runs log")
    parser.add_argument(
        "--output", type=Path, default=Path("experiments/results/intermittent_panel.md"), help="the table"
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output file")
    parser.add_argument("--floor", action="store_true", help="no training: naive, AutoETS and AutoTheta rows only")
    parser.add_argument(
        "--statistical",
        nargs="*",
        default=["AutoETS", "AutoTheta"],
        choices=list(STATISTICAL_MODELS),
        help="the table's statsforecast rows (the baselines extra); with no name, none",
    )
    args, extra = parser.parse_known_args(argv)  # anything else goes to every `fit`, e.g. --trainer.max_epochs=2
    run_commit()  # what the stamp names: the code at the start
    with reported_in_one_line():
        check_seeds(args.seeds)
        check_output(args.output, [args.data], args.overwrite)
        if not args.data.is_file():  # a file already there is the user's, read as it is
            write_atomically(args.data, lambda path: intermittent_panel().to_csv(path, index=False))
        if args.floor:
            write_table(args.output, floor_table(args.data, tuple(args.statistical)), argv)
            return
        if args.statistical:
            statistical_model(args.statistical[0], SEASON)  # the extra is missing: say so before training
        arguments = [f"--data.source={args.data}", *DATA_SETTINGS, *extra]
        validation = {}
        for number, (name, recipe) in enumerate(RECIPES.items()):
            run, _ = fit([PANEL_CONFIG], [*arguments, *recipe, "--test_after_fit=false"], args.logs, f"recipe{number}")
            curves = read_scalars(run)
            validation[name] = {
                tag: at_best_validation(curves, f"val/{tag}") for tag in ("mae_original_units", *NAIVE.values())
            }
        chosen = min(validation, key=lambda name: validation[name]["mae_original_units"])
        selection = [
            [
                name,
                "validation",
                f"{scores['mae_original_units']:.3f}",
                *(f"{scores[t]:.3f}" for t in NAIVE.values()),
                "0",
            ]
            for name, scores in validation.items()
        ]
        tested: dict[str, list[float]] = {}
        for seed in args.seeds:
            run, _ = fit(
                [PANEL_CONFIG],
                [*arguments, *RECIPES[chosen], f"--seed_everything={seed}"],
                args.logs,
                f"chosen_seed{seed}",
            )
            curves = tested_scalars(run)
            for tag in ("mae_original_units", *NAIVE.values()):
                tested.setdefault(tag, []).append(float(curves[f"test/{tag}"].iloc[-1]))
        model = tested["mae_original_units"]
        row = [
            f"{chosen} (chosen)",
            "test",
            mean_std(model),
            *(f"{tested[t][0]:.3f}" for t in NAIVE.values()),
            ", ".join(map(str, args.seeds)),
        ]
        values = ", ".join(f"seed {seed}: {value:.3f}" for seed, value in zip(args.seeds, model))
        per_seed = f"- {chosen} (chosen), test model MAE: {values}"
        windows = panel_windows(args.data, extra)  # the data read: the caption counts its series
        maes, seconds = floor_maes(windows, args.statistical, SEASON, SEASON)
        floor = [  # the naive columns computed again on the same windows
            [
                f"{statistical_label(name, SEASON)}, statsforecast, per series ({seconds[name]:.0f} s, both splits)",
                label,
                *(f"{maes[n][split]:.3f}" for n in (name, "repeat-last", f"seasonal naive ({SEASON})")),
                "deterministic",
            ]
            for name in args.statistical
            for split, label in (("val", "validation"), ("test", "test"))
        ]
        write_table(args.output, markdown(selection, row, floor, per_seed, windows.panel.n_series), argv)


if __name__ == "__main__":
    main()
