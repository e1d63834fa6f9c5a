"""Open files at scale: what node 0 needs for nodes x ranks, and the WARN when its hard limit is lower."""

from __future__ import annotations

import resource

from nccl_doctor.preflight.limits import FilesLimit, files_needed
from nccl_doctor.preflight.plan import NodePlan
from nccl_doctor.preflight.verdict import files_limit


def _plan(nnodes: int, nproc: int) -> NodePlan:
    return NodePlan(nnodes=nnodes, node_rank=0, hosts=tuple(f"n{i}" for i in range(nnodes)), head="n0", port=1,
                    nproc=nproc, slurm=True, host="n0", run_id="1.0")


def test_node_0_needs_a_descriptor_per_store_connection():
    assert files_needed(1000, 8) == 1000 * (1 + 8) + 256  # a launcher and 8 ranks per node, ~9k connections


def test_a_hard_limit_too_low_for_the_node_count_is_one_warn():
    f = files_limit(_plan(1000, 8), FilesLimit(before=1024, soft=4096, hard=4096))
    assert f is not None and f.code == "ND413" and f.severity == "warn" and f.where.host == "n0"
    assert f.message.startswith("node 0's open-file limit is 4096 (hard limit 4096, raised from 1024), below the "
                                "about 9256 its store needs for 1000 nodes x 8 ranks")
    assert files_limit(_plan(2, 8), FilesLimit(before=1024, soft=4096, hard=4096)) is None
    unlimited = resource.RLIM_INFINITY
    assert files_limit(_plan(1000, 8), FilesLimit(before=1024, soft=unlimited, hard=unlimited)) is None
    assert files_limit(_plan(1000, 8), None) is None
