#!/usr/bin/env bash
# Sets up this repository on a fresh Debian 12 / Ubuntu 22.04+ machine and builds it:
#   1. system packages (apt-get; only the missing ones, so a second run is quick),
#   2. LibTorch from the pinned PyTorch wheel on PyPI, in .venv/ inside the repository,
#   3. CMake + Ninja configure and build in build/ (ccache when present; CUDA sources compile
#      when nvcc is found, also without a GPU).
# Usage: scripts/setup.sh [TARGET...]   builds the given Ninja targets, default everything
# (the quickstart builds only `megatron_tools`, the executables).
# Environment: MEGATRON_BUILD_DIR (default build), MEGATRON_SKIP_TORCH=1 (no venv/LibTorch),
# MEGATRON_CMAKE_ARGS (extra configure flags), MEGATRON_JOBS (build parallelism),
# MEGATRON_TORCH_PYTHON (a Python whose installed torch provides LibTorch instead of .venv: the
# NGC PyTorch image's `python`), MEGATRON_APT_SKIP (packages to leave out, e.g. Open MPI where
# the image brings its own).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD_DIR="${MEGATRON_BUILD_DIR:-$ROOT/build}"
# PyTorch 2.11.0 is what the GPU machines run (built for CUDA 13.0, like the nvcc here), so the
# CPU build and the GPU build compile against the same LibTorch API. The PyPI wheel is the
# CUDA 13.0 build; it runs CPU-only where no GPU/driver is present (checked below).
TORCH_VERSION="2.11.0"
TENSORBOARD_VERSION="2.21.0"
TRANSFORMERS_VERSION="5.24.0"
TIKTOKEN_VERSION="0.12.0"
SENTENCEPIECE_VERSION="0.2.3"
TOKENIZERS_VERSION="0.23.3"
MEGATRON_CORE_VERSION="0.12.0"
PSUTIL_VERSION="7.2.2"

APT_PACKAGES=(
  build-essential cmake ninja-build ccache pkg-config git python3 python3-venv
  libicu-dev libpcre2-dev libsentencepiece-dev libcli11-dev nlohmann-json3-dev libspdlog-dev libgtest-dev libgmock-dev
  libzstd-dev zstd zlib1g-dev gzip libopenmpi-dev openmpi-bin faketime
  libprotobuf-dev protobuf-compiler libisal-dev
  slurmctld slurmd slurm-client libpmix-dev
)

log() { printf '[setup] %s\n' "$*"; }

install_system_packages() {
  local missing=()
  for p in "${APT_PACKAGES[@]}"; do
    [[ " ${MEGATRON_APT_SKIP:-} " == *" $p "* ]] && continue
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if [ ${#missing[@]} -eq 0 ]; then
    log "system packages: all present"
    return
  fi
  log "system packages: installing ${missing[*]}"
  local sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
    sudo="sudo"
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -q
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
}

install_libtorch() {
  if [ "${MEGATRON_SKIP_TORCH:-0}" = "1" ]; then
    log "LibTorch: skipped (MEGATRON_SKIP_TORCH=1)"
    return
  fi
  if [ -n "${MEGATRON_TORCH_PYTHON:-}" ]; then
    TORCH_PYTHON=$MEGATRON_TORCH_PYTHON
    log "LibTorch: from $TORCH_PYTHON's torch ($("$TORCH_PYTHON" -c 'import torch; print(torch.__version__)'))"
    return
  fi
  local venv="$ROOT/.venv"
  TORCH_PYTHON=$venv/bin/python
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$TORCH_VERSION')" 2>/dev/null; then
    log "LibTorch: torch $TORCH_VERSION already in .venv"
  else
    log "LibTorch: installing torch==$TORCH_VERSION into .venv (about 4.7 GB, a minute or two)"
    local start=$SECONDS
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --upgrade pip
    "$venv/bin/pip" install -q "torch==$TORCH_VERSION" numpy
    log "LibTorch: installed in $((SECONDS - start)) s, $(du -sh "$venv" | cut -f1)"
  fi
  # TensorBoard's own reader checks the event files the trainer writes (tests/e2e/tensorboard_read.py).
  if ! "$venv/bin/python" -c "import tensorboard" 2>/dev/null; then
    log "TensorBoard: installing tensorboard==$TENSORBOARD_VERSION into .venv (its event reader is used by the tests)"
    "$venv/bin/pip" install -q "tensorboard==$TENSORBOARD_VERSION"
  fi
  # transformers loads what convert_checkpoint exports and gives the reference logits (tests/e2e/hf_export.sh).
  if ! "$venv/bin/python" -c "import transformers, sys; sys.exit(transformers.__version__ != '$TRANSFORMERS_VERSION')" 2>/dev/null; then
    log "transformers: installing transformers==$TRANSFORMERS_VERSION into .venv (the HuggingFace export is checked with it)"
    "$venv/bin/pip" install -q "transformers==$TRANSFORMERS_VERSION"
  fi
  # tiktoken is the reference the TikTokenizer is tested against (tests/unit/tokenizer/tiktoken_reference.py).
  if ! "$venv/bin/python" -c "import tiktoken, sys; sys.exit(tiktoken.__version__ != '$TIKTOKEN_VERSION')" 2>/dev/null; then
    log "tiktoken: installing tiktoken==$TIKTOKEN_VERSION into .venv (the TikTokenizer is checked against it)"
    "$venv/bin/pip" install -q "tiktoken==$TIKTOKEN_VERSION"
  fi
  # The tokenizer references: sentencepiece trains the test SentencePiece model (converted by
  # transformers into a tokenizer.json),
  # tokenizers (transformers' own dependency, pinned) the tokenizer.json files, and megatron-core
  # writes the .bin/.idx files the preprocessing is compared with and the torch_dist checkpoints
  # the checkpoint readers are (--no-deps: beyond torch and numpy its checkpoint writer needs only
  # psutil).
  if ! "$venv/bin/python" -c "import sentencepiece, tokenizers, sys; sys.exit(sentencepiece.__version__ != '$SENTENCEPIECE_VERSION' or tokenizers.__version__ != '$TOKENIZERS_VERSION')" 2>/dev/null; then
    log "sentencepiece, tokenizers: installing sentencepiece==$SENTENCEPIECE_VERSION tokenizers==$TOKENIZERS_VERSION into .venv (tokenizer references)"
    "$venv/bin/pip" install -q "sentencepiece==$SENTENCEPIECE_VERSION" "tokenizers==$TOKENIZERS_VERSION"
  fi
  if ! "$venv/bin/python" -c "import importlib.metadata as m, sys; sys.exit(m.version('megatron-core') != '$MEGATRON_CORE_VERSION' or m.version('psutil') != '$PSUTIL_VERSION')" 2>/dev/null; then
    log "megatron-core: installing megatron-core==$MEGATRON_CORE_VERSION psutil==$PSUTIL_VERSION into .venv (its dataset writer is the preprocessing reference, its models and distributed checkpoints the checkpoint readers')"
    "$venv/bin/pip" install -q --no-deps "megatron-core==$MEGATRON_CORE_VERSION"
    "$venv/bin/pip" install -q "psutil==$PSUTIL_VERSION"
  fi
  # The CUDA wheel must work on a machine without a GPU: import it and compute on the CPU.
  "$venv/bin/python" -c "import torch; assert torch.ones(4).sum().item() == 4.0; print('[setup] LibTorch:', torch.__version__, 'CUDA available:', torch.cuda.is_available())"
}

configure_and_build() {
  local args=(-S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release)
  if [ -n "${TORCH_PYTHON:-}" ] && [ -x "$(command -v "$TORCH_PYTHON")" ]; then
    args+=("-DCMAKE_PREFIX_PATH=$("$TORCH_PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')")
  fi
  # shellcheck disable=SC2206
  args+=(${MEGATRON_CMAKE_ARGS:-})
  log "configure: cmake ${args[*]}"
  mkdir -p "$BUILD_DIR"
  cmake "${args[@]}" >"$BUILD_DIR/configure.log" 2>&1 || { cat "$BUILD_DIR/configure.log" >&2; exit 1; }
  grep -E '^-- megatron:' "$BUILD_DIR/configure.log" || true
  log "build: ninja -C $BUILD_DIR $*"
  ninja -C "$BUILD_DIR" ${MEGATRON_JOBS:+-j "$MEGATRON_JOBS"} "$@"
}

TORCH_PYTHON=""
install_system_packages
install_libtorch
configure_and_build "$@"
log "done: tools in $BUILD_DIR/tools"
