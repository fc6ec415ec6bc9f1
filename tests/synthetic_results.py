"""Synthetic results documents at any node count, judged by the real _metrics.evaluate.

Used by the report tests, the HTML screenshots and benchmarks/report_bench.py. A "crash" run has a
culprit whose crash stops every other node a step later (a coordination error on each, as JAX prints
it), a few stragglers, and a throughput metric without a threshold; the contract-5 keys (culprit,
consequences, headline, judged, unjudged, effective_model, schema_version) are added as the verdict
would write them, unless ``legacy`` asks for a document from before them.
"""
from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils import _metrics

CRASH_TEXT = ("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: RCCL operation ncclAllReduce(...) failed: "
              "unhandled system error (run with NCCL_DEBUG=INFO for details); current tracing scope: all-reduce.42; "
              "current profiling annotation: XlaModule:#hlo_module=jit_train_step,program_id=17#.")
CONSEQUENCE_TEXT = ("jax.errors.JaxRuntimeError: UNAVAILABLE: The following tasks are unhealthy (stopped sending "
                    "heartbeats): /job:jax_worker/replica:0/task:%d")
EFFECTIVE_MODEL = {"name": "llama3.1-70b", "family": "llama3.1", "params": 70553706496, "params_b": 70.6,
                   "dims": {"emb_dim": 8192, "num_layers": 80, "num_heads": 64, "num_kv_heads": 8,
                            "mlp_dim": 28672, "vocab_size": 128256}}


def host_names(count: int, prefix: str = "node", width: int = 3) -> List[str]:
    return ["%s%0*d" % (prefix, width, i) for i in range(1, count + 1)]


def node_steps(rng: random.Random, last: int, rate: float) -> List[Dict[str, Any]]:
    steps = []
    for step in range(last + 1):
        warm = 0.2 if step == 0 else 1.0
        tokens = rate * warm * (1 + rng.uniform(-0.01, 0.01))
        steps.append({"step": step, "loss": 10.5 * (0.97 ** step) + rng.uniform(-0.02, 0.02),
                      "tokens_per_sec_per_gpu": tokens, "tflops_per_sec_per_gpu": tokens / 20.0,
                      "seconds": 4096.0 / tokens})
    return steps


def synthetic_document(nodes: int, steps: int = 60, crash_at: Optional[int] = None, culprit: int = 17,
                       stragglers: Sequence[int] = (5, 40), slow: float = 0.85, legacy: bool = False,
                       simulated: bool = True, seed: int = 7, prefix: str = "node", width: int = 3,
                       hang_at: Optional[int] = None, interrupt_at: Optional[int] = None,
                       straggler_pct: float = 10.0) -> Dict[str, Any]:
    """A judged document: ``nodes`` hosts, ``steps`` steps (0 .. steps-1), culprit node number ``culprit``
    crashing at step ``crash_at`` (None: no crash), the node numbers in ``stragglers`` ``slow`` times as fast.
    ``hang_at``: every node stops after that step alike (a hang, no node stands out); ``interrupt_at``: the
    controller is interrupted (SIGINT) in training after that step, as the run's guard reports it."""
    rng = random.Random(seed)
    hosts = host_names(nodes, prefix, width)
    final = steps - 1
    culprit_host = hosts[(culprit - 1) % nodes] if crash_at is not None else None
    states = {}
    for index, host in enumerate(hosts, start=1):
        rate = 8600.0 * (slow if index in stragglers else 1.0 + max(-0.06, min(0.06, rng.gauss(0.0, 0.025))))
        last = final if crash_at is None else (crash_at - 1 if host == culprit_host else crash_at)
        last = hang_at if hang_at is not None else interrupt_at if interrupt_at is not None else last
        state = {"steps": node_steps(rng, last, rate), "errors": [], "exit_code": 0, "last_step": last,
                 "simulated": simulated, "log_path": "/home/root/LOGS/clusterval/run/training.log"}
        if hang_at is not None:
            state.update(exit_code=None, reason="hang", msg="%s: hang: no new step for 300 s after step %d" % (
                host, hang_at))
        if interrupt_at is not None:
            state.update(exit_code=None)
        if crash_at is not None:
            error = {"class": "crash", "line": 4100 + index, "text": CRASH_TEXT} if host == culprit_host else \
                {"class": "coordination", "line": 4200 + index, "text": CONSEQUENCE_TEXT % (culprit - 1)}
            state.update(errors=[error], exit_code=1)
        states[host] = state
    plan = {"framework": "maxtext", "final_step": final, "total_steps": steps, "warmup_steps": 3,
            "simulated": simulated, "run_id": "20261121T101500Z-synthetic", "config_name": "synthetic_%d" % nodes,
            "thresholds": [
                {"metric": "tokens_per_sec_per_gpu", "kind": "min", "value": 8000.0, "direction": "higher", "set": True},
                {"metric": "tflops_per_sec_per_gpu", "kind": "min", "value": None, "direction": "higher", "set": False}]}
    document = dict(_metrics.evaluate(plan, states, straggler_pct), run_id=plan["run_id"],
                    config_name=plan["config_name"],
                    framework="maxtext", model="llama3.1-70b", gpu_arch="mi300x", mode="multi_node",
                    final_step=final, total_steps=steps, run_dir="/tmp/runs/synthetic",
                    generated_at="2026-11-21T10:25:00Z")
    if not legacy:
        document.update(contract_keys(document, culprit_host, crash_at, hosts))
    if hang_at is not None and not legacy:
        text = "all %d nodes stopped after step %d; no node stands out" % (nodes, hang_at)
        document.update(run_cause={"class": "hang", "text": text, "time": None, "evidence": {
            host: {"step": hang_at, "reason": "hang", "process": {"state": "S", "wchan": "futex_wait"}}
            for host in hosts}}, consequences=list(hosts), headline="FAIL: hang: %s" % text)
    if interrupt_at is not None and not legacy:
        cause = ("the controller (ansible-playbook, pid 4242) was interrupted (SIGINT) in training; the nodes stop "
                 "their jobs themselves within the lease timeout")
        document.update(stop={"stage": "training", "cause": cause, "hosts": [], "lines": [], "never_started": [],
                              "interrupted": "SIGINT"}, headline="FAIL: stopped in training: %s" % cause,
                        verdict="FAIL", failures=[cause] + list(document.get("failures") or []))
    return document


def contract_keys(document: Dict[str, Any], culprit_host: Optional[str], crash_at: Optional[int],
                  hosts: Sequence[str]) -> Dict[str, Any]:
    failed_hosts = sorted({c["node"] for c in document["checks"] if c["status"] == "fail"})
    keys: Dict[str, Any] = {
        "schema_version": 1, "judged": ["tokens_per_sec_per_gpu"], "baseline": None,
        "unjudged": [{"metric": "tflops_per_sec_per_gpu", "reason": "no threshold set"}],
        "effective_model": EFFECTIVE_MODEL, "culprit": None, "consequences": [], "teardown": None,
    }
    if culprit_host:
        consequences = [h for h in hosts if h != culprit_host]
        keys.update(culprit={"host": culprit_host, "class": "crash", "step": crash_at, "lineno": 4117,
                             "text": CRASH_TEXT, "time": 1795256400.5}, consequences=consequences,
                    headline="FAIL: %s crash at step %d: %s (%d other nodes stopped as a consequence)" % (
                        culprit_host, crash_at, CRASH_TEXT[:120], len(consequences)))
    elif failed_hosts:
        keys["headline"] = "FAIL: %d nodes failed: %s" % (len(failed_hosts), ", ".join(failed_hosts[:3]))
    else:
        keys["headline"] = "PASS (throughput not judged: no thresholds for tflops_per_sec_per_gpu)"
    return keys
