"""``nccl-doctor preflight`` across network-namespace nodes (root): a healthy run ends with nothing above PASS;
uneven ranks per node and a loopback Gloo interface stop the run before any rank starts, naming the node."""

from __future__ import annotations

import json
import secrets
import subprocess

import pytest

from tests.helpers.preflight_cli import failures, preflight_argv, slurm_env, without_launcher

pytestmark = pytest.mark.torch  # the launchers open a TCPStore


@pytest.mark.netns
@pytest.mark.timeout(90)
def test_uneven_ranks_stop_before_any_rank_starts(cluster_factory, venv_env, tmp_path):
    """Node n2 would start 1 rank, the others 2: ND408 names n2 with the cause; no rank is started."""
    c = cluster_factory(3)
    port = "29611"
    procs = []
    for node in c.nodes:
        extra = ["--nproc-per-node", "1"] if node.name == "n2" else []
        env = without_launcher(venv_env, GLOO_SOCKET_IFNAME="eth1", NCCL_SOCKET_IFNAME="=eth1", TMPDIR=str(tmp_path),
                   **slurm_env(node.index - 1, nodelist="n[1-3]", nnodes=3))
        procs.append(c.popen(node, preflight_argv("--port", port, "--timeout", "40", "--collective-timeout", "10",
                                              "--format", "json", *extra),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=70) for p in procs]
    assert [p.returncode for p in procs] == [1, 1, 1], outs[0][1][-2000:]
    doc = json.loads(outs[0][0])
    [f] = [f for f in failures(doc) if f["code"] == "ND408"]
    assert f["where"]["host"] == "n2"
    assert "2 on n[1,3] (--cpu: 2 CPU ranks); 1 on n2 (--nproc-per-node 1)" in f["message"]
    assert doc["stage"] == "consistency" and "ranks" not in doc
    assert "no rank was started" in outs[0][0]
    assert not any("starting" in err for _, err in outs)  # no launcher started a rank


@pytest.mark.netns
@pytest.mark.timeout(90)
def test_loopback_gloo_on_one_node_stops_at_the_probe_naming_it(cluster_factory, venv_env, tmp_path):
    c = cluster_factory(2)
    procs = []
    for node in c.nodes:
        env = without_launcher(venv_env, GLOO_SOCKET_IFNAME="lo" if node.name == "n2" else "eth1", NCCL_SOCKET_IFNAME="=eth1",
                   TMPDIR=str(tmp_path), **slurm_env(node.index - 1, nodelist="n[1-2]"))
        procs.append(c.popen(node, preflight_argv("--port", "29612", "--timeout", "40", "--collective-timeout", "10",
                                              "--format", "json"),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=70) for p in procs]
    assert [p.returncode for p in procs] == [1, 1], outs[0][1][-2000:]
    doc = json.loads(outs[0][0])
    assert doc["stage"] == "probe"
    [f] = [f for f in failures(doc) if f["code"] == "ND216"]
    assert f["where"]["host"] == "n2" and "loopback" in f["message"]
    assert doc["summary"] == "stopped in stage probe; look at n2"
    assert "probe FAILED: ND216" in outs[1][1]
    assert not any("starting" in err for _, err in outs)  # no launcher started a rank


@pytest.mark.netns
@pytest.mark.timeout(150)
def test_three_healthy_nodes_end_with_nothing_above_pass(cluster_factory, venv_env, tmp_path):
    """Three healthy nodes placed as ``srun`` would, the store secret exported as examples/preflight.sbatch does,
    no interface named (preflight finds eth1 itself): every finding is a PASS (issue 12). Without the secret the
    run rightly warns (ND412); on veths the bench has no line rate to judge against and says so at PASS."""
    c = cluster_factory(3)
    secret, port = secrets.token_hex(16), "29613"
    procs = []
    for node in c.nodes:
        env = without_launcher(venv_env, NCCL_DOCTOR_SECRET=secret, TMPDIR=str(tmp_path),
                               **slurm_env(node.index - 1, nodelist="n[1-3]", nnodes=3))
        env = {k: v for k, v in env.items() if not k.startswith(("GLOO_", "NCCL_SOCKET", "PET_", "OMPI_", "PMIX_"))}
        procs.append(c.popen(node, preflight_argv("--port", port, "--timeout", "100", "--collective-timeout", "30",
                                                  "--format", "json"),
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    outs = [p.communicate(timeout=130) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outs[0][1][-3000:]
    doc = json.loads(outs[0][0])
    above = [(f["code"], f["severity"], f["message"]) for f in doc["findings"] if f["severity"] != "pass"]
    assert doc["verdict"] == "pass" and not above, above
    assert {"ND300", "ND401"} <= {f["code"] for f in doc["findings"]}
    assert doc["nnodes"] == 3 and doc["hosts"] == ["n1", "n2", "n3"]
