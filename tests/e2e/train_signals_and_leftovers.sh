#!/usr/bin/env bash
# Lifecycle of megatron_train: nohup protects a training, a dead
# run's iter_XXXXXXX.tmp.<pid>/ goes at the next start, a second training saving to the same
# --save is refused naming the first, and a tracker naming a missing folder says so.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN
require flock nohup

# A tiny model on the golden dataset (as tests/unit/train/test_trainer.cpp).
RUN=("$TRAIN" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3
     --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --data-path "$GOLDEN"
     --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-interval 100
     --eval-iters 1 --make-vocab-size-divisible-by 64)

dead_pid() {
  sh -c 'exit 0' &
  local pid=$!
  wait "$pid"
  echo "$pid"
}

step "a dead run's temporary checkpoint folder and cache files go at the next start"
ckpt="$WORK/ckpt"
dead=$(dead_pid)
mkdir -p "$ckpt/iter_0000002.tmp.$dead/mp_rank_00" "$WORK/cache"
printf 'partial' >"$ckpt/iter_0000002.tmp.$dead/mp_rank_00/model.safetensors"
printf 'partial' >"$WORK/cache/0123-GPTDataset-train-document_index.npy.tmp.$dead.0"
assert_succeeds "${RUN[@]}" --train-iters 2 --save "$ckpt" --save-interval 2
assert_line "$WORK/out.txt" "removed 1 temporary left by runs that did not finish: $ckpt/iter_0000002.tmp.$dead"
assert_line "$WORK/out.txt" \
  "removed 1 temporary left by runs that did not finish: $WORK/cache/0123-GPTDataset-train-document_index.npy.tmp.$dead.0"
[[ ! -e $ckpt/iter_0000002.tmp.$dead && ! -e $WORK/cache/0123-GPTDataset-train-document_index.npy.tmp.$dead.0 ]] ||
  fail "the dead run's temporaries are still there"
[[ -d $ckpt/iter_0000002/mp_rank_00 && ! -e $ckpt/.lock ]] || fail "expected iter_0000002/ and no lock file left"
ok "removed, and the new checkpoint saved"

step "a second training saving to the same --save is refused at start, naming the first"
exec 9>"$ckpt/.lock"
flock -n 9 || fail "cannot take the lock for the test"
printf '%s\n%s\n' "$$" "megatron_train --save $ckpt (the first run)" >&9
assert_fails_with "--save $ckpt: process $$ (megatron_train --save $ckpt (the first run)) is writing the same output" \
  "${RUN[@]}" --train-iters 4 --save "$ckpt" --save-interval 2 --load "$ckpt"
[[ ! -e $ckpt/iter_0000004 ]] || fail "the refused run saved a checkpoint"
exec 9>&-

step "nohup: SIGHUP sent during the run is ignored, as nohup asked"
"$(command -v nohup)" "${RUN[@]}" --train-iters 3 >"$WORK/out.txt" 2>"$WORK/err.txt" &
pid=$!
while [[ $(readlink "/proc/$pid/exe" 2>/dev/null) != "$TRAIN" ]] && kill -0 "$pid" 2>/dev/null; do sleep 0.001; done
while kill -HUP "$pid" 2>/dev/null; do sleep 0.01; done
RC=0
wait "$pid" || RC=$?
[[ $RC -eq 0 ]] || { show "$WORK/err.txt" stderr; fail "megatron_train under nohup died on SIGHUP (exit $RC)"; }
ok "finished (exit 0)"

step "a tracker naming an iteration whose folder is absent says so"
mkdir -p "$WORK/broken"
printf '7' >"$WORK/broken/latest_checkpointed_iteration.txt"
assert_fails_with "names iteration 7 but iter_0000007/ does not exist" "${RUN[@]}" --train-iters 8 --load "$WORK/broken"

echo "PASS"
