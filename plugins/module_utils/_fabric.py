# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""The fabric gate: rccl-tests/nccl-tests output, the rounds that measure it, and the verdict that names a node.

Rounds: every node alone, then all nodes in one ring; when the ring is slow (or nothing says what the ring
should reach), pairs of nodes along a ring (each node in two pairs, with two different partners), so that a
node whose every pair is slow while its partners are fast with others is named, and a single slow pair
between two nodes that are fast elsewhere names that link. Nothing here touches a node.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import statistics
import subprocess
import time
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

Row = Dict[str, Any]
SIMULATED_MARK = "[clusterval simulator]"
# Open MPI's --tag-output prefix (`[1,0]<stdout>:`) and similar launchers' prefixes.
PREFIX = re.compile(r"^\[\d+,\d+\]<std(?:out|err)>:")
AVG_BUSBW = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([0-9.eE+-]+|nan|inf)")
OUT_OF_BOUNDS = re.compile(r"^#\s*Out of bounds values\s*:\s*(\d+)\s+(OK|FAILED)")
RANK_LINE = re.compile(r"^#\s+Rank\s+\d+\b(?:.*?\son\s+(\S+)\s+device\b)?")
NUMBER = re.compile(r"^-?[0-9]+(?:\.[0-9]*)?(?:[eE][+-]?[0-9]+)?$")
# A printed bus bandwidth below this has too few digits (%6.2f): it is recomputed from size and time.
FEW_DIGITS_GBPS = 0.1


# ------------------------------------------------------------------ parsing rccl-tests / nccl-tests
def parse_output(text: str) -> Dict[str, Any]:
    """The table of an ``*_perf`` run: rows (size, count, type, redop, root, out-of-place and in-place time, algbw,
    busbw, #wrong), the average bus bandwidth and out-of-bounds summary lines, the number of ranks listed."""
    rows: List[Row] = []
    result: Dict[str, Any] = {"rows": rows, "avg_busbw": None, "out_of_bounds": None, "ranks": 0, "rank_hosts": [],
                              "simulated": SIMULATED_MARK in text}
    for raw in text.splitlines():
        line = PREFIX.sub("", raw).rstrip()
        rank = RANK_LINE.match(line)
        if rank:
            result["ranks"] += 1
            if rank.group(1) and rank.group(1) not in result["rank_hosts"]:
                result["rank_hosts"].append(rank.group(1))
            continue
        avg = AVG_BUSBW.match(line)
        if avg:
            result["avg_busbw"] = float(avg.group(1))
            continue
        bounds = OUT_OF_BOUNDS.match(line)
        if bounds:
            result["out_of_bounds"] = {"count": int(bounds.group(1)), "ok": bounds.group(2) == "OK"}
            continue
        row = parse_row(line)
        if row:
            rows.append(row)
    return result


def parse_row(line: str) -> Optional[Row]:
    """One table row; None for anything else. With a root column (2020 and later) or without (older)."""
    fields = line.split()
    if len(fields) < 8 or not fields[0].isdigit() or not fields[1].isdigit():
        return None
    has_root = len(fields) >= 13 or (len(fields) == 9 and re.match(r"^-?\d+$", fields[4]) is not None)
    start = 5 if has_root else 4
    out = fields[start:start + 4]
    if len(out) < 4 or not all(NUMBER.match(value) for value in out[:3]):
        return None
    row: Row = {"size": int(fields[0]), "count": int(fields[1]), "type": fields[2], "redop": fields[3],
                "root": int(fields[4]) if has_root else None,
                "time_us": float(out[0]), "algbw": float(out[1]), "busbw": float(out[2]), "wrong": out[3]}
    inplace = fields[start + 4:start + 8]
    if len(inplace) == 4 and all(NUMBER.match(value) for value in inplace[:3]):
        row.update(in_time_us=float(inplace[0]), in_algbw=float(inplace[1]), in_busbw=float(inplace[2]),
                   in_wrong=inplace[3])
    return row


def bus_factor(benchmark: str, nranks: int) -> float:
    """rccl-tests' bus bandwidth factor: 2(n-1)/n for all-reduce, (n-1)/n for all-to-all, gather and scatter."""
    if nranks < 2:
        return 1.0
    if "all_reduce" in benchmark:
        return 2.0 * (nranks - 1) / nranks
    return (nranks - 1) / float(nranks)


def peak_busbw(parsed: Mapping[str, Any], benchmark: str) -> Optional[float]:
    """The bus bandwidth (GB/s) of the largest message size, out of place: the figure the gate judges.

    A printed value too small for its two decimals is recomputed from the size and the time.
    """
    rows = parsed.get("rows") or []
    if not rows:
        return None
    row = max(rows, key=lambda r: r["size"])
    if row["busbw"] >= FEW_DIGITS_GBPS or row["time_us"] <= 0:
        return row["busbw"]
    algbw = row["size"] / (row["time_us"] * 1e3)
    return algbw * bus_factor(benchmark, int(parsed.get("ranks") or 0))


# ------------------------------------------------------------------ rounds
def pair_rounds(hosts: Sequence[str]) -> List[List[Tuple[str, str]]]:
    """The edges of a ring through `hosts` (each host in two pairs), in rounds where no host is in two pairs:
    2 rounds for an even count, 3 for an odd one; one pair for 2 hosts (the ring itself)."""
    count = len(hosts)
    if count < 3:
        return [[(hosts[0], hosts[1])]] if count == 2 else []
    edges = [(hosts[i], hosts[(i + 1) % count]) for i in range(count)]
    rounds: List[List[Tuple[str, str]]] = []
    if count % 2 == 0:
        rounds = [edges[0::2], edges[1::2]]
    else:
        rounds = [edges[0:count - 1:2], edges[1:count - 1:2], [edges[count - 1]]]
    return [r for r in rounds if r]


def plan_rounds(hosts: Sequence[str], addresses: Mapping[str, str], pairs: bool) -> List[Dict[str, Any]]:
    """Round specs for the nodes' module: each a name and its groups (name, hosts, their addresses in rank order).

    Without `pairs`: every node alone, then all nodes together. With `pairs`: the pair rounds.
    """
    def group(name: str, members: Sequence[str]) -> Dict[str, Any]:
        return {"name": name, "hosts": list(members), "addresses": [str(addresses.get(h) or h) for h in members]}
    if pairs:
        return [{"name": "pairs-%d" % (index + 1), "kind": "pairs",
                 "groups": [group("%s+%s" % edge, edge) for edge in edges]}
                for index, edges in enumerate(pair_rounds(hosts))]
    rounds = [{"name": "alone", "kind": "alone", "groups": [group(h, [h]) for h in hosts]}]
    if len(hosts) > 1:
        rounds.append({"name": "all", "kind": "all", "groups": [group("all", hosts)]})
    return rounds


def group_of(round_spec: Mapping[str, Any], node: str) -> Optional[Dict[str, Any]]:
    return next((dict(g) for g in round_spec.get("groups", []) if node in g.get("hosts", [])), None)


def substitute(template: Sequence[str], group: Mapping[str, Any], gpus: int) -> List[str]:
    """The benchmark's argv for a group: ``{hosts}`` (addresses, comma-separated), ``{hosts_slots}``
    (``addr:gpus,...``, for ``mpirun -H``), ``{nnodes}``, ``{gpus}`` (per node) and ``{np}`` (all GPUs)."""
    addresses = list(group.get("addresses") or group.get("hosts") or [])
    values = {"hosts": ",".join(addresses), "hosts_slots": ",".join("%s:%d" % (a, gpus) for a in addresses),
              "nnodes": str(len(addresses)), "gpus": str(gpus), "np": str(len(addresses) * gpus)}
    return [str(arg).format(**values) for arg in template]


# ------------------------------------------------------------------ the verdict
def group_results(measured: Sequence[Mapping[str, Any]]) -> Dict[Tuple[str, str], Dict[str, Any]]:
    """(round, group) -> the result of the group's first rank that reported (rank 0 where present)."""
    chosen: Dict[Tuple[str, str], Dict[str, Any]] = {}
    for item in measured:
        if not item or not item.get("group"):
            continue
        key = (str(item.get("round")), str(item["group"]["name"]))
        best = chosen.get(key)
        if best is None or int(item.get("rank", 0)) < int(best.get("rank", 0)):
            chosen[key] = dict(item)
    return chosen


def figure(result: Mapping[str, Any], benchmark: str) -> Tuple[Optional[float], str]:
    """A group's bus bandwidth for one benchmark and, when there is none, why."""
    bench = (result.get("benchmarks") or {}).get(benchmark) or {}
    if not bench:
        return None, "no result"
    if bench.get("skipped"):
        return None, "not run: %s" % bench["skipped"]
    if bench.get("timed_out"):
        return None, "timed out after %ss" % bench.get("seconds")
    busbw = bench.get("busbw")
    if bench.get("rc") not in (0, None) or busbw is None:
        return None, "exit status %s, no bus bandwidth in its output%s" % (
            bench.get("rc"), (": " + bench["tail"][-1]) if bench.get("tail") else "")
    bounds = bench.get("out_of_bounds") or {}
    if bounds and not bounds.get("ok", True):
        return busbw, "%d values out of bounds (data corrupted)" % bounds.get("count", 0)
    return float(busbw), ""


def threshold(values: Sequence[float], minimum: float, ratio: float) -> Tuple[float, str]:
    """The bandwidth a measurement must reach: the absolute minimum, or `ratio` x the median of its peers."""
    if minimum > 0:
        return minimum, "expected >= %s GB/s" % gbps(minimum)
    finite = [v for v in values if v is not None]
    if len(finite) < 2:
        return 0.0, "no expectation and no peer to compare with"
    median = statistics.median(finite)
    return ratio * median, "%d%% of the median %s GB/s" % (round(ratio * 100), gbps(median))


def gbps(value: Optional[float]) -> str:
    if value is None:
        return "-"
    return "%.3g" % value


def judge(hosts: Sequence[str], measured: Sequence[Mapping[str, Any]], benchmarks: Sequence[str],
          expect: Mapping[str, Any]) -> Dict[str, Any]:
    """The gate's verdict from every node's round results.

    `expect`: ``alone_min_busbw`` / ``across_min_busbw`` (GB/s per benchmark name, 0 or absent: none),
    ``ratio`` (a measurement below ratio x the median of its peers is slow), ``baseline`` (benchmark ->
    the all-nodes bus bandwidth of an earlier run; with ``ratio`` it sets the across-nodes expectation).
    """
    results = group_results(measured)
    ratio = float(expect.get("ratio", 0.5))
    verdict: Dict[str, Any] = {"benchmarks": list(benchmarks), "nodes": list(hosts), "alone": {}, "all": {},
                               "pairs": [], "named": [], "findings": [], "undetermined": None,
                               "simulated": any(r.get("simulated") for r in results.values())}
    for bench in benchmarks:
        judge_alone(hosts, results, bench, expect, ratio, verdict)
        judge_all(results, bench, expect, ratio, verdict)
    judge_pairs(hosts, results, benchmarks, expect, ratio, verdict)
    # The NCCL/RCCL and socket settings the benchmarks ran with, in a container (the same on every node).
    verdict["env"] = next((bench["env"] for r in results.values() for bench in (r.get("benchmarks") or {}).values()
                           if isinstance(bench, Mapping) and bench.get("env")), {})
    verdict["rounds"] = rounds_summary(results)
    verdict["seconds"] = round(sum(r["seconds"] for r in verdict["rounds"]), 2)
    verdict["matrix"] = matrix(hosts, verdict["pairs"], benchmarks[0] if benchmarks else "")
    judged = all(verdict.get("all_expected", {}).get(b) for b in benchmarks)
    verdict["pairs_needed"] = (len(hosts) >= 3 and not verdict["pairs"] and not verdict.get("not_measured")
                               and (bool(verdict.get("all_slow")) or not judged))
    verdict["failed"] = bool(verdict["findings"])
    verdict["msg"] = message(verdict)
    verdict["lines"] = report_lines(verdict)
    return verdict


def per_bench(expect: Mapping[str, Any], key: str, bench: str) -> float:
    value = (expect.get(key) or {})
    return float(value.get(bench, 0) or 0) if isinstance(value, Mapping) else float(value or 0)


def judge_alone(hosts: Sequence[str], results: Mapping[Tuple[str, str], Any], bench: str,
                expect: Mapping[str, Any], ratio: float, verdict: Dict[str, Any]) -> None:
    figures = {h: figure(results.get(("alone", h), {}), bench) for h in hosts if ("alone", h) in results}
    limit, basis = threshold([f[0] for f in figures.values()], per_bench(expect, "alone_min_busbw", bench), ratio)
    for host, (value, why) in figures.items():
        verdict["alone"].setdefault(host, {})[bench] = value
        if why or (value is not None and value < limit):
            evidence = why or "%s busbw %s GB/s, below %s" % (bench, gbps(value), basis)
            finding(verdict, "node", host, "%s alone: %s" % (host, evidence))


def judge_all(results: Mapping[Tuple[str, str], Any], bench: str, expect: Mapping[str, Any], ratio: float,
              verdict: Dict[str, Any]) -> None:
    if ("all", "all") not in results:
        return
    unmet = ((results[("all", "all")].get("benchmarks") or {}).get(bench) or {}).get("unmet")
    if unmet:
        verdict.setdefault("not_measured", []).append("%s across nodes: %s" % (bench, unmet))
        return
    value, why = figure(results[("all", "all")], bench)
    verdict["all"][bench] = value
    minimum = per_bench(expect, "across_min_busbw", bench)
    baseline = per_bench(expect, "baseline", bench)
    if not minimum and baseline:
        minimum, basis = ratio * baseline, "%d%% of the baseline run's %s GB/s" % (round(ratio * 100), gbps(baseline))
    else:
        basis = "expected >= %s GB/s" % gbps(minimum)
    verdict.setdefault("all_expected", {})[bench] = minimum or None
    if why or (minimum and value is not None and value < minimum):
        verdict.setdefault("all_slow", []).append("all %d nodes: %s" % (
            len(verdict["nodes"]), why or "%s busbw %s GB/s, %s" % (bench, gbps(value), basis)))


def judge_pairs(hosts: Sequence[str], results: Mapping[Tuple[str, str], Any], benchmarks: Sequence[str],
                expect: Mapping[str, Any], ratio: float, verdict: Dict[str, Any]) -> None:
    pairs = [(key, value) for key, value in results.items() if key[0].startswith("pairs-")]
    if not pairs:
        if verdict.get("all_slow"):
            finding(verdict, "undetermined", None, "; ".join(verdict["all_slow"]) + (
                ": with 2 nodes the node or the link cannot be told apart" if len(hosts) == 2 else ""))
        return
    bad: Dict[str, List[str]] = {}
    for bench in benchmarks:
        figures = [(value["group"]["hosts"], figure(value, bench)) for dummy, value in pairs]
        limit, basis = threshold([f[1][0] for f in figures], per_bench(expect, "across_min_busbw", bench), ratio)
        for members, (value, why) in figures:
            name = "+".join(members)
            entry = next((p for p in verdict["pairs"] if p["hosts"] == members), None)
            if entry is None:
                entry = {"hosts": members, "busbw": {}, "ok": True}
                verdict["pairs"].append(entry)
            entry["busbw"][bench] = value
            if why or (value is not None and value < limit):
                entry["ok"] = False
                bad.setdefault(name, []).append(why or "%s %s GB/s, below %s" % (bench, gbps(value), basis))
    isolate(verdict, bad)


def isolate(verdict: Dict[str, Any], bad: Mapping[str, List[str]]) -> None:
    """Name the nodes whose every pair is slow while a partner is fast elsewhere; then the links."""
    pairs = verdict["pairs"]
    with_good = {h for p in pairs if p["ok"] for h in p["hosts"]}
    involved = {h for p in pairs for h in p["hosts"]}
    named = set()
    for host in sorted(involved):
        mine = [p for p in pairs if host in p["hosts"]]
        partners = {h for p in mine for h in p["hosts"] if h != host}
        if mine and not any(p["ok"] for p in mine) and partners & with_good:
            evidence = "; ".join("with %s: %s" % ([h for h in p["hosts"] if h != host][0],
                                                  ", ".join(bad["+".join(p["hosts"])])) for p in mine)
            finding(verdict, "node", host, "%s is slow in every pair while its partners are fast with other nodes (%s)"
                    % (host, evidence))
            named.add(host)
    for pair in pairs:
        first, second = pair["hosts"]
        if pair["ok"] or first in named or second in named:
            continue
        if first in with_good and second in with_good:
            finding(verdict, "link", "%s-%s" % (first, second), "the link %s-%s is slow (%s) while both nodes are fast "
                    "with other partners" % (first, second, ", ".join(bad["+".join(pair["hosts"])])))
        else:
            finding(verdict, "undetermined", None, "%s+%s slow (%s) and neither is fast with another node"
                    % (first, second, ", ".join(bad["+".join(pair["hosts"])])))
    if verdict.get("all_slow") and all(p["ok"] for p in pairs):
        finding(verdict, "undetermined", None, "; ".join(verdict["all_slow"]) + ", but every pair is fast: the "
                "problem shows only with all nodes at once (a switch uplink?)")


def finding(verdict: Dict[str, Any], kind: str, name: Optional[str], evidence: str) -> None:
    verdict["findings"].append({"kind": kind, "name": name, "evidence": evidence})
    if kind in ("node", "link") and name not in [n["name"] for n in verdict["named"]]:
        verdict["named"].append({"kind": kind, "name": name, "evidence": evidence})
    if kind == "undetermined":
        verdict["undetermined"] = evidence


def rounds_summary(results: Mapping[Tuple[str, str], Any]) -> List[Dict[str, Any]]:
    rounds: Dict[str, Dict[str, Any]] = {}
    for (round_name, group_name), value in results.items():
        entry = rounds.setdefault(round_name, {"name": round_name, "groups": 0, "seconds": 0.0})
        entry["groups"] += 1
        entry["seconds"] = max(entry["seconds"], float(value.get("seconds") or 0))
    order = {"alone": 0, "all": 1}
    return sorted(rounds.values(), key=lambda r: (order.get(r["name"], 2), r["name"]))


def matrix(hosts: Sequence[str], pairs: Sequence[Mapping[str, Any]], bench: str) -> Dict[str, Any]:
    """Node-by-node bus bandwidth of the measured pairs (symmetric; None where no pair was measured)."""
    cells: Dict[str, Dict[str, Optional[float]]] = {h: {} for h in hosts}
    for pair in pairs:
        first, second = pair["hosts"]
        value = pair["busbw"].get(bench)
        cells.setdefault(first, {})[second] = value
        cells.setdefault(second, {})[first] = value
    return {"benchmark": bench, "nodes": list(hosts), "busbw": cells}


def message(verdict: Mapping[str, Any]) -> str:
    unmeasured = ("; not measured: " + "; ".join(verdict["not_measured"])) if verdict.get("not_measured") else ""
    if not verdict["findings"]:
        parts = ["%s %s GB/s" % (b, gbps(v)) for b, v in verdict["all"].items()]
        return "fabric gate PASS on %d nodes%s%s" % (len(verdict["nodes"]), (": all nodes " + ", ".join(parts))
                                                     if parts else "", unmeasured)
    named = verdict["named"]
    if named:
        return "fabric gate FAIL: %s%s" % ("; ".join(n["evidence"] for n in named), unmeasured)
    return "fabric gate FAIL, culprit undetermined: %s%s" % (verdict["undetermined"], unmeasured)


def report_lines(verdict: Mapping[str, Any]) -> List[str]:
    lines = []
    for host, figures in verdict["alone"].items():
        lines.append("fabric %s alone: %s" % (host, ", ".join("%s %s GB/s" % (b, gbps(v)) for b, v in figures.items())))
    if verdict["all"]:
        lines.append("fabric all %d nodes: %s" % (len(verdict["nodes"]), ", ".join(
            "%s %s GB/s" % (b, gbps(v)) for b, v in verdict["all"].items())))
    for pair in verdict["pairs"]:
        lines.append("fabric pair %s: %s%s" % ("+".join(pair["hosts"]), ", ".join(
            "%s %s GB/s" % (b, gbps(v)) for b, v in pair["busbw"].items()), "" if pair["ok"] else " SLOW"))
    lines.append(verdict["msg"])
    return lines


# ------------------------------------------------------------------ the recommendation
def isolation_advice(reason: str, inventory: str, config: str, hosts_pattern: str,
                     extra_vars: Optional[Mapping[str, str]] = None) -> str:
    """What a verdict says when it cannot name the culprit (a lock-step hang, a cluster slow as a whole): run the
    node and fabric layers alone, with pairs of nodes, on the run's hosts - the exact command, every value quoted.

    For the verdict's owner to print; `reason` is the verdict's own words (why nobody is named).
    """
    argv = ["ansible-playbook", "-i", inventory, "clusterval.training.fabric", "-e", "training_config=%s" % config,
            "-e", "training_hosts=%s" % hosts_pattern, "-e", "fabric_pairs=always"]
    for key, value in sorted((extra_vars or {}).items()):
        argv += ["-e", "%s=%s" % (key, value)]
    return ("%s. To find the node or link, check each node and measure the fabric in pairs of nodes "
            "(rccl-tests, minutes, no training): %s" % (reason.rstrip(". "), " ".join(shlex.quote(a) for a in argv)))


# ------------------------------------------------------------------ running a benchmark on a node
def rank_env(group: Mapping[str, Any], node: str, port: int, timeout: float) -> Dict[str, str]:
    """What the simulated stand-in reads to find its ring (real rccl-tests take theirs from MPI and ignore it)."""
    hosts = list(group["hosts"])
    return {"CLUSTERVAL_FABRIC_RANK": str(hosts.index(node)), "CLUSTERVAL_FABRIC_NRANKS": str(len(hosts)),
            "CLUSTERVAL_FABRIC_PEERS": ",".join(group.get("addresses") or hosts),
            "CLUSTERVAL_FABRIC_PORT": str(port), "CLUSTERVAL_FABRIC_TIMEOUT": "%g" % timeout}


def run_benchmark(argv: Sequence[str], env: Mapping[str, str], timeout: float, benchmark: str,
                  clock: Any = None) -> Dict[str, Any]:
    """Run one benchmark to its end or `timeout`; its whole process group is killed then, so nothing stays."""
    clock = clock or time.monotonic
    started = clock()
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                env=dict(os.environ, **env), start_new_session=True)
    except OSError as exc:
        return {"rc": None, "timed_out": False, "seconds": 0.0, "busbw": None, "tail": ["%s: %s" % (argv[0], exc)]}
    timed_out = False
    try:
        output, dummy = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        output, dummy = proc.communicate()
    return outcome(output or "", proc.returncode, timed_out, round(clock() - started, 3), benchmark)


def outcome(output: str, rc: Optional[int], timed_out: bool, seconds: float, benchmark: str) -> Dict[str, Any]:
    """What a benchmark's run says: its exit, the bus bandwidth of its largest size, its summary and last lines."""
    parsed = parse_output(output)
    return {"rc": rc, "timed_out": timed_out, "seconds": seconds,
            "busbw": None if timed_out else peak_busbw(parsed, benchmark), "avg_busbw": parsed["avg_busbw"],
            "out_of_bounds": parsed["out_of_bounds"], "rows": parsed["rows"][-8:], "simulated": parsed["simulated"],
            "ranks": parsed["ranks"], "rank_hosts": parsed["rank_hosts"], "tail": [line for line in output.splitlines() if line.strip()][-5:]}


# ------------------------------------------------------------------ a gate that cannot run
def unmet(result: Mapping[str, Any], group: Mapping[str, Any]) -> str:
    """Why the ranks of a group of several nodes did not meet, or "": rccl-tests/nccl-tests started on each node
    without an MPI launch each run alone, and list only their own node's ranks."""
    nodes = len(group.get("hosts") or [])
    seen = result.get("rank_hosts") or []
    if nodes < 2 or not seen or len(seen) >= nodes:
        return ""
    return ("its ranks did not meet: rank 0 lists ranks on %d host%s of the group's %d nodes (rccl-tests and "
            "nccl-tests meet across nodes only through MPI: set fabric_launch: first with an mpirun command, "
            "docs/running.md)" % (len(seen), "" if len(seen) == 1 else "s", nodes))


def tool_paths(benchmarks: Sequence[Mapping[str, Any]]) -> List[str]:
    """What the benchmarks need to find: each command's program, and the rccl-tests/nccl-tests binary a launcher
    (mpirun) is given."""
    paths: List[str] = []
    for bench in benchmarks:
        argv = [str(a) for a in bench.get("command") or []]
        for arg in argv[:1] + [a for a in argv[1:] if a.startswith("/") and a.endswith("_perf")]:
            if "{" not in arg and arg not in paths:
                paths.append(arg)
    return paths


def not_run_reason(checks: Mapping[str, Mapping[str, Any]]) -> str:
    """One sentence for the whole cluster from every node's look at its tools (``{missing, where}``, or ``error``),
    or "" when every node has them. It counts the nodes, never names one: a gate that cannot run blames no node."""
    problems: Dict[str, int] = {}
    for check in checks.values():
        missing = list(check.get("missing") or [])
        problem = check.get("error") or (missing and "%s %s not in %s" % (
            " and ".join(missing), "is" if len(missing) == 1 else "are", check.get("where")))
        if problem:
            problems[problem] = problems.get(problem, 0) + 1
    if not problems:
        return ""
    return "fabric gate not run: " + "; ".join(
        problem + ("" if count == len(checks) else " (on %d of %d nodes)" % (count, len(checks)))
        for problem, count in problems.items())


def not_run_verdict(hosts: Sequence[str], benchmarks: Sequence[str], reason: str) -> Dict[str, Any]:
    """The verdict of a gate that could not run: nothing measured, nobody named, the run goes on."""
    return {"benchmarks": list(benchmarks), "nodes": list(hosts), "alone": {}, "all": {}, "pairs": [], "named": [],
            "findings": [], "undetermined": None, "simulated": False, "rounds": [], "seconds": 0.0,
            "matrix": matrix(hosts, [], benchmarks[0] if benchmarks else ""), "pairs_needed": False,
            "failed": False, "not_run": reason, "msg": reason, "lines": [reason]}
