#!/bin/sh
# Stand-in for torchrun in the clusterval simulator image: NxDT's training_orchestrator.py runs the simulated
# NxDT, the module torchtitan.train the simulated TorchTitan, anything else the simulated pretrain_gpt.py.
for arg in "$@"; do
  case $arg in
    *training_orchestrator.py) exec python3 /opt/clusterval/nxdt_train.py torchrun "$@" ;;
    torchtitan.train) exec python3 /opt/clusterval/torchtitan_train.py torchrun "$@" ;;
  esac
done
exec python3 /opt/clusterval/megatron_args_train.py torchrun "$@"
