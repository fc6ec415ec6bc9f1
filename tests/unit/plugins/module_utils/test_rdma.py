"""RDMA inside the container: the launch script's lines, run by a real sh against a fake ibv_devinfo."""
import os
import subprocess

import pytest

from ansible_collections.clusterval.training.plugins.module_utils import _rdma
from ansible_collections.clusterval.training.plugins.module_utils._errors import ConfigError

SEED_MOUNT = "/usr/local/lib/libbnxt_re-rdmav34.so:/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host"


def run_prelude(tmp_path, lines, listed):
    """Runs the lines with an ibv_devinfo that lists `listed` (None: the tool is missing)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    if listed is not None:
        tool = bin_dir / "ibv_devinfo"
        tool.write_text("#!/bin/sh\necho '%d HCAs found:'\n%s\n" % (
            len(listed), "\n".join("printf '\\t%s\\n'" % hca for hca in listed)))
        tool.chmod(0o755)
    script = "finish() { echo \"finish $1\"; exit \"$1\"; }\n" + "\n".join(lines) + "\necho framework starts\n"
    env = dict(os.environ, PATH="%s:/usr/bin:/bin" % bin_dir)
    return subprocess.run(["sh", "-c", script], capture_output=True, text=True, env=env, check=False)


@pytest.mark.parametrize("value, expected", [
    ("bnxt_re0,bnxt_re1", ["bnxt_re0", "bnxt_re1"]), ("=mlx5_0:1,mlx5_1:1", ["mlx5_0", "mlx5_1"]),
    ("^mlx5_3", []), ("", []),
])
def test_hca_names_read_nccls_syntax(value, expected):
    assert _rdma.hca_names(value) == expected


def test_every_hca_listed_lets_the_framework_start(tmp_path):
    proc = run_prelude(tmp_path, _rdma.prelude_lines([], ["bnxt_re0", "bnxt_re1"]), ["bnxt_re0", "bnxt_re1", "x"])
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["[clusterval] RDMA: ibv_devinfo in the container lists bnxt_re0 bnxt_re1",
                                        "framework starts"]


def test_a_missing_hca_ends_the_run_naming_it_before_the_framework(tmp_path):
    proc = run_prelude(tmp_path, _rdma.prelude_lines([], ["bnxt_re0", "bnxt_re1"]), ["bnxt_re0"])
    assert proc.returncode == 1 and "framework starts" not in proc.stdout
    assert ("[clusterval] RDMA failure: ibv_devinfo in the container does not list HCA bnxt_re1 of NCCL_IB_HCA "
            "(it found: 1 HCAs found: bnxt_re0)") in proc.stdout


def test_no_ibv_devinfo_in_the_image_ends_the_run(tmp_path):
    proc = run_prelude(tmp_path, _rdma.prelude_lines([], ["mlx5_0"]), None)
    assert proc.returncode == 1
    assert "[clusterval] RDMA failure: ibv_devinfo -l failed in the container" in proc.stdout


def test_the_mounted_provider_library_is_copied_into_place(tmp_path):
    mounted, dest = tmp_path / "libbnxt_re-rdmav34.so.host", tmp_path / "libbnxt_re-rdmav34.so"
    mounted.write_text("provider")
    proc = run_prelude(tmp_path, _rdma.prelude_lines([(str(mounted), str(dest))], []), [])
    assert proc.returncode == 0 and dest.read_text() == "provider"
    proc = run_prelude(tmp_path, _rdma.prelude_lines([(str(tmp_path / "none.so.host"), str(dest))], []), [])
    assert proc.returncode == 1 and "[clusterval] RDMA failure: cannot put the provider library" in proc.stdout


def test_the_seed_configs_mount_is_the_library_to_copy():
    assert _rdma.mounted_copies([SEED_MOUNT, "/dev/infiniband:/dev/infiniband"]) == [
        ("/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so.host",
         "/usr/lib/x86_64-linux-gnu/libibverbs/libbnxt_re-rdmav34.so")]


def test_a_single_node_job_or_one_without_ib_checks_no_hca():
    env = {"NCCL_IB_HCA": "bnxt_re0"}
    assert _rdma.rdma_setup({}, [], env, multi_node=False)["prelude"] == []
    assert _rdma.rdma_setup({}, [], dict(env, NCCL_IB_DISABLE="1"), multi_node=True)["prelude"] == []
    assert _rdma.rdma_setup({}, [], env, multi_node=True)["prelude"]


def test_nic_type_selects_the_provider_whose_hcas_are_expected():
    setup = _rdma.rdma_setup({"nic_type": "thor2"}, [], {"NCCL_IB_HCA": "mlx5_0,bnxt_re1,rocep28s0"}, True)
    assert setup["warnings"] == ["config.nic_type thor2 has bnxt_re HCAs, but NCCL_IB_HCA names mlx5_0"]
    assert _rdma.provider_of("Pollara") == "ionic" and _rdma.provider_of("unknown") is None


def test_a_bad_rdma_lib_names_its_path():
    with pytest.raises(ConfigError, match=r"config\.rdma_lib\.container_dest_file.*absolute path"):
        _rdma.rdma_lib_copy({"host_source_file": "/a.so", "container_mount_file": "/b.so.host",
                             "container_dest_file": "b.so"})


def test_the_output_goes_to_the_training_log_where_the_verdict_reads_it(tmp_path):
    log = tmp_path / "training.log"
    proc = run_prelude(tmp_path, _rdma.prelude_lines([], ["bnxt_re1"], str(log)), ["bnxt_re0"])
    assert proc.returncode == 1 and proc.stdout == ""
    assert log.read_text().startswith("[clusterval] RDMA failure: ibv_devinfo in the container does not list HCA")
