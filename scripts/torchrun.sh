#!/usr/bin/env bash
# Multi-node training with torchrun: run this script once on every node.
#   NNODES=2 NODE_RANK=0 MASTER_ADDR=node0 GPUS_PER_NODE=8 bash scripts/torchrun.sh   # on node0
#   NNODES=2 NODE_RANK=1 MASTER_ADDR=node0 GPUS_PER_NODE=8 bash scripts/torchrun.sh   # on node1
# torchrun starts one process per GPU and sets the environment Lightning reads (WORLD_SIZE, RANK, LOCAL_RANK, …);
# --trainer.num_nodes and --trainer.devices must match what torchrun starts. Extra arguments go to the CLI.
set -euo pipefail
NNODES=${NNODES:-1}
NODE_RANK=${NODE_RANK:-0}
GPUS_PER_NODE=${GPUS_PER_NODE:-$(nvidia-smi --list-gpus | wc -l)}
MASTER_ADDR=${MASTER_ADDR:-localhost}
MASTER_PORT=${MASTER_PORT:-29500}

torchrun \
  --nnodes "$NNODES" --node_rank "$NODE_RANK" --nproc_per_node "$GPUS_PER_NODE" \
  --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT" \
  -m project.cli fit --config configs/base.yaml --config configs/ddp.yaml \
  --trainer.num_nodes "$NNODES" --trainer.devices "$GPUS_PER_NODE" "$@"
