"""This node's probe as preflight posts it: what a multi-node run makes worse, and the rank counts node 0
compares."""

from __future__ import annotations

from nccl_doctor.node import check, compare, probe_node
from nccl_doctor.preflight.probe import multi_node_findings, rank_facts
from nccl_doctor.report import Severity


def test_loopback_gloo_interface_fails_the_probe_on_two_nodes():
    env = {"GLOO_SOCKET_IFNAME": "lo", "PATH": "/bin"}
    node = probe_node("/", env)
    warn = [f for f in check(node) if f.code == "ND216"]
    assert [f.severity for f in warn] == [Severity.WARN]  # the probe on its own: a warning
    [f] = [f for f in multi_node_findings(check(node), node, 2) if f.code == "ND216"]
    assert f.severity is Severity.FAIL and "spans 2 nodes" in f.message and f.where.iface == "lo"


def test_uneven_ranks_per_node_fail_naming_the_odd_node_and_the_cause():
    base = {"version.torch": "2.13.0"}
    nodes = [dict(base, host=f"n{i}", **rank_facts(8, "8 visible GPUs")) for i in (1, 2, 4)]
    nodes.insert(2, dict(base, host="n3", **{"ranks.per_node": "7", "ranks.source": "7 visible GPUs"}))
    [f] = compare(nodes)
    assert f.code == "ND408" and f.severity is Severity.FAIL and f.where.host == "n3"
    assert f.message == ("ranks per node differ across nodes: 8 on n[1-2,4] (8 visible GPUs); 7 on n3 "
                         "(7 visible GPUs); no rank was started")
    assert f.fix is not None and "--nproc-per-node" in f.fix and "--gpus-per-node" in f.fix
    # equal counts from different causes agree
    same = [dict(base, host="a", **{"ranks.per_node": "2", "ranks.source": "--nproc-per-node 2"}),
            dict(base, host="b", **{"ranks.per_node": "2", "ranks.source": "2 visible GPUs"})]
    assert compare(same) == []
