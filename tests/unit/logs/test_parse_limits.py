"""The attack: a log that names more hosts, processes or communicators than any job has (a million of each took
gigabytes). Past ``MAX_HOSTS`` / ``MAX_PROCS`` / ``MAX_COMMS`` the parser counts instead of keeping, the report
says so (ND119), its JSON stays small, memory stops growing, and ``--jobs`` still gives the one-process report
byte for byte."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_doctor.logs import parse_lines, parse_paths
from nccl_doctor.logs.diagnosis.diagnose import diagnose
from nccl_doctor.logs.parse.model import MAX_COMMS, MAX_HOSTS, MAX_NAME_CHARS, MAX_NAMES, MAX_PROCS, Folded, ParseResult
from nccl_doctor.render import render_json
from tests.unit.logs.test_parallel_exact import parallel_reports, reports

pytestmark = pytest.mark.slow  # past the parser's limits: millions of lines (the fast loop: -m 'not slow')

EXTRA = 100
SMALL_HOSTS, SMALL_COMMS, SMALL_NAMES = 2000, 1000, 300  # the limits in the slower tests (same code, smaller)


@pytest.fixture
def small_limits(monkeypatch):
    """The limits lowered where the parser and the merge read them: ranges and memory checked in seconds."""
    from nccl_doctor.logs.parse import commlines, merge, model, parser

    for module in (parser, merge):
        monkeypatch.setattr(module, "MAX_HOSTS", SMALL_HOSTS)
    for module in (commlines, merge):
        monkeypatch.setattr(module, "MAX_COMMS", SMALL_COMMS)
    for module in (model, merge):
        monkeypatch.setattr(module, "MAX_NAMES", SMALL_NAMES)


def host_lines(n: int, *, start: int = 0) -> Iterator[str]:
    for i in range(start, start + n):
        yield f"node{i:07d}:{1000 + i % 7}:{1000 + i % 7} [0] NCCL INFO Bootstrap : Using eth0:10.0.{i >> 8 & 255}.{i & 255}<0>"


def comm_lines(n: int) -> Iterator[str]:
    for i in range(n):
        q = i % 64
        yield (f"node{q // 8:03d}:{1000 + q}:{1000 + q} [{q % 8}] NCCL INFO comm 0x{0x7f0000000000 + i:x} rank 0 "
               f"nranks 8 cudaDev {q % 8} busId 1000 commId 0x{i:016x} - Init COMPLETE")


def _nd119(result: ParseResult) -> dict:
    doc = json.loads(render_json(diagnose(result)))
    found = [f for f in doc["findings"] if f["code"] == "ND119"]
    assert len(found) == 1 and found[0]["severity"] == "warn", found
    return doc | {"nd119": found[0]["message"]}


def test_hosts_past_the_limit_are_counted_not_kept():
    r = parse_lines(host_lines(MAX_HOSTS + EXTRA))
    assert len(r.hosts) == MAX_HOSTS and len(r.procs) == MAX_HOSTS
    assert r.folded == {Folded.HOSTS: EXTRA}
    assert len(r.bootstrap_ifaces) <= MAX_HOSTS + 1  # (the folded ones under no host)
    doc = _nd119(r)
    assert f"more than {MAX_HOSTS:,} hosts" in doc["nd119"] and f"{EXTRA:,} more" in doc["nd119"]
    assert len(doc["hosts"]) == MAX_HOSTS
    assert r.nccl_lines == MAX_HOSTS + EXTRA  # every line still counted


def test_a_host_name_longer_than_any_name_is_no_host():
    long = "n" * (MAX_NAME_CHARS + 1)
    r = parse_lines([f"{long}:1:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>", *host_lines(2)])
    assert long not in r.hosts and len(r.hosts) == 2 and r.folded == {Folded.HOSTS: 1}


def test_processes_past_the_limit_are_counted_not_kept():
    lines = (f"n{i % 1000:04d}:{10_000 + i}:1 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"
             for i in range(MAX_PROCS + EXTRA))
    r = parse_lines(lines)
    assert len(r.procs) == MAX_PROCS and r.folded == {Folded.PROCS: EXTRA}
    assert f"more than {MAX_PROCS:,} processes" in _nd119(r)["nd119"]


def test_communicators_past_the_limit_are_counted_and_their_lines_dropped():
    lines = list(comm_lines(MAX_COMMS + EXTRA))
    # the channel line of a communicator past the limit (after its Init START): not kept anywhere
    lines.append("node007:1063:1063 [7] NCCL INFO ncclCommInitRank comm 0x9 rank 0 nranks 8 cudaDev 7 nvmlDev 7 "
                 "busId 1000 commId 0xabc - Init START")
    lines.append("node007:1063:1063 [7] NCCL INFO Channel 00/0 : 0[7] -> 1[0] via P2P/IPC")
    r = parse_lines(lines)
    assert len(r.comms) == MAX_COMMS and r.folded == {Folded.COMMS: EXTRA + 1}
    assert "unidentified" not in r.comms
    assert not any(c.intra for c in r.comms.values())
    doc = _nd119(r)
    assert f"more than {MAX_COMMS:,} communicators" in doc["nd119"] and f"{EXTRA + 1:,} init lines" in doc["nd119"]
    assert len(doc["communicators"]) == MAX_COMMS


def test_within_the_limits_nothing_is_folded():
    r = parse_lines([*host_lines(50), *comm_lines(50)])
    assert not r.folded
    assert "ND119" not in render_json(diagnose(r))


def _traced(lines: Iterator[str]) -> int:
    """Bytes the parse result holds (tracemalloc: allocations made while parsing and still alive)."""
    tracemalloc.start()
    try:
        result = parse_lines(lines)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    del result
    return held


@pytest.mark.parametrize("lines", [host_lines, comm_lines], ids=["hosts", "comms"])
def test_memory_stops_growing_past_the_limits(lines, small_limits):
    """Four times as many distinct hosts (communicators) past the limit: the state does not grow (10% slack)."""
    limit = SMALL_HOSTS if lines is host_lines else SMALL_COMMS
    once = _traced(lines(limit + limit // 4))
    more = _traced(lines(5 * limit))
    assert more <= once * 1.1, (once, more)


def test_jobs_merge_is_exact_past_the_limits(tmp_path: Path, small_limits):
    """A log whose ranges cross the limits: merged where exact, read in sequence where not; the same report."""
    path = tmp_path / "hostile.log"
    with open(path, "w") as fh:
        fh.write("\n".join(host_lines(SMALL_HOSTS + 300)) + "\n")
        fh.write("\n".join(comm_lines(SMALL_COMMS + 300)) + "\n")
        fh.write("\n".join(host_lines(200, start=10 * SMALL_HOSTS)) + "\n")  # more new hosts after the limit
        fh.write("\n".join(f"n1:1:1 [0] NCCL INFO NCCL_X{i:06d} set by environment to 1"
                           for i in range(SMALL_NAMES + 50)) + "\n")
    want = reports(parse_paths([path]))
    assert "ND119" in want[1] and json.loads(want[1])["hosts"].__len__() == SMALL_HOSTS
    for range_bytes, align in ((1, False), (20_000, False), (60_000, True)):
        got, merged = parallel_reports([path], range_bytes, align)
        assert got == want, (range_bytes, align)
        assert merged >= 1  # ranges before the limit were merged, not all read in sequence


def test_a_long_line_prefix_is_read_but_not_cached():
    """A prefix longer than MAX_PREFIX_CHARS (a launcher's long tag) still names its process; it is not kept in
    the prefix cache (200,000 prefixes of 16 KiB each would be 3 GB)."""
    from nccl_doctor.logs.parse.parser import MAX_PREFIX_CHARS, feed_all, finish
    from nccl_doctor.logs.parse.state import ParserState

    lead = "x" * MAX_PREFIX_CHARS
    p = ParserState()
    feed_all(p, [f"{lead} node1:5:5 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>"] * 3)
    r = finish(p)
    assert list(r.hosts) == ["node1"] and r.bootstrap_ifaces == {"node1": ["eth0:10.0.0.1"]}
    assert not p.prefix_cache and r.nccl_lines == 3


def test_names_past_the_limit_are_counted_not_kept():
    """A million setting names or NCCL versions would be a million table entries: past MAX_NAMES, counted."""
    lines = [f"n1:1:1 [0] NCCL INFO NCCL_X{i:06d} set by environment to 1" for i in range(MAX_NAMES + EXTRA)]
    lines += [f"n1:1:1 [0] NCCL version 2.{i}.1+cuda12.4" for i in range(MAX_NAMES + EXTRA)]
    r = parse_lines(lines)
    assert len(r.settings) == MAX_NAMES and r.settings.dropped == EXTRA
    assert len(r.versions) == len(r.version_first) == MAX_NAMES and r.versions.dropped == EXTRA
    assert "NCCL_X000000" in r.settings and f"NCCL_X{MAX_NAMES:06d}" not in r.settings  # the first ones kept
    message = _nd119(r)["nd119"]
    assert f"more than {MAX_NAMES:,} names" in message and "settings" in message and "versions" in message


def test_jobs_merge_is_exact_past_the_names_limit(tmp_path: Path, small_limits):
    """Setting names past MAX_NAMES, each twice, each line from its own process (ranges that could merge): the
    same report, the count of names not kept included."""
    path = tmp_path / "names.log"
    path.write_text("".join(f"s{i:05d}:{j}:1 [0] NCCL INFO NCCL_X{i:06d} set by environment to 1\n"
                            for i in range(SMALL_NAMES + 50) for j in (1, 2)))
    want = reports(parse_paths([path]))
    assert "names in one of its tables (settings): 100 more" in want[1]
    for range_bytes in (3000, 9000):
        got, merged = parallel_reports([path], range_bytes, False)
        assert got == want, range_bytes
        assert merged >= 1
