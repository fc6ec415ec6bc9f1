# Copyright: clusterval.training contributors
# Apache License 2.0 (see LICENSE or https://www.apache.org/licenses/LICENSE-2.0)
"""What the collection knows about each training stack, in one place.

A leaf module (no imports of the collection's own), so that node-side code (log parsing, the watch)
reads the same facts as the planner without carrying the planner with it.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

MAXTEXT = "maxtext"
MEGATRON = "megatron"
PRIMUS = "primus"
NXDT = "nxdt"
TORCHTITAN = "torchtitan"
EVERY_RANK = "every"
LAST_RANK = "last"
FIRST_RANK = "first"


class Stack(NamedTuple):
    name: str
    label: str
    steps_key: Optional[str]           # the config key holding the step count
    coordinator_key: Optional[str]     # the config key holding the coordinator's address
    default_warmup: int                # steps skipped before judging
    summary_metrics: Tuple[str, ...]   # steady means reported per node, keyed like result_dict
    printing_rank: str                 # which node of a job prints the step lines
    last_step_offset: int              # final step = total steps + this (MaxText counts from 0)
    log_format: Optional[str] = None   # the parser of its lines (_logs), when not its own name
    sized_log: bool = False            # its parser computes tokens per GPU from seq_length and world_size

    @property
    def parser(self) -> str:
        return self.log_format or self.name

    def final_step(self, total_steps: int) -> int:
        return total_steps + self.last_step_offset

    def prints_steps(self, node_rank: int, nnodes: int) -> bool:
        if self.printing_rank == FIRST_RANK:
            return node_rank == 0
        return self.printing_rank == EVERY_RANK or node_rank == nnodes - 1


STACKS: Dict[str, Stack] = {
    MAXTEXT: Stack(MAXTEXT, "MaxText (JAX)", "training_steps", "coordinator_ip", 3,
                   ("tflops_per_sec_per_gpu", "tokens_per_sec_per_gpu", "seconds"), EVERY_RANK, -1),
    MEGATRON: Stack(MEGATRON, "Megatron-LM", "training_iterations", "master_address", 2,
                    ("throughput_per_gpu", "tokens_per_gpu", "elapsed_time_per_iteration", "mem_usage"),
                    LAST_RANK, 0, sized_log=True),
    # Primus prints Megatron-style lines (instant/average pairs) from the job's last rank
    PRIMUS: Stack(PRIMUS, "Primus", "training_iterations", "master_address", 2,
                  ("throughput_per_gpu", "tokens_per_gpu", "elapsed_time_per_iteration", "mem_usage"),
                  LAST_RANK, 0, MEGATRON, sized_log=True),
    # Neuronx Distributed Training: a tqdm bar printed by global rank 0 (the job's first node); its
    # global_step counts from 0, so the last of max_steps steps is max_steps - 1
    NXDT: Stack(NXDT, "Neuronx Distributed Training", "max_steps", "master_address", 2, ("throughput", "seconds"),
                FIRST_RANK, -1),
    # TorchTitan: every rank prints its metrics line (torchrun --tee 3), steps counted from 1
    TORCHTITAN: Stack(TORCHTITAN, "TorchTitan", "training_iterations", "master_address", 2,
                      ("tokens_per_gpu", "tokens_per_sec", "throughput_per_gpu", "mfu_pct", "mem_gib"), EVERY_RANK, 0),
}
PLANNED = (MAXTEXT, MEGATRON, PRIMUS, NXDT, TORCHTITAN)
# The one list of stack names: what the modules' and actions' choices and the docs read.
NAMES = tuple(STACKS)
# The log formats (_logs' parsers), each named after the stack whose lines it reads.
LOG_FORMATS = tuple(dict.fromkeys(stack.parser for stack in STACKS.values()))


def stack_of(name: Optional[str]) -> Optional[Stack]:
    return STACKS.get(name or "")


def log_format(name: Optional[str]) -> str:
    """The parser (_logs) of a stack's lines; "auto" for an unknown stack."""
    stack = stack_of(name)
    return stack.parser if stack else (name or "auto")


def default_warmup(name: Optional[str]) -> int:
    stack = stack_of(name)
    return stack.default_warmup if stack else 2
