"""Plans a 1,024-host multi-node MaxText run and prints how long planning takes (target: < 1 s).

Run: .venv/bin/python benchmarks/plan_bench.py [HOSTS] [REPEATS]
"""
import json
import os
import sys
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, os.path.join(REPO, ".collections"))

from ansible_collections.clusterval.training.plugins.module_utils._config import load_config_file  # noqa: E402
from ansible_collections.clusterval.training.plugins.module_utils._plan import (  # noqa: E402
    Host, PlanOptions, plan_run,
)

CONFIG = os.path.join(REPO, "configs", "jax", "mi300x_distributed_llama3_1_70b.json")
OVERRIDES = {"config": {"nccl_ib_hca_list": "bnxt_re0,bnxt_re1,bnxt_re2,bnxt_re3", "nccl_socket_ifname": "ens1",
                        "gloo_socket_ifname": "ens1", "nccl_ib_gid_index": "3"}}


def main() -> None:
    nhosts = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    hosts = [Host("node%04d" % index, "10.%d.%d.%d" % (index // 65536, index // 256 % 256, index % 256))
             for index in range(nhosts)]
    timings = []
    for _ in range(repeats):
        start = time.perf_counter()
        plan = plan_run(load_config_file(CONFIG), hosts, PlanOptions(config_path=CONFIG, overrides=OVERRIDES,
                                                                      run_id="bench"))
        timings.append(time.perf_counter() - start)
    size = len(json.dumps(plan))
    print("hosts: %d  repeats: %d" % (nhosts, repeats))
    print("plan time: best %.3f s  median %.3f s  (target < 1 s)" % (min(timings), sorted(timings)[len(timings) // 2]))
    print("plan size as JSON: %.1f MiB" % (size / 1048576))


if __name__ == "__main__":
    main()
