"""``nccl-doctor parse`` end to end: output formats, exit codes, inputs of every kind, bad input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from nccl_doctor.cli import main

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "fixtures" / "nccl-logs"
GOOD = REAL / "041-h20-ib-gdrdma-cumem-2node.log"
FAILING = REAL / "057-ibext-completion-status-12-vendor-129.log"
WARNING = REAL / "052-socket-two-ifaces-selected-lines.log"


def parse(capsys, *args):
    rc = main(["parse", *map(str, args)])
    out, err = capsys.readouterr()
    return rc, out, err


def test_json_output_has_documented_keys(capsys):
    rc, out, err = parse(capsys, "--format", "json", GOOD)
    doc = json.loads(out)
    assert rc == 0 and err == ""
    for key in ("schema_version", "verdict", "inter_node", "intra_node", "nccl_versions", "hosts", "ranks",
                "communicators", "findings", "warnings", "errors", "settings", "bootstrap_interfaces"):
        assert key in doc
    assert doc["inter_node"]["transport"] == "IB" and doc["inter_node"]["gdr"] is True
    assert doc["verdict"] == "pass"


def test_text_output_verdict_first_then_table_then_findings(capsys):
    rc, out, _ = parse(capsys, FAILING)
    lines = out.splitlines()
    assert rc == 1
    assert lines[0].startswith("nccl-doctor parse: FAIL")
    assert "Findings" in out and "ND109" in out and "fix:" in out
    assert "\x1b[" not in out  # no colour off a TTY


def test_exit_codes_warn_and_strict(capsys):
    assert parse(capsys, WARNING)[0] == 0
    assert parse(capsys, "--strict", WARNING)[0] == 1


def test_directory_of_per_rank_files_and_gz(tmp_path, capsys):
    d = tmp_path / "job" / "logs"
    d.mkdir(parents=True)
    lines = GOOD.read_text().splitlines(keepends=True)
    (d / "node01.8977.log").write_text("".join(lines[:8]))
    with gzip.open(d / "node02.31805.log.gz", "wt") as fh:
        fh.write("".join(lines[8:]))
    rc, out, _ = parse(capsys, "--format", "json", tmp_path / "job")
    doc = json.loads(out)
    assert rc == 0 and len(doc["inputs"]) == 2
    assert doc["inter_node"]["transport"] == "IB" and doc["hosts"] == ["node01", "node02"]


@pytest.mark.parametrize("content, message", [
    (b"", "empty, no NCCL log lines"),
    (b"epoch 1 loss 2.0\nepoch 2 loss 1.5\n", "no NCCL log lines in 2 lines"),
    (bytes(range(256)) * 64, "a binary file, not a log (60% control or undecodable bytes at its start)"),
    (b"\xff\xfe\xfa invalid utf-8 \xc3\x28\n", "no NCCL log lines"),  # a few stray bytes: still text
])
def test_unusable_content_is_one_line_exit_2(tmp_path, capsys, content, message):
    f = tmp_path / "x.log"
    f.write_bytes(content)
    rc, out, err = parse(capsys, f)
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("nccl-doctor parse: error: ") and message in err
    assert "NCCL_DEBUG=INFO" in err or "binary file" in err


def test_missing_path_and_empty_directory(tmp_path, capsys):
    rc, _, err = parse(capsys, tmp_path / "nope.log")
    assert rc == 2 and "no such file" in err and err.count("\n") == 1
    (tmp_path / "empty").mkdir()
    rc, _, err = parse(capsys, tmp_path / "empty")
    assert rc == 2 and "holds no log files" in err


def test_invalid_utf8_inside_nccl_lines_is_decoded_with_replacement(tmp_path, capsys):
    f = tmp_path / "x.log"
    f.write_bytes(GOOD.read_bytes().replace(b"node02", b"node\xff2"))
    rc, out, _ = parse(capsys, "--format", "json", f)
    assert rc == 0 and "node\ufffd2" in json.loads(out)["hosts"]


def test_truncated_gzip_diagnoses_what_was_readable(tmp_path, capsys):
    data = gzip.compress(GOOD.read_bytes() * 50)
    f = tmp_path / "x.log.gz"
    f.write_bytes(data[: len(data) * 2 // 3])
    rc, out, _ = parse(capsys, "--format", "json", f)
    doc = json.loads(out)
    assert rc == 0 and doc["inter_node"]["transport"] == "IB"
    assert any(x["code"] == "ND117" and "truncated" in x["message"] for x in doc["findings"])


def test_truncated_gzip_with_nothing_readable(tmp_path, capsys):
    f = tmp_path / "x.gz"
    f.write_bytes(gzip.compress(b"x" * 1000)[:12])
    rc, _, err = parse(capsys, f)
    assert rc == 2 and "truncated" in err


def test_huge_single_line_is_capped_not_held(tmp_path, capsys):
    f = tmp_path / "x.log"
    with open(f, "wb") as fh:
        fh.write(GOOD.read_bytes())
        fh.write(b"A" * (20 * 1024 * 1024))  # 20 MB without a newline
        fh.write(b"\n" + GOOD.read_bytes())
    rc, out, _ = parse(capsys, "--format", "json", f)
    doc = json.loads(out)
    assert rc == 0 and doc["inter_node"]["transport"] == "IB"
    assert any(x["code"] == "ND117" and "cut" in x["message"] for x in doc["findings"])


def test_json_out_never_overwrites_an_input(capsys):
    rc = main(["parse", str(GOOD), "--json-out", str(GOOD)])
    assert rc == 2 and "it is (inside) the input" in capsys.readouterr().err
