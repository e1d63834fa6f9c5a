"""Two ranks that NCCL put on two nodes, on machines that share the hostname ``vm`` (the first GPU run's
``NCCL_HOSTID`` fake hosts: NCCL logged ``nNodes 2`` / ``localRanks 1``): their NET/Socket channels are
inter-node, not "NET/Socket (same node)" with an ND105 WARN and an unknown inter-node transport (issue 21)."""

from __future__ import annotations

from pathlib import Path

import pytest

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_paths

FAKE2 = Path(__file__).resolve().parents[3] / "fixtures/gpu/h200-2026-12-04/fake2"
RUNS = ("fake2-healthy", "fake2-peer-missing-at-p2p-init", "fake2-peer-stalled-in-collective")


@pytest.fixture(scope="module")
def healthy():
    result = parse_paths([str(p) for p in sorted(FAKE2.glob("fake2-healthy.vm.*.nccl.log"))])
    return result, diagnose(result)


def test_the_fixture_is_two_nccl_nodes_on_one_hostname(healthy):
    result, _ = healthy
    assert set(result.hosts) == {"vm"}
    assert {(c.nranks, c.nnodes, c.local_ranks) for c in result.comms.values()} == {(2, 2, 1)}
    assert all(c.rank_per_node for c in result.comms.values())


def test_their_net_socket_channels_are_inter_node(healthy):
    _, report = healthy
    assert report.data["inter_node"]["transport"] == "Socket"
    assert report.data["intra_node"]["transports"] == []
    assert "ND105" not in {f.code for f in report.findings}
    assert "same node" not in report.summary


@pytest.mark.parametrize("run", RUNS)
def test_every_fake2_run_reads_socket_between_nodes(run):
    report = diagnose(parse_paths([str(p) for p in sorted(FAKE2.glob(f"{run}.vm.*.nccl.log"))]))
    assert "ND105" not in {f.code for f in report.findings}
    assert not any("same node" in t for t in report.data["intra_node"]["transports"])
