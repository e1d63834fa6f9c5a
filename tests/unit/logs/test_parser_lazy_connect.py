"""NCCL >= 2.22 connects lazily (issue 15, point 2): a communicator's channel lines are printed at the
collective that first uses each algorithm, so they can come after another communicator's init lines and
would be charged to that one. A channel line names two ranks of its communicator; one whose ``nranks`` is
not above both cannot be its communicator.

The fixture is written from NCCL v2.22.3-1's own formats: the line prefix ``%s:%d:%d [%d] NCCL INFO``
(src/debug.cc), ``ncclCommInitRank comm %p rank %d nranks %d cudaDev %d nvmlDev %d busId %lx commId 0x%llx
- Init START|COMPLETE`` and ``comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d``
(src/init.cc), ``Channel %02d/%d : %d[%d] -> %d[%d] [send|receive] via NET/%s/%d%s%s`` (src/transport/net.cc
sendSetup/recvSetup), ``Channel %02d/%01d : %d[%d] -> %d[%d] via P2P/%s%s%s`` (src/transport/p2p.cc),
``Connected all rings|trees`` (src/transport/generic.cc, printed when the lazy connect runs: src/group.cc
ncclCollPreconnectFunc; src/init.cc: ``runtimeConn = cuMemSupport && NCCL_RUNTIME_CONNECT`` (default 1)).
"""

from __future__ import annotations

from pathlib import Path

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

LOG = Path(__file__).resolve().parents[3] / "fixtures" / "logs" / "nccl-2.22-lazy-connect-world-channels-after-intra-comm.log"
WORLD, ALPHA_LOCAL, RAIL0 = "0x6c1f0a2b3c4d5e6f", "0x1b2c3d4e5f607182", "0x3d4e5f6071829304"


def test_the_worlds_lazily_printed_channels_are_not_charged_to_the_node_local_comm():
    result = parse_paths([str(LOG)])
    report = diagnose(result)
    assert "ND105" not in {f.code for f in report.findings}  # no "P2P is off" on a healthy node
    assert report.verdict.value == "pass"
    assert report.data["intra_node"]["transports"] == ["P2P/CUMEM/read"]
    local = result.comms[ALPHA_LOCAL]
    assert not local.net and set(local.intra) == {"P2P/CUMEM/read"}
    # the world's tree (after the node-local comm) and its send/recv (after the cross-node comm) are its own
    world = result.comms[WORLD]
    assert ("alpha", 2, "IB", True, "send") in world.net
    assert set(result.comms[RAIL0].rank_host) == {0, 1}


def test_no_communicator_names_a_rank_beyond_its_size():
    result = parse_paths([str(LOG)])
    for comm in result.comms.values():
        assert comm.nranks is None or max(comm.rank_host) < comm.nranks, (comm.key, sorted(comm.rank_host))


def test_a_channel_line_no_known_comm_can_hold_is_kept_aside_not_charged():
    """Rank 0 of a 2-rank comm prints a line about rank 5: its own comm's init lines were lost (a cut log)."""
    lines = [
        "alpha:1:2 [0] NCCL INFO ncclCommInitRank comm 0xa rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 "
        "commId 0x11 - Init START",
        "alpha:1:2 [0] NCCL INFO comm 0xa rank 0 nRanks 2 nNodes 1 localRanks 2 localRank 0 MNNVL 0",
        "alpha:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via P2P/CUMEM/read",
        "alpha:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 5[0] [send] via NET/IB/0/GDRDMA",
        "alpha:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[1] via SHM/direct/direct",
    ]
    result = parse_lines(lines)
    local = result.comms["0x11"]
    assert not local.net and set(local.rank_host) == {0, 1}
    assert set(local.intra) == {"P2P/CUMEM/read", "SHM/direct/direct"}  # its own lines still count
    assert result.comms["unidentified"].net
