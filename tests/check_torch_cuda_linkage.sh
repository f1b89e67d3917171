#!/usr/bin/env bash
# A CUDA build's executables must load libtorch_cuda.so: it registers ATen's CUDA kernels from its
# static initialisers and no symbol of it is referenced, so an --as-needed link drops it silently,
# and the binary then fails on a GPU at its first CUDA tensor ("Could not run
# 'aten::empty.memory_format' with arguments from the 'CUDA' backend"). Checked on the ELF files
# (readelf), so a machine without a GPU catches it: every executable under BUILD_DIR that needs
# libc10_cuda.so (LibTorch's CUDA half) must also need libtorch_cuda.so.
# Usage: tests/check_torch_cuda_linkage.sh BUILD_DIR
set -euo pipefail
build=${1:?usage: check_torch_cuda_linkage.sh BUILD_DIR}
command -v readelf >/dev/null || { echo "readelf (binutils) is needed" >&2; exit 1; }
checked=0
missing=()
while IFS= read -r -d '' f; do
  needed=$(readelf -d "$f" 2>/dev/null | grep NEEDED || true)
  grep -q 'libc10_cuda\.so' <<<"$needed" || continue
  checked=$((checked + 1))
  grep -q 'libtorch_cuda\.so' <<<"$needed" || missing+=("${f#"$build"/}")
done < <(find "$build/tools" "$build/tests" -type f -perm -u+x ! -name '*.sh' ! -name '*.py' -print0)
if [ ${#missing[@]} -gt 0 ]; then
  echo "linked against LibTorch's CUDA half without libtorch_cuda.so (ATen's CUDA kernels would be missing on a GPU):" >&2
  printf '  %s\n' "${missing[@]}" >&2
  exit 1
fi
[ "$checked" -gt 0 ] || { echo "no executable under $build links libc10_cuda.so: is this a CUDA build?" >&2; exit 1; }
echo "ok: $checked executables that use LibTorch's CUDA half all load libtorch_cuda.so"
