"""A tool that could not do what it was asked says so: a failed run is one line and exit code 2, never a table;
seeds, outputs and logs are checked before any work; the repository's configs are found from any folder; labels
count the data read (an optional tool's test: delete it with project/tools)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from experiments import depth, etth1, intermittent, m4, results, your_data
from experiments.results import RunFailed
from project.tools import tune
from tests.helpers import assert_refused_in_one_line, exit_code


@pytest.fixture
def any_file(tmp_path) -> Path:
    path = tmp_path / "data.csv"
    path.write_text("a\n1\n")
    return path


def depth_arguments(data: Path, tmp_path: Path) -> list[str]:
    return [
        "etth1",
        "--data",
        str(data),
        "--regimes",
        "teacher_forcing",
        "--depths",
        "32",
        "--seeds",
        "0",
        "--logs",
        str(tmp_path / "logs"),
        "--output",
        str(tmp_path / "depth.md"),
        "--figure",
        str(tmp_path / "depth.png"),
        "--statistical",
    ]


def test_a_failed_training_run_ends_in_one_line_naming_it_and_no_table(etth1_shaped, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(depth, "measure_baselines", lambda windows: [])  # the runs are what this is about

    def failing(configs, arguments, logs, name, threads=None):
        raise RunFailed(f"the run {name} failed (exit status 1; its error is above), logged in {logs}")

    monkeypatch.setattr(depth, "fit", failing)
    line = assert_refused_in_one_line(exit_code(depth.main, depth_arguments(etth1_shaped, tmp_path)), capsys)
    assert "1 of 1 runs failed" in line
    assert "etth1_teacher_forcing_D32_seed0 failed (exit status 1" in line
    assert not (tmp_path / "depth.md").exists()
    assert not (tmp_path / "depth.png").exists()


def test_a_run_that_exits_without_its_test_is_a_failure_not_a_row(etth1_shaped, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(depth, "measure_baselines", lambda windows: [])
    monkeypatch.setattr(depth, "fit", lambda *args, **kwargs: None)  # "succeeds" and logs nothing
    assert "etth1_teacher_forcing_D32_seed0 did not reach its test" in assert_refused_in_one_line(
        exit_code(depth.main, depth_arguments(etth1_shaped, tmp_path)), capsys
    )
    assert not (tmp_path / "depth.md").exists()


def test_a_real_training_run_that_fails_names_itself_from_any_folder(tmp_path, monkeypatch, capfd):
    monkeypatch.chdir(tmp_path)  # not the repository: base.yaml is found all the same
    with pytest.raises(RunFailed, match=r"the run broken failed \(exit status 2; .*logged in logs"):
        results.fit([], ["--trainer.max_epochs=-5"], Path("logs"), "broken")
    error = capfd.readouterr().err
    assert "max_epochs" in error  # Lightning refused the option, not a missing config file
    assert "base.yaml" not in error


@pytest.mark.parametrize("seeds", [["-1"], ["4294967296"], ["0", "0"]])
@pytest.mark.parametrize("tool", ["depth", "etth1", "m4", "intermittent", "your_data"])
def test_seeds_lightning_would_not_take_are_refused_in_one_line_before_any_work(
    tool, seeds, any_file, tmp_path, capsys
):
    logs, output = tmp_path / "logs", tmp_path / "out.md"
    common = ["--seeds", *seeds, "--logs", str(logs), "--output", str(output)]
    main, arguments = {
        "depth": (depth.main, ["m4_hourly", "--data", str(any_file), *common, "--figure", str(tmp_path / "f.png")]),
        "etth1": (etth1.main, ["--data", str(any_file), *common]),
        "m4": (m4.main, ["--data", str(any_file), *common]),
        "intermittent": (intermittent.main, ["--data", str(tmp_path / "panel.csv"), *common]),
        "your_data": (your_data.main, ["--data_dir", str(tmp_path), *common]),
    }[tool]
    line = assert_refused_in_one_line(exit_code(main, arguments), capsys)
    assert line.startswith("error: --seeds ")
    assert ("names a seed twice" in line) if seeds == ["0", "0"] else (f"got {seeds[0]}" in line)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["data.csv"]  # no log, no table, no data written


def test_the_tools_read_the_repositorys_configs_from_any_folder(etth1_shaped, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    configs = [
        results.BASE_CONFIG,
        etth1.CONFIG,
        *etth1.REGIME_CONFIGS.values(),
        intermittent.PANEL_CONFIG,
        tune.SEARCH_SPACE,
        *(study.config for study in depth.STUDIES.values()),
        *(benchmark.config for benchmark in m4.BENCHMARKS.values()),
        *(d.settings for d in your_data.DATASETS.values() if isinstance(d.settings, Path)),
    ]
    for config in configs:
        assert config.is_absolute(), config
        assert config.is_file(), config
    windows = etth1.datamodule(etth1_shaped)  # base.yaml and the ETTh1 preset, read from tmp_path
    assert windows.context_length == 336


def test_tabulating_trained_runs_missing_from_the_logs_names_the_folder_and_the_run(
    etth1_shaped,
    tmp_path,
    monkeypatch,
    capsys,
):
    monkeypatch.setattr(etth1, "measure_baselines", lambda windows: [])
    logs = tmp_path / "empty"
    logs.mkdir()
    arguments = [
        "--data",
        str(etth1_shaped),
        "--trained",
        "--logs",
        str(logs),
        "--regimes",
        "teacher_forcing",
        "--seeds",
        "0",
        "--output",
        str(tmp_path / "etth1.md"),
        "--statistical",
    ]
    line = assert_refused_in_one_line(exit_code(etth1.main, arguments), capsys)
    assert f"{logs}: no run teacher_forcing_seed0 logged there" in line
    assert not (tmp_path / "etth1.md").exists()


@pytest.mark.parametrize("spelling", ["same", "dot-slash"])
def test_an_output_that_is_another_output_of_the_same_command_is_refused(
    spelling, any_file, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    table = tmp_path / "depth.md"
    table.write_text("the user's table\n")
    figure = "depth.md" if spelling == "same" else "./depth.md"
    arguments = ["etth1", "--data", str(any_file), "--output", str(table), "--figure", figure, "--overwrite"]
    assert "--figure and --output are the same file" in assert_refused_in_one_line(
        exit_code(depth.main, arguments), capsys
    )
    assert table.read_text() == "the user's table\n"


def test_captions_count_the_series_and_channels_of_the_data_read():
    panel = SimpleNamespace(panel=SimpleNamespace(n_series=4, roles=SimpleNamespace(targets=("value",))))
    assert depth.title(depth.STUDIES["m4_hourly"], panel).startswith("M4 Hourly, 4 series,")
    channels = SimpleNamespace(panel=SimpleNamespace(n_series=1, roles=SimpleNamespace(targets=("a", "b", "c"))))
    assert depth.title(depth.STUDIES["etth1"], channels).startswith("ETTh1, 3 channels ")
    assert "panel, 4 series, horizon" in intermittent.markdown([], ["chosen", "test", "1", "1", "1", "0"], [], "", 4)


def test_your_datas_labels_count_the_series_of_the_file_read_not_the_published_one(tmp_path):
    intermittent.intermittent_panel(n_stores=2, n_products=2).to_csv(tmp_path / "panel.csv", index=False)
    dataset = your_data.DATASETS["intermittent"]
    label = dataset.named(dataset.windows(tmp_path / "panel.csv", []))
    assert label.startswith("intermittent monthly panel (synthetic), 4 series,")


def test_a_run_that_logged_no_test_is_named_not_tabulated(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    run = tmp_path / "teacher_forcing_seed0" / "version_0"
    with SummaryWriter(str(run)) as writer:
        writer.add_scalar("val/loss", 0.5, 1)
    with pytest.raises(RunFailed, match=r"teacher_forcing_seed0/version_0 did not reach its test"):
        results.tested_scalars(run)


@pytest.mark.parametrize("name", ["etth1", "m4_hourly"])
def test_the_studies_search_spaces_are_valid(name):
    space = tune.load_space(results.study_config(f"search/{name}.yaml"))
    assert set(space) >= {"model.optimizer.init_args.lr"}
