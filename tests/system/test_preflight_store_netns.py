"""Node 0's store on a network (namespace nodes, root): it listens only on the job's address, and a client
on another node that poses as node 1 is rejected and named when the job has NCCL_DOCTOR_SECRET."""

from __future__ import annotations

import json
import secrets
import subprocess
import time

import pytest

from tests.helpers.preflight_cli import PY, failures, preflight_argv, slurm_env, without_launcher
from tests.helpers.store_forger import FORGED_POST, FORGER

pytestmark = [pytest.mark.torch, pytest.mark.netns]
PORT = 29643


def _listening(c, node) -> list[str]:
    out = c.run(node, ["ss", "-Hltn", f"sport = :{PORT}"], check=True).stdout
    return [line.split()[3] for line in out.splitlines()]


@pytest.mark.timeout(120)
def test_a_peer_on_the_network_cannot_pose_as_a_node_and_the_store_listens_on_the_jobs_address(
        cluster_factory, venv_env, tmp_path):
    c = cluster_factory(2)
    n1, n2 = c.nodes
    env = without_launcher(venv_env, GLOO_SOCKET_IFNAME="eth1", NCCL_SOCKET_IFNAME="=eth1", TMPDIR=str(tmp_path),
                           NCCL_DOCTOR_SECRET=secrets.token_hex(16), **slurm_env(0, nodelist="n[1-2]", nnodes=2))
    head = c.popen(n1, preflight_argv("--port", str(PORT), "--timeout", "60", "--rendezvous-timeout", "30",
                                      "--format", "json"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   text=True)
    forger = None
    try:
        deadline = time.monotonic() + 40
        while not (listening := _listening(c, n1)):
            assert time.monotonic() < deadline and head.poll() is None, head.communicate()[1][-2000:]
            time.sleep(0.2)
        assert listening == [f"{n1.addr}:{PORT}"]  # not *:PORT, as torch's own server would listen
        forger_env = without_launcher(venv_env)
        forger_env.pop("NCCL_DOCTOR_SECRET", None)
        forger = c.popen(n2, [PY, "-c", FORGER, str(PORT), "nccl-doctor/run", json.dumps({"node/1": FORGED_POST}),
                              "1", n1.addr], env=forger_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out, err = head.communicate(timeout=70)
    finally:
        for p in (head, forger):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    assert head.returncode == 1, err[-2000:]
    doc = json.loads(out)
    [f] = [f for f in failures(doc) if f["code"] == "ND411"]
    assert "'node/1'" in f["message"] and f["where"]["host"] == "n2" and "carries no MAC" in f["message"]
    assert doc["stage"] == "rendezvous"
