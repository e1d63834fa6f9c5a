"""``nccl-doctor parse``: read NCCL_DEBUG=INFO logs into a ``ParseResult`` (what NCCL said, per
host, process and communicator), then ``logdiag.diagnose`` turns it into findings.

The parser is one streaming pass. State grows with hosts, processes, ranks and communicators, never
with the number of lines: repeated channel lines are recognised by a per-process set of line tails
before any regex runs, and warnings/errors are grouped by kind with a count and a first occurrence.
Formats follow NCCL 2.0 to 2.30 (see ``reference/nccl-facts.md`` section A).
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable

from nccl_doctor.logs import reader as loglines
from nccl_doctor.errors import InputError
from nccl_doctor.logs.reader import ReadStats, clean, is_continuation

# --- the model ----------------------------------------------------------------------------------

MAX_EXAMPLES = 5  # evidence lines kept per group
MAX_GROUPS = 200  # distinct warning/error kinds kept (the rest is counted as "other")
MAX_SET = 4096  # hosts/ranks kept per group for "where"
MAX_TR_EVIDENCE = 4  # channel lines kept per transport and communicator


@dataclass
class Evidence:
    """A line as the user can find it again: file, line number, text (and who printed it, if known)."""

    file: str | None
    line: int | None
    text: str
    host: str | None = None
    rank: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else ""
        return f"{where}{self.text[:300]}"


@dataclass
class Group:
    """All occurrences of one kind of warning or error.

    ``kind`` is the grouping key (numbers and addresses masked, never shown to users); ``text`` is
    what the first occurrence really said, which messages quote.
    """

    category: str
    kind: str
    text: str = ""
    count: int = 0
    first: Evidence | None = None
    examples: list[Evidence] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    detail: dict[str, str] = field(default_factory=dict)


@dataclass
class Comm:
    """One communicator, merged over every process that reported on it."""

    key: str
    comm_id: str | None = None
    nranks: int | None = None
    nnodes: int | None = None
    local_ranks: int | None = None
    members: int = 0
    complete: int = 0
    hosts: set[str] = field(default_factory=set)
    rank_host: dict[int, str] = field(default_factory=dict)
    intra: Counter = field(default_factory=Counter)  # intra-node transport token -> connections
    net: Counter = field(default_factory=Counter)  # (host, peer rank, net name, gdr) -> connections
    collnet: Counter = field(default_factory=Counter)
    nvls: bool = False
    ring_gdr: set[int] = field(default_factory=set)  # from "Connected all rings, use ring PXN x GDR y"
    first: Evidence | None = None
    # the first few channel lines per transport: ("intra", token) / ("net"|"collnet", name, gdr)
    # -> [(peer rank, evidence)], so each transport finding can quote a line that shows it
    tr_first: dict[tuple, list[tuple[int | None, Evidence]]] = field(default_factory=dict)

    def merge(self, other: "Comm") -> None:
        self.hosts |= other.hosts
        for r, h in other.rank_host.items():
            if self.rank_host.get(r) is None:
                self.rank_host[r] = h
        self.intra.update(other.intra)
        self.net.update(other.net)
        self.collnet.update(other.collnet)
        self.nvls = self.nvls or other.nvls
        self.ring_gdr |= other.ring_gdr
        self.first = self.first or other.first
        for key, evs in other.tr_first.items():
            mine = self.tr_first.setdefault(key, [])
            mine.extend(evs[:MAX_TR_EVIDENCE - len(mine)])


@dataclass(eq=False)
class Membership:
    """One process in one communicator; ``seen`` holds channel-line tails already counted."""

    comm: Comm
    rank: int | None = None
    ptr: str | None = None
    started: bool = False  # an "Init START" line exists (2.18.3+): channel lines follow it
    loose: bool = False  # channel lines seen before any init line: the comm is not known yet
    seen: set[str] = field(default_factory=set)


@dataclass(eq=False)
class Proc:
    """One NCCL process (``host:pid``)."""

    host: str | None
    pid: int | None
    version: str | None = None
    memberships: list[Membership] = field(default_factory=list)
    cur: Membership | None = None


@dataclass
class ParseResult:
    """Everything the logs said, aggregated; ``logdiag.diagnose`` reads only this."""

    sources: list[dict] = field(default_factory=list)
    lines: int = 0
    nccl_lines: int = 0
    versions: dict[str, set[str]] = field(default_factory=dict)  # version -> "host:pid" (capped)
    version_first: dict[str, Evidence] = field(default_factory=dict)
    hosts: dict[str, set[int]] = field(default_factory=dict)
    host_max_dev: dict[str, int] = field(default_factory=dict)
    procs: dict[tuple, Proc] = field(default_factory=dict)
    comms: dict[str, Comm] = field(default_factory=dict)
    named_ranks: set[int] = field(default_factory=set)  # ranks named outside communicators
    networks: Counter = field(default_factory=Counter)  # "Using network X" and friends
    net_plugins: Counter = field(default_factory=Counter)
    ib_devices: dict[str, list[str]] = field(default_factory=dict)  # host -> ["mlx5_0:1/IB", ...]
    link_layers: Counter = field(default_factory=Counter)
    ib_no_device: dict[str, Evidence] = field(default_factory=dict)
    ib_sideband: set[str] = field(default_factory=set)
    socket_ifaces: dict[str, list[str]] = field(default_factory=dict)  # host -> ["eth0:10.0.0.1", ...]
    bootstrap_ifaces: dict[str, list[str]] = field(default_factory=dict)
    oob_ifaces: dict[str, str] = field(default_factory=dict)
    settings: dict[str, Counter] = field(default_factory=dict)
    gdr_hca: dict[str, set[str]] = field(default_factory=dict)  # "Enabled"/"Disabled" -> {"host/hca"}
    gdr_gpu: Counter = field(default_factory=Counter)
    ofi_providers: Counter = field(default_factory=Counter)
    nvls_available: bool = False
    warnings: dict[str, Group] = field(default_factory=dict)  # non-fatal NCCL WARN kinds
    errors: dict[tuple, Group] = field(default_factory=dict)  # (category, kind[, what selects the fix])
    retcodes: Counter = field(default_factory=Counter)  # "file.cc:NN -> N" error traces
    watchdog: dict[tuple, Group] = field(default_factory=dict)  # (op, seq)
    verbs_seen: bool = False  # IB verbs in use (completion/verbs errors)
    # first line of each transport fact outside channel lines ("network:Socket", "ofi:efa", "ib-devices",
    # "socket-ifaces", "gdr-hca:Disabled", "gdr-gpu:Disabled", "ring-gdr:0", "retcode") and who printed it
    facts: dict[str, Evidence] = field(default_factory=dict)
    fact_hosts: dict[str, set[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # directory entries not read: evidently not logs

    @property
    def has_nccl(self) -> bool:
        return self.nccl_lines > 0

    def group(self, table: dict, key, category: str, kind: str, ev: Evidence, host=None, rank=None,
              text: str = "") -> Group:
        g = table.get(key)
        if g is None:
            if len(table) >= MAX_GROUPS:
                key, kind = ("other", "other") if isinstance(key, tuple) else "other", "other"
                text = f"other messages (more than {MAX_GROUPS} kinds), first: {text or ev.text}"
                g = table.get(key)
            if g is None:
                g = table[key] = Group(category, kind, text=text or kind, first=ev)
        g.count += 1
        if len(g.examples) < MAX_EXAMPLES:
            g.examples.append(ev)
        if host and len(g.hosts) < MAX_SET:
            g.hosts.add(host)
        if rank is not None and len(g.ranks) < MAX_SET:
            g.ranks.add(rank)
        return g


# --- regexes (compiled once; each used only after a cheap substring test) -----------------------

# host:pid:tid [dev] with an optional "file:line (func)" for WARN lines; anything before is a prefix.
_PREFIX_RE = re.compile(
    r"(?:^|(?<=[\s>\])}`:|]))(?P<host>[^\s:\[\](){}<>`|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]"
    r"(?: (?P<src>\S+:\d+)(?: \([^)]*\))?)?\s*$"
)
_PREFIX_FAST_RE = re.compile(r"(?P<host>[^\s:\[\](){}<>`|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]\Z")
_DEV_ONLY_RE = re.compile(r"\[(\d+)\](?: (\S+:\d+))?\s*$")
_LAUNCHER_RANK_RE = re.compile(r"^\s*(?:\[\d+,(\d+)\]<\w+>:|\[rank(\d+)\]:|(\d+): )")
_MARK_RE = re.compile(
    r"(?:(?P<host>[^\s:\[\](){}<>`|/]+):\d+:\d+ )?\[\d+\] (?:\S+:\d+(?: \([^)]*\))? )?NCCL (?:INFO|WARN|ABORT|TRACE) "
)
_MARK_WORDS = ("NCCL INFO ", "NCCL WARN ", "NCCL ABORT ", "NCCL TRACE ")
_VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)([^\s+]*)(\+cuda[\d.]+)?")
_VIA_RE = re.compile(
    r"^(?:Ring|Channel|CollNet|Coll|NVLS) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-Fx]*\])?"
    r"(?: -> (\d+)(?:\[[0-9a-fA-Fx]*\])?)?(?: \[(send|receive)\])? via (.+)$"
)
_INDIRECT_RE = re.compile(r"/indirect/\d+(?:\[[0-9a-fA-F]*\])?")
_NETTR_RE = re.compile(r"^(COLL)?NET/(.+?)/(\d+)(?:\((\d+)\))?(/GDRDMA)?")
_COMM_RE = re.compile(r"\bcomm (0x[0-9a-fA-F]+|\(nil\)|[0-9a-fA-F]+) rank (\d+) nranks (\d+)", re.I)
_FIELD_RE = re.compile(r"\b(commId|nNodes|localRanks) (0x[0-9a-fA-F]+|\d+)")
_OLD_RANK_RE = re.compile(r"^rank (\d+) nranks (\d+)")
# the two init lines of 2.19+, whole (see _init_line): exactly what _COMM_RE + _FIELD_RE read from them
_INIT_RANK_FAST_RE = re.compile(
    r"ncclCommInitRank comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev \d+ nvmlDev \d+ busId [0-9a-fA-F]+"
    r" commId (0x[0-9a-fA-F]+) - Init (START|COMPLETE)\Z"
)
_COMM_LINE_FAST_RE = re.compile(
    r"comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank \d+ MNNVL \d+\Z"
)
_IBDEV_RE = re.compile(r"\[\d+\]\s*([\w.+-]+):(\d+)(?::-?\d*)*/(IB|RoCE|UNSPECIFIED)")
_OOB_RE = re.compile(r"; OOB ([^:\s]+):")
_IFACE_RE = re.compile(r"(?:\[\d+\])?([^\s:\[\]]+):(\S+?)<\d+>")
_SETTING_RE = re.compile(r"^(\w+) set (?:by environment |from environment |)to (.*?)\s*$")
_NETWORK_RE = re.compile(r"^(?:Using network|Using internal Network|Assigned NET plugin) (.+?)(?: to comm.*)?\s*$")
_PLUGIN_RE = re.compile(r"Loaded (?:net|coll(?:Net)?) plugin (.+?)(?: \(v\d+\))?\s*$", re.I)
_GDR_HCA_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+|[0-9a-fx]+)(?: '([^']*)')?")
_GDR_GPU_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for GPU")
_RING_GDR_RE = re.compile(r"Connected all rings.*\bGDR (\d)")
_NVLS_CHANNELS_RE = re.compile(r"(\d+) nvls channels")
_OFI_PROVIDER_RE = re.compile(r"Selected [Pp]rovider is ([^\s,]+)")
_TRACE_RE = re.compile(r"^[\w./-]+\.(?:cc|c|h|cu|cpp):\d+ -> (\d+)")
_WATCHDOG_RE = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")
_TIMEOUT_RE = re.compile(r"Timeout\(ms\)=(\d+)")
_RANFOR_RE = re.compile(r"ran for (\d+) milliseconds")
_PT_RANK_RE = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
_PT_PG_RE = re.compile(r"\[PG (?:ID )?(\S+)")  # "[PG 0 Rank 3]" (2.3+), "[PG ID 0 PG GUID 0(default_pg) Rank 3]"
_NCCLTESTS_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+) (?:Group\s+\d+ )?Pid\s+\d+ on\s+(\S+)")
_NCCL_ERROR_RE = re.compile(
    r"\b(nccl(?:InternalError|SystemError|RemoteError|InvalidUsage|InvalidArgument|UnhandledCudaError|Timeout)"
    r"|unhandled (?:system|cuda) error|remote process exited or there was a network error"
    r"|internal error - please report|NCCL communicator was aborted|Test NCCL failure"
    r"|NCCL error in:?|NCCL Error \d+)",
)
_LAST_ERROR_RE = re.compile(r"\b(nccl[A-Z]\w+: .+)$")
_KIND_SUBS = [
    (re.compile(r"\S+<\d+>"), "<addr>"),  # host<port> / ip<port>
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<ip>"),
    (re.compile(r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}"), "<ip6>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x#"),
    (re.compile(r"\d+"), "#"),
]

# (category, pattern) for NCCL WARN messages; the first that matches wins. "warn" = not fatal.
_WARN_RULES: list[tuple[str, re.Pattern]] = [
    ("ib-completion", re.compile(r"Got completion")),
    ("verbs", re.compile(r"\bibv_\w+ failed|Unable to open device|incompatible devices|Call to ibv_|ibv_\w+\(\) failed")),
    ("no-interface", re.compile(
        r"no socket interface found|No usable listening interface|no interface found|No IP interface found"
        r"|No interface found in the same subnet", re.I)),
    ("connect", re.compile(
        r"Connect(?:ion)? to .*(?:failed|refused|timed out)|\bConnect to \S|exceeded (?:retries|timeouts)"
        r"|Connection closed by|Call to (?:recv|send|accept|connect)\b.*failed|Socket recv failed|returned \d+\(.*errno"
        r"|No route to host|Connection refused|Connection reset|socketPollConnect|socketStartConnect", re.I)),
    ("cuda", re.compile(r"Cuda failure|CUDA error|Failed to CUDA|cuda\w* failed|out of memory|unhandled cuda", re.I)),
    ("version-mismatch", re.compile(r"Mismatched NCCL version")),
    ("nccl-error", re.compile(
        r"Failed to execute operation|internal error|system error|remote error|Invalid|Duplicate GPU"
        r"|does not loop back|does not contain rank|Bootstrap Root|network .* not found"
        r"|Failed to initialize any NET plugin|Unrecognized|No algorithm/protocol|Timeout|timed out|abort", re.I)),
]
_ERROR_CATEGORIES = {c for c, _ in _WARN_RULES}


# Complete transport tokens (nccl-facts A.6) that a line cut mid-token can be a proper prefix of: the last
# line of a killed rank's NCCL_DEBUG_FILE ends "via NET/IB/0/GD" or "via P2P/CUMEM/re".
_TOKENS = frozenset(
    [f"P2P/{k}{r}{ce}" for k in ("IPC", "CUMEM", "MNNVL") for r in ("", "/read") for ce in ("", "/CE")]
    + ["P2P/direct pointer", "P2P/direct pointer/read", "P2P/indirect", "P2P/indirect/read", "P2P/common device",
       "SHM/direct", "direct shared memory", "NET/", "COLLNET/"]
    + [f"SHM/{a}/{b}" for a in ("direct", "CE") for b in ("direct", "CE")]
)
_NET_TAILS = ("/GDRDMA(PCI)/Shared", "/GDRDMA/Shared", "(PCI)/Shared", "/Shared")  # after NET/<name>/<dev>


def _cut_prefixes(complete) -> frozenset:
    """Every proper prefix of the complete texts that is not complete itself: what a cut leaves."""
    return frozenset(t[:i] for t in complete for i in range(1, len(t))) - set(complete)


_CUT_TOKENS = _cut_prefixes(_TOKENS)
_CUT_NET_TAILS = _cut_prefixes(_NET_TAILS) - {"(PCI)", "/Shared"}


def _cut_short(tr: str, nm: re.Match | None) -> bool:
    """True for a transport token cut off mid-word (a proper prefix of a complete token and not one itself).

    Unknown tokens of future NCCL versions are not such prefixes and pass unchanged. Two set lookups: this
    runs for every channel line not seen before.
    """
    if nm is None:  # (a NET token without its device number is cut as well)
        return tr in _CUT_TOKENS or tr.startswith(("NET/", "COLLNET/"))
    end = nm.end()
    if end == len(tr):
        return False
    rest = tr[end:]
    return rest in _CUT_NET_TAILS or (rest[0] == "(" and ")" not in rest)


def _num(text: str) -> int:
    """A field value as ``_FIELD_RE`` admits it: decimal (leading zeros too) or 0x hex."""
    return int(text, 16) if text[:2].lower() == "0x" else int(text)



def _parse_setting(msg: str) -> tuple[str, str] | None:
    """``NAME set by environment to VALUE`` as (NAME, VALUE); None for anything else."""
    m = _SETTING_RE.match(clean(msg))
    if not m or not m.group(1).isupper():
        return None
    name, value = m.group(1), m.group(2)
    if value.endswith(".") and value[:-1].lstrip("-").isdigit():
        value = value[:-1]
    return name, value


def warn_kind(msg: str) -> str:
    """A message with addresses and numbers masked, so repeats of one problem group together."""
    text = msg[:160]
    for rx, repl in _KIND_SUBS:
        text = rx.sub(repl, text)
    return text.strip()


# --- the parser ---------------------------------------------------------------------------------


class LogParser:
    """Feed physical lines with ``feed``; call ``finish`` once; read ``result``."""

    def __init__(self) -> None:
        self.result = ParseResult()
        self.file: str | None = None
        self.lineno = 0
        self._prefix_cache: dict[str, Proc | None] = {}
        self._held: str | None = None  # a long NCCL line that may continue on the next line
        self._held_lineno = 0
        self._unidentified: Comm | None = None
        self._orphans: list[Comm] = []
        self._noop: dict[str, bool] = {}  # INFO message -> "_info does nothing with it" (see _noop_message)
        self._memo: dict[str, object] = {}  # INFO message -> what it says, whoever printed it (_remember)

    # physical lines: hard wraps, CRs and the cheap "is this about NCCL at all" filter
    def feed(self, line: str) -> None:
        self.lineno += 1
        if "\r" in line:
            for part in line.split("\r"):
                if part:
                    self._physical(part)
            return
        self._physical(line)

    def feed_all(self, lines: Iterable[str]) -> None:
        """``feed`` every line, skipping lines that cannot change the result without a call or a regex.

        This loop is the hot path of a 32,768-rank log, where ~75% of the lines are channel lines
        that repeat a connection already counted (only the channel number differs) and ~10% are
        INFO lines the diagnosis never reads (``_IGNORED_HEADS``). A line is skipped, and only
        counted, when its prefix is a known process whose current membership already holds the
        line's tail (`` : ...``), or when it is an ignored head of a known prefix. The common case, the
        same prefix as the line before, costs one ``startswith``; any other line takes the careful
        path (``_logical`` / ``feed``), after which the cached prefix state is refreshed, because
        only the careful path changes a process's membership.
        """
        cache, feed, logical = self._prefix_cache, self.feed, self._logical
        ignored, noop = _IGNORED_HEADS, self._noop
        first = self.lineno + 1
        lineno = first - 1
        careful = 0  # lines not skipped; the others are counted as NCCL lines at the end
        head, hlen, seen = None, 0, None  # "<prefix> NCCL INFO " of the last line, its proc's seen tails
        for lineno, line in enumerate(lines, first):  # (the careful path leaves self.lineno at lineno)
            if head is not None and line.startswith(head):
                c = line[hlen:hlen + 2]
                if c == "Ch" or c == "Ri":
                    if seen is not None:
                        k = line.find(" : ", hlen)
                        if k > 0 and line[k:] in seen:
                            continue
                elif c in ignored and line.find(" NCCL ", hlen) < 0:
                    continue
                elif (c == "Co" or c[:1].isdigit()) and self._held is None and len(line) < 160:
                    msg = line[hlen:]
                    q = noop.get(msg)
                    if q is None:
                        q = self._noop_message(msg)
                    if q:
                        continue
                i = hlen - 11
            else:
                i = line.find(" NCCL INFO ")
                if i > 0:
                    c = line[i + 11:i + 13]
                    if c == "Ch" or c == "Ri":
                        proc = cache.get(line[:i])
                        if proc is not None and proc.cur is not None:
                            k = line.find(" : ", i)
                            if k > 0 and line[k:] in proc.cur.seen:
                                continue
                    elif c in ignored and line.find(" NCCL ", i + 11) < 0 and line[:i] in cache:
                        continue
            careful += 1
            if i > 0 and "\r" not in line:  # an INFO line: what _physical does with it, without the calls
                self.lineno = lineno
                if self._held is not None:
                    self._flush_held()
                if len(line) < 160:  # (>= WRAP_MIN)
                    logical(line)  # an ordinary INFO line: straight to its handler
                else:  # a long line may go on on the next physical line (hard wrap): held until then
                    self._held, self._held_lineno = line, lineno
            else:
                self.lineno = lineno - 1
                feed(line)
            head = None
            if i > 0:
                prefix = line[:i]
                if prefix in cache:
                    proc = cache[prefix]
                    head, hlen = line[:i + 11], i + 11
                    seen = proc.cur.seen if proc is not None and proc.cur is not None else None
        self.lineno = lineno
        self.result.nccl_lines += lineno - first + 1 - careful  # the lines skipped

    def _noop_message(self, msg: str) -> bool:
        """True for a frequent INFO message that ``_info`` ignores whatever process printed it.

        ``Connected all rings`` without ``GDR`` and ``N coll channels, ... 0 nvls channels``: one
        each per rank and communicator (~10% of a large log). Memoised per distinct text, which
        repeats across ranks, so ``feed_all`` skips them with one dict lookup.
        """
        noop = "NCCL" not in msg and "\r" not in msg and len(msg) < 120 and (
            (msg.startswith("Connected all ") and "GDR" not in msg)
            or (msg[:1].isdigit() and " -> " not in msg and "nvls channels" in msg
                and not any(int(n) for n in _NVLS_CHANNELS_RE.findall(msg)))
        )
        if len(self._noop) >= 4096:
            self._noop.clear()
        self._noop[msg] = noop
        return noop

    def _physical(self, line: str) -> None:
        if "NCCL" in line or "nccl" in line:
            if self._held is not None:
                self._flush_held()
            if len(line) >= loglines.WRAP_MIN and (len(line) >= 160 or " NCCL INFO " not in line):
                self._held, self._held_lineno = line, self.lineno
            else:
                self._logical(line)
        elif self._held is not None and len(self._held) < loglines.MAX_LINE and is_continuation(line):
            self._held += line
        else:
            if self._held is not None:
                self._flush_held()
            if "Rank" in line and line.startswith("#"):
                self._nccl_tests_header(line)

    def _flush_held(self) -> None:
        held, self._held = self._held, None
        lineno, self.lineno = self.lineno, self._held_lineno
        self._logical(held)
        self.lineno = lineno

    def end_source(self) -> None:
        if self._held is not None:
            self._flush_held()

    # logical lines
    def _logical(self, line: str) -> None:
        i = line.find(" NCCL INFO ")
        if i >= 0:
            msg = line[i + 11:]
            if "NCCL " in msg and self._split_spliced(line):
                return
            self.result.nccl_lines += 1
            proc = self._prefix_cache.get(line[:i], False)
            if proc is False:
                proc = self._proc_for_prefix(line[:i])
            self._info(proc, msg)
            return
        self._other(line)

    def _split_spliced(self, line: str) -> bool:
        """Two NCCL records glued on one physical line: feed each on its own."""
        if sum(map(line.count, _MARK_WORDS)) < 2:  # each _MARK_RE match holds one of them
            return False
        starts = []
        for m in _MARK_RE.finditer(line):
            start, host = m.start(), m.group("host")
            if host and host not in self.result.hosts:  # "...via P2P/IPCzeta:1:2 [0] NCCL INFO"
                known = self._known_suffix(host)
                if known:
                    start += len(host) - len(known)
            starts.append(start)
        if len(starts) < 2:
            return False
        starts[0] = 0
        for a, b in zip(starts, starts[1:] + [len(line)]):
            self._logical(line[a:b].rstrip())
        return True

    def _known_suffix(self, host: str) -> str | None:
        """The first known host (in order of appearance) that ends ``host``, itself excluded.

        Looks up each suffix of the name instead of scanning every known host: a new host per node
        would otherwise make a 4,096-node log quadratic (8 million ``endswith`` calls).
        """
        hosts = self.result.hosts
        found = [host[j:] for j in range(1, len(host)) if host[j:] in hosts]
        if len(found) <= 1:
            return found[0] if found else None
        order = {h: n for n, h in enumerate(hosts)}  # rare: several known names end this one
        return min(found, key=order.__getitem__)

    def _proc_for_prefix(self, prefix: str) -> Proc | None:
        r = self.result
        text = clean(prefix) if ("[" in prefix or "\x1b" in prefix) else prefix
        # the bare "host:pid:tid [dev]" is what _PREFIX_RE finds at position 0, with the same groups
        m = _PREFIX_FAST_RE.match(text) or _PREFIX_RE.search(text)
        proc = None
        if m:
            host = m.group("host")
            if host not in r.hosts and len(r.hosts) < 10000:
                # a spliced line glues the tail of one record to the next host name
                known = self._known_suffix(host)
                host = known or host
            pid, dev = int(m.group("pid")), int(m.group("dev"))
            proc = r.procs.get((host, pid))
            if proc is None:
                proc = r.procs[(host, pid)] = Proc(host, pid)
                r.hosts.setdefault(host, set()).add(pid)
            if dev > r.host_max_dev.get(host, -1):
                r.host_max_dev[host] = dev
            lead = text[: m.start()]
        else:
            lead = text
        lm = _LAUNCHER_RANK_RE.match(lead) if lead else None
        if lm:
            r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))
        if len(self._prefix_cache) > 200_000:
            self._prefix_cache.clear()
        self._prefix_cache[prefix] = proc
        return proc

    def _ev(self, text: str, host: str | None = None, rank: int | None = None) -> Evidence:
        return Evidence(self.file, self.lineno, clean(text)[:500], host, rank)

    def _fact(self, key: str, proc: Proc | None, msg: str) -> None:
        """Keep the first line of a transport fact and the hosts that printed it (bounded)."""
        r = self.result
        host = proc.host if proc is not None else None
        if key not in r.facts:
            if len(r.facts) >= MAX_GROUPS:
                return
            rank = proc.cur.rank if proc is not None and proc.cur is not None else None
            r.facts[key] = self._ev(f"{host}: {msg}" if host else msg, host, rank)
        hosts = r.fact_hosts.setdefault(key, set())
        if host and len(hosts) < MAX_SET:
            hosts.add(host)

    # INFO messages ---------------------------------------------------------------------------
    def _info(self, proc: Proc | None, msg: str) -> None:
        c = msg[:2]
        if c == "Ch" or c == "Ri" or c == "Co" and msg.startswith("Coll"):
            k = msg.find(" : ")
            if k > 0:
                mem = proc.cur if proc is not None and proc.cur is not None else self._loose(proc)
                tail = msg[k:]
                if tail in mem.seen:
                    return
                if len(mem.seen) < 4096:
                    mem.seen.add(tail)
                if " via " in tail:
                    self._channel(proc, mem, msg)
                return
        if c == "co" or c == "nc" or c == "[R" or c == "ra":
            if self._init_line(proc, msg):
                return
        handler = _INFO_DISPATCH.get(msg[:5])
        if handler is not None:
            handler(self, proc, msg)
            return
        if msg[:1].isdigit():
            self._numeric_info(proc, msg)
        elif " -> " in msg:
            self._trace(proc, msg)
        elif " set " in msg:
            self._setting(msg)
        elif "Call to connect returned" in msg or "NCCL WARN" in msg:
            self._warn(proc, msg, info=True)

    def _loose(self, proc: Proc | None) -> Membership:
        """Channel lines before any init line of their process: keep them aside until one comes."""
        if proc is None:
            if self._unidentified is None:
                self._unidentified = Comm("unidentified")
            return Membership(self._unidentified, loose=True)
        mem = Membership(Comm("unidentified"), loose=True)
        proc.cur = mem
        return mem

    def _channel(self, proc: Proc | None, mem: Membership, msg: str) -> None:
        m = _VIA_RE.match(msg)
        if not m:
            return
        src, dst, direction, tr = m.groups()
        src = int(src)
        dst = int(dst) if dst is not None else None
        local, peer = (dst, src) if direction == "receive" else (src, dst)
        if proc is not None and mem.rank is not None and local != mem.rank and not mem.loose:
            other = next((x for x in reversed(proc.memberships) if x.rank == local), None)
            mem = other or mem
        comm = mem.comm
        host = proc.host if proc is not None else None
        if local is not None:
            if host is not None:
                if comm.rank_host.get(local) is None:
                    comm.rank_host[local] = host
                comm.hosts.add(host)
            elif mem.comm is self._unidentified:
                self.result.named_ranks.add(local)
            if mem.rank is None and not mem.loose:
                mem.rank = local
        if peer is not None and host is None:
            self.result.named_ranks.add(peer)
        if peer is not None and peer not in comm.rank_host and len(comm.rank_host) < 1 << 20:
            comm.rank_host.setdefault(peer, None)  # named, host unknown yet
        tr = clean(tr) if "[" in tr else tr.strip()  # what clean() does to text without "["
        nm = _NETTR_RE.match(tr)
        if _cut_short(tr, nm):
            return  # the ranks above count; a transport read from half a token would not be true
        if nm:
            coll, name, _dev, _proxy, gdr = nm.groups()
            if coll:
                comm.collnet[(name, bool(gdr))] += 1
                tkey = ("collnet", name, bool(gdr))
            else:
                net, nkey = comm.net, (host, peer, name, bool(gdr))
                net[nkey] = net.get(nkey, 0) + 1  # a new key each time: no Counter.__missing__ call
                tkey = ("net", name, bool(gdr))
        else:
            token = _INDIRECT_RE.sub("/indirect", tr) if "/indirect/" in tr else tr
            comm.intra[token] += 1
            tkey = ("intra", token)
        evs = comm.tr_first.get(tkey)
        if evs is None:
            evs = comm.tr_first[tkey] = []
        if len(evs) < MAX_TR_EVIDENCE or comm.first is None:
            ev = self._ev(f"{host}: {msg}" if host else msg, host, local)
            comm.first = comm.first or ev
            if len(evs) < MAX_TR_EVIDENCE:
                evs.append((peer, ev))

    def _init_line(self, proc: Proc | None, msg: str) -> bool:
        """``comm 0x.. rank R nranks N ...`` in all its versions; True if handled.

        The two forms of 2.19+ (``ncclCommInitRank ... - Init START|COMPLETE`` and ``comm ... nRanks
        ... nNodes ... localRanks ...``) are read by one anchored regex each, which yields exactly what
        the general ``_COMM_RE`` + ``_FIELD_RE`` reading would; any other form takes that reading.
        """
        nnodes = local_ranks = None
        m = _INIT_RANK_FAST_RE.match(msg)
        if m is not None:
            ptr, rank, nranks, comm_id, state = m.groups()
            start = state == "START"
            complete = not start
        else:
            m = _COMM_LINE_FAST_RE.match(msg)
            if m is not None:
                ptr, rank, nranks, nnodes, local_ranks = m.groups()
                comm_id, start, complete = None, False, False
            else:
                m = _COMM_RE.search(msg)
                if not m:
                    om = _OLD_RANK_RE.match(msg)
                    if om and proc is not None:  # NCCL 2.3: "rank 0 nranks 8"
                        self._membership(proc, None, None, int(om.group(1)), int(om.group(2)), msg)
                        return True
                    return False
                ptr, rank, nranks = m.group(1), m.group(2), m.group(3)
                fields = dict(_FIELD_RE.findall(msg, m.end()))
                comm_id, nnodes, local_ranks = fields.get("commId"), fields.get("nNodes"), fields.get("localRanks")
                start = msg.endswith("Init START")
                complete = not start and "Init COMPLETE" in msg
        rank, nranks = int(rank), int(nranks)
        if proc is None:
            self.result.named_ranks.add(rank)
            return True
        cur = proc.cur
        if start and cur is not None and cur.loose:
            self._orphans.append(cur.comm)  # 2.18.3+: those lines belong to an earlier comm
            proc.cur = None
        mem = self._membership(proc, ptr, comm_id, rank, nranks, msg)
        comm = mem.comm
        if nnodes is not None:
            comm.nnodes = _num(nnodes)
        if local_ranks is not None:
            comm.local_ranks = _num(local_ranks)
        if start:
            mem.started = True
        elif complete:
            comm.complete += 1
            if not mem.started:
                proc.cur = None  # <= 2.17: the next comm's channel lines come before its init line
        return True

    def _membership(self, proc: Proc, ptr, comm_id, rank: int, nranks: int, msg: str) -> Membership:
        r = self.result
        mem = None
        if ptr is not None:
            for x in reversed(proc.memberships):
                if x.ptr == ptr:
                    mem = x
                    break
            else:  # NCCL 2.3 prints "rank R nranks N" before the line with the pointer
                for x in reversed(proc.memberships):
                    if x.ptr is None and x.rank == rank and x.comm.nranks == nranks:
                        mem = x
                        mem.ptr = ptr
                        break
        if mem is not None and comm_id and mem.comm.comm_id is None:
            # learned the commId late (2.16-2.20 print it only on some lines): re-key
            old = mem.comm
            if r.comms.get(old.key) is old and old.members <= 1:
                del r.comms[old.key]
                comm = r.comms.get(comm_id)
                if comm is None:
                    old.key, old.comm_id = comm_id, comm_id
                    r.comms[comm_id] = old
                else:
                    comm.merge(old)
                    comm.members += 1
                    mem.comm = comm
        if mem is None:
            if comm_id:
                key = comm_id
            else:
                nth = sum(1 for x in proc.memberships if x.comm.comm_id is None and x.comm.nranks == nranks)
                key = f"nranks={nranks}#{nth}"
            comm = r.comms.get(key)
            if comm is None:
                comm = r.comms[key] = Comm(key, comm_id=comm_id, nranks=nranks,
                                           first=self._ev(f"{proc.host}: {msg}", proc.host, rank))
            comm.members += 1
            mem = Membership(comm, rank=rank, ptr=ptr)
            cur = proc.cur
            if cur is not None and cur.loose:
                comm.merge(cur.comm)  # adopt channel lines printed before this init line
            proc.memberships.append(mem)
            if len(proc.memberships) > 64:
                del proc.memberships[0]
            proc.cur = mem
        mem.rank = rank
        comm = mem.comm
        comm.nranks = comm.nranks or nranks
        if proc.host is not None:
            comm.hosts.add(proc.host)
            comm.rank_host[rank] = proc.host
        return mem

    def _numeric_info(self, proc: Proc | None, msg: str) -> None:
        if "nvls channels" in msg:
            m = _NVLS_CHANNELS_RE.search(msg)
            if m and int(m.group(1)) > 0:
                self._fact("nvls", proc, msg)
            if m and int(m.group(1)) > 0 and proc is not None and proc.cur is not None:
                proc.cur.comm.nvls = True
            elif m and int(m.group(1)) > 0:
                self._loose(proc).comm.nvls = True
        elif " -> " in msg:
            self._trace(proc, msg)

    def _trace(self, proc: Proc | None, msg: str) -> None:
        m = _TRACE_RE.match(msg)
        if m and m.group(1) != "0":
            self.result.retcodes[int(m.group(1))] += 1
            if m.group(1) != "7":  # 7 = ncclInProgress, not an error
                self._fact("retcode", proc, msg)

    def _setting(self, msg: str) -> None:
        nv = self._memo.get(msg, False)
        if nv is False:
            nv = self._remember(msg, _parse_setting(msg))
        if nv is None:
            return
        name, value = nv
        c = self.result.settings.get(name)
        if c is None:  # (not setdefault: that builds a Counter per line)
            c = self.result.settings[name] = Counter()
        if value in c or len(c) < 64:
            c[value] += 1

    def _version(self, proc: Proc | None, msg: str) -> None:
        m = _VERSION_RE.search(msg)
        if not m:
            return
        version = m.group(1) + m.group(2)
        r = self.result
        who = r.versions.setdefault(version, set())
        if version not in r.version_first:
            host = proc.host if proc is not None else None
            r.version_first[version] = self._ev(f"{host}: {msg}" if host else msg, host)
        if proc is not None:
            proc.version = version
            if len(who) < MAX_SET:
                who.add(f"{proc.host}:{proc.pid}")

    def _nccl_word(self, proc: Proc | None, msg: str) -> None:
        if msg.startswith("NCCL version"):
            self._version(proc, msg)
        elif " set " in msg:
            self._setting(msg)

    def _net_ib(self, proc: Proc | None, msg: str) -> None:
        r = self.result
        host = proc.host if proc is not None else "?"
        msg = clean(msg)
        if "Using" in msg and "/" in msg[6:] and _IBDEV_RE.search(msg):
            if host not in r.ib_devices:  # the device list of a host already known is not read
                devs = [f"{d}:{p}/{ll}" for d, p, ll in _IBDEV_RE.findall(msg)]
                r.ib_devices[host] = devs
                for d in devs:
                    r.link_layers[d.rsplit("/", 1)[1]] += 1
                self._fact("ib-devices", proc, msg)
            if host not in r.oob_ifaces:
                om = _OOB_RE.search(msg)
                if om:
                    r.oob_ifaces[host] = om.group(1)
        elif "No device found" in msg:
            if host not in r.ib_no_device:
                r.ib_no_device[host] = self._ev(f"{proc.host}: {msg}" if proc is not None else msg,
                                                proc.host if proc is not None else None)
        elif "sideband" in msg:
            r.ib_sideband.add(host)
        elif "GPU Direct RDMA" in msg:
            self._gdr(proc, msg)
        elif "Got completion" in msg or "failed" in msg:
            self._warn(proc, msg, info=True)

    def _gdr(self, proc: Proc | None, msg: str) -> None:
        m = _GDR_HCA_RE.search(msg)
        if m:
            host = proc.host if proc is not None else "?"
            self.result.gdr_hca.setdefault(m.group(1), set()).add(f"{host}/{m.group(3) or m.group(2)}")
            self._fact(f"gdr-hca:{m.group(1)}", proc, msg)
            return
        m = _GDR_GPU_RE.search(msg)
        if m:
            self.result.gdr_gpu[m.group(1)] += 1
            self._fact(f"gdr-gpu:{m.group(1)}", proc, msg)

    def _net_socket(self, proc: Proc | None, msg: str) -> None:
        host = proc.host if proc is not None else "?"
        msg = clean(msg)
        if ": Using [" in msg or ":Using [" in msg or msg.startswith("NET : Using interface"):
            ifaces = [f"{i}:{a}" for i, a in _IFACE_RE.findall(msg.split("Using", 1)[1])]
            if ifaces and host not in self.result.socket_ifaces:
                self.result.socket_ifaces[host] = ifaces
                self._fact("socket-ifaces", proc, msg)
        elif "no interface found" in msg.lower():
            self._warn(proc, msg, info=True)

    def _net_other(self, proc: Proc | None, msg: str) -> None:
        if msg.startswith("NET/IB"):
            self._net_ib(proc, msg)
        elif msg.startswith("NET/Socket") or msg.startswith("NET : Using"):
            self._net_socket(proc, msg)
        elif msg.startswith("NET/Plugin"):
            name = self._memo.get(msg, False)
            if name is False:
                m = _PLUGIN_RE.search(clean(msg))
                name = self._remember(msg, m.group(1) if m else (
                    "internal" if "internal" in msg or "No plugin found" in msg else None))
            if name is not None:
                self.result.net_plugins[name] += 1
        elif msg.startswith("NET/OFI"):
            self.result.net_plugins["aws-ofi-nccl"] += 1
            self._fact("ofi-plugin", proc, msg)  # quoted when the plugin did not start (no provider line)
            m = _OFI_PROVIDER_RE.search(msg)
            if m:
                self.result.ofi_providers[m.group(1)] += 1
                self._fact(f"ofi:{m.group(1)}", proc, msg)
        elif "GPU Direct RDMA" in msg:
            self._gdr(proc, msg)

    def _bootstrap(self, proc: Proc | None, msg: str) -> None:
        host = proc.host if proc is not None else "?"
        msg = clean(msg)
        if "Using" in msg:
            if host in self.result.bootstrap_ifaces:  # only the first list per host is kept
                return
            ifaces = [f"{i}:{a}" for i, a in _IFACE_RE.findall(msg.split("Using", 1)[1])]
            if ifaces:
                self.result.bootstrap_ifaces[host] = ifaces
        elif "no socket interface" in msg.lower():
            self._warn(proc, msg, info=True)

    def _using(self, proc: Proc | None, msg: str) -> None:
        name = self._memo.get(msg, False)
        if name is False:  # the same few texts come once per process: match each once
            m = _NETWORK_RE.match(clean(msg))
            name = self._remember(msg, m.group(1) if m else None)
        if name is not None:
            self.result.networks[name] += 1
            self._fact(f"network:{name}", proc, msg)

    def _remember(self, msg: str, value):
        """Memoise what a message says whoever printed it (``_memo``: exact text -> value), bounded."""
        if len(self._memo) >= 4096:
            self._memo.clear()
        self._memo[msg] = value
        return value

    def _connected(self, proc: Proc | None, msg: str) -> None:
        m = _RING_GDR_RE.search(msg)
        if m and proc is not None and proc.cur is not None:
            proc.cur.comm.ring_gdr.add(int(m.group(1)))
            self._fact(f"ring-gdr:{m.group(1)}", proc, msg)

    def _nvls(self, proc: Proc | None, msg: str) -> None:
        if msg.startswith("NVLS comm"):
            self._fact("nvls", proc, msg)
            if proc is not None and proc.cur is not None:
                proc.cur.comm.nvls = True
            else:
                self._loose(proc).comm.nvls = True
        elif "multicast support is available" in msg:
            self.result.nvls_available = True

    def _gpu(self, proc: Proc | None, msg: str) -> None:
        if "GPU Direct RDMA" in msg:
            self._gdr(proc, msg)

    def _service(self, proc: Proc | None, msg: str) -> None:
        pass  # "[Service thread] Connection closed by localRank N": a consequence, never the cause

    # WARN and everything without an INFO prefix -----------------------------------------------
    def _other(self, line: str) -> None:
        r = self.result
        i = line.find(" NCCL WARN ")
        if i < 0 and line.startswith("NCCL WARN "):
            i = -1
        if i >= 0 or line.startswith("NCCL WARN "):
            r.nccl_lines += 1
            prefix = line[:i] if i > 0 else ""
            proc = self._prefix_cache.get(prefix, False) if prefix else None
            if proc is False:
                proc = self._proc_for_prefix(prefix)
            self._warn(proc, line[i + 11:] if i >= 0 else line[10:], src=prefix)
            return
        text = clean(line)
        if "Watchdog caught collective operation timeout" in text:
            r.nccl_lines += 1
            self._watchdog(text)
            return
        for level in (" NCCL TRACE ", " NCCL ABORT ", "NCCL INFO "):
            j = text.find(level)
            if j >= 0:
                r.nccl_lines += 1
                if level == "NCCL INFO ":  # a record with no prefix at all
                    self._info(None, text[j + 10:])
                return
        m = _NCCL_ERROR_RE.search(text)
        if m:
            r.nccl_lines += 1
            self._error("nccl-error", text, None, kind=m.group(1), shown=m.group(1))
            return
        if "NCCL version" in text:
            r.nccl_lines += 1
            lm = _LAUNCHER_RANK_RE.match(text)
            self._version(None, text)
            if lm:
                r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))
            return
        m = _LAST_ERROR_RE.search(text)
        if m and "nccl" in m.group(1)[:5]:
            r.nccl_lines += 1
            self._error("nccl-error", text, None, kind=warn_kind(m.group(1)), shown=m.group(1))
            return
        if "ProcessGroupNCCL" in text:
            r.nccl_lines += 1
            lm = _LAUNCHER_RANK_RE.match(text) or _PT_RANK_RE.search(text)
            if lm:
                r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))

    def _warn(self, proc: Proc | None, msg: str, *, src: str = "", info: bool = False) -> None:
        """Classify an NCCL WARN (or an INFO line that says the same) into an error or a warning."""
        msg = clean(msg)
        host = proc.host if proc is not None else None
        rank = proc.cur.rank if proc is not None and proc.cur is not None else None
        text = f"{host}: {msg}" if host else msg
        retrying = info and "retrying" in msg  # "Call to connect returned ..., retrying": not fatal itself
        for category, rx in _WARN_RULES if not retrying else ():
            if rx.search(msg):
                if category in ("ib-completion", "verbs"):
                    self.result.verbs_seen = True
                self._error(category, text, host, rank=rank, kind=warn_kind(msg), shown=msg)
                return
        kind = warn_kind(msg)
        self.result.group(self.result.warnings, kind, "warn", kind, self._ev(text, host, rank), host, rank,
                          text=msg[:240])

    def _error(self, category: str, text: str, host: str | None, *, kind: str, shown: str,
               rank: int | None = None) -> None:
        """Group one fatal message; the key holds what selects its fix (an IB completion's status)."""
        key: tuple = (category, kind)
        status = vendor = None
        if category == "ib-completion":
            m = re.search(r"(?:with status=|with error |status=)(?:\w+\()?(\d+)", text)
            v = re.search(r"vendor[ _]err(?:or)?[ =](\d+)", text)
            status, vendor = (m.group(1) if m else None), (v.group(1) if v else None)
            key = (category, kind, status)
        g = self.result.group(self.result.errors, key, category, kind, self._ev(text, host, rank), host, rank,
                              text=shown[:240])
        if status and "status" not in g.detail:
            g.detail["status"] = status
        if vendor and "vendor_err" not in g.detail:
            g.detail["vendor_err"] = vendor

    def _watchdog(self, text: str) -> None:
        m = _WATCHDOG_RE.search(text)
        seq, op = (m.group(1), m.group(2)) if m else ("?", "?")
        key = (op, seq)
        rm = _PT_RANK_RE.search(text)
        lm = _LAUNCHER_RANK_RE.match(text)
        rank = int(rm.group(1)) if rm else (int(next(g for g in lm.groups() if g)) if lm else None)
        if rank is not None:
            self.result.named_ranks.add(rank)
        g = self.result.group(self.result.watchdog, key, "watchdog", f"{op} SeqNum={seq}", self._ev(text),
                              None, rank)
        t = _TIMEOUT_RE.search(text)
        if t:
            g.detail["timeout_ms"] = t.group(1)
        pm = _PT_PG_RE.search(text)  # SeqNums count per process group: only one group's compare
        pg = pm.group(1) if pm else ""
        if g.detail.setdefault("pg", pg) != pg:
            g.detail["pg"] = "mixed"
        ran = _RANFOR_RE.search(text)
        if ran and int(ran.group(1)) > int(g.detail.get("ran_for_ms", 0)):
            g.detail["ran_for_ms"] = ran.group(1)

    def _nccl_tests_header(self, line: str) -> None:
        m = _NCCLTESTS_RANK_RE.match(line)
        if m:
            self.result.named_ranks.add(int(m.group(1)))

    def finish(self) -> ParseResult:
        """Hand channel lines that never met their communicator to one 'unidentified' comm."""
        if self._held is not None:
            self._flush_held()
        r = self.result
        loose = [p.cur.comm for p in r.procs.values() if p.cur is not None and p.cur.loose] + self._orphans
        if self._unidentified is not None:
            loose.append(self._unidentified)
        loose = [c for c in loose if c.intra or c.net or c.collnet or c.nvls or c.rank_host]
        if loose:
            target = r.comms.setdefault("unidentified", Comm("unidentified"))
            for c in loose:
                if c is not target:
                    target.merge(c)
        return r


# INFO messages that say nothing the diagnosis uses (Trees, Setting affinity, P2P Chunksize,
# threadThresholds, Init timings, Pattern): skipped in ``feed_all`` once their prefix is known.
_IGNORED_HEADS = frozenset({"Tr", "Se", "P2", "th", "In", "Pa"})

_INFO_DISPATCH = {
    "NCCL ": LogParser._nccl_word,
    "NET/I": LogParser._net_ib,
    "NET/S": LogParser._net_socket,
    "NET/P": LogParser._net_other,
    "NET/O": LogParser._net_other,
    "NET :": LogParser._net_socket,
    "NET/G": LogParser._net_other,
    "Boots": LogParser._bootstrap,
    "Using": LogParser._using,
    "Assig": LogParser._using,
    "Conne": LogParser._connected,
    "NVLS ": LogParser._nvls,
    "GPU D": LogParser._gpu,
    "[Serv": LogParser._service,
}


# --- public API ---------------------------------------------------------------------------------


def parse_lines(lines: Iterable[str], *, name: str = "<lines>") -> ParseResult:
    """Parse an iterable of text lines (line ends optional). Never raises on content."""
    p = LogParser()
    p.file = name
    n = 0

    def counted():
        nonlocal n
        for line in lines:
            n += 1
            yield line.rstrip("\r\n") if line.endswith(("\n", "\r")) else line

    p.feed_all(counted())
    p.end_source()
    p.result.lines = n
    p.result.sources.append({"name": name, "lines": n})
    return p.finish()


def parse_paths(paths: list) -> ParseResult:
    """Parse files, ``-`` (stdin), ``.gz`` files and directories (every log file inside, recursively;
    files that are evidently not logs, such as ``.json`` or ``.md``, are skipped and listed in ``skipped``).

    Raises ``InputError`` for a missing path, an empty directory or a named file that cannot be opened;
    unreadable files of a directory walk and damaged content are recorded in ``result.sources`` and
    become a finding instead.
    """
    p = LogParser()
    _check_dirs(paths)
    inputs = loglines.resolve_inputs(list(paths))
    p.result.skipped = inputs.skipped
    named = {os.fspath(x) for x in paths}
    for source in inputs.sources:
        stats = ReadStats()
        p.file, p.lineno = source.name, 0
        try:
            for block in loglines.read_blocks(source, stats):
                p.feed_all(block)
        except InputError as exc:
            if source.name in named:  # a file the user named: a one-line input error
                raise
            # one unreadable per-rank file of a directory must not hide the others: noted, read on
            stats.error = str(exc).removeprefix(f"{source.name}: ")
        except OSError as exc:
            stats.error = f"read error ({exc.strerror or exc})"
        p.end_source()
        p.result.lines += stats.lines
        entry = {"name": source.name, "lines": stats.lines, "bytes": stats.bytes}
        if stats.cut_lines:
            entry["cut_lines"] = stats.cut_lines
        if stats.error:
            entry["error"] = stats.error
        p.result.sources.append(entry)
    return p.finish()


def _check_dirs(paths: list) -> None:
    """A directory this user cannot list: say so (the walk would report it as holding no log files)."""
    for raw in map(os.fspath, paths):
        if raw != "-" and os.path.isdir(raw) and not os.access(raw, os.R_OK | os.X_OK):
            raise InputError(f"{raw}: cannot read directory: Permission denied")


def no_nccl_message(result: ParseResult) -> str:
    """The one-line input error for logs without a single NCCL line."""
    names = [s["name"] for s in result.sources]
    what = names[0] if len(names) == 1 else f"{len(names)} inputs"
    errors = [f"{s['name']}: {s['error']}" for s in result.sources if s.get("error")]
    if errors and result.lines == 0:
        return f"cannot read {errors[0]}"
    if result.lines == 0:
        return f"{what}: empty, no NCCL log lines (run the job with NCCL_DEBUG=INFO)"
    return (f"{what}: no NCCL log lines in {result.lines} lines (run the job with NCCL_DEBUG=INFO, "
            "and NCCL_DEBUG_FILE=/path/%h.%p.log to keep one file per process)")
