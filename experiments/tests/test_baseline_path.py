"""The rule that decides configs/base.yaml's baseline path, applied to two your_data results files."""

from pathlib import Path

import pytest

from experiments import baseline_path
from experiments.results import above_seal
from experiments.tests.helpers import WITHOUT, your_data_file
from project.errors import InputError
from tests.helpers import REPOSITORY

LINEAR = f"{WITHOUT} --model.network.init_args.baseline_path=project.model.LinearPath"


SIX = [f"data {n}" for n in range(6)]


def decide(tmp_path, without: list[list[float]], with_path: list[list[float]]) -> str:
    first = your_data_file(tmp_path / "none.md", dict(zip(SIX, without)))
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)), LINEAR)
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    return above_seal(output.read_text()).strip().splitlines()[-1]


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
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)), LINEAR)
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    last = above_seal(output.read_text()).strip().splitlines()[-1]
    assert last.endswith("Decision: none: the rule is over all 6 datasets and these files hold 4.")


def test_a_loss_beyond_the_spread_on_a_part_of_the_datasets_already_keeps_today_s_default(tmp_path):
    without = [[1.0, 1.01, 1.02]] * 4
    with_path = [[0.5, 0.51, 0.52]] * 3 + [[1.2, 1.21, 1.22]]
    first = your_data_file(tmp_path / "none.md", dict(zip(SIX, without)))
    second = your_data_file(tmp_path / "linear.md", dict(zip(SIX, with_path)), LINEAR)
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(first), "--with_path", str(second), "--output", str(output)])
    assert "Decision: configs/base.yaml keeps NoPath (its second condition already fails" in output.read_text()


def test_a_candidate_s_datasets_may_come_from_several_files_each_dataset_from_one(tmp_path):
    without = [[1.0, 1.1, 1.2]] * 6
    with_path = [[0.9, 1.0, 1.1]] * 6
    parts = [
        your_data_file(tmp_path / name, dict(zip(names, values)), command)
        for name, names, values, command in (
            ("none_a.md", SIX[:4], without[:4], WITHOUT),
            ("none_b.md", SIX[4:], without[4:], WITHOUT),
            ("linear_a.md", SIX[:4], with_path[:4], LINEAR),
            ("linear_b.md", SIX[4:], with_path[4:], LINEAR),
        )
    ]
    output = tmp_path / "decision.md"
    baseline_path.main(
        ["--without", *map(str, parts[:2]), "--with_path", *map(str, parts[2:]), "--output", str(output)]
    )
    assert above_seal(output.read_text()).strip().endswith("Decision: configs/base.yaml takes LinearPath.")
    with pytest.raises(InputError, match=r"none_a\.md: holds data 0 again"):
        baseline_path.arm_maes([parts[0], parts[0]])


def refusal(capsys, output: Path, *arguments) -> str:
    """The one line a refused comparison prints, after checking that it exited with 2 and wrote no table."""
    with pytest.raises(SystemExit) as refused:
        baseline_path.main([*map(str, arguments), "--output", str(output)])
    assert refused.value.code == 2
    assert not output.exists()
    error = capsys.readouterr().err
    assert error.count("\n") == 1
    return error.strip()


def test_a_file_given_for_the_role_of_the_other_candidate_is_refused_in_one_line_and_writes_nothing(tmp_path, capsys):
    nopath = your_data_file(tmp_path / "none.md", dict(zip(SIX, [[1.0, 1.1, 1.2]] * 6)))
    linear = your_data_file(tmp_path / "linear.md", dict(zip(SIX, [[0.9, 1.0, 1.1]] * 6)), LINEAR)
    output = tmp_path / "decision.md"
    assert refusal(capsys, output, "--without", linear, "--with_path", nopath) == (
        f"error: {linear}: given for --without (NoPath's runs, configs/base.yaml as it is) but holds runs with "
        "--model.network.init_args.baseline_path=LinearPath, by its stamp; give it for --with_path"
    )
    other = your_data_file(tmp_path / "other_none.md", dict(zip(SIX, [[1.0, 1.1, 1.2]] * 6)))
    assert refusal(capsys, output, "--without", nopath, "--with_path", other) == (
        f"error: {other}: given for --with_path (the runs with a baseline path) but holds NoPath's runs (no baseline "
        "path), by its stamp; give it for --without"
    )
    assert refusal(capsys, output, "--without", nopath, "--with_path", nopath) == (
        f"error: {nopath}: given for both --without and --with_path; each file holds one candidate's runs"
    )


def test_a_with_path_file_of_another_path_or_of_other_datasets_is_refused_in_one_line(tmp_path, capsys):
    nopath = [your_data_file(tmp_path / f"none_{n}.md", {SIX[n]: [1.0, 1.1, 1.2]}) for n in range(2)]
    linear = your_data_file(tmp_path / "linear.md", {SIX[0]: [0.9, 1.0, 1.1]}, LINEAR)
    seasonal = your_data_file(
        tmp_path / "seasonal.md",
        {SIX[1]: [0.9, 1.0, 1.1]},
        f"{WITHOUT} --model.network.init_args.baseline_path project.model.SeasonalNaivePath",
    )
    output = tmp_path / "decision.md"
    assert refusal(capsys, output, "--without", *nopath, "--with_path", linear, seasonal) == (
        f"error: {seasonal}: given for --with_path holds the runs of SeasonalNaivePath, and {linear} those of "
        "LinearPath; give one baseline path's runs"
    )
    assert refusal(capsys, output, "--without", *nopath, "--with_path", linear) == (
        f"error: {nopath[1]}: given for --without (NoPath's runs, configs/base.yaml as it is) holds data 1, which no "
        "--with_path file holds; run both candidates on the same datasets"
    )


def test_a_file_whose_runs_were_given_a_config_is_taken_in_the_role_it_is_given(tmp_path):
    """A config may set the path: the stamp cannot tell, and the role given decides."""
    without = your_data_file(tmp_path / "none.md", dict(zip(SIX, [[1.0, 1.1, 1.2]] * 6)))
    configured = f"{WITHOUT} --config my_path.yaml"
    with_path = your_data_file(tmp_path / "linear.md", dict(zip(SIX, [[0.9, 1.0, 1.1]] * 6)), configured)
    output = tmp_path / "decision.md"
    baseline_path.main(["--without", str(without), "--with_path", str(with_path), "--output", str(output)])
    assert above_seal(output.read_text()).strip().endswith("Decision: configs/base.yaml takes LinearPath.")


def test_the_seeds_are_read_from_the_runs_table_never_from_the_floor_table_beside_it():
    """results/your_data.md holds both tables; on ETTh1 the floor scores every 24th window, so its seeds differ, and
    no seed may be a statistical model's cell (M4 Hourly's AutoTheta 342.539 is one)."""
    found = baseline_path.seed_maes(REPOSITORY / "experiments" / "results" / "your_data.md")
    etth1 = next(splits for label, splits in found.items() if label.startswith("ETTh1"))
    assert etth1 == {"validation": [1.765, 1.794, 1.796], "test": [1.502, 1.491, 1.515]}
    hourly = next(splits for label, splits in found.items() if label.startswith("M4 Hourly"))
    assert 342.539 not in hourly["validation"] + hourly["test"]
