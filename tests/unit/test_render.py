"""The three views of one report: text (what a job log shows), versioned JSON and JUnit XML, each agreeing
with the exit code."""

import io
import json
from xml.etree import ElementTree as ET

import pytest

from nccl_doctor.render import make_console, render_json, render_junit, render_text, verdict_line
from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code
from tests.helpers.payloads import Doc


def _report(*severities: Severity) -> Report:
    r = Report(command="probe", summary="2 nodes")
    for i, sev in enumerate(severities):
        r.add(Finding(code="ND001", severity=sev, message=f"message {i} [bold]not markup[/bold]",
                      fix="export NCCL_SOCKET_IFNAME=ib0", where=Where(host=f"node{i}", iface="ib0")))
    r.tables.append(Table(title="Interfaces", columns=("name", "kind"), rows=(("ib0", "infiniband"),)))
    r.payload = Doc({"interfaces": [{"name": "ib0"}]})
    return r


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


def test_text_in_a_log_has_no_trailing_padding():
    buf = io.StringIO()
    render_text(_report(Severity.WARN), make_console(buf))
    lines = buf.getvalue().splitlines()
    assert lines and all(line == line.rstrip() for line in lines)
    assert any(line.startswith("Interfaces") for line in lines)  # the table title is still there


def test_junit_suite_per_host_failure_per_fail():
    root = ET.fromstring(render_junit(_report(Severity.FAIL, Severity.WARN)))
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == ["probe.node0", "probe.node1"]
    assert root.get("failures") == "1" and root.get("tests") == "2"
    assert suites[0].find("testcase/failure").get("type") == "ND001"
    assert suites[1].find("testcase/failure") is None


def test_junit_agrees_with_the_exit_code_under_strict_and_when_nothing_ran():
    """--strict makes a warning exit 1: the JUnit file counts it as a failure then. A check that could not
    run exits 2 whatever its findings: JUnit has an error testcase and JSON says why."""
    warn = _report(Severity.WARN)
    assert ET.fromstring(render_junit(warn)).get("failures") == "0"
    strict = ET.fromstring(render_junit(warn, strict=True))
    assert strict.get("failures") == "1" and exit_code(warn, strict=True) == 1
    warn.could_not_run = "nothing was measured"
    root = ET.fromstring(render_junit(warn))
    assert root.get("errors") == "1" and root.get("tests") == "2" and exit_code(warn) == 2
    error = root.find("testsuite[@name='probe.all']/testcase/error")
    assert error is not None and error.get("message") == "nothing was measured"
    assert json.loads(render_json(warn))["could_not_run"] == "nothing was measured"
    assert "could_not_run" not in json.loads(render_json(_report(Severity.WARN)))


@pytest.mark.parametrize(("strict", "failures"), [
    (False, {"probe.node0": "0", "probe.node1": "1", "probe.node2": "0"}),
    (True, {"probe.node0": "1", "probe.node1": "1", "probe.node2": "0"}),
])
def test_junit_per_host_failures_follow_strict(strict, failures):
    """Each host's testsuite counts its own failures by the exit code's rule (a dashboard reads the suite of
    the host it shows, not the root): node0 warns, node1 fails, node2 passes."""
    root = ET.fromstring(render_junit(_report(Severity.WARN, Severity.FAIL, Severity.PASS), strict=strict))
    suites = {s.get("name"): s for s in root.findall("testsuite")}
    assert {name: s.get("failures") for name, s in suites.items()} == failures
    assert root.get("failures") == str(sum(int(n) for n in failures.values()))
    for name, suite in suites.items():  # the count is the number of <failure> testcases in that suite
        assert len(suite.findall("testcase/failure")) == int(failures[name])
        assert suite.get("tests") == "1" and suite.get("errors") == "0"
    warned = suites["probe.node0"].find("testcase/system-out")
    assert (warned is None) is strict  # a warning is a failure under --strict, else passed with system-out
