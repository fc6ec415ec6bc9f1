# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The plan's forms, what every reader of a plan imports (the run, the actions, the filters) instead of the
planner: the full form (``_plan.plan_run``), where every node carries its whole part, and the compact form
(`compact_plan`), where what all nodes share is stored once; `node_view` gives a node's whole part from either.
"""
from __future__ import annotations

from typing import Any, Dict, Mapping, Sequence, Tuple

from ansible_collections.clusterval.training.plugins.module_utils._config import type_name
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError, join_path, show

FULL_FORM = "full"
COMPACT_FORM = "compact"
# Kept in `nodes[host]` of the compact form even when every node has the same value: they say who the node is.
NODE_IDENTITY = ("host", "address", "job", "node_rank", "prints_steps")


# -- compact form ---------------------------------------------------------------------------------

LeafPath = Tuple[str, ...]


def compact_plan(plan: Mapping[str, Any]) -> Dict[str, Any]:
    """The plan with every node value stored once, at the widest level where it is the same.

    `node_shared` holds what every node of the run has, `jobs[i].node_shared` what every node of that job
    has beyond it, `nodes[host]` the rest (always with NODE_IDENTITY). Nested objects (container, env,
    labels, launch) are split key by key. A compact plan comes back unchanged (as a shallow copy).
    """
    if plan.get("form") == COMPACT_FORM:
        return dict(plan)
    leaves_by_host = {host: node_leaves(node) for host, node in plan["nodes"].items()}
    run_shared = shared_leaves(list(leaves_by_host.values()))
    jobs = []
    job_shared_by_host: Dict[str, Dict[LeafPath, Any]] = {}
    for job in plan["jobs"]:
        in_job = shared_leaves([leaves_by_host[host] for host in job["hosts"]])
        job_shared = {path: value for path, value in in_job.items() if path not in run_shared}
        jobs.append({**job, "node_shared": nest_leaves(job_shared)})
        job_shared_by_host.update((host, job_shared) for host in job["hosts"])
    nodes = {}
    for host, leaves in leaves_by_host.items():
        job_shared = job_shared_by_host[host]
        nodes[host] = nest_leaves({path: value for path, value in leaves.items()
                                   if path not in run_shared and path not in job_shared})
    compact: Dict[str, Any] = {}
    for key, value in plan.items():
        if key == "nodes":
            compact["node_shared"] = nest_leaves(run_shared)
        compact[key] = value
    compact.update(form=COMPACT_FORM, jobs=jobs, nodes=nodes)
    return compact


def node_leaves(node: Mapping[str, Any], prefix: LeafPath = ()) -> Dict[LeafPath, Any]:
    """Every value of a node under its key path; non-empty objects are descended into, lists are values."""
    leaves: Dict[LeafPath, Any] = {}
    for key, value in node.items():
        path = prefix + (key,)
        if isinstance(value, Mapping) and value:
            leaves.update(node_leaves(value, path))
        else:
            leaves[path] = value
    return leaves


def shared_leaves(nodes: Sequence[Mapping[LeafPath, Any]]) -> Dict[LeafPath, Any]:
    first, others = nodes[0], nodes[1:]
    return {path: value for path, value in first.items()
            if path[0] not in NODE_IDENTITY and all(path in other and same_value(other[path], value)
                                                    for other in others)}


def same_value(left: Any, right: Any) -> bool:
    return left is right or (type(left) is type(right) and left == right)


def nest_leaves(leaves: Mapping[LeafPath, Any]) -> Dict[str, Any]:
    tree: Dict[str, Any] = {}
    for path, value in leaves.items():
        branch = tree
        for key in path[:-1]:
            branch = branch.setdefault(key, {})
        branch[path[-1]] = value
    return tree


def node_view(plan: Mapping[str, Any], host: str) -> Dict[str, Any]:
    """A node's whole part, as `plan["nodes"][host]` of the full form, from a plan of either form."""
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else None
    if not isinstance(nodes, Mapping):
        raise ConfigError("plan.nodes", "a training plan (from clusterval.training.training_plan)",
                          type_name(plan) if nodes is None else type_name(nodes))
    if host not in nodes:
        raise ConfigError(join_path("plan.nodes", str(host)), "a host of the plan (%s)" % hosts_hint(nodes),
                          "no such host")
    node = nodes[host]
    if plan.get("form") != COMPACT_FORM:
        return node
    job = plan_job(plan, node.get("job"), join_path(join_path("plan.nodes", str(host)), "job"))
    return overlay([node, job.get("node_shared", {}), plan.get("node_shared", {})])


def hosts_hint(nodes: Mapping[str, Any]) -> str:
    names = list(nodes)
    shown = ", ".join(str(name) for name in names[:5])
    return shown + (" and %d more" % (len(names) - 5) if len(names) > 5 else "")


def plan_job(plan: Mapping[str, Any], name: Any, path: str) -> Mapping[str, Any]:
    for job in plan.get("jobs") or ():
        if job.get("name") == name:
            return job
    raise ConfigError(path, "the name of a job in plan.jobs", show(name))


def overlay(layers: Sequence[Mapping[str, Any]]) -> Dict[str, Any]:
    """Objects merged key by key, recursively; for any other value the first layer that has the key wins."""
    merged: Dict[str, Any] = {}
    for layer in layers:
        for key in layer:
            if key in merged:
                continue
            values = [other[key] for other in layers if key in other]
            nested = len(values) > 1 and all(isinstance(value, Mapping) for value in values)
            merged[key] = overlay(values) if nested else values[0]
    return merged
