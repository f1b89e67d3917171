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

# tokenizer_flags: sets TOKENIZER_FLAGS, Megatron's tokenizer flags, from TOKENIZER_TYPE (any
# --tokenizer-type), VOCAB_FILE + MERGE_FILE (GPT2BPETokenizer), TOKENIZER_MODEL (the other types
# but NullTokenizer: a folder with tokenizer.json, a tokenizer.model, a TikTokenizer .json) and
# TOKENIZER_ARGS (more flags, split on blanks: "--tiktoken-pattern v2 --vocab-size 131072").
tokenizer_flags() {
  TOKENIZER_FLAGS=(--tokenizer-type "$TOKENIZER_TYPE")
  case $TOKENIZER_TYPE in
    GPT2BPETokenizer) TOKENIZER_FLAGS+=(--vocab-file "$VOCAB_FILE" --merge-file "$MERGE_FILE") ;;
    NullTokenizer) ;;
    *)
      [[ -n $TOKENIZER_MODEL ]] ||
        die "TOKENIZER_TYPE=$TOKENIZER_TYPE needs TOKENIZER_MODEL (a folder with tokenizer.json, a tokenizer.model or a TikTokenizer .json)"
      TOKENIZER_FLAGS+=(--tokenizer-model "$TOKENIZER_MODEL")
      ;;
  esac
  local more
  # shellcheck disable=SC2206  # a list of flags, split on blanks
  more=($TOKENIZER_ARGS)
  TOKENIZER_FLAGS+=("${more[@]}")
}

# tokenizer_mount_paths: the tokenizer files a container needs mounted, one per line: VOCAB_FILE
# and MERGE_FILE for GPT2BPETokenizer unless they are the image's own, else TOKENIZER_MODEL.
tokenizer_mount_paths() {
  if [[ $TOKENIZER_TYPE == GPT2BPETokenizer ]]; then
    [[ $VOCAB_FILE == /opt/megatron-cpp/* ]] || echo "$VOCAB_FILE"
    [[ $MERGE_FILE == /opt/megatron-cpp/* ]] || echo "$MERGE_FILE"
  elif [[ -n $TOKENIZER_MODEL ]]; then
    echo "$TOKENIZER_MODEL"
  fi
}

# require_int MIN NAME...: dies, naming the variable, unless each variable NAME holds a whole
# number of at least MIN (0 or 1), in plain decimal digits: bash's arithmetic would otherwise read
# "abc" as another variable, "010" as octal, and fail with its own message (division by 0).
require_int() {
  local min=$1 name value what="a positive integer"
  shift
  (( min == 0 )) && what="a non-negative integer"
  for name in "$@"; do
    value=${!name:-}
    if ! [[ $value =~ ^(0|[1-9][0-9]{0,17})$ ]] || (( value < min )); then die "$name=$value: expected $what"; fi
  done
}
