#!/usr/bin/env python3
"""Drive a clusterval.training playbook from Python with ansible-runner and read the metrics back.

clusterval.training.training_assert publishes run-level custom stats
(``clusterval_training``: verdict, failures, cluster and per-node means). ansible-runner
delivers them in the ``artifact_data`` of the ``playbook_on_stats`` event, AWX as job
artifacts. It works with the installed collection: the playbook is run by its FQCN from the project
directory (default: the current directory, where ``runs/<run id>/`` appears), with the Ansible settings of
the environment. Usage:

    python runner_example.py -i inventories/mycluster.yml \\
        -e training_config=configs/megatron/mi3xx_megatron_llama_distributed.json
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any, Dict, List, NamedTuple, Optional

import ansible_runner

PLAYBOOK = "clusterval.training.train"


def extra_vars(pairs: List[str]) -> Dict[str, Any]:
    """``key=value`` pairs, or JSON objects, as ``ansible-playbook -e`` takes them."""
    variables: Dict[str, Any] = {}
    for pair in pairs:
        if pair.lstrip().startswith("{"):
            variables.update(json.loads(pair))
        else:
            key, sep, value = pair.partition("=")
            if not sep:
                raise SystemExit("-e %s: expected key=value or a JSON object" % pair)
            variables[key] = value
    return variables


class Outcome(NamedTuple):
    status: str
    rc: int
    metrics: Optional[Dict[str, Any]]
    tail: str  # the job's last lines of output


def run_playbook(playbook: str, inventory: Optional[str], variables: Dict[str, Any], project_dir: str,
                 quiet: bool = True) -> Outcome:
    """Run ``playbook`` (an FQCN or a file) from ``project_dir``; the runner directory is removed afterwards."""
    # the ansible-playbook installed beside this Python (a virtualenv's bin is often not on PATH)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    if os.path.exists(playbook):
        playbook = os.path.abspath(playbook)
    # the runner runs from project_dir: a path given relative to here must say where it is
    if inventory and os.path.exists(inventory):
        inventory = os.path.abspath(inventory)
    with tempfile.TemporaryDirectory(prefix="clusterval-runner-") as private_data_dir:
        runner = ansible_runner.run(private_data_dir=private_data_dir, project_dir=os.path.abspath(project_dir),
                                    playbook=playbook, inventory=inventory, extravars=variables,
                                    envvars={"PATH": path}, quiet=quiet)
        # the events are read from the runner directory: before it goes
        return Outcome(runner.status, runner.rc, training_metrics(runner), last_lines(runner))


def last_lines(runner: Any, count: int = 25) -> str:
    """The job's last lines of output, the cause of a failure among them."""
    try:
        return "\n".join(runner.stdout.read().splitlines()[-count:])
    except (OSError, ValueError, AttributeError):
        return ""


def training_metrics(runner: Any) -> Optional[Dict[str, Any]]:
    """The ``clusterval_training`` custom stats of the run, or None when the run published none."""
    for event in runner.events:
        if event.get("event") == "playbook_on_stats":
            return (event.get("event_data", {}).get("artifact_data") or {}).get("clusterval_training")
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--playbook", default=PLAYBOOK, help="an FQCN or a playbook file (default %(default)s)")
    parser.add_argument("--project-dir", default=os.getcwd(),
                        help="where the playbook runs from and runs/ is written (default: the current directory)")
    parser.add_argument("-i", "--inventory", help="inventory file or host list")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], help="key=value or a JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the playbook output")
    args = parser.parse_args(argv)
    outcome = run_playbook(args.playbook, args.inventory, extra_vars(args.extra_vars), args.project_dir,
                           quiet=not args.verbose)
    print(json.dumps({"status": outcome.status, "rc": outcome.rc, "clusterval_training": outcome.metrics}, indent=2))
    if outcome.metrics is None:
        print("runner_example: the job ended %s (rc %s) and published no clusterval_training; its last output:\n%s"
              % (outcome.status, outcome.rc, outcome.tail), file=sys.stderr)
        return 2
    return 0 if outcome.metrics.get("verdict") == "PASS" and outcome.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
