"""Plans a 1,024-host multi-node MaxText run and prints planning time and size for both plan forms.

Sizes are JSON characters: of the plan, and of the whole task result of the training_plan action
(`plan` plus the fact `training_plan`, the same dict serialised twice), against AWX's limit of about
700,000 characters per task result. Also plans a single-node config on the same hosts (one job per host).

Run: .venv/bin/python benchmarks/plan_bench.py [HOSTS] [REPEATS]
"""
import json
import os
import statistics
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible_collections.clusterval.training.plugins.action.training_plan import plan_result  # noqa: E402
from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file  # noqa: E402
from ansible_collections.clusterval.training.plugins.module_utils._plan import (  # noqa: E402
    Host, PlanOptions, plan_run,
)
from ansible_collections.clusterval.training.plugins.module_utils._plan_form import compact_plan, node_view  # noqa: E402

MULTI = os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json")
SINGLE = os.path.join(REPO, "configs", "jax", "mi300x_singlenode_llama3_1_70b.json")
OVERRIDES = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1,bnxt_re2,bnxt_re3", "nccl_socket_ifname": "ens1",
                        "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}
AWX_LIMIT = 700000


def timed(function, repeats):
    timings = []
    for dummy in range(repeats):
        start = time.perf_counter()
        value = function()
        timings.append(time.perf_counter() - start)
    return value, min(timings), statistics.median(timings)


def bench_config(path, hosts, repeats):
    raw = load_config_file(path)
    options = PlanOptions(config_path=path, overrides=OVERRIDES, run_id="bench")
    full, full_best, full_median = timed(lambda: plan_run(raw, hosts, options), repeats)
    compact, compact_best, compact_median = timed(lambda: compact_plan(full), repeats)
    dummy, view_best, dummy = timed(lambda: [node_view(compact, host.name) for host in hosts], repeats)
    print("%s, %d hosts, %d job(s)" % (os.path.basename(path), len(hosts), len(full["jobs"])))
    print("  plan_run:     best %.3f s  median %.3f s  (target < 1 s)" % (full_best, full_median))
    print("  compact_plan: best %.3f s  median %.3f s  (on top of plan_run)" % (compact_best, compact_median))
    print("  node_view on the compact form, all hosts: best %.3f s (%.1f us per host)"
          % (view_best, view_best / len(hosts) * 1e6))
    for form, plan in (("full", full), ("compact", compact)):
        plan_size = len(json.dumps(plan))
        result_size = len(json.dumps(plan_result(plan)))
        verdict = "over" if result_size > AWX_LIMIT else "under"
        print("  %-7s form: plan %9d chars (%.2f MiB, %5.0f per host)  task result %9d chars (%s %d)"
              % (form, plan_size, plan_size / 1048576, plan_size / len(hosts), result_size, verdict, AWX_LIMIT))


def main() -> None:
    nhosts = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hosts = [Host("node%04d" % index, "10.%d.%d.%d" % (index // 65536, index // 256 % 256, index % 256))
             for index in range(nhosts)]
    print("repeats: %d" % repeats)
    bench_config(MULTI, hosts, repeats)
    bench_config(SINGLE, hosts, repeats)


if __name__ == "__main__":
    main()
