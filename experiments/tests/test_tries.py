"""One change to the defaults beside the default's runs, on validation: experiments.tries."""

import shlex

import pytest

from experiments import tries, your_data
from experiments.results import above_seal
from experiments.tests.helpers import your_data_file
from tests.helpers import REPOSITORY

# Labels as experiments.your_data writes them, so that a change to its format is a change here too.
SERIES = your_data.DATASETS["series"].label.format(channels=5, horizon=12, look_back="{}")
PANEL = your_data.DATASETS["panel"].label.format(series=36, horizon=14, look_back="{}")


def test_each_try_is_set_beside_the_default_s_run_of_the_same_data_whatever_its_look_back(tmp_path):
    default = your_data_file(tmp_path / "default.md", {SERIES.format(12): [1.0, 1.1, 1.2], PANEL.format(28): [5.0]})
    longer = your_data_file(tmp_path / "longer.md", {SERIES.format(48): [0.5, 0.6, 0.7]})
    level = your_data_file(tmp_path / "level.md", {PANEL.format(28): [5.0]})
    output = tmp_path / "tries.md"
    given = ["--try", "look-back 48", str(longer), "--try", "same", str(level)]
    tries.main(["--default", str(default), *given, "--output", str(output)])
    table = above_seal(output.read_text())
    series = SERIES.split(", horizon")[0]
    assert f"| look-back 48 | {series} | 12 → 48 | 1.100 ± 0.100 | 0.600 ± 0.100 | -45.5% | better |" in table
    assert "| same | embedded synthetic panel (configs/panel.yaml's data), 36 daily series | 28 → 28 |" in table
    assert table.rstrip().endswith("| 5.000 | 5.000 | +0.0% | level |")


def test_a_difference_inside_the_larger_spread_is_level():
    assert tries.verdict([1.0, 1.1, 1.2], [1.05, 1.15, 1.25]) == pytest.approx((100 * 0.05 / 1.1, "level"))
    assert tries.verdict([1.0, 1.01, 1.02], [1.2, 1.21, 1.22])[1] == "worse"


def test_a_try_of_data_the_default_did_not_run_and_a_try_named_twice_are_refused_in_one_line(tmp_path, capsys):
    default = your_data_file(tmp_path / "default.md", {SERIES.format(12): [1.0, 1.1]})
    other = your_data_file(tmp_path / "other.md", {PANEL.format(28): [5.0, 5.1]})
    with pytest.raises(SystemExit) as stopped:
        tries.main(["--default", str(default), "--try", "x", str(other), "--output", str(tmp_path / "t.md")])
    assert stopped.value.code == 2
    assert "the try 'x' ran embedded synthetic panel" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        tries.main(["--default", str(default), "--try", "x", str(default), "--try", "x", str(default)])
    assert "--try 'x' is given twice" in capsys.readouterr().err
    assert not (tmp_path / "t.md").exists()


def on_machine(path, cpu: str):
    """The file with a stamp as project.tools.stamp writes it, naming ``cpu``."""
    first, rest = path.read_text().split("\n", 1)
    path.write_text(f"{first.removesuffix('.')} on x86_64 CPU ({cpu}), 1 thread, Linux, torch 2.13.0+cpu.\n{rest}")
    return path


def test_rows_whose_runs_ran_on_two_machines_are_named_under_the_table(tmp_path):
    default = on_machine(your_data_file(tmp_path / "default.md", {SERIES.format(12): [1.0, 1.1, 1.2]}), "AMD EPYC")
    same = on_machine(your_data_file(tmp_path / "same.md", {SERIES.format(12): [1.0, 1.1, 1.2]}), "AMD EPYC")
    other = on_machine(your_data_file(tmp_path / "other.md", {SERIES.format(12): [0.9, 1.0, 1.1]}), "Intel Xeon")
    output = tmp_path / "tries.md"
    tries.main(["--default", str(default), "--try", "same", str(same), "--output", str(output)])
    assert "Two machines" not in output.read_text()
    tries.main(["--default", str(default), "--try", "x", str(other), "--output", str(output), "--overwrite"])
    note = above_seal(output.read_text()).strip().splitlines()[-1]
    assert note.startswith(
        "Two machines: 'x' on embedded synthetic series (`make train`): the try's runs on x86_64 CPU (Intel Xeon), "
        "the default's on x86_64 CPU (AMD EPYC). "
    )
    assert "neither the validation MAEs nor any wall-clock are bitwise comparable" in note


def test_the_tries_file_names_the_rows_its_runs_ran_on_two_machines():
    """experiments/results/tries/tries.md, from the files its stamp names: the note the tool writes today is in it."""
    results = REPOSITORY / "experiments" / "results" / "tries" / "tries.md"
    command = shlex.split(results.read_text().partition("\n")[0].split("`")[1])
    given = tries.arguments().parse_args(command[3:])
    default = [REPOSITORY / path for path in given.default]
    files = {name: [REPOSITORY / path for path in paths] for name, *paths in given.tries}
    note = tries.machine_note(default, files)
    assert "'d_model 256, dim_feedforward 1024' on ETTh1" in note
    assert note in results.read_text()
