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
}
