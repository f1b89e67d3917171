# A throw-away Slurm for the tests: slurmctld and two slurmd ("fake nodes" n1, n2, each
# declaring CPUS_PER_NODE CPUs) on this host, under a fresh folder, with settings measured to work
# on a single container host: linuxproc process tracking, no task plugin, cons_tres over
# CPUs, per-node PMIx and Open MPI shared-memory folders, Open MPI on loopback. Sourced; the
# caller runs slurm_start, then sbatch/srun/squeue with SLURM_CONF exported, and slurm_stop (also
# from its EXIT trap: every daemon and job step goes, even when the test fails).
# Authentication is auth/none: the daemons and clients are one user on one host; munge would add
# a daemon and a key for no test value.
# shellcheck shell=bash

SLURM_NODES=(n1 n2)
CPUS_PER_NODE=${CPUS_PER_NODE:-8}

# slurm_start DIR: writes DIR/etc/slurm.conf, starts the daemons, waits until both nodes are idle.
slurm_start() {
  SLURM_DIR=$1
  local host base etc
  host=$(hostname)
  rm -rf "$SLURM_DIR"
  etc=$SLURM_DIR/etc
  mkdir -p "$etc" "$SLURM_DIR"/{state,log,tmp,ompi} "${SLURM_NODES[@]/#/$SLURM_DIR/spool/}"
  base=$((20000 + RANDOM % 20000))
  cat >"$SLURM_DIR/task_prolog.sh" <<PROLOG
#!/bin/sh
# Per fake node: Open MPI's shared-memory files must not collide between nodes of one host.
mkdir -p "$SLURM_DIR/ompi/\$SLURMD_NODENAME"
echo "export OMPI_MCA_btl_vader_backing_directory=$SLURM_DIR/ompi/\$SLURMD_NODENAME"
PROLOG
  chmod +x "$SLURM_DIR/task_prolog.sh"
  {
    echo "ClusterName=megatron-test"
    echo "SlurmctldHost=$host(127.0.0.1)"
    echo "SlurmctldPort=$base"
    echo "SlurmUser=$(id -un)"
    echo "SlurmdUser=$(id -un)"
    echo "AuthType=auth/none"
    echo "CredType=cred/none"
    # A job step credential's lifetime, which is also how long a requeued job waits before it may
    # start again (slurmd refuses the same job id until then: "Job credential revoked"); the
    # default 120 s, shortened for the tests.
    echo "AuthInfo=cred_expire=10"
    echo "StateSaveLocation=$SLURM_DIR/state"
    echo "SlurmdSpoolDir=$SLURM_DIR/spool/%n"
    echo "SlurmctldPidFile=$SLURM_DIR/slurmctld.pid"
    echo "SlurmdPidFile=$SLURM_DIR/slurmd-%n.pid"
    echo "SlurmctldLogFile=$SLURM_DIR/log/slurmctld.log"
    echo "SlurmdLogFile=$SLURM_DIR/log/slurmd-%n.log"
    echo "TmpFS=$SLURM_DIR/tmp/%n"
    echo "ProctrackType=proctrack/linuxproc"
    echo "TaskPlugin=task/none"
    echo "TaskProlog=$SLURM_DIR/task_prolog.sh"
    echo "SelectType=select/cons_tres"
    echo "SelectTypeParameters=CR_CPU"
    echo "SlurmdParameters=config_overrides"
    echo "MpiDefault=none"
    echo "ReturnToService=2"
    echo "JobRequeue=1"
    echo "KillWait=20"
    echo "MinJobAge=600"
    echo "InactiveLimit=0"
    echo "SchedulerParameters=sched_interval=1"
    echo "JobCompType=jobcomp/none"
    echo "SlurmctldDebug=info"
    echo "SlurmdDebug=info"
    # SPANK plugins (pyxis, for scripts/test_container.sh): SLURM_PLUGSTACK names their config.
    [[ -n ${SLURM_PLUGSTACK:-} ]] && echo "PlugStackConfig=$SLURM_PLUGSTACK"
    local i=1 node
    for node in "${SLURM_NODES[@]}"; do
      echo "NodeName=$node NodeHostname=$host NodeAddr=127.0.0.1 Port=$((base + i)) CPUs=$CPUS_PER_NODE State=UNKNOWN"
      i=$((i + 1))
    done
    echo "PartitionName=test Nodes=$(IFS=,; echo "${SLURM_NODES[*]}") Default=YES MaxTime=INFINITE State=UP"
  } >"$etc/slurm.conf"
  for node in "${SLURM_NODES[@]}"; do mkdir -p "$SLURM_DIR/tmp/$node"; done
  export SLURM_CONF=$etc/slurm.conf
  # Open MPI between fake nodes of one host: loopback only (else a 4-rank all-reduce hangs).
  export OMPI_MCA_btl_tcp_if_include=lo OMPI_MCA_oob_tcp_if_include=lo
  /usr/sbin/slurmctld -i >"$SLURM_DIR/log/slurmctld.out" 2>&1 || { cat "$SLURM_DIR/log/slurmctld.out" >&2; return 1; }
  for node in "${SLURM_NODES[@]}"; do
    /usr/sbin/slurmd -N "$node" >"$SLURM_DIR/log/slurmd-$node.out" 2>&1 || { cat "$SLURM_DIR/log/slurmd-$node.out" >&2; return 1; }
  done
  local waited=0
  until [[ $(sinfo -h -o '%t' -p test 2>/dev/null | sort -u) == idle ]]; do
    if (( waited++ > 150 )); then
      echo "Slurm did not come up in 15 s:" >&2
      sinfo -N >&2 || true
      tail -n 20 "$SLURM_DIR"/log/*.log >&2 || true
      return 1
    fi
    sleep 0.1
  done
}

# slurm_stop: cancels every job, stops the daemons and their job steps, keeps the logs.
slurm_stop() {
  [[ -n ${SLURM_DIR:-} && -f ${SLURM_CONF:-} ]] || return 0
  scancel --full --quiet -u "$(id -un)" 2>/dev/null || true
  local f pid
  for f in "$SLURM_DIR"/slurmd-*.pid "$SLURM_DIR"/slurmctld.pid; do
    [[ -f $f ]] && pid=$(cat "$f") && kill "$pid" 2>/dev/null
  done
  sleep 0.5
  # Job steps whose daemons are gone: slurmstepd and the tasks under this cluster's folder.
  pkill -9 -f "slurmstepd.*$SLURM_DIR" 2>/dev/null || true
  for f in "$SLURM_DIR"/slurmd-*.pid "$SLURM_DIR"/slurmctld.pid; do
    [[ -f $f ]] && pid=$(cat "$f") && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

# slurm_wait JOBID [SECONDS]: waits until the job (every array task) has left the queue.
slurm_wait() {
  local job=$1 limit=${2:-120} waited=0
  while squeue -h -j "$job" 2>/dev/null | grep -q .; do
    (( waited++ < limit * 10 )) || { echo "job $job still queued after $limit s" >&2; squeue >&2; return 1; }
    sleep 0.1
  done
}

# slurm_state JOBID: the job's final state (COMPLETED, FAILED, ...) from slurmctld's memory.
slurm_state() {
  scontrol show job "$1" 2>/dev/null | sed -nE 's/.*JobState=([A-Z_]+).*/\1/p' | head -1
}
