"""The catalog of what NCCL (and aws-ofi-nccl, and PyTorch's c10d) can print, read from their source by
``tools/nccl_catalog.py`` and shipped as ``data/nccl-catalog.json.gz``.

Each entry is one format string (``"NET/IB : Using%s %s; OOB %s:%s"``) with its level, subsystems, files and
the release tags it appears in. ``classify`` sorts an entry into the classes the parser cares about by a
rules table (``CLASS_RULES``), never by hand per entry; ``format_regex`` turns a printf format into the
regex of what it prints; ``Matcher`` finds the entry a logged message came from. The parse path never
loads the catalog: only ``parse --explain-unknown`` and the tests do.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from nccl_doctor.enums import StrEnum
from nccl_doctor.logs.patterns import warn_kind
from nccl_doctor.logs.reader import ReadStats, clean, read_blocks, resolve_inputs
from nccl_doctor.outcome import Listing

CATALOG_FILE = "nccl-catalog.json.gz"
DATA_FILE = Path(__file__).resolve().parent / "data" / CATALOG_FILE  # shipped as package data
CATALOG_VERSION = 1
KEY_CHARS = 4  # a message's first characters pick its candidate formats
OPAQUE_LITERAL = 4  # a format with fewer literal characters than this ("%s", "%s: %s") matches anything
MAX_UNKNOWN_KINDS = 1000  # distinct unknown messages (numbers and addresses masked) kept by explain_unknown
MAX_MEMO = 65536  # distinct messages whose match result is remembered
LEVEL_MARKS = ("NCCL INFO ", "NCCL WARN ")
MAX_EXAMPLE = 1024  # characters of an unknown line kept as its kind's example (NCCL's own line limit)


class Cls(StrEnum):
    """What a catalogued message is about: one entry may have several."""

    VERSION = "version"
    COMM = "comm-identity"  # comm, rank, nranks, nNodes, localRanks, commId
    TRANSPORT_USE = "transport-use"  # a channel/ring connection and its transport ("via ...")
    TRANSPORT_SELECT = "transport-select"  # the network NCCL chose ("Using network IB")
    NET = "net"
    IB = "ib"
    SOCKET = "socket"
    PLUGIN = "plugin"
    P2P = "p2p"
    SHM = "shm"
    NVLS = "nvls"
    COLLNET = "collnet"
    IB_DEVICES = "ib-devices"  # "NET/IB : Using [0]mlx5_0:1/IB ..."
    SOCKET_IFACES = "socket-ifaces"  # "NET/Socket : Using [0]eth0:10.0.0.1<0>"
    BOOTSTRAP = "bootstrap"  # bootstrap set-up and its errors
    BOOTSTRAP_IFACES = "bootstrap-ifaces"  # "Bootstrap : Using [0]eth0:10.0.0.1<0>"
    GDR = "gdr"  # GPU Direct RDMA enabled/disabled
    TOPO_RING = "topology-ring"
    TOPO_TREE = "topology-tree"
    TOPO = "topology"
    TRACE = "trace"  # "file.cc:NN -> N"
    FATAL = "error-fatal"
    RECOVERABLE = "error-recoverable"
    INFORMATIONAL = "error-informational"
    WATCHDOG = "watchdog"  # PyTorch's watchdog and collective timeouts
    PT_NCCL_ERROR = "pytorch-nccl-error"  # PyTorch's text of an NCCL error code ("ncclRemoteError: ...")
    # what a fatal WARN is about, the categories the parser sorts WARNs into (model.Category)
    ERR_IB_COMPLETION = "error-ib-completion"
    ERR_VERBS = "error-verbs"
    ERR_NO_INTERFACE = "error-no-interface"
    ERR_CONNECT = "error-connect"
    ERR_CUDA = "error-cuda"
    ERR_VERSION_MISMATCH = "error-version-mismatch"


class Rule(NamedTuple):
    """``cls`` for every entry whose format matches ``pattern`` (and whose level/source match, when given).

    Patterns are compiled on first use (``re``'s cache): importing this module costs parse nothing.
    """

    cls: Cls
    pattern: str
    level: str | None = None
    source: str | None = None
    flags: int = 0

    def search(self, fmt: str) -> bool:
        return re.search(self.pattern, fmt, self.flags) is not None


def _r(cls: Cls, pattern: str, *, level: str | None = None, source: str | None = None, flags: int = 0) -> Rule:
    return Rule(cls, pattern, level, source, flags)


# The classification, as data. Patterns read the *format* (with its %-conversions), not a rendered line.
ERROR_WORDS = (r"\b(?:fail\w*|error\w*|unable|cannot|can't|could ?not|couldn't|invalid|timed? ?out|timeout|abort\w*"
               r"|mismatch\w*|not supported|unsupported|out of memory|exceeded|refused|closed|illegal|wrong"
               r"|unexpected|corrupt\w*|missing|not found|denied|unreachable|no route|reset by|truncated|overflow"
               r"|too (?:many|small|large|old)|no (?:device|interface|usable|socket|IB|HCA)|not (?:initialized|ready)"
               r"|unknown|unrecognized|bad)\b")
RECOVERY_WORDS = (r"\b(?:retry\w*|retrying|falling back|fall ?back|fallback|instead|ignor\w*|skipp\w*|disabl\w*"
                  r"|continu\w*|defaulting|trying (?:again|another)|will (?:be|use|try)|using (?:default|internal)"
                  r"|not using|no longer)\b")
CLASS_RULES: tuple[Rule, ...] = (
    _r(Cls.VERSION, r"^NCCL version %", level="INFO"),
    _r(Cls.COMM, r"\bcomm %p rank %d n[Rr]anks %d|\bnNodes %d|\blocalRanks %d\b|\bcommId 0x%|^(?:rank %d )?nranks %d$",
       level="INFO"),
    _r(Cls.TRANSPORT_USE, r"^(?:Ring|Channel|Coll|CollNet|NVLS) %[\d.]*\w(?:/%\d*d)? : .* via "),
    _r(Cls.TRANSPORT_SELECT, r"^(?:Using network|Using internal Network|Assigned NET plugin) %s", level="INFO"),
    _r(Cls.NET, r"via NET/|^NET[ /]|^Using (?:internal )?[Nn]etwork|NET plugin"),
    _r(Cls.IB, r"\bNET/IB\b|\bIB\b|\bibv_|\bIBV_|\bHCA\b|\bQP\b|completion|\bmlx5|RoCE|verbs"),
    _r(Cls.SOCKET, r"NET/Socket|\bsocket\w*|\bSocket\b|ncclSocket"),
    _r(Cls.PLUGIN, r"^NET/Plugin|[Pp]lugin|^NET/OFI", level="INFO"),
    _r(Cls.PLUGIN, r"^NET/Plugin|^NET/OFI", level="WARN"),
    _r(Cls.P2P, r"via P2P/|^P2P|\bP2P\b|\bp2p\b"),
    _r(Cls.SHM, r"via SHM/|via direct shared memory|^SHM\b|\bSHM\b"),
    _r(Cls.NVLS, r"\bNVLS\b|nvls channels|[Mm]ulticast"),
    _r(Cls.COLLNET, r"COLLNET|CollNet|[Cc]oll[Nn]et|\bSHARP\b|\bsharp\b"),
    _r(Cls.IB_DEVICES, r"^NET/IB ?: ?Using%s", level="INFO"),
    _r(Cls.SOCKET_IFACES, r"^NET/Socket ?: ?Using%s$|^NET : Using interface %s:%s$", level="INFO"),
    _r(Cls.BOOTSTRAP, r"[Bb]ootstrap"),
    _r(Cls.BOOTSTRAP_IFACES, r"^Bootstrap ?: ?Using ?%s$", level="INFO"),
    _r(Cls.GDR, r"GPU Direct RDMA (?:Enabled|Disabled|%s) for"),
    _r(Cls.TOPO_RING, r"^Ring %|^Channel %02d(?:/%02d)? ?:%?s?$|^Channel %02d(?:/%02d)? : %s$|Connected all rings"),
    _r(Cls.TOPO_TREE, r"^Trees|[Tt]ree|Connected all trees"),
    _r(Cls.TOPO, r"^Channel %|channels|[Tt]opo|graph|[Rr]ing\b|NVLink|PCI|\bXGMI\b|\bC2C\b|pattern", level="INFO"),
    _r(Cls.TRACE, r"^%s:%d -> %d"),
    _r(Cls.WATCHDOG, r"[Ww]atchdog|[Tt]imeout|timed out", source="pytorch"),
    _r(Cls.PT_NCCL_ERROR, r"^nccl[A-Z]\w+: |NCCL communicator was aborted", source="pytorch"),
    _r(Cls.ERR_IB_COMPLETION, r"[Cc]ompletion .*(?:error|status)|Got completion", level="WARN"),
    _r(Cls.ERR_VERBS, r"\bibv_\w+(?:\(\))? failed|Call to ibv_|Unable to open device", level="WARN"),
    _r(Cls.ERR_NO_INTERFACE, r"[Nn]o (?:socket |usable |IP |usable listening )?interface (?:found|in the same)",
       level="WARN"),
    _r(Cls.ERR_CONNECT, r"(?i)\bconnect(?:ion)? to .*(?:failed|refused|timed out)|No route to host"
       r"|Connection (?:refused|reset|closed by)|exceeded (?:retries|timeouts)", level="WARN"),
    _r(Cls.ERR_CUDA, r"^Cuda failure|CUDA error", level="WARN"),
    _r(Cls.ERR_VERSION_MISMATCH, r"Mismatched NCCL version|NCCL version mismatch", level="WARN"),
)
# Error classes: WARN (and PyTorch) entries only, the first rule that matches wins, and an entry gets one.
ERROR_RULES: tuple[Rule, ...] = (
    _r(Cls.RECOVERABLE, RECOVERY_WORDS, flags=re.I),
    _r(Cls.FATAL, ERROR_WORDS, flags=re.I),
    _r(Cls.INFORMATIONAL, r""),
)

_CONV_RE = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                      r"(?P<len>hh|h|ll|l|L|q|j|z|t|I64)?(?P<conv>[diouxXeEfFgGaAcspn%])")
_NUMBER = {"d": r"[-+]?\d+", "i": r"[-+]?\d+", "u": r"\d+", "o": r"[0-7]+",
           "x": r"(?:0[xX])?[0-9a-fA-F]+", "X": r"(?:0[xX])?[0-9a-fA-F]+",
           "p": r"(?:0x[0-9a-fA-F]+|\(nil\)|\(null\)|[0-9a-fA-F]+)", "c": r"[\s\S]"}
_FLOAT = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan|-?nan)"


def conversions(fmt: str) -> list[re.Match[str]]:
    """The printf conversions of a format (``%%`` included)."""
    return list(_CONV_RE.finditer(fmt))


def literal(fmt: str) -> str:
    """A format's own text, conversions left out."""
    return _CONV_RE.sub("", fmt)


def format_regex(fmt: str) -> str:
    """The regex of what a printf format prints, one capturing group per conversion (``%%`` has none).

    Only the first line counts (a message with ``\\n`` is logged as several lines); numbers may be padded
    by a width; ``%s`` is lazy, so the text after it anchors it.
    """
    fmt = fmt.split("\n", 1)[0].rstrip()
    out, pos = [], 0
    for m in _CONV_RE.finditer(fmt):
        out.append(re.escape(fmt[pos:m.start()]))
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            out.append("%")
        elif conv == "n":
            continue
        elif conv == "s":
            out.append(r"([\s\S]*?)")
        else:
            body = _FLOAT if conv in "eEfFgGaA" else _NUMBER[conv]
            pad = r"\s*" if m.group("width") or " " in m.group("flags") or "-" in m.group("flags") else ""
            out.append(f"{pad}({body}){pad if '-' in m.group('flags') else ''}")
    out.append(re.escape(fmt[pos:]))
    return "".join(out)


@dataclass(frozen=True)
class Entry:
    """One catalogued format."""

    source: str  # nccl, aws-ofi-nccl, pytorch
    level: str  # INFO or WARN
    format: str
    subsys: tuple[str, ...]
    files: tuple[str, ...]
    tags: tuple[tuple[str, str], ...]  # ranges of release tags (first, last) in the source's tag order
    classes: frozenset[Cls] = field(default_factory=frozenset)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(format_regex(self.format) + r"\s*\Z")

    @property
    def opaque(self) -> bool:
        """True for formats that are (nearly) all conversions: ``"%s"`` prints anything."""
        return len(literal(self.format.split("\n", 1)[0]).strip()) < OPAQUE_LITERAL

    @property
    def head(self) -> str:
        """The literal text before the first conversion."""
        m = _CONV_RE.search(self.format)
        return self.format[:m.start()] if m else self.format


def classify(source: str, level: str, fmt: str) -> frozenset[Cls]:
    """The classes of one format: every matching ``CLASS_RULES`` rule, and one error class for WARNs."""
    out = {r.cls for r in CLASS_RULES if _applies(r, source, level) and r.search(fmt)}
    if level == "WARN" and Cls.TRACE not in out:
        out.add(next(r.cls for r in ERROR_RULES if r.search(fmt)))
    return frozenset(out)


def _applies(rule: Rule, source: str, level: str) -> bool:
    return (rule.level is None or rule.level == level) and (rule.source is None or rule.source == source)


class Catalog(NamedTuple):
    """The loaded catalog: its version, the tags it was built from, its entries."""

    version: int
    built_from: dict[str, Any]
    entries: tuple[Entry, ...]

    def by_class(self, cls: Cls) -> Iterator[Entry]:
        return (e for e in self.entries if cls in e.classes)


def load(data: bytes | None = None) -> Catalog:
    """The shipped catalog (or one given as bytes: JSON, gzipped or not)."""
    if data is None:
        data = DATA_FILE.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc = json.loads(data)
    entries = tuple(
        Entry(source=e["source"], level=e["level"], format=e["format"], subsys=tuple(e["subsys"]),
              files=tuple(e["files"]), tags=tuple((a, b) for a, b in e["tags"]),
              classes=classify(e["source"], e["level"], e["format"]))
        for e in doc["entries"])
    return Catalog(version=int(doc["catalog_version"]), built_from=doc["built_from"], entries=entries)


class Matcher:
    """Finds the catalogued format a logged message came from.

    Candidates come from the message's first ``KEY_CHARS`` characters (formats whose text starts with a
    conversion are tried for every message); opaque formats are left out: they would match anything.
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._keyed: dict[str, list[Entry]] = {}
        self._loose: list[Entry] = []
        for e in entries:
            if e.opaque:
                continue
            head = e.head
            if len(head) >= KEY_CHARS:
                self._keyed.setdefault(head[:KEY_CHARS], []).append(e)
            else:
                self._loose.append(e)
        # the most specific first: "Channel %02d/%02d : %s" (a ring) must not take a "... via NET/IB/0" line
        for bucket in (*self._keyed.values(), self._loose):
            bucket.sort(key=lambda e: -len(literal(e.format)))

    def match(self, msg: str) -> Entry | None:
        msg = msg.rstrip()
        for e in self._keyed.get(msg[:KEY_CHARS], ()):
            if e.regex.match(msg):
                return e
        for e in self._loose:
            if e.regex.match(msg):
                return e
        return None


# Sample values for a format's %s conversions, chosen by the text just before them (first match wins):
# what NCCL itself puts there, so that a rendered line reads like a logged one.
_S_SAMPLES: tuple[tuple[str, str], ...] = (
    (r"via NET/$", "IB"), (r"via COLLNET/$", "SHARP"), (r"via P2P/$", "IPC"), (r"via SHM/(?:\w+/)?$", "direct"),
    (r"^NET/IB ?: ?Using$", " [0]mlx5_0:1/IB [1]mlx5_1:1/RoCE"),
    (r"Using$", " [0]eth0:10.0.0.1<0>"),
    (r"^(?:Using network|Assigned NET plugin) $", "IB"), (r"^Using internal Network $", "Socket"),
    (r"^NET/$", "IB"), (r"GPU Direct RDMA $", "Enabled"),
    (r"GPU Direct RDMA (?:Enabled|Disabled) for $",  # 2.29's gpuNetMsg (graph/paths.cc)
     "GPU/0-1 (rank 0) - NET/0-1 (distance 1 <= 2, read 1, mode Default)"),
    (r"Using interface $", "eth0"), (r"Using interface \w+:$", "10.0.0.1<0>"),
    (r"^$", "init.cc"), (r"\s$", "x1"),
)


def render(fmt: str, number: int = 1) -> str:
    """A line ``fmt`` could print: numbers as ``number``, pointers as 0x7f.., strings from ``_S_SAMPLES``."""
    fmt = fmt.split("\n", 1)[0]
    out, pos = [], 0
    for m in _CONV_RE.finditer(fmt):
        out.append(fmt[pos:m.start()])
        pos = m.end()
        conv, flags, width = m.group("conv"), m.group("flags"), m.group("width")
        spec = "%" + flags.replace("'", "") + (width if width and width != "*" else "")
        if conv == "%":
            out.append("%")
        elif conv == "s":
            before = "".join(out)
            out.append(next((v for rx, v in _S_SAMPLES if re.search(rx, before)), ""))
        elif conv == "p":
            out.append("0x7f3a2c001200")
        elif conv == "c":
            out.append("c")
        elif conv in "eEfFgGaA":
            out.append((spec + "f") % float(number))
        elif conv != "n":
            out.append((spec + (conv if conv in "diouxX" else "d")) % number)
    out.append(fmt[pos:])
    return "".join(out)


class UnknownKind:
    """Unknown NCCL lines of one kind (numbers and addresses masked): how many, and the first as read."""

    __slots__ = ("count", "example", "kind", "level")

    def __init__(self, level: str, kind: str, example: str) -> None:
        self.level, self.kind, self.example, self.count = level, kind, example, 0


class Unknowns:
    """What ``explain_unknown`` found: NCCL lines read, how many a catalogued format explains, the rest;
    ``dropped`` counts the unknown lines of kinds past MAX_UNKNOWN_KINDS (counted, not listed)."""

    __slots__ = ("dropped", "kinds", "known", "nccl_lines", "unknown")

    def __init__(self) -> None:
        self.nccl_lines = self.known = self.unknown = self.dropped = 0
        self.kinds: dict[str, UnknownKind] = {}

    def listing(self) -> list[UnknownKind]:
        return sorted(self.kinds.values(), key=lambda k: (-k.count, k.kind))


def nccl_message(line: str) -> tuple[str, str] | None:
    """(level, message) of an ``NCCL INFO`` / ``NCCL WARN`` line, else None."""
    for mark in LEVEL_MARKS:
        j = line.find(mark)
        if j >= 0:
            return mark[5:9], clean(line[j + len(mark):]).rstrip()
    return None


def explain_unknown(paths: Iterable[str], catalog: Catalog | None = None) -> Unknowns:
    """Every NCCL INFO/WARN line of the inputs (files, directories, .gz, ``-``, as ``parse`` reads them)
    that no catalogued format explains, grouped by kind and counted; memory is bounded by the caps."""
    matcher = Matcher((catalog or load()).entries)
    memo: dict[str, bool] = {}
    out = Unknowns()
    for source in resolve_inputs(list(paths)).sources:
        for block in read_blocks(source, ReadStats()):
            for line in block:
                if "NCCL " in line:
                    _count(line, matcher, memo, out)
    return out


def _count(line: str, matcher: Matcher, memo: dict[str, bool], out: Unknowns) -> None:
    got = nccl_message(line)
    if got is None:
        return
    level, msg = got
    out.nccl_lines += 1
    known = memo.get(msg)
    if known is None:
        known = matcher.match(msg) is not None
        if len(memo) < MAX_MEMO:
            memo[msg] = known
    if known:
        out.known += 1
        return
    out.unknown += 1
    kind = f"{level} {warn_kind(msg)}"
    k = out.kinds.get(kind)
    if k is None:
        if len(out.kinds) >= MAX_UNKNOWN_KINDS:
            out.dropped += 1
            return
        k = out.kinds[kind] = UnknownKind(level, kind[5:], msg[:MAX_EXAMPLE])
    k.count += 1


def unknowns_listing(u: Unknowns, catalog: Catalog) -> Listing:
    """The ``--explain-unknown`` listing: text for people, a JSON document for tools (and for an issue report)."""
    built = {src: f"{b['first']}..{b['last']}" if b["first"] != b["last"] else b["first"]
             for src, b in catalog.built_from.items()}
    document = {"catalog_version": catalog.version, "catalog_built_from": built,
                "nccl_lines": u.nccl_lines, "known": u.known, "unknown": u.unknown,
                "unknown_kinds_not_listed": u.dropped,
                "kinds": [{"count": k.count, "level": k.level, "kind": k.kind, "example": k.example}
                          for k in u.listing()]}
    what = ", ".join(f"{src} {tags}" for src, tags in built.items())
    lines = [f"{u.nccl_lines} NCCL lines read; {u.known} match a format of NCCL's own source "
             f"(catalog v{catalog.version}: {what}); {u.unknown} match none."]
    if u.kinds:
        lines.append(f"{len(u.kinds)} kinds of unknown lines (numbers and addresses masked), most frequent first:")
        lines += [f"{k.count:8d}  {k.level}  {k.example}" for k in u.listing()]
    if u.dropped:
        lines.append(f"... and {u.dropped} more unknown lines of kinds past the first {MAX_UNKNOWN_KINDS}")
    if u.unknown:
        lines.append("Please send these lines (an issue at the nccl-doctor repository): they are what parse "
                     "does not know yet.")
    return Listing(text="\n".join(lines) + "\n", document=document)
