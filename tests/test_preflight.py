"""``nccl-doctor preflight`` on one machine (self-launches 2 Gloo ranks), plus its plain functions."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nccl_doctor.errors import InputError
from nccl_doctor.preflight.command import node_plan
from nccl_doctor.report import Finding, Severity, Where


SECONDS = "expected a finite number of seconds, > 0 and at most 604800 (7 days)"


def _args(**kw):
    base = dict(nproc_per_node=None, cpu=True, port=None)
    base.update(kw)
    return argparse.Namespace(**base)


@pytest.mark.timeout(120)
def test_single_machine_preflight_passes_with_json(tmp_path, venv_env):
    out = tmp_path / "pf.json"
    junit = tmp_path / "pf.xml"
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--fsdp-smoke", "--timeout", "90",
                           "--json-out", str(out), "--junit-out", str(junit)],
                          env=venv_env, capture_output=True, text=True, timeout=110, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["command"] == "preflight" and doc["verdict"] in ("pass", "warn")
    assert doc["nnodes"] == 1 and doc["nproc_per_node"] == 2
    assert doc["backend"] == "gloo"
    codes = {(f["code"], f["severity"]) for f in doc["findings"]}
    assert ("ND300", "pass") in codes  # the bench ran and verified its data
    assert ("ND410", "pass") in codes  # FSDP2 + DCP round trip
    assert ("ND001", "pass") in codes  # the NCCL-log step says it was skipped, and why
    assert doc["bench"]["results"] and all(r["wrong"] == 0 for r in doc["bench"]["results"])
    assert set(doc["timings_s"]) >= {"probe", "rendezvous", "bench", "total"}
    assert "<testsuites" in junit.read_text()
    assert "nccl-doctor preflight: " in proc.stdout
    # one node cannot certify multi-node training: say what was checked and what was not
    assert "1 node x 2 ranks: this node checks out; inter-node links not tested" in doc["summary"]
    assert "fit for multi-node" not in proc.stdout and "node(s)" not in proc.stdout + proc.stderr
    assert doc["localisation"] == {"skipped": "one node: no inter-node link to test"}
    assert sorted(tmp_path.iterdir()) == sorted([out, junit])  # nothing else left in the working dir


def test_bad_deadline_is_one_line_exit_2(venv_env):
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--timeout", "0"], env=venv_env,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("nccl-doctor preflight: error: --timeout 0: expected a finite number of seconds, "
                                   "> 0 and at most 604800 (7 days)")


@pytest.mark.parametrize("argv,msg", [
    (["--port", "70000"], "--port 70000 is not a TCP port (1-65535)"),
    (["--port", "-1"], "--port -1 is not a TCP port (1-65535)"),
    (["--collective-timeout", "0"], f"--collective-timeout 0: {SECONDS}"),
    (["--collective-timeout", "inf"], f"--collective-timeout inf: {SECONDS}"),
    (["--rendezvous-timeout", "-1"], f"--rendezvous-timeout -1: {SECONDS}"),
    (["--rendezvous-timeout", "inf"], f"--rendezvous-timeout inf: {SECONDS}"),
    (["--timeout", "1e400"], f"--timeout inf: {SECONDS}"),
    (["--timeout", "nan"], f"--timeout nan: {SECONDS}"),
    (["--timeout", "700000"], f"--timeout 700000: {SECONDS}"),
    (["--fsdp-smoke", "--fsdp-smoke-dir", "/nonexistent/dir"], "--fsdp-smoke-dir '/nonexistent/dir': no such directory"),
    (["--fsdp-smoke", "--fsdp-smoke-dir", "/etc/hostname"], "--fsdp-smoke-dir '/etc/hostname': not a directory"),
    (["--fsdp-smoke-dir", "."], "--fsdp-smoke-dir is only used by --fsdp-smoke: add --fsdp-smoke (or drop the directory)")])
def test_bad_rendezvous_and_timeout_options_are_one_line_exit_2(argv, msg, venv_env, tmp_path):
    """Refused before anything is created or started (no rank, no private dir: TMPDIR stays empty)."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", *argv], env=dict(venv_env, TMPDIR=str(tmp)),
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stderr.strip() == f"nccl-doctor preflight: error: {msg}", proc.stderr
    assert list(tmp.iterdir()) == [] and time.monotonic() - t0 < 10


@pytest.mark.timeout(60)
def test_single_node_probe_failure_claims_no_rendezvous(venv_env):
    """A wrong NCCL_SOCKET_IFNAME on one node: stop after the probe; no rendezvous, no rank, no such claim."""
    env = dict(venv_env, NCCL_SOCKET_IFNAME="eth9")
    proc = subprocess.run([sys.executable, "-m", "nccl_doctor", "preflight", "--format", "json"], env=env,
                          capture_output=True, text=True, timeout=50)
    assert proc.returncode == 1, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    assert doc["stage"] == "probe" and set(doc["timings_s"]) == {"probe", "total"}
    assert "ND202" in {f["code"] for f in doc["findings"] if f["severity"] == "fail"}
    assert "probe FAILED" in proc.stderr and "rendezvous" not in proc.stderr and "rank" not in proc.stderr
    assert doc["localisation"] == {"skipped": "the run stopped in stage probe"}


def test_a_run_that_measured_nothing_cannot_pass(tmp_path):
    """Same rule as bench: the ranks ran but measured nothing -> ND001 WARN from the worker, exit 2."""
    import shutil

    from nccl_doctor.preflight.command import Launcher, NodePlan
    from nccl_doctor.report import Report

    plan = NodePlan(nnodes=1, node_rank=0, hosts=("vm",), head="127.0.0.1", port=1, nproc=1, slurm=False, host="vm")
    launcher = Launcher(argparse.Namespace(timeout=10, strict=False), plan, {})
    try:
        launcher.measured_nothing = True
        out = launcher._decide(Report(command="preflight"), "done")
        assert out.code == 2 and "nothing was measured" in out.summary
        launcher.measured_nothing = False
        out = launcher._decide(Report(command="preflight"), "done")
        assert out.code == 0 and out.summary.startswith("1 node x 1 rank: this node checks out")
    finally:
        shutil.rmtree(launcher.log_dir, ignore_errors=True)


def test_plan_outside_slurm_is_one_node_two_ranks():
    plan = node_plan(_args(), {"PATH": "/bin"})
    assert (plan.nnodes, plan.node_rank, plan.nproc, plan.head) == (1, 0, 2, "127.0.0.1")


def test_plan_under_srun_comes_from_slurm_env():
    env = {"SLURM_JOB_ID": "1234", "SLURM_JOB_NODELIST": "gpu[01-03]", "SLURM_NNODES": "3", "SLURM_STEP_ID": "0",
           "SLURM_NODEID": "2", "SLURM_STEP_NUM_NODES": "3", "SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_NODELIST": "gpu[01-03]"}
    plan = node_plan(_args(), env)
    assert plan.hosts == ("gpu01", "gpu02", "gpu03") and plan.head == "gpu01"
    assert (plan.nnodes, plan.node_rank, plan.port) == (3, 2, 29500 + 234)
    assert not plan.is_head


def test_plan_in_batch_script_without_srun_says_how():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_NODEID": "0"}
    with pytest.raises(InputError, match=r"srun --ntasks-per-node=1 nccl-doctor preflight"):
        node_plan(_args(), env)


def test_plan_rejects_several_tasks_per_node():
    env = {"SLURM_JOB_ID": "7", "SLURM_JOB_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_NODEID": "0",
           "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_NODES": "2", "SLURM_STEP_NUM_TASKS": "8"}
    with pytest.raises(InputError, match="4 tasks per node"):
        node_plan(_args(), env)


def test_findings_survive_the_trip_through_the_store():
    f = Finding(code="ND302", severity=Severity.FAIL, message="m", fix="x", where=Where(host="n2", iface="eth1"),
                evidence=("a", "b"))
    assert Finding.from_dict(json.loads(json.dumps(f.as_dict()))) == f


def test_nccl_log_step_reports_the_transport_nccl_used(tmp_path):
    """The GPU path's log step, fed a real captured log (per-rank files as NCCL_DEBUG_FILE writes them):
    the transport per communicator and the parser's findings reach the preflight report."""
    import shutil

    from nccl_doctor.preflight.command import nccl_log_summary, nccl_log_table

    fixtures = Path(__file__).resolve().parent.parent / "fixtures/nccl-logs"
    shutil.copy(fixtures / "041-h20-ib-gdrdma-cumem-2node.log", tmp_path / "node01.1234.log")
    summary = nccl_log_summary(tmp_path, "nccl", host="node01")
    assert summary["skipped"] is None and summary["files"] == 1
    assert summary["inter_node"] == {"transport": "IB", "gdr": True, "evidence": "channel lines"}
    assert "ND101" in {f["code"] for f in summary["findings"]}
    json.dumps(summary)  # crosses the rendezvous store as JSON
    table = nccl_log_table([summary])
    assert table is not None and ("IB", "yes") == table.rows[0][5:]

    shutil.copy(fixtures / "052-socket-two-ifaces-selected-lines.log", tmp_path / "node01.1235.log")
    mixed = nccl_log_summary(tmp_path, "nccl", host="node01")
    assert mixed["files"] == 2 and "Socket" in {c["inter_node"]["transport"] for c in mixed["communicators"]}


def test_nccl_log_step_says_why_it_was_skipped(tmp_path):
    from nccl_doctor.preflight.command import nccl_log_summary, nccl_log_table

    gloo = nccl_log_summary(tmp_path, "gloo", host="n1")
    assert "Gloo on CPU" in gloo["skipped"] and gloo["findings"] == []
    nccl = nccl_log_summary(tmp_path, "nccl", host="n1")
    assert "NCCL wrote no log on n1" in nccl["skipped"]
    assert nccl_log_table([gloo, nccl]) is None


def test_a_bad_master_port_is_an_error_not_a_free_port():
    with pytest.raises(InputError, match="MASTER_PORT='29x' is not a number"):
        node_plan(_args(), {"MASTER_PORT": "29x"})
    assert node_plan(_args(), {"MASTER_PORT": "31001"}).port == 31001


def test_nccl_log_step_survives_a_parser_failure_and_only_gloo_passes(tmp_path):
    """A parser failure is this step's own WARN, never a lost node or a missing verdict; only "Gloo ran,
    so there is no NCCL log" is a PASS."""
    from nccl_doctor.preflight.command import nccl_log_findings, nccl_log_summary

    (tmp_path / "n1.1234.log").mkdir()  # a *.log the parser cannot read
    broken = nccl_log_summary(tmp_path, "nccl", host="n1")
    assert broken["host"] == "n1" and broken["skipped"].startswith("log parser failed: ")
    json.dumps(broken)
    gloo = nccl_log_summary(tmp_path / "none", "gloo", host="n2")
    sev = {f.message.split(": ", 1)[1][:18]: f.severity for f in nccl_log_findings([broken, gloo])}
    assert sev == {"log parser failed:": Severity.WARN, "the ranks ran Gloo": Severity.PASS}
    # each names its node(s), so JUnit files it under the node's testsuite, not "preflight.all"
    gloo3 = nccl_log_summary(tmp_path / "none", "gloo", host="n3")
    where = {f.message[:40]: f.where.host for f in nccl_log_findings([broken, gloo, gloo3])}
    assert sorted(where.values()) == ["n1", "n[2-3]"]


@pytest.mark.timeout(90)
def test_sigterm_leaves_no_rank_behind(venv_env, tmp_path):
    """scancel/srun stop the launcher with SIGTERM: its ranks (in sessions of their own) must go too."""
    import os
    import signal
    import time
    import uuid

    mark = f"NCCL_DOCTOR_TEST_MARK={uuid.uuid4().hex}".encode()

    def ranks() -> list[int]:
        out = []
        for d in Path("/proc").iterdir():
            try:
                if d.name.isdigit() and mark in (d / "environ").read_bytes().split(b"\0"):
                    out.append(int(d.name))
            except OSError:
                continue
        return out

    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(venv_env, NCCL_DOCTOR_TEST_MARK=mark.split(b"=")[1].decode(), TMPDIR=str(tmp),
               NCCL_DOCTOR_TEST_STALL="1:bench")  # rank 1 hangs: the run cannot end by itself
    err = tmp_path / "stderr"
    proc = subprocess.Popen([sys.executable, "-m", "nccl_doctor", "preflight", "--timeout", "80"], env=env,
                            stdout=subprocess.DEVNULL, stderr=err.open("w"))
    try:
        t0 = time.monotonic()
        while len(ranks()) < 3:  # the launcher and its 2 ranks
            assert time.monotonic() - t0 < 60 and proc.poll() is None, "the ranks never started"
            time.sleep(0.2)
        time.sleep(1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=20)
        time.sleep(0.5)
        assert ranks() == [], "ranks outlived their launcher"
        assert proc.returncode == 130, err.read_text()[-2000:]  # stopped like Ctrl-C: "interrupted"
        assert list(tmp.iterdir()) == []  # its private NCCL log dir went with it
    finally:
        for pid in ranks():  # only processes this test started carry the mark
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()
