# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the planner knows about a run while it plans it (Host, PlanOptions, Job, Context): a leaf below the
stacks (``_stack_*``) and the launcher, so that they take the planner's context without importing the planner.
"""
from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from ansible_collections.clusterval.training.plugins.module_utils import _arch, _gpus
from ansible_collections.clusterval.training.plugins.module_utils._config import Selection
from ansible_collections.clusterval.training.plugins.module_utils._versioned import Versioned

# Lowercase config keys that stand for the upper-case environment variable of the same name.
ENV_LIKE_KEY = re.compile(
    r"^(?:nccl_|rccl_|nvte_|hsa_|hip_|torch_|pytorch_|omp_|fi_|ucx_|miopen_|hipblaslt_|tensile_|"
    r"gloo_socket_ifname$|gpu_max_hw_queues$|xla_python_client_mem_fraction$|cuda_device_max_connections$)"
)


@dataclass(frozen=True)
class Host:
    name: str
    address: str
    # the inventory's training_gpu_vendor for the host (amd or nvidia); None: the config's or the image's
    gpu_vendor: Optional[str] = None


@dataclass
class PlanOptions:
    config_path: str = ""
    model: Optional[str] = None
    gpu_arch: Optional[str] = None
    mode: Optional[str] = None
    framework: Optional[str] = None
    overrides: Optional[Dict[str, Any]] = None
    iterations: Optional[int] = None
    run_id: Optional[str] = None
    remote_user: str = "root"
    warmup_steps: Optional[int] = None
    # None: the config's training.gpus_per_node (versioned format), else DEFAULT_GPUS_PER_NODE.
    gpus_per_node: Optional[int] = None
    # The versioned format's sweep to run; None: the first enabled one.
    sweep: Optional[str] = None
    now: Optional[datetime.datetime] = None
    # The controller hands the HF token to every node (AWX credential): hf_token_file is the run's copy.
    hf_token_handed: bool = False
    # The image to run (training_container_image, an inventory value): wins over config.container_image(s).
    container_image: Optional[str] = None
    # What the nodes' GPU tools said (host -> the training_gpus module's result), when the plan had to ask
    # them: training_gpu_arch not given and the config offers several archs, or training_gpu_arch=auto.
    gpus_found: Optional[Dict[str, Any]] = None


@dataclass
class Job:
    name: str
    hosts: List[Host]
    coordinator_address: str
    coordinator_port: int

    @property
    def nnodes(self) -> int:
        return len(self.hosts)


@dataclass
class Context:
    """What is known about the run once the config is merged, resolved and checked."""
    framework: str
    selection: Selection
    config: Dict[str, Any]
    params: Dict[str, Any]
    options: PlanOptions
    total_steps: int
    run_id: str
    run_dir: str
    warnings: List[str] = field(default_factory=list)
    versioned: Optional[Versioned] = None
    xla_checked: Optional[Dict[str, Any]] = None
    gpu_vendor: str = _gpus.AMD
    gpu_vendor_source: str = "the default"
    gpu_arch_source: str = "the config's only arch entry"
    gpu_arch_detected: Optional[_arch.Detected] = None
