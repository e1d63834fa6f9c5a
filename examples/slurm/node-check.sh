#!/bin/bash
# nccl-doctor as a Slurm Prolog or HealthCheckProgram: probe this node; on FAIL, drain it with the finding's
# code in the reason (`sinfo -R`: "nccl-doctor ND216: NCCL_SOCKET_IFNAME=eth9: no interface 'eth9'") and
# refuse the job here. slurm.conf lines: slurm.conf.example beside this file.
#
# Slurm runs it as root (SlurmdUser) with no PATH and none of the job's environment, so the settings the
# jobs use come from a root-owned file of shell assignments, $NCCL_DOCTOR_ENV (default
# /etc/default/nccl-doctor), for example:
#   PATH=/opt/nccl-doctor/bin:$PATH           # where `pip install nccl-doctor` put the command
#   NCCL_SOCKET_IFNAME==ib0                   # what your jobs export (NCCL_*, GLOO_SOCKET_IFNAME...)
#   NCCL_DOCTOR_PROM_DIR=/var/lib/node_exporter/textfile   # optional: metrics for node_exporter
#   NCCL_DOCTOR_LOG=/var/log/nccl-doctor-node-check.log    # the probe's report (Slurm discards stdout)
#
# Exit codes: 0 pass, warn, or the probe could not run (2: a broken install never blocks jobs, the log
# says why); 1 FAIL: the node is drained (or the report says why it could not be) and, as a Prolog, the
# job does not start here (Slurm requeues it).
set -u
PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin
env_file=${NCCL_DOCTOR_ENV:-/etc/default/nccl-doctor}
if [ -r "$env_file" ]; then
    # sourced as root: only a file that root (or the caller) owns and nobody else can write
    read -r owner mode < <(stat -Lc '%u %a' "$env_file")
    if [ "$owner" != 0 ] && [ "$owner" != "$(id -u)" ] || [ $((8#$mode & 8#022)) -ne 0 ]; then
        echo "nccl-doctor node check: not reading $env_file: owned by uid $owner, mode $mode" \
            >>"${NCCL_DOCTOR_LOG:-/dev/stderr}"
        exit 0
    fi
    set -a
    # shellcheck disable=SC1090
    . "$env_file"
    set +a
fi
# a HealthCheckProgram gets no node name: use the host name, as NHC does (set SLURMD_NODENAME in the
# env file where your NodeName differs from it)
export SLURMD_NODENAME=${SLURMD_NODENAME:-$(hostname -s)}

args=(probe --drain-on-fail)
if [ -n "${NCCL_DOCTOR_PROM_DIR:-}" ]; then
    args+=(--prom-out "$NCCL_DOCTOR_PROM_DIR/nccl_doctor_probe.prom")
fi
# a HealthCheckProgram is killed after 60 s; probe takes well under a second
timeout 50 nccl-doctor "${args[@]}" >>"${NCCL_DOCTOR_LOG:-/dev/null}" 2>&1
rc=$?
[ "$rc" -eq 1 ] && exit 1
exit 0
