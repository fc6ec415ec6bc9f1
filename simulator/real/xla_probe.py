"""Asks a real jaxlib which XLA flags it knows: one JAX start per flag, XLA_FLAGS holding that flag alone.

    python3 xla_probe.py < flags.json      # [["xla_gpu_graph_level", "0"], ...]

Prints one JSON object: {"jaxlib": "<version>", "flags": {name: {"known": bool, "line": "..."}}}.
"known" is false only where XLA printed "Unknown flag" (a flag its build does not register); a known
flag with a value XLA refuses is known, and the line says what XLA said.  Run by the real-framework
tests inside the real-framework node image (tests/integration/test_real_xla.py), and by hand to
measure another jaxlib (docs/simcluster.md).
"""
from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys

CHILD = "import jax; jax.devices()"


def probe(name: str, value: str) -> dict:
    env = dict(os.environ, XLA_FLAGS="--%s=%s" % (name, value), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    lines = [line for line in proc.stderr.splitlines() if line and not line.startswith("\t")]
    unknown = next((line for line in lines if "Unknown flag" in line), "")
    refused = next((line for line in lines if "Illegal value" in line or "Flag parsing failed" in line), "")
    return {"known": not unknown, "accepted": proc.returncode == 0, "line": unknown or refused}


def main() -> int:
    flags = json.load(sys.stdin)
    import jaxlib  # pylint: disable=import-outside-toplevel
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        futures = {name: pool.submit(probe, name, value) for name, value in flags}
        results = {name: future.result() for name, future in futures.items()}
    print(json.dumps({"jaxlib": jaxlib.__version__, "flags": results}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
