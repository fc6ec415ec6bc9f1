#!/usr/bin/python
# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
from __future__ import annotations

DOCUMENTATION = r"""
module: training_probe
short_description: Check a node before a training run, every check in one call
version_added: 0.1.0
description:
  - Looks at everything a training run needs on the node and returns one verdict per check,
    so that one task per node reports every problem of that node at once.
  - Checks, each only when its option is given; the Docker daemon answers at O(docker_host) (an empty O(docker_host)
    skips this check);
    every device and every host path to be mounted exists; the HF token file exists and is not
    empty (its content is never read into the result); the GPU model reported by the first GPU tool
    present maps to the planned arch and lists the planned number of GPUs; GPU errors since boot (kernel
    log lines, amdgpu RAS counters); the RDMA ports' state and rate (sysfs); free disk space for the expected
    log; RDMA HCAs (C(ibv_devinfo -l)) and
    dockerd's memlock limit; the node's Python imports O(python_modules); a marker written into the
    shared cache directory by one node is read back on every node.
  - Never fails because a check failed; the caller judges RV(checks) after every node reported
    (the C(clusterval.training.preflight) role does).
options:
  plan:
    description:
      - The run's plan (from M(clusterval.training.training_plan)). With it the action plugin computes the node's
        arguments (O(node), O(lock), O(image), O(devices), O(mounts), O(token_file), O(gpu_count), O(kernel_log),
        O(rdma), O(rdma_ports), O(coordinator_port), O(disk_path), O(expected_log_mib), O(shm_size),
        O(shared_marker)) from it and O(settings); arguments given in the task win.
      - With O(settings) and no plan, the fact C(training_plan) (read by the action, never copied into each node's task
        arguments).
      - With it the task is the node's whole preflight. C(settings.hf_token_source), a token file on the
        controller, is handed over (O(hf_token)); a node taken over (O(lock.takeover)) has the other run torn
        down (M(clusterval.training.training_cleanup), its result in RV(takeover)); the report's RV(lines) are
        printed; and the task fails, naming every failed check, when a check fails.
    type: dict
    version_added: 0.3.0
  settings:
    description:
      - With O(plan), the preflight role's settings, named as its variables without the C(preflight_) prefix
        (C(controller), C(address), C(lock_take), C(takeover), C(gpu_count), C(rdma), C(shared_wait), ...); an
        unset (null) setting takes what the plan gives.
    type: dict
    version_added: 0.3.0
  settings_from:
    description:
      - A role whose variables give O(settings), C(<role>_<setting>) (the preflight role passes C(preflight)), read by
        the action from the host's variables; O(settings) given too wins key by key. A setting left at a literal
        default costs no template per node, where a task's argument is compiled again in every node's worker.
      - The node's C(address) is its C(ansible_host) (or its name); without O(plan), C(<role>_plan) is the plan, and
        when that is null too the fact C(training_plan).
    type: str
    version_added: 0.3.0
  part:
    description:
      - With O(settings_from), what this task does. V(all) - the node's whole preflight and its verdict.
      - V(probe) - the same, but the task does not fail; the verdict is left to a later task with V(kernel_log).
      - V(kernel_log) - the verdict on the checks of the node's probe (C(<role>_probe), the role's earlier task with
        V(probe)) and, on the nodes where that probe answered RV(kernel_log_become), the kernel log read by this task,
        which the role runs with C(become). Elsewhere nothing runs on the node.
    type: str
    choices: [all, probe, kernel_log]
    default: all
    version_added: 0.3.0
  node:
    description:
      - The node's name in RV(lines) and in the node's run index (C(~/.cache/clusterval/runs/<run id>@<node>.json),
        keyed by node because home directories are often shared); default the host name.
    type: str
    default: ""
  image:
    description:
      - The training image; RV(image_present) says whether the daemon at O(docker_host) has it,
        so that the image is pulled only where it is missing.
    type: str
  devices:
    description: Devices for the container, as Docker takes them (C(host[:container[:permissions]])).
    type: list
    elements: str
    default: []
  mounts:
    description: Host paths that are bind-mounted into the container and must exist.
    type: list
    elements: str
    default: []
  token_file:
    description:
      - HF token file. RV(token_present) says whether it exists and is not empty (its content is never read).
      - With O(token_required) a missing or empty file is a failed check.
    type: path
  token_required:
    description: Whether O(token_file) must be there (the config does not run on mock data).
    type: bool
    default: true
  gpu_arch:
    description:
      - The config's GPU arch key the run is planned for, compared in canonical form with the arch detected
        from the GPU tool (V(MI325X), V(mi325x) and V(mi325) are one arch).
    type: str
  gpu_vendor:
    description:
      - The GPU vendor the run is planned for; check C(gpu_vendor) fails when the GPU tool is another vendor's.
    type: str
    choices: [amd, nvidia, tpu, trainium]
  gpu_tools:
    description:
      - Tools asked for the GPU model, the first executable one wins; each C(path) and C(args), optionally
        C(vendor) (V(amd) or V(nvidia); default V(nvidia) for C(nvidia-smi)) and, for nvidia-smi,
        C(version_args) (default V(--version), which prints the driver and CUDA version).
      - No tool present fails the count (check C(gpu_count), naming the paths tried) when O(gpu_count) is set;
        without it the arch comes from the config.
    type: list
    elements: dict
    default: []
  gpu_arch_map:
    description: GPU model name fragment to config arch key; the longest fragment found wins.
    type: dict
    default: {}
  gpu_count:
    description:
      - The number of GPUs the plan needs on the node; check C(gpu_count) fails, quoting the tool, when the GPU
        tool of O(gpu_tools) lists another number, or when no tool of O(gpu_tools) is on the node. Not set skips it.
    type: int
  kernel_log:
    description:
      - GPU errors in the kernel log (check C(gpu_errors)), in the window O(kernel_log.since). Critical ones fail the
        check - NVIDIA XIDs of a list of critical codes (48 double-bit ECC error, 79 GPU has fallen off the bus, ...),
        amdgpu's failed GPU resets, a GPU lost from the bus, uncorrectable (RAS) errors and poison consumption, and
        lines of O(kernel_log.patterns). The others (application XIDs such as 13, 31, 43; amdgpu ring timeouts,
        resets the driver recovered from, page faults) are reported in the detail, not failed. Each is named by its
        meaning and its line quoted. A kernel log that cannot be read fails the check.
    type: dict
    suboptions:
      command:
        description: The command printing the kernel log since boot.
        type: list
        elements: str
        default: [dmesg]
      patterns:
        description:
          - Regular expressions of more GPU error lines, each a critical one (the built-in classes always apply).
        type: list
        elements: str
        default: []
      since:
        description:
          - The window of the kernel log looked at - V(boot) (everything since boot), or a duration such as V(24h),
            V(7d), V(90m) or V(3600) (seconds), by the lines' C([seconds since boot]) stamps (C(dmesg),
            C(journalctl -k -o short-monotonic)) against C(/proc/uptime).
        type: str
        default: boot
      privilege:
        description:
          - V(none) - read with O(kernel_log.command) as the user the module runs as (root in a task with
            C(become), or a user the node lets read it).
          - V(become) - the kernel log needs root (C(kernel.dmesg_restrict=1), Ubuntu's default). Run as root the
            module reads it; otherwise it does not, checks with C(sudo -n true) (when O(kernel_log.check_sudo))
            that the user may become root, and says in RV(kernel_log_become) that a task with C(become) must read
            it. A user who may not fails the check, named.
          - V(skip) - not read; the check passes, saying so.
        type: str
        choices: [none, become, skip]
        default: none
      check_sudo:
        description:
          - With O(kernel_log.privilege=become), check that C(sudo -n true) works (Ansible's become with sudo and no
            password). Off where become uses a password or another method.
        type: bool
        default: true
  ras_root:
    description:
      - The DRM sysfs class directory (V(/sys/class/drm)); check C(gpu_ras) fails when an amdgpu RAS counter
        (C(card*/device/ras/*_err_count)) counts an uncorrectable error (C(ue)) since boot. Not set skips it.
    type: path
  rdma_ports:
    description:
      - Check C(rdma_ports) - every port of every RDMA device under O(rdma_ports.sysfs) is C(ACTIVE) and
        runs at O(rdma_ports.min_rate_gbps) or more; the sysfs files and their content are quoted.
    type: dict
    suboptions:
      sysfs:
        description: The InfiniBand sysfs class directory.
        type: path
        default: /sys/class/infiniband
      min_rate_gbps:
        description: The rate each port must have, in Gb/s (the number in the C(rate) file); 0 takes any rate.
        type: float
        default: 0
  expected_log_mib:
    description: The log the run is expected to write below O(disk_path), in MiB; added to O(min_free_mib).
    type: int
    default: 0
  disk_path:
    description: Path whose file system needs O(min_free_mib) free; the deepest existing ancestor is measured.
    type: path
  min_free_mib:
    description: Free space needed below O(disk_path), in MiB.
    type: int
    default: 1024
  shm_size:
    description:
      - The container's shared memory (C(config.shm_size), Docker's size syntax such as V(64G)); check C(shm_size)
        fails when it is larger than the node's memory (C(MemTotal) in C(/proc/meminfo)).
      - Not set skips the check.
    type: str
  rdma:
    description: Check C(/dev/infiniband), the HCAs C(ibv_devinfo -l) lists and dockerd's memlock limit.
    type: bool
    default: false
  python_modules:
    description:
      - Python modules that the node's interpreter (the one running this module, and community.docker's
        modules after it) must import; community.docker needs V(requests) there.
      - An empty list skips the check.
    type: list
    elements: str
    default: [requests]
  lock:
    description:
      - One run per node at a time (check C(busy)), before any other check. The node is busy when a running
        container carries the collection's C(clusterval.run_id) label with another run id, or another run holds
        C(<run root>/clusterval.lock) (run root = the parent of O(lock.run_dir)) and still has a container or
        took the lock less than O(lock.stale_after) seconds ago. A stale lock is taken over with a warning.
      - With O(lock.take) the lock C({run_id, controller, started_at}) is written atomically; teardown
        (M(clusterval.training.training_cleanup)) releases it.
    type: dict
    suboptions:
      run_id:
        description: This run's id.
        type: str
        required: true
      run_dir:
        description: This run's directory on the node.
        type: str
        required: true
      data_cache_dir:
        description:
          - This run's shared data cache directory. With the run dir it goes into the node's run index
            (C(~/.cache/clusterval/runs/)) when the lock is taken, so that a teardown given only the run id
            finds the run's lock and files.
        type: str
        default: ""
      controller:
        description: Who runs it (user and controller host), written into the lock and the run index.
        type: str
        default: "?"
      address:
        description:
          - The node's address as the inventory gives it (C(ansible_host)). With O(lock.controller) it is the
            cluster's identity in the run index, so that the teardown of another cluster whose nodes have the same
            names and share the home directory never clears this run.
        type: str
        default: ""
      take:
        description: Take the lock; V(false) only checks (C(playbooks/preflight.yml), check mode).
        type: bool
        default: true
      takeover:
        description: A busy node is taken over; RV(took_over) names the run whose containers the caller removes.
        type: bool
        default: false
      stale_after:
        description: Seconds after which another run's lock without any container is stale.
        type: float
        default: 1800
  coordinator_port:
    description:
      - The job's coordinator port, on the job's first node (host network); check C(coordinator_port) fails when
        it cannot be bound, naming the process (and container) that holds it when the node shows it.
      - Skipped when the run takes the node over (the other run's containers are removed first).
    type: int
  shared_marker:
    description:
      - Checks that a directory is shared by all nodes. C(mode=write) writes O(shared_marker.token)
        into O(shared_marker.path) before any other check; C(mode=read) checks that it reads back, waiting up
        to O(shared_marker.wait) seconds for the writer; C(mode=remove) deletes it.
      - Run on all nodes in one task, with the first node writing, this needs no second round trip. The writer
        removes the marker later (C(mode=remove), where RV(marker_written) is true).
    type: dict
    suboptions:
      path:
        description: The marker file, inside the shared directory.
        type: path
        required: true
      token:
        description: The token written and expected back; required with O(shared_marker.mode=write) and V(read).
        type: str
      mode:
        description: What to do with the marker.
        type: str
        choices: [write, read, remove]
        required: true
      writer:
        description: The node that wrote the marker, named in the result.
        type: str
        default: the first node
      wait:
        description: With C(mode=read), seconds to wait for the marker to appear (the writer's probe runs at the same time).
        type: float
        default: 0
  hf_token:
    description:
      - The HF token handed over from the controller (an AWX credential's file), written to O(hf_token.dest)
        (mode 0600, its directory created) before any check, so that O(token_file) finds it. Never in the
        result. The action plugin reads the controller's file (option C(settings.hf_token_source)); not written
        in check mode.
    type: dict
    suboptions:
      content:
        description: The token.
        type: str
        required: true
      dest:
        description: Where it goes on the node.
        type: path
        required: true
extends_documentation_fragment:
  - clusterval.training.attributes
  - clusterval.training.docker
attributes:
  check_mode:
    support: full
    details: Only reads, except O(shared_marker.mode=write) and V(remove), which also run in check mode.
"""

EXAMPLES = r"""
- name: Check the node
  clusterval.training.training_probe:
    devices: [/dev/kfd, /dev/dri]
    mounts: [/lib/libibverbs.d]
    gpu_arch: mi300x
    gpu_tools:
      - path: /opt/rocm/bin/amd-smi
        args: [static, --asic]
    gpu_arch_map: {MI300X: mi300x, MI355X: mi355}
    gpu_count: 8
    kernel_log:
      command: [dmesg]
      since: 7d
    ras_root: /sys/class/drm
    rdma_ports:
      min_rate_gbps: 400
    disk_path: /home/alice/LOGS
    expected_log_mib: 70
    rdma: true
  register: probe
"""

RETURN = r"""
checks:
  description: One verdict per check.
  returned: always
  type: list
  elements: dict
  sample:
    - {check: devices, ok: true, detail: "present: /dev/kfd, /dev/dri"}
    - {check: disk, ok: false, detail: "512 MiB free on /home (need 1024)"}
lines:
  description: One readable line per check, prefixed with the node's name.
  returned: always
  type: list
  elements: str
  sample: ["node1 preflight OK   devices: present: /dev/kfd, /dev/dri"]
image_present:
  description: Whether the daemon has O(image); null when not asked or when the daemon cannot tell.
  returned: always
  type: bool
  sample: true
token_present:
  description: Whether O(token_file) exists and is not empty; null when not asked.
  returned: always
  type: bool
  sample: false
marker_written:
  description: Whether this call wrote the shared marker (O(shared_marker.mode=write)).
  returned: always
  type: bool
  sample: false
takeover:
  description: With O(plan), the result of tearing down the run in RV(took_over).
  returned: when a run was taken over
  type: dict
  sample: {ok: true, msg: "removed rocm-jax-llama3.1-70b"}
took_over:
  description:
    - With O(lock.takeover), the run that held the node - C({busy, run_id, controller, started_at, containers,
      reason}) - whose containers the caller removes before going on; null otherwise.
  returned: always
  type: dict
  sample: {busy: true, run_id: 20261125T020000Z-1a2b3c-llama, containers: [rocm-jax-llama3.1-70b]}
gpu:
  description:
    - What the GPU tool reported - C(vendor), C(tool), C(count), C(models), C(arch) (canonical arch key, null
      when the model names none), C(arch_candidates) (from the gfx target on AMD), C(gfx), C(driver), C(cuda)
      (NVIDIA) - or null when O(gpu_arch) is not set or no tool is on the node.
  returned: always
  type: dict
  sample: {vendor: nvidia, tool: /usr/bin/nvidia-smi, count: 8, models: [NVIDIA H100 80GB HBM3], arch: h100,
           arch_candidates: [], driver: 535.129.03, cuda: "12.2"}
user:
  description: The user the module ran as on the node.
  returned: always
  type: str
  sample: clusterval
kernel_log_become:
  description:
    - With O(kernel_log.privilege=become), run as a user who is not root and may use sudo - the kernel log is to be
      read by a task with C(become) (the preflight role's next task).
  returned: always
  type: bool
  sample: true
failed_checks:
  description: The names of the failed checks.
  returned: always
  type: list
  elements: str
  sample: [disk]
"""

import os
import socket
import subprocess

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.clusterval.training.plugins.module_utils import _atomic, _health, _ports, _probe, _runlock
from ansible_collections.clusterval.training.plugins.module_utils._docker import DEFAULT_HOST, ENDPOINT_OPTION, socket_of


def run_checks(params, run):
    """Every check of `params`, and what the node's GPU tool reported (None when not asked or no tool)."""
    checks = []
    gpu = None
    if params["docker_host"]:
        checks.append(_probe.docker_check(socket_of(params["docker_host"])))
    if params["devices"]:
        checks.append(_probe.paths_check("devices", params["devices"], "devices"))
    if params["mounts"]:
        checks.append(_probe.paths_check("host_mounts", params["mounts"], "on the host"))
    if params["gpu_arch"] or params["gpu_count"]:
        gpu_checks, gpu = _probe.gpu_probe(params["gpu_tools"], params["gpu_arch_map"], params["gpu_arch"],
                                           params["gpu_count"], run, params["gpu_vendor"])
        checks.extend(gpu_checks)
    if params["kernel_log"]:
        checks.extend(kernel_log_checks(params["kernel_log"], run))
    if params["ras_root"]:
        checks.append(_health.ras_check(params["ras_root"]))
    if params["rdma_ports"]:
        checks.append(_health.rdma_ports_check(params["rdma_ports"]["sysfs"], params["rdma_ports"]["min_rate_gbps"]))
    if params["disk_path"]:
        checks.append(_probe.disk_check(params["disk_path"], params["min_free_mib"], params["expected_log_mib"]))
    if params["shm_size"]:
        checks.append(_probe.shm_check(params["shm_size"]))
    if params["token_file"] and params["token_required"]:
        checks.append(_probe.token_check(params["token_file"]))
    if params["rdma"]:
        checks.extend(_probe.rdma_checks(run))
    if params["python_modules"]:
        checks.append(_probe.python_modules_check(params["python_modules"]))
    return checks, gpu


def kernel_log_checks(kernel_log, run):
    """The gpu_errors check, or where the kernel log needs root the user's sudo (the read is left to a task with
    become: kernel_log_become)."""
    if kernel_log["privilege"] == "skip":
        return [_probe.check("gpu_errors", True, "the kernel log is not read (preflight_kernel_log: skip)")]
    if kernel_log["privilege"] == "become" and os.geteuid() != 0:
        refused = _probe.sudo_check(_probe.account_name(os.geteuid()), run) if kernel_log["check_sudo"] else None
        return [refused] if refused else []
    return [_health.kernel_log_check(kernel_log["command"], run, kernel_log["patterns"],
                                     _health.window_seconds(kernel_log["since"]), _health.uptime(),
                                     "as root" if os.geteuid() == 0 else "")]


def claim_node(params, node):
    """The busy check and the lock; {check, took_over}, or None without O(lock)."""
    lock = params["lock"]
    if not lock:
        return None
    return _runlock.claim(node, socket_of(params["docker_host"] or DEFAULT_HOST), lock["run_id"], lock["run_dir"],
                          lock["controller"], take=lock["take"], takeover=lock["takeover"],
                          stale_after_s=lock["stale_after"], data_cache_dir=lock["data_cache_dir"],
                          address=lock["address"])


def marker_checks(marker):
    if marker["mode"] == "write":
        try:
            _probe.write_marker(marker["path"], marker["token"])
        except OSError as exc:
            return [_probe.check("shared_cache", False, "cannot write %s: %s" % (marker["path"], exc.strerror))]
        return [_probe.check("shared_cache", True, "wrote the run's marker into %s for the other nodes to read back"
                             % os.path.dirname(marker["path"]))]
    if marker["mode"] == "remove":
        _probe.remove_marker(marker["path"])
        return []
    return [_probe.shared_check(marker["path"], marker["token"], marker["writer"], marker["wait"])]


def hand_over_token(module):
    """The run's own copy of the controller's HF token, readable by the node's user only."""
    token = module.params["hf_token"]
    try:
        os.makedirs(os.path.dirname(token["dest"]) or ".", mode=0o755, exist_ok=True)
        _atomic.write_text(token["dest"], token["content"], mode=0o600)
    except OSError as exc:
        module.fail_json(msg="could not write the HF token's copy %s: %s" % (token["dest"], exc.strerror or exc))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            plan=dict(type="dict"),
            settings=dict(type="dict"),
            settings_from=dict(type="str"),
            part=dict(type="str", choices=["all", "probe", "kernel_log"], default="all"),
            node=dict(type="str", default=""),
            **ENDPOINT_OPTION,
            devices=dict(type="list", elements="str", default=[]),
            mounts=dict(type="list", elements="str", default=[]),
            image=dict(type="str"),
            token_file=dict(type="path"),
            token_required=dict(type="bool", default=True),
            gpu_arch=dict(type="str"),
            gpu_vendor=dict(type="str", choices=["amd", "nvidia", "tpu", "trainium"]),
            gpu_tools=dict(type="list", elements="dict", default=[]),
            gpu_arch_map=dict(type="dict", default={}),
            gpu_count=dict(type="int"),
            kernel_log=dict(type="dict", options=dict(
                command=dict(type="list", elements="str", default=["dmesg"]),
                patterns=dict(type="list", elements="str", default=[]),
                since=dict(type="str", default="boot"),
                privilege=dict(type="str", choices=["none", "become", "skip"], default="none"),
                check_sudo=dict(type="bool", default=True),
            )),
            ras_root=dict(type="path"),
            rdma_ports=dict(type="dict", options=dict(
                sysfs=dict(type="path", default="/sys/class/infiniband"),
                min_rate_gbps=dict(type="float", default=0.0),
            )),
            expected_log_mib=dict(type="int", default=0),
            disk_path=dict(type="path"),
            min_free_mib=dict(type="int", default=1024),
            shm_size=dict(type="str"),
            rdma=dict(type="bool", default=False),
            python_modules=dict(type="list", elements="str", default=["requests"]),
            lock=dict(type="dict", options=dict(
                run_id=dict(type="str", required=True),
                run_dir=dict(type="str", required=True),
                data_cache_dir=dict(type="str", default=""),
                controller=dict(type="str", default="?"),
                address=dict(type="str", default=""),
                take=dict(type="bool", default=True),
                takeover=dict(type="bool", default=False),
                stale_after=dict(type="float", default=1800.0),
            )),
            coordinator_port=dict(type="int"),
            shared_marker=dict(type="dict", options=dict(
                path=dict(type="path", required=True),
                token=dict(type="str", no_log=True),
                mode=dict(type="str", choices=["write", "read", "remove"], required=True),
                writer=dict(type="str", default="the first node"),
                wait=dict(type="float", default=0.0),
            ), required_if=[("mode", "write", ["token"]), ("mode", "read", ["token"])]),
            hf_token=dict(type="dict", no_log=False, options=dict(
                content=dict(type="str", required=True, no_log=True),
                dest=dict(type="path", required=True),
            )),
        ),
        supports_check_mode=True,
    )

    def run(argv):
        rc, out, err = module.run_command(list(argv))
        return subprocess.CompletedProcess(list(argv), rc, out, err)

    node = module.params["node"] or socket.gethostname()
    if module.params["hf_token"] and not module.check_mode:
        hand_over_token(module)
    try:
        socket_of(module.params["docker_host"])
    except ValueError as exc:
        module.fail_json(msg="docker_host: %s" % exc)
    kernel_log = module.params["kernel_log"]
    if kernel_log:
        try:
            _health.window_seconds(kernel_log["since"])
        except ValueError as exc:
            module.fail_json(msg="kernel_log.since: %s" % exc)
    # Busy or not is known before anything is written on the node (not at all when the user cannot reach Docker:
    # the docker check says why).
    reachable = not (module.params["docker_host"] and _probe.docker_access(socket_of(module.params["docker_host"])))
    claimed = (claim_node(module.params, node) if reachable else None) or {"check": None, "took_over": None}
    claim_checks = [claimed["check"]] if claimed["check"] else []
    if claimed["check"] and claimed["check"]["ok"] and claimed["check"]["detail"].startswith("WARNING: "):
        module.warn("%s: %s" % (node, claimed["check"]["detail"][len("WARNING: "):]))
    # The writer writes before its other checks, the readers read after theirs: less waiting.
    marker = module.params["shared_marker"] or {"mode": None}
    marker_first = marker_checks(marker) if marker["mode"] in ("write", "remove") else []
    node_checks, gpu = run_checks(module.params, run)
    checks = claim_checks + marker_first + node_checks
    if module.params["coordinator_port"] and not claimed["took_over"]:
        checks.append(_ports.port_check(module.params["coordinator_port"]))
    if marker["mode"] == "read":
        checks.extend(marker_checks(marker))
    image = module.params["image"]
    token_file = module.params["token_file"]
    module.exit_json(changed=False, checks=checks, lines=_probe.report_lines(node, checks),
                     failed_checks=[c["check"] for c in checks if not c["ok"]], took_over=claimed["took_over"],
                     marker_written=marker["mode"] == "write" and all(c["ok"] for c in marker_first),
                     image_present=_probe.image_present(socket_of(module.params["docker_host"] or DEFAULT_HOST), image)
                     if image else None,
                     token_present=_probe.token_check(token_file)["ok"] if token_file else None,
                     gpu=gpu, user=_probe.account_name(os.geteuid()),
                     kernel_log_become=bool(kernel_log and kernel_log["privilege"] == "become" and os.geteuid() != 0
                                            and "gpu_errors" not in [c["check"] for c in checks]))


if __name__ == "__main__":
    main()
