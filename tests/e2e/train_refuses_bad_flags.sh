#!/usr/bin/env bash
# megatron_train refuses bad flags before any work: flags LibTorch would fail on are refused naming
# the flag (non-finite floats, sizes past memory or past 32 bits, a padded vocabulary below the
# tokenizer's), no derived check blames another flag, Megatron's pipeline checks are reported
# together, a LibTorch error is one line (its stack trace only with MEGATRON_BACKTRACE=1),
# repeated flags take the last value with a note, exit 1.
set -euo pipefail
# shellcheck source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
need_tools TRAIN

TINY=(--num-layers 1 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
  --micro-batch-size 2 --train-iters 1 --lr 1e-3 --mock-data --log-interval 1 --eval-iters 0
  --data-cache-path "$WORK/cache" "${TOKENIZER[@]}")

# refused SUBSTRING FLAG...: megatron_train with the tiny run plus FLAG... exits 1 with
# "megatron_train: error:" and SUBSTRING, and no stack trace.
refused() {
  local expected=$1
  shift
  assert_fails_with "$expected" "$TRAIN" "${TINY[@]}" "$@"
  assert_eq 1 "$RC" "exit status of megatron_train $*"
  assert_contains err.txt "megatron_train: error: "
  if grep -q "frame #" err.txt; then show err.txt stderr; fail "a stack trace"; fi
}

step "sanity: the tiny run trains; a repeated flag takes its last value, with a note"
assert_succeeds "$TRAIN" "${TINY[@]}" --lr 2e-3
assert_contains out.txt "note: --lr given 2 times; the last value (2e-3) is used"
assert_contains out.txt "  lr .............................................. 0.002"

step "flags that LibTorch would fail on are refused naming the flag"
refused "--padded-vocab-size 100 is smaller than the tokenizer's vocabulary (50257 tokens)" --padded-vocab-size 100
refused "argument --init-method-std: nan is not a finite number" --init-method-std nan
refused "one layer's attention scores ([2, 4, 100000000, 100000000] in fp32" --seq-length 100000000 --max-position-embeddings 100000000

step "no derived check blames another flag"
refused "invalid command line: argument --lr: nan is not a finite number" --lr nan
if grep -q -- "--min-lr" err.txt; then show err.txt stderr; fail "--lr nan blames --min-lr"; fi
refused "invalid command line: argument --weight-decay: nan is not a finite number" --weight-decay nan
if grep -q "start-weight-decay\|start/end" err.txt; then show err.txt stderr; fail "--weight-decay nan blames start/end"; fi
refused "--hidden-size 2000000000 is too large" --hidden-size 2000000000
if grep -q "ffn-hidden-size must be positive" err.txt; then show err.txt stderr; fail "an overflowed ffn size"; fi

step "pipeline flag problems are reported together"
refused "number of layers per pipeline stage (2) must be divisible by --num-layers-per-virtual-pipeline-stage (3)" \
  --num-layers 4 --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 3
assert_contains err.txt "world size (1) is not divisible by tensor x pipeline x context parallel sizes (2)"
refused "--num-layers (6) minus the first and last stages' layers (3) must split evenly over the other 2 pipeline stages" \
  --num-layers 6 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 2 --decoder-last-pipeline-num-layers 1
refused "--num-layers-per-virtual-pipeline-stage assumes an even split" \
  --num-layers 6 --pipeline-model-parallel-size 4 --decoder-first-pipeline-num-layers 1 --num-layers-per-virtual-pipeline-stage 1

step "usage errors exit 1 with the tool's name, --log-interval -1 like 0"
refused "argument --num-layers: invalid int value: 'abc'" --num-layers abc
refused "--log-interval must be a positive integer, got -1" --log-interval -1
refused "--log-interval must be a positive integer, got 0" --log-interval 0

step "a LibTorch error is one line; MEGATRON_BACKTRACE=1 adds its stack trace"
# A 3 GB position table under a 5 GB address-space limit, of which LibTorch's CPU and CUDA
# libraries map about 2.7 GB: the memory check passes (the machine has the memory), LibTorch's
# allocation does not.
big=(--max-position-embeddings 24000000)
RC=0
(ulimit -v 5000000 && exec "$TRAIN" "${TINY[@]}" "${big[@]}") >out.txt 2>err.txt || RC=$?
assert_eq 1 "$RC" "exit status under ulimit -v"
assert_contains err.txt "megatron_train: error: LibTorch: "
assert_contains err.txt "can't allocate memory"
assert_eq 1 "$(wc -l <err.txt)" "lines on stderr"
RC=0
(ulimit -v 5000000 && MEGATRON_BACKTRACE=1 exec "$TRAIN" "${TINY[@]}" "${big[@]}") >out.txt 2>err.txt || RC=$?
assert_eq 1 "$RC" "exit status under ulimit -v with MEGATRON_BACKTRACE=1"
assert_contains err.txt "frame #"

step "standard output is checked at exit"
RC=0
"$TRAIN" --help >/dev/full 2>err.txt || RC=$?
assert_eq 1 "$RC" "exit status of megatron_train --help >/dev/full"
assert_contains err.txt "megatron_train: error: cannot write to standard output"

echo "PASS"
