"""The pair pass rail by rail across real network-namespace "nodes" (root): every local rank meets the
same local rank of the partner node, and a slow rail is named with its node. The slow rail is the test
seam NCCL_DOCTOR_TEST_SLOW_RANK (one rank's exchanges sleep): the namespaces have one veth each, which
the rails share, so the slow rail is a lagging rank (ND312), the link (the rails' sum) is fine."""

import json
import sys

import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.netns import communicate_or_kill

pytestmark = pytest.mark.netns
SLOW_RANK = 3  # with 2 ranks per node: the second node's local rank 1, rail 1


def run_nodes(cluster, args, env, timeout=180):
    procs = [cluster.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *args], env=env,
                           stdout=-1, stderr=-1, text=True) for n in cluster.nodes]
    outs = [communicate_or_kill(p, timeout) for p in procs]
    docs = [json.loads(o) for o, _ in outs if o.strip()]
    assert len(docs) == 1, "\n".join(e[-2500:] for _, e in outs)
    return [p.returncode for p in procs], docs[0], outs


def test_two_nodes_two_ranks_slow_rail_is_measured_and_named(cluster_factory, venv_env):
    """Two nodes (one link: a CPU-bound veth, whose rails' sum varies 2x between healthy pairs on 2 cores,
    so more nodes would compare pairs by noise): rail 1 (ranks 1<->3) is measured and named."""
    c = cluster_factory(2)
    args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", f"n1:{free_port()}", "--ops", "all_gather",
            "--groups", "world", "--sizes", "256K", "--iters", "5", "--pair-size", "1M", "--timeout", "150",
            "--format", "json"]
    rcs, doc, outs = run_nodes(c, args, dict(venv_env, NCCL_DOCTOR_TEST_SLOW_RANK=f"{SLOW_RANK}:0.2"))
    assert rcs == [0, 0], outs[0][1][-3000:]  # warnings only: the link (the rails' sum) is fine
    (pair,) = doc["pairs"]
    rails = {r["rail"]: r for r in pair["rails"]}
    hosts = {n["host"]: n["ranks"] for n in doc["nodes"]}
    assert sorted(rails) == [0, 1] and sorted(hosts) == ["n1", "n2"]
    assert rails[1]["ranks"] == [1, 3] and rails[1]["busbw_gbps"] < 0.1 * rails[0]["busbw_gbps"]
    (f,) = [f for f in doc["findings"] if f["code"] == "ND312"]
    assert f["severity"] == "warn" and "rail 1 (local rank 1) ranks 1<->3" in f["message"], f["message"]
    assert not [f for f in doc["findings"] if f["severity"] == "fail"]
