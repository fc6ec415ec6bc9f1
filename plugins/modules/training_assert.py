# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: training_assert
short_description: Judge a training run on all nodes and fail with one line per failed check
version_added: 0.1.0
description:
  - Compares every node's parsed training output (from M(clusterval.training.training_log) or the state
    accumulated by M(clusterval.training.training_watch)) with the plan's thresholds and returns the
    full check table, the verdict, per-node and cluster summaries and a downsampled step series.
  - "Checks per node: error lines (one check each, with class, line number and text), exit status,
    watch outcome (hang, deadline, abort), completion (final step reached on every node that prints
    steps), convergence (every loss finite, least-squares slope < 0 or last < first), finite metrics,
    and every threshold of the plan; across nodes: stragglers."
  - Thresholds are judged on the steady-state mean (warm-up steps skipped). Throughput metrics are
    higher-is-better (V(min)), time per iteration and memory lower-is-better (V(max)); V(within) takes
    C(pct), V(min_ratio) takes C(of) (another metric); V(info) only records. A threshold with C(set=false)
    is reported as V(no_threshold) and never passes. A missing metric or an unknown kind fails.
  - Fails the task (verdict V(FAIL)) with one readable line per failed check in C(msg), unless
    O(fail_on_verdict=false).
  - Returns C(ansible_stats) with the small metrics under C(clusterval_training), run-level, so that
    ansible-runner and AWX receive them as artifacts. Ansible applies C(ansible_stats) of successful
    tasks only; to publish the metrics of a failed run too, call it with O(fail_on_verdict=false) and
    fail in a following task.
  - Runs on the controller, once for all nodes; use it with C(run_once).
options:
  plan:
    description: The plan returned by M(clusterval.training.training_plan) (C(thresholds), C(final_step),
      C(warmup_steps), C(nodes[host].prints_steps), C(framework), C(simulated)).
    type: dict
    required: true
  nodes:
    description: Host name -> that node's result, a dict with C(steps), C(errors), C(exit_code),
      C(last_step), C(simulated), and optionally C(summary), C(reason), C(log_path). Without it, O(run_dir) with
      the watch's files is required.
    type: dict
  run_dir:
    description: Run directory on the controller; returned as C(run_dir) for the
      C(clusterval.training.training_report) callback, which writes the report files there.
    type: path
  straggler_pct:
    description: A node whose steady throughput is more than this percentage below the cluster median fails.
    type: float
    default: 10.0
  warmup_steps:
    description: Steps skipped before judging; default the plan's C(warmup_steps), else 3 (MaxText) or 2.
    type: int
  fail_on_verdict:
    description: Fail the task when the verdict is V(FAIL).
    type: bool
    default: true
  require_thresholds:
    description:
      - Fail the run when a metric of the plan's thresholds has no threshold set (V(<changeme>) in the config).
      - Without it such metrics are reported, named in RV(unjudged) and in RV(headline), and do not fail the run.
    type: bool
    default: false
  baseline:
    description:
      - The C(results.json) of a known-good run. Metrics whose threshold is not set, and the throughput
        metrics, are judged against its steady means (C(summary.cluster)) within O(baseline_tolerance),
        C(min) = mean x (1 - tolerance) when higher is better, C(max) = mean x (1 + tolerance) when lower is.
      - Any run's C(results.json) is a valid baseline. The results document names it in RV(baseline).
    type: path
  baseline_tolerance:
    description: Tolerance in percent, one number for every metric or a dict metric -> percent (with C(default)).
    type: raw
    default: 5
  fabric:
    description:
      - The fabric gate's verdict (the C(clusterval.training.fabric) role's C(fabric_result)), returned beside the
        training's so that the verdict says when the fabric was not measured, and why.
    type: dict
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: full
    details: Only computes; runs unchanged in check mode.
"""

EXAMPLES = r"""
- name: Judge the run on all nodes
  clusterval.training.training_assert:
    plan: "{{ training_plan }}"
    run_dir: "{{ training_run_dir }}"
    nodes: "{{ dict(ansible_play_hosts | zip(ansible_play_hosts | map('extract', hostvars, 'training_log_result'))) }}"
  run_once: true

- name: Publish the metrics even when the run failed, then fail
  block:
    - name: Judge without failing
      clusterval.training.training_assert:
        plan: "{{ training_plan }}"
        nodes: "{{ node_results }}"
        fail_on_verdict: false
      run_once: true
      register: verdict
    - name: Fail with one line per failed check
      ansible.builtin.fail:
        msg: "{{ verdict.failures | join('\n') }}"
      run_once: true
      when: verdict.verdict == 'FAIL'
"""

RETURN = r"""
schema_version:
  description: The layout version of the results document (C(docs/results.md)).
  returned: always
  type: int
  sample: 1
headline:
  description:
    - The one-line verdict, the culprit first on a node failure; on a PASS, what was not judged.
    - Null when the failures are only threshold checks (the report derives it from the first failed check).
  returned: always
  type: str
  sample: "FAIL: node3 crash at step 3: XlaRuntimeError: INTERNAL: ... (3 other nodes stopped as a consequence)"
culprit:
  description:
    - The node whose failure came first and was not caused by another's, C({host, class, step, lineno, text, time}).
    - C(text) is the cause line (for a traceback, its exception line); C(time) in epoch seconds, from the line's
      timestamp, else when the watch first read it. Null on a PASS.
  returned: always
  type: dict
consequences:
  description: The nodes that failed because of the culprit (a lost peer, a collective timeout, stopped by the watch).
  returned: always
  type: list
  elements: str
independent_failures:
  description: Other nodes that failed with a failure line of their own.
  returned: always
  type: list
  elements: str
judged:
  description: The metrics compared with a threshold.
  returned: always
  type: list
  elements: str
unjudged:
  description: The metrics not judged, C({metric, reason}) (no threshold set, info only, not enforced).
  returned: always
  type: list
  elements: dict
baseline:
  description: C({path, run_id, tolerance_pct, metrics}) of the baseline the thresholds came from; null without one.
  returned: always
  type: dict
verdict:
  description: V(PASS) when no check failed, else V(FAIL).
  returned: always
  type: str
  sample: FAIL
failures:
  description: One line per failed check.
  returned: always
  type: list
  elements: str
  sample: ["node2: tokens_per_sec_per_gpu 812.4 < 900.0 (min, steady mean over steps 3-29)"]
checks:
  description: Every check, with C(node), C(check), C(metric), C(expected), C(actual),
    C(status) (V(pass), V(fail), V(no_threshold), V(info)) and C(detail).
  returned: always
  type: list
  elements: dict
  sample: [{"node": "node1", "check": "threshold", "metric": "tokens_per_sec_per_gpu", "expected": 900.0,
            "actual": 8672.1, "status": "pass", "detail": "tokens_per_sec_per_gpu 8672.1 >= 900.0 (min, steady mean over steps 3-9)"}]
summary:
  description: C(nodes) (per node last step, step count, errors, exit code, steady aggregates mean/median/min/max/p5)
    and C(cluster) (per metric mean/median/min/max over the nodes' means).
  returned: always
  type: dict
  sample: {"nodes": {"node1": {"last_step": 9, "steps": 10}}, "cluster": {"loss": {"mean": 10.7}}}
series:
  description: Per node, per metric (loss and throughput) a downsampled list of [step, value].
  returned: always
  type: dict
  sample: {"node1": {"loss": [[0, 12.038], [9, 10.374]]}}
simulated:
  description: Whether the run used the simulator (plan or log banner).
  returned: always
  type: bool
  sample: false
run_dir:
  description: The O(run_dir) given.
  returned: always
  type: str
  sample: /home/me/runs/20261121T101500Z-mi300x_llama
warmup_steps:
  description: Warm-up steps skipped.
  returned: always
  type: int
  sample: 3
ansible_stats:
  description: Run-level custom stats C(clusterval_training) (verdict, failures, cluster and per-node means).
  returned: always
  type: dict
  sample: {"data": {"clusterval_training": {"verdict": "PASS"}}, "per_host": false, "aggregate": false}
"""
