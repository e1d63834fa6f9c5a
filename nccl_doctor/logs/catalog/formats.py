"""The catalog of what NCCL (and aws-ofi-nccl, and PyTorch's c10d) can print, read from their source by
``tools/nccl_catalog.py`` and shipped as ``data/nccl-catalog.json.gz``.

Each entry is one format string (``"NET/IB : Using%s %s; OOB %s:%s"``) with its level, subsystems, files and
the release tags it appears in. ``classify`` sorts an entry into the classes the parser cares about by a
rules table (``CLASS_RULES``), never by hand per entry; ``format_regex`` turns a printf format into the
regex of what it prints; ``render`` prints a line a format could print. ``matcher.Matcher`` finds the entry a
logged message came from, ``explain.py`` lists the lines of a log that none explains.

Each WARN entry also carries its error class (fatal, recoverable, informational), judged when the catalog is
built from its text, its files and what its source does right after it (``then``: NCCL's return paths), and
stored. The parse path reads only that WARN part, once, and only for a WARN the parser's own rules do not
decide (``warnclass.warn_class``); ``parse --explain-unknown`` and the tests read it all.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

from nccl_doctor.enums import StrEnum

CATALOG_FILE = "nccl-catalog.json.gz"
DATA_FILE = Path(__file__).resolve().parent.parent / "data" / CATALOG_FILE  # shipped as package data (logs/data)
CATALOG_VERSION = 2  # 2: WARN entries carry "then" (what their source does next) and "error_class"
OPAQUE_LITERAL = 4  # a format with fewer literal characters than this ("%s", "%s: %s") matches anything
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
               r"|too (?:many|small|large|old)|(?<!non-)fatal|no (?:device|interface|usable|socket|IB|HCA)"
               r"|not (?:initialized|ready)"
               r"|unknown|unrecognized|bad)\b")
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
    _r(Cls.BOOTSTRAP_IFACES, r"^Bootstrap ?: ?Using ?%s$|^Bootstrap ?: ?Using %s:%d$", level="INFO"),
    _r(Cls.GDR, r"GPU Direct RDMA (?:Enabled|Disabled|%s) for"),
    _r(Cls.TOPO_RING, r"^Ring %|^Channel %02d(?:/%02d)? ?:%?s?$|^Channel %02d(?:/%02d)? : %s$|Connected all rings"),
    _r(Cls.TOPO_TREE, r"^Trees|[Tt]ree|Connected all trees"),
    _r(Cls.TOPO, r"^Channel %|channels|[Tt]opo|graph|[Rr]ing\b|NVLink|PCI|\bXGMI\b|\bC2C\b|pattern", level="INFO"),
    _r(Cls.TRACE, r"^%s:%d -> %d"),
    _r(Cls.WATCHDOG, r"[Ww]atchdog|[Tt]imeout|timed out", source="pytorch"),
    _r(Cls.PT_NCCL_ERROR, r"^nccl[A-Z]\w+: |NCCL communicator was aborted|^NCCL error in: ", source="pytorch"),
    _r(Cls.ERR_IB_COMPLETION, r"[Cc]ompletion .*(?:error|status)|Got completion", level="WARN"),
    _r(Cls.ERR_VERBS, r"\bibv_\w+(?:\(\))? failed|Call to ibv_|Unable to open device", level="WARN"),
    _r(Cls.ERR_NO_INTERFACE, r"[Nn]o (?:socket |usable |IP |usable listening )?interface (?:found|in the same)",
       level="WARN"),
    _r(Cls.ERR_CONNECT, r"(?i)\bconnect(?:ion)? to .*(?:failed|refused|timed out)|No route to host"
       r"|Connection (?:refused|reset|closed by)|exceeded (?:retries|timeouts)", level="WARN"),
    _r(Cls.ERR_CUDA, r"^Cuda failure|CUDA error", level="WARN"),
    _r(Cls.ERR_VERSION_MISMATCH, r"Mismatched NCCL version|NCCL version mismatch", level="WARN"),
)
# Error classes of WARN (and PyTorch) entries, judged from the format, its files and what its source does
# right after the WARN (``then``: "return ncclSystemError", "goto fail", "continue", ... see tools/nccl_catalog.py).
# The first rule that matches wins; an entry gets one class, stored in the catalog ("error_class").
FATAL_THEN_RE = re.compile(r"^(?:return nccl(?!Success|InProgress)\w+|return|goto \w+|check|throw|set nccl\w+)$")
RECOVERABLE_FILES_RE = re.compile(r"(?:^|/)(?:ibvwrap|ibvsymbols|gdrwrap|mlx5dvwrap|net|net_v\d+|plugin\w*)"
                                  r"\.(?:cc|c|cu|h)$"
                                  r"|/plugin/")
# Fatal whatever else the text says: retries exhausted, "Cannot continue", a message cut short.
FATAL_RULES: tuple[Rule, ...] = (
    _r(Cls.FATAL, r"exceeded (?:error )?retry|retries exhausted|[Cc]annot continue|(?<!non-)\bfatal\b|instead of"
       r"|Failed to initialize any NET plugin|[Aa]bort(?:ing|ed)\b|Got completion from peer"),
)
RECOVERABLE_RULES: tuple[Rule, ...] = (
    # NCCL says how it goes on: a retry, a fallback, a value ignored, limited or defaulted
    _r(Cls.RECOVERABLE, r"\bretrying\b|, ?retry\b|will retry|[Ff]all(?:ing)? ?back|\bfallback\b|using .{1,40} instead"
       r"|\b[Ii]gnor(?:ing|ed)\b|\b[Ss]kipp(?:ing|ed)\b|[Cc]ontinu(?:e|ing) without|\bcontinuing\b|defaulting to"
       r"|\b[Dd]isabling\b|trying (?:again|another|to use)|\b[Ll]imiting\b|setting (?:it )?to|cap it to"
       r"|set (?:both|it) to|\bUnsetting\b|not using|no longer"),
    # CollNet/SHARP set-up, given up for the point-to-point network (a data-path "CollNet sizes" error is not)
    _r(Cls.RECOVERABLE, r"^(?!.*(?:sizes|returned invalid|pattern)).*(?:\bCollNet\b|\bcoll_net\b|\bSHARP\b|\bsharp_)",
       flags=re.I),
    # aws-ofi-nccl failing to initialise as a whole: NCCL goes on with its internal network
    _r(Cls.RECOVERABLE, r"^NET/OFI (?:%s initialization failed|CUDA initialization failed"
       r"|Caught exception in plugin init"
       r"|Could(?: not|n't) find any optimal provider|Failed to initialize (?:%s|rdma|sendrecv) protocol$"
       r"|Initializing (?:base )?plugin failed|Unable to find a protocol that worked|No eligible)",
       source="aws-ofi-nccl"),
)


_RECOVERY_RE = re.compile(RECOVERABLE_RULES[0].pattern)


def says_recovery(msg: str) -> bool:
    """A WARN that says how NCCL goes on (a retry, a fallback, a value ignored): the first recoverable rule,
    unless a fatal rule says otherwise. Read on the logged message, as on the format."""
    return _RECOVERY_RE.search(msg) is not None and not any(r.search(msg) for r in FATAL_RULES)


OPTIONAL_LIBRARY_RE = r"^(?:NET/Plugin ?: ?)?(?:[Ff]ailed to (?:open|find|load)|Could not (?:find|load)|dlopen|dlsym)"


def error_class(source: str, fmt: str, files: tuple[str, ...] = (), then: tuple[str, ...] = ()) -> Cls:
    """Fatal, recoverable or informational, for a WARN format (see the rules above)."""
    if any(r.search(fmt) for r in FATAL_RULES):
        return Cls.FATAL
    if any(r.search(fmt) for r in RECOVERABLE_RULES if _applies(r, source, "WARN")):
        return Cls.RECOVERABLE
    if source == "nccl" and files and all(RECOVERABLE_FILES_RE.search(f) for f in files) \
            and re.search(OPTIONAL_LIBRARY_RE, fmt):
        return Cls.RECOVERABLE  # an optional library or plugin NCCL could not load: it goes on without
    if re.search(ERROR_WORDS, fmt, re.I) or any(FATAL_THEN_RE.match(t) for t in then):
        return Cls.FATAL
    return Cls.INFORMATIONAL


_CONV_RE = re.compile(r"%(?P<flags>[-+ #0']*)(?P<width>\*|\d+)?(?:\.(?P<prec>\*|\d+))?"
                      r"(?P<len>hh|h|ll|l|L|q|j|z|t|I64)?(?P<conv>[diouxXeEfFgGaAcspn%])")
_NUMBER = {"d": r"[-+]?\d+", "i": r"[-+]?\d+", "u": r"\d+", "o": r"[0-7]+",
           "x": r"(?:0[xX])?[0-9a-fA-F]+", "X": r"(?:0[xX])?[0-9a-fA-F]+",
           "p": r"(?:0x[0-9a-fA-F]+|\(nil\)|\(null\)|[0-9a-fA-F]+)", "c": r"[\s\S]"}
_FLOAT = r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan|-?nan)"


def conversions(fmt: str) -> list[re.Match[str]]:
    """The printf conversions of a format (``%%`` included)."""
    return list(_CONV_RE.finditer(fmt))


def pieces(fmt: str) -> tuple[str, ...]:
    """The literal pieces of a format's first line, in order (the text between its conversions)."""
    return tuple(p for p in _CONV_RE.split(fmt.split("\n", 1)[0].rstrip())[::_CONV_RE.groups + 1] if p)


def literal(fmt: str) -> str:
    """A format's own text, conversions left out."""
    return _CONV_RE.sub("", fmt)


def format_regex(fmt: str, *, linear: bool = False) -> str:
    """The regex of what a printf format prints, one capturing group per conversion (``%%`` has none).

    Only the first line counts (a message with ``\\n`` is logged as several lines); numbers may be padded
    by a width; ``%s`` is lazy, so the text after it anchors it. ``linear``: each ``%s`` ends, atomically, at
    the first occurrence of the text that follows it (no backtracking: time linear in the message, whatever
    a hostile log holds; a value that contains that text is not matched).
    """
    fmt = fmt.split("\n", 1)[0].rstrip()
    out, pos = [], 0
    convs = list(_CONV_RE.finditer(fmt))
    for i, m in enumerate(convs):
        out.append(re.escape(fmt[pos:m.start()]))
        pos = m.end()
        conv = m.group("conv")
        if conv == "%":
            out.append("%")
        elif conv == "n":
            continue
        elif conv == "s" and linear:
            nxt = fmt[m.end():convs[i + 1].start()] if i + 1 < len(convs) else fmt[m.end():]
            if not nxt and i + 1 < len(convs) and convs[i + 1].group("conv") == "%":
                nxt = "%"
            then_s = not nxt and i + 1 < len(convs) and convs[i + 1].group("conv") == "s"
            out.append(f"((?>[\\s\\S]*?(?={re.escape(nxt)})))" if nxt else "()" if then_s else  # (%s%s: one)
                       r"([\s\S]*)" if i + 1 == len(convs) else r"([\s\S]*?)")
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
    then: tuple[str, ...] = ()  # WARN: what its source does next ("return ncclSystemError", "continue", ...)
    error_class: Cls | None = None  # WARN: fatal, recoverable or informational, as stored in the catalog

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(format_regex(self.format) + r"\s*\Z")

    @cached_property
    def linear_regex(self) -> re.Pattern[str]:
        """``regex`` without backtracking over ``%s`` (``format_regex(linear=True)``): the parse path's."""
        return re.compile(format_regex(self.format, linear=True) + r"\s*\Z")

    @property
    def opaque(self) -> bool:
        """True for formats that are (nearly) all conversions: ``"%s"`` prints anything."""
        return len(literal(self.format.split("\n", 1)[0]).strip()) < OPAQUE_LITERAL

    @property
    def head(self) -> str:
        """The literal text before the first conversion."""
        m = _CONV_RE.search(self.format)
        return self.format[:m.start()] if m else self.format


def classify(source: str, level: str, fmt: str, error: str | None = None) -> frozenset[Cls]:
    """The classes of one format: every matching ``CLASS_RULES`` rule, and one error class for WARNs (the
    catalog's stored one, ``error``, else the rules' judgement from the format alone)."""
    out = {r.cls for r in CLASS_RULES if _applies(r, source, level) and r.search(fmt)}
    if level == "WARN" and Cls.TRACE not in out:
        out.add(Cls(error) if error else error_class(source, fmt))
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


def read_document(data: bytes | None) -> dict[str, Any]:
    if data is None:
        data = DATA_FILE.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    doc: dict[str, Any] = json.loads(data)
    return doc


def entry_from(e: dict[str, Any], classes: frozenset[Cls] | None = None) -> Entry:
    err = e.get("error_class")
    return Entry(source=e["source"], level=e["level"], format=e["format"], subsys=tuple(e["subsys"]),
                 files=tuple(e["files"]), tags=tuple((a, b) for a, b in e["tags"]),
                 classes=classify(e["source"], e["level"], e["format"], err) if classes is None else classes,
                 then=tuple(e.get("then", ())), error_class=Cls(err) if err else None)


def load(data: bytes | None = None) -> Catalog:
    """The shipped catalog (or one given as bytes: JSON, gzipped or not)."""
    doc = read_document(data)
    entries = tuple(entry_from(e) for e in doc["entries"])
    return Catalog(version=int(doc["catalog_version"]), built_from=doc["built_from"], entries=entries)


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
    (r"Using interface $", "eth0"), (r"Using interface \w+:$", "10.0.0.1<0>"), (r"^Bootstrap ?: ?Using $", "mlx5_0"),
    (r"^$", "init.cc"), (r"\s$", "x1"),
)


_PT_LOG_PREFIX = "[PG ID 0 PG GUID 0(default_pg) Rank 1] "


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
        elif conv == "s" and m.start() == 0 and fmt[m.end():m.end() + 1].isalpha():
            out.append(_PT_LOG_PREFIX)  # c10d's logPrefix() glued to its message: "%sHeartbeat monitor ..."
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
