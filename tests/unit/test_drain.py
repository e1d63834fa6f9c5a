"""``--drain-on-fail`` without a cluster: which nodes reach ``scontrol`` (only those a FAIL names, of this
job, never all of them), the bounded and cleaned reason, and every "could not" as one WARN line that leaves
the exit code alone. ``scontrol`` here is a stand-in script that records its argv (the real one is tested
on the Slurm namespace cluster: tests/system/test_drain_slurm.py)."""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.codes import Code
from nccl_doctor.drain import MAX_REASON_CHARS, clean_reason, drain_on_fail, drain_reason
from nccl_doctor.report import Report, Severity, exit_code, finding

FAKE_SCONTROL = """#!/bin/sh
printf '%s\\n' "$@" >> "$SCONTROL_LOG"
echo -- >> "$SCONTROL_LOG"
if [ -n "$SCONTROL_FAIL" ]; then echo "$SCONTROL_FAIL" >&2; exit 1; fi
"""
ME = socket.gethostname()


@dataclass(frozen=True)
class _NodeReport:
    """A probe payload's facet (``NodeSubject``): the one node a report is about, and the root it read."""

    host: str
    root: str
    interfaces: tuple[dict[str, str], ...] = ()
    rdma_devices: tuple[dict[str, str], ...] = ()

    def to_json(self) -> dict[str, str]:
        return {"host": self.host, "root": self.root}


@pytest.fixture
def slurm_env(tmp_path) -> dict[str, str]:
    """A job step's environment with a recording scontrol first on the PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text(FAKE_SCONTROL)
    (bin_dir / "scontrol").chmod(0o755)
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "SCONTROL_LOG": str(tmp_path / "calls"), "SLURM_JOB_ID": "7",
            "SLURMD_NODENAME": "n1", "SLURM_JOB_NODELIST": "n[1-3]"}


def calls(env: dict[str, str]) -> list[list[str]]:
    path = Path(env["SCONTROL_LOG"])
    if not path.exists():
        return []
    return [c.strip("\n").split("\n") for c in path.read_text().split("--\n") if c.strip()]


def fail(host: str | None, code: Code = Code.NO_SOCKET_INTERFACE, message: str = "no interface 'nosuch'"):
    return finding(code, Severity.FAIL, message, host=host)


def drain_findings(report: Report) -> list[tuple[str, str | None, str]]:
    return [(f.severity.value, f.where.host, f.message) for f in report.findings if f.code == Code.SLURM_DRAIN]


def test_reason_is_bounded_printable_ascii_without_quotes():
    text = 'bad "ib0"\n\x1b[31m`rm -rf`\\ \'x\' ' + "é" * 3 + "y" * 500
    got = clean_reason(text)
    assert len(got) == MAX_REASON_CHARS and got.endswith("...")
    assert not set(got) & set("\"'`\\\n\x1b") and got.isascii() and got.isprintable()
    many = [fail("n2", message="z" * 300)] * 3
    reason = drain_reason(many)
    assert len(reason) <= MAX_REASON_CHARS and reason.endswith(" (+2 more)") and reason.startswith("nccl-doctor ND")


def test_only_the_failing_node_of_the_job_is_drained(slurm_env):
    report = Report(command="preflight", findings=[
        fail("n2", Code.SLOW_NODE_BANDWIDTH, 'n2 is the slow node: 0.01 GB/s "ok"'),
        finding(Code.CHECK_SKIPPED, Severity.WARN, "warned", host="n3"),
        finding(Code.CHECK_SKIPPED, Severity.PASS, "fine", host="n1")])
    drain_on_fail(report, slurm_env)
    assert calls(slurm_env) == [["update", "NodeName=n2", "State=DRAIN",
                                 "Reason=nccl-doctor ND302: n2 is the slow node: 0.01 GB/s ok"]]
    assert drain_findings(report) == [("pass", "n2", "drained n2 in Slurm: Reason=nccl-doctor ND302: n2 is the "
                                                     "slow node: 0.01 GB/s ok")]
    assert report.drain == [{"node": "n2", "reason": "nccl-doctor ND302: n2 is the slow node: 0.01 GB/s ok",
                                     "drained": True, "why_not": ""}]
    assert exit_code(report) == 1


def test_this_host_is_drained_by_its_slurm_name(slurm_env):
    """probe names the machine's hostname; Slurm knows the node as SLURMD_NODENAME."""
    report = Report(command="probe", findings=[fail(ME)], payload=_NodeReport(host=ME, root="/"))
    drain_on_fail(report, slurm_env)
    assert [c[1] for c in calls(slurm_env)] == ["NodeName=n1"]


@pytest.mark.parametrize("host", ["n[1-3]", "n[1-100000000]", "ALL", "n9", "n2 State=RESUME", "-n2", "n[2-3 x]"])
def test_a_forged_or_foreign_node_name_never_reaches_scontrol(slurm_env, host):
    """A FAIL from a log or a peer naming every node of the job (as a hostlist), a hostlist too large to
    expand, another node or extra arguments drains nothing."""
    report = Report(command="preflight", findings=[fail(host)])
    drain_on_fail(report, slurm_env)
    assert calls(slurm_env) == []
    [(sev, _, message)] = drain_findings(report)
    assert sev == "warn" and message.startswith("not drained: ")


@pytest.mark.parametrize("host", ["n[2-3]", "n2,n3", "n[3,2,2]"])
def test_a_hostlist_of_this_jobs_nodes_drains_each_by_its_plain_name(slurm_env, host):
    """node 0 merges a problem several nodes share into one finding on their hostlist (``n[2-3]``): each of
    them is drained by its own plain name, once, and none of the others."""
    slurm_env["SLURM_JOB_NODELIST"] = "n[1-4]"
    report = Report(command="preflight", findings=[fail(host), fail("n3", message="another failure on n3")])
    drain_on_fail(report, slurm_env)
    done = sorted(calls(slurm_env))
    assert [c[:3] for c in done] == [["update", f"NodeName={n}", "State=DRAIN"] for n in ("n2", "n3")]
    assert done[1][3].endswith("(+1 more)")  # n3's two failures, one drain
    assert sorted((sev, h) for sev, h, _ in drain_findings(report)) == [("pass", "n2"), ("pass", "n3")]


def test_a_hostlist_naming_foreign_nodes_drains_only_this_jobs(slurm_env):
    """A hostlist that also names nodes of no job of ours (a forged peer value) drains the job's nodes it
    names and refuses the others in one bounded WARN, however many it expands to."""
    slurm_env["SLURM_JOB_NODELIST"] = "n[1-4]"
    report = Report(command="preflight", findings=[fail("n[2,9-99999]"), fail("x[1-50000]")])
    drain_on_fail(report, slurm_env)
    assert [c[1] for c in calls(slurm_env)] == ["NodeName=n2"]
    found = drain_findings(report)
    assert [(sev, h) for sev, h, _ in found] == [("warn", "n[9-99999],x[1-50000]"), ("pass", "n2")]
    assert found[0][2] == "not drained: n[9-99999],x[1-50000]: it is not this node nor a node of this job"
    assert all(len(m) < 300 for _, _, m in found)


def test_every_node_of_the_job_failing_drains_none(slurm_env):
    report = Report(command="preflight", findings=[fail(h) for h in ("n1", "n2", "n3")])
    drain_on_fail(report, slurm_env)
    assert calls(slurm_env) == []
    [(sev, _, message)] = drain_findings(report)
    assert sev == "warn" and "every node of the job failed (n[1-3])" in message


@pytest.mark.parametrize(("change", "why"), [
    ({"SLURM_JOB_ID": None, "SLURMD_NODENAME": None}, "not run by Slurm"),
    ({"PATH": "/nonexistent"}, "scontrol not found"),
])
def test_could_not_is_one_warn_and_keeps_the_exit_code(slurm_env, change, why):
    env = {k: v for k, v in {**slurm_env, **change}.items() if v is not None}
    report = Report(command="probe", findings=[fail(ME)], payload=_NodeReport(host=ME, root="/"))
    drain_on_fail(report, env)
    [(sev, _, message)] = drain_findings(report)
    assert sev == "warn" and why in message
    assert calls(slurm_env) == [] and exit_code(report) == 1


def test_scontrol_refusal_is_quoted(slurm_env):
    slurm_env["SCONTROL_FAIL"] = "slurm_update error: Access/permission denied"
    report = Report(command="probe", findings=[fail(ME)], payload=_NodeReport(host=ME, root="/"))
    drain_on_fail(report, slurm_env)
    [(sev, host, message)] = drain_findings(report)
    assert (sev, host) == ("warn", "n1") and "Access/permission denied" in message
    assert report.drain[0]["drained"] is False and exit_code(report) == 1


@pytest.mark.parametrize("report", [
    Report(command="probe", findings=[fail(ME)], payload=_NodeReport(host=ME, root="/tmp/snap.tar.gz")),
    Report(command="preflight", findings=[fail("n2")], could_not_run="the store never answered"),
], ids=["snapshot", "could-not-run"])
def test_a_report_not_about_these_live_nodes_drains_nothing(slurm_env, report):
    drain_on_fail(report, slurm_env)
    assert calls(slurm_env) == [] and [s for s, _, _ in drain_findings(report)] == ["warn"]


def test_pass_or_warn_does_nothing(slurm_env):
    report = Report(command="probe", findings=[finding(Code.CHECK_SKIPPED, Severity.WARN, "w", host=ME)])
    drain_on_fail(report, slurm_env)
    assert calls(slurm_env) == [] and report.findings[1:] == [] and "drain" not in report.data


def test_cli_probe_drains_this_node_and_says_so(slurm_env, tmp_path, monkeypatch, capsys):
    for k, v in slurm_env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "nosuch")
    out = tmp_path / "probe.json"
    assert main(["probe", "--drain-on-fail", "--json-out", str(out)]) == 1
    doc = json.loads(out.read_text())
    [call] = calls(slurm_env)
    assert call[:3] == ["update", "NodeName=n1", "State=DRAIN"] and call[3].startswith("Reason=nccl-doctor ND2")
    assert [d["node"] for d in doc["drain"]] == ["n1"] and doc["drain"][0]["drained"]
    assert "drained n1 in Slurm" in capsys.readouterr().out
    os.unlink(out)


def test_drain_on_fail_is_offered_by_probe_and_preflight_only(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["parse", "x.log", "--drain-on-fail"])
    assert exc.value.code == 2 and "unrecognized arguments: --drain-on-fail" in capsys.readouterr().err
