"""The guards the CLI is behind: no output replaces an input, no checkpoint runs code, and every refusal is one line
(the tools' own, the figure tool's among them: tests/tools/test_tool_guards.py)."""

import os
import re
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch
import yaml

from project.cli import cli_main
from project.errors import InputError
from project.training.module import Forecaster
from tests.helpers import (
    BASE,
    SMALL_MODEL,
    assert_refused_in_one_line,
    cli,
    config,
    digests,
    frame_of_row_numbers,
    only_run,
    quick_fit_arguments,
)


@pytest.mark.slow
def test_predict_never_replaces_its_checkpoint_or_its_config_even_with_overwrite(user_run, tmp_path, capsys):
    _, _, checkpoint = user_run
    config = tmp_path / "mine.yaml"
    config.write_text("trainer:\n  logger: false\n")
    for output in (checkpoint, config):
        before = digests(checkpoint, config)
        arguments = ["--config", str(config), f"--ckpt_path={checkpoint}", f"--predictions.output={output}"]
        assert_refused_in_one_line(cli("predict", *arguments, "--overwrite=true"), capsys, "choose another output path")
        assert digests(checkpoint, config) == before


@pytest.mark.slow
def test_an_unwritable_prediction_output_is_refused_before_predicting(user_run, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    for output, message in ((tmp_path, "is a folder"), (blocker / "forecast.csv", "is a file, not a folder")):
        code = cli("predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={output}", "--trainer.logger=false")
        assert_refused_in_one_line(code, capsys, message)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_output_folder_is_refused_before_predicting(user_run, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o555)
    code = cli(
        "predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={locked / 'f.csv'}", "--trainer.logger=false"
    )
    assert_refused_in_one_line(code, capsys, "cannot write into")


@pytest.mark.slow
def test_an_explicit_scaling_other_than_the_checkpoints_is_refused(user_run, capsys):
    assert_refused_in_one_line(
        cli("predict", f"--ckpt_path={user_run[2]}", "--data.scaling=per_series", "--trainer.logger=false"),
        capsys,
        "data.scaling='per_series' (checkpoint: 'global')",
    )


def test_data_that_gives_the_network_other_sizes_than_the_checkpoint_is_refused(user_run, tmp_path, capsys):
    other = tmp_path / "three.csv"
    frame_of_row_numbers(400, n_features=3).to_csv(other, index=False)
    arguments = [f"--data.source={other}", "--trainer.logger=false", f"--predictions.output={tmp_path / 'p.csv'}"]
    code = cli("predict", f"--ckpt_path={user_run[2]}", *arguments)
    assert_refused_in_one_line(code, capsys, "its columns give the network n_targets=3 (checkpoint: 2)")


@pytest.mark.fast_cases(5)
@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda c: c.update(hyper_parameters={}), "not a checkpoint written by `python -m project.cli fit`"),
        (lambda c: c["state_dict"].update(stranger=torch.ones(3)), "its weights do not fit the settings it records"),
        (
            lambda c: c["hyper_parameters"]["network"]["init_args"].update(d_model=64),
            "its weights do not fit the settings it records",
        ),
        (
            lambda c: c["hyper_parameters"]["network"].update(class_path="project.errors.InputError"),
            'Parser key "model.network": Import path project.errors.InputError does not correspond to a subclass of '
            "Module",
        ),
        (
            lambda c: c["hyper_parameters"].update(_class_path="project.errors.InputError"),
            "Import path project.errors.InputError does not correspond to a subclass of Forecaster",
        ),
        (
            lambda c: c["datamodule_hyper_parameters"].update(_class_path="project.errors.InputError"),
            "Import path project.errors.InputError does not correspond to a subclass of WindowDataModule",
        ),
        (  # imported by the process already, but not the project's and not named by the user: not even looked up
            lambda c: c["hyper_parameters"]["network"].update(class_path="subprocess.Popen"),
            "the checkpoint names subprocess.Popen (at model.network), outside this project; nothing was "
            "imported: pass --model.network=subprocess.Popen to trust it",
        ),
        (  # a project class whose settings do not fit it: the GRU with the transformer's, a network that is a model
            lambda c: c["hyper_parameters"]["network"].update(class_path="project.model.GRUForecaster"),
            "foreign.ckpt: Parser key \"model.network\": Option 'd_model' is not accepted",
        ),
        (
            lambda c: c["hyper_parameters"]["network"].update(class_path="project.training.module.Forecaster"),
            "foreign.ckpt: Parser key \"model.network\": Option 'distribution.init_args.loss' is not accepted",
        ),
        (
            lambda c: c["hyper_parameters"]["network"]["init_args"]["distribution"].update(
                class_path="project.model.Quantiles"
            ),
            "Parser key \"model.network.init_args.distribution\": Option 'loss' is not accepted",
        ),
        (
            lambda c: c["hyper_parameters"]["network"]["init_args"]["distribution"].update(
                class_path="project.model.distributions.Distribution", init_args={}
            ),
            "Expected an instantiatable class, but project.model.distributions.Distribution is abstract",
        ),
        (  # a setting the class refuses names the checkpoint
            lambda c: c["hyper_parameters"]["network"]["init_args"]["distribution"].update(
                class_path="project.model.Quantiles", init_args={"levels": [0.1, 1.5]}
            ),
            'foreign.ckpt: Parser key "model.network.init_args.distribution.init_args.levels": Not of type',
        ),
        (
            lambda c: c["hyper_parameters"].update(attention_layout="old"),
            "foreign.ckpt: Parser key \"model\": Option 'attention_layout' is not accepted",
        ),
        (  # a checkpoint of the regime as a pair of options, before it was a component
            lambda c: c["hyper_parameters"].update(training_mode="free_running", feedback_gradient="detach"),
            "foreign.ckpt: Parser key \"model\": Option 'training_mode' is not accepted",
        ),
        (  # a checkpoint of the split as fractions on the data module, before it was a component
            lambda c: c["datamodule_hyper_parameters"].update(val_fraction=0.1),
            "foreign.ckpt: Parser key \"data\": Option 'val_fraction' is not accepted",
        ),
        (
            lambda c: c["hyper_parameters"]["regime"].update(class_path="subprocess.Popen"),
            "the checkpoint names subprocess.Popen (at model.regime), outside this project; nothing was "
            "imported: pass --model.regime=subprocess.Popen to trust it",
        ),
        (
            lambda c: c["hyper_parameters"]["regime"].update(class_path="project.errors.InputError"),
            "Import path project.errors.InputError does not correspond to a subclass of Regime",
        ),
        (
            lambda c: c["hyper_parameters"]["optimizer"].update(class_path="subprocess.Popen"),
            "the checkpoint names subprocess.Popen (at model.optimizer), outside this project; nothing was "
            "imported: pass --model.optimizer=subprocess.Popen to trust it",
        ),
        (  # refused when fit resumes, in torch's words
            lambda c: c["hyper_parameters"]["optimizer"]["init_args"].update(lr=-1.0),
            "error: model.optimizer: Invalid learning rate: -1.0",
        ),
        (  # torch's own, which torch has imported: looked up, and refused as no optimizer
            lambda c: c["hyper_parameters"]["lr_scheduler"].update(class_path="torch.optim.AdamW"),
            "Expected 'torch.optim.AdamW' to be a subclass of Union[LRScheduler, ReduceLROnPlateau]",
        ),
    ],
)
def test_a_foreign_checkpoint_is_refused_in_one_line(user_run, tmp_path, capsys, change, message):
    """By ``predict``, or by ``fit`` for the optimizer and scheduler, which only resuming reads."""
    checkpoint = torch.load(user_run[2], weights_only=False)
    change(checkpoint)
    path = tmp_path / "foreign.ckpt"
    torch.save(checkpoint, path)
    subcommand = "fit" if "optimizer" in message or "LRScheduler" in message else "predict"
    error = assert_refused_in_one_line(
        cli(subcommand, f"--ckpt_path={path}", "--trainer.logger=false"), capsys, message
    )
    # The checkpoint is named, but where the optimizer it records is refused when fit builds it, in torch's words.
    assert error.startswith(f"error: {path}") or f"{path}:" in error or error.startswith("error: model.optimizer")


@pytest.mark.slow
def test_training_with_the_logger_off_writes_no_file_unless_a_checkpoint_folder_is_named(tmp_path, capsys):
    """Named, the folder holds the checkpoints and nothing else is written: no monitors, figures, hparams.yaml,
    config.yaml (not even in the working directory) or event files."""
    arguments = [
        *SMALL_MODEL,
        *[a for a in quick_fit_arguments(tmp_path) if "logger" not in a],
        "--trainer.logger=false",
    ]
    assert cli("fit", "--config", BASE, *arguments) == 0
    written = [p for p in tmp_path.rglob("*") if p.is_file() and ".cache" not in p.parts]
    assert written == []
    code = cli("fit", "--config", BASE, *arguments, "--trainer.enable_checkpointing=true")
    assert_refused_in_one_line(code, capsys, "needs a folder for the checkpoints: set --checkpoint.dirpath")
    assert cli("fit", "--config", BASE, *arguments, f"--checkpoint.dirpath={tmp_path / 'checkpoints'}") == 0
    assert (tmp_path / "checkpoints" / "last.ckpt").is_file()
    assert not [
        p for p in tmp_path.rglob("*") if p.is_file() and "checkpoints" not in p.parts and ".cache" not in p.parts
    ]


def test_a_prediction_table_is_written_whole(user_run, tmp_path):
    output = tmp_path / "forecast.csv"
    assert cli("predict", f"--ckpt_path={user_run[2]}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    assert pd.read_csv(output)["step"].max() == 12
    assert [p.name for p in tmp_path.iterdir() if p.name != ".cache"] == ["forecast.csv"]  # no temporary file left


@pytest.mark.slow
def test_every_way_of_giving_a_config_is_compared_with_the_checkpoint(user_run, tmp_path, capsys):
    """--config PATH, -c PATH, -cPATH, --conf PATH (an abbreviation argparse accepts) and a section file (--data FILE,
    --model FILE): each is checked against the checkpoint."""
    wider, longer = tmp_path / "wider.yaml", tmp_path / "longer.yaml"
    wider.write_text("model:\n  network:\n    init_args:\n      d_model: 32\n")
    longer.write_text("context_length: 48\n")
    network = tmp_path / "network.yaml"
    network.write_text("network:\n  init_args:\n    d_model: 32\n")
    ways = {
        "model.network.init_args.d_model=32 (checkpoint: 16)": [
            ["--config", str(wider)],
            ["-c", str(wider)],
            [f"-c{wider}"],
            ["--conf", str(wider)],
            ["--model", str(network)],
        ],
        "data.context_length=48 (checkpoint: 12)": [["--data", str(longer)]],
    }
    for message, arguments in ways.items():
        for given in arguments:
            assert_refused_in_one_line(
                cli("predict", *given, f"--ckpt_path={user_run[2]}", "--trainer.logger=false"), capsys, message
            )


@pytest.mark.slow
def test_options_apply_in_order_and_a_later_class_choice_wins(tmp_path):
    """jsonargparse's rule, which the CLI keeps: a config that names another network after an option of the first
    replaces the class, and the options the new class does not take go with the old one."""
    arguments = ["--model.network.init_args.d_model=16", "--config", config("networks/gru.yaml")]
    assert cli("fit", "--config", BASE, *arguments, *quick_fit_arguments(tmp_path)) == 0
    network = Forecaster.load_from_checkpoint(next(tmp_path.rglob("last.ckpt"))).network
    assert type(network).__name__ == "GRUForecaster"
    assert "d_model" not in network.init_args


@pytest.mark.slow
def test_a_setting_the_checkpoint_did_not_record_applies_not_ignored(user_run, tmp_path):
    """A network recorded without its dropout argument (an older version): the dropout given applies."""
    checkpoint = torch.load(user_run[2], weights_only=True)
    del checkpoint["hyper_parameters"]["network"]["init_args"]["dropout"]
    path = tmp_path / "without_dropout.ckpt"
    torch.save(checkpoint, path)
    output = f"--predictions.output={tmp_path / 'p.csv'}"
    command = cli_main(
        ["predict", f"--ckpt_path={path}", "--model.network.init_args.dropout=0.0", output, "--trainer.logger=false"]
    )
    assert command.model.network.init_args["dropout"] == 0.0


@pytest.mark.slow
def test_a_runs_own_saved_config_validates_and_predicts_with_its_own_checkpoint(user_run, tmp_path, capsys):
    run = user_run[2].parent.parent
    for subcommand in ("validate", "predict"):
        extra = [f"--predictions.output={tmp_path / 'p.csv'}"] if subcommand == "predict" else []
        code = cli(
            subcommand,
            "--config",
            str(run / "config.yaml"),
            f"--ckpt_path={user_run[2]}",
            "--trainer.logger=false",
            *extra,
        )
        assert code == 0, capsys.readouterr().err


def test_a_runs_config_records_its_data_file_absolute_so_it_reads_the_same_file_from_any_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    frame_of_row_numbers(400).to_csv("relative.csv", index=False)
    arguments = ["--data.source=relative.csv", "--data.time_column=time", *SMALL_MODEL, *quick_fit_arguments(tmp_path)]
    assert cli("fit", "--config", BASE, *arguments, "--test_after_fit=false") == 0
    run = only_run(tmp_path, "relative")
    recorded = yaml.safe_load((run / "config.yaml").read_text())["data"]["init_args"]["source"]
    assert recorded == str(tmp_path / "relative.csv")


@pytest.mark.slow
def test_predict_from_another_folder_forecasts_the_file_the_checkpoint_was_trained_on(user_run, tmp_path, monkeypatch):
    _, source, checkpoint = user_run
    recorded = torch.load(checkpoint, weights_only=True)["datamodule_hyper_parameters"]["source"]
    assert recorded == str(source.absolute())
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    frame_of_row_numbers(400).assign(c0=0.0, c1=0.0).to_csv(elsewhere / source.name, index=False)  # a decoy
    monkeypatch.chdir(elsewhere)
    for name, data in (("implicit.csv", []), ("explicit.csv", [f"--data.source={source}"])):
        assert (
            cli(
                "predict",
                f"--ckpt_path={checkpoint}",
                f"--predictions.output={tmp_path / name}",
                "--trainer.logger=false",
                *data,
            )
            == 0
        )
    assert pd.read_csv(tmp_path / "implicit.csv").equals(pd.read_csv(tmp_path / "explicit.csv"))


def test_the_data_a_checkpoint_was_trained_on_is_never_an_output(user_run, tmp_path, capsys):
    """Not with --overwrite, and not even when the run reads other data (the figure tool's: tests/tools)."""
    _, source, checkpoint = user_run
    other = tmp_path / "other.csv"
    frame_of_row_numbers(400).to_csv(other, index=False)
    before = digests(source)
    for given in ([], ["--overwrite=true"], [f"--data.source={other}", "--overwrite=true"]):
        code = cli(
            "predict", f"--ckpt_path={checkpoint}", f"--predictions.output={source}", *given, "--trainer.logger=false"
        )
        line = assert_refused_in_one_line(code, capsys)
        assert line.endswith(f"the output would replace the input {source}; choose another output path")
    assert digests(source) == before


def unwritable_folder() -> str | None:
    """A folder that cannot be written even by root (Linux's /sys), or None where there is none."""
    try:
        with open("/sys/.probe", "w"):
            pass
    except OSError:
        return "/sys" if os.path.isdir("/sys") else None
    return None


@pytest.mark.fast_cases(1)
@pytest.mark.parametrize("option", ["checkpoint.dirpath", "trainer.logger.init_args.save_dir", "data.cache_dir"])
def test_a_folder_a_run_would_write_is_refused_at_start_up(option, user_run, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    places = [(blocker / "inside", "a-file is a file, not a folder; choose another folder")]
    if option == "data.cache_dir":
        places.append((blocker, "a-file is a file, not a folder; choose another folder"))
    if unwritable_folder():
        places.append((Path(unwritable_folder()) / "run", "cannot write into /sys"))
    data = [f"--data.source={user_run[1]}", "--data.time_column=time"]
    for folder, message in places:
        arguments = [*SMALL_MODEL, *quick_fit_arguments(tmp_path / "logs"), *data, f"--{option}={folder}"]
        line = assert_refused_in_one_line(cli("fit", "--config", BASE, *arguments), capsys, message)
        assert line.startswith(f"error: {option}={folder}: ")
        assert not (tmp_path / "logs").exists()  # refused before any work


@pytest.mark.slow
def test_a_name_longer_than_the_file_system_allows_is_refused_in_one_line(user_run, tmp_path, capsys):
    long_name = "x" * 300 + ".csv"
    for option in ("--predictions.output", "--data.source"):
        code = cli(
            "predict", f"--ckpt_path={user_run[2]}", f"{option}={tmp_path / long_name}", "--trainer.logger=false"
        )
        assert_refused_in_one_line(code, capsys, "has 304 bytes; a file or folder name has at most 255")


@pytest.mark.parametrize(
    "option", ["checkpoint.filename", "trainer.logger.init_args.name", "trainer.logger.init_args.version"]
)
def test_a_run_folder_or_checkpoint_name_too_long_is_refused_before_training(option, tmp_path, capsys):
    code = cli("fit", "--config", BASE, *SMALL_MODEL, *quick_fit_arguments(tmp_path), f"--{option}={'x' * 300}")
    assert assert_refused_in_one_line(code, capsys).startswith(f"error: {option}=")
    assert not list(tmp_path.rglob("*.ckpt"))


@pytest.mark.slow
def test_a_checkpoint_filename_that_expands_past_the_file_systems_limit_is_refused_before_training(tmp_path, capsys):
    template = "x" * 150 + "-{step:0120d}"  # 164 characters; 276 bytes once the step is filled in, with .ckpt
    code = cli("fit", "--config", BASE, *quick_fit_arguments(tmp_path), f"--checkpoint.filename={template}")
    assert assert_refused_in_one_line(code, capsys) == (
        f"error: checkpoint.filename={template[:60]}… expands to a name of 276 bytes (at epoch 1000000, step "
        "1000000000); a file name has at most 255"
    )
    assert not list(tmp_path.rglob("*.ckpt"))
    code = cli("fit", "--config", BASE, *quick_fit_arguments(tmp_path), "--checkpoint.filename={step:zz}")
    assert assert_refused_in_one_line(code, capsys).startswith(
        "error: checkpoint.filename={step:zz} cannot be filled in ("
    )


def test_a_config_that_expands_past_its_bound_is_refused_in_one_line_at_once(tmp_path, capsys):
    """A YAML alias "bomb": nine lines that expand to 9**9 strings (minutes and a MemoryError, unbounded)."""
    lines, previous = ["a: &a [x, x, x, x, x, x, x, x, x]"], "a"
    for name in "bcdefghi":
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\n")
    for given in (["--config", str(bomb)], [f"--data.target_columns={bomb.read_text()}"]):
        assert_refused_in_one_line(
            cli("fit", "--config", BASE, *given, "--trainer.logger=false"), capsys, "expands to more than 100000 values"
        )


def test_a_config_nested_too_deeply_or_past_a_bound_names_its_file(tmp_path, capsys):
    deep, deeper = tmp_path / "deep.yaml", tmp_path / "deeper.yaml"
    huge = tmp_path / "huge.yaml"
    deep.write_text("seed_everything: 1\ndata:\n" + "".join(f"{'  ' * (i + 1)}k{i}:\n" for i in range(150)))
    deeper.write_text("seed_everything: 1\ndata:\n" + "- " * 3000 + "x\n")  # past the YAML parser's own limit
    huge.write_text("seed_everything: 1\n" + "# padding\n" * 200_000)
    for path, said in [
        (deep, "nested deeper than 100 levels; a settings file nests at most that deep"),
        (deeper, "not a YAML file this project reads"),
        (huge, "2000019 characters; a settings file holds at most"),
    ]:
        code = cli("fit", "--config", BASE, "--config", str(path), "--trainer.logger=false")
        assert assert_refused_in_one_line(code, capsys).startswith(f"error: {path}: {said}")


@pytest.mark.slow
def test_the_logger_values_mean_what_lightning_says(tmp_path, monkeypatch, capsys):
    """false and [] log nothing and leave no file (no data cache either); null is Lightning's default logger, so its
    run keeps its checkpoints."""
    arguments = [*SMALL_MODEL, *[a for a in quick_fit_arguments(tmp_path) if "logger" not in a]]
    for off in ("false", "[]"):
        folder = tmp_path / f"off{len(off)}"
        folder.mkdir()
        monkeypatch.chdir(folder)
        assert cli("fit", "--config", BASE, *arguments, f"--trainer.logger={off}") == 0, off
        assert list(folder.rglob("*")) == [], off
    monkeypatch.chdir(tmp_path)
    assert cli("fit", "--config", BASE, *arguments, "--trainer.logger=null") == 0
    assert list((tmp_path / "lightning_logs").glob("version_0/checkpoints/last.ckpt"))


@pytest.mark.slow
def test_the_embedded_datas_settings_of_a_checkpoint_are_not_blamed_on_a_file_the_user_names(user_run, tmp_path):
    checkpoint = torch.load(user_run[2], weights_only=True)
    checkpoint["datamodule_hyper_parameters"]["synthetic"] = "panel"  # as if trained on the embedded panel
    path = tmp_path / "embedded.ckpt"
    torch.save(checkpoint, path)
    other = tmp_path / "other.csv"
    frame_of_row_numbers(400).to_csv(other, index=False)
    arguments = [f"--data.source={other}", f"--predictions.output={tmp_path / 'p.csv'}", "--trainer.logger=false"]
    assert cli("predict", f"--ckpt_path={path}", *arguments) == 0


def test_a_network_option_refused_beside_a_checkpoint_says_how_to_name_the_checkpoints_network(user_run, capsys):
    """Network options are parsed before the checkpoint is read: a GRU checkpoint's option is checked against the
    default transformer, and the line says so (and what to add)."""
    code = cli(
        "predict", f"--ckpt_path={user_run[2]}", "--model.network.init_args.hidden_size=64", "--trainer.logger=false"
    )
    assert assert_refused_in_one_line(code, capsys).endswith(
        "Option 'hidden_size' is not accepted (network options are checked against the network the command line and "
        "configs name, project.model.ForecastTransformer unless they name another; with --ckpt_path, name the "
        "checkpoint's network with --model.network.class_path before them)"
    )


@pytest.mark.slow
def test_a_config_before_the_subcommand_or_inline_is_seen_like_any_other(user_run, tmp_path, capsys):
    top = tmp_path / "top.yaml"
    top.write_text("predict:\n  data:\n    horizon: 3\n")
    assert_refused_in_one_line(
        cli("--config", str(top), "predict", f"--ckpt_path={user_run[2]}", "--trainer.logger=false"),
        capsys,
        "data.horizon=3 (checkpoint: 12)",
    )
    inline = ["--config", '{"seed_everything": 1}', f"--predictions.output={tmp_path / 'p.csv'}"]
    assert cli("predict", *inline, f"--ckpt_path={user_run[2]}", "--trainer.logger=false") == 0


@pytest.mark.slow
def test_naming_the_checkpoints_network_class_alone_compares_the_class_not_its_defaults(user_run, tmp_path):
    output = f"--predictions.output={tmp_path / 'p.csv'}"
    given = ["--model.network=project.model.ForecastTransformer", output, "--trainer.logger=false"]
    assert cli("predict", f"--ckpt_path={user_run[2]}", *given) == 0


def test_a_checkpoint_path_longer_than_the_file_system_allows_is_one_line(tmp_path, capsys):
    path = tmp_path / ("x" * 300 + ".ckpt")
    assert_refused_in_one_line(
        cli("validate", f"--ckpt_path={path}", "--trainer.logger=false"),
        capsys,
        "has 305 bytes; a file or folder name has at most 255",
    )


@pytest.mark.slow
def test_a_checkpoint_trained_on_dotted_and_non_ascii_column_names_predicts_and_loads(tmp_path, capsys):
    """A column named ``area.m²`` is a value, never an import path: predict and both ``load_from_checkpoint`` take
    it."""
    from project.data import WindowDataModule

    source = tmp_path / "areas.csv"
    frame = frame_of_row_numbers(300).rename(columns={"c0": "area.m²", "c1": "sales.eur"})
    frame.to_csv(source, index=False)
    arguments = [f"--data.source={source}", "--data.time_column=time", *SMALL_MODEL, *quick_fit_arguments(tmp_path)]
    assert cli("fit", "--config", BASE, *arguments, "--test_after_fit=false") == 0
    checkpoint = only_run(tmp_path, "areas") / "checkpoints" / "last.ckpt"
    output = tmp_path / "forecast.csv"
    assert cli("predict", f"--ckpt_path={checkpoint}", f"--predictions.output={output}", "--trainer.logger=false") == 0
    assert {"area.m²", "sales.eur"} <= set(pd.read_csv(output).columns)
    assert Forecaster.load_from_checkpoint(checkpoint).network.n_targets == 2
    assert WindowDataModule.load_from_checkpoint(checkpoint).hparams["source"] == str(source)


@pytest.mark.slow
def test_a_checkpoint_nested_deeper_than_a_config_may_be_is_one_line(user_run, tmp_path, capsys):
    from project.data import WindowDataModule

    for levels, message in [
        (150, "its hyper_parameters: nested deeper than 100 levels"),
        (5000, "its hyper_parameters: nested deeper than 100 levels"),  # past Python's recursion limit
    ]:
        checkpoint = torch.load(user_run[2], weights_only=True)
        deep: dict = {}
        for _ in range(levels):
            deep = {"level": deep}
        checkpoint["hyper_parameters"]["regime"]["init_args"]["deep"] = deep
        path = tmp_path / f"deep{levels}.ckpt"
        limit = sys.getrecursionlimit()
        sys.setrecursionlimit(4 * levels + 1000)  # for torch.save to write it
        try:
            torch.save(checkpoint, path)
        finally:
            sys.setrecursionlimit(limit)
        code = cli("predict", f"--ckpt_path={path}", "--trainer.logger=false")
        assert assert_refused_in_one_line(code, capsys).startswith(f"error: {path}: {message}")
        for loads in (Forecaster, WindowDataModule):
            with pytest.raises(InputError, match=re.escape(f"{path}: {message}")):
                loads.load_from_checkpoint(path)


@pytest.mark.slow
def test_a_baseline_path_added_to_a_checkpoint_trained_without_one_is_named_as_the_option(user_run, tmp_path, capsys):
    output = f"--predictions.output={tmp_path / 'p.csv'}"
    path = "--model.network.init_args.baseline_path=LinearPath"
    code = cli("predict", f"--ckpt_path={user_run[2]}", "--trainer.logger=false", output, path)
    assert assert_refused_in_one_line(code, capsys) == (
        f"error: {user_run[2]} was trained with other settings than the config: "
        "model.network.init_args.baseline_path='project.model.paths.LinearPath' (checkpoint: None)"
    )
