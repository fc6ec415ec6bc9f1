#!/bin/bash
# Stand-in for ROCm Megatron-LM's examples/llama/train_llama{2,3}.sh in the
# clusterval simulator image: same environment interface, simulated training.
exec python3 /opt/clusterval/megatron_train.py "$0" "$@"
