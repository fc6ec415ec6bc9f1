#!/bin/sh
# clusterval.training launch script for run r1
exit_file=/home/root/LOGS/clusterval/r1/training.exit
finish() { echo "$1" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; exit "$1"; }
rm -f "$exit_file"
if [ -r /run/clusterval/hf_token ]; then HF_TOKEN=$(cat /run/clusterval/hf_token) && export HF_TOKEN; fi
{
  cp -f /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so || { echo '[clusterval] RDMA failure: cannot put the provider library /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host in place as /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so'; finish 1; }
  echo '[clusterval] RDMA: provider library /usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so in place'
  hcas=$(ibv_devinfo -l 2>&1); listed=$?
  hcas=$(printf '%s' "$hcas" | tr -s '[:space:]' ' ')
  if [ "$listed" -ne 0 ]; then echo "[clusterval] RDMA failure: ibv_devinfo -l failed in the container: $hcas"; finish 1; fi
  for hca in bnxt_re0 bnxt_re1; do
    case " $hcas " in *" $hca "*) ;; *) echo "[clusterval] RDMA failure: ibv_devinfo in the container does not list HCA $hca of NCCL_IB_HCA (it found: $hcas)"; finish 1 ;; esac
  done
  echo '[clusterval] RDMA: ibv_devinfo in the container lists bnxt_re0 bnxt_re1'
} >>/home/root/LOGS/clusterval/r1/training.log 2>&1
cd /workspace/maxtext || finish 126
layout_of() { case "$1" in /workspace/maxtext/src/maxtext/trainers/pre_train/train.py) echo maxtext-package ;; /workspace/maxtext/src/MaxText/train.py) echo maxtext-2025 ;; /workspace/maxtext/MaxText/train.py) echo maxtext-legacy ;; *) echo custom ;; esac; }
train_script=
for candidate in /workspace/maxtext/src/maxtext/trainers/pre_train/train.py /workspace/maxtext/src/MaxText/train.py /workspace/maxtext/MaxText/train.py; do
  if [ -f "$candidate" ]; then train_script=$candidate; break; fi
done
if [ -z "$train_script" ]; then
  echo 'clusterval: no MaxText train script in this image (looked for: /workspace/maxtext/src/maxtext/trainers/pre_train/train.py /workspace/maxtext/src/MaxText/train.py /workspace/maxtext/MaxText/train.py)' >>/home/root/LOGS/clusterval/r1/training.log
  finish 127
fi
echo "clusterval: MaxText layout: $(layout_of "$train_script") ($train_script)" >>/home/root/LOGS/clusterval/r1/training.log
python3 "$train_script" /home/root/LOGS/clusterval/r1/maxtext.yml base_output_directory=/home/root/LOGS/clusterval/r1/output >>/home/root/LOGS/clusterval/r1/training.log 2>&1
finish $?
