#!/bin/sh
# clusterval.training launch script for run r1
exit_file=/home/root/LOGS/clusterval/r1/training.exit
finish() { echo "$1" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; exit "$1"; }
rm -f "$exit_file"
if [ -r /run/clusterval/hf_token ]; then HF_TOKEN=$(cat /run/clusterval/hf_token) && export HF_TOKEN; fi
cd /workspace/maxtext || finish 126
train_script=
for candidate in /workspace/maxtext/src/maxtext/trainers/pre_train/train.py /workspace/maxtext/src/MaxText/train.py /workspace/maxtext/MaxText/train.py; do
  if [ -f "$candidate" ]; then train_script=$candidate; break; fi
done
if [ -z "$train_script" ]; then
  echo 'clusterval: no MaxText train script in this image (looked for: /workspace/maxtext/src/maxtext/trainers/pre_train/train.py /workspace/maxtext/src/MaxText/train.py /workspace/maxtext/MaxText/train.py)' >>/home/root/LOGS/clusterval/r1/training.log
  finish 127
fi
python3 "$train_script" /home/root/LOGS/clusterval/r1/maxtext.yml base_output_directory=/home/root/LOGS/clusterval/r1/output >>/home/root/LOGS/clusterval/r1/training.log 2>&1
finish $?
