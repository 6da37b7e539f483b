"""What the results scripts share: linear baselines, stamps, and the docs' copies of the results tables."""

import hashlib
import json
import re
import subprocess

import pytest
import torch
from torch.utils.data import TensorDataset

from experiments import results
from experiments.linear_baseline import LinearBaseline
from experiments.tests.helpers import history
from tests.helpers import REPOSITORY


class Windows(TensorDataset):
    def __getitem__(self, index):
        context, target = super().__getitem__(index)
        return {"context": context, "target": target}


def test_the_nlinear_form_forecasts_a_shifted_window_shifted_by_the_same_amount():
    torch.manual_seed(0)
    series = torch.randn(2000, dtype=torch.float64).cumsum(0)
    starts = torch.arange(0, 1900, 3)
    context = torch.stack([series[s : s + 24] for s in starts]).unsqueeze(-1)
    target = torch.stack([series[s + 24 : s + 36] for s in starts]).unsqueeze(-1)
    nlinear = LinearBaseline(relative_to_last=True).fit(Windows(context, target))
    shifted = nlinear(context + 100.0) - 100.0
    assert torch.allclose(shifted, nlinear(context), rtol=0, atol=1e-9)
    plain = LinearBaseline().fit(Windows(context, target))
    assert plain(context).shape == (len(starts), 12, 1)


def test_the_tables_of_a_page_are_replaced_by_their_results_files(tmp_path):
    (tmp_path / "experiments" / "results").mkdir(parents=True)
    (tmp_path / "experiments" / "results" / "a.md").write_text("| new |\n")
    page = "intro\n<!-- experiments/results/a.md -->\n| old |\n<!-- end -->\nafter\n"
    assert (
        results.with_tables(page, tmp_path)
        == "intro\n<!-- experiments/results/a.md -->\n| new |\n<!-- end -->\nafter\n"
    )


def test_every_table_in_the_docs_is_its_results_file_as_written():
    pages = [REPOSITORY / "README.md", *sorted((REPOSITORY / "docs").glob("*.md"))]
    named = 0
    for page in pages:
        text = page.read_text()
        named += len(results.TABLE_BLOCK.findall(text))
        assert results.with_tables(text, REPOSITORY) == text, (
            f"{page.name}: run python -m experiments.results {page.name} --overwrite"
        )
    assert named >= 2


def test_refreshing_a_page_needs_overwrite_and_changes_only_its_table_blocks(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "experiments" / "results").mkdir(parents=True)
    (tmp_path / "experiments" / "results" / "a.md").write_text("| new |\n")
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- experiments/results/a.md -->\n| old |\n<!-- end -->\n")
    with pytest.raises(SystemExit) as refused:
        results.main([str(page)])
    assert refused.value.code == 2
    assert "pass --overwrite" in capsys.readouterr().err
    assert "| old |" in page.read_text()
    results.main([str(page), "--overwrite"])
    assert page.read_text() == "intro\n<!-- experiments/results/a.md -->\n| new |\n<!-- end -->\n"


RESULTS = REPOSITORY / "experiments" / "results"
# Columns (or rows, in tables with a model a row) that hold a baseline's, a statistical model's or a published score.
BASELINE = re.compile(r"naive|repeat-last|Auto(ETS|Theta|ARIMA)|least-squares|NLinear|ES-RNN|best hourly", re.I)


def baseline_scores() -> dict[str, list[str]]:
    """Every figure of five significant digits or more in a baseline's cell of a results table → where it is."""
    found: dict[str, list[str]] = {}
    for path in sorted(RESULTS.rglob("*.md")):
        header = None
        for line in path.read_text().splitlines():
            if not line.startswith("|"):
                header = None
                continue
            cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
            if header is None:
                header = cells
            elif not line.startswith("|---"):
                for column, cell in zip(header[1:], cells[1:]):
                    if BASELINE.search(column) or BASELINE.search(cells[0]):
                        for figure in re.findall(r"\d+\.\d+", cell):
                            if len(figure.replace(".", "").lstrip("0")) >= 5:
                                found.setdefault(figure, []).append(
                                    f"{path.relative_to(RESULTS)}: {cells[0]}, {column}"
                                )
    return found


def test_no_seed_of_a_model_repeats_a_baseline_s_score_unless_a_correction_says_so():
    """A network's seed does not score what a per-series Theta fit scored to six figures: such a seed line holds a
    figure copied from another table. A file keeps its rows; a correction paragraph under them names the value."""
    baselines, repeated = baseline_scores(), []
    for path in sorted(RESULTS.rglob("*.md")):
        text = path.read_text()
        corrected = " ".join(paragraph for paragraph in text.split("\n\n") if paragraph.startswith("Correction"))
        for line in text.splitlines():
            if line.startswith("- ") and ": seed " in line:
                for figure in re.findall(r"seed \S+: (\d+\.\d+)", line):
                    if figure in baselines and figure not in corrected:
                        repeated.append(f"{path.relative_to(RESULTS)}: {figure}, as {baselines[figure][0]}")
    assert not repeated, f"seed lines holding a baseline's score: {repeated}"


def test_no_stamp_of_a_results_file_holds_an_absolute_path():
    """A stamp names the repository's files from its root and no folder outside it (project.tools.stamp): the first
    line of every results file, and every "Written by" line of a file that quotes other runs' stamps."""
    found = []
    for path in sorted(file for file in RESULTS.rglob("*") if file.is_file()):
        lines = path.read_text().splitlines()
        for line in lines[:1] + [line for line in lines[1:] if line.startswith("Written by")]:
            found += [f"{path.relative_to(RESULTS)}: {word}" for word in re.split(r"[\s=`'\"()\[\],;]+", line)]
    absolute = [where for where in found if where.partition(": ")[2].startswith("/")]
    assert not absolute, f"absolute paths in stamps: {absolute}"


def test_a_run_s_training_stamp_names_its_commit_and_the_hash_of_its_config(tmp_path, monkeypatch):
    run = tmp_path / "etth1_seed0" / "version_0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text("seed_everything: 0\n")
    monkeypatch.setattr(results, "run_commit", lambda: "abc1234")
    assert results.training_stamp(run) == "trained before runs were stamped"
    results.stamp_training(run)
    digest = hashlib.sha256(b"seed_everything: 0\n").hexdigest()
    assert json.loads((run / "trained.json").read_text()) == {"commit": "abc1234", "config_sha256": digest}
    assert results.training_stamp(run) == f"commit abc1234, config {digest[:12]}"
    (run / "config.yaml").write_text("seed_everything: 1\n")  # another config gives another hash
    results.stamp_training(run)
    assert results.training_stamp(run) != f"commit abc1234, config {digest[:12]}"


def test_fit_stamps_the_run_it_trained(tmp_path, monkeypatch):
    """fit writes trained.json into the run's folder once the run has finished (the training itself is faked)."""
    run = tmp_path / "logs" / "data_seed0" / "version_0"

    def trained(command, env):
        run.mkdir(parents=True)
        (run / "config.yaml").write_text("trainer: {}\n")
        return subprocess.CompletedProcess(command, 0)

    monkeypatch.setattr(results.subprocess, "run", trained)
    monkeypatch.setattr(results, "find_runs", lambda folder: [run] if run.is_dir() else [])
    monkeypatch.setattr(results, "run_commit", lambda: "abc1234")
    assert results.fit([], [], tmp_path / "logs", "data_seed0")[0] == run
    assert json.loads((run / "trained.json").read_text())["commit"] == "abc1234"


def test_a_table_from_reused_runs_names_how_each_was_trained(tmp_path, monkeypatch):
    old, new = tmp_path / "old", tmp_path / "new"
    old.mkdir(), new.mkdir()
    (new / "config.yaml").write_text("x: 1\n")
    monkeypatch.setattr(results, "run_commit", lambda: "38fd896")
    results.stamp_training(new)
    monkeypatch.setattr(results, "stamp", lambda argv: "Written by `python -m x` at commit 7d8ccc6.")
    results.write_table(tmp_path / "table.md", "| a |\n|---|\n| 1 |\n", [], runs={"a_seed0": old, "a_seed1": new})
    line = (tmp_path / "table.md").read_text().splitlines()[2]
    assert "a_seed0 at trained before runs were stamped" in line
    assert "a_seed1 at commit 38fd896, config " in line


def results_name(path) -> str:
    return path.relative_to(RESULTS).as_posix()


SEALED = [path for path in sorted(RESULTS.rglob("*")) if path.is_file() and results.is_sealed(results_name(path))]


def test_every_results_file_a_command_wrote_is_sealed():
    assert len(SEALED) >= 50, f"only {len(SEALED)} sealed files: the list of hand-written ones has grown"


@pytest.mark.parametrize("path", SEALED, ids=results_name)
def test_a_results_file_is_what_its_command_wrote(path):
    """Its seal, the SHA-256 of its lines above, still holds: no figure, decision or stamp was changed by hand. A file
    a command wrote without a seal (a tool outside experiments/, or one from before the seals) is sealed by
    python -m experiments.results --seal PATH; a file changed by hand is written again by its command."""
    problem = results.seal_problem(path.read_text())
    assert problem is None, f"{results_name(path)}: {problem}"


def test_a_changed_figure_or_stamp_breaks_the_seal_and_a_note_below_it_does_not(tmp_path):
    text = results.sealed("Written by `python -m x` at commit 7d8ccc6.\n\n| a | b |\n|---|---:|\n| x | 0.417 |\n")
    assert results.seal_problem(text) is None
    assert results.seal_problem(text.replace("0.417", "0.471")) is not None
    assert results.seal_problem(text.replace("7d8ccc6", "7d8ccc7")) is not None
    assert results.seal_problem(text + "\nA note added later, below the seal.\n") is None
    assert results.seal_problem(text.rpartition("<!--")[0]) == (
        "no seal (the SHA-256 line write_table ends a results file with)"
    )
    unsealed = tmp_path / "table.md"
    unsealed.write_text(text.rpartition("<!--")[0])
    results.main(["--seal", str(unsealed)])
    assert unsealed.read_text() == text


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (results.sealed("a\n").replace("a\n<", "b\n<"), "sealed already, and the lines above its seal are not"),
        (results.sealed("a\n"), "sealed already\n"),
        ("a\nb", "cut short (it ends mid-line); nothing sealed"),
    ],
    ids=["changed-after-its-seal", "sealed", "cut-short"],
)
def test_sealing_refuses_a_file_sealed_already_or_cut_short(tmp_path, capsys, text, message):
    path = tmp_path / "table.md"
    path.write_text(text)
    with pytest.raises(SystemExit):
        results.main(["--seal", str(path)])
    assert message in capsys.readouterr().err
    assert path.read_text() == text


def test_every_commit_a_results_stamp_names_is_in_this_repository_s_history():
    """The commit in a file's stamp and each reused run's ("Runs as trained … at commit …"): a commit of HEAD's
    history."""
    commits = history()
    if commits is None:
        pytest.skip("no full git history here (no git, a copy without .git, or a shallow clone)")
    assert len({c for path in SEALED for c in results.STAMPED_COMMIT.findall(path.read_text())}) >= 30
    outside = {results_name(path): results.commits_outside(path.read_text(), commits) for path in SEALED}
    assert {name: found for name, found in outside.items() if found} == {}


def test_a_study_reads_each_checkpoint_once_for_its_epoch_settings_weights_and_forecasts(user_run, monkeypatch):
    checkpoint, reads, load = user_run[2], [], torch.load

    def counted(path, *arguments, **options):
        reads.append(path)
        return load(path, *arguments, **options)

    monkeypatch.setattr(torch, "load", counted)
    results._read_once.cache_clear()  # another test of this process may have read it
    assert results.best_epoch(checkpoint) == results.best_epoch(checkpoint)
    settings, model = results.opened(checkpoint)
    assert settings["state_dict"].keys() == model.state_dict().keys()
    assert len(reads) == 1
