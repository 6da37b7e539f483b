import pytest
import torch

from project.model import ForecastTransformer


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def small_model(dtype: torch.dtype = torch.float64, **overrides) -> ForecastTransformer:
    """A small model in eval mode: dropout off, so cached and parallel decoding compute the same function."""
    arguments = dict(n_features=5, d_model=32, nhead=4, num_encoder_layers=2, num_decoder_layers=2)
    arguments.update(dropout=0.0, dim_feedforward=64)
    arguments.update(overrides)
    return ForecastTransformer(**arguments).to(dtype).eval()


def relative_difference(actual: torch.Tensor, expected: torch.Tensor) -> float:
    return ((actual - expected).abs().max() / expected.abs().max()).item()
