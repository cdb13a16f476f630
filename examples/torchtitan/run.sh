#!/usr/bin/env bash
# Trains TorchTitan's llama3 debug model, unchanged, on NeuronCores: one process per core under
# torchrun, FSDP2 over the ranks, TorchTitan's default attention (FlexAttention) and activation
# checkpointing, DCP checkpoints and validation, on a corpus and tokenizer that make_assets.py
# generates.
#
#   examples/torchtitan/run.sh                                  # 2 ranks, FSDP2, 10 steps
#   examples/torchtitan/run.sh --compile.enable                 # torch.compile (neuron backend)
#   examples/torchtitan/run.sh --parallelism.tensor-parallel-degree 2
#   examples/torchtitan/run.sh --training.steps 20              # resumes from the last checkpoint
#
# Arguments go to torchtitan.train after ours, so they override ours. Environment:
#   NPROC     ranks, one NeuronCore each (default 2)
#   WORKDIR   assets and outputs (default ./torchtitan-run); remove WORKDIR/outputs to start afresh
#   LOG_RANK  ranks whose output is shown (default 0; e.g. 0,1)
#   PYTHON    the interpreter with torch and torchtitan (default python3)
set -euo pipefail

NPROC=${NPROC:-2}
WORKDIR=${WORKDIR:-./torchtitan-run}
LOG_RANK=${LOG_RANK:-0}
PYTHON=${PYTHON:-python3}
HERE=$(cd "$(dirname "$0")" && pwd)
ASSETS=$WORKDIR/assets

[ -f "$ASSETS/tokenizer/tokenizer.json" ] || "$PYTHON" "$HERE/make_assets.py" "$ASSETS"

# The corpus is a local folder: datasets must not look for it on the Hub.
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1
exec "$PYTHON" -m torch.distributed.run --nproc-per-node="$NPROC" \
    --rdzv-backend=c10d --rdzv-endpoint=localhost:0 --local-ranks-filter="$LOG_RANK" \
    --role=rank --tee=3 \
    -m torchtitan.train --module llama3 --config llama3_debugmodel \
    --dump-folder "$WORKDIR/outputs" \
    --hf-assets-path "$ASSETS/tokenizer" \
    --dataloader.dataset-path "$ASSETS/train" \
    --validator.enable \
    --validator.dataloader.dataset c4_test \
    --validator.dataloader.dataset-path "$ASSETS/validation" \
    --validator.steps 2 \
    --checkpoint.enable \
    --training.local-batch-size 2 \
    --training.seq-len 256 \
    "$@"
