"""Forging clients against a real preflight store (one node, Gloo, on this machine): a plain TCPStore client
that waits for the stage it needs and writes a forged rank result, verdict or probe post, or garbage. With
NCCL_DOCTOR_SECRET node 0 rejects every one of them, names the key and fails; without it the store is
reported unauthenticated (ND412), malformed values are named, never a traceback, and a forged result that
rank 0's own overwrites is caught."""

from __future__ import annotations

import json
import secrets
import subprocess
import time

import pytest

from nccl_doctor.cluster.net import free_port
from nccl_doctor.preflight.protocol import GO_KEY, RESULT_KEY, RUN_KEY, VERDICT_KEY, node_key
from tests.helpers.preflight_cli import PY, failures, preflight_argv, slurm_env, without_launcher
from tests.helpers.store_forger import FORGED_PASS, FORGED_POST, FORGED_VERDICT, FORGER

pytestmark = pytest.mark.torch


def _env(venv_env: dict[str, str], tmp_path, secret: str | None, **extra: str) -> dict[str, str]:
    env = without_launcher(venv_env, TMPDIR=str(tmp_path), **extra)
    env.pop("NCCL_DOCTOR_SECRET", None)
    if secret is not None:
        env["NCCL_DOCTOR_SECRET"] = secret
    return env


def _attack(venv_env, tmp_path, *, secret: str | None, wait_key: str, writes: dict[str, str], repeat: bool = True,
            nodes: int = 1) -> tuple[subprocess.CompletedProcess[str], dict, str]:
    """Node 0 of a real run (``nodes`` > 1: node 1 never comes) and a forger on its port: node 0's
    result, its JSON report, and the forger's output."""
    port = free_port()
    out = tmp_path / "report.json"
    env = _env(venv_env, tmp_path, secret, **(slurm_env(0, nnodes=nodes) if nodes > 1 else {}))
    forger = subprocess.Popen([PY, "-c", FORGER, str(port), wait_key, json.dumps(writes), "1" if repeat else "0"],
                              env=_env(venv_env, tmp_path, None), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True)
    try:
        node0 = subprocess.run(preflight_argv("--port", str(port), "--timeout", "60", "--rendezvous-timeout", "20",
                                              "--collective-timeout", "20", "--json-out", str(out)),
                               env=env, capture_output=True, text=True, timeout=90, check=False)
    finally:
        if forger.poll() is None:
            forger.kill()
        forged_out = forger.communicate()[0]
    assert "forging" in forged_out, forged_out[-2000:]  # the attack took place
    return node0, json.loads(out.read_text()), forged_out


def _rejected(doc: dict, key: str) -> dict:
    found = [f for f in failures(doc) if f["code"] == "ND411" and f"{key!r}" in f["message"]]
    assert found, failures(doc)
    return found[0]


def _no_trace(proc: subprocess.CompletedProcess[str], *secret: str) -> None:
    text = proc.stdout + proc.stderr
    assert "Traceback" not in text and "JSONDecodeError" not in text, proc.stderr[-3000:]
    for s in secret:
        assert s not in text, "the secret was printed"


@pytest.mark.timeout(120)
def test_a_forged_result_and_verdict_fail_node_0_when_a_secret_is_set(venv_env, tmp_path):
    """The issue's attack: wait for `go`, set `result` (a PASS) and `verdict`. With the secret node 0
    rejects the result (no MAC), names `result` and rank 0, exits 1; the forged PASS is nowhere."""
    secret = secrets.token_hex(16)
    proc, doc, _ = _attack(venv_env, tmp_path, secret=secret, wait_key=GO_KEY,
                           writes={RESULT_KEY: FORGED_PASS, VERDICT_KEY: FORGED_VERDICT})
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert doc["verdict"] == "fail"
    f = _rejected(doc, RESULT_KEY)
    assert "carries no MAC" in f["message"] and f["where"]["rank"] == 0
    assert "FORGED" not in json.dumps(doc) and "FORGED" not in proc.stdout
    assert not [f for f in doc["findings"] if f["code"] == "ND412"]  # authenticated: no WARN
    _no_trace(proc, secret)
    assert secret not in json.dumps(doc)


@pytest.mark.timeout(90)
def test_a_forged_probe_post_is_rejected_and_named_with_its_node(venv_env, tmp_path):
    """A client poses as node 1 (which never comes) as soon as node 0 stamped its store: node 0 rejects
    `node/1`, names it and its host, and starts no rank."""
    secret = secrets.token_hex(16)
    proc, doc, _ = _attack(venv_env, tmp_path, secret=secret, wait_key=RUN_KEY, writes={node_key(1): FORGED_POST},
                           nodes=2)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    f = _rejected(doc, node_key(1))
    assert f["where"]["host"] == "ghost" and doc["stage"] == "rendezvous"
    assert "starting" not in proc.stderr  # no rank was started on a forged post
    _no_trace(proc, secret)


@pytest.mark.timeout(120)
@pytest.mark.parametrize(("value", "why"), [
    ("garbage{", "not valid JSON"),
    (json.dumps({"findings": "all fine", "tables": [], "data": {}}), "'findings' must be a list"),
], ids=["garbage", "wrong-type"])
def test_a_malformed_result_is_named_without_a_secret_never_a_traceback(venv_env, tmp_path, value, why):
    """No secret: the store is unauthenticated (ND412 WARN), and a result that is not JSON, or has a field
    of the wrong type, is a FAIL naming `result`, with node 0's report (it used to be a traceback)."""
    proc, doc, _ = _attack(venv_env, tmp_path, secret=None, wait_key=GO_KEY, writes={RESULT_KEY: value})
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    f = _rejected(doc, RESULT_KEY)
    assert why in f["message"], f
    assert [w for w in doc["findings"] if w["code"] == "ND412" and w["severity"] == "warn"]
    _no_trace(proc)


@pytest.mark.timeout(120)
def test_without_a_secret_a_forged_result_is_flagged_when_rank_0_overwrites_it(venv_env, tmp_path):
    """The same forged PASS, written once, with no secret: node 0 cannot tell it by its MAC, but rank 0
    (node 0's own child) writes `result` once, just before it exits, so the value it finds after rank 0
    exited differs: a second writer, a FAIL naming `result`; and the store is reported unauthenticated."""
    proc, doc, _ = _attack(venv_env, tmp_path, secret=None, wait_key=GO_KEY, writes={RESULT_KEY: FORGED_PASS},
                           repeat=False)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    f = _rejected(doc, RESULT_KEY)
    assert "second writer" in f["message"]
    warn = [w for w in doc["findings"] if w["code"] == "ND412"]
    assert warn and "openssl rand -hex 16" in warn[0]["fix"]
    _no_trace(proc)


@pytest.mark.timeout(60)
def test_a_short_secret_is_one_line_and_exit_2(venv_env, tmp_path):
    t0 = time.monotonic()
    proc = subprocess.run(preflight_argv("--timeout", "30"), env=_env(venv_env, tmp_path, "0123abcd"),
                          capture_output=True, text=True, timeout=40, check=False)
    assert proc.returncode == 2 and time.monotonic() - t0 < 30
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "NCCL_DOCTOR_SECRET is too short" in lines[0], proc.stderr
    assert "0123abcd" not in proc.stderr + proc.stdout


@pytest.mark.timeout(120)
def test_with_a_secret_the_ranks_seal_their_values_and_the_secret_is_never_shown(venv_env, tmp_path):
    """The secret's path: environment -> launcher -> ranks (which seal their errors and result
    with it, or node 0 would reject them). The run passes, says nothing about an unauthenticated store,
    and the secret is in none of its outputs."""
    secret = secrets.token_hex(16)
    out = tmp_path / "report.json"
    proc = subprocess.run(preflight_argv("--port", str(free_port()), "--timeout", "60", "--json-out", str(out)),
                          env=_env(venv_env, tmp_path, secret), capture_output=True, text=True, timeout=100,
                          check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    doc = json.loads(out.read_text())
    assert {f["code"] for f in doc["findings"]} & {"ND411", "ND412"} == set()
    assert any(f["code"] == "ND300" and f["severity"] == "pass" for f in doc["findings"])
    assert secret not in out.read_text()
    _no_trace(proc, secret)
