"""bench across real network-namespace "nodes" (root): the HSDP shape, a throttled node named (and only it),
healthy nodes with nothing above PASS, a busy rendezvous port on the rendezvous host, and uneven rank counts
named without c10d noise."""

import json
import subprocess
import sys

import pytest

from nccl_doctor.cluster.net import free_port
from tests.helpers.netns import communicate_or_kill

pytestmark = pytest.mark.netns
RATE_GBPS = 0.025  # tbf 200mbit = 25 MB/s per direction


def run_nodes(cluster, nodes, args, env, timeout=150):
    procs = [cluster.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *args], env=env,
                           stdout=-1, stderr=-1, text=True) for n in nodes]
    outs = [communicate_or_kill(p, timeout) for p in procs]
    docs = [json.loads(o) for o, _ in outs if o.strip()]
    assert len(docs) == 1, "\n".join(e[-2500:] for _, e in outs)
    return [p.returncode for p in procs], docs[0], outs


def test_two_nodes_two_ranks_hsdp_groups(cluster_factory, venv_env):
    c = cluster_factory(2)
    args = ["--nnodes", "2", "--nproc-per-node", "2", "--rdzv-endpoint", f"n1:{free_port()}", "--ops",
            "all_gather,all_reduce", "--sizes", "256K,1M", "--iters", "5", "--pair-size", "1M", "--timeout", "120",
            "--format", "json"]
    rcs, doc, outs = run_nodes(c, c.nodes, args, venv_env)
    assert rcs[0] == rcs[1] and doc["verdict"] in ("pass", "warn"), outs[0][1][-3000:]
    assert doc["world_size"] == 4 and doc["nnodes"] == 2 and doc["local_world_size"] == 2
    sizes = {(r["group"], r["group_size"]) for r in doc["results"]}
    assert sizes == {("world", 4), ("intra", 2), ("inter", 2)}
    assert sorted(n["host"] for n in doc["nodes"]) == ["n1", "n2"]
    assert all(n["inter_node_busbw_gbps"] > 0 and n["iface"] == "eth1" for n in doc["nodes"])
    assert all(r["wrong"] == 0 for r in doc["results"])


def test_three_nodes_throttled_node_is_named(cluster_factory, venv_env):
    c = cluster_factory(3)
    for n in c.nodes:  # the classic trap: each node's own hostname resolves to 127.0.0.1
        path = f"/etc/netns/{n.ns}/hosts"
        with open(path, "w") as fh:
            fh.write(f"127.0.0.1 localhost {n.name}\n")
    slow = c.nodes[1]
    c.throttle(slow, "200mbit")
    args = ["--nnodes", "3", "--nproc-per-node", "1", "--rdzv-endpoint", f"198.18.0.1:{free_port()}",
            "--ops", "all_gather", "--sizes", "1M", "--iters", "5", "--pair-size", "2M", "--timeout", "120",
            "--format", "json"]
    rcs, doc, outs = run_nodes(c, c.nodes, args, venv_env)
    assert rcs == [1, 1, 1], outs[0][1][-3000:]  # "slow" is not "warn": every node's gate exits 1
    assert doc["verdict"] == "fail"
    named = [f for f in doc["findings"] if f["code"] == "ND302"]
    assert [(f["where"]["host"], f["severity"]) for f in named] == [(slow.name, "fail")]
    assert [f["where"]["host"] for f in doc["findings"] if f["severity"] == "fail"] == [slow.name]
    # the healthy nodes are not blamed: a veth's 10000 Mb/s is no line rate to be "above" (ND305)
    assert not [f for f in doc["findings"] if f["code"] == "ND305" or (f["severity"] != "pass" and (
        f.get("where") or {}).get("host") not in (None, slow.name))], doc["findings"]
    figs = {n["host"]: n["inter_node_busbw_gbps"] for n in doc["nodes"]}
    assert abs(figs[slow.name] - RATE_GBPS) / RATE_GBPS < 0.25, figs
    assert all(v > 5 * figs[slow.name] for h, v in figs.items() if h != slow.name), figs
    print("inter-node figures (GB/s):", figs)


def test_three_healthy_nodes_end_with_nothing_above_pass(cluster_factory, venv_env, tmp_path):
    """A healthy 3-node run on veths (no line rate: the yardstick is unknown, said at PASS) and a sweep up to
    Gloo's 16 MiB (rounded down to whole elements for 3 ranks) ends with every finding a PASS."""
    c = cluster_factory(3)
    args = ["--nnodes", "3", "--nproc-per-node", "1", "--rdzv-endpoint", f"n1:{free_port()}", "--ops", "all_gather",
            "--sizes", "16M", "--iters", "5", "--pair-size", "2M", "--timeout", "120", "--format", "json"]
    rcs, doc, outs = run_nodes(c, c.nodes, args, {**venv_env, "TMPDIR": str(tmp_path)})
    assert rcs == [0, 0, 0], outs[0][1][-3000:]
    assert doc["verdict"] == "pass" and [f["severity"] for f in doc["findings"]] == ["pass"], doc["findings"]
    [ok] = doc["findings"]
    assert ok["code"] == "ND300" and "yardstick unknown on n[1-3]: a virtual interface has no line rate" in ok["message"]
    assert all(n["pct_of_expected"] is None and n["inter_node_busbw_gbps"] > 0 for n in doc["nodes"]), doc["nodes"]


def test_two_nodes_slow_link_says_it_cannot_tell_which_end(cluster_factory, venv_env):
    c = cluster_factory(2)
    c.throttle(c.nodes[1], "200mbit")
    args = ["--nnodes", "2", "--nproc-per-node", "1", "--rdzv-endpoint", f"n1:{free_port()}", "--ops",
            "all_gather", "--sizes", "1M", "--iters", "5", "--pair-size", "2M", "--timeout", "120", "--format", "json"]
    rcs, doc, outs = run_nodes(c, c.nodes, args, venv_env)
    assert rcs == [1, 1], outs[0][1][-3000:]
    (f,) = [f for f in doc["findings"] if f["code"] == "ND303"]
    assert "cannot tell which end" in f["message"]


def test_busy_port_on_the_rendezvous_host_across_nodes(cluster_factory, venv_env, tmp_path):
    """The reviewer's case: --nnodes 2 --rdzv-endpoint n1:PORT with PORT bound on n1 by another program."""
    c = cluster_factory(1)
    n1 = c.nodes[0]
    listener = c.popen(n1, [sys.executable, "-c", "import socket,time; s=socket.socket(); s.bind(('0.0.0.0', 29623)); "
                                                  "s.listen(5); print('up', flush=True); time.sleep(60)"],
                       stdout=subprocess.PIPE, text=True)
    try:
        assert listener.stdout.readline() == "up\n"
        r = c.run(n1, [sys.executable, "-m", "nccl_doctor", "bench", "--nnodes", "2", "--rdzv-endpoint", "n1:29623",
                       "--timeout", "30"], env={**venv_env, "TMPDIR": str(tmp_path)}, timeout=60)
    finally:
        listener.kill()
        listener.wait()
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr[-2000:]
    assert "rendezvous port 29623 (from --rdzv-endpoint) is already in use on n1, the rendezvous host" in r.stderr
    assert "--rdzv-endpoint n1:OTHERPORT (the same on every node)" in r.stderr and "Traceback" not in r.stderr


def test_uneven_nodes_warn_by_name_and_a_passing_run_prints_no_c10d_noise(cluster_factory, venv_env, tmp_path):
    """A end to end, D's terminal: n1 runs 2 ranks, n2 1; the JSON names n2; neither node's stderr shows c10d's
    hostname warning (which every multi-node run printed twice per node)."""
    c = cluster_factory(2)
    base = ["--nnodes", "2", "--rdzv-endpoint", f"n1:{free_port()}", "--ops", "all_gather", "--sizes", "1M",
            "--iters", "5", "--pair-size", "1M", "--timeout", "90", "--format", "json"]
    procs = [c.popen(n, [sys.executable, "-m", "nccl_doctor", "bench", *base, "--nproc-per-node", k],
                     env={**venv_env, "TMPDIR": str(tmp_path)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                     text=True) for n, k in zip(c.nodes, ("2", "1"), strict=True)]
    outs = []
    for p in procs:
        try:
            outs.append(p.communicate(timeout=120))
        finally:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], outs[0][1][-3000:]
    doc = json.loads(outs[0][0])
    assert doc["verdict"] == "warn" and doc["world_size"] == 3
    [f] = [f for f in doc["findings"] if f["code"] == "ND001"]
    assert f["where"]["host"] == "n2" and "n2 runs 1 rank, n1 runs 2 ranks" in f["message"]
    for _, err in outs:
        assert "hostname of the client socket" not in err and "Traceback" not in err, err[-2000:]
