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
  fabric:
    description:
      - The fabric gate's verdict (the C(clusterval.training.fabric) role's C(fabric_result)); written as the
        document's C(fabric) section and, in the HTML, as the node-by-node bandwidth matrix of the measured pairs.
    type: dict
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
simulated:
  description: Whether the run ran on the simulated cluster.
  returned: always
  type: bool
  sample: false
"""
