"""ND0xx: general, any command."""

from __future__ import annotations

from nccl_doctor.codes.text import CodeText

TEXTS: dict[str, CodeText] = {
    "ND001": CodeText(
        "check-skipped",
        "A check could not run here; the finding says why.",
        (
            "A check that could not run proves nothing either way: a group that was not measured (too few ranks "
            "or nodes, rank counts that do not fit the HSDP mesh) or a skipped NCCL log step leaves that part of "
            "the job unverified. A run that measured nothing at all exits 2 (could not run), never 0."
        ),
        (
            "Give the check what it needs, as the finding says: 2+ ranks per node for intra and 2+ nodes for "
            "inter, the same --nproc-per-node and visible GPUs (CUDA_VISIBLE_DEVICES) on every node, ranks "
            "numbered node by node; on one node use --groups world."
        ),
    ),
    "ND002": CodeText(
        "slurm-drain",
        "--drain-on-fail acted on a FAIL: it drained the failing node in Slurm, or says why it could not.",
        (
            "A node that fails its check keeps taking jobs until someone drains it; a health check or prolog "
            "that drains it (`scontrol update NodeName=... State=DRAIN`) keeps the next job off it. Only the "
            "nodes a FAIL names are drained, never the healthy ones, and never every node of a multi-node "
            "job (a fault on all of them is the job's settings or the network, not the nodes). Drained: PASS, "
            "with the node and the Reason Slurm shows. Not drained: WARN with why (not run by Slurm, no "
            "permission, scontrol missing or refusing); the exit code is the verdict's either way."
        ),
        (
            "Drained: fix the node as the FAIL finding says, then `scontrol update NodeName=<node> "
            "State=RESUME`. Not drained: run it as root or SlurmUser from a Slurm Prolog, HealthCheckProgram "
            "or job step (SLURMD_NODENAME or SLURM_JOB_ID set), with scontrol on the PATH; see examples/slurm/."
        ),
    ),
}
