#!/bin/bash
# Stand-in for Primus's examples/run_pretrain.sh in the clusterval simulator image: same environment
# interface (EXP, NNODES, NODE_RANK, GPUS_PER_NODE, MASTER_ADDR, MASTER_PORT, TRAIN_LOG), simulated training.
if [ -n "${TRAIN_LOG:-}" ]; then
  mkdir -p "$(dirname "$TRAIN_LOG")"
  python3 /opt/clusterval/megatron_args_train.py primus 2>&1 | tee "$TRAIN_LOG"
  exit "${PIPESTATUS[0]}"
fi
exec python3 /opt/clusterval/megatron_args_train.py primus
