#!/usr/bin/env bash
# Runs `ansible-test sanity` on the collection, as the Ansible collections that
# publish to Galaxy do, without reaching ci-files.testing.ansible.com.
#
#   scripts/sanity.sh [extra ansible-test sanity arguments, e.g. --test pylint]
#   CLUSTERVAL_SANITY_VENV=/path/to/venv scripts/sanity.sh   # with that venv's ansible-core
#
# The venv defaults to the project's .venv; another one tests another ansible-core version
# (meta/runtime.yml admits several; tests/sanity/ignore-<version>.txt holds each one's ignores).
# - ansible-test must run inside .../ansible_collections/clusterval/training
#   (a real path), so the working tree (tracked files plus untracked files that
#   .gitignore does not exclude, without the .collections symlink) is copied
#   into a temporary directory of that shape and tested there; the copy has no
#   .git, so ansible-test tests every file in it.
# - --venv: each sanity test gets its own virtual environment under
#   ~/.ansible/test/venv, with the versions ansible-test pins, installed from
#   the machine's pip index and reused on later runs. (--docker cannot work
#   here; --local would test with whatever the project's .venv happens to hold.)
# - ansible-test bootstraps pip in those environments with a get-pip.py it
#   downloads from ci-files.testing.ansible.com unless the file is already in
#   its cache. We put a small stand-in there: ensurepip, then `pip install` of
#   the pinned pip, downloaded once with the machine's pip configuration and
#   kept beside the stand-in. Once the environments exist (first run), a run
#   needs no network.
# No sanity test is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
venv=${CLUSTERVAL_SANITY_VENV:-$root/.venv}
python=$venv/bin/python
ansible_test=$venv/bin/ansible-test

if [[ ! -x $ansible_test ]]; then
  echo "sanity: $ansible_test is missing; run 'make setup' first" >&2
  exit 1
fi
python_version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')

# The pip version ansible-test bootstraps, hence the name of its cached script.
pip_version=$("$python" -c '
import sys, types
from ansible_test._internal.python_requirements import get_venv_packages
print(get_venv_packages(types.SimpleNamespace(version=sys.argv[1]))["pip"])' "$python_version")
get_pip=$HOME/.ansible/test/cache/get_pip_${pip_version//./_}.py
marker="# Stand-in for get-pip.py, written by clusterval.training scripts/sanity.sh."
standin="$marker
# ansible-test runs it as \`python $(basename "$get_pip") [pip options] pip==$pip_version --no-setuptools --no-wheel\`
# in a virtual environment created without pip.
import os
import subprocess
import sys

# ensurepip installs the pip wheel bundled with Python. It drops the PIP_* variables and sets
# PIP_CONFIG_FILE=/dev/null in its process, so it runs in a child and the pip commands below
# see the machine's pip configuration (index, mirror, certificates).
subprocess.check_call([sys.executable, '-m', 'ensurepip', '--upgrade'], stdout=subprocess.DEVNULL)
args = [arg for arg in sys.argv[1:] if arg not in ('--no-setuptools', '--no-wheel')]
# The pinned pip is downloaded once, next to this file; later bootstraps install it without the network.
wheels = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'wheels')
install = [sys.executable, '-m', 'pip', 'install', '--no-index', '--find-links', wheels] + args
if subprocess.call(install, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) != 0:
    subprocess.check_call([sys.executable, '-m', 'pip', 'download', '--no-deps', '--dest', wheels] + args)
    subprocess.check_call(install)"
# A real get-pip.py put there by hand is left alone; an older stand-in is replaced.
if [[ ! -f $get_pip ]] || { [[ $(head -n 1 "$get_pip") == "$marker" ]] && [[ $(cat "$get_pip") != "$standin" ]]; }; then
  mkdir -p "$(dirname "$get_pip")"
  printf '%s\n' "$standin" > "$get_pip.tmp"
  mv "$get_pip.tmp" "$get_pip"
  echo "sanity: wrote the pip bootstrap stand-in $get_pip"
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
dest=$work/ansible_collections/clusterval/training
mkdir -p "$dest"
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z --cached --others --exclude-standard |
    while IFS= read -r -d '' path; do
      # skip tracked files deleted in the working tree, and the symlink to the root
      if [[ $path != .collections/* ]] && [[ -e $path || -L $path ]]; then
        printf '%s\0' "$path"
      fi
    done |
    rsync -a --from0 --files-from=- "$root/" "$dest/"
else  # not a git checkout: the same selection by rsync's reading of .gitignore
  rsync -a --exclude=/.git --exclude=/.collections --exclude=/tests/output --filter=':- .gitignore' "$root/" "$dest/"
fi

cd "$dest"
export PATH=$venv/bin:$PATH
unset ANSIBLE_CONFIG ANSIBLE_COLLECTIONS_PATH ANSIBLE_COLLECTIONS_PATHS
"$ansible_test" sanity --venv --python "$python_version" "$@"
