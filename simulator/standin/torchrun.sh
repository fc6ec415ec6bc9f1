#!/bin/sh
# Stand-in for torchrun in the clusterval simulator image: runs the simulated pretrain_gpt.py.
exec python3 /opt/clusterval/megatron_args_train.py torchrun "$@"
