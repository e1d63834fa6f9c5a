"""Each node's NCCL log, as preflight parses it, with NCCL 2.22's lazily printed channels (issue 15, point 2):
the world communicator's `via NET/IB` lines printed after the node-local communicator was made are not a
"P2P is off" (ND105) on a healthy node."""

from __future__ import annotations

import shutil
from pathlib import Path

from nccl_doctor.bench import Backend
from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_summary

LOG = Path(__file__).resolve().parents[3] / "fixtures" / "logs" / "nccl-2.22-lazy-connect-world-channels-after-intra-comm.log"


def test_a_healthy_nodes_lazily_connected_log_has_no_intra_node_finding(tmp_path):
    shutil.copy(LOG, tmp_path / "alpha.4001.log")
    summary = nccl_log_summary(tmp_path, Backend.NCCL, host="alpha")
    codes = {f.code: f.severity.value for f in nccl_log_findings([summary])}
    assert "ND105" not in codes and codes.get("ND101") == "pass"
    assert summary.intra_node == {"transports": ["P2P/CUMEM/read"]}
    local = next(c for c in summary.communicators or [] if c["id"] == "0x1b2c3d4e5f607182")
    assert local["intra_node"] == ["P2P/CUMEM/read"] and local["nnodes"] == 1
