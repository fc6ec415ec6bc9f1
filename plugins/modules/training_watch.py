# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
# The work is done by the action plugin of the same name (plugins/action/training_watch.py).
from __future__ import annotations

DOCUMENTATION = r"""
---
module: training_watch
short_description: One step of the run watch - a poll of the whole cluster, a look at one node, or the conclusion
version_added: 0.1.0
description:
  - With O(status_dir) (the cluster watch, used with C(run_once)), one call of M(clusterval.training.training_status)
    on the task's host renews the run's lease and reads what every node's supervisor appended to its status stream;
    the node states are decided together and the result is the cluster's (RV(progress) for the whole cluster,
    RV(failures), RV(suspects)). Each poll loads the watch's memory from C(<run_dir>/watch/<run_id>/run.json) and
    saves it again (the steps go to C(steps/<host>.jsonl)), with C(progress.json); when the watch ends, the node
    states go to C(<host>.json) there. Nothing is kept in the worker process between polls.
  - The controller away for longer than O(lease_timeout) between two polls, a takeover by another run and the status
    directory removed under the run are the run's cause, said as such; no node is blamed for them.
  - With O(conclude), the end of the watch - the states with what the direct looks at silent nodes found, decided
    once (the culprit, or why no node stands out), saved as C(outcome.json); the verdict
    (M(clusterval.training.training_assert)) and every report use that decision.
  - Every rank's end is required in the cluster watch, the silent ranks of Megatron-LM included; a rank that does
    not exit O(exit_grace) seconds after its job is over fails as a hang, named.
  - Without O(status_dir) (the direct check), the rest of this description applies to one node.
  - Runs M(clusterval.training.training_log) on the node from the byte offset the previous poll stopped at,
    merges the new steps and errors into the node's state file C(<run_dir>/watch/<run_id>/<host>.json) on the
    controller,
    and returns whether the node is done.
  - Meant to be used with O(ignore:until=watch.done), O(ignore:retries) and O(ignore:delay), so that every retry is
    one poll and the C(clusterval.training.training_report) callback can print live progress.
  - A node is done when it printed the final step, when its log shows a failure signature or a non-finite value,
    when its training process exited (non-zero is a failure; zero before the final step is a failure for a node that
    prints steps), when its training container ended without the launcher's exit status (killed, out of memory,
    removed), which fails the node at the next poll rather than after a timeout, when no new step appeared for
    O(hang_timeout) seconds (O(startup_timeout) before the first step), or when O(deadline) seconds passed since the
    first poll.
  - When a node fails, the plugin writes C(<run_dir>/watch/<run_id>/abort.json); the next poll of every other node returns
    RV(done=true) with RV(stopped_by) naming the failed node, so the whole job stops at once.
  - Megatron-LM prints iteration lines on the last node of a job only; the other nodes of that job are done when
    their process exited or when the printing node completed.
  - For Megatron-LM the plugin passes the sequence length (C(SEQ_LENGTH) of the node's environment in the plan) and
    the job's GPU count (nodes times GPUs per node) to M(clusterval.training.training_log), so every iteration that shows
    the global batch size carries C(tokens_per_gpu).
  - This is an action plugin; it runs on the controller and reaches the node through the task's connection.
options:
  plan:
    description:
      - The plan returned by M(clusterval.training.training_plan).
      - Defaults to the fact C(training_plan) that M(clusterval.training.training_plan) sets on every host.
    type: dict
  run_dir:
    description:
      - The run directory on the controller; the state files go to C(<run_dir>/watch/<run_id>/).
    type: path
    required: true
  hang_timeout:
    description:
      - Seconds without a new step, once the first step was printed, after which the node is declared hung.
    type: float
    default: 600
  startup_timeout:
    description:
      - Seconds allowed before the first step (start-up, rendezvous and compilation).
      - The larger of O(hang_timeout) and this value applies until the first step appears.
    type: float
    default: 1800
  deadline:
    description:
      - Overall limit in seconds, counted from O(started_at).
    type: float
    default: 14400
  started_at:
    description:
      - Epoch seconds of the launch. Defaults to the time of the first poll.
    type: float
  max_steps:
    description:
      - Cap on the number of steps M(clusterval.training.training_log) returns per poll.
    type: int
    default: 2000
  patterns:
    description:
      - Extra failure patterns handed to M(clusterval.training.training_log), each C({regex, class}).
    type: list
    elements: dict
    default: []
  advisories:
    description:
      - Extra advisory patterns (regexes) handed to M(clusterval.training.training_log), for lines that healthy
        nodes print; they are reported as advisories, never as failures.
    type: list
    elements: str
    default: []
  status_dir:
    description:
      - The run's status directory on the shared C(data_cache_dir) (filter C(clusterval.training.status_dir)); given,
        the task watches the whole cluster.
    type: path
  hosts:
    description: The hosts to watch in the cluster watch; defaults to every host of the plan.
    type: list
    elements: str
  stale_timeout:
    description: Cluster watch - seconds without a record from a node's supervisor before the node is a suspect.
    type: float
    default: 30
  exit_grace:
    description: Cluster watch - seconds a rank may take to exit once its job is over.
    type: float
    default: 120
  settle:
    description: Cluster watch - seconds the other nodes get to report their own cause after the first failure.
    type: float
    default: 5
  fresh:
    description:
      - Direct check - a look at a node whose status stopped coming - start from an empty state (read the whole log),
        and save what was found (reachable over SSH, its log, exit file and container) for O(conclude) in
        C(<run_dir>/watch/<run_id>/direct/<host>.json) rather than in the node's state.
    type: bool
    default: false
  lease_timeout:
    description:
      - Cluster watch - the supervisors' lease timeout; polls further apart than this mean the controller was away, and
        the jobs the supervisors stopped for it are not a node's failure.
    type: float
    version_added: 0.3.0
  controller:
    description:
      - Cluster watch - the process id of C(ansible-playbook) (C(controller_pid) of M(clusterval.training.training_plan)'s
        result). A poll whose worker outlived it (the controller was killed) stops renewing the lease instead of keeping
        the jobs alive.
    type: int
    version_added: 0.3.0
  conclude:
    description: Decide the run once from the saved states and the direct looks, and save the outcome.
    type: bool
    default: false
    version_added: 0.3.0
  looks:
    description:
      - With O(conclude), host -> the registered result of that host's direct look (O(fresh)). A look that never
        answered (the connection failed, the task's timeout struck) counts as the node unreachable over SSH.
    type: dict
    default: {}
    version_added: 0.3.0
  slurm_job:
    description:
      - With O(status_dir), the run's Slurm job (C(training_launcher=slurm)); the task is delegated to the login
        host. Each poll also reads the job's state; while it pends no timer runs, and a job that ended joins the
        evidence (Slurm's C(NODE_FAIL) and the node's reason name that node; a time limit, a preemption or a
        cancel by someone else is the run's cause, never a node).
    type: str
  pending_timeout:
    description: With O(slurm_job), how long the job may pend before the run ends, naming Slurm's reason.
    type: float
  slurm_record:
    description:
      - "With O(conclude), what Slurm said at the end: C(job_id), C(sacct)'s parsable line, the job's C(output)
        (srun's C(srun: error: <node>: task N: Exited with exit code C) names a node whose supervisor left no
        status), the job's last state C(job) (C(scontrol show job -o)) and C(node_reasons) (C(sinfo --list-reasons)):
        a C(NODE_FAIL) names the job's node Slurm marked down, with its reason. Returned as RV(scheduler), with the
        drain command of a culprit."
    type: dict
  drain:
    description: With O(slurm_record), return the culprit's drain command as RV(drain) (to run it); it is in
      RV(scheduler) either way. A run cause, or no node standing out, drains nothing.
    type: bool
    default: false
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.attributes.action
  - clusterval.training.docker
attributes:
  check_mode:
    support: none
    details: Polling a running job has no meaning in check mode; the C(train) role skips it.
  idempotent:
    support: none
    details: Every poll consumes the log from the last offset and updates the state file.
notes:
  - Keep O(ignore:delay) short (the C(train) role uses 2 seconds); each poll reads only the bytes appended since the last one.
seealso:
  - module: clusterval.training.training_log
  - module: clusterval.training.training_plan
"""

EXAMPLES = r"""
- name: Follow the whole cluster, one task per poll
  clusterval.training.training_watch:
    run_dir: "{{ training_run_dir }}"
    status_dir: "{{ training_plan | clusterval.training.status_dir }}"
    hosts: "{{ ansible_play_hosts }}"
  register: watch
  until: watch.done
  retries: 7210
  delay: 2
  run_once: true

- name: Follow the training on every node
  clusterval.training.training_watch:
    run_dir: "{{ training_run_dir }}"
    hang_timeout: 300
    deadline: 3600
  register: watch
  until: watch.done
  retries: 1810
  delay: 2
"""

RETURN = r"""
done:
  description: Whether this node needs no more polls.
  returned: always
  type: bool
  sample: false
failed:
  description: Whether the node failed (error signature, non-zero exit, hang, deadline, unreachable).
  returned: always
  type: bool
  sample: false
reason:
  description:
    - Why the node is done, or V(running).
    - One of V(running), V(completed), V(error), V(exit), V(hang), V(deadline), V(aborted), V(unreachable).
  returned: always
  type: str
  sample: completed
msg:
  description: One line naming the node and, on failure, the cause and the log line.
  returned: always
  type: str
  sample: "node2: crash failure in the training log (line 57): Segmentation fault"
progress:
  description:
    - The latest progress of the node; in the cluster watch, of the cluster (C(nodes), C(done), C(failed),
      C(final_step), C(step{min,median,max}), C(rate{median}), C(rate_metric), C(eta_s), C(elapsed_s),
      C(slowest[{host,step}]) among the nodes that print steps, and C(phase), before the first step what the job
      is doing, V(starting), V(waiting for the gang) or V(compiling, first step), else V(null)).
  returned: success
  type: dict
  sample: {"step": 12, "final_step": 29, "tokens_per_sec": 8672.8, "loss": 10.37, "eta_s": 94.2, "elapsed_s": 61.0}
line:
  description:
    - The poll as one progress line, the label of the poll's loop item in the role C(train).
  returned: success
  type: str
  sample: "[####------] 4/11 ETA 12s 8672 tok/s/GPU 0/4 done"
stopped_by:
  description: The node whose failure stopped this one.
  returned: when another node failed first
  type: str
  sample: node2
errors:
  description: The first failure signatures found in the log (at most five), as returned by M(clusterval.training.training_log).
  returned: success
  type: list
  elements: dict
  sample: [{"class": "crash", "lineno": 57, "line": 57, "text": "Segmentation fault", "pattern": "Segmentation fault"}]
failures:
  description: Cluster watch - one item per failed node, the earliest first (C(host), C(class), C(step), C(text), C(time)).
  returned: cluster watch
  type: list
  elements: dict
  sample: [{"host": "node3", "class": "crash", "step": 5, "text": "Segmentation fault", "time": 1795574232.3}]
suspects:
  description: Cluster watch - the nodes whose supervisor went quiet; the C(train) role looks at them directly.
  returned: cluster watch
  type: list
  elements: str
  sample: []
rank_start_spread_s:
  description: Cluster watch - seconds between the first and the last rank's start.
  returned: cluster watch
  type: float
  sample: 0.09
state_dir:
  description: Cluster watch - the directory of the node states.
  returned: cluster watch
  type: str
  sample: /srv/runs/20261125T101500Z-1a2b3c-llama/watch/20261125T101500Z-1a2b3c-llama
state_path:
  description: The controller-side state file holding the accumulated steps, errors and offset.
  returned: direct check
  type: str
  sample: /srv/runs/20261121T101500Z-mi300x/watch/20261121T101500Z-mi300x/node1.json
simulated:
  description: Whether the log carries the simulator's banner.
  returned: success
  type: bool
  sample: false
host:
  description: The host this poll was for.
  returned: direct check
  type: str
  sample: node1
culprit:
  description:
    - Cluster watch and O(conclude) - the node singled out by evidence (C(host), C(class), C(step), C(lineno),
      C(text), C(time), C(evidence)), or null. RV(msg) is then its headline.
  returned: cluster watch, conclude
  type: dict
  sample: {"host": "node2", "class": "node lost", "step": 14, "lineno": null, "time": 1795574232.3,
           "text": "node2: no status from the node's supervisor for 31 s (timeout 30 s) at step 14", "evidence": "silence"}
run_cause:
  description:
    - Cluster watch and O(conclude) - why no node is named (C(class) controller, lease, takeover, removed, hang,
      silence or failure; under Slurm also pending, time limit, preempted, cancelled, deadline or login; C(text);
      C(evidence), each failed node's last step and process state), or null.
  returned: cluster watch, conclude
  type: dict
  sample: {"class": "hang", "text": "all 4 nodes stopped after step 11; no node stands out", "time": null}
scheduler:
  description:
    - O(conclude) with O(slurm_record) - Slurm's record of the run (C(job_id), C(sacct), C(srun_errors) by node,
      C(job), C(node_reasons)) and C(drain) (C(argv), the culprit's drain command, empty when no node is named;
      C(run), whether it is run).
  returned: conclude with slurm_record
  type: dict
  sample: {"launcher": "slurm", "job_id": "42", "srun_errors": {"node3": {"exit_code": 1, "line": "srun: error: ..."}},
           "drain": {"argv": ["scontrol", "update", "NodeName=node3", "State=DRAIN", "Reason=clusterval run ..."],
                     "run": false}}
drain:
  description: O(conclude) with O(drain) - the culprit's drain command to run on the login host (empty otherwise).
  returned: conclude with slurm_record
  type: list
  elements: str
consequences:
  description: O(conclude) - the nodes that failed because of the culprit (or of the run's cause).
  returned: conclude
  type: list
  elements: str
  sample: [node1, node3]
independent:
  description: O(conclude) - the nodes that failed on their own, besides the culprit.
  returned: conclude
  type: list
  elements: str
  sample: []
"""
