#!/usr/bin/env bash
# mpirun for the multi-rank tests on one machine: allowed as root (CI runs as root), more ranks
# than cores (--oversubscribe; Open MPI then yields while idle), no binding, and only the
# self/shared-memory transports (no network probing; single-copy off, since containers often
# forbid the ptrace-based CMA). Usage: tests/mpirun.sh -np N program [args...]; MEGATRON_MPIEXEC
# names the launcher (default: mpirun on the PATH; CMake passes the one it found).
set -euo pipefail
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl="self,vader" OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_hwloc_base_binding_policy=none
export OMPI_MCA_mpi_yield_when_idle=1
exec "${MEGATRON_MPIEXEC:-mpirun}" "$@"
