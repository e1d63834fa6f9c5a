"""The attack: escape sequences and control characters in a log line, a host name, an interface name in a
``--root`` tree, an NCCL variable's value and a peer's finding. None of them reaches the text, JSON or JUnit
output; the JUnit file parses; the visible text survives."""

import io
import json
import os
import re
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

import pytest

from nccl_doctor.cli import main
from nccl_doctor.render import make_console, render_json, render_junit, render_text
from nccl_doctor.report import Finding, Report, Table
from tests.helpers import sysfs_builder as b
from tests.helpers.payloads import Doc

# what no output may hold: C0 but tab/newline, DEL, C1, and what XML 1.0 forbids
BAD = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
OSC52 = "\x1b]52;c;ZXZpbA==\x07"  # write "evil" to the clipboard
OSC2 = "\x1b]2;owned\x1b\\"  # set the window title
DCS = "\x1bP1$r\x1b\\"  # a device control string (DECRQSS)
C1_CSI = "\u009b31m"  # the 8-bit CSI
ATTACK = f"nul\x00ctl\x01 clip{OSC52} title{OSC2} dcs{DCS} c1{C1_CSI} lone\udcff end"


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (*_strings(k), *_strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def _assert_clean_outputs(out: str, json_path: Path, junit_path: Path) -> tuple[str, str]:
    """Nothing unsafe in stdout, in any string of the JSON (json.dumps would only escape it), in the JUnit
    file (which must parse); returns the JSON and JUnit texts."""
    assert not BAD.search(out), repr(BAD.findall(out))
    doc_text = json_path.read_text()
    bad = [s for s in _strings(json.loads(doc_text)) if BAD.search(s)]
    assert not bad, bad
    junit = junit_path.read_text(encoding="utf-8")
    assert not BAD.search(junit)
    ET.parse(junit_path)  # well-formed XML
    return doc_text, junit


@pytest.fixture
def hostile_log(tmp_path: Path) -> Path:
    log = tmp_path / "hostile.log"
    lines = [
        "NCCL version 2.21.5+cuda12.4",
        "ho\x1bcs\x07ta:100:100 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000 - Init COMPLETE",
        f"hosta:100:100 [0] NCCL WARN {ATTACK}",
        f"hosta:100:100 [0] NCCL INFO NCCL_SOCKET_IFNAME set by environment to eth{OSC52}0",
    ]
    # surrogateescape writes the lone surrogate back as the undecodable byte it stood for
    log.write_bytes(("\n".join(lines) + "\n").encode("utf-8", "surrogateescape"))
    return log


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_parse_of_a_hostile_log(hostile_log, tmp_path, capsys, fmt):
    jpath, xpath = tmp_path / "r.json", tmp_path / "r.xml"
    rc = main(["parse", str(hostile_log), "--format", fmt, "--json-out", str(jpath), "--junit-out", str(xpath)])
    assert rc == 0
    out = capsys.readouterr().out
    doc_text, junit = _assert_clean_outputs(out, jpath, xpath)
    shown = "nulctl clip title dcs c1 lone\ufffd end"  # the visible text, the undecodable byte as U+FFFD
    shown_out = out if fmt == "text" else json.dumps(json.loads(out), ensure_ascii=False)
    for text in (shown_out, junit, json.dumps(json.loads(doc_text), ensure_ascii=False)):
        assert shown in text
        assert "ZXZpbA==" not in text and "owned" not in text  # the sequences' payloads went with them
    assert "hosta" in json.loads(doc_text)["hosts"]


def test_probe_of_a_tree_with_a_hostile_interface_name(tmp_path, capsys, monkeypatch):
    for k in [k for k in os.environ if k.startswith(("NCCL_", "GLOO_"))]:
        monkeypatch.delenv(k)
    spec = b.ethernet_pair(100000)
    spec["net"][1]["name"] = f"eth{OSC52}{DCS}1"  # a name the kernel allows: no '/', ':' or space
    root = b.build(spec, tmp_path / "root")
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", f"eth{OSC2}9\x01")
    jpath, xpath = tmp_path / "p.json", tmp_path / "p.xml"
    for fmt in ("text", "json"):
        rc = main(["probe", "--root", str(root), "--format", fmt, "--json-out", str(jpath), "--junit-out", str(xpath)])
        assert rc == 1  # NCCL_SOCKET_IFNAME matches nothing
        out = capsys.readouterr().out
        doc_text, junit = _assert_clean_outputs(out, jpath, xpath)
        doc = json.loads(doc_text)
        assert "ND202" in junit and any(f["code"] == "ND202" for f in doc["findings"])
        # (a finding that quotes a value with repr() shows it escaped, "\\x1b]2;...": inert text)
    assert "eth1" in out  # the visible part of the name


def test_a_peers_finding_and_table_are_cleaned_on_arrival():
    """Preflight's node 0 builds findings and tables from other nodes' JSON: from_dict cleans them too."""
    f = Finding.from_dict({"code": f"ND9{OSC52}", "severity": "fail", "message": f"bad{OSC2} peer",
                           "fix": f"do{DCS} this", "where": {"host": f"node{C1_CSI}7", "iface": "ib\x000"},
                           "evidence": [f"line\x07{OSC52}"]})
    assert (f.code, f.message, f.fix, f.where.host, f.where.iface, f.evidence) == (
        "ND9", "bad peer", "do this", "node7", "ib0", ("line",))
    t = Table.from_dict({"title": f"T{OSC2}", "columns": ["c\x00"], "rows": [[f"v{C1_CSI}", 3]], "caption": "\x1b"})
    assert (t.title, t.columns, t.rows, t.caption) == ("T", ("c",), (("v", 3),), "")
    report = Report(command="preflight", findings=[f], tables=[t], notes=[f"note{OSC52}"],
                    summary=f"sum{OSC2}", could_not_run="why\x00", payload=Doc({f"k{DCS}": [f"v{C1_CSI}"]}))
    buf = io.StringIO()
    render_text(report, make_console(buf))
    for text in (buf.getvalue(), render_json(report), render_junit(report)):
        assert not BAD.search(text) and "\\u00" not in text and "\\u001b" not in text
    assert json.loads(render_json(report))["k"] == ["v"]
    ET.fromstring(render_junit(report))
