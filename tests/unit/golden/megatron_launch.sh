#!/bin/sh
# clusterval.training launch script for run r1
exit_file=/home/root/LOG_DIR/clusterval/r1/training.exit
finish() { echo "$1" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; exit "$1"; }
rm -f "$exit_file"
if [ -r /run/clusterval/hf_token ]; then HF_TOKEN=$(cat /run/clusterval/hf_token) && export HF_TOKEN; fi
cd /workspace/Megatron-LM || finish 126
bash examples/llama/train_llama3.sh >>/home/root/LOG_DIR/clusterval/r1/training.log 2>&1
finish $?
