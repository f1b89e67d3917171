#!/usr/bin/env bash
# Builds the GPU check's binaries on this machine (nvcc and the CUDA LibTorch from scripts/setup.sh,
# no GPU needed) for one GPU architecture, and packs them with the Debian libraries they need into
# .device-deps/: for a GPU machine that has CUDA and PyTorch 2.11 but none of this project's
# build dependencies and no network (the device tool's machines). There, scripts/gpu_check.sh
# sources .device-deps/setup.sh, which unpacks the binaries into build-gpu/ and points the loader
# at them and at that machine's own LibTorch and CUDA libraries.
# Usage: scripts/gpu_prebuild.sh [ARCH]   (default 90: Hopper; 80 for Ampere)
# Built without MPI (single-process runs, as the check needs); about 13 MB packed.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ARCH="${1:-90}"
BUILD="$ROOT/build-prebuilt-sm$ARCH"
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || { echo "gpu_prebuild: no .venv (run scripts/setup.sh first)" >&2; exit 1; }
TARGETS=(megatron_train test_kernels test_kernel_ops bench_norms_activations bench_softmax_rope_ce
  bench_adamw_attention bench_init)

mkdir -p "$BUILD"
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRON_CUDA=ON -DMEGATRON_TORCH=ON \
  "-DMEGATRON_CUDA_ARCHITECTURES=$ARCH" -DMEGATRON_BUILD_BENCHMARKS=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON \
  "-DCMAKE_PREFIX_PATH=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')" >"$BUILD/configure.log"
ninja -C "$BUILD" ${MEGATRON_JOBS:+-j "$MEGATRON_JOBS"} "${TARGETS[@]}"
bash "$ROOT/tests/check_torch_cuda_linkage.sh" "$BUILD" >/dev/null || {
  echo "gpu_prebuild: some binaries would lack ATen's CUDA kernels" >&2
  exit 1
}

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
out="$stage/build-gpu"
mkdir -p "$out/tools" "$out/tests/kernels" "$out/tests/unit" "$out/tests/benchmarks" "$out/lib"
cp "$BUILD/tools/megatron_train" "$out/tools/"
cp "$BUILD/tests/kernels/test_kernels" "$out/tests/kernels/"
cp "$BUILD/tests/unit/test_kernel_ops" "$out/tests/unit/"
for t in "${TARGETS[@]}"; do
  [[ $t == bench_* ]] && cp "$BUILD/tests/benchmarks/$t" "$out/tests/benchmarks/"
done
# The shared libraries from the OS packages: those in the system's library folders, less the C
# and C++ runtime (LibTorch and CUDA's libraries come from the GPU machine's own PyTorch).
find "$out" -type f -perm -u+x -exec ldd {} + 2>/dev/null | awk '/=> \// {print $3}' | sort -u |
  grep -E '^/(usr/)?lib/x86_64-linux-gnu/' |
  grep -v -E '/(libc|libm|libstdc\+\+|libgcc_s|libdl|librt|libpthread|libutil|ld-linux-x86-64)\.so' |
  while read -r lib; do cp -L "$lib" "$out/lib/"; done

mkdir -p "$ROOT/.device-deps"
tar -C "$stage" -cJf "$ROOT/.device-deps/build-gpu.tar.xz.tmp" build-gpu
mv "$ROOT/.device-deps/build-gpu.tar.xz.tmp" "$ROOT/.device-deps/build-gpu.tar.xz"
cat >"$ROOT/.device-deps/setup.sh" <<'EOF'
# Written by scripts/gpu_prebuild.sh; sourced by scripts/gpu_check.sh (ROOT is the repository).
tar -C "$ROOT" -xJf "$ROOT/.device-deps/build-gpu.tar.xz"
export MEGATRON_GPU_BUILD_DIR="$ROOT/build-gpu" MEGATRON_GPU_PREBUILT=1
BUILD="$MEGATRON_GPU_BUILD_DIR"
torch_dir=$(python3 -c 'import torch, os; print(os.path.dirname(torch.__file__))')
export LD_LIBRARY_PATH="$ROOT/build-gpu/lib:$torch_dir/lib:$(dirname "$torch_dir")/nvidia/cu13/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
EOF
echo "gpu_prebuild: .device-deps/build-gpu.tar.xz ($(du -h "$ROOT/.device-deps/build-gpu.tar.xz" | cut -f1)) for sm_$ARCH;" \
  "on the GPU machine: bash scripts/gpu_check.sh"
