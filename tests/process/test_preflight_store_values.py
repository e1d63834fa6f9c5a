"""The preflight store's typed face on a real TCPStore: a follower never leaves with a forged or replayed
verdict, values are capped, a removed key and an overwritten counter are named (not a dropped
connection), and node 0's store listens on the address it is given (torch alone listens everywhere)."""

from __future__ import annotations

import json
import secrets
import subprocess
from datetime import timedelta

import pytest

from nccl_doctor.cluster.net import free_port
from nccl_doctor.preflight.auth import RejectedValueError, Seal
from nccl_doctor.preflight.options import PreflightOptions
from nccl_doctor.preflight.protocol import ERRORS_KEY, VERDICT_KEY, NodePost, NodeStages, VerdictMessage, stages_key
from nccl_doctor.preflight.store import NOT_A_COUNT, Store, bind_address, open_store

pytestmark = pytest.mark.torch


def _server(port: int):
    import torch.distributed as dist

    return dist.TCPStore("127.0.0.1", port, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=5))


def _client(port: int, seal: Seal | None = None) -> Store:
    import torch.distributed as dist

    return Store(dist.TCPStore("127.0.0.1", port, is_master=False, timeout=timedelta(seconds=5)), seal)


def _put(server, key: str, value: str | bytes) -> None:
    """``set`` on the server's own connection, then ``get`` on it: TCPStore's ``set`` does not wait for
    the server, so without the ``get`` another connection could still read the old value."""
    server.set(key, value)
    server.get(key)


def _listening(port: int) -> list[str]:
    out = subprocess.run(["ss", "-Hltn", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    return [line.split()[3] for line in out.splitlines()]


def test_a_follower_never_leaves_with_a_forged_or_replayed_verdict():
    """A verdict written without the secret, or sealed for another run (a replay from step 1 of the same
    job), is a FAIL naming `verdict` on node 0's host; only the one sealed for this run is followed."""
    from nccl_doctor.preflight.follower import Follower
    from nccl_doctor.preflight.launcher import Launcher
    from nccl_doctor.preflight.plan import NodePlan

    secret = secrets.token_hex(16)
    port = free_port()
    server = _server(port)
    plan = NodePlan(nnodes=2, node_rank=1, hosts=("n1", "n2"), head="127.0.0.1", port=port, nproc=2, slurm=True,
                    host="n2", run_id="7.0", step="0")
    launcher = Launcher(PreflightOptions(timeout=10, rendezvous_timeout=7), plan,
                        {"NCCL_DOCTOR_SECRET": secret})
    launcher.state.store = _client(port, launcher.state.seal)
    mine = NodePost(host="n2", node=1)
    passed = VerdictMessage(code=0, verdict="pass", summary="FORGED fit").to_json()

    _put(server, VERDICT_KEY, passed)  # no MAC
    out = Follower(launcher).steps(mine)
    assert out.code == 1 and out.report is not None
    [f] = [f for f in out.report.findings if f.code == "ND411"]
    assert "'verdict'" in f.message and "carries no MAC" in f.message and f.where.host == "n1"

    replay = Seal(bytes.fromhex(secret), "7.1")  # the same job's secret, another step
    _put(server, VERDICT_KEY, replay.seal(VERDICT_KEY, passed.encode()))
    out = Follower(launcher).steps(mine)
    assert out.code == 1 and out.report is not None
    assert any(f.code == "ND411" and "does not verify" in f.message for f in out.report.findings)

    _put(server, VERDICT_KEY, launcher.state.seal.seal(VERDICT_KEY, passed.encode()))  # node 0's own
    out = Follower(launcher).steps(mine)
    assert out.code == 0 and out.summary.startswith("FORGED fit")


def test_values_are_capped_and_removed_keys_and_overwritten_counters_are_named():
    port = free_port()
    server = _server(port)
    store = _client(port)
    _put(server, stages_key(3), b'{"marks": [[1, "' + b"x" * (200 << 10) + b'"]]}')
    with pytest.raises(RejectedValueError, match=r"stages/3: \d+ bytes, more than"):
        store.get(stages_key(3))
    store.set_all({stages_key(0): NodeStages.not_started(2).to_json(), stages_key(1): "{}"})
    store.get(stages_key(1))  # on the same connection: the multi_set has landed
    server.delete_key(stages_key(1))
    with pytest.raises(RejectedValueError, match="stages/1: removed from the store"):
        store.read_all([stages_key(0), stages_key(1)], str)
    _put(server, ERRORS_KEY, "garbage")  # an `add` on this would drop the connection
    assert store.count(ERRORS_KEY) == NOT_A_COUNT
    assert store.read(stages_key(0), NodeStages.from_json) == NodeStages.not_started(2)  # still connected
    _put(server, stages_key(0), json.dumps({"marks": [[1]]}))
    with pytest.raises(RejectedValueError, match=r"stages/0: 'marks' must be a list of \[number, stage\]"):
        store.read_all([stages_key(0)], NodeStages.from_json)


def test_node_0s_store_listens_only_on_the_address_it_is_given():
    """torch's TCPStore server listens on every interface whatever host it is given (shown here, so a torch
    that changes it is noticed); preflight hands it a socket bound to the job's address instead."""
    port = free_port()
    server = _server(port)
    assert _listening(port) in ([f"*:{port}"], [f"0.0.0.0:{port}"], [f"[::]:{port}"])
    del server
    port = free_port()
    store = open_store("127.0.0.1", port, 5, Seal(), bind=bind_address("127.0.0.1", 1))
    assert _listening(port) == [f"127.0.0.1:{port}"]
    client = _client(port)
    client.set("k", "v")
    assert store.get("k") == "v"


def test_a_head_that_resolves_to_loopback_here_keeps_the_wildcard():
    """On 2+ nodes a store bound to 127.x would be out of the followers' reach."""
    assert bind_address("127.0.0.1", 1) == "127.0.0.1"
    assert bind_address("localhost", 2) is None
    assert bind_address("no-such-host.invalid", 2) is None


def test_a_heartbeat_cannot_be_forged_or_replayed_to_keep_a_dead_node_alive(monkeypatch):
    """Heartbeats are authenticated counts, not `add` counters: a forged one is rejected naming `hb/1`, and
    replaying a node's own older count does not count as a beat (the count must grow)."""
    from nccl_doctor.preflight import heartbeat
    from nccl_doctor.preflight.heartbeat import Beats

    seal = Seal(secrets.token_bytes(16), "9.0")
    port = free_port()
    server = _server(port)
    store = _client(port, seal)
    store.set_all({"hb/0": "0", "hb/1": "0"})
    beats = Beats(store, 2, deadline=1e12)
    store.set("hb/1", "5")
    assert beats.lost() == []
    old = server.get("hb/1")
    monkeypatch.setattr(heartbeat, "HEARTBEAT_LOST_S", 0.0)
    store.set("hb/1", "6")
    assert beats.lost() == [0]  # node 0's count never grew; node 1's did
    _put(server, "hb/1", old)  # a replay of node 1's count 5
    assert beats.lost() == [0, 1]
    _put(server, "hb/1", "7")
    with pytest.raises(RejectedValueError, match="hb/1: it carries no MAC"):
        beats.lost()
