#!/usr/bin/env bash
# Builds the simulator image clusterval/simulator:latest FROM scratch, from
# files of this machine's Debian packages: busybox-static (shell tools, sleep),
# bash (Megatron's scripts run with bash) and python3.11 with its standard
# library (the stand-ins are Python), plus the stand-ins at the paths the real
# images use.  No registry is needed.
#
#   simulator/build.sh [--context-only DIR] [--save FILE]
#
# Uses the `docker` of the environment (DOCKER_HOST or the default socket).
# --context-only DIR writes the build context and stops; --save FILE also
# writes the image as a `docker save` archive.
set -euo pipefail

IMAGE=clusterval/simulator:latest
HERE=$(cd "$(dirname "$0")" && pwd)
PYVER=3.11
PY_PACKAGES=("libpython${PYVER}-minimal" "libpython${PYVER}-stdlib" "python${PYVER}-minimal")
APT_PACKAGES=(busybox-static bash "${PY_PACKAGES[@]}")
# Parts of the standard library the stand-ins never use; they only make the image bigger.
# Extension modules that would drag in big libraries (OpenSSL, SQLite, ncurses...) are skipped too.
STDLIB_SKIP='/(test|tests|idlelib|tkinter|turtledemo|lib2to3|pydoc_data|distutils|ensurepip|config-[^/]*)(/|$)'
STDLIB_SKIP+='|/lib-dynload/(_test|xx|_ctypes|_ssl|_hashlib|_sqlite3|_dbm|_gdbm|nis|_curses|readline|_crypt|_uuid|_lzma|_bz2|_decimal|audioop|ossaudiodev)'

context=""
save=""
while (($#)); do
  case $1 in
    --context-only) context=$2; shift 2 ;;
    --save) save=$2; shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done

ensure_packages() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "ok installed" || missing+=("$pkg")
  done
  if ((${#missing[@]})); then
    echo "build.sh: installing ${missing[*]}" >&2
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
}

# copy_with_libs FILE...: the files and every shared library they link, at the same paths.
copy_with_libs() {
  local file lib
  for file in "$@"; do
    install -D -m 0755 "$file" "$ROOT$file"
    for lib in $(ldd "$file" | grep -oE '/[^ ]+' | sort -u); do
      [[ -e $ROOT$lib ]] || install -D -m 0755 "$(readlink -f "$lib")" "$ROOT$lib"
    done
  done
}

copy_python() {
  local path
  copy_with_libs /usr/bin/python${PYVER}
  ln -sf python${PYVER} "$ROOT/usr/bin/python3"
  ln -sf python3 "$ROOT/usr/bin/python"
  dpkg -L "${PY_PACKAGES[@]}" | grep "^/usr/lib/python${PYVER}/" | grep -vE "$STDLIB_SKIP|__pycache__" |
    while read -r path; do
      if [[ -f $path && ! -L $path ]]; then install -D -m 0644 "$path" "$ROOT$path"; fi
    done
  for path in "$ROOT/usr/lib/python${PYVER}/lib-dynload/"*.so; do
    copy_with_libs "${path#"$ROOT"}"
  done
}

copy_busybox() {
  local applet
  install -D -m 0755 /bin/busybox "$ROOT/bin/busybox"
  for applet in $(/bin/busybox --list); do
    [[ -e $ROOT/bin/$applet ]] || ln -s busybox "$ROOT/bin/$applet"
  done
}

install_standins() {
  local opt=$ROOT/opt/clusterval maxtext=$ROOT/workspace/maxtext/src/MaxText llama=$ROOT/workspace/Megatron-LM/examples/llama
  local primus=$ROOT/workspace/Primus/examples nxdt=$ROOT/workspace/neuronx-distributed-training/examples
  local torchtitan=$ROOT/workspace/Primus/third_party/torchtitan
  install -d "$opt" "$maxtext" "$llama" "$primus" "$nxdt" "$torchtitan" "$ROOT/workspace/maxtext/output" "$ROOT/workspace/Megatron-LM/output"
  install -m 0644 "$HERE"/standin/{clusterval_sim,simyaml,maxtext_train,megatron_train,megatron_args_train,nxdt_train,torchtitan_train,ibv_devinfo}.py "$HERE"/standin/{xla_flags.txt,megatron_lm_arguments.json} "$opt/"
  install -m 0644 "$HERE/standin/training_orchestrator.py" "$nxdt/training_orchestrator.py"
  install -m 0755 "$HERE/standin/torchrun.sh" "$ROOT/usr/bin/torchrun"
  install -m 0755 "$HERE/standin/run_pretrain.sh" "$primus/run_pretrain.sh"
  install -m 0644 "$HERE/standin/base.yml" "$maxtext/base.yml"
  install -m 0755 "$HERE/standin/maxtext_launcher.py" "$maxtext/train.py"
  install -m 0755 "$HERE/standin/train_llama.sh" "$llama/train_llama3.sh"
  install -m 0755 "$HERE/standin/train_llama.sh" "$llama/train_llama2.sh"
  install -m 0755 "$HERE/standin/ibv_devinfo.sh" "$ROOT/usr/bin/ibv_devinfo"
  # rccl-tests where ROCm's images keep them, nccl-tests where NVIDIA-based images do (simulated, real bytes over TCP).
  local tests perf
  for tests in rccl-tests nccl-tests; do
    install -d "$ROOT/opt/$tests/build"
    for perf in all_reduce_perf alltoall_perf; do
      install -m 0755 "$HERE/standin/collective_perf.py" "$ROOT/opt/$tests/build/$perf"
    done
  done
}

make_context() {
  ROOT=$1/rootfs
  rm -rf "$1"
  install -d "$ROOT"/{bin,etc,tmp,root,usr/bin,workspace}
  chmod 1777 "$ROOT/tmp"
  copy_busybox
  copy_with_libs /bin/bash
  copy_python
  install_standins
  printf 'root:x:0:0:root:/root:/bin/sh\n' > "$ROOT/etc/passwd"
  printf 'root:x:0:\nvideo:x:44:\nrender:x:105:\n' > "$ROOT/etc/group"
  cp "$HERE/Dockerfile" "$1/Dockerfile"
}

ensure_packages
if [[ -n $context ]]; then
  make_context "$context"
  exit 0
fi
work=$(mktemp -d /var/tmp/clusterval-simulator-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
make_context "$work/context"
docker build -q -t "$IMAGE" "$work/context" >/dev/null
if [[ -n $save ]]; then
  docker save -o "$save.partial.$$" "$IMAGE"
  mv "$save.partial.$$" "$save"
fi
echo "$IMAGE"
