"""Export a checkpoint for serving without the training stack: the encoder and the one-step decoder.

    python -m project.tools.export lightning_logs/…/checkpoints/best-….ckpt --format onnx --batch-size 32 --horizon 96
    python -m project.tools.export <checkpoint> --format torch_export

Both graphs have fixed shapes for the given batch size and horizon. The decoder step takes the key/value cache as
explicit inputs and returns it updated, with the position as a tensor (the fixed-shape decoding of
``ForecastTransformer.new_fixed_shape_cache``), so a driver loops over the forecast steps: ``project/tools/serve.py``
does it with NumPy and onnxruntime alone. ``--benchmark`` times one batch through the driver against ``generate``.
Written to ``--output`` (default: ``export/`` beside the checkpoint's run): ``encoder.onnx``/``decoder_step.onnx`` (or
``.pt2``) and ``model.json``. The folder may exist: files of these names in it are replaced only with ``--overwrite``,
and nothing else in it is touched.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import torch
from torch import Tensor, nn

from project.checkpoints import checkpoint_inputs
from project.domains import PositiveInt
from project.errors import InputError, reported_in_one_line
from project.files import write_atomically
from project.model.cache import FixedShapeKVCache, FixedShapeLayerCache
from project.model.transformer import Encoded, ForecastTransformer
from project.rules import ends_inside_a_patch
from project.tools.checkpoint_commands import check_output_folder, load_checkpoint, trust_argument
from project.training.module import Forecaster
from project.training.normalisation import InstanceNorm, LastValueNorm


class EncoderGraph(nn.Module):
    """Context and covariates → every decoder layer's cross-attention keys and values, the static embedding[, and the
    baseline path's forecast]."""

    def __init__(self, model: ForecastTransformer, input_names: list[str]) -> None:
        super().__init__()
        self.model, self.input_names = model, input_names

    def forward(self, *inputs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        encoded = self.model.encode(**dict(zip(self.input_names, inputs)))
        memory_keys, memory_values = zip(
            *(layer.cross_attention.memory_keys_values(encoded.memory) for layer in self.model.decoder_layers)
        )
        rows = encoded.memory.shape[0]
        static = encoded.static if encoded.static is not None else encoded.memory.new_zeros(rows, 1, self.model.d_model)
        outputs = (torch.stack(memory_keys), torch.stack(memory_values), static)
        return outputs if encoded.baseline is None else (*outputs, encoded.baseline)


class DecoderStepGraph(nn.Module):
    """One decode step with the cache as inputs and outputs: (step input, position, keys, values, memory keys,
    memory values, static[, future covariates of the horizon][, baseline path]) → (parameters, keys, values)."""

    def __init__(self, model: ForecastTransformer, has_future: bool = False) -> None:
        super().__init__()
        self.model, self.has_future = model, has_future

    def forward(self, step_input, position, keys, values, memory_keys, memory_values, static, *extra):
        future = extra[0] if self.has_future else None
        baseline = extra[-1] if len(extra) > self.has_future else None
        layers = []
        for layer in range(keys.shape[0]):
            layer_cache = FixedShapeLayerCache(keys[layer], values[layer], position, in_place=False)
            layer_cache.memory_keys, layer_cache.memory_values = memory_keys[layer], memory_values[layer]
            layers.append(layer_cache)
        cache = FixedShapeKVCache(layers, position)
        # The memory itself is not read when the cache holds its keys and values; its first layer stands in.
        encoded = Encoded(memory=memory_keys[0, :, 0], static=static, future=future, baseline=baseline)
        parameters = self.model.decode(step_input, encoded, cache)
        return parameters, torch.stack([c.keys for c in cache.layers]), torch.stack([c.values for c in cache.layers])


def example_inputs(module: Forecaster, batch_size: int, horizon: int) -> dict[str, Tensor]:
    """Inputs of the model's shapes for one batch (what ``encode`` takes), to trace the graphs with."""
    hp, model = module.hparams, module.network
    inputs = {"context": torch.randn(batch_size, hp.context_length, model.n_targets)}
    if model.n_past_covariates:
        inputs["past_covariates"] = torch.randn(batch_size, hp.context_length, model.n_past_covariates)
    if model.n_future_covariates:
        inputs["future_covariates"] = torch.randn(batch_size, hp.context_length + horizon, model.n_future_covariates)
    if model.static_embedding is not None:
        if model.static_embedding.categories:
            inputs["static_categorical"] = torch.ones(
                batch_size, len(model.static_embedding.categories), dtype=torch.long
            )
        if model.static_embedding.reals is not None:
            inputs["static_real"] = torch.randn(batch_size, model.static_embedding.reals.in_features)
    return inputs


FILES = {
    "onnx": ("encoder.onnx", "decoder_step.onnx", "model.json"),
    "torch_export": ("encoder.pt2", "decoder_step.pt2", "model.json"),
}


def check_horizon(module: Forecaster, horizon: int, checkpoint: Path) -> None:
    """Refuse (one line) a ``horizon`` the graphs cannot forecast: beyond the positional table, or, with future
    covariates, ending inside a patch (its token holds the covariates of every step of the patch)."""
    patch = module.network.patch_length
    if ends_inside_a_patch(horizon, patch, module.network.n_future_covariates):
        raise InputError(
            f"--horizon {horizon} must be a multiple of {checkpoint}'s patch_length={patch} with future covariates: "
            "a patch's token holds the covariates of all its steps"
        )
    if horizon > module.max_horizon:
        raise InputError(
            f"--horizon {horizon} exceeds {module.max_horizon}, the longest forecast {checkpoint} is set up for (its "
            "max_horizon); export a shorter horizon or train with a larger model.max_horizon"
        )


def export(
    module: Forecaster, checkpoint: Path, output: Path, export_format: str, batch_size: int, horizon: int
) -> dict:
    """Write the graphs of ``module`` (loaded from ``checkpoint``) and ``model.json`` into ``output``, each file
    whole or not at all."""
    normalisation = module.normalisation
    if normalisation is not None and type(normalisation) not in (InstanceNorm, LastValueNorm):
        raise InputError(
            f"{checkpoint}'s model.normalisation is {type(normalisation).__qualname__}; an exported model is served "
            "(project.tools.serve) with InstanceNorm, LastValueNorm or none"
        )
    if module.has_distribution:
        print("The exported decoder feeds back the point forecast (mean, or median of quantiles): a point path.")
    model = module.network.float()
    inputs = example_inputs(module, batch_size, horizon)
    encoder = EncoderGraph(model, list(inputs))
    decoder = DecoderStepGraph(model, "future_covariates" in inputs)
    with torch.no_grad():
        memory_keys, memory_values, static, *baseline = encoder(*inputs.values())
        tokens = math.ceil(horizon / model.patch_length)
        nhead = model.decoder_layers[0].self_attention.nhead
        rows = memory_keys.shape[1]  # token rows: N, or N·F channel-independent
        cache_shape = (len(model.decoder_layers), rows, nhead, tokens, model.d_model // nhead)
        keys = torch.zeros(cache_shape)
        step = [inputs["context"][:, -model.patch_length :], torch.tensor(0), keys, keys.clone()]
        step += [memory_keys, memory_values, static]
        names = ["step_input", "position", "keys", "values", "memory_keys", "memory_values", "static"]
        if "future_covariates" in inputs:
            step.append(inputs["future_covariates"][:, module.hparams.context_length :])
            names.append("future_covariates")
        if baseline:
            step.append(baseline[0])
            names.append("baseline")
    encoder_file, decoder_file, meta_file = FILES[export_format]
    if export_format == "onnx":
        encoder_outputs = ["memory_keys", "memory_values", "static", *(["baseline"] if baseline else [])]
        write_atomically(
            output / encoder_file, lambda to: _onnx(encoder, tuple(inputs.values()), to, list(inputs), encoder_outputs)
        )
        decoder_outputs = ["parameters", "new_keys", "new_values"]
        write_atomically(output / decoder_file, lambda to: _onnx(decoder, tuple(step), to, names, decoder_outputs))
    else:
        encoder_program = torch.export.export(encoder, tuple(inputs.values()))
        decoder_program = torch.export.export(decoder, tuple(step))
        write_atomically(output / encoder_file, lambda to: torch.export.save(encoder_program, to))
        write_atomically(output / decoder_file, lambda to: torch.export.save(decoder_program, to))
    distribution = model.distribution
    meta = {
        "format": export_format,
        "batch_size": batch_size,
        "horizon": horizon,
        "tokens": tokens,
        "context_length": module.hparams.context_length,
        "patch_length": model.patch_length,
        "n_targets": model.n_targets,
        "distribution": f"{type(distribution).__module__}.{type(distribution).__qualname__}",
        "point_index": distribution.point_index,
        "normalisation": None if module.normalisation is None else type(module.normalisation).__name__,
        "cache_shape": list(cache_shape),
        "encoder_inputs": list(inputs),
        "checkpoint": str(checkpoint),
    }
    write_atomically(output / meta_file, lambda to: to.write_text(json.dumps(meta, indent=2)))
    return meta


def _onnx(module: nn.Module, inputs: tuple, path: Path, input_names: list[str], output_names: list[str]) -> None:
    torch.onnx.export(
        module, inputs, str(path), input_names=input_names, output_names=output_names, dynamo=True, verbose=False
    )


def forecast_with_torch_export(folder: Path, inputs: dict[str, Tensor]) -> Tensor:
    """``project.tools.serve``'s driver over the ``torch.export`` programs (this one needs torch)."""
    from project.tools.serve import ExportedForecaster

    encoder, decoder = (torch.export.load(folder / name).module() for name in ("encoder.pt2", "decoder_step.pt2"))
    driver = ExportedForecaster(folder, _numpy_graph(encoder), _numpy_graph(decoder))
    return torch.from_numpy(driver.forecast(**{name: value.numpy() for name, value in inputs.items()}))


def _numpy_graph(program: nn.Module):
    """A ``torch.export`` program as ``project.tools.serve`` runs graphs: named NumPy inputs → NumPy outputs."""

    def run(feeds: dict) -> list:
        with torch.no_grad():
            return [output.numpy() for output in program(*(torch.from_numpy(value) for value in feeds.values()))]

    return run


def benchmark(module: Forecaster, folder: Path, repeats: int = 5) -> str:
    """Latency of one batch: ``generate`` (eager PyTorch, cached) against the exported driver."""
    from project.tools.serve import ExportedForecaster

    meta = json.loads((folder / "model.json").read_text())
    inputs = example_inputs(module, meta["batch_size"], meta["horizon"])
    driver = ExportedForecaster(folder)
    numpy_inputs = {name: value.numpy() for name, value in inputs.items()}

    def timed(function) -> float:
        function()
        start = time.perf_counter()
        for _ in range(repeats):
            function()
        return (time.perf_counter() - start) / repeats * 1000

    with torch.no_grad():
        eager = timed(lambda: module.forecast(inputs, meta["horizon"]))
    exported = timed(lambda: driver.forecast(**numpy_inputs))
    return (
        f"one batch of {meta['batch_size']}, horizon {meta['horizon']}: generate (PyTorch, cached) {eager:.1f} ms, "
        f"exported ONNX driver (onnxruntime) {exported:.1f} ms"
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m project.tools.export", description=__doc__.split("\n")[0])
    parser.add_argument("checkpoint", type=Path, help="a .ckpt written by `python -m project.cli fit`")
    parser.add_argument("--format", dest="export_format", choices=["onnx", "torch_export"], default="onnx")
    parser.add_argument("--batch-size", type=PositiveInt, default=1, help="rows per forecast call (fixed shape)")
    parser.add_argument(
        "--horizon", type=PositiveInt, default=None, help="steps to forecast (default: the trained horizon)"
    )
    parser.add_argument("--output", type=Path, default=None, help="folder to write (default: <run>/export)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --output folder")
    parser.add_argument("--benchmark", action="store_true", help="time one batch through the driver and generate")
    trust_argument(parser)
    args = parser.parse_args(argv)
    with reported_in_one_line():
        checkpoint, module = load_checkpoint(args.checkpoint, args.trust)
        if not isinstance(module.network, ForecastTransformer):
            network = checkpoint["hyper_parameters"]["network"]["class_path"]
            raise InputError(
                f"{args.checkpoint}: export supports the ForecastTransformer network; this checkpoint's is {network}"
            )
        horizon = args.horizon or module.hparams.horizon
        check_horizon(module, horizon, args.checkpoint)
        output = args.output or args.checkpoint.parent.parent / "export"
        inputs = checkpoint_inputs(args.checkpoint, checkpoint)
        check_output_folder(output, FILES[args.export_format], inputs, args.overwrite)
        meta = export(module, args.checkpoint, output, args.export_format, args.batch_size, horizon)
    print(f"Wrote {output}: {meta['format']} encoder and decoder step, batch {meta['batch_size']}, horizon {horizon}")
    if args.benchmark and args.export_format == "onnx":
        print(benchmark(module, output))


if __name__ == "__main__":
    main()
