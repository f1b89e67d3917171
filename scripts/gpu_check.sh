#!/usr/bin/env bash
# The GPU check, one command, for the day a GPU is there (nothing here runs in CI):
#   1. builds the CUDA configuration from a clean build folder (the GPU's architecture only),
#   2. runs the GPU tests: the kernel parity suites (label gpu) and the model's fused ops on CUDA
#      tensors (test_kernel_ops); they must pass, a skip counts as a failure,
#   3. runs the kernel benchmarks (memory-bound kernels against the measured copy bandwidth, cross
#      entropy against ATen, AdamW over 1B parameters, attention per back end),
#   4. trains GPT-2 124M (seq 1024) and a 1.3B GPT (seq 2048, with and without
#      --recompute-activations) in bf16 on mock data for a few dozen iterations with megatron_train:
#      tokens/s, TFLOP/s per GPU (Megatron's formula, as the iteration line prints it), MFU against
#      the GPU's bf16 dense peak, peak memory; and the same models in PyTorch eager on the same GPU
#      (tests/benchmarks/bench_train_gpu.py), whose tokens/s give the ratio,
# and writes everything into one results file: $OUT/gpu_check.txt when the device tool's $OUT is
# set, else gpu_check_results.txt in the repository (MEGATRON_GPU_RESULTS overrides).
#
# A GPU machine without network and without the Debian packages: carry them along in
# .device-deps/ with a setup.sh that installs them; this script sources .device-deps/setup.sh
# when it exists. Open MPI is optional for this check (single process). PyTorch comes from
# .venv/ when scripts/setup.sh made one, else from the machine's python3.
# Environment: MEGATRON_GPU_BUILD_DIR (default build-gpu), MEGATRON_GPU_TRAIN_ITERS (default 40),
# MEGATRON_GPU_STEPS (the sections to run, default "tests benchmarks training checkpoint"),
# MEGATRON_GPU_SKIP_TRAINING=1 (drops "training"), MEGATRON_GPU_PREBUILT=1 (use the binaries
# already in the build folder, e.g. built on another machine for this GPU's architecture, instead
# of building), MEGATRON_JOBS.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
BUILD="${MEGATRON_GPU_BUILD_DIR:-$ROOT/build-gpu}"
RESULTS="${MEGATRON_GPU_RESULTS:-${OUT:+$OUT/gpu_check.txt}}"
RESULTS="${RESULTS:-$ROOT/gpu_check_results.txt}"
ITERS="${MEGATRON_GPU_TRAIN_ITERS:-40}"
STEPS=" ${MEGATRON_GPU_STEPS:-tests benchmarks training checkpoint} "
[ "${MEGATRON_GPU_SKIP_TRAINING:-0}" = "1" ] && STEPS="${STEPS/ training / }"
step() { [[ "$STEPS" == *" $1 "* ]]; }
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

if [ "${MEGATRON_GPU_PREBUILT:-0}" = "1" ]; then
  section "build: prebuilt binaries in $BUILD"
  [ -x "$BUILD/tools/megatron_train" ] || { echo "gpu_check: MEGATRON_GPU_PREBUILT=1 but $BUILD/tools/megatron_train is missing" >&2; exit 1; }
else
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
  bench_norms_activations bench_softmax_rope_ce bench_adamw_attention bench_init >"$BUILD.build.log" 2>&1 ||
  { tail -50 "$BUILD.build.log" >&2; exit 1; }
say "built in $((SECONDS - build_start)) s"
fi

if step tests; then
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
    # sed, not head: head's early exit would end this script through pipefail (SIGPIPE).
    grep -E '^\[  FAILED  \]|Failure|error' "$log" | sed -n '1,40p' | tee -a "$RESULTS" || true
  fi
done

fi

if step benchmarks; then
section "kernel benchmarks"
for b in bench_norms_activations bench_softmax_rope_ce bench_adamw_attention "bench_init --repeat 1"; do
  say "-- $b"
  # shellcheck disable=SC2086
  if ! "$BUILD/tests/benchmarks/"$b 2>&1 | tee -a "$RESULTS"; then failed "$b"; fi
done
fi

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
  # The log lines after the first three intervals (warm-up, allocator growth; after the first
  # alone in a run of fewer), averaged; the last line of awk's output is "tokens/s TFLOP/s" for
  # the comparison with PyTorch.
  local summary
  summary=$(awk -v peak="$PEAK" -v name="$name" '
    function field(pattern,   v) {  # the value after ": " of the first match of pattern
      if (!match($0, pattern)) return 0
      v = substr($0, RSTART, RLENGTH)
      sub(/.*: /, "", v)
      return v
    }
    / iteration +[0-9]+\/ +[0-9]+ \|/ {
      n++
      ms[n] = field("elapsed time per iteration \\(ms\\): [0-9.]+")
      tf[n] = field("TFLOP/s/GPU\\): [0-9.]+")
      tok[n] = field("tokens per second per GPU: [0-9.]+")
      loss = field("lm loss: [0-9.E+-]+")
    }
    END {
      if (n < 2) { print name ": fewer than two iteration lines"; exit 1 }
      skip = n > 4 ? 3 : 1
      for (i = skip + 1; i <= n; i++) { sms += ms[i]; stf += tf[i]; stok += tok[i]; k++ }
      printf "%s: %.1f ms/iteration, %.0f tokens/s/GPU, %.1f TFLOP/s/GPU", name, sms / k, stok / k, stf / k
      if (peak > 0) printf ", MFU %.1f%% of %.1f", 100 * stf / k / peak, peak
      printf " (mean of %d intervals of 5 iterations; last lm loss %s)\n%.0f %.2f\n", k, loss, stok / k, stf / k
    }' "$log") || { say "$summary"; failed "$name: no throughput"; return; }
  say "$(sed '$d' <<<"$summary")"
  LAST_THROUGHPUT=$(tail -1 <<<"$summary")
}

# eager NAME LAYERS HIDDEN HEADS SEQ MICRO GLOBAL: the same model in PyTorch eager on this GPU,
# against megatron_train's last throughput (LAST_THROUGHPUT: tokens/s and TFLOP/s).
eager() {
  local name=$1 log="$BUILD/eager_$1.log" out
  say "-- $name in PyTorch eager (tests/benchmarks/bench_train_gpu.py)"
  if ! out=$("$PYTHON" "$ROOT/tests/benchmarks/bench_train_gpu.py" --layers "$2" --hidden "$3" --heads "$4" \
      --seq "$5" --micro-batch "$6" --global-batch "$7" 2>"$log"); then
    failed "$name in PyTorch eager"
    tail -20 "$log" | tee -a "$RESULTS"
    return
  fi
  say "$out"
  [ -n "${LAST_THROUGHPUT:-}" ] || return
  "$PYTHON" - "$out" $LAST_THROUGHPUT "$PEAK" "$name" <<'PY' | tee -a "$RESULTS"
import json, sys
eager = json.loads(sys.argv[1])
ours_tokens, ours_tflops, peak, name = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), sys.argv[5]
# The same model and batch: FLOPs per token are equal, so PyTorch's TFLOP/s scale with its tokens/s.
tflops = ours_tflops * eager["tokens_per_s"] / ours_tokens
print(f"{name}: PyTorch eager {eager['tokens_per_s']:.0f} tokens/s, {tflops:.1f} TFLOP/s"
      + (f" (MFU {100 * tflops / peak:.1f}%)" if peak > 0 else "")
      + f"; megatron_train / PyTorch eager = {ours_tokens / eager['tokens_per_s']:.2f}x")
PY
}

if step training; then
  section "training throughput (bf16, one GPU)"
  # GPT-2 124M: 12 layers, hidden 768, 12 heads, seq 1024, tied embeddings, learned positions.
  train gpt2_124m --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
    --max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size 64 \
    --attention-dropout 0 --hidden-dropout 0
  eager gpt2_124m 12 768 12 1024 16 64
  # GPT 1.3B (GPT-3 XL shape): 24 layers, hidden 2048, 16 heads, seq 2048.
  gpt_1p3b=(--num-layers 24 --hidden-size 2048 --num-attention-heads 16 --seq-length 2048
    --max-position-embeddings 2048 --micro-batch-size 4 --global-batch-size 32
    --attention-dropout 0 --hidden-dropout 0)
  train gpt_1p3b "${gpt_1p3b[@]}"
  eager gpt_1p3b 24 2048 16 2048 4 32
  train gpt_1p3b_recompute "${gpt_1p3b[@]}" --recompute-activations
fi

if step checkpoint; then
  section "checkpoint save stall (GPT-2 124M, bf16, distributed optimizer off; sync, then --async-save)"
  # The stall is the time between the 'saving checkpoint' line and 'successfully saved' (sync) or
  # 'scheduled an async checkpoint save' (async: the host snapshot only).
  for mode in sync async; do
    rm -rf "$BUILD/ckpt_$mode"
    extra=()
    [ "$mode" = async ] && extra=(--async-save)
    ITERS=20 train "save_$mode" --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
      --max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size 64 --attention-dropout 0 \
      --hidden-dropout 0 --save "$BUILD/ckpt_$mode" --save-interval 10 "${extra[@]}"
    grep -E 'saving checkpoint|successfully saved|scheduled an async' "$BUILD/train_save_$mode.log" | tee -a "$RESULTS"
    say "checkpoint size: $(du -sh "$BUILD/ckpt_$mode" | cut -f1)"
  done
  # Loading onto the GPU: resume the synchronous run's checkpoint and train on to iteration 30.
  ITERS=30 train resume --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024 \
    --max-position-embeddings 1024 --micro-batch-size 16 --global-batch-size 64 --attention-dropout 0 \
    --hidden-dropout 0 --load "$BUILD/ckpt_sync" --use-checkpoint-opt-param-scheduler
  grep -E 'loading checkpoint|iteration +(2[05]|30)/' "$BUILD/train_resume.log" | cut -c1-160 | tee -a "$RESULTS" || true
fi

section "done"
if [ "$FAILURES" -gt 0 ]; then
  say "gpu_check: $FAILURES failures (results in $RESULTS)"
  exit 1
fi
say "gpu_check: all passed in $((SECONDS - START)) s (results in $RESULTS)"
