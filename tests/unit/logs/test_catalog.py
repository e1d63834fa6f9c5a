"""The catalog of NCCL's own messages (tools/nccl_catalog.py -> nccl_doctor/logs/data/nccl-catalog.json.gz):
it loads, it is well-formed, and every catalogued format of a class the parser claims to handle, rendered with
sample values, is recognised by the parser's own patterns (every version's variant: each is an entry)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from nccl_doctor.logs.catalog.formats import (
    CATALOG_VERSION,
    Catalog,
    Cls,
    Entry,
    classify,
    format_regex,
    load,
    render,
)
from nccl_doctor.logs.catalog.matcher import Matcher
from nccl_doctor.logs.errorrules import WARN_PATTERNS
from nccl_doctor.logs.parse import patterns as P  # noqa: N812 - the patterns, short
from nccl_doctor.logs.parse.model import Category

NOT_HANDLED = Path(__file__).with_name("catalog_not_handled.json")


@pytest.fixture(scope="module")
def catalog() -> Catalog:
    return load()


# ---- (a) the committed catalog loads and is well-formed -------------------------------------------------

def test_catalog_is_versioned_and_names_what_it_was_built_from(catalog):
    assert catalog.version == CATALOG_VERSION
    nccl = catalog.built_from["nccl"]
    assert nccl["first"] == "v2.3.5-5" and nccl["last"].startswith("v2.30.")
    assert nccl["count"] == len(nccl["tags"]) >= 60
    assert catalog.built_from["aws-ofi-nccl"]["count"] >= 50
    assert "pytorch" in catalog.built_from


def test_every_entry_is_well_formed(catalog):
    seen = set()
    for e in catalog.entries:
        order = catalog.built_from[e.source]["tags"]
        assert e.level in {"INFO", "WARN"}, e
        assert e.format and e.files and e.subsys and e.tags, e
        assert "TRACE" not in e.subsys or e.level != "TRACE"
        for first, last in e.tags:
            assert order.index(first) <= order.index(last), e
        assert (e.source, e.level, e.format) not in seen, e
        seen.add((e.source, e.level, e.format))
        assert e.regex.pattern  # every format compiles


def test_catalog_holds_what_nccl_prints_across_versions(catalog):
    formats = {e.format for e in catalog.entries}
    for fmt in ("NCCL version %d.%d.%d%s+cuda%d.%d", "Ring %02d : %d -> %d via NET/%s/%d%s%s",
                "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s%s", "NET/IB : Using%s %s; OOB %s:%s",
                "Bootstrap : Using%s", "Using network %s", "%s:%d -> %d",
                "comm %p rank %d nRanks %d nNodes %d localRanks %d localRank %d MNNVL %d",
                "NET/OFI Selected provider is %s, fabric is %s (found %d nics)",
                "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."):
        assert fmt in formats, fmt
    assert len(catalog.entries) > 3000
    assert not any(e.format.startswith("%s:%d Cuda failure") and e.level == "TRACE" for e in catalog.entries)


# ---- format strings -> regexes ---------------------------------------------------------------------------

@pytest.mark.parametrize(("fmt", "line", "groups"), [
    ("Channel %02d/%d : %d[%lx] -> %d[%lx] via P2P/IPC%s", "Channel 03/0 : 1[1b000] -> 2[3d000] via P2P/IPC/read",
     ("03", "0", "1", "1b000", "2", "3d000", "/read")),
    ("comm %p rank %d nranks %d", "comm 0x55cc8aa86c70 rank 0 nranks 16", ("0x55cc8aa86c70", "0", "16")),
    ("comm %p rank %d", "comm (nil) rank -1", ("(nil)", "-1")),
    ("size %zu offset %ld", "size 4096 offset -8", ("4096", "-8")),
    ("%.*s: %s", "ib0: down", ("ib0", "down")),
    ("100%% done in %5.2f s", "100% done in  3.14 s", ("3.14",)),
    ("magic 0x%016llx (%s)", "magic 0x00000000deadbeef (x)", ("00000000deadbeef", "x")),
    ("%-8s|%3d|", "eth0    |  7|", ("eth0    ", "7")),
])
def test_format_regex_matches_what_printf_prints(fmt, line, groups):
    m = re.fullmatch(format_regex(fmt), line)
    assert m is not None and m.groups() == groups


def test_render_is_matched_by_its_own_format(catalog):
    bad = [e.format for e in catalog.entries if not e.regex.match(render(e.format).split("\n", 1)[0])]
    assert bad == []


def test_matcher_prefers_the_most_specific_format(catalog):
    m = Matcher(catalog.entries)
    got = m.match("Channel 07/0 : 7[c3000] -> 23[c6000] [send] via NET/IB/8/GDRDMA")
    assert got is not None and "via NET/%s" in got.format
    assert m.match("something NCCL never printed at all") is None


# ---- classification is data ------------------------------------------------------------------------------

@pytest.mark.parametrize(("level", "fmt", "want"), [
    ("INFO", "Channel %02d/%d : %d[%d] -> %d[%d] [send] via NET/%s/%d%s%s", {Cls.TRANSPORT_USE, Cls.NET}),
    ("INFO", "Channel %02d : %d[%d] -> %d[%d] via SHM/%s/%s", {Cls.TRANSPORT_USE, Cls.SHM}),
    ("INFO", "CollNet %02d/%1d : %d [send] via COLLNET/%s/%d%s", {Cls.TRANSPORT_USE, Cls.COLLNET}),
    ("INFO", "NCCL version %d.%d.%d%s+cuda%d.%d", {Cls.VERSION}),
    ("INFO", "Bootstrap : Using%s", {Cls.BOOTSTRAP, Cls.BOOTSTRAP_IFACES}),
    ("WARN", "NET/IB : Got completion from peer %s with error %d, opcode %d, len %d, vendor err %d",
     {Cls.ERR_IB_COMPLETION, Cls.FATAL}),
    ("WARN", "Call to connect returned %s, retrying", {Cls.RECOVERABLE}),
    ("WARN", "NET/Socket : Using interface %s", {Cls.INFORMATIONAL}),
])
def test_classes_come_from_the_rules(level, fmt, want):
    assert want <= classify("nccl", level, fmt)


# ---- (b) every format of a handled class is recognised by the parser's patterns --------------------------

def _via(msg: str) -> bool:
    """As commlines.channel reads a channel line: VIA_RE, then a transport token that is not cut short."""
    v = P.VIA_RE.match(msg)
    if v is None:
        return False
    tr = v.group(4)
    return not P.cut_short(tr, P.NETTR_RE.match(tr))


def _ifaces(msg: str) -> bool:
    return bool(P.IFACE_RE.findall(msg.split("Using", 1)[1]))


def _category(want: Category) -> Callable[[str], bool]:
    def check(msg: str) -> bool:  # the first WARN rule that matches decides, as in state.warn
        return next((cat for cat, rx in WARN_PATTERNS if rx.search(msg)), None) == want
    return check


HANDLED: dict[Cls, Callable[[str], bool]] = {
    Cls.VERSION: lambda m: m.startswith("NCCL version") and P.VERSION_RE.search(m) is not None,
    Cls.COMM: lambda m: bool(P.COMM_RE.search(m) or P.FIELD_RE.search(m) or P.OLD_RANK_RE.match(m)
                             or P.ALL_RANKS_RE.match(m)),
    Cls.TRANSPORT_USE: _via,
    Cls.TRANSPORT_SELECT: lambda m: P.NETWORK_RE.match(m) is not None,
    Cls.IB_DEVICES: lambda m: P.IBDEV_RE.search(m) is not None,
    Cls.SOCKET_IFACES: _ifaces,
    Cls.BOOTSTRAP_IFACES: lambda m: _ifaces(m) or P.BOOT_NET_RE.match(m) is not None,  # 2.24+ "Using mlx5_0:1"
    Cls.GDR: lambda m: bool(P.GDR_HCA_RE.search(m) or P.GDR_GPU_RE.search(m)),
    Cls.TRACE: lambda m: P.TRACE_RE.match(m) is not None,
    Cls.WATCHDOG: lambda m: "Watchdog caught collective operation timeout" in m or bool(P.NCCL_ERROR_RE.search(m)),
    Cls.PT_NCCL_ERROR: lambda m: bool(P.NCCL_ERROR_RE.search(m) or P.LAST_ERROR_RE.search(m)),
    Cls.ERR_IB_COMPLETION: _category(Category.IB_COMPLETION),
    Cls.ERR_VERBS: _category(Category.VERBS),
    Cls.ERR_NO_INTERFACE: _category(Category.NO_INTERFACE),
    Cls.ERR_CONNECT: _category(Category.CONNECT),
    Cls.ERR_CUDA: _category(Category.CUDA),
    Cls.ERR_VERSION_MISMATCH: _category(Category.VERSION_MISMATCH),
}


def _not_handled() -> set[tuple[str, str, str]]:
    items = json.loads(NOT_HANDLED.read_text())
    assert all(i["reason"].strip() for i in items)
    return {(i["class"], i["source"], i["format"]) for i in items}


def _misses(entries: list[Entry], cls: Cls) -> list[tuple[str, str, str]]:
    check = HANDLED[cls]
    return [(cls.value, e.source, e.format) for e in entries if not check(render(e.format))]


@pytest.mark.parametrize("cls", list(HANDLED), ids=str)
def test_every_catalogued_format_of_a_handled_class_is_recognised(catalog, cls):
    entries = list(catalog.by_class(cls))
    assert entries, f"no catalogued format in class {cls}"
    # a second rendering with other numbers: a pattern that only takes "1" is no pattern
    misses = set(_misses(entries, cls)) | {
        (cls.value, e.source, e.format) for e in entries if not HANDLED[cls](render(e.format, number=12))}
    allowed = {x for x in _not_handled() if x[0] == cls.value}
    assert sorted(misses - allowed) == [], "formats NCCL prints that the parser's patterns miss"


def test_allow_list_is_not_stale(catalog):
    """Each allow-listed format is still in the catalog, and still missed (else: take it off the list)."""
    by_key = {(e.source, e.format): e for e in catalog.entries}
    for cls_name, source, fmt in _not_handled():
        e = by_key.get((source, fmt))
        assert e is not None, fmt
        cls = Cls(cls_name)
        assert cls in e.classes and not HANDLED[cls](render(fmt)), fmt
