#!/usr/bin/env bash
# The GPU check, one command, for the day a GPU is there (nothing here runs in CI):
#   1. builds the CUDA configuration from a clean build folder (the GPU's architecture only),
#   2. runs the GPU tests: the kernel parity suites (label gpu) and the model's fused ops on CUDA
#      tensors (test_kernel_ops); they must pass, a skip counts as a failure,
#   3. runs the kernel benchmarks (memory-bound kernels against the measured copy bandwidth, cross
#      entropy against ATen, AdamW over 1B parameters, attention per back end),
#   4. trains GPT-2 124M (seq 1024) and a 1.3B GPT (seq 2048) in bf16 on mock data for a few dozen
#      iterations with megatron_train: tokens/s, TFLOP/s per GPU (Megatron's formula, as the
#      iteration line prints it), MFU against the GPU's bf16 dense peak, peak memory,
# and writes everything into one results file: $OUT/gpu_check.txt when the device tool's $OUT is
# set, else gpu_check_results.txt in the repository (MEGATRON_GPU_RESULTS overrides).
#
# A GPU machine without network and without the Debian packages: carry them along in
# .device-deps/ with a setup.sh that installs them; this script sources .device-deps/setup.sh
# when it exists. Open MPI is optional for this check (single process). PyTorch comes from
# .venv/ when scripts/setup.sh made one, else from the machine's python3.
# Environment: MEGATRON_GPU_BUILD_DIR (default build-gpu), MEGATRON_GPU_TRAIN_ITERS (default 40),
# MEGATRON_GPU_SKIP_TRAINING=1, MEGATRON_JOBS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${MEGATRON_GPU_BUILD_DIR:-$ROOT/build-gpu}"
RESULTS="${MEGATRON_GPU_RESULTS:-${OUT:+$OUT/gpu_check.txt}}"
RESULTS="${RESULTS:-$ROOT/gpu_check_results.txt}"
ITERS="${MEGATRON_GPU_TRAIN_ITERS:-40}"
START=$SECONDS
FAILURES=0

mkdir -p "$(dirname "$RESULTS")"
: >"$RESULTS"
say() { printf '%s\n' "$*" | tee -a "$RESULTS"; }
section() { say ""; say "== $* ($((SECONDS - START)) s)"; }
failed() { say "FAILED: $*"; FAILURES=$((FAILURES + 1)); }

if [ -f "$ROOT/.device-deps/setup.sh" ]; then
  # shellcheck disable=SC1091
  source "$ROOT/.device-deps/setup.sh"
fi
PYTHON="$ROOT/.venv/bin/python"
[ -x "$PYTHON" ] || PYTHON="$(command -v python3)"
command -v nvidia-smi >/dev/null || { echo "gpu_check: no nvidia-smi: this machine has no NVIDIA driver" >&2; exit 1; }
GPU_NAME="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
CAP="$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d '.')"

section "machine"
say "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
say "gpu: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -1) (sm_$CAP)"
say "torch: $("$PYTHON" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)')"
say "nvcc: $(nvcc --version | tail -1)"
say "commit: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)"

section "build (clean, CUDA for sm_$CAP)"
rm -rf "$BUILD"
args=(-S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMEGATRON_CUDA=ON -DMEGATRON_TORCH=ON
  "-DMEGATRON_CUDA_ARCHITECTURES=$CAP" -DMEGATRON_BUILD_BENCHMARKS=ON
  "-DCMAKE_PREFIX_PATH=$("$PYTHON" -c 'import torch; print(torch.utils.cmake_prefix_path)')${CMAKE_PREFIX_PATH:+;$CMAKE_PREFIX_PATH}")
build_start=$SECONDS
cmake "${args[@]}" >"$BUILD.configure.log" 2>&1 || { cat "$BUILD.configure.log" >&2; exit 1; }
grep -E '^-- megatron:' "$BUILD.configure.log" | tee -a "$RESULTS"
grep -q "LibTorch CUDA layer enabled" "$BUILD.configure.log" || { echo "gpu_check: the CUDA LibTorch layer is off" >&2; exit 1; }
ninja -C "$BUILD" ${MEGATRON_JOBS:+-j "$MEGATRON_JOBS"} test_kernels test_kernel_ops megatron_train \
  bench_norms_activations bench_softmax_rope_ce bench_adamw_attention >"$BUILD.build.log" 2>&1 ||
  { tail -50 "$BUILD.build.log" >&2; exit 1; }
say "built in $((SECONDS - build_start)) s"

section "GPU tests (must pass, not skip)"
# The kernel parity suites and the model's fused autograd ops on CUDA tensors; the CPU suites of
# the same binary run too (they are quick).
for t in test_kernels test_kernel_ops; do
  log="$BUILD/$t.log"
  if "$BUILD/tests/"*/"$t" >"$log" 2>&1; then
    skipped=$(sed -n 's/^\[  SKIPPED \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    skipped=${skipped:-0}
    passed=$(sed -n 's/^\[  PASSED  \] \([0-9]*\) test.*/\1/p' "$log" | tail -1)
    if [ "$skipped" -gt 0 ]; then
      failed "$t: $skipped tests skipped on a GPU machine"
      grep '^\[  SKIPPED \] [A-Za-z]' "$log" | tee -a "$RESULTS"
    else
      say "$t: ${passed:-?} tests passed"
    fi
  else
    failed "$t"
    grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -40 | tee -a "$RESULTS"
  fi
done

section "kernel benchmarks"
for b in bench_norms_activations bench_softmax_rope_ce bench_adamw_attention; do
  say "-- $b"
  if ! "$BUILD/tests/benchmarks/$b" 2>&1 | tee -a "$RESULTS"; then failed "$b"; fi
done

# bf16 dense tensor-core peak of the GPU, TFLOP/s (NVIDIA's data sheets, without sparsity).
peak_tflops() {
  case "$1" in
    *H200*) echo 989.4 ;;
    *H100*PCIe*) echo 756.0 ;;
    *H100*) echo 989.4 ;;
    *A100*) echo 312.0 ;;
    *L40S*) echo 362.1 ;;
    *) echo 0 ;;
  esac
}
PEAK=$(peak_tflops "$GPU_NAME")

# train NAME FLAGS...: megatron_train in bf16 on mock data; prints the steady-state numbers.
train() {
  local name=$1
  shift
  local log="$BUILD/train_$name.log" work="$BUILD/train_$name"
  mkdir -p "$work"
  say "-- $name: megatron_train $*"
  if ! "$BUILD/tools/megatron_train" "$@" --bf16 --mock-data --train-iters "$ITERS" --log-interval 5 \
      --log-throughput --eval-iters 0 --lr 3e-4 --min-lr 3e-5 --lr-decay-style cosine --lr-warmup-iters 5 \
      --tokenizer-type GPT2BPETokenizer --vocab-file "$ROOT/tokenizers/gpt2/gpt2-vocab.json" \
      --merge-file "$ROOT/tokenizers/gpt2/gpt2-merges.txt" --data-cache-path "$work/cache" >"$log" 2>&1; then
    failed "$name"
    tail -20 "$log" | tee -a "$RESULTS"
    return
  fi
  grep -E '^> training on|memory \(MB\)' "$log" | tee -a "$RESULTS"
  # The log lines after the first two intervals (warm-up, allocator growth), averaged.
  awk -v peak="$PEAK" -v name="$name" '
    function field(pattern,   v) {  # the value after ": " of the first match of pattern
      if (!match($0, pattern)) return 0
      v = substr($0, RSTART, RLENGTH)
      sub(/.*: /, "", v)
      return v
    }
    / iteration +[0-9]+\/ +[0-9]+ \|/ {
      n++
      if (n <= 3) next
      ms += field("elapsed time per iteration \\(ms\\): [0-9.]+")
      tf += field("TFLOP/s/GPU\\): [0-9.]+")
      tok += field("tokens per second per GPU: [0-9.]+")
      loss = field("lm loss: [0-9.E+-]+")
      k++
    }
    END {
      if (k == 0) { print name ": no steady-state iteration lines"; exit 1 }
      printf "%s: %.1f ms/iteration, %.0f tokens/s/GPU, %.1f TFLOP/s/GPU", name, ms / k, tok / k, tf / k
      if (peak > 0) printf ", MFU %.1f%% of %.1f", 100 * tf / k / peak, peak
      printf " (mean of %d intervals of 5 iterations; last lm loss %s)\n", k, loss
    }' "$log" | tee -a "$RESULTS" || failed "$name: no throughput"
}

if [ "${MEGATRON_GPU_SKIP_TRAINING:-0}" != "1" ]; then
  section "training throughput (bf16, one GPU)"
  # GPT-2 124M: 12 layers, hidden 768, 12 heads, seq 1024, tied embeddings, learned positions.
  train gpt2_124m --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
    --max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size 64 \
    --attention-dropout 0 --hidden-dropout 0
  # GPT 1.3B (GPT-3 XL shape): 24 layers, hidden 2048, 16 heads, seq 2048.
  train gpt_1p3b --num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048 \
    --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 32 \
    --attention-dropout 0 --hidden-dropout 0
fi

section "done"
if [ "$FAILURES" -gt 0 ]; then
  say "gpu_check: $FAILURES failures (results in $RESULTS)"
  exit 1
fi
say "gpu_check: all passed in $((SECONDS - START)) s (results in $RESULTS)"
