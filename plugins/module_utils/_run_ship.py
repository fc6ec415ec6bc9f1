# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What is shipped to every node to run its rank: the launch script, the supervisor's files and config, and
the container's command (the supervisor, which runs the launch script as its child)."""
from __future__ import annotations

import json
import os
import re
import shlex
from typing import Any, Dict, List, Mapping, Optional, Sequence

from ansible_collections.clusterval.training.plugins.module_utils._run_records import parser_args

# Where the container sees the node's HF token file (mounted read-only); the launch script exports it.
HF_TOKEN_MOUNT = "/run/clusterval/hf_token"


def launch_script(run_id: str, workdir: str, run_lines: Sequence[str], exit_path: str,
                  prelude: Sequence[str] = ()) -> str:
    """Runs the framework's lines in its working directory, then records their exit status in exit_path.

    ``prelude``: POSIX sh lines run first, such as the RDMA setup of ``_rdma.prelude_lines`` (they print
    ``[clusterval] RDMA failure: ...`` into the training log and ``finish 1`` on failure, which ends the
    script with that status recorded).
    """
    lines = [
        "#!/bin/sh",
        "# clusterval.training launch script for run %s" % run_id,
        "exit_file=%s" % shlex.quote(exit_path),
        'finish() { echo "$1" >"$exit_file.tmp" && mv -f "$exit_file.tmp" "$exit_file"; exit "$1"; }',
        'rm -f "$exit_file"',
        "if [ -r %s ]; then HF_TOKEN=$(cat %s) && export HF_TOKEN; fi" % (HF_TOKEN_MOUNT, HF_TOKEN_MOUNT),
        *prelude_block(prelude),
        "cd %s || finish 126" % shlex.quote(workdir),
        *run_lines,
        "finish $?",
    ]
    return "\n".join(lines) + "\n"


def prelude_block(prelude: Sequence[str]) -> list:
    """The prelude inline (its exports reach the framework); ``finish`` is defined, so its lines may end with
    ``|| finish 1`` to record the status, and a plain ``exit`` still ends the container with that status,
    which the supervisor records."""
    return list(prelude)


# -- the node-side supervisor (plugins/module_utils/_run_node.py) ---------------------------------

SUPERVISOR_DIR = "supervisor"
STATUS_ROOT = ".clusterval-status"
PACKAGE = "ansible_collections.clusterval.training.plugins.module_utils"
PACKAGE_PATH = PACKAGE.replace(".", "/")
# Both import forms: ``from <package>._name import x`` and ``from <package> import _a, _b``.
IMPORT_RE = re.compile(r"^\s*from ansible_collections\.clusterval\.training\.plugins\.module_utils"
                       r"(?:\.(\w+) import| import ([\w, ]+)$)", re.MULTILINE)
BOOTSTRAP = (
    "import os, sys\n"
    "sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))\n"
    "from %s._run_node import main\n"
    "sys.exit(main(sys.argv))\n" % PACKAGE
)


def handed_token_path(node_run_dir: str) -> str:
    """Where a token handed over by the controller (AWX credential) lives on a node: in the run directory, whose
    mount lets the node's supervisor remove it when the job ends (a lapsed lease included). The container sees
    nothing more than its read-only mount of the same file gives it."""
    return "%s/.hf_token" % node_run_dir.rstrip("/")


def status_dir(data_cache_dir: str, run_id: str) -> str:
    """Where every node's supervisor appends its status stream and reads the run's lease: shared by all nodes."""
    return "%s/%s/%s" % (data_cache_dir.rstrip("/"), STATUS_ROOT, run_id)


def shared_lease_path(status_directory: str) -> str:
    return "%s/lease" % status_directory


def node_lease_path(node_run_dir: str) -> str:
    """The lease file of contract 5: its content changes at each renewal."""
    return "%s/lease" % node_run_dir


def module_closure(module_utils_dir: str, start: str = "_run_node") -> Dict[str, str]:
    """{module name: source} of ``start`` and every module_utils module it imports, transitively."""
    found: Dict[str, str] = {}
    pending = [start]
    while pending:
        name = pending.pop()
        if name in found:
            continue
        with open(os.path.join(module_utils_dir, name + ".py"), encoding="utf-8") as handle:
            found[name] = handle.read()
        pending.extend(imported_modules(found[name]))
    return found


def imported_modules(source: str) -> List[str]:
    names: List[str] = []
    for single, several in IMPORT_RE.findall(source):
        names.extend([single] if single else [n.strip() for n in several.split(",") if n.strip()])
    return names


def supervisor_files(module_utils_dir: str, node_run_dir: str, config: Mapping[str, Any],
                     sources: Optional[Mapping[str, str]] = None) -> List[Dict[str, str]]:
    """The files the supervisor needs in the node run dir: its module_utils closure (``sources``, read once for
    every node, or read here), a bootstrap, its config."""
    base = "%s/%s" % (node_run_dir, SUPERVISOR_DIR)
    closure = module_closure(module_utils_dir) if sources is None else sources
    files = [{"path": "%s/%s/%s.py" % (base, PACKAGE_PATH, name), "mode": "0644", "content": source}
             for name, source in sorted(closure.items())]
    files.append({"path": "%s/supervise.py" % base, "mode": "0644", "content": BOOTSTRAP})
    files.append({"path": "%s/config.json" % base, "mode": "0644", "content": json.dumps(config, indent=1)})
    files.append({"path": node_lease_path(node_run_dir), "mode": "0644",
                  "content": json.dumps({"renewal": 0, "go": False})})
    return files


def supervised_command(node_run_dir: str, python: str = "python3") -> List[str]:
    """The container's command: the supervisor, which runs the launch script as its child."""
    base = "%s/%s" % (node_run_dir, SUPERVISOR_DIR)
    return [python, "%s/supervise.py" % base, "%s/config.json" % base]


def supervisor_config(node: Mapping[str, Any], plan: Mapping[str, Any], settings: Mapping[str, Any]) -> Dict[str, Any]:
    """What one node's supervisor needs: paths, bounds and the parser's arguments."""
    run_dir, token = node["run_dir"], node.get("hf_token_file")
    status = status_dir(plan["data_cache_dir"], plan["run_id"])
    parse = {**parser_args(node), "max_steps": int(settings.get("max_steps", 2000)),
             "patterns": list(settings.get("patterns") or []), "advisories": list(settings.get("advisories") or [])}
    return {
        "host": node["host"],
        "run_id": plan["run_id"],
        "argv": list(node["container"]["command"]),
        "node_run_dir": run_dir,
        "log_path": node["log_path"],
        "exit_path": node.get("exit_code_path"),
        "status_dir": status,
        "lease_paths": [shared_lease_path(status), node_lease_path(run_dir)],
        "lease_timeout": float(settings["lease_timeout"]),
        "deadline_s": float(settings["deadline"]),
        "gang_timeout": float(settings["gang_timeout"]),
        "gang_lease": str(settings.get("gang_lease", False)).lower() in ("true", "yes", "1"),
        "token_copy": token if token == handed_token_path(run_dir) else None,
        "poll_s": float(settings["poll_interval"]),
        "stop_grace": float(settings.get("stop_grace", 10)),
        "sample_after_s": float(settings.get("sample_after_s") or 0),
        "parse": parse,
    }


def node_shipment(plan: Mapping[str, Any], node: Mapping[str, Any], settings: Mapping[str, Any],
                  module_utils_dir: str, sources: Optional[Mapping[str, str]] = None) -> Dict[str, Any]:
    """One node's supervisor config and status directory, and under ``container`` what its container runs (the
    container role's ``job``: the supervisor's command, files and directories, and the status mount)
    (``node``: its part of the plan, ``_plan_form.node_view``)."""
    config = supervisor_config(node, plan, settings)
    files = supervisor_files(module_utils_dir, node["run_dir"], config, sources)
    status = config["status_dir"]
    job = {"command": supervised_command(node["run_dir"]), "extra_volumes": ["%s:%s" % (status, status)],
           "files": files, "directories": sorted({os.path.dirname(f["path"]) for f in files}),
           "stop_timeout": int(config["stop_grace"])}
    return {"container": job, "status_dir": status, "config": config}


def cluster_shipments(plan: Mapping[str, Any], nodes: Mapping[str, Mapping[str, Any]], settings: Mapping[str, Any],
                      module_utils_dir: str) -> Dict[str, Dict[str, Any]]:
    """host -> its shipment, for every node at once (``nodes``: host -> its part of the plan). The supervisor's
    sources are read once and shared by every node's file list."""
    sources = module_closure(module_utils_dir)
    return {host: node_shipment(plan, node, settings, module_utils_dir, sources) for host, node in nodes.items()}
