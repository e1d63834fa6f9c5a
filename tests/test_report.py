"""The report model, renderers and exit codes: one model, three views, one exit-code rule."""

import io
import json
from xml.etree import ElementTree as ET

import pytest

from nccl_doctor.render import make_console, render_json, render_junit, render_text, verdict_line
from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code, hosts_text, plural


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


def test_findings_and_tables_round_trip_through_json():
    """Findings and tables travel between preflight nodes as JSON: from_dict undoes as_dict."""
    finding = Finding(code="ND001", severity=Severity.WARN, message="m", fix="f",
                      where=Where(host="n1", rank=3, iface="ib0", line=7), evidence=("a", "b"))
    bare = Finding(code="ND999", severity=Severity.FAIL, message="no fix, no where")
    for f in (finding, bare):
        assert Finding.from_dict(json.loads(json.dumps(f.as_dict()))) == f
    assert "name" in finding.as_dict()  # the derived key as_dict adds is ignored on the way back
    table = Table(title="T", columns=("a", "b"), rows=(("1", "2"), ("3", "4")), caption="c")
    for t in (table, Table(title="empty", columns=("a",), rows=())):
        assert Table.from_dict(json.loads(json.dumps(t.as_dict()))) == t


@pytest.mark.parametrize("n,word,plural_word,text", [
    (0, "node", None, "0 nodes"), (1, "node", None, "1 node"), (2, "node", None, "2 nodes"),
    (1, "index", "indices", "1 index"), (3, "index", "indices", "3 indices"),
])
def test_plural(n, word, plural_word, text):
    assert plural(n, word, plural_word) == text


@pytest.mark.parametrize("hosts,text", [
    ([], ""),
    ([""], ""),
    (["n003", "n001", "n002", "n007", "n002"], "n[001-003,007]"),
    (["gpu-a", "gpu-b"], "gpu-a,gpu-b"),
    (["n1", "odd[name"], "n1,odd[name"),  # no compact form for a bracket: plain list, still one line
])
def test_hosts_text_is_slurm_compact(hosts, text):
    assert hosts_text(iter(hosts)) == text


def test_text_in_a_log_has_no_trailing_padding():
    buf = io.StringIO()
    render_text(_report(Severity.WARN), make_console(buf))
    lines = buf.getvalue().splitlines()
    assert lines and all(line == line.rstrip() for line in lines)
    assert any(line.startswith("Interfaces") for line in lines)  # the table title is still there
