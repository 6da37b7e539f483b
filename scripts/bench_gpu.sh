#!/usr/bin/env bash
# The README's GPU figures, in one go on a CUDA machine (from the repository root, with torch installed):
#   bash scripts/bench_gpu.sh [output folder]   # default experiments/results/gpu_h200, where the recorded runs are
# 1. the CUDA-graph decode replays the cached decode exactly (the GPU-only test);
# 2. python -m project.tools.bench at 16-mixed, bf16-mixed and float32: time, saved bytes, torch.cuda.max_memory_allocated,
#    generate with and without a CUDA graph, 100 sample paths against re-decoding;
# 3. the same training step with the process capped at 4 GB of GPU memory: the posted loop against ours.
set -euo pipefail
out=${1:-experiments/results/gpu_h200}
"${PYTHON:-python}" -m pytest -q -p no:cacheprovider tests/model/test_model.py -k "cuda_graph or cached_decode_matches_full_decode"
"${PYTHON:-python}" -m project.tools.bench --device cuda --precision 16-mixed --output "$out/16-mixed" --overwrite
"${PYTHON:-python}" -m project.tools.bench --device cuda --precision bf16-mixed --suite training --output "$out/bf16-mixed" --overwrite
"${PYTHON:-python}" -m project.tools.bench --device cuda --precision 32 --suite training inference --output "$out/32" --overwrite
"${PYTHON:-python}" -m project.tools.bench --device cuda --precision 16-mixed --gpu-memory-gb 4 --suite training --naive-max-gb 1000 \
  --naive-max-seconds 600 --output "$out/4gb" --overwrite
