# Multi-rank training helpers for the end-to-end scripts that compare layouts; sourced after lib.sh.
# shellcheck shell=bash
need_tools TRAIN MPIEXEC
export MEGATRON_MPIEXEC  # the launcher tests/mpirun.sh runs

ITERS=20
# layout_flags TP LAYERS: the flags every layout comparison trains with: a small GPT on the golden
# dataset, no dropout, global batch 8 of micro-batches of 2 (4 per iteration at DP 1), validation
# every 10 iterations. The vocabulary is padded to a multiple of 512 at every TP size
# (--make-vocab-size-divisible-by is multiplied by TP): every layout has the same 50688-row embedding.
layout_flags() {
  echo --num-layers "$2" --hidden-size 64 --num-attention-heads 4 --seq-length 32 \
    --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 8 --lr 3e-3 --min-lr 1e-4 \
    --lr-decay-style cosine --lr-warmup-iters 2 --clip-grad 1.0 --weight-decay 0.1 \
    --attention-dropout 0 --hidden-dropout 0 --data-path "$GOLDEN" --data-cache-path "$WORK/cache" \
    --vocab-file "$VOCAB" --merge-file "$MERGES" --tokenizer-type GPT2BPETokenizer --log-interval 1 \
    --eval-interval 10 --eval-iters 1 --make-vocab-size-divisible-by $((512 / $1)) --train-iters $ITERS \
    --tensor-model-parallel-size "$1"
}

# shared_log CASE: the log a case of layouts_match_single_process.sh kept in $LAYOUT_REFERENCES
# (CTest runs those cases first, as fixtures); fails naming the case to run when it is not there.
shared_log() {
  local file=$LAYOUT_REFERENCES/$1.txt
  [[ -s $file ]] || fail "$file is missing: run 'layouts_match_single_process.sh $1' first (ctest does, as a fixture)"
  echo "$file"
}
reference_log() { shared_log "single_process_$1"; }  # reference_log LAYERS: the single-process run

mpi() {  # mpi NP ARGS...: megatron_train on NP ranks
  local np=$1
  shift
  "$MPIEXEC" -n "$np" --oversubscribe --bind-to none "$TRAIN" "$@"
}

# compare_losses REF FILE WHAT [FIRST [TOL]]: every iteration of FILE (from FIRST to ITERS) within
# TOL (default 1e-5) relative of REF's lm loss.
compare_losses() {
  compare_iterations "$1" "$2" "$3" "${4:-1}" "$ITERS" "${5:-1e-5}" "lm loss"
}

# rank_pid PATTERN RANK: the pid of the megatron_train rank RANK whose command line has PATTERN,
# looked for again for up to 10 s (a single look has been seen to miss a rank that was training);
# if there is none, prints nothing on stdout and the matching processes with their ranks on stderr.
rank_pid() {
  local pid
  for _ in $(seq 100); do
    for pid in $(pgrep -f -- "$1"); do
      if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
        echo "$pid"
        return
      fi
    done
    sleep 0.1
  done
  echo "rank_pid: no process with '$1' in its command line has OMPI_COMM_WORLD_RANK=$2; matching processes:" >&2
  for pid in $(pgrep -f -- "$1"); do
    echo "  $pid $(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | cut -c1-120)... rank=$(tr '\0' '\n' \
      <"/proc/$pid/environ" 2>/dev/null | grep '^OMPI_COMM_WORLD_RANK=' || echo '(none readable)')" >&2
  done
}
