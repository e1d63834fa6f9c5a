"""A log finding that names its hosts is a template only where they are its one ``Where.host`` (a node's own
log, as preflight parses it); a log of several hosts names them as free text. Either way the text is the
one ``parse`` always wrote (``tests/unit/test_golden.py`` pins it on every fixture)."""

from pathlib import Path

from nccl_doctor.codes import Code
from nccl_doctor.logs import diagnose, parse_paths

LOGS = Path(__file__).resolve().parents[3] / "fixtures/logs"


def _findings(name: str, code: Code) -> list:
    return [f for f in diagnose(parse_paths([LOGS / name])).findings if f.code == code]


def test_one_host_reads_its_name_from_the_where():
    [f] = _findings("socket-transport-only-in-error-traces.log", Code.CONNECT_FAILED)
    assert (f.template, f.where.host) == ("connect@host", "node22")
    assert f.message.startswith("connection between ranks failed on node22 (1 time): ")
    assert f.rerendered(where=f.where).message == f.message


def test_several_hosts_are_free_text_with_their_hostlist():
    [f] = _findings("collnet-sharp-setup-given-up-ib-run-goes-on.log", Code.NCCL_WARNING)
    assert f.template is None and f.where.host == "node61"
    assert f.message.startswith("NCCL warning x2 on node[61-62]: Cannot initialize CollNet")
