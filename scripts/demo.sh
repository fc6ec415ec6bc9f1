#!/usr/bin/env bash
# make demo: a 2-node simulated cluster, the JAX and the Megatron-LM multi-node
# seed configs through the real playbooks/train.yml, the verdicts and the report
# paths; the cluster is torn down on exit, whatever happens.
# The JAX job really trains: MaxText's own train.py on real JAX and XLA (CPU) in the
# real-framework image (simulator/real/, built once and cached), the seed's model
# shrunk by the simulated inventory's overrides. Megatron-LM runs the stand-in.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH" ANSIBLE_CONFIG="$PWD/ansible.cfg"

trap 'scripts/simcluster down >/dev/null 2>&1 || true' EXIT INT TERM

inventory=$(scripts/simcluster up --nodes 2 --real | tail -n 1)
stamp=$(date -u +%Y%m%dT%H%M%SZ)
status=0

run() {  # run NAME CONFIG [ansible-playbook args...]
  local name=$1 config=$2 run_dir="$PWD/runs/demo-$stamp-$1"
  shift 2
  echo "=== $name: $config"
  if ansible-playbook -i "$inventory" playbooks/train.yml -e "training_config=$config" \
       -e "training_run_dir=$run_dir" "$@"; then
    echo "=== $name: PASS  reports in $run_dir"
  else
    echo "=== $name: FAIL  reports and logs in $run_dir"
    status=1
  fi
}

run jax configs/jax/mi300x_distributed_llama3_1_70b.json -e simcluster_real=true
run megatron configs/megatron/mi3xx_megatron_llama_distributed.json \
  -e training_model=llama3_1_8b -e training_gpu_arch=mi300x
exit "$status"
