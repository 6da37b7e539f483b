"""What the results scripts share: linear baselines, stamps, and the docs' copies of the results tables."""

import pytest
import torch
from torch.utils.data import TensorDataset

from experiments import results
from experiments.linear_baseline import LinearBaseline
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
