#!/usr/bin/env bash
# Sets up and builds (scripts/setup.sh), then runs every test that can run on this machine:
# CTest labels unit, mpi (many ranks under mpirun), e2e and slurm (a throw-away Slurm the test starts
# and stops itself); gpu tests skip themselves without a GPU.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/setup.sh"
ctest --test-dir "${MEGATRON_BUILD_DIR:-$ROOT/build}" --output-on-failure -j "$(nproc)" "$@"
