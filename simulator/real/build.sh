#!/usr/bin/env bash
# Builds the root filesystem of the real-framework node image (clusterval/jax-maxtext): Debian 13
# (trixie, Python 3.13) from Debian's mirror with debootstrap, plus MaxText and JAX from PyPI at the
# versions pinned in requirements.txt (installed without their declared dependencies: MaxText's
# wheel only declares GPU/TPU extras).  No container registry is needed.  Real JAX, real XLA, real
# MaxText train.py on CPU; the GPUs and RDMA of the simulated cluster stay simulated.
#
#   simulator/real/build.sh --output ROOTFS.tar [--cache DIR]
#
# --cache DIR keeps the downloaded Debian packages and wheels there between builds (a second build
# downloads nothing).  pip in the root trusts the certificates the host trusts (its CA bundle).
# scripts/simcluster runs this on the host (debootstrap and pip need the host's network) and
# imports the tar into each node's dockerd with the settings of image_settings below.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
SUITE=trixie
MIRROR=${CLUSTERVAL_DEBIAN_MIRROR:-http://deb.debian.org/debian}
output=""
cache=""
while (($#)); do
  case $1 in
    --output) output=$2; shift 2 ;;
    --cache) cache=$2; shift 2 ;;
    *) echo "build.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[[ -n $output ]] || { echo "build.sh: --output ROOTFS.tar is required" >&2; exit 2; }
if [[ $(id -u) -ne 0 ]]; then
  echo "build.sh: must run as root (debootstrap, chroot)" >&2
  exit 1
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "build.sh: installing debootstrap" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
fi

work=$(mktemp -d /var/tmp/clusterval-real-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
SECONDS=0
debootstrap_cache=()
if [[ -n $cache ]]; then
  install -d "$cache/debs" "$cache/wheels"
  debootstrap_cache=(--cache-dir="$cache/debs")
fi
debootstrap "${debootstrap_cache[@]}" --variant=minbase --include=python3,python3-pip,ca-certificates "$SUITE" "$root" "$MIRROR" \
  >"$work/debootstrap.log" 2>&1 || { tail -n 30 "$work/debootstrap.log" >&2; exit 1; }
echo "build.sh: debootstrap $SUITE: ${SECONDS}s" >&2

# PyPI from inside the root (its own pip and Python 3.13), the wheels kept between builds.
cp /etc/resolv.conf "$root/etc/resolv.conf"
install -d "$root/var/tmp/wheels"
if [[ -n $cache ]]; then cp -a "$cache/wheels/." "$root/var/tmp/wheels/"; fi
install -m 0644 /etc/ssl/certs/ca-certificates.crt "$root/var/tmp/host-ca.crt"
install -m 0644 "$HERE/requirements.txt" "$root/var/tmp/requirements.txt"
pip=(chroot "$root" env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root PIP_DISABLE_PIP_VERSION_CHECK=1
     PIP_CERT=/var/tmp/host-ca.crt
     python3 -m pip)
"${pip[@]}" download -q --no-deps --only-binary=:all: -d /var/tmp/wheels -r /var/tmp/requirements.txt
if [[ -n $cache ]]; then cp -a "$root/var/tmp/wheels/." "$cache/wheels/"; fi
# --ignore-installed: Debian's own python3-packaging and friends (pip's dependencies) stay as they are;
# the pinned versions go to /usr/local, which comes first on Python's path.
"${pip[@]}" install -q --no-deps --no-index --ignore-installed --break-system-packages --root-user-action=ignore \
  --find-links /var/tmp/wheels -r /var/tmp/requirements.txt
echo "build.sh: pip: ${SECONDS}s" >&2

# MaxText where the collection's launch script looks first (today's PyPI layout under src/).
site=/usr/local/lib/python3.13/dist-packages
install -d "$root/workspace/maxtext/src" "$root/workspace/maxtext/output"
ln -s "$site/maxtext" "$root/workspace/maxtext/src/maxtext"
chroot "$root" python3 -c 'import maxtext, jax, jaxlib' >/dev/null
rm -rf "$root/var/tmp/wheels" "$root/var/tmp/requirements.txt" "$root/var/tmp/host-ca.crt" "$root/etc/resolv.conf" \
  "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/{doc,man,info,locale} \
  "$root/root/.cache"
: >"$root/etc/resolv.conf"
tar -C "$root" --numeric-owner --sort=name -cf "$output.partial.$$" .
mv "$output.partial.$$" "$output"
echo "build.sh: $(du -h "$output" | cut -f1) in ${SECONDS}s" >&2
