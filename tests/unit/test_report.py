"""The report model: the verdict is the worst finding, one exit-code rule, findings and tables travel between
nodes as JSON, and the small text helpers."""

import json

import pytest

from nccl_doctor.report import Finding, Report, Severity, Table, Where, exit_code, hosts_text, plural


def _report(*severities: Severity, could_not_run: str = "") -> Report:
    r = Report(command="probe", summary="2 nodes", could_not_run=could_not_run)
    for i, sev in enumerate(severities):
        r.add(Finding(code="ND001", severity=sev, message=f"message {i}", where=Where(host=f"node{i}")))
    return r


@pytest.mark.parametrize(("sevs", "verdict"), [
    ((), Severity.PASS),
    ((Severity.PASS,), Severity.PASS),
    ((Severity.PASS, Severity.WARN), Severity.WARN),
    ((Severity.WARN, Severity.FAIL, Severity.PASS), Severity.FAIL),
])
def test_verdict_is_worst_finding(sevs, verdict):
    assert _report(*sevs).verdict is verdict


@pytest.mark.parametrize(("sevs", "strict", "code"), [
    ((Severity.PASS,), False, 0), ((Severity.WARN,), False, 0), ((Severity.WARN,), True, 1),
    ((Severity.FAIL,), False, 1), ((Severity.FAIL,), True, 1), ((Severity.PASS,), True, 0),
])
def test_exit_code(sevs, strict, code):
    assert exit_code(_report(*sevs), strict=strict) == code


@pytest.mark.parametrize("strict", [False, True])
@pytest.mark.parametrize("sevs", [
    (), (Severity.PASS,), (Severity.WARN,), (Severity.FAIL,), (Severity.PASS, Severity.WARN, Severity.FAIL),
], ids=["no-findings", "pass", "warn", "fail", "all-three"])
def test_could_not_run_exits_2_whatever_the_findings(sevs, strict):
    """A check that could not run is never a pass nor a plain failure: 2 wins over a FAIL's 1, with or
    without --strict. The verdict is still the worst finding's."""
    report = _report(*sevs, could_not_run="nothing was measured")
    assert exit_code(report, strict=strict) == 2
    assert report.verdict is _report(*sevs).verdict


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


@pytest.mark.parametrize(("n", "word", "plural_word", "text"), [
    (0, "node", None, "0 nodes"), (1, "node", None, "1 node"), (2, "node", None, "2 nodes"),
    (1, "index", "indices", "1 index"), (3, "index", "indices", "3 indices"),
])
def test_plural(n, word, plural_word, text):
    assert plural(n, word, plural_word) == text


@pytest.mark.parametrize(("hosts", "text"), [
    ([], ""),
    ([""], ""),
    (["n003", "n001", "n002", "n007", "n002"], "n[001-003,007]"),
    (["gpu-a", "gpu-b"], "gpu-a,gpu-b"),
    (["n1", "odd[name"], "n1,odd[name"),  # no compact form for a bracket: plain list, still one line
])
def test_hosts_text_is_slurm_compact(hosts, text):
    assert hosts_text(iter(hosts)) == text
