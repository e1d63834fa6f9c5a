"""``parse --explain-unknown``: the NCCL lines of the input that match no catalogued format, grouped and counted,
on the inputs parse reads (files, directories, .gz, stdin), with bounded memory."""

from __future__ import annotations

import gzip
import io
import json
import sys
from pathlib import Path

import nccl_doctor.logs.command  # noqa: F401  bound to the real load before any test patches it (the CLI imports it lazily)
from nccl_doctor.cli import main
from nccl_doctor.logs.catalog import explain as explain_module
from nccl_doctor.logs.catalog import formats as catalog_module
from nccl_doctor.logs.catalog import warnclass
from nccl_doctor.logs.catalog.explain import explain_unknown
from nccl_doctor.logs.catalog.formats import CATALOG_VERSION

ROOT = Path(__file__).resolve().parents[3]
FIXTURE = ROOT / "fixtures" / "logs" / "explain-unknown-vendor-plugin-lines.log"
UNKNOWN = [
    (2, "INFO", "NET/Frobnic : Using device fx# (vendor plugin v#)", "NET/Frobnic : Using device fx0 (vendor plugin v3)"),
    (1, "WARN", "Frobnic link # flapped # times", "Frobnic link 3 flapped 7 times"),
]


def _run(capsys, *args):
    rc = main(["parse", "--explain-unknown", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_lists_exactly_the_unknown_lines_grouped_and_counted(capsys):
    rc, out, err = _run(capsys, "--format", "json", FIXTURE)
    doc = json.loads(out)
    assert rc == 0 and err == ""
    assert (doc["nccl_lines"], doc["known"], doc["unknown"]) == (14, 11, 3)
    assert [(k["count"], k["level"], k["kind"], k["example"]) for k in doc["kinds"]] == UNKNOWN
    assert doc["catalog_version"] == CATALOG_VERSION and doc["catalog_built_from"]["nccl"].startswith("v2.3.5-5..v2.30")


def test_text_listing_shows_counts_and_lines(capsys):
    rc, out, _ = _run(capsys, FIXTURE)
    lines = out.splitlines()
    assert rc == 0
    assert lines[0].startswith("14 NCCL lines read; 11 match a format of NCCL's own source")
    assert lines[2].split() == ["2", "INFO", *UNKNOWN[0][3].split()]
    assert lines[3].split() == ["1", "WARN", *UNKNOWN[1][3].split()]


def test_same_inputs_as_parse_directory_gz_and_stdin(tmp_path, capsys, monkeypatch):
    d = tmp_path / "logs"
    d.mkdir()
    (d / "rank0.log").write_bytes(FIXTURE.read_bytes())
    (d / "rank1.log.gz").write_bytes(gzip.compress(FIXTURE.read_bytes()))
    rc, out, _ = _run(capsys, "--format", "json", d)
    doc = json.loads(out)
    assert rc == 0 and (doc["nccl_lines"], doc["unknown"]) == (28, 6)
    assert [k["count"] for k in doc["kinds"]] == [4, 2]
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(FIXTURE.read_bytes())))
    rc, out, _ = _run(capsys, "--format", "json", "-")
    assert rc == 0 and json.loads(out)["unknown"] == 3


def test_no_nccl_line_is_an_input_error(tmp_path, capsys):
    log = tmp_path / "plain.log"
    log.write_text("hello\nworld\n")
    rc, _, err = _run(capsys, log)
    assert rc == 2 and "no NCCL INFO/WARN lines" in err


def test_memory_is_bounded_by_the_kind_cap(tmp_path, monkeypatch):
    monkeypatch.setattr(explain_module, "MAX_UNKNOWN_KINDS", 3)
    log = tmp_path / "many.log"
    log.write_text("".join(f"h:1:1 [0] NCCL INFO Frobnic word{chr(97 + i % 26)}{chr(97 + i // 26)} up\n"
                           for i in range(100)))
    found = explain_unknown([str(log)])
    assert len(found.kinds) == 3 and found.unknown == 100 and found.dropped == 97


def test_parse_loads_the_catalog_only_for_a_warn_its_rules_do_not_decide(capsys, monkeypatch):
    """A log whose WARNs the parser's own rules decide (or without WARNs) never reads the catalog; one with a
    WARN they do not decide reads its WARN part once, whatever the number of such lines."""
    reads = []

    def counted(data=None):
        reads.append(data)
        return real(data)
    real = catalog_module.read_document
    monkeypatch.setattr(catalog_module, "load", None)  # the whole catalog: never on the parse path
    monkeypatch.setattr(warnclass, "read_document", counted)
    warnclass._warn_matcher.cache_clear()
    warnclass._WARN_MEMO.clear()
    try:
        rc = main(["parse", "--format", "json", str(ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log")])
        assert rc in (0, 1) and json.loads(capsys.readouterr().out)["schema_version"]
        assert reads == []
        rc = main(["parse", "--format", "json", str(FIXTURE), str(FIXTURE)])
        assert rc in (0, 1) and json.loads(capsys.readouterr().out)["schema_version"]
        assert reads == [None]
    finally:
        warnclass._warn_matcher.cache_clear()


def test_the_listing_goes_through_the_cli_to_json_out_and_refuses_junit(capsys, tmp_path):
    """The command returns a listing; the CLI prints it and writes ``--json-out`` (never the command itself)."""
    out_file = tmp_path / "unknown.json"
    rc, out, _ = _run(capsys, FIXTURE, "--json-out", out_file)
    assert rc == 0 and "match none" in out
    assert json.loads(out_file.read_text())["unknown"] == 3
    rc, out, err = _run(capsys, FIXTURE, "--junit-out", tmp_path / "unknown.xml")
    assert rc == 2 and out == "" and "--junit-out" in err
    assert not (tmp_path / "unknown.xml").exists()


def test_the_listing_refuses_prom_out_rather_than_leave_it_unwritten(capsys, tmp_path):
    """``--prom-out`` with ``--explain-unknown`` once exited 0 and wrote nothing: a listing has no findings to
    count, so the flag is refused as ``--junit-out`` is, naming itself."""
    rc, out, err = _run(capsys, FIXTURE, "--prom-out", tmp_path / "unknown.prom")
    assert rc == 2 and out == ""
    assert "--prom-out: --explain-unknown lists lines, it has no findings to write" in err
    assert not (tmp_path / "unknown.prom").exists()
