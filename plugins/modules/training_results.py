# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# Documentation only: the work is done by the action plugin of the same name, on the controller.
from __future__ import annotations

DOCUMENTATION = r"""
module: training_results
short_description: Write a run's results.json, junit.xml and report.html on the controller
version_added: 0.1.0
description:
  - Writes the run's reports into O(run_dir) from the results document (C(docs/results.md)); each file is written
    under a temporary name and renamed, so a reader never sees half a file.
  - Works on every path of a run. After a verdict, O(verdict) is the result of M(clusterval.training.training_assert).
    For a run that stopped before it was judged, the document is a V(FAIL) with O(stop_reason) as its headline and
    no metrics. With O(teardown), each node's teardown is recorded, and a failed one makes the run a V(FAIL).
  - "Faults of the controller itself are named as such, never as a node's: a write into O(run_dir) that fails (a
    full disk, a quota, a read-only mount), in this task, in an earlier one (O(stop_reason) naming a file there), or
    while collecting a node's training log (the teardown outcome's C(log_error)), gives one line
    C(controller: cannot write the run directory <run dir>: <reason>) in RV(controller_faults) and the document's
    C(controller_faults). The run is then a V(FAIL) whose headline keeps the training's own verdict."
  - results.json is written first (it is small), then junit.xml and report.html, each on its own. When there is no
    room for results.json, the run's older report.html, junit.xml and results.json are removed to make room rather
    than left contradicting it. An incomplete copy of a node's log is removed when empty, else renamed
    C(training.log.partial). The task fails, after writing what it could, when a file could not be written.
  - A run that stopped before its verdict gets the document's C(stop) (the stage, the nodes that stopped it, the
    nodes whose training never started) from O(failed_tasks), O(failures) and O(reached), and every document its
    stage timeline C(stages) (C(docs/results.md), "Every stop is reported").
  - With O(start), no report is written; an earlier run's files in a reused O(run_dir) move to
    C(previous/<its run id>/), the nodes' launch is marked (O(launched)), and the run's guard starts - a process in
    its own session that writes the reports when the controller's process ends before the run's final reports
    (Ctrl-C, SIGTERM, kill), then exits.
  - The collection's reports never depend on a callback being enabled; the C(clusterval.training.training_report)
    callback only prints.
  - Runs on the controller; use it with C(run_once).
options:
  plan:
    description: The plan returned by M(clusterval.training.training_plan).
    type: dict
    required: true
  run_dir:
    description: The run's directory on the controller (created when missing).
    type: path
    required: true
  verdict:
    description: The registered result of M(clusterval.training.training_assert); omit it when the run was not judged.
    type: dict
  stop_reason:
    description: Why the run stopped, for a run without verdict (the failed task's message).
    type: str
  teardown:
    description:
      - Host -> that node's teardown outcome C({ok, unreachable, removed, msg}) (the C(teardown_outcome) fact), with
        C(log_error) when its training log could not be collected.
    type: dict
  seconds:
    description: How long the training ran, for the JUnit suite's time.
    type: float
  scheduler:
    description:
      - With C(training_launcher=slurm), Slurm's record of the run (its job id, C(sacct)'s line, srun's errors
        naming the nodes of failed tasks, the drain command and whether it ran); written as the document's
        C(scheduler) section.
    type: dict
  fabric:
    description:
      - The fabric gate's verdict (the C(clusterval.training.fabric) role's C(fabric_result)); written as the
        document's C(fabric) section and, in the HTML, as the node-by-node bandwidth matrix of the measured pairs.
    type: dict
  failed_tasks:
    description: Host -> the name of the task that failed on it (C(train.yml)'s rescue); gives the stage of a stop.
    type: dict
    version_added: 0.1.0
  failures:
    description: Host -> its own failure message (C(train.yml)'s rescue); another node's echo is left out.
    type: dict
    version_added: 0.1.0
  reached:
    description:
      - Host -> how far it got when the run failed (V(plan), V(preflight), V(fabric), V(shipped), V(training)); gives
        the stage when no node failed on its own. A planned node without any record left the play (unreachable).
    type: dict
    version_added: 0.1.0
  start:
    description: Start of the run (see above) instead of writing the reports.
    type: bool
    default: false
    version_added: 0.1.0
  launched:
    description: With O(start), whether every node's container was started (the timeline's end of C(container start)).
    type: bool
    default: true
    version_added: 0.1.0
  controller:
    description: With O(start), the pid of the controller's process the guard waits for; default the parent of the
      action's worker (ansible-playbook).
    type: int
    version_added: 0.1.0
  policy:
    description:
      - With O(start), what the run is judged by, written with the record of the launch
        (C(watch/<run_id>/launched.json)). The guard of an interrupted run judges by it, as
        M(clusterval.training.training_assert) does with the same values.
      - Its keys are that module's options of the same names, checked as that module checks them (C(straggler_pct),
        C(warmup_steps), C(require_thresholds), C(baseline), C(baseline_tolerance)).
    type: dict
    version_added: 0.1.0
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
attributes:
  check_mode:
    support: none
    details: A check run trains nothing and has no results to write.
"""

EXAMPLES = r"""
- name: Write the reports of a judged run
  clusterval.training.training_results:
    plan: "{{ ansible_facts.training_plan }}"
    run_dir: "{{ training_run_dir }}"
    verdict: "{{ results_verdict }}"
  run_once: true
  delegate_to: localhost

- name: Write the reports of a run that stopped in preflight
  clusterval.training.training_results:
    plan: "{{ ansible_facts.training_plan }}"
    run_dir: "{{ training_run_dir }}"
    stop_reason: "{{ training_failure }}"
  run_once: true
  delegate_to: localhost
"""

RETURN = r"""
paths:
  description: File name -> path of each report written (only those written when the task fails).
  returned: always
  type: dict
  sample: {"results.json": "/home/alice/runs/r1/results.json", "junit.xml": "/home/alice/runs/r1/junit.xml",
           "report.html": "/home/alice/runs/r1/report.html"}
verdict:
  description: The run's verdict as written, V(PASS) or V(FAIL) (a failed teardown or a controller fault makes it V(FAIL)).
  returned: always
  type: str
  sample: FAIL
headline:
  description: The one-line verdict as written (or as it would have been, when results.json could not be written).
  returned: always
  type: str
  sample: "FAIL: node3 crash at step 3: XlaRuntimeError: INTERNAL: ... (3 other nodes stopped as a consequence)"
controller_faults:
  description: What the controller itself could not do, one line each; empty when nothing.
  returned: always
  type: list
  elements: str
  sample: ["controller: cannot write the run directory /home/alice/runs/r1: No space left on device"]
verdict_lines:
  description: The verdict block as the console prints it, then one line per report's path.
  returned: when the reports were written
  type: list
  elements: str
  sample: ["FAIL: stopped in preflight: node3: unreachable (...)", "stopped in preflight:", "results.json: /runs/r1/results.json"]
earlier_run:
  description: With O(start), where an earlier run's files were moved; null when there were none.
  returned: with O(start)
  type: str
  sample: /home/alice/runs/mine/previous/20261121T101500Z-1a2b3c-config
guard:
  description: With O(start), the pid of the run's guard it started; null when the run had one already.
  returned: with O(start)
  type: int
  sample: 12345
ansible_stats:
  description: >-
    With O(teardown) (the run's final reports), run-level custom stats merged into C(clusterval_training) (those of
    M(clusterval.training.training_assert), when it ran): C(verdict), C(culprit) (the node the evidence singles
    out, else null), C(headline), C(stopped_in) (the stage a run that stopped before its verdict stopped in, else
    null), C(run_dir), C(run_id). ansible-runner gives them as the C(artifact_data) of C(playbook_on_stats), AWX as
    the job's artifacts, on every path.
  returned: with O(teardown)
  type: dict
  sample: {"data": {"clusterval_training": {"verdict": "FAIL", "culprit": "node3", "stopped_in": "preflight",
           "headline": "FAIL: stopped in preflight: node3: unreachable"}}, "per_host": false, "aggregate": true}
simulated:
  description: Whether the run ran on the simulated cluster.
  returned: always
  type: bool
  sample: false
"""
