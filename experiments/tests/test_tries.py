"""One change to the defaults beside the default's runs, on validation: experiments.tries."""

import pytest

from experiments import tries, your_data
from experiments.tests.test_baseline_path import your_data_file

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
    table = output.read_text()
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
