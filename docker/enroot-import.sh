#!/usr/bin/env bash
# Turns a locally built image into the squashfs file pyxis runs (srun --container-image=FILE):
#   docker/enroot-import.sh NAME:TAG [OUTPUT.sqsh]     # from dockerd (docker build)
#   ENGINE=podman docker/enroot-import.sh NAME:TAG     # from podman's store (podman build)
# The output defaults to NAME+TAG.sqsh in the current folder; it is written under a temporary
# name and renamed when complete, so a failed import leaves no half file behind.
set -euo pipefail
[[ $# -ge 1 && $# -le 2 ]] || { echo "usage: $0 NAME:TAG [OUTPUT.sqsh]   (ENGINE=dockerd|podman, default dockerd)" >&2; exit 2; }
image=$1
engine=${ENGINE:-dockerd}
out=${2:-$(echo "${image##*/}" | tr ':' '+').sqsh}
command -v enroot >/dev/null || { echo "error: enroot is not installed (https://github.com/NVIDIA/enroot)" >&2; exit 1; }
case $engine in dockerd | podman) ;; *) echo "error: ENGINE=$engine: expected dockerd or podman" >&2; exit 1 ;; esac
tmp="$out.tmp.$$"
shim=""
trap 'rm -f "$tmp"; [[ -z $shim ]] || rm -rf "$shim"' EXIT
if [[ $engine == podman ]]; then
  # enroot's podman:// import removes its extraction container with `docker rm` on exit; without
  # podman behind that name it fails (exit 1 after a complete import, the container left behind).
  shim=$(mktemp -d)
  printf '#!/bin/sh\nexec podman "$@"\n' >"$shim/docker"
  chmod +x "$shim/docker"
  export PATH="$shim:$PATH"
fi
echo "[$(date '+%F %T')] enroot import -o $out $engine://$image"
enroot import -o "$tmp" "$engine://$image"
mv -f "$tmp" "$out"
[[ -z $shim ]] || rm -rf "$shim"
trap - EXIT
echo "[$(date '+%F %T')] $out: $(du -h "$out" | cut -f1)"
