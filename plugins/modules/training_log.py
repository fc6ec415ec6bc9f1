#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_log
short_description: Parse a training log (MaxText, Megatron-LM, Primus) from a byte offset
version_added: 0.1.0
description:
  - Reads the training log O(path) from O(offset) on, in bounded chunks, and returns the step lines, the
    failure lines and the new offset (end of the last complete line), so that polling a growing log
    costs only what was appended.
  - Recognises MaxText C(completed step:) lines (every format since 2023, absl prefixes included),
    Megatron-LM C(iteration N/ M |) lines (timestamps, launcher prefixes, ROCm C(mem usages), Primus
    C(instant/average) pairs and ANSI colours), the summary lines of the ROCm example script and of
    primus-cli, and Neuronx Distributed Training progress lines.
  - Detects failure lines (NCCL/RCCL errors, GPU hangs, out of memory, JAX coordination errors, crashes,
    NaN) and classifies them; extra patterns can be given with O(patterns).
  - Results stay small, the log itself is never returned.
options:
  path:
    description: Path of the training log on the managed node.
    type: path
    required: true
  framework:
    description:
      - Log format; V(auto) detects it from the first step line and then ignores the other formats.
      - A stack's name reads that stack's format (V(primus) prints Megatron-LM's lines).
      - When polling, pass the RV(framework) of the previous call back once it is known.
    type: str
    choices: [auto, maxtext, megatron, primus, nxdt, torchtitan]
    default: auto
  offset:
    description: Byte offset to start reading at (the RV(offset) of the previous call). A value beyond the
      end of the file (log replaced) restarts at 0.
    type: int
    default: 0
  lineno:
    description: Number of lines before O(offset) (the RV(lineno) of the previous call), so that error
      line numbers stay absolute.
    type: int
    default: 0
  final_step:
    description:
      - The last step number the framework prints (MaxText C(steps - 1), Megatron the train iterations).
      - Without it, Megatron's C(N/ total) is used; MaxText runs are then never RV(completed).
    type: int
  warmup_steps:
    description: Steps skipped before computing RV(summary); default 3 for MaxText, 2 otherwise.
    type: int
  patterns:
    description: Extra failure patterns, each a dict with C(regex) (Python syntax) and C(class)
      (one of V(network), V(gpu), V(memory), V(coordination), V(crash), V(nan), V(timeout), V(disk), V(port)).
    type: list
    elements: dict
    default: []
  advisories:
    description:
      - Extra advisory patterns (Python regexes) for failure lines that healthy nodes print, such as RCCL's
        C(NCCL WARN) about NUMA balancing; a line that matches one is returned in RV(advisories), not in RV(errors).
      - Added to the built-in list of C(docs/failures.md).
    type: list
    elements: str
    default: []
  final:
    description:
      - The last read of a finished job. Otherwise a traceback at the end of the log is left for the next read
        (RV(offset) stops before it), so that its exception line, the cause, is read with it.
    type: bool
    default: false
  exit_code_path:
    description: File the launcher writes the exit status into; RV(exit_code) is null while it is absent.
    type: path
  container:
    description:
      - The training container whose command is the launcher; RV(container) tells whether it still runs.
      - Its state is read before the exit status, so a container that ended without writing O(exit_code_path)
        (killed, out of memory, removed) shows as ended with RV(exit_code) null.
      - It is asked of the node's Docker daemon, O(docker_host).
    type: str
  read_timeout:
    description:
      - Seconds the read may take. A log on a blocked file system fails the task naming the path, instead of
        hanging the play. Only regular files are read; a FIFO, a device or a directory is refused.
    type: float
    default: 30
  max_steps:
    description: Return at most this many steps (the most recent ones); RV(summary) still covers all.
    type: int
    default: 1000
  seq_length:
    description: Sequence length, to compute Megatron C(tokens_per_gpu) when the log does not print it.
    type: int
  world_size:
    description: Number of GPUs of the job, to compute Megatron C(tokens_per_gpu) when the log does not print it.
    type: int
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.docker
attributes:
  check_mode:
    support: full
    details: The module only reads, so it runs unchanged in check mode.
"""

EXAMPLES = r"""
- name: Judge an existing log without a cluster
  clusterval.training.training_log:
    path: /tmp/training.log
    framework: auto

- name: Poll a growing log, reading only what was appended
  clusterval.training.training_log:
    path: "{{ training_plan.nodes[inventory_hostname].log_path }}"
    framework: megatron
    offset: "{{ previous.offset | default(0) }}"
    lineno: "{{ previous.lineno | default(0) }}"
    final_step: "{{ training_plan.final_step }}"
    exit_code_path: "{{ training_plan.nodes[inventory_hostname].exit_code_path }}"
  register: previous
"""

RETURN = r"""
log_path:
  description: The log parsed (O(path)), named in failure messages.
  returned: always
  type: str
  sample: /home/root/LOGS/clusterval/20261121T101500Z-mi300x/training.log
framework:
  description: The format found (V(maxtext), V(megatron), V(nxdt)), or null when no step line was seen yet.
  returned: always
  type: str
  sample: maxtext
steps:
  description: Parsed step lines since O(offset); numbers are floats, NaN/Inf kept and listed in C(nonfinite).
  returned: always
  type: list
  elements: dict
  sample: [{"step": 9, "seconds": 5.667, "tflops_per_sec_per_gpu": 134.924, "tokens_per_sec_per_gpu": 8672.758,
            "total_weights": 196608.0, "loss": 10.374}]
last_step:
  description: Highest step number seen in this read, null when none.
  returned: always
  type: int
  sample: 9
completed:
  description: Whether O(final_step) (or Megatron's total iterations) was reached.
  returned: always
  type: bool
  sample: true
errors:
  description:
    - Failure lines found (at most 100), each with C(class), C(line), C(lineno), C(text), C(pattern), C(time)
      (epoch seconds of the line's own timestamp, else null), C(first_seen) (null; the watch fills it), C(step)
      (the last step printed before it) and C(consequence) (true for a peer's failure seen from here, such as
      JAX's "another task died" or an NCCL watchdog timeout).
    - For a Python traceback, C(text) is its exception line (launcher prefixes such as C([rank3]:) removed).
  returned: always
  type: list
  elements: dict
  sample: [{"class": "memory", "line": 1234, "lineno": 1234, "pattern": "hip_oom",
            "text": "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 978.00 MiB."}]
errors_total:
  description: Number of failure lines found, including those beyond the 100 returned.
  returned: always
  type: int
  sample: 1
advisories:
  description: Advisory lines (benign C(NCCL WARN) and the like), at most 20, shaped like RV(errors) with class V(advisory).
  returned: always
  type: list
  elements: dict
offset:
  description: Byte offset of the end of the last complete line; pass it as O(offset) next time.
  returned: always
  type: int
  sample: 46634
lineno:
  description: Number of complete lines before RV(offset); pass it as O(lineno) next time.
  returned: always
  type: int
  sample: 610
summary:
  description: Steady-state means after warm-up, keyed like the config's C(result_dict); the training
    script's own summary lines fill metrics the step lines lack.
  returned: always
  type: dict
  sample: {"tflops_per_sec_per_gpu": 134.9, "tokens_per_sec_per_gpu": 8671.5}
evals:
  description: MaxText evaluation lines (step, loss and the other printed fields).
  returned: always
  type: list
  elements: dict
  sample: [{"step": 4, "loss": 9.855, "total_weights": 75264.0}]
exit_code:
  description: Content of O(exit_code_path), null while training runs or when not given.
  returned: always
  type: int
  sample: 0
container:
  description:
    - The state of O(container) just before the exit status was read; C(status) is Docker's (V(running),
      V(exited), ...), V(missing) when there is no such container, V(unknown) when the daemon cannot tell;
      C(ended) whether it no longer runs (exited, dead or missing).
  returned: when O(container) is given
  type: dict
  sample: {name: rocm-jax-llama3.1-70b, status: exited, exit_code: 137, oom_killed: true, ended: true}
simulated:
  description: Whether the log carries the C([clusterval simulator]) banner.
  returned: always
  type: bool
  sample: false
size:
  description: Size of the log in bytes when it was read.
  returned: always
  type: int
  sample: 46634
"""

import threading

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils._docker import ENDPOINT_OPTION, Engine
from ansible_collections.clusterval.training.plugins.module_utils._logs import run_training_log
from ansible_collections.clusterval.training.plugins.module_utils._stacks import NAMES


def read_within(params, budget_s):
    """run_training_log on a regular file, in a thread given `budget_s` seconds; a blocked read is a named error."""
    outcome = {}

    def read():
        try:
            outcome["result"] = run_training_log(params)
        except Exception as exc:  # handed to the caller's thread
            outcome["error"] = exc
    worker = threading.Thread(target=read, daemon=True)
    worker.start()
    worker.join(budget_s)
    if worker.is_alive():
        raise OSError("log read blocked for %g s: %s (a hung file system?)" % (budget_s, params["path"]))
    if "error" in outcome:
        raise outcome["error"]
    return outcome["result"]


def main() -> None:
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            framework=dict(type="str", default="auto", choices=["auto", *NAMES]),
            offset=dict(type="int", default=0),
            lineno=dict(type="int", default=0),
            final_step=dict(type="int"),
            warmup_steps=dict(type="int"),
            patterns=dict(type="list", elements="dict", default=[]),
            advisories=dict(type="list", elements="str", default=[]),
            final=dict(type="bool", default=False),
            exit_code_path=dict(type="path"),
            max_steps=dict(type="int", default=1000),
            seq_length=dict(type="int"),
            world_size=dict(type="int"),
            container=dict(type="str"),
            **ENDPOINT_OPTION,
            read_timeout=dict(type="float", default=30.0),
        ),
        supports_check_mode=True,
    )
    name = module.params["container"]
    try:
        container = Engine.at(module.params["docker_host"]).state(name) if name else None
    except ValueError as exc:
        module.fail_json(msg="docker_host: %s" % exc)
    try:
        result = read_within(module.params, module.params["read_timeout"])
    except (OSError, ValueError) as exc:
        module.fail_json(msg=str(exc), path=module.params["path"])
    if container:
        result["container"] = container
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
