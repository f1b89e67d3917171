# Multi-rank training helpers for the end-to-end scripts that compare layouts; sourced after lib.sh
# by scripts called with lib.sh's six arguments and then MPIEXEC (tests/mpirun.sh).
# shellcheck shell=bash
MPIEXEC=${MPIEXEC:?"set MPIEXEC before sourcing mpi_lib.sh"}
[[ -n $TRAIN ]] || fail "needs megatron_train's path as the sixth argument"

mpi() {  # mpi NP ARGS...: megatron_train on NP ranks
  local np=$1
  shift
  "$MPIEXEC" -n "$np" --oversubscribe --bind-to none "$TRAIN" "$@"
}

# compare_losses REF FILE WHAT [FIRST [TOL]]: every iteration of FILE (from FIRST to ITERS) within
# TOL (default 1e-5) relative of REF's.
compare_losses() {
  local first=${4:-1} tol=${5:-1e-5}
  losses "$1" >"$WORK/ref.txt"
  losses "$2" >"$WORK/got.txt"
  awk -v first="$first" -v what="$3" -v last="$ITERS" -v tol="$tol" '
    NR == FNR { ref[$1] = $2; next }
    { got[$1] = $2 }
    END {
      n = 0; worst = 0
      for (i = first; i <= last; i++) {
        if (!(i in ref) || !(i in got)) { printf "FAIL: %s: iteration %d missing\n", what, i > "/dev/stderr"; exit 1 }
        d = ref[i] - got[i]; if (d < 0) d = -d; rel = d / ref[i]
        if (rel > worst) worst = rel
        if (rel > tol) { printf "FAIL: %s: iteration %d lm loss %s, single process %s (relative %.2e)\n", what, i, got[i], ref[i], rel > "/dev/stderr"; exit 1 }
        n++
      }
      printf "   ok: %s: %d iterations within %s of the single-process run (worst %.1e)\n", what, n, tol, worst
    }' "$WORK/ref.txt" "$WORK/got.txt" || { show "$2" "$3 output"; exit 1; }
}

# rank_pid PATTERN RANK: the pid of the megatron_train rank RANK whose command line has PATTERN.
rank_pid() {
  local pid
  for pid in $(pgrep -f -- "$1"); do
    if tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$pid"
      return
    fi
  done
}
