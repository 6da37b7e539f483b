#!/usr/bin/env bash
# Multi-node training on SLURM: sbatch scripts/slurm.sh [extra CLI arguments]
# One task per GPU: Lightning detects SLURM (SLURM_NTASKS, SLURM_PROCID, …) and sets up the process group itself,
# so srun starts the CLI directly. --nodes and --ntasks-per-node must match trainer.num_nodes and trainer.devices.
#
# Pre-emption and time limits: SLURM sends SIGTERM two minutes before it stops the job (--signal), the CLI saves
# last.ckpt at the step it is on and exits with 143, and the job requeues itself; the requeued job starts with
# --ckpt_path last and continues in the same run folder (a fresh start when there is no last.ckpt yet).
#SBATCH --job-name=forecast
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=8
#SBATCH --gpus-per-node=8
#SBATCH --cpus-per-task=8
#SBATCH --time=04:00:00
#SBATCH --signal=TERM@120
#SBATCH --requeue
#SBATCH --open-mode=append
#SBATCH --output=slurm-%j.out
set -uo pipefail
cd "${SLURM_SUBMIT_DIR:-.}"
source .venv/bin/activate  # made by `make train` or `make test`

srun python -m project.cli fit --config configs/base.yaml --config configs/ddp.yaml \
  --trainer.num_nodes "$SLURM_JOB_NUM_NODES" --trainer.devices "$SLURM_NTASKS_PER_NODE" --ckpt_path last "$@"
status=$?
if [ "$status" -eq 143 ]; then
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$status"
