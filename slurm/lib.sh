# Shared by the sbatch scripts; sourced, never run. Every variable read here is either defaulted
# or set by Slurm.
# shellcheck shell=bash

# print_settings TITLE NAME...: the title, then one "NAME value" line per variable: the first
# thing a job prints.
print_settings() {
  local name
  echo "[$(date '+%F %T')] $1"
  shift
  for name in "$@"; do printf '  %-32s %s\n' "$name" "${!name:-}"; done
}

# container_args IMAGE MOUNTS: srun's pyxis flags (none when IMAGE is empty).
container_args() {
  CONTAINER=()
  [[ -n $1 ]] || return 0
  CONTAINER=(--container-image="$1" --no-container-mount-home --container-workdir="${SLURM_SUBMIT_DIR:-$PWD}")
  [[ -n $2 ]] && CONTAINER+=(--container-mounts="$2")
  return 0
}

# default_mounts PATH...: "p1:p1,p2:p2" for the distinct existing folders holding these paths
# (pyxis shows the container only what is mounted).
default_mounts() {
  local p dir seen=" " out=""
  for p in "$@"; do
    [[ -n $p ]] || continue
    if [[ -d $p ]]; then dir=$(realpath "$p"); else dir=$(realpath -m "$(dirname "$p")"); fi
    [[ $seen == *" $dir "* ]] && continue
    seen+="$dir "
    out+="${out:+,}$dir:$dir"
  done
  echo "$out"
}

die() {
  echo "error: $*" >&2
  exit 1
}
