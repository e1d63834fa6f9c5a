#!/bin/bash
# nccl-doctor preflight under Open MPI (or another PMIx launcher), one task per node: it reads
# OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK (PMIx: PMIX_RANK, with --nnodes), and node 0's address from
# MASTER_ADDR, which mpirun passes with -x. preflight starts one rank per GPU on each node itself.
#   examples/mpirun.sh node1,node2 [preflight options...]
set -euo pipefail
HOSTS=${1:?usage: $0 HOST1,HOST2,... [preflight options...]}
shift
FIRST=${HOSTS%%,*}
NODES=$(( $(tr -cd , <<<"$HOSTS" | wc -c) + 1 ))
export MASTER_ADDR=$FIRST MASTER_PORT=${MASTER_PORT:-29500}
export NCCL_DOCTOR_SECRET=${NCCL_DOCTOR_SECRET:-$(openssl rand -hex 16)}
mpirun -np "$NODES" -N 1 --host "$HOSTS" -x MASTER_ADDR -x MASTER_PORT -x NCCL_DOCTOR_SECRET -x PATH \
    nccl-doctor preflight --timeout 300 "$@"
