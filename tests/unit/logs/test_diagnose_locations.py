"""What every ``parse`` finding must carry: where (host/rank/comm, file:line), the evidence line, the
real text of the log (never the masked grouping key), and a fix chosen by its own text."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.errors import InputError
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines, parse_paths

ROOT = Path(__file__).resolve().parents[3]
REAL = ROOT / "fixtures" / "nccl-logs"
SYNTH = ROOT / "fixtures" / "logs"
ALL_LOGS = sorted(REAL.glob("*.log")) + sorted(SYNTH.iterdir())
# what warn_kind() puts into a grouping key; none of it may reach a message
PLACEHOLDER = re.compile(r"(?:^|[\s\[(=:,])#(?:$|[\s\]),x.;:])|0x#|<addr>|<ip6?>")


def diag(path: Path):
    return diagnose(parse_paths([str(path)]))


def finding(report, code: str):
    return next(f for f in report.findings if f.code == code)


@pytest.mark.parametrize("path", [*ALL_LOGS, REAL], ids=lambda p: p.name[:12])
def test_every_finding_says_where_and_fails_quote_evidence(path):
    report = diag(path)
    assert report.findings
    for f in report.findings:
        assert f.where.as_dict(), (f.code, f.message)
        if f.severity.value == "fail":
            assert f.where.as_dict() and f.evidence, (f.code, f.message)
        for line in f.evidence:
            assert re.match(r"\S+:\d+: ", line), (f.code, line)  # file:line: text


def test_transport_findings_name_host_and_quote_their_line():
    f = finding(diag(REAL / "048-ofi-plugin-tcp-provider-not-efa.log"), "ND116")
    assert f.where.host == "ip-192-168-123-255" and f.where.line == 8
    assert f.evidence[0].endswith(":8: ip-192-168-123-255: NET/OFI Selected Provider is tcp;ofi_rxm")
    assert "ip-192-168-82-243" in f.message  # both hosts chose TCP

    report = diag(SYNTH / "launchers-crlf-spliced.log")
    shm = finding(report, "ND105")
    assert (shm.where.host, shm.where.rank, shm.where.line) == ("eta", 5, 5)
    assert shm.evidence[0].endswith(":5: eta: Channel 00 : 5[1] -> 6[2] via SHM/direct/direct")
    sock = finding(report, "ND103")
    assert sock.where.host == "zeta" and "via NET/Socket/0" in sock.evidence[0]

    sock = finding(diag(REAL / "052-socket-two-ifaces-selected-lines.log"), "ND103")
    assert (sock.where.host, sock.where.line) == ("node01", 6) and "via NET/Socket/0" in sock.evidence[0]

    efa = finding(diag(REAL / "046-efa-p4-libfabric-no-gdrdma.log"), "ND104")
    assert efa.where.host == "ip-172-31-101-103" and efa.where.comm and efa.where.line == 4
    assert "via NET/AWS Libfabric/0" in efa.evidence[0]

    ib = finding(diag(SYNTH / "nccl-2.4-ring-ib.log"), "ND104")
    assert (ib.where.host, ib.where.rank, ib.where.line) == ("alpha", 1, 9)
    assert ib.evidence[0].endswith(":9: alpha: Ring 00 : 1 -> 2 [send] via NET/IB/0")


def test_messages_quote_the_log_not_the_grouping_key(capsys):
    rc = main(["parse", "--format", "json", str(REAL / "059-dgx-h100-ibv-modify-qp-network-unreachable.log")])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 1
    text = " ".join(f["message"] for f in doc["findings"])
    assert "Socket recv failed while polling for opId=0x7fa0242685e0" in text
    assert "[Proxy Service 1] Failed to execute operation Connect from rank 1, retcode 2" in text
    assert not PLACEHOLDER.search(text), text
    for path in ALL_LOGS:
        for f in diag(path).findings:
            assert not PLACEHOLDER.search(f.message), (path.name, f.message)


def test_each_fix_is_chosen_by_its_own_group():
    report = diag(REAL)  # 045 (ibv_create_cq) and 059 (ibv_modify_qp) together
    verbs = [f for f in report.findings if f.code == "ND111"]
    assert len(verbs) == 2
    for f in verbs:
        if "ibv_modify_qp" in f.message:
            assert "NCCL_IB_GID_INDEX" in f.fix and "ulimit" not in f.fix
        else:
            assert "ibv_create_cq" in f.message and "ulimit -l" in f.fix
    alone = finding(diag(REAL / "059-dgx-h100-ibv-modify-qp-network-unreachable.log"), "ND111")
    assert alone.fix == next(f.fix for f in verbs if "ibv_modify_qp" in f.message)

    # one masked kind, two statuses: each status gets its own finding and its own fix
    report = diagnose(parse_lines([
        "a:1:1 [0] NCCL INFO NET/IB : Got completion from peer 10.0.0.2<1> with status=12 opcode=0 len=0 vendor err 129",
        "a:1:1 [0] NCCL INFO NET/IB : Got completion from peer 10.0.0.2<1> with status=5 opcode=0 len=0 vendor err 249",
    ]))
    comp = {f.message.split("status ")[1].split(" ")[0]: f for f in report.findings if f.code == "ND109"}
    assert set(comp) == {"12", "5"}
    assert "ibstat" in comp["12"].fix and "consequence" in comp["5"].fix


def test_directory_walk_skips_files_that_are_not_logs(tmp_path, capsys):
    good = (REAL / "041-h20-ib-gdrdma-cumem-2node.log").read_text()
    (tmp_path / "node01.12.log").write_text(good)
    (tmp_path / "rank1").write_text(good)  # per-rank logs are often extension-less
    (tmp_path / "labels.json").write_text('{"x": "n9:1:1 [0] NCCL WARN Call to ibv_create_cq failed"}\n')
    (tmp_path / "README.md").write_text("n9:1:1 [0] NCCL INFO Using network Socket\n")
    rc = main(["parse", "--format", "json", str(tmp_path)])
    doc = json.loads(capsys.readouterr().out)
    assert rc == 0 and [Path(s["name"]).name for s in doc["inputs"]] == ["node01.12.log", "rank1"]
    assert sorted(Path(s.split(": ")[0]).name for s in doc["skipped_inputs"]) == ["README.md", "labels.json"]
    assert "n9" not in doc["hosts"]
    rc = main(["parse", str(tmp_path)])
    out = capsys.readouterr().out
    assert "skipped 2 files" in out and ".json file" in out and "labels.json" in out

    # named explicitly, a .json is parsed
    result = parse_paths([str(tmp_path / "labels.json")])
    assert result.has_nccl and not result.skipped
    # a directory of nothing but non-logs says why it found no log
    only = tmp_path / "only"
    only.mkdir()
    (only / "labels.json").write_text("{}")
    with pytest.raises(InputError, match=r"holds no log files.*skipped 1"):
        parse_paths([str(only)])


def test_summary_counts_agree_in_number():
    report = diagnose(parse_lines([
        "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 commId 0x7 - Init START",
        "n1:1:1 [0] NCCL INFO comm 0x1 rank 0 nranks 1 cudaDev 0 busId 1000 commId 0x7 - Init COMPLETE",
    ]))
    assert "1 host, 1 rank seen, 1 communicator" in report.summary
    two = diag(REAL / "041-h20-ib-gdrdma-cumem-2node.log")
    assert re.search(r"2 hosts, \d+ ranks seen, \d+ communicators?", two.summary)


def test_parser_api_takes_paths():
    # preflight calls ``parse_paths`` with pathlib.Path files, then ``diagnose``
    report = diagnose(parse_paths([REAL / "059-dgx-h100-ibv-modify-qp-network-unreachable.log"]))
    doc = json.dumps([f.as_dict() for f in report.findings])
    assert "059-dgx-h100" in doc and report.verdict.value == "fail"


def test_version_mismatch_across_files_names_every_version_and_where():
    f = finding(diag(REAL), "ND107")
    versions = ["2.3.7", "2.4.6", "2.4.7", "2.7.8"]
    assert all(v in f.message for v in versions)
    quoted = [re.search(r"NCCL version (\S+?)\+", line).group(1) for line in f.evidence]
    assert quoted == versions  # each version once, its first occurrence, oldest first
    assert f.where.file and "050-nccl2.3" in f.where.file and "045-roce" in f.where.file  # no host printed them


def test_version_mismatch_names_the_hosts():
    f = finding(diagnose(parse_lines([
        "a:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
        "b:2:2 [0] NCCL INFO NCCL version 2.19.3+cuda12.2",
        "c:3:3 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
    ])), "ND107")
    assert f.where.host == "a,b,c" and f.where.file is None
    assert "2.19.3 (1 process on b)" in f.message and "2.21.5 (2 processes on a,c)" in f.message
    assert [e.split(": ", 1)[1] for e in f.evidence] == ["b: NCCL version 2.19.3+cuda12.2",
                                                           "a: NCCL version 2.21.5+cuda12.4"]


def _readme_json_table() -> dict[str, str]:
    """The parse page's JSON key table: first-column key name -> content cell."""
    section = (ROOT / "docs" / "parse.md").read_text()
    table = section.split("JSON keys", 1)[1].split("\n\n", 2)[1]
    rows = {}
    for row in table.splitlines()[2:]:
        key_cell, content = row.strip("|").split(" | ", 1)
        for key in re.findall(r"`(\w+)`", key_cell):
            rows[key] = content
    return rows


def test_readme_json_keys_match_real_output(capsys):
    rc = main(["parse", "--format", "json", str(REAL), str(SYNTH)])
    assert rc == 1  # the fixtures hold failed jobs
    doc = json.loads(capsys.readouterr().out)
    rows = _readme_json_table()
    data_keys = set(doc) - {"schema_version", "tool", "tool_version", "command", "verdict", "summary", "findings"}
    assert set(rows) == data_keys
    group_keys = set(re.search(r"`\{(category[^`]*)\}`", rows["warnings"]).group(1)
                     .replace("first: {file, line, text}", "first").replace(" ", "").split(","))
    for name in ("warnings", "errors", "watchdog"):
        assert doc[name], name  # the inputs hold every kind of group
        for g in doc[name]:
            extra = {"op", "seq"} if name == "watchdog" else set()
            assert set(g) == group_keys | extra, (name, set(g) ^ group_keys)
            assert set(g["first"]) == {"file", "line", "text"}
    comm_keys = re.search(r"list of `\{([^`]*)\}`", rows["communicators"]).group(1)
    comm_keys = set(comm_keys.replace("inter_node: {transport, gdr}", "inter_node").replace(" ", "").split(","))
    assert all(set(c) == comm_keys for c in doc["communicators"])
    network = set(re.findall(r"`(\w+)`", rows["network"])) - {"value", "host_count", "hosts", "Using"}
    assert network == set(doc["network"])
    assert all(set(i) <= {"name", "lines", "bytes", "cut_lines", "error"} for i in doc["inputs"])
