"""Node 0 merges the same NCCL log problem on many nodes by its parameters: each node parses its own log
(real NCCL lines from the fixtures, their host prefix swapped for the node's, as ``tests/helpers/fleet.py``
does), its findings name it through their template's ``{host}``, and the merged finding renders the nodes'
hostlist there. No text is searched for host names, so a name inside another word stays as NCCL wrote it."""

import re
from pathlib import Path

from nccl_doctor.codes import Code
from nccl_doctor.preflight.nccllogs import nccl_log_findings, nccl_log_summary
from nccl_doctor.preflight.protocol import LogSummary
from nccl_doctor.report import Finding

ROOT = Path(__file__).resolve().parents[3] / "fixtures"
SOCKET_TIMEOUT = ROOT / "nccl-logs/051-socket-veth-linklocal-connect-timeout.log"  # ND110 and ND108 on node01
PEER_CLOSED = ROOT / "logs/socket-transport-only-in-error-traces.log"  # node22's WARN names its peer node21
HCA_NO_PORT = ROOT / "nccl-logs/049-ib-hca-set-no-device-socket-quoted-oneline.log"  # quoted lines, no prefix


def _own_log(tmp_path: Path, fixture: Path, prefix: str, host: str) -> LogSummary:
    """``host``'s parsed log: the fixture's lines of ``prefix`` (``node01``), as ``host`` printed them, sent
    to node 0 as JSON."""
    lines = [line.replace(f"{prefix}:", f"{host}:", 1) for line in fixture.read_text().splitlines()
             if line.startswith(f"{prefix}:")]
    d = tmp_path / host
    d.mkdir()
    (d / f"{host}.1234.log").write_text("\n".join(lines) + "\n")
    return LogSummary.from_json(nccl_log_summary(d, "nccl", host=host).to_json())


def _by_code(logs: list[LogSummary]) -> dict[str, list]:
    out: dict[str, list] = {}
    for f in nccl_log_findings(logs):
        out.setdefault(str(f.code), []).append(f)
    return out


def test_the_same_warning_and_connect_failure_on_two_nodes_are_one_finding_each(tmp_path):
    logs = [_own_log(tmp_path, SOCKET_TIMEOUT, "node01", h) for h in ("gpu1", "gpu2")]
    [one] = [f for f in logs[0].findings if f.code == Code.CONNECT_FAILED]
    assert one.template == "connect@host" and one.message.startswith("connection between ranks failed on gpu1 (")
    found = _by_code(logs)
    [warning] = found[Code.NCCL_WARNING]
    assert warning.where.host == "gpu[1-2]"
    assert warning.message == "NCCL warning x2 on gpu[1-2]: Call to connect returned Connection timed out, retrying"
    [connect] = found[Code.CONNECT_FAILED]
    assert connect.where.host == "gpu[1-2]" and connect.message.startswith("connection between ranks failed on gpu[1-2] (")
    assert connect.fix == one.fix and "veth25f2e72" in connect.fix


def test_a_host_name_inside_another_word_is_not_rewritten(tmp_path):
    """node2's own WARN names its peer node21: merged with node3, the peer keeps its name (the old regex
    had to guard the edges of a name against exactly this)."""
    logs = [_own_log(tmp_path, PEER_CLOSED, "node22", h) for h in ("node2", "node3")]
    [connect] = _by_code(logs)[Code.CONNECT_FAILED]
    assert connect.where.host == "node[2-3]"
    assert connect.message == ("connection between ranks failed on node[2-3] (1 time): socketProgress: Connection "
                               "closed by remote peer node21<47131> (rank 1)")


def test_a_node_named_like_a_word_of_the_text_leaves_that_word_alone(tmp_path):
    """The WARN says ``Connect to f``; nodes named ``f`` and ``g`` merge, and NCCL's ``f`` stays ``f``."""
    logs = [_own_log(tmp_path, SOCKET_TIMEOUT, "node01", h) for h in ("f", "g")]
    [connect] = _by_code(logs)[Code.CONNECT_FAILED]
    assert connect.where.host == "f,g"
    assert connect.message == "connection between ranks failed on f,g (1 time): Connect to f"


def test_the_hca_fix_names_the_nodes_whose_ports_it_matches_not(tmp_path):
    """ND102's fix names the node where NCCL_IB_HCA matched no port: one fix for both nodes. The fixture
    quotes a node's lines without their prefix: each gets the node's (``host:pid:tid``) back."""
    bodies = [p.strip() for p in re.split(r"(?=\[0\] NCCL INFO )", HCA_NO_PORT.read_text().lstrip("> ")) if p.strip()]
    prefixed = tmp_path / "prefixed.log"
    prefixed.write_text("".join(f"node01:4242:4242 {b}\n" for b in bodies))
    logs = [_own_log(tmp_path, prefixed, "node01", h) for h in ("gpu1", "gpu2")]
    [fallback] = _by_code(logs)[Code.SOCKET_FALLBACK]
    assert fallback.where.host == "gpu[1-2]" and fallback.template == "hca-no-port"
    assert "compare with `ibstat` (or `ibv_devinfo`) on gpu[1-2] and list only ACTIVE ports" in (fallback.fix or "")


def test_one_communicator_on_sockets_beside_ib_on_two_nodes_is_one_finding(tmp_path):
    logs = [_own_log(tmp_path, ROOT / "logs/one-comm-on-socket-beside-ib.log", "g1", h) for h in ("gpu1", "gpu2")]
    [fallback] = _by_code(logs)[Code.SOCKET_FALLBACK]
    assert fallback.template == "beside-rdma@host" and fallback.where.host == "gpu[1-2]"
    assert fallback.message == ("inter-node traffic of communicator 0x2222 on gpu[1-2] uses TCP sockets (NET/Socket) "
                                "while the rest of the job uses IB")


def test_a_mixed_communicator_on_two_nodes_names_them_in_each_transport(tmp_path):
    """gpu-01233's own lines: communicator 0x3344... uses IB on some hops and Socket on others."""
    mixed = ROOT / "logs/one-node-without-ib-mixed-communicator.log"
    logs = [_own_log(tmp_path, mixed, "gpu-01233", h) for h in ("gpu1", "gpu2")]
    [fallback] = _by_code(logs)[Code.SOCKET_FALLBACK]
    assert fallback.template == "beside-rdma-mixed" and fallback.where.host == "gpu[1-2]"
    assert fallback.message.endswith("is mixed: IB on gpu[1-2]; Socket on gpu[1-2])")


def test_a_fix_given_as_text_is_part_of_the_problem(tmp_path):
    """Same template and parameters but another fix (NCCL used another interface there): two findings."""
    logs = [_own_log(tmp_path, SOCKET_TIMEOUT, "node01", h) for h in ("gpu1", "gpu2")]
    [one] = [f for f in logs[1].findings if f.code == Code.CONNECT_FAILED]
    other = Finding(code=one.code, severity=one.severity, message=one.message, fix="another fix", where=one.where,
                    evidence=one.evidence, template=one.template, params=one.params)
    logs[1] = LogSummary(host=logs[1].host, files=logs[1].files, findings=[other])
    assert [f.where.host for f in _by_code(logs)[Code.CONNECT_FAILED]] == ["gpu1", "gpu2"]
