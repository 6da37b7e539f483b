"""The rule that decides configs/base.yaml's baseline path, applied to two your_data results files."""

from pathlib import Path

import pytest

from experiments import baseline_path
from project.errors import InputError


def your_data_file(path: Path, validation: dict[str, list[float]]) -> Path:
    """A results file as experiments.your_data writes its per-seed lines (test MAE: the validation MAE plus 1)."""
    lines = ["Written by `python -m experiments.your_data` at commit x.", ""]
    for dataset, values in validation.items():
        for split, offset in (("validation", 0.0), ("test", 1.0)):
            seeds = ", ".join(f"seed {seed}: {value + offset:.3f}" for seed, value in enumerate(values))
            lines.append(f"- {dataset}, {split} model MAE: {seeds}")
    path.write_text("\n".join(lines) + "\n")
    return path


SIX = [f"data {n}" for n in range(6)]


def decide(tmp_path, without: list[list[float]], with_path: list[list[float]]) -> str:
    first = your_data_file(tmp_path / "none.md", dict(zip(SIX, without)))
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)))
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    return output.read_text().strip().splitlines()[-1]


def test_the_path_is_adopted_when_it_wins_on_most_datasets_and_loses_nowhere_beyond_the_spread(tmp_path):
    without = [[1.0, 1.1, 1.2]] * 6
    with_path = [[0.9, 1.0, 1.1]] * 4 + [[1.05, 1.15, 1.25]] * 2  # two losses, each inside the spread of 0.1
    assert decide(tmp_path, without, with_path).endswith("Decision: configs/base.yaml takes LinearPath.")


def test_one_loss_beyond_the_spread_keeps_today_s_default(tmp_path):
    without = [[1.0, 1.01, 1.02]] * 6
    with_path = [[0.5, 0.51, 0.52]] * 5 + [[1.2, 1.21, 1.22]]
    last = decide(tmp_path, without, with_path)
    assert "worse by more than the seeds' spread on data 5" in last
    assert last.endswith("Decision: configs/base.yaml keeps NoPath.")


def test_three_wins_of_six_is_a_tie_and_keeps_today_s_default(tmp_path):
    without = [[1.0, 1.1, 1.2]] * 6
    with_path = [[0.99, 1.09, 1.19]] * 3 + [[1.01, 1.11, 1.21]] * 3
    assert decide(tmp_path, without, with_path).endswith("Decision: configs/base.yaml keeps NoPath.")


def test_files_of_other_datasets_are_refused_in_one_line(tmp_path):
    first = your_data_file(tmp_path / "none.md", {"a": [1.0, 1.0]})
    second = your_data_file(tmp_path / "linear.md", {"b": [1.0, 1.0]})
    with pytest.raises(InputError, match="the two files hold other datasets: a, b"):
        baseline_path.decision(baseline_path.seed_maes(first), baseline_path.seed_maes(second))


def test_a_part_of_the_datasets_decides_nothing(tmp_path):
    without = [[1.0, 1.1, 1.2]] * 4
    with_path = [[0.5, 0.6, 0.7]] * 4
    first = your_data_file(tmp_path / "none.md", dict(zip(SIX, without)))
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)))
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    last = output.read_text().strip().splitlines()[-1]
    assert last.endswith("Decision: none: the rule is over all 6 datasets and these files hold 4.")


def test_a_loss_beyond_the_spread_on_a_part_of_the_datasets_already_keeps_today_s_default(tmp_path):
    without = [[1.0, 1.01, 1.02]] * 4
    with_path = [[0.5, 0.51, 0.52]] * 3 + [[1.2, 1.21, 1.22]]
    first = your_data_file(tmp_path / "none.md", dict(zip(SIX, without)))
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)))
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    assert "Decision: configs/base.yaml keeps NoPath (its second condition already fails" in output.read_text()


def test_a_candidate_s_datasets_may_come_from_several_files_each_dataset_from_one(tmp_path):
    without = [[1.0, 1.1, 1.2]] * 6
    with_path = [[0.9, 1.0, 1.1]] * 6
    parts = [
        your_data_file(tmp_path / name, dict(zip(names, values)))
        for name, names, values in (
            ("none_a.md", SIX[:4], without[:4]),
            ("none_b.md", SIX[4:], without[4:]),
            ("linear_a.md", SIX[:4], with_path[:4]),
            ("linear_b.md", SIX[4:], with_path[4:]),
        )
    ]
    output = tmp_path / "decision.md"
    baseline_path.main(
        ["--without", *map(str, parts[:2]), "--with_path", *map(str, parts[2:]), "--output", str(output)]
    )
    assert output.read_text().strip().endswith("Decision: configs/base.yaml takes LinearPath.")
    with pytest.raises(InputError, match=r"none_a\.md: holds data 0 again"):
        baseline_path.arm_maes([parts[0], parts[0]])
