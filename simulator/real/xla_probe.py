"""Asks a real jaxlib (and libtpu) which XLA flags it knows: one JAX start per flag and variable.

    python3 xla_probe.py < flags.json            # [["xla_gpu_graph_level", "0"], ...]
    python3 xla_probe.py --tpu < flags.json      # with libtpu installed (jax[tpu])

Prints one JSON object: {"jaxlib": "<version>", "flags": {name: {"known": bool, "line": "..."}}}.
"known" is false only where XLA printed "Unknown flag" (a flag its build does not register); a known
flag with a value XLA refuses is known, and the line says what XLA said.  Run by the real-framework
tests inside the real-framework node image (tests/integration/test_real_xla.py), and by hand to
measure another jaxlib (docs/simcluster.md).

With --tpu, JAX starts the TPU way on a host without a TPU (TPU_SKIP_MDS_QUERY=1 and a v5p-8 worker of
one host): libtpu parses LIBTPU_INIT_ARGS, fails its topology, and JAX falls back to CPU (the child waits
SETTLE_SECONDS for libtpu's verdict).  Each flag is
asked twice, alone in LIBTPU_INIT_ARGS and alone in XLA_FLAGS, and the object is {"jaxlib": ...,
"libtpu": "<version>", "flags": {name: {"LIBTPU_INIT_ARGS": {...}, "XLA_FLAGS": {...}}}}, each answer
{"accepted": bool, "line": "..."} (the line libtpu or XLA refused it with).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys

CHILD = "import jax; jax.devices()"
# libtpu parses LIBTPU_INIT_ARGS in a thread of its own and exits 1 from there: a process that ends as soon as
# JAX has fallen back to CPU often exits 0 first (measured, libtpu 0.0.50.1 and 0.0.52).  The TPU child
# waits for it.
SETTLE_SECONDS = 10
CHILD_TPU = "import jax, time; jax.devices(); time.sleep(%d)" % SETTLE_SECONDS
# A TPU VM's discovery, answered without its metadata server (REFERENCE.md section 7). libtpu lets one
# process per host load it (/tmp/libtpu_lockfile): another one finds the TPU in use, never parses its
# LIBTPU_INIT_ARGS and JAX starts on CPU, exit 0; the probes run side by side, so they say so.
TPU_HOST = {"TPU_SKIP_MDS_QUERY": "1", "TPU_ACCELERATOR_TYPE": "v5p-8", "TPU_WORKER_HOSTNAMES": "localhost",
            "TPU_WORKER_ID": "0", "JAX_PLATFORMS": "", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}
REFUSALS = ("Unknown flag", "Unknown command line flag", "Illegal value", "Flag parsing failed")


def start(env: dict, child: str = CHILD) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def error_lines(proc: subprocess.CompletedProcess) -> list:
    return [line for line in proc.stderr.splitlines() if line and not line.startswith("\t")]


def probe(name: str, value: str) -> dict:
    proc = start(dict(os.environ, XLA_FLAGS="--%s=%s" % (name, value), JAX_PLATFORMS="cpu"))
    lines = error_lines(proc)
    unknown = next((line for line in lines if "Unknown flag" in line), "")
    refused = next((line for line in lines if "Illegal value" in line or "Flag parsing failed" in line), "")
    return {"known": not unknown, "accepted": proc.returncode == 0, "line": unknown or refused}


def probe_tpu(name: str, value: str) -> dict:
    answers = {}
    for variable in ("LIBTPU_INIT_ARGS", "XLA_FLAGS"):
        proc = start(dict(os.environ, **TPU_HOST, **{variable: "--%s=%s" % (name, value)}), CHILD_TPU)
        refusal = next((line for line in error_lines(proc) if any(word in line for word in REFUSALS)), "")
        answers[variable] = {"accepted": proc.returncode == 0, "value": value, "line": refusal}
    return answers


def main() -> int:
    tpu = "--tpu" in sys.argv[1:]
    flags = json.load(sys.stdin)
    import jaxlib  # pylint: disable=import-outside-toplevel
    answer = {"jaxlib": jaxlib.__version__}
    if tpu:
        from importlib.metadata import version  # pylint: disable=import-outside-toplevel
        answer["libtpu"] = version("libtpu")
    with concurrent.futures.ThreadPoolExecutor(max_workers=4 if tpu else 2) as pool:
        futures = {name: pool.submit(probe_tpu if tpu else probe, name, value) for name, value in flags}
        answer["flags"] = {name: future.result() for name, future in futures.items()}
    print(json.dumps(answer, sort_keys=True, indent=4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
