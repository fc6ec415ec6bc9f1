#!/usr/bin/env python3
"""Drive a clusterval.training playbook from Python with ansible-runner and read the metrics back.

clusterval.training.training_assert publishes run-level custom stats
(``clusterval_training``: verdict, failures, cluster and per-node means). ansible-runner
delivers them in the ``artifact_data`` of the ``playbook_on_stats`` event, AWX as job
artifacts. Usage:

    python examples/runner_example.py -i inventories/mycluster.yml \\
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

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


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


def run_playbook(playbook: str, inventory: Optional[str], variables: Dict[str, Any], quiet: bool = True) -> Outcome:
    """Run ``playbook`` from the collection checkout; its runner directory is removed afterwards."""
    # the ansible-playbook installed beside this Python (a virtualenv's bin is often not on PATH)
    path = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])
    envvars = {"ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"), "PATH": path}
    with tempfile.TemporaryDirectory(prefix="clusterval-runner-") as private_data_dir:
        runner = ansible_runner.run(private_data_dir=private_data_dir, project_dir=REPO,
                                    playbook=os.path.abspath(playbook), inventory=inventory, extravars=variables,
                                    envvars=envvars, quiet=quiet)
        # the events are read from the runner directory: before it goes
        return Outcome(runner.status, runner.rc, training_metrics(runner))


def training_metrics(runner: Any) -> Optional[Dict[str, Any]]:
    """The ``clusterval_training`` custom stats of the run, or None when the run published none."""
    for event in runner.events:
        if event.get("event") == "playbook_on_stats":
            return (event.get("event_data", {}).get("artifact_data") or {}).get("clusterval_training")
    return None


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--playbook", default=os.path.join(REPO, "playbooks", "train.yml"))
    parser.add_argument("-i", "--inventory", help="inventory file or host list")
    parser.add_argument("-e", "--extra-vars", action="append", default=[], help="key=value or a JSON object")
    parser.add_argument("-v", "--verbose", action="store_true", help="show the playbook output")
    args = parser.parse_args(argv)
    outcome = run_playbook(args.playbook, args.inventory, extra_vars(args.extra_vars), quiet=not args.verbose)
    print(json.dumps({"status": outcome.status, "rc": outcome.rc, "clusterval_training": outcome.metrics}, indent=2))
    if outcome.metrics is None:
        return 2
    return 0 if outcome.metrics.get("verdict") == "PASS" and outcome.rc == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
