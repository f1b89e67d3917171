#!/usr/bin/env bash
# convert_checkpoint leaves nothing half-written: SIGTERM in the middle of an export removes its
# temporary folder; a temporary left by a killed export is removed by the next one; an import
# writes only into a new or empty folder, and not into one a training run holds.
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN CONVERT

SMALL=(--num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32 --max-position-embeddings 32
       --micro-batch-size 2 --global-batch-size 2 --lr 1e-3 --mock-data "${TOKENIZER[@]}" --log-interval 1
       --eval-interval 100 --eval-iters 1)
export_to() {  # export_to CHECKPOINT FOLDER
  "$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$1" --save-dir "$2" \
    --vocab-file "$VOCAB" --merge-file "$MERGES"
}

step "SIGTERM during an export of a larger model: no <save-dir>.tmp.<pid> stays"
# About 120 MB of float32 weights: writing them takes long enough to be caught.
assert_succeeds "$TRAIN" "${SMALL[@]}" --num-layers 8 --hidden-size 256 --train-iters 1 --save "$WORK/big" --save-interval 1
"$CONVERT" --model-type GPT --loader megatron --saver hf --load-dir "$WORK/big" --save-dir "$WORK/big.hf" \
  --vocab-file "$VOCAB" --merge-file "$MERGES" >"$WORK/export_out.txt" 2>&1 &
job=$!  # the converter's own pid: the signal goes to it
for _ in $(seq 600); do
  compgen -G "$WORK/big.hf.tmp.*" >/dev/null && break
  sleep 0.02
done
compgen -G "$WORK/big.hf.tmp.*" >/dev/null || { wait $job; fail "the export finished before it could be stopped"; }
kill -TERM $job
rc=0
wait $job || rc=$?
[[ $rc -eq 143 ]] || { show "$WORK/export_out.txt" output; fail "expected the export to end by SIGTERM (143), got $rc"; }
left=$(compgen -G "$WORK/big.hf*" || true)
[[ -z $left ]] || fail "left behind: $left"
ok "exit 143, nothing under big.hf*"

step "a temporary of a killed export (its process gone) is removed by the next export"
assert_succeeds "$TRAIN" "${SMALL[@]}" --train-iters 1 --save "$WORK/ckpt" --save-interval 1
mkdir -p "$WORK/out.hf.tmp.999999999/junk"
assert_succeeds export_to "$WORK/ckpt" "$WORK/out.hf"
[[ ! -e $WORK/out.hf.tmp.999999999 ]] || fail "the dead export's temporary is still there"
[[ -f $WORK/out.hf/config.json ]] || fail "the export wrote no config.json"
ok "removed; the export is complete"

step "an import into a folder that is not empty (here the HF source itself) is refused"
assert_fails_with "$WORK/out.hf is not empty" \
  "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/out.hf" --save-dir "$WORK/out.hf"
assert_succeeds "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/out.hf" --save-dir "$(fresh_dir empty)"

step "an import into the --save folder of a running training is refused, naming the run"
live=$(fresh_dir live)
rm -rf "$live"
"$TRAIN" "${SMALL[@]}" --train-iters 100000 --save "$live" --save-interval 100000 >"$WORK/live_out.txt" 2>&1 &
trainer=$!
for _ in $(seq 600); do
  grep -q ' iteration *2/' "$WORK/live_out.txt" && break
  sleep 0.1
done
grep -q ' iteration *2/' "$WORK/live_out.txt" || { kill -9 $trainer; fail "training did not start"; }
rm -f "$WORK"/live/run_config.json  # an otherwise empty folder: only the lock keeps the import out
assert_fails_with "is writing the same output" \
  "$CONVERT" --model-type GPT --loader hf --saver megatron --load-dir "$WORK/out.hf" --save-dir "$live"
kill -TERM $trainer
wait $trainer || true  # ended by the signal (no --exit-signal-handler here)
