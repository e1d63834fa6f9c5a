"""The report model, renderers and exit codes: one model, three views, one exit-code rule."""

import io
import json
from xml.etree import ElementTree as ET

import pytest

from nccl_doctor.render import make_console, render_json, render_junit, render_text, verdict_line
from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code


def _report(*severities: Severity) -> Report:
    r = Report(command="probe", summary="2 nodes")
    for i, sev in enumerate(severities):
        r.add(Finding(code="ND001", severity=sev, message=f"message {i} [bold]not markup[/bold]",
                      fix="export NCCL_SOCKET_IFNAME=ib0", where=Where(host=f"node{i}", iface="ib0")))
    r.tables.append(Table(title="Interfaces", columns=("name", "kind"), rows=(("ib0", "infiniband"),)))
    r.data["interfaces"] = [{"name": "ib0"}]
    return r


@pytest.mark.parametrize("sevs,verdict", [
    ((), Severity.PASS),
    ((Severity.PASS,), Severity.PASS),
    ((Severity.PASS, Severity.WARN), Severity.WARN),
    ((Severity.WARN, Severity.FAIL, Severity.PASS), Severity.FAIL),
])
def test_verdict_is_worst_finding(sevs, verdict):
    assert _report(*sevs).verdict is verdict


@pytest.mark.parametrize("sevs,strict,code", [
    ((Severity.PASS,), False, 0), ((Severity.WARN,), False, 0), ((Severity.WARN,), True, 1),
    ((Severity.FAIL,), False, 1), ((Severity.FAIL,), True, 1), ((Severity.PASS,), True, 0),
])
def test_exit_code(sevs, strict, code):
    assert exit_code(_report(*sevs), strict=strict) == code


def test_json_has_schema_and_command_data():
    doc = json.loads(render_json(_report(Severity.WARN, Severity.FAIL)))
    assert doc["schema_version"].startswith("1.")
    assert doc["verdict"] == "fail" and doc["command"] == "probe"
    assert doc["interfaces"] == [{"name": "ib0"}]
    assert [f["severity"] for f in doc["findings"]] == ["fail", "warn"]  # worst first
    assert doc["findings"][0]["where"] == {"host": "node1", "iface": "ib0"}
    assert doc["findings"][0]["name"] == "check-skipped"


def test_text_starts_with_verdict_and_escapes_markup():
    buf = io.StringIO()
    render_text(_report(Severity.FAIL), make_console(buf))
    out = buf.getvalue()
    assert out.splitlines()[0] == verdict_line(_report(Severity.FAIL))
    assert out.startswith("nccl-doctor probe: FAIL (1 fail, 0 warn, 0 pass): 2 nodes")
    assert "[bold]not markup[/bold]" in out
    assert "fix: export NCCL_SOCKET_IFNAME=ib0" in out
    assert "\x1b[" not in out  # not a TTY: no colour codes in a job log


def test_junit_suite_per_host_failure_per_fail():
    root = ET.fromstring(render_junit(_report(Severity.FAIL, Severity.WARN)))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["probe.node0", "probe.node1"]
    assert root.get("failures") == "1" and root.get("tests") == "2"
    assert suites[0].find("testcase/failure").get("type") == "ND001"
    assert suites[1].find("testcase/failure") is None
