# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""Slurm as the launcher, pure: the job the plan emits (an sbatch script with one step, one task per node),
the step's argv for each container runtime, the parsers of Slurm's output, and Slurm's evidence as the run's
causes (a node's) or the run's own (time limit, preemption, a cancel by someone else).

The Slurm commands run on the login host; the training nodes are Slurm's node names and are never contacted
over SSH. Each task finds its part of the plan by ``$SLURMD_NODENAME`` (``_slurm_step``).
"""
from __future__ import annotations

import json
import math
import re
import shlex
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._docker import DEFAULT_HOST
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

RUNTIMES = ("docker", "pyxis", "apptainer")
SLURM_DIR = "slurm"
STEP_SCRIPT = "step.py"
JOB_SCRIPT = "job.sbatch"
# Slurm may signal a job up to 60 s before its time limit; the step's own stop (docker stop) needs its grace.
EARLY_SIGNAL_S = 60
PENDING_STATES = ("PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD")
ACTIVE_STATES = ("RUNNING", "COMPLETING", "SUSPENDED", "STAGE_OUT", "SIGNALING", "RESIZING", "STOPPED")
# The job's end that is the run's, never a node's: (class, what it means).
RUN_ENDINGS = {
    "TIMEOUT": ("time limit", "Slurm ended the job at its time limit (%s)"),
    "PREEMPTED": ("preempted", "Slurm preempted the job (%s): another job took its nodes"),
    "CANCELLED": ("cancelled", "the job was cancelled outside this run (scancel by someone else; %s)"),
    "DEADLINE": ("deadline", "Slurm ended the job at its deadline (%s)"),
}
SRUN_ERROR_RE = re.compile(r"srun: error: (?P<node>[\w.-]+): tasks? (?P<tasks>[\d,-]+): "
                           r"(?P<what>Exited with exit code (?P<code>\d+)|Killed|Terminated|[^\n]+)")
STEP_ERROR_RE = re.compile(r"^clusterval step: (?P<node>[\w.-]+): error: (?P<text>.+)$", re.MULTILINE)
SCONTROL_TOKEN_RE = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def slurm_dir(status_dir: str) -> str:
    """Where the job's script, output and every node's part live: the run's status directory (shared)."""
    return "%s/%s" % (status_dir.rstrip("/"), SLURM_DIR)


def job_name(run_id: str) -> str:
    return "clusterval-%s" % run_id


def time_limit_minutes(deadline_s: float, stop_grace_s: float, asked: Optional[int] = None) -> int:
    """``--time`` in minutes: above the run's deadline by the early signal and the step's stop, so that the run's
    own deadline, not Slurm's limit, ends a run that overruns. An asked limit below that is refused."""
    needed = int(math.ceil((float(deadline_s) + EARLY_SIGNAL_S + float(stop_grace_s)) / 60.0))
    if asked is None:
        return needed
    if int(asked) < needed:
        raise ConfigError("training_slurm.time_limit", "at least %d minutes (the run's deadline of %.0f s, Slurm's "
                          "early signal of %d s and the step's stop of %.0f s)" % (
                              needed, deadline_s, EARLY_SIGNAL_S, stop_grace_s), "%s" % asked)
    return int(asked)


def directive_value(path: str, value: Any) -> str:
    text = str(value)
    if not text or any(ch.isspace() for ch in text) or "'" in text or '"' in text:
        raise ConfigError(path, "a value without spaces or quotes", repr(text))
    return text


def sbatch_options(settings: Mapping[str, Any], run_id: str, hosts: Sequence[str], minutes: int,
                   output: str) -> List[str]:
    """The job's options: one task per node on exactly the planned nodes, never requeued, every node's own
    end kept (``--kill-on-bad-exit=0`` on the step), a comment naming the run."""
    options = ["--job-name=%s" % job_name(run_id), "--nodes=%d" % len(hosts), "--ntasks-per-node=1",
               "--nodelist=%s" % ",".join(directive_value("hosts", h) for h in hosts), "--exclusive",
               "--no-requeue", "--wait-all-nodes=1", "--time=%d" % minutes,
               "--comment=clusterval.training:run:%s" % directive_value("run_id", run_id),
               "--output=%s" % directive_value("training_slurm.output", output), "--open-mode=append"]
    for key in ("partition", "account", "qos", "reservation"):
        if settings.get(key):
            options.append("--%s=%s" % (key, directive_value("training_slurm.%s" % key, settings[key])))
    for index, extra in enumerate(settings.get("sbatch_args") or []):
        text = directive_value("training_slurm.sbatch_args[%d]" % index, extra)
        if not text.startswith("-"):
            raise ConfigError("training_slurm.sbatch_args[%d]" % index, "an sbatch option (--name=value)", text)
        options.append(text)
    return options


def step_argv(runtime: str, python: str, step_path: str, nodes_dir: str, container: Optional[Mapping[str, Any]] = None,
              ) -> List[str]:
    """The one step: ``srun`` with one task per node; each task is the step wrapper (``_slurm_step``), which
    takes its node's part by ``$SLURMD_NODENAME``. With ``docker`` the wrapper starts the container (and turns
    Slurm's SIGTERM into its stop); with ``pyxis`` or ``apptainer`` the step runs in the image and the wrapper
    runs the supervisor in it."""
    srun = ["srun", "--kill-on-bad-exit=0", "--ntasks-per-node=1", "--wait=0", "--unbuffered"]
    if runtime == "docker":
        return srun + [python, step_path, "run", nodes_dir]
    if container is None:
        raise ValueError("the %s runtime needs the container's image and mounts" % runtime)
    inner = ["python3", step_path, "exec", nodes_dir]
    if runtime == "pyxis":
        return srun + pyxis_options(container) + inner
    if runtime == "apptainer":
        return srun + apptainer_argv(container) + inner
    raise ConfigError("training_slurm.runtime", "one of %s" % ", ".join(RUNTIMES), runtime)


def bind_specs(container: Mapping[str, Any]) -> List[List[str]]:
    """[source, target, "ro"|""] of the container's volumes (``src:dst[:ro]``) and mounts."""
    binds = []
    for volume in container.get("volumes") or []:
        parts = str(volume).split(":")
        binds.append([parts[0], parts[1] if len(parts) > 1 else parts[0], "ro" if parts[2:3] == ["ro"] else ""])
    for mount in container.get("mounts") or []:
        binds.append([mount["source"], mount["target"], "ro" if mount.get("read_only") else ""])
    return binds


def pyxis_options(container: Mapping[str, Any]) -> List[str]:
    """pyxis's srun options (NVIDIA/pyxis wiki, Usage): the image, the binds (flags after a third ``:``), the
    working directory; the home directory not mounted, root inside the container as with Docker."""
    mounts = ",".join("%s:%s%s" % (src, dst, ":" + flags if flags else "") for src, dst, flags in bind_specs(container))
    options = ["--container-image=%s" % container["image"]]
    if mounts:
        options.append("--container-mounts=%s" % mounts)
    if container.get("workdir"):
        options.append("--container-workdir=%s" % container["workdir"])
    return options + ["--no-container-mount-home", "--container-remap-root"]


def apptainer_argv(container: Mapping[str, Any], gpu_vendor: str = "") -> List[str]:
    """``apptainer exec`` (its manual: ``--bind src[:dest[:opts]]``, ``--nv``/``--rocm``, ``--pwd``,
    ``--cleanenv``) of the image from its registry (``docker://``)."""
    argv = ["apptainer", "exec", "--cleanenv"]
    vendor = gpu_vendor or str(container.get("gpu_vendor") or "")
    if vendor in ("nvidia", "amd"):
        argv.append("--nv" if vendor == "nvidia" else "--rocm")
    for src, dst, flags in bind_specs(container):
        argv += ["--bind", "%s:%s%s" % (src, dst, ":" + flags if flags else "")]
    if container.get("workdir"):
        argv += ["--pwd", str(container["workdir"])]
    image = str(container["image"])
    return argv + [image if "://" in image or image.endswith(".sif") else "docker://%s" % image]


def batch_script(options: Sequence[str], step: Sequence[str], run_id: str) -> str:
    """The sbatch script: its options as ``#SBATCH`` lines, then the one step."""
    lines = ["#!/bin/sh", "# clusterval.training: the job of run %s (one task per node, each its part of the "
             "plan by $SLURMD_NODENAME)" % run_id]
    lines += ["#SBATCH %s" % option for option in options]
    lines += ["exec %s" % " ".join(shlex.quote(arg) for arg in step), ""]
    return "\n".join(lines)


# -- what Slurm says ------------------------------------------------------------------------------------

def parse_scontrol(text: str) -> Dict[str, str]:
    """``scontrol show job -o ID`` (or ``show node -o``): one record of ``Key=Value`` tokens; a value may hold
    spaces (``Reason=Not responding``), so it runs to the next ``Key=``."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    marks = [(m.start(1), m.end(1), m.group(1)) for m in SCONTROL_TOKEN_RE.finditer(line)]
    record = {}
    for index, (dummy, end, key) in enumerate(marks):
        stop = marks[index + 1][0] if index + 1 < len(marks) else len(line)
        record[key] = line[end + 1:stop].strip()
    return record


def parse_table(text: str, fields: Sequence[str], separator: str = "|") -> List[Dict[str, str]]:
    """Rows of ``--parsable2``/``-o 'a|b'`` output as dicts (blank lines skipped)."""
    rows = []
    for line in text.splitlines():
        if line.strip():
            values = line.split(separator)
            rows.append({field: (values[i].strip() if i < len(values) else "") for i, field in enumerate(fields)})
    return rows


SACCT_FIELDS = ("JobID", "JobName", "State", "ExitCode", "NodeList", "Start", "End", "Elapsed", "Reason", "Comment")
SINFO_REASON_FIELDS = ("node", "state", "since", "reason")


def sacct_argv(job_id: str) -> List[str]:
    return ["sacct", "-j", str(job_id), "-X", "--parsable2", "--noheader", "--format=%s" % ",".join(SACCT_FIELDS)]


def node_reasons_argv() -> List[str]:
    return ["sinfo", "--noheader", "--Node", "--list-reasons", "--format=%N|%T|%H|%E"]


def srun_errors(text: str) -> Dict[str, Dict[str, Any]]:
    """node -> {"exit_code", "line"} from srun's ``srun: error: <node>: task N: Exited with exit code C``, the only
    place Slurm names the node of a failed task (sacct's exit codes are lossy)."""
    found: Dict[str, Dict[str, Any]] = {}
    for match in SRUN_ERROR_RE.finditer(text):
        code = match.group("code")
        found.setdefault(match.group("node"), {"exit_code": int(code) if code is not None else None,
                                               "line": match.group(0).strip()})
    return found


def expand_nodelist(text: str) -> List[str]:
    """``node[1-3,5],gpu7`` -> the names (Slurm's hostlist form)."""
    names: List[str] = []
    for prefix, ranges, plain in re.findall(r"([^,\[]+)\[([^\]]+)\]|([^,\[\]]+)", text or ""):
        if plain:
            names.append(plain.strip())
            continue
        for part in ranges.split(","):
            low, dummy, high = part.partition("-")
            width = len(low)
            for number in range(int(low), int(high or low) + 1):
                names.append("%s%0*d" % (prefix, width, number))
    return [n for n in names if n]


# -- Slurm's evidence in the run's decision -------------------------------------------------------------

def job_view(job: Mapping[str, str]) -> Dict[str, Any]:
    """What a poll keeps of ``scontrol show job``: state, reason, nodes, times (``ended_at``: the end, in seconds
    since the epoch, once the job is over)."""
    state = (job.get("JobState") or "").split()[0] if job.get("JobState") else "UNKNOWN"
    return {"state": state, "reason": job.get("Reason") or "None", "nodes": expand_nodelist(job.get("NodeList", "")),
            "start": job.get("StartTime"), "end": job.get("EndTime"), "ended_at": epoch_of(job.get("EndTime")),
            "restarts": job.get("Restarts"), "exit_code": job.get("ExitCode")}


def epoch_of(stamp: Optional[str]) -> Optional[float]:
    """Slurm's ``2026-11-29T01:28:40`` (the controller's local time) in seconds since the epoch; None for
    ``Unknown`` or ``None``."""
    try:
        return time.mktime(time.strptime(str(stamp), "%Y-%m-%dT%H:%M:%S"))
    except (TypeError, ValueError, OverflowError):
        return None


def is_pending(view: Mapping[str, Any]) -> bool:
    return view.get("state") in PENDING_STATES


def is_over(view: Mapping[str, Any]) -> bool:
    return not is_pending(view) and view.get("state") not in ACTIVE_STATES


def pending_cause(view: Mapping[str, Any], waited_s: float, limit_s: float) -> Dict[str, Any]:
    """The run's cause when the job pended past the pending limit: the scheduler's reason, never a node."""
    return {"class": "pending",
            "text": "the job pended %.0f s, past the pending limit of %.0f s: Slurm's reason: %s (no node was "
                    "tested)" % (waited_s, limit_s, view.get("reason") or "None")}


def run_ending(view: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """A job's end that is the run's: time limit, preemption, a cancel by someone else, the deadline."""
    ending = RUN_ENDINGS.get(str(view.get("state")))
    if ending is None:
        return None
    detail = "JobState=%s Reason=%s" % (view.get("state"), view.get("reason") or "None")
    return {"class": ending[0], "text": ending[1] % detail}


def node_failures(view: Mapping[str, Any], reasons: Sequence[Mapping[str, str]], now: float) -> Dict[str, Dict[str, Any]]:
    """node -> its failure record, when the job ended NODE_FAIL: the job's nodes that Slurm marked down or
    drained, with Slurm's reason (``Not responding``, ``Kill task failed``, a health check's)."""
    if view.get("state") != "NODE_FAIL":
        return {}
    mine = set(view.get("nodes") or [])
    found = {}
    for row in reasons:
        if row.get("node") in mine:
            found[row["node"]] = {
                "class": "node failure", "evidence": "slurm", "lineno": None, "consequence": False,
                "text": "Slurm: NODE_FAIL: %s is %s: %s (since %s)" % (
                    row["node"], row.get("state") or "down", row.get("reason") or "no reason given",
                    row.get("since") or "?"),
                "time": None, "first_seen": now}
    return found


def final_ending(record: Mapping[str, Any]) -> Optional[Dict[str, Any]]:
    """The run's own end as sacct recorded it (``CANCELLED by 0``, ``TIMEOUT``), with when it came: a poll may
    have seen the job only as COMPLETING while the nodes reported what the cancel did to them."""
    row = record.get("sacct") or {}
    words = str(row.get("State") or "").split()
    ending = run_ending({"state": words[0] if words else "", "reason": row.get("Reason")})
    if ending is None:
        return None
    ending["text"] = "%s; sacct: %s" % (ending["text"], " ".join(words))
    ended_at = epoch_of(row.get("End"))
    return dict(ending, time=ended_at, since=ended_at if ended_at is not None else math.inf)


def step_errors(text: str) -> Dict[str, str]:
    """node -> why its task could not run the job (the step wrapper's ``clusterval step: <node>: error: ...``)."""
    found: Dict[str, str] = {}
    for match in STEP_ERROR_RE.finditer(text):
        found.setdefault(match.group("node"), match.group("text").strip())
    return found


def scheduler_record(job_id: str, sacct_text: str, output_text: str, job_text: str = "",
                     reasons_text: str = "") -> Dict[str, Any]:
    """What Slurm recorded of the job, once at the end: sacct's line, srun's errors and the step's (by node), the
    job's last state (``scontrol show job``) and the reasons of the nodes Slurm marked down or drained."""
    rows = parse_table(sacct_text, SACCT_FIELDS)
    errors = srun_errors(output_text)
    for node, text in step_errors(output_text).items():
        errors.setdefault(node, {"exit_code": None, "line": None})["step"] = text
    return {"launcher": "slurm", "job_id": str(job_id), "sacct": rows[0] if rows else None, "srun_errors": errors,
            "job": job_view(parse_scontrol(job_text)) if job_text.strip() else None,
            "node_reasons": parse_table(reasons_text, SINFO_REASON_FIELDS)}


def with_srun_exit(state: Dict[str, Any], error: Mapping[str, Any]) -> Dict[str, Any]:
    """A node whose supervisor left no exit status of its own (its container never started): the step's own
    error is its cause, with srun's line naming the node and its status."""
    if state.get("exit_code") is not None or state.get("errors") or error.get("exit_code") in (None, 0):
        return state
    merged = dict(state, exit_code=error["exit_code"], reason="exit",
                  msg="%s (%s)" % (error["line"], state.get("msg") or state.get("host")))
    if error.get("step"):
        merged["errors"] = [{"class": "launch", "text": error["step"], "lineno": None, "evidence": "line",
                             "step": state.get("last_step"), "time": None, "first_seen": state.get("finished_at"),
                             "consequence": False}]
    return merged


def drain_argv(host: str, run_id: str, headline: str) -> List[str]:
    """Draining the culprit: the run and the headline as Slurm's reason (one argv, no shell)."""
    reason = "clusterval run %s: %s" % (run_id, " ".join(str(headline).split()))
    return ["scontrol", "update", "NodeName=%s" % host, "State=DRAIN", "Reason=%s" % reason[:200]]


# -- the job's files on the shared file system -----------------------------------------------------------

STEP_BOOTSTRAP = (
    "import os, sys\n"
    "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
    "from ansible_collections.clusterval.training.plugins.module_utils._slurm_step import main\n"
    "sys.exit(main(sys.argv))\n"
)


def node_part(spec: Mapping[str, Any], body: Mapping[str, Any], files: Sequence[Mapping[str, Any]],
              directories: Sequence[str], docker_host: str, stop_timeout: int) -> Dict[str, Any]:
    """What one node's task needs (``_slurm_step``): its files, and its container (Docker's create body), or
    the supervisor's argv and environment (inside pyxis's or Apptainer's container)."""
    return {"directories": sorted(set(directories)), "files": list(files), "docker_host": docker_host,
            "name": spec["name"], "body": dict(body), "stop_timeout": int(stop_timeout),
            "argv": list(spec.get("command") or []), "env": dict(spec.get("env") or {})}


def job_files(run_id: str, status_dir: str, parts: Mapping[str, Mapping[str, Any]], step_sources: Mapping[str, str],
              script: str) -> Dict[str, Any]:
    """The directories and files the login host writes on the shared file system: the step wrapper (its
    module_utils closure), every node's part, the sbatch script."""
    base = slurm_dir(status_dir)
    package = "ansible_collections/clusterval/training/plugins/module_utils"
    files = [{"path": "%s/step/%s/%s.py" % (base, package, name), "mode": "0644", "content": source}
             for name, source in sorted(step_sources.items())]
    files.append({"path": "%s/step/%s" % (base, STEP_SCRIPT), "mode": "0644", "content": STEP_BOOTSTRAP})
    files += [{"path": "%s/nodes/%s.json" % (base, host), "mode": "0600", "content": json_text(part)}
              for host, part in sorted(parts.items())]
    files.append({"path": "%s/%s" % (base, JOB_SCRIPT), "mode": "0644", "content": script})
    directories = sorted({f["path"].rsplit("/", 1)[0] for f in files})
    return {"directories": directories, "files": files}


def json_text(data: Any) -> str:
    return json.dumps(data, indent=1, sort_keys=True)


def job(plan: Mapping[str, Any], hosts: Sequence[str], parts: Mapping[str, Mapping[str, Any]],
        settings: Mapping[str, Any], step_sources: Mapping[str, str], status_dir: str) -> Dict[str, Any]:
    """Everything the plan emits for Slurm: the script, the submit argv, the files, the step's argv."""
    runtime = str(settings.get("runtime") or "docker")
    if runtime not in RUNTIMES:
        raise ConfigError("training_slurm.runtime", "one of %s" % ", ".join(RUNTIMES), runtime)
    run_id = str(plan["run_id"])
    base = slurm_dir(status_dir)
    minutes = time_limit_minutes(float(settings["deadline"]), float(settings.get("stop_grace") or 10),
                                 settings.get("time_limit"))
    options = sbatch_options(settings, run_id, hosts, minutes, "%s/job-%%j.out" % base)
    # The cleanup step asks for the job's nodes where the job got them (its partition, account, QOS, reservation).
    placement = [o for o in options if o.split("=", 1)[0] in ("--partition", "--account", "--qos", "--reservation")]
    first = parts[hosts[0]] if hosts else {}
    container = dict(first.get("spec") or {}, gpu_vendor=settings.get("gpu_vendor") or "")
    step = step_argv(runtime, str(settings.get("python") or "/usr/bin/python3"), "%s/step/%s" % (base, STEP_SCRIPT),
                     "%s/nodes" % base, container)
    script = batch_script(options, step, run_id)
    node_parts = {host: part["part"] for host, part in parts.items()}
    files = job_files(run_id, status_dir, node_parts, step_sources, script)
    return {"runtime": runtime, "time_limit_minutes": minutes, "options": options, "step": step, "script": script,
            "script_path": "%s/%s" % (base, JOB_SCRIPT), "output_pattern": "%s/job-%%j.out" % base,
            "submit": ["sbatch", "--parsable", "%s/%s" % (base, JOB_SCRIPT)], "name": job_name(run_id),
            "directories": files["directories"], "files": files["files"], "slurm_dir": base,
            "clean": ["srun", "--nodes=%d" % len(hosts), "--ntasks-per-node=1", "--nodelist=%s" % ",".join(hosts),
                      "--time=5", "--kill-on-bad-exit=0", "--immediate=60", "--job-name=%s-clean" % job_name(run_id),
                      *placement,
                      str(settings.get("python") or "/usr/bin/python3"), "%s/step/%s" % (base, STEP_SCRIPT),
                      "clean", run_id, str(settings.get("docker_host") or DEFAULT_HOST)]}
