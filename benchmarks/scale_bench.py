"""Scale benchmark: the same job on N simulated nodes, the cluster watch against the per-node watch.

For each watch mode (``cluster``: node-side supervisors and one task per poll; ``node``: the per-node
``until`` loop of earlier versions), node count and ``forks``, runs playbooks/train.yml and prints:

- the controller's CPU-seconds per second of training (the ansible-playbook process tree, sampled from
  /proc when the watch's first state file appears and when every node is done), and that per node;
- the wall-clock overhead: the playbook's wall time minus the training time;
- the spread of rank start times (each node's ``launch.sh`` process start, from the local /proc: the
  simulated nodes share this machine's PID namespace);
- the controller's peak RSS (the largest process of the tree);
- with ``--events``, the job events of one run under ansible-runner: all of them / the watch task's /
  the watch's polls (its attempts, the most of any host).

Needs a simulated cluster with at least the largest node count (scripts/simcluster up --nodes 16).

    .venv/bin/python benchmarks/scale_bench.py --nodes 2 8 --forks 64 2 --modes node cluster [--events]
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))

from launch_bench import CLK_TCK, CONFIG, boot_clock, cluster_info, launch_starts, node_namespaces  # noqa: E402

PLAYBOOK = str(Path(sys.executable).parent / "ansible-playbook")
STEPS = 40
STEP_SECONDS = "0.5"
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_of(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(pid))
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def tree_cpu_and_rss(root: int) -> tuple[float, int]:
    """CPU seconds of the live tree (with the children each process already waited for) and the largest RSS."""
    cpu, rss = 0.0, 0
    for pid in tree_of(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        cpu += sum(int(f) for f in fields[11:15]) / CLK_TCK
        rss = max(rss, int(fields[21]) * PAGE)
    return cpu, rss


def watch_started(run_dir: Path) -> bool:
    return any(run_dir.glob("watch/*/*.json"))


def watch_done(run_dir: Path, nodes: int) -> bool:
    for progress in run_dir.glob("watch/*/progress.json"):
        try:
            if json.loads(progress.read_text()).get("done"):
                return True
        except ValueError:
            pass
    states = [p for p in run_dir.glob("watch/*/*.json") if p.name not in ("progress.json", "abort.json")]
    if len(states) < nodes:
        return False
    try:
        return all(json.loads(p.read_text()).get("done") for p in states)
    except ValueError:
        return False


def train_argv(inventory: str, hosts: list[str], run_dir: Path, mode: str, forks: int) -> list[str]:
    extra = {"training_run_dir": str(run_dir), "training_hosts": ":".join(hosts), "training_iterations": STEPS,
             "train_watch_mode": mode,
             "training_overrides_extra": {"config": {"container_config": {"env_dict": {
                 "CLUSTERVAL_SIM_STEP_SECONDS": STEP_SECONDS}}}}}
    return [PLAYBOOK, "-i", inventory, "playbooks/train.yml", "-e", f"training_config={CONFIG}",
            "-e", json.dumps(extra), "--forks", str(forks)]


def one_run(info: dict, inventory: str, hosts: list[str], mode: str, forks: int) -> dict:
    run_dir = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"), ANSIBLE_NOCOLOR="1")
    namespaces = node_namespaces(info, hosts)
    since = boot_clock()
    started = time.monotonic()
    proc = subprocess.Popen(train_argv(inventory, hosts, run_dir, mode, forks), cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    first = last = None
    peak = 0
    starts: dict[str, float] = {}
    while proc.poll() is None:
        cpu, rss = tree_cpu_and_rss(proc.pid)
        peak = max(peak, rss)
        if len(starts) < len(hosts):
            starts.update(launch_starts(namespaces, since))
        if first is None and watch_started(run_dir):
            first = (time.monotonic(), cpu)
        if first is not None and last is None and watch_done(run_dir, len(hosts)):
            last = (time.monotonic(), cpu)
        time.sleep(0.2)
    output = proc.stdout.read()
    wall = time.monotonic() - started
    if proc.returncode != 0 or first is None or last is None:
        raise SystemExit(f"{mode} on {len(hosts)} nodes failed (rc {proc.returncode}):\n{output[-3000:]}")
    training_s = last[0] - first[0]
    cpu_per_s = (last[1] - first[1]) / training_s
    spread = max(starts.values()) - min(starts.values()) if len(starts) == len(hosts) else None
    return {"mode": mode, "nodes": len(hosts), "forks": forks, "training_s": round(training_s, 1),
            "cpu_per_s": round(cpu_per_s, 4), "cpu_per_node_s": round(cpu_per_s / len(hosts), 4),
            "overhead_s": round(wall - training_s, 1), "spread_s": None if spread is None else round(spread, 2),
            "peak_rss_mb": round(peak / 2**20, 1)}


def count_events(inventory: str, hosts: list[str], mode: str) -> str:
    """Job events of one run under ansible-runner (as AWX gets them): all of them / the watch task's."""
    import ansible_runner  # only needed here

    run_dir = Path(tempfile.mkdtemp(prefix="scale-bench-runner-"))
    extra = json.loads(next(a for a in train_argv(inventory, hosts, run_dir / "run", mode, 64) if a.startswith("{")))
    extra["training_config"] = CONFIG
    os.environ["ANSIBLE_CONFIG"] = str(REPO / "ansible.cfg")
    runner = ansible_runner.run(private_data_dir=str(run_dir), playbook=str(REPO / "playbooks" / "train.yml"),
                                inventory=str(Path(inventory).resolve()), extravars=extra, quiet=True,
                                project_dir=str(REPO))
    if runner.rc != 0:
        raise SystemExit(f"runner {mode} on {len(hosts)} nodes: rc {runner.rc}")
    events = list(runner.events)
    watch = [e for e in events if "follow the whole cluster" in str((e.get("event_data") or {}).get("task", "")).lower()
             or "follow the training on every node" in str((e.get("event_data") or {}).get("task", "")).lower()]
    watch = [e for e in watch if e.get("event", "").startswith("runner_")]
    polls = max((((e.get("event_data") or {}).get("res") or {}).get("attempts", 1) for e in watch
                 if e["event"] in ("runner_on_ok", "runner_on_failed")), default=0)
    return f"{len(events)}/{len(watch)}/{polls}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--inventory", default=None)
    parser.add_argument("--nodes", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--forks", type=int, nargs="+", default=[64, 4])
    parser.add_argument("--modes", nargs="+", default=["node", "cluster"], choices=["node", "cluster"])
    parser.add_argument("--events", action="store_true", help="also count job events under ansible-runner")
    args = parser.parse_args()
    info = cluster_info()
    inventory = args.inventory or info.get("inventory") or str(REPO / "inventories/simulated/hosts.yml")
    all_hosts = sorted(info["hosts"], key=lambda h: int("".join(c for c in h if c.isdigit()) or 0))
    rows = []
    print("mode     nodes forks  train_s  cpu/s   cpu/node/s  overhead_s  spread_s  peak_rss_MB  events", flush=True)
    for mode in args.modes:
        for forks in args.forks:
            for count in args.nodes:
                row = one_run(info, inventory, all_hosts[:count], mode, forks)
                row["events"] = count_events(inventory, all_hosts[:count], mode) if args.events and forks == args.forks[0] else None
                rows.append(row)
                print("%-8s %5d %5d %8.1f %7.3f %11.4f %11.1f %9s %12.1f %7s" % (
                    mode, count, forks, row["training_s"], row["cpu_per_s"], row["cpu_per_node_s"], row["overhead_s"],
                    row["spread_s"], row["peak_rss_mb"], row["events"]), flush=True)
    for mode in args.modes:
        mine = sorted((r for r in rows if r["mode"] == mode and r["forks"] == args.forks[0]), key=lambda r: r["nodes"])
        if len(mine) >= 2:
            low, high = mine[0], mine[-1]
            slope = (high["cpu_per_s"] - low["cpu_per_s"]) / (high["nodes"] - low["nodes"])
            print(f"{mode}: controller CPU per added node per second of training "
                  f"({low['nodes']} -> {high['nodes']} nodes): {slope:.4f}")
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
