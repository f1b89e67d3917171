#!/usr/bin/env bash
# --tensorboard-dir: TensorBoard's own reader (tensorboard from PyPI, in .venv)
# finds every value the log prints under Megatron's tags, across a resumed run's two event files;
# the optional tags follow their flags; an unusable folder is refused by name.
# PYTHON (from the build's e2e.env) must have tensorboard (scripts/setup.sh puts it into .venv).
set -uo pipefail
# shellcheck source=lib.sh
source "$(dirname "$0")/lib.sh"
need_tools TRAIN
READ=("$PYTHON" "$(dirname "$(realpath "$0")")/tensorboard_read.py")
"$PYTHON" -c "import tensorboard" 2>/dev/null || fail "$PYTHON cannot import tensorboard (run scripts/setup.sh)"

RUN=("$TRAIN" --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 32
     --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --lr 3e-3
     --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --data-path "$GOLDEN"
     --data-cache-path "$WORK/cache" "${TOKENIZER[@]}" --log-interval 1 --eval-interval 3
     --eval-iters 1 --make-vocab-size-divisible-by 64 --train-iters 6)

step "fp16 with every optional tag: the log's values are TensorBoard's"
assert_succeeds "${RUN[@]}" --fp16 --initial-loss-scale 65536 --tensorboard-dir "$WORK/tb1" \
  --log-validation-ppl-to-tensorboard --log-timers-to-tensorboard --log-throughput --log-world-size-to-tensorboard
assert_line "$WORK/out.txt" "> setting tensorboard ..."
files=("$WORK"/tb1/events.out.tfevents.*)
[[ ${#files[@]} -eq 1 && -s ${files[0]} ]] || fail "expected one event file in tb1/, found: ${files[*]}"
# Megatron's dense-GPT FLOPs per token for this model (layers 2, hidden 32, ffn 128, 4 heads of 32
# channels, no GQA, vocabulary padded to 50304, seq 32): 6 (L h ffn 2 + L h 3q + L q h + h V + s L q).
FLOPS_PER_TOKEN=$(( 6 * (2*32*128*2 + 2*32*(32 + 2*32) + 2*32*32 + 32*50304 + 32*2*32) ))
"${READ[@]}" "$WORK/tb1" "$WORK/out.txt" --flops-per-token "$FLOPS_PER_TOKEN" --expect-tag iteration-time --expect-tag throughput \
  --expect-tag "world-size vs samples" --expect-tag "lm loss validation ppl vs samples" ||
  fail "TensorBoard's reading of tb1/ differs from the log"

step "defaults: fp32, no ppl, no timers, --no-log-loss-scale-to-tensorboard; a resumed run adds a second file"
assert_succeeds "${RUN[@]}" --tensorboard-dir "$WORK/tb2" --no-log-loss-scale-to-tensorboard --clip-grad 1.0 \
  --save "$WORK/ckpt" --save-interval 3 --exit-interval 3
cp "$WORK/out.txt" "$WORK/first.txt"
sleep 1  # event file names carry the second: a second file in the same second gets a new suffix anyway
assert_succeeds "${RUN[@]}" --tensorboard-dir "$WORK/tb2" --no-log-loss-scale-to-tensorboard --clip-grad 1.0 \
  --load "$WORK/ckpt" --save "$WORK/ckpt" --save-interval 3
cat "$WORK/first.txt" "$WORK/out.txt" >"$WORK/both.txt"
files=("$WORK"/tb2/events.out.tfevents.*)
[[ ${#files[@]} -eq 2 ]] || fail "expected two event files in tb2/, found: ${files[*]}"
"${READ[@]}" "$WORK/tb2" "$WORK/both.txt" --absent-tag loss-scale --absent-tag "lm loss validation ppl" \
  --absent-tag iteration-time --absent-tag world-size --expect-tag "grad-norm" ||
  fail "TensorBoard's reading of tb2/ differs from the two logs"
grep -q "iteration        6/" "$WORK/both.txt" || fail "the resumed run did not reach iteration 6"

step "a --tensorboard-dir that cannot be a folder is refused by name"
printf 'x' >"$WORK/not_a_folder"
assert_fails_with "--tensorboard-dir $WORK/not_a_folder: cannot create the folder" \
  "${RUN[@]}" --tensorboard-dir "$WORK/not_a_folder"
ok "refused"

step "event files that cannot be written (a full disk: a 1-block file size limit) cost the curves, not the run"
# Output through a pipe, so that the limit applies only to the files megatron_train writes itself
# (the data caches exist from the runs above).
assert_succeeds bash -c 'set -o pipefail; (trap "" XFSZ; ulimit -f 1; exec "$@" 2>&1) | cat' _ \
  "${RUN[@]}" --tensorboard-dir "$WORK/tb_full" --tensorboard-queue-size 1
assert_contains "$WORK/out.txt" "cannot write TensorBoard events to $WORK/tb_full/"
assert_contains "$WORK/out.txt" "on are lost, training goes on without them"
grep -q "iteration        6/" "$WORK/out.txt" || fail "training did not reach iteration 6"
ok "warned, trained to the end, exit 0"
