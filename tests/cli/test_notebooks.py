"""The notebooks run as stored, and answer the question they ask with real runs."""

import re

import lightning as L
import nbformat
import pytest
from lightning.pytorch.loggers import TensorBoardLogger
from nbclient import NotebookClient

from project.data import WindowDataModule
from project.training.runs import summarize
from tests.helpers import REPOSITORY, learnable_series, tiny_module, warmup_cosine

NOTEBOOKS = sorted((REPOSITORY / "notebooks").glob("*.ipynb"))


def execute(name: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(REPOSITORY / "notebooks" / name, as_version=4)
    NotebookClient(
        notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(REPOSITORY)}}
    ).execute()
    return notebook


def printed(notebook: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for cell in notebook.cells if cell.cell_type == "code" for o in cell.outputs)


def test_both_notebooks_exist_and_are_stored_without_outputs():
    assert {path.name for path in NOTEBOOKS} == {"quickstart.ipynb", "loss_curves.ipynb"}
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        assert all(
            not cell.get("outputs") and not cell.get("execution_count")
            for cell in notebook.cells
            if cell.cell_type == "code"
        )


@pytest.mark.slow
def test_the_quickstart_notebook_trains_tests_and_forecasts(tmp_path, monkeypatch):
    monkeypatch.setenv("QUICKSTART_MAX_STEPS", "5")
    monkeypatch.setenv("QUICKSTART_LOG_DIR", str(tmp_path))
    output = printed(execute("quickstart.ipynb"))
    assert re.search(r"free-running test MAE \d+\.\d+  vs  repeat-last \d+\.\d+", output)
    assert "timestamps: ['2025-02-20 16:00'" in output
    assert (tmp_path / "quickstart").is_dir()


def noisy_run(log_dir, accumulate: int) -> None:
    """The same data, seed and number of optimizer steps; only the accumulation differs."""
    L.seed_everything(0)
    datamodule = WindowDataModule(learnable_series(1200), context_length=8, horizon=4, batch_size=4)
    trainer = L.Trainer(
        max_steps=60,
        accumulate_grad_batches=accumulate,
        log_every_n_steps=1,
        limit_val_batches=0,
        logger=TensorBoardLogger(log_dir, name=f"accumulate_{accumulate}", version=""),
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    trainer.fit(tiny_module(lr_scheduler=warmup_cosine(1, "constant")), datamodule)


@pytest.mark.slow
def test_a_larger_effective_batch_gives_a_quieter_loss_curve(tmp_path, monkeypatch):
    for accumulate in (1, 8):
        noisy_run(tmp_path, accumulate)

    summary = summarize(tmp_path).set_index("run")
    assert summary.loc["accumulate_1", "effective_batch_size"] == 4
    assert summary.loc["accumulate_8", "effective_batch_size"] == 32

    monkeypatch.setenv("LOSS_CURVES_RUNS", str(tmp_path))
    output = printed(execute("loss_curves.ipynb"))
    noise = {
        int(batch): float(std)
        for batch, std in re.findall(r"effective batch (\d+), step-to-step std (\d+\.\d+)", output)
    }
    assert set(noise) == {4, 32}
    assert noise[32] < 0.6 * noise[4]
