"""The simulated cluster: nodes, isolation, sharing, rendezvous, teardown."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest


pytestmark = pytest.mark.cluster

SIMCLUSTER = Path(__file__).resolve().parents[2] / "scripts" / "simcluster"

MAXTEXT_YAML = """\
base_config: base.yml
run_name: simcluster-test
steps: 4
hardware: gpu
enable_checkpointing: false
per_device_batch_size: 2
max_target_length: 8192
base_emb_dim: 8192
base_num_query_heads: 64
base_num_kv_heads: 8
base_num_decoder_layers: 80
base_mlp_dim: 28672
head_dim: 128
vocab_size: 128256
mlp_activations: ["silu", "linear"]
ici_fsdp_parallelism: 8
dcn_fsdp_parallelism: -1
dcn_data_parallelism: 1
"""
STEP_LINE = re.compile(r"^completed step: (\d+), seconds: [\d.]+, TFLOP/s/device: [\d.]+, "
                       r"Tokens/s/device: [\d.]+, total_weights: \d+, loss: [\d.]+$", re.M)


def start_maxtext(cluster, node: str, rank: int, nnodes: int, yaml_path: Path, extra_env: dict[str, str]) -> str:
    name = cluster.unique_name("maxtext")
    env = {"JAX_COORDINATOR_IP": cluster.addresses["node1"], "JAX_COORDINATOR_PORT": "12345",
           "NNODES": str(nnodes), "NODE_RANK": str(rank), "CLUSTERVAL_SIM_STEP_SECONDS": "0.05",
           "XLA_FLAGS": "--xla_gpu_enable_cublaslt=true --xla_gpu_graph_level=0", **extra_env}
    env_args = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    cluster.docker(node, "run", "-d", "--name", name, "--network", "host", *cluster.device_args(),
                   "-v", f"{cluster.shared_dir}:{cluster.shared_dir}", *env_args, cluster.image,
                   "python3", "/workspace/maxtext/src/MaxText/train.py", str(yaml_path))
    return name


def finish(cluster, node: str, name: str) -> tuple[int, str]:
    code = int(cluster.docker(node, "wait", name, timeout=180).stdout.strip())
    logs = cluster.docker(node, "logs", name).stdout + cluster.docker(node, "logs", name).stderr
    cluster.docker(node, "rm", "-f", name)
    return code, logs


def test_each_node_has_its_own_address_on_the_bridge(simcluster):
    seen = {}
    for node in simcluster.nodes:
        out = simcluster.run(node, ["ip", "-4", "-o", "addr", "show", "dev", simcluster.ifname]).stdout
        seen[node] = re.search(r"inet (\S+)/", out).group(1)
    assert seen == simcluster.addresses
    assert len(set(seen.values())) == len(simcluster.nodes)
    pinged = simcluster.run("node1", ["docker", "run", "--rm", "--network", "host", simcluster.image,
                                      "ping", "-c", "1", "-W", "2", simcluster.addresses["node2"]])
    assert "1 packets received" in pinged.stdout


def test_ssh_with_the_key_reaches_each_nodes_own_docker(simcluster):
    for node in simcluster.nodes:
        out = simcluster.ssh(node, "docker info -f '{{.DockerRootDir}}'").stdout.strip()
        assert out == simcluster.data_roots[node]


def test_inventory_describes_the_nodes(simcluster):
    text = simcluster.inventory.read_text()
    for node, address in simcluster.addresses.items():
        assert f"{node}:\n          ansible_host: {address}" in text
    assert "training_nodes:" in text
    assert f"UserKnownHostsFile={simcluster.known_hosts}" in text and "StrictHostKeyChecking=yes" in text
    assert f'simcluster_ifname: "{simcluster.ifname}"' in text


def test_ansible_reaches_every_node_through_the_inventory(simcluster):
    ansible = Path(__file__).resolve().parents[2] / ".venv" / "bin" / "ansible"
    if not ansible.exists():
        pytest.skip("the venv has no ansible (scripts/setup.sh)")
    proc = subprocess.run([str(ansible), "-i", str(simcluster.inventory), "training_nodes", "-o",
                           "-m", "ansible.builtin.command", "-a", "cat /proc/sys/kernel/hostname"],
                          capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for node in simcluster.nodes:
        assert re.search(rf"^{node} \| CHANGED", proc.stdout, re.M)


def test_a_container_cannot_see_another_nodes_tmp(simcluster):
    marker = simcluster.unique_name("marker")
    mount = ["-v", "/tmp:/tmp", simcluster.image]
    simcluster.docker("node1", "run", "--rm", *mount, "touch", f"/tmp/{marker}")
    assert simcluster.docker("node1", "run", "--rm", *mount, "ls", f"/tmp/{marker}", check=False).returncode == 0
    other = simcluster.docker("node2", "run", "--rm", *mount, "ls", f"/tmp/{marker}", check=False)
    assert other.returncode != 0
    assert not Path("/tmp", marker).exists()


def test_the_shared_directory_is_shared(simcluster):
    marker = simcluster.unique_name("shared")
    mount = ["-v", f"{simcluster.shared_dir}:/data", simcluster.image]
    simcluster.docker("node1", "run", "--rm", *mount, "sh", "-c", f"echo from-node1 > /data/{marker}")
    seen = simcluster.docker("node3", "run", "--rm", *mount, "cat", f"/data/{marker}").stdout
    assert seen.strip() == "from-node1"


def test_fake_gpu_devices_are_visible_in_containers(simcluster):
    out = simcluster.docker("node2", "run", "--rm", *simcluster.device_args(), simcluster.image,
                            "ls", "/dev/kfd", "/dev/dri/renderD128", "/dev/infiniband/rdma_cm").stdout
    assert "/dev/kfd" in out and "renderD128" in out


def test_the_image_is_labelled_simulated(simcluster):
    for node in simcluster.nodes:
        labels = simcluster.docker(node, "image", "inspect", "-f", "{{json .Config.Labels}}", simcluster.image)
        assert json.loads(labels.stdout)["org.clusterval.simulated"] == "true"


def test_rendezvous_across_nodes_trains_on_both(simcluster):
    yaml_path = simcluster.shared_dir / f"{simcluster.unique_name('maxtext')}.yml"
    yaml_path.write_text(MAXTEXT_YAML)
    names = {node: start_maxtext(simcluster, node, rank, 2, yaml_path, {})
             for rank, node in enumerate(["node1", "node2"])}
    for node, name in names.items():
        code, logs = finish(simcluster, node, name)
        assert code == 0, logs
        assert "[clusterval simulator]" in logs
        assert [int(s) for s in STEP_LINE.findall(logs)] == [0, 1, 2, 3]
        assert "Num_devices: 16" in logs


def test_rendezvous_times_out_when_a_node_is_missing(simcluster):
    yaml_path = simcluster.shared_dir / f"{simcluster.unique_name('maxtext')}.yml"
    yaml_path.write_text(MAXTEXT_YAML)
    name = start_maxtext(simcluster, "node1", 0, 2, yaml_path, {"CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "2"})
    code, logs = finish(simcluster, "node1", name)
    assert code != 0
    assert "DEADLINE_EXCEEDED: Barrier timed out" in logs
    assert "/job:jax_worker/replica:0/task:1" in logs
    assert not STEP_LINE.search(logs)


def test_megatron_rank_fails_when_it_cannot_reach_the_master(simcluster):
    env = {"MODEL_SIZE": "8", "MBS": "2", "BS": "128", "TP": "1", "PP": "1", "SEQ_LENGTH": "8192",
           "TOTAL_ITERS": "3", "TE_FP8": "0", "FSDP": "0", "RECOMPUTE": "0", "MOCK_DATA": "1", "NNODES": "2",
           "NODE_RANK": "1", "MASTER_ADDR": simcluster.addresses["node1"], "MASTER_PORT": "6000",
           "NCCL_SOCKET_IFNAME": simcluster.ifname, "GLOO_SOCKET_IFNAME": simcluster.ifname,
           "NCCL_IB_HCA": "rdma0", "CLUSTERVAL_SIM_RENDEZVOUS_TIMEOUT": "2"}
    env_args = [arg for key, value in env.items() for arg in ("-e", f"{key}={value}")]
    proc = simcluster.docker("node2", "run", "--rm", "--network", "host", *simcluster.device_args(), *env_args,
                             "-w", "/workspace/Megatron-LM", simcluster.image, "bash",
                             "examples/llama/train_llama3.sh", check=False)
    assert proc.returncode != 0
    assert "torch.distributed.DistNetworkError: The client socket has timed out after 2000ms" in proc.stdout


def test_nodes_are_reached_as_a_user_with_passwordless_sudo_and_the_docker_group(simcluster):
    node = simcluster.nodes[0]
    out = simcluster.ssh(node, "id -un; id -Gn; stat -c '%A %U %G' /var/run/docker.sock; "
                               "docker info -f '{{.Name}}'; sudo -n id -un").stdout.splitlines()
    assert out[0] == simcluster.user != "root"
    assert "docker" in out[1].split()
    assert out[2:] == ["srw-rw---- root docker", node, "root"]
    with pytest.raises(KeyError):
        __import__("pwd").getpwnam(simcluster.user)  # the user is the nodes' alone, not the host's


def test_the_kernel_log_refuses_the_user_and_answers_under_sudo(simcluster):
    node = simcluster.nodes[0]
    refused = simcluster.ssh(node, "dmesg", check=False)
    expected = "dmesg: read kernel buffer failed: Operation not permitted"
    assert (refused.returncode, refused.stderr.strip()) == (1, expected)
    assert f"[clusterval simulator] simulated kernel log of {node}" in simcluster.ssh(node, "sudo dmesg").stdout


def test_the_vendors_gpu_tools_are_at_their_real_paths(simcluster, nvidia_nodes):
    amd = simcluster.nodes[0]
    assert simcluster.ssh(amd, "/opt/rocm/bin/amd-smi static --asic | grep -c MARKET_NAME").stdout.strip() == "8"
    products = simcluster.ssh(amd, "/opt/rocm/bin/rocm-smi --showproductname --json").stdout
    assert '"Card Series": "AMD Instinct MI300X"' in products
    assert simcluster.ssh(amd, "/opt/rocm/bin/rocminfo | grep -c 'Device Type: *GPU'").stdout.strip() == "8"
    assert simcluster.ssh(amd, "test -e /usr/bin/nvidia-smi", check=False).returncode == 1
    nvidia = nvidia_nodes[0]
    assert len(simcluster.ssh(nvidia, "/usr/bin/nvidia-smi -L").stdout.splitlines()) == 8
    assert simcluster.ssh(nvidia, "test -e /opt/rocm", check=False).returncode == 1


def test_access_takes_sudo_and_the_docker_group_away(simcluster, access):
    node = simcluster.nodes[-1]
    access(node, "--no-sudo", "--no-docker-group")
    sudo = simcluster.ssh(node, "sudo -n true", check=False)
    assert sudo.returncode == 1 and "a password is required" in sudo.stderr
    docker = simcluster.ssh(node, "docker ps", check=False)
    assert docker.returncode != 0 and "permission denied" in docker.stderr
    assert "docker" not in simcluster.ssh(node, "id -Gn").stdout.split()


def test_up_again_keeps_the_running_cluster(simcluster):
    before = simcluster.data_roots
    pids = [(simcluster.state_dir / "nodes" / n / "dockerd.pid").read_text() for n in simcluster.nodes]
    proc = subprocess.run([str(SIMCLUSTER), "up", "--nodes", str(len(simcluster.nodes))], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0 and "already up" in proc.stderr
    assert proc.stdout.strip() == str(simcluster.inventory)
    assert [(simcluster.state_dir / "nodes" / n / "dockerd.pid").read_text() for n in simcluster.nodes] == pids
    assert simcluster.data_roots == before


# ---------------------------------------------------------------- an isolated cluster for teardown tests
ISOLATED = {"CLUSTERVAL_SIMCLUSTER_PREFIX": "cvtst", "CLUSTERVAL_SIMCLUSTER_SUBNET": "10.213.9.0/24",
            "CLUSTERVAL_SIMCLUSTER_STATE": "/var/lib/clusterval-simcluster-test"}


def leftovers(state: str, prefix: str) -> list[str]:
    found = []
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False).stdout
    found += [f"netns {n}" for n in netns.split() if n.startswith(f"{prefix}-")]
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=False).stdout
    found += [f"link {line.split(':')[1].strip()}" for line in links.splitlines()
              if line.split(":")[1].strip().startswith(prefix)]
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        found += [f"mount {line.split()[4]}" for line in handle if line.split()[4].startswith(state)]
    for proc_dir in Path("/proc").iterdir():
        if proc_dir.name.isdigit():
            try:
                cmdline = (proc_dir / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                stat = (proc_dir / "stat").read_text()
            except OSError:
                continue
            if state in cmdline and stat.split(")")[1].split()[0] != "Z":
                found.append(f"process {proc_dir.name}: {cmdline[:120]}")
    for controller in Path("/sys/fs/cgroup").iterdir():
        if controller.is_dir():
            found += [f"cgroup {c}" for c in controller.glob(f"{prefix}-node*")]
    if Path(state).exists():
        found.append(f"directory {state}")
    return found


@pytest.fixture()
def isolated_env(tmp_path, simcluster_supported):
    env = {**os.environ, **ISOLATED, "CLUSTERVAL_SIMCLUSTER_INVENTORY": str(tmp_path / "hosts.yml")}
    yield env
    subprocess.run([str(SIMCLUSTER), "down"], env=env, capture_output=True, timeout=300, check=False)


def wait_for(predicate, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.1)
    return False


def test_down_leaves_nothing_behind(isolated_env):
    state, prefix = ISOLATED["CLUSTERVAL_SIMCLUSTER_STATE"], ISOLATED["CLUSTERVAL_SIMCLUSTER_PREFIX"]
    up = subprocess.run([str(SIMCLUSTER), "up", "--nodes", "2"], env=isolated_env, capture_output=True, text=True,
                        timeout=600, check=False)
    assert up.returncode == 0, up.stderr
    assert leftovers(state, prefix), "up created nothing"
    for network in ("host", "none"):  # "none": the container has namespaces of its own
        subprocess.run([str(SIMCLUSTER), "exec", "node1", "--", "docker", "run", "-d", "--network", network,
                        "clusterval/simulator:latest", "sleep", "infinity"], env=isolated_env, check=True,
                       capture_output=True, timeout=60)
    down = subprocess.run([str(SIMCLUSTER), "down"], env=isolated_env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert down.returncode == 0, down.stderr
    assert wait_for(lambda: not leftovers(state, prefix), 10), leftovers(state, prefix)
    assert not Path(isolated_env["CLUSTERVAL_SIMCLUSTER_INVENTORY"]).exists()


def test_down_cleans_up_after_an_interrupted_up(isolated_env):
    state, prefix = ISOLATED["CLUSTERVAL_SIMCLUSTER_STATE"], ISOLATED["CLUSTERVAL_SIMCLUSTER_PREFIX"]
    up = subprocess.Popen([str(SIMCLUSTER), "up", "--nodes", "2"], env=isolated_env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    assert wait_for(lambda: Path(state, "nodes", "node1", "sshd.pid").exists() or up.poll() is not None, 60)
    up.send_signal(signal.SIGKILL)
    up.wait()
    assert leftovers(state, prefix)
    down = subprocess.run([str(SIMCLUSTER), "down"], env=isolated_env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert down.returncode == 0, down.stderr
    assert wait_for(lambda: not leftovers(state, prefix), 10), leftovers(state, prefix)


def test_up_refuses_a_subnet_that_is_in_use(isolated_env):
    env = {**isolated_env, "CLUSTERVAL_SIMCLUSTER_SUBNET": "127.0.0.0/24"}
    proc = subprocess.run([str(SIMCLUSTER), "up", "--nodes", "1"], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 1
    assert "clashes with 127.0.0.1/8 on lo" in proc.stderr


def test_refuses_clearly_when_not_root(simcluster_supported, tmp_path):
    env = {"PATH": os.environ["PATH"], "CLUSTERVAL_SIMCLUSTER_STATE": str(tmp_path / "state")}
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(SIMCLUSTER), "up",
                           "--nodes", "1"], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "must run as root" in proc.stderr
    assert not (tmp_path / "state").exists()
