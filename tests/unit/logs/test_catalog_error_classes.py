"""Error classes across the catalog: every WARN format NCCL (and aws-ofi-nccl) can print is classed fatal,
recoverable or informational by rules on its text, files and what its source does next (``then``), the class is
stored in the catalog, and the parser judges a rendered WARN of each format by that class: fatal -> an error
(FAIL) unless the process went on afterwards, anything else -> a warning."""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

from nccl_doctor.logs import diagnose, parse_lines
from nccl_doctor.logs.catalog.formats import Catalog, Cls, Entry, error_class, load, pieces, render
from nccl_doctor.logs.catalog.warnclass import WarnMatcher, warn_class
from nccl_doctor.logs.parse.parser import feed_all, finish
from nccl_doctor.logs.parse.patterns import warn_kind
from nccl_doctor.logs.parse.state import ParserState
from nccl_doctor.report import Severity

PREFIX = "node1:100:100 [0] NCCL WARN "
INIT_COMPLETE = ("node1:100:100 [0] NCCL INFO comm 0x7f3a2c001200 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1b000 "
                 "commId 0x1234abcd - Init COMPLETE")
ERROR_CLASSES = {Cls.FATAL, Cls.RECOVERABLE, Cls.INFORMATIONAL}
SLOW_MS = 25.0  # per message, best of 3 (~0.15 ms measured; the backtracking matcher took ~740 ms on one)


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load()


def _warn_lines(catalog: Catalog) -> list[Entry]:
    """WARN formats an ``NCCL WARN`` line prints: PyTorch's are exception texts (test_catalog), and an opaque
    format (``"%s"``) says nothing by itself."""
    return [e for e in catalog.entries if e.level == "WARN" and e.source != "pytorch" and not e.opaque]


def _judged(msg: str, *lines: str) -> str:
    """What the parser made of one WARN line (followed by ``lines``): fatal, warning, or ignored."""
    r = parse_lines([PREFIX + msg, *lines])
    if r.errors:
        return "fatal"
    return "warning" if r.warnings else "ignored"


def test_every_warn_format_has_a_stored_class_that_the_rules_give(catalog):
    thens: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in catalog.entries:
        if e.level == "WARN":
            thens[(e.source, e.format.rstrip())] |= set(e.then)
    for e in catalog.entries:
        if e.level != "WARN":
            assert e.error_class is None, e
            continue
        assert e.error_class in ERROR_CLASSES, e
        want = error_class(e.source, e.format, e.files, tuple(sorted(thens[(e.source, e.format.rstrip())])))
        assert e.error_class == want, f"stored class out of date (rerun tools/nccl_catalog.py): {e.format}"
        assert e.error_class in e.classes or Cls.TRACE in e.classes  # ("%s:%d -> %d" is a trace, not a class)


def test_the_classes_are_not_one_big_bucket(catalog):
    got = {c: sum(1 for e in _warn_lines(catalog) if e.error_class == c) for c in ERROR_CLASSES}
    assert got[Cls.FATAL] > 1500 and got[Cls.RECOVERABLE] > 50 and got[Cls.INFORMATIONAL] > 50, got


@pytest.mark.parametrize("number", [1, 12])
def test_the_parser_judges_every_catalogued_warn_by_its_class(catalog, number):
    wrong = []
    for e in _warn_lines(catalog):
        msg = render(e.format, number).split("\n", 1)[0].strip()
        got = _judged(msg)
        if (got == "fatal") != (e.error_class == Cls.FATAL):
            wrong.append((e.error_class.value if e.error_class else None, got, e.source, e.format))
    assert wrong == []


@pytest.mark.parametrize(("level", "fmt", "files", "then", "want"), [
    ("WARN", "Failed to open libibverbs.so[.1]", ("src/misc/ibvwrap.cc",), ("goto teardown",), Cls.RECOVERABLE),
    ("WARN", "Cannot initialize CollNet, using point-to-point network instead", ("src/transport.cc",),
     ("return ncclSystemError",), Cls.RECOVERABLE),
    ("WARN", "Call to connect returned %s, retrying", ("src/include/socket.h",), (), Cls.RECOVERABLE),
    ("WARN", "%s: connect to %s returned %s, exceeded error retry count after %d attempts", ("src/misc/socket.cc",),
     ("return ncclRemoteError",), Cls.FATAL),
    ("WARN", "Call to ibv_create_cq failed", ("src/transport/net_ib.cc",), ("return ncclSystemError",), Cls.FATAL),
    ("WARN", "Duplicate GPU detected : rank %d and rank %d both on CUDA device %lx", ("src/init.cc",),
     ("return ncclInvalidUsage",), Cls.FATAL),  # no error word: the error return decides
    ("WARN", "User asked for a minimum of %d channels, limiting to %d", ("src/graph/connect.cc",), (),
     Cls.RECOVERABLE),
    ("WARN", "NET/IB : %s:%d Got non-fatal async event: %s(%d)", ("src/transport/net_ib.cc",), ("break",),
     Cls.INFORMATIONAL),
])
def test_error_class_rules(level, fmt, files, then, want):
    assert error_class("nccl", fmt, files, then) == want


def test_a_fatal_warn_is_a_fail_unless_the_process_went_on():
    """'A job is judged on its last state': the same fatal WARN, then the process completes its init (NCCL
    handled the error) -> a warning; with nothing after it -> an ND115 FAIL naming the message."""
    msg = "Attempt to use communicator before the previous operation returned ncclSuccess"
    assert _judged(msg) == "fatal"
    assert _judged(msg, INIT_COMPLETE) == "warning"
    report = diagnose(parse_lines([PREFIX + msg]))
    fails = [f for f in report.findings if f.severity == Severity.FAIL]
    assert [f.code for f in fails] == ["ND115"] and "Attempt to use communicator" in fails[0].message


def test_recoverable_and_informational_warns_never_fail():
    for msg in ("Failed to open libibverbs.so[.1]", "NET/OFI Unable to find a protocol that worked.  Failing "
                "initialization.", "NET/IB: Ip address '10.0.0.300' is invalid for family AF_INET, ignoring address",
                "Call to connect returned Connection refused, retrying"):
        report = diagnose(parse_lines([PREFIX + msg]))
        assert not [f for f in report.findings if f.severity == Severity.FAIL], msg


def _adversarial(fmt: str, reps: int) -> str:
    """A message built to make a backtracking matcher slow: each conversion replaced by many copies of the
    literal that follows it, and an end that matches nothing."""
    head, *parts = pieces(fmt) if not fmt.startswith("%") else ("", *pieces(fmt))
    out = [head]
    for p in parts:
        out += [(p or ": ") * reps, p]
    return "".join(out)[:1000] + " #"


def _best_ms(matcher: WarnMatcher, msg: str) -> float:
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        matcher.match(msg)
        best = min(best, (time.perf_counter() - t) * 1000)
    return best


@pytest.mark.serial  # times itself
def test_hostile_warn_messages_cannot_make_the_parse_path_slow(catalog):
    """The catalog is matched on the parse path: a WARN crafted against each format (and one that made the
    backtracking matcher of --explain-unknown take ~0.7 s) costs well under a millisecond on an idle core."""
    matcher = WarnMatcher(e for e in catalog.entries if e.level == "WARN")
    for e in _warn_lines(catalog):  # compile first: the compile is paid once per format, not per line
        matcher.match(render(e.format))
    msgs = [_adversarial(e.format, reps) for e in _warn_lines(catalog) for reps in (30, 200)]
    msgs += ["NET/IB : " + ("x: y " * 200)[:1000], "NET/IB : " + "x" * 100_000]
    slow = [(round(ms, 1), m[:60]) for m in msgs if (ms := _best_ms(matcher, m)) > SLOW_MS]
    assert slow == []
    assert matcher.match("NET/IB : Got async event : " + "x" * 2000) is None  # longer than any NCCL line


def test_a_process_holds_one_fatal_warn_whatever_the_log():
    """Held WARNs are state per process: a process that prints thousands of different fatal WARNs holds the
    first (the cause; the rest follow from it) with the count of its own kind, so memory stays per process."""
    p = ParserState()
    lines = [PREFIX + "Attempt to use communicator before the previous operation returned ncclSuccess"] * 3
    lines += [PREFIX + f"Split shares resources, but parent comm netName IB is different from child comm netName "
              f"{'xy'[i % 2] * (i % 40)}z{'ab'[i // 40 % 2] * (i // 80)}" for i in range(3000)]
    assert warn_class(lines[-1][len(PREFIX):]) == Cls.FATAL and len({warn_kind(x) for x in lines}) > 1000
    feed_all(p, lines)
    (proc,) = p.result.procs.values()
    assert proc.fatal_warn is not None and proc.fatal_warn[4] == 3
    r = finish(p)
    assert [(g.kind, g.count) for g in r.errors.values()] == [
        ("Attempt to use communicator before the previous operation returned ncclSuccess", 3)]
