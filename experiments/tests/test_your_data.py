"""The ensemble rule of ``experiments/results/search/ensemble_rule.md`` as ``experiments.your_data`` applies it."""

from experiments import your_data


def floors(seeds: list[list[float]], ensembles: list[float]) -> dict[str, tuple]:
    """A floor table's entries for the seven real datasets: each dataset's seeds' and ensemble's validation MAEs."""
    return {
        key: ({"val": by_seed}, {"val": ensemble}, {}, {})
        for key, by_seed, ensemble in zip(your_data.REAL, seeds, ensembles, strict=True)
    }


def test_the_ensemble_is_recommended_below_its_best_seed_on_five_datasets_and_one_percent_below_the_mean():
    seeds = [[1.0, 1.02, 1.04]] * 7  # mean 1.02
    below_best = [0.99] * 5 + [1.01] * 2  # below 1.0 on five; 1 - 0.99 / 1.02 = 2.9%, 1 - 1.01 / 1.02 = 1.0%
    assert your_data.ensemble_decision(floors(seeds, below_best)).endswith(
        "Decision: recommend the ensemble where accuracy matters."
    )


def test_four_datasets_below_the_best_seed_or_a_gain_under_one_percent_is_no_recommendation():
    seeds = [[1.0, 1.02, 1.04]] * 7
    four = [0.99] * 4 + [1.01] * 3
    assert "below its best seed on 4 of the 7 datasets" in your_data.ensemble_decision(floors(seeds, four))
    assert your_data.ensemble_decision(floors(seeds, four)).endswith("do not recommend the ensemble.")
    close = [[1.0, 1.001, 1.002]] * 7  # every ensemble below its best seed, by less than 1% below the mean
    assert your_data.ensemble_decision(floors(close, [0.9995] * 7)).endswith("do not recommend the ensemble.")


def test_the_floor_table_applies_the_rule_only_over_the_seven_real_datasets():
    assert set(your_data.REAL) <= set(your_data.DATASETS)
    assert not {"series", "panel", "intermittent"} & set(your_data.REAL)  # synthetic data decides nothing
