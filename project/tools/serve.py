"""Forecast with an exported model (``python -m project.tools.export``), with NumPy and onnxruntime only.

No torch and no Lightning: what a serving process needs is this file, ``numpy``, ``onnxruntime`` and the export
folder (``encoder.onnx``, ``decoder_step.onnx``, ``model.json``). The encoder runs once; the one-step decoder
then runs once per forecast token with the key/value cache as explicit inputs and outputs, each step's point
forecast fed back as the next input, as ``ForecastTransformer.generate`` does.

    from project.tools.serve import ExportedForecaster
    forecaster = ExportedForecaster("export/")
    forecast = forecaster.forecast(context)            # (N, horizon, F), in the units of ``context``

Inputs are the model's: scaled as the DataModule scales them (``loc``/``scale`` of the batch), with the covariates
the model was trained with (``forecaster.inputs`` lists them). The model's normalisation (``InstanceNorm`` or
``LastValueNorm``), when it was trained with one, is applied here.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

Graph = Callable[[dict[str, np.ndarray]], list[np.ndarray]]  # named inputs, in the graph's order → its outputs
# Each normalisation's location (N, 1, F) of a context (N, L, F), as project.training.normalisation computes it; the
# scale is the look-back's standard deviation for both.
LOCATIONS: dict[str, Callable[[np.ndarray], np.ndarray]] = {
    "InstanceNorm": lambda context: context.mean(axis=1, keepdims=True),
    "LastValueNorm": lambda context: context[:, -1:],
}


class ExportedForecaster:
    """The exported encoder and decoder step of one checkpoint, for one batch size and horizon.

    ``encoder``/``decoder`` run the two graphs; by default onnxruntime sessions of ``encoder.onnx`` and
    ``decoder_step.onnx`` (``project.tools.export`` passes the ``torch.export`` programs instead).
    """

    def __init__(self, folder: str | Path, encoder: Graph | None = None, decoder: Graph | None = None) -> None:
        folder = Path(folder)
        self.meta = json.loads((folder / "model.json").read_text())
        self.encoder = encoder or _onnx_graph(folder / "encoder.onnx")
        self.decoder = decoder or _onnx_graph(folder / "decoder_step.onnx")
        self.inputs = self.meta["encoder_inputs"]

    def forecast(self, context: np.ndarray, **covariates: np.ndarray) -> np.ndarray:
        """Point forecast (N, horizon, F) from ``context`` (N, context_length, F) and the model's covariates."""
        meta = self.meta
        context = context.astype(np.float32)
        normalised = meta["normalisation"] is not None
        if normalised:  # per window and channel, statistics of the context only
            loc = LOCATIONS[meta["normalisation"]](context)
            scale = np.sqrt(context.var(axis=1, keepdims=True) + 1e-5)
            context = (context - loc) / scale
        feeds = {"context": context, **{name: covariates[name] for name in self.inputs if name != "context"}}
        feeds = {name: _typed(name, value) for name, value in feeds.items()}
        memory_keys, memory_values, static, *baseline = self.encoder(feeds)
        keys = np.zeros(meta["cache_shape"], dtype=np.float32)
        values = np.zeros(meta["cache_shape"], dtype=np.float32)
        patch = meta["patch_length"]
        step_input = context[:, -patch:]
        future = feeds.get("future_covariates")
        steps = []
        for token in range(meta["tokens"]):
            step = {
                "step_input": step_input,
                "position": np.array(token, dtype=np.int64),
                "keys": keys,
                "values": values,
                "memory_keys": memory_keys,
                "memory_values": memory_values,
                "static": static,
            }
            if future is not None:
                step["future_covariates"] = future[:, context.shape[1] :]
            if baseline:  # the baseline path's forecast, which the decoder adds its residual to
                step["baseline"] = baseline[0]
            parameters, keys, values = self.decoder(step)
            step_input = parameters[..., meta["point_index"]]
            steps.append(step_input)
        forecast = np.concatenate(steps, axis=1)[:, : meta["horizon"]]
        return forecast * scale + loc if normalised else forecast


def _onnx_graph(path: Path) -> Graph:
    import onnxruntime  # imported here so that a driver of other graphs does not need it

    session = onnxruntime.InferenceSession(str(path), onnxruntime.SessionOptions())
    return lambda feeds: session.run(None, feeds)


def _typed(name: str, value: np.ndarray) -> np.ndarray:
    return np.asarray(value, dtype=np.int64 if name == "static_categorical" else np.float32)
