#!/usr/bin/env bash
# Installs what the tests and the demo need on a fresh Debian machine:
# system packages (Docker engine, sshd, iproute2, busybox, sudo for the simulated nodes, Chromium; venv
# support, git, rsync and shellcheck for `ansible-test sanity`) and the
# Python virtual environment in .venv. Idempotent; safe to run every time.
set -euo pipefail
cd "$(dirname "$0")/.."

APT_PACKAGES=(openssh-server openssh-client iproute2 busybox-static sudo debootstrap python3 python3-requests
              python3-venv git iptables procps psmisc rsync shellcheck chromium fonts-dejavu-core)
# Slurm for `scripts/simcluster up --slurm` (Debian's slurm-wlm 22.05 on bookworm): the daemons, the client
# commands, munge, and accounting (slurmdbd on MariaDB, for sacct). Debian does not start them here.
APT_PACKAGES+=(slurmctld slurmd slurm-client slurmdbd munge mariadb-server)

# The Docker engine: Debian's docker.io, unless an engine is installed already (Docker CE's docker-ce
# and docker-ce-cli, or any other dockerd and docker): installing docker.io would replace it.
docker_engine_installed() {
  command -v dockerd >/dev/null 2>&1 && command -v docker >/dev/null 2>&1
}
if docker_engine_installed; then
  if ! dockerd --version >/dev/null 2>&1 || ! docker --version >/dev/null 2>&1; then
    echo "setup: the Docker engine at $(command -v dockerd) does not run ('dockerd --version' or" \
         "'docker --version' fails); repair it: setup leaves an installed engine alone" >&2
    exit 1
  fi
else
  APT_PACKAGES=(docker.io "${APT_PACKAGES[@]}")
fi

missing=()
for pkg in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    echo "setup: need root to install: ${missing[*]}" >&2
    exit 1
  fi
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

PYTHON=${PYTHON:-python3}
if [[ ! -x .venv/bin/python ]]; then
  "$PYTHON" -m venv .venv
fi
stamp=.venv/.requirements.sha
want=$(cat requirements.txt requirements-test.txt | sha256sum | cut -d' ' -f1)
if [[ ! -f $stamp || $(cat "$stamp") != "$want" ]]; then
  .venv/bin/pip install -q --disable-pip-version-check -r requirements-test.txt
  echo "$want" > "$stamp"
fi

# The real-framework node image's root filesystem (Debian 13 by debootstrap, MaxText and JAX from PyPI,
# about 1.4 GB), built once per machine and cached under $CLUSTERVAL_SIMCLUSTER_CACHE
# (/var/cache/clusterval-simcluster by default): the real-framework tests and `make demo` load it.
if [[ $(id -u) -eq 0 && ${CLUSTERVAL_SKIP_REAL_IMAGE:-0} != 1 ]]; then
  scripts/simcluster build-real >/dev/null
fi

# The execution environment of execution-environment.yml (Debian 13 by debootstrap, reusing the .debs above,
# Python 3.13, ansible-core 2.21 and a venv per other supported release, about 270 MB), cached beside it:
# the integration tests run jobs in it with ansible-runner, as AWX does (scripts/ee, docs/awx.md).
if [[ $(id -u) -eq 0 && ${CLUSTERVAL_SKIP_EE_IMAGE:-0} != 1 ]]; then
  .venv/bin/python scripts/ee build >/dev/null
fi
