"""A PASS is never evidenced by an error line: an error may show which transport a job used, but the verdict
of that log is the error (issue 12, point 4)."""

from __future__ import annotations

from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.api import parse_lines

COMPLETION = ("node1:1234:1300 [0] transport/net_ib.cc:1696 NCCL WARN NET/IB : Got completion from peer "
              "10.0.0.2<43120> with status=12 opcode=0 len=0 vendor err 129 (Send) localGid ::ffff:10.0.0.1 "
              "hca mlx5_0")
USING_IB = "node1:1234:1234 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:10.0.0.1<0>"


def _report(*lines: str):
    return diagnose(parse_lines(list(lines), name="job.log"))


def test_an_ib_completion_error_alone_shows_ib_but_passes_nothing():
    report = _report(COMPLETION)
    assert report.data["inter_node"]["transport"] == "IB"  # the error may say which transport was in use
    assert [f.code for f in report.findings if f.severity == "fail"] == ["ND109"]
    passes = [f for f in report.findings if f.severity == "pass"]
    assert not passes, passes


def test_a_pass_beside_an_error_quotes_only_the_lines_that_are_not_errors():
    report = _report(USING_IB, COMPLETION)
    nd101 = next(f for f in report.findings if f.code == "ND101")
    assert nd101.severity == "pass"
    assert all("Got completion" not in e for e in nd101.evidence), nd101.evidence
    assert any("NET/IB : Using" in e for e in nd101.evidence)
