#!/usr/bin/env bash
# Multi-node training on SLURM: sbatch scripts/slurm.sh [extra CLI arguments]
# One task per GPU: Lightning detects SLURM (SLURM_NTASKS, SLURM_PROCID, …) and sets up the process group itself,
# so srun starts the CLI directly. --nodes and --ntasks-per-node must match trainer.num_nodes and trainer.devices.
#SBATCH --job-name=forecast
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --output=slurm-%j.out
set -euo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
source .venv/bin/activate  # made by `make train` or `make test`

srun python -m project.cli fit --config configs/base.yaml --config configs/ddp.yaml \
  --trainer.num_nodes "$SLURM_JOB_NUM_NODES" --trainer.devices "$SLURM_NTASKS_PER_NODE" "$@"
