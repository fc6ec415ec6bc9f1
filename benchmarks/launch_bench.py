"""Launch benchmark: time from `ansible-playbook` start until every node's training process runs,
against a baseline that starts the same containers with plain parallel ssh + docker run.

Training processes are found in the local /proc, no ssh: the simulated nodes share this machine's PID namespace,
so a node's `sh .../launch.sh` is the process in that node's network namespace, and its start time (boot clock,
/proc/<pid>/stat) gives the figure, whatever the poll interval.

Also times the floor of any playbook: one task on every node that starts the same container (with
ansible.builtin.command and with community.docker.docker_container). Every Ansible run starts on cold ssh
connections, as the baseline does.

Needs a simulated cluster (scripts/simcluster up --nodes 4). Prints the figures and ratios, and how long
after the last node's last log line the verdict (results.json) was written.

    .venv/bin/python benchmarks/launch_bench.py [--inventory inventories/simulated/hosts.yml] [--nodes 4]
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / ".collections"))

from ansible_collections.clusterval.training.plugins.module_utils._plan_form import node_view  # noqa: E402
CONFIG = "configs/jax/mi300x_distributed_llama3_1_70b.json"
SIMCLUSTER = REPO / "scripts" / "simcluster"
CLK_TCK = os.sysconf("SC_CLK_TCK")
POLL_S = 0.1


def cluster_info() -> dict:
    status = subprocess.run([str(SIMCLUSTER), "status", "--json"], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        raise SystemExit("no simulated cluster is up: scripts/simcluster up --nodes 4")
    return json.loads(status.stdout)


def ssh_argv(info: dict, address: str, command: str) -> list[str]:
    return ["ssh", "-i", info["ssh_key"], "-o", "IdentitiesOnly=yes", "-o", "BatchMode=yes",
            "-o", f"UserKnownHostsFile={info['known_hosts']}", f"root@{address}", command]


def boot_clock() -> float:
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def is_launch_script(pid: str) -> bool:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:-1]
    except OSError:
        return False
    return len(argv) == 2 and argv[0] == b"sh" and argv[1].endswith(b"/launch.sh")


def start_and_netns(pid: str) -> tuple[float, str] | None:
    """Start time on the boot clock (starttime, field 22 of /proc/<pid>/stat) and the network namespace."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return int(fields[19]) / CLK_TCK, os.readlink(f"/proc/{pid}/ns/net")
    except (OSError, IndexError):
        return None


def node_namespaces(info: dict, hosts: list[str]) -> dict[str, str]:
    return {f"net:[{os.stat(Path('/run/netns', info['hosts'][host]['netns'])).st_ino}]": host for host in hosts}


def launch_starts(namespaces: dict[str, str], since: float) -> dict[str, float]:
    starts: dict[str, float] = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        found = start_and_netns(pid) if is_launch_script(pid) else None
        if found and found[0] >= since - 1 / CLK_TCK and found[1] in namespaces:
            host = namespaces[found[1]]
            starts[host] = min(found[0], starts.get(host, found[0]))
    return starts


def wait_all_running(info: dict, hosts: list[str], started: float, launcher: subprocess.Popen | None = None,
                     timeout_s: float = 300) -> float:
    """Seconds from `started` (boot clock) until the last node's launch script process started."""
    namespaces = node_namespaces(info, hosts)
    starts: dict[str, float] = {}
    while len(starts) < len(hosts):
        missing = sorted(set(hosts) - set(starts))
        if launcher and launcher.poll() is not None:
            raise SystemExit(f"{Path(launcher.args[0]).name} exited ({launcher.returncode}), "
                             f"training never started on {missing}")
        if boot_clock() - started > timeout_s:
            raise SystemExit(f"training never started on {missing}")
        time.sleep(POLL_S)
        starts = {**launch_starts(namespaces, started), **starts}
    return max(starts.values()) - started


def remove_containers(info: dict, addresses: list[str]) -> None:
    command = "docker ps -aq --filter label=clusterval.run_id | xargs -r docker rm -f"
    with ThreadPoolExecutor(len(addresses)) as pool:
        list(pool.map(lambda a: subprocess.run(ssh_argv(info, a, command), capture_output=True, check=False),
                      addresses))


def playbook_launch(info: dict, inventory: str, hosts: list[str], run_dir: str) -> tuple[float, dict, float]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, "playbooks/train.yml",
            "-e", f"training_config={CONFIG}", "-e", json.dumps({"training_hosts": ":".join(hosts),
                                                                "training_run_dir": run_dir})]
    log = Path(run_dir).with_name("ansible-playbook.log")
    close_control_masters()
    with log.open("w") as out:
        started = boot_clock()
        proc = subprocess.Popen(argv, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        elapsed = wait_all_running(info, hosts, started, proc)
        if proc.wait(timeout=600):
            raise SystemExit(f"ansible-playbook failed ({proc.returncode})")
    except SystemExit:
        print(*log.read_text().splitlines()[-30:], sep="\n", file=sys.stderr)
        raise
    plan = json.loads((Path(run_dir) / "plan.json").read_text())
    return elapsed, plan, verdict_delay(info, plan, Path(run_dir))


def verdict_delay(info: dict, plan: dict, run_dir: Path) -> float:
    """Seconds from the last line any node wrote to its training log until results.json was written."""
    def log_mtime(host: str) -> float:
        node = node_view(plan, host)
        out = subprocess.run(ssh_argv(info, node["address"], "stat -c %.9Y " + shlex.quote(node["log_path"])),
                             capture_output=True, text=True, check=True).stdout
        return float(out.strip())

    with ThreadPoolExecutor(len(plan["nodes"])) as pool:
        last_line = max(pool.map(log_mtime, plan["nodes"]))
    return (run_dir / "results.json").stat().st_mtime - last_line


def docker_run_argv(node: dict, name_suffix: str) -> list[str]:
    spec = node["container"]
    args = ["docker", "run", "-d", "--name", spec["name"] + name_suffix, "--network", "host", "--ipc", "host",
            "--label", f"clusterval.run_id={name_suffix.strip('-')}"]
    for device in spec["devices"]:
        args += ["--device", device]
    for volume in spec["volumes"]:
        args += ["-v", volume]
    for key, value in spec["env"].items():
        args += ["-e", f"{key}={value}"]
    return args + [spec["image"], *spec["command"]]


def baseline_launch(info: dict, plan: dict) -> float:
    """The same containers and launch script, started with ssh + docker run in parallel."""
    def start(host: str) -> None:
        node = node_view(plan, host)
        subprocess.run(ssh_argv(info, node["address"], shlex.join(docker_run_argv(node, "-baseline"))),
                       capture_output=True, check=True)

    started = boot_clock()
    with ThreadPoolExecutor(len(plan["nodes"])) as pool:
        list(pool.map(start, plan["nodes"]))
    return wait_all_running(info, list(plan["nodes"]), started)


FLOOR_TASKS = {
    "ansible.builtin.command": {"argv": "{{ floor[inventory_hostname].argv }}"},
    "community.docker.docker_container": {
        "name": "{{ floor[inventory_hostname].spec.name }}-floor",
        "image": "{{ floor[inventory_hostname].spec.image }}",
        "command": "{{ floor[inventory_hostname].spec.command }}",
        "devices": "{{ floor[inventory_hostname].spec.devices }}",
        "volumes": "{{ floor[inventory_hostname].spec.volumes }}",
        "env": "{{ floor[inventory_hostname].spec.env }}",
        "labels": {"clusterval.run_id": "floor"},
        "network_mode": "host", "ipc_mode": "host", "state": "started"},
}


def floor_launch(info: dict, inventory: str, plan: dict, module: str, tmp: str) -> float:
    """The least an ansible-playbook can do: one task on every node that starts the same container."""
    hosts = list(plan["nodes"])
    nodes = {host: node_view(plan, host) for host in hosts}
    floor = {host: {"argv": docker_run_argv(node, "-floor"), "spec": node["container"]} for host, node in nodes.items()}
    playbook = Path(tmp, "floor.yml")
    playbook.write_text(json.dumps([{"hosts": ":".join(hosts), "gather_facts": False,
                                     "tasks": [{"name": "Start the container", module: FLOOR_TASKS[module]}]}]))
    Path(tmp, "floor.json").write_text(json.dumps({"floor": floor}))
    argv = [str(Path(sys.executable).parent / "ansible-playbook"), "-i", inventory, str(playbook),
            "-e", "@" + str(Path(tmp, "floor.json"))]
    close_control_masters()
    started = boot_clock()
    proc = subprocess.Popen(argv, cwd=REPO, env=dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg")),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    elapsed = wait_all_running(info, hosts, started, proc)
    proc.wait(timeout=600)
    return elapsed


def close_control_masters() -> None:
    """Every Ansible run starts with cold ssh connections, as the baseline's do."""
    for socket_path in Path.home().joinpath(".ansible", "cp").glob("*"):
        subprocess.run(["ssh", "-o", f"ControlPath={socket_path}", "-O", "exit", "placeholder"],
                       capture_output=True, check=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inventory", default=str(REPO / "inventories" / "simulated" / "hosts.yml"))
    parser.add_argument("--nodes", type=int, default=4)
    options = parser.parse_args()
    info = cluster_info()
    hosts = sorted(info["hosts"], key=lambda name: int(name[4:]))[: options.nodes]
    addresses = [info["hosts"][h]["address"] for h in hosts]
    with tempfile.TemporaryDirectory() as tmp:
        playbook_s, plan, verdict_s = playbook_launch(info, options.inventory, hosts, os.path.join(tmp, "run"))
        remove_containers(info, addresses)
        baseline_s = baseline_launch(info, plan)
        remove_containers(info, addresses)
        floors = {}
        for module in FLOOR_TASKS:
            floors[module] = floor_launch(info, options.inventory, plan, module, tmp)
            remove_containers(info, addresses)
    print(f"nodes: {len(hosts)}")
    print(f"ansible-playbook start -> all training processes running: {playbook_s:.1f} s")
    print(f"baseline parallel ssh + docker run -> all running:        {baseline_s:.1f} s")
    print(f"ratio: {playbook_s / baseline_s:.2f}x (target <= 1.5x)")
    for module, seconds in floors.items():
        print(f"floor: a one-task playbook with {module}: {seconds:.1f} s ({seconds / baseline_s:.2f}x)")
    print(f"verdict written {verdict_s:.1f} s after the last node's last log line "
          f"(target: poll interval + 5 s)")


if __name__ == "__main__":
    main()
