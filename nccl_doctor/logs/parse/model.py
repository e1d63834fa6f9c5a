"""What the logs said, aggregated: the ``ParseResult`` the parser fills and the diagnosis reads.

Plain dataclasses (no torch, no I/O), slotted: a large job's log makes tens of thousands of them. State
grows with hosts, processes, ranks and communicators, never with the number of lines: every set and list
here is capped by one of the ``MAX_*`` constants, and so are the hosts, processes and communicators
themselves (``MAX_HOSTS``, ``MAX_PROCS``, ``MAX_COMMS``): a log is input anyone can write, and one that
names a million of them must not take gigabytes. Past a limit, what is new is counted in ``folded``
(``Folded``), not kept, and the report says so.

Adding a field (here, or an attribute of the parser)? Give it a merge rule in ``merge.py`` (``RESULT_RULES``,
``COMM_RULES``, ``GROUP_RULES``, ``PARSER_RULES``): how two ranges' values combine into what one sequential
pass would hold (a sum, a union, the first one, ...), and a check for when they cannot (a cap reached).
``parse --jobs N`` merges ranges parsed in parallel by these rules; tests/unit/logs/test_parallel_rules.py
fails for a field without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TypedDict, TypeVar, cast

from nccl_doctor.enums import StrEnum

MAX_EXAMPLES = 5  # evidence lines kept per group
MAX_GROUPS = 200  # distinct warning/error kinds kept (the rest is counted as "other")
MAX_SET = 4096  # hosts/ranks kept per group for "where"
MAX_TR_EVIDENCE = 4  # channel lines kept per transport and communicator
SHOWN_CHARS = 300  # characters of an evidence line a finding quotes
OTHER = "other"  # the group key and kind of every kind past MAX_GROUPS
UNKNOWN_HOST = "?"  # the host key of lines whose prefix names no host
MIXED_PG = "mixed"  # a watchdog group's "pg" detail when its lines name different process groups
OFI_PLUGIN = "aws-ofi-nccl"  # the net plugin of EFA, counted for NET/OFI lines
# Limits on what a log can make the parser keep (a 32,768-GPU job: 4,096 hosts, 32,768 processes, a few
# thousand communicators; bench_parse.py's log has 4,105). Past them, new ones are counted, not kept.
MAX_HOSTS = 65_536  # distinct hosts
MAX_PROCS = 262_144  # distinct processes (host:pid)
MAX_COMMS = 16_384  # distinct communicators
MAX_NAME_CHARS = 255  # a longer host name or communicator id is no name (DNS names stop at 253)
MAX_NAMES = 4096  # distinct names kept per table of names read from lines (settings, versions, networks)


class Folded(StrEnum):
    """Keys of ``ParseResult.folded``: what was past a limit, counted instead of kept."""

    HOSTS = "hosts"  # process prefixes of hosts past MAX_HOSTS (or of names past MAX_NAME_CHARS)
    PROCS = "processes"  # process prefixes past MAX_PROCS
    COMMS = "communicators"  # init lines of communicators past MAX_COMMS (or of ids past MAX_NAME_CHARS)


_V = TypeVar("_V")


class CappedCounter(Counter[str]):
    """A ``Counter`` of names read from lines that keeps at most ``MAX_NAMES`` of them: a new name past that is
    counted in ``dropped``, not kept (``c[name] += 1``, ``update`` and unpickling all go through
    ``__setitem__``)."""

    dropped = 0

    def __setitem__(self, key: str, value: int) -> None:
        if key not in self and len(self) >= MAX_NAMES:
            self.dropped += 1
            return
        super().__setitem__(key, value)


class CappedDict(dict[str, _V]):
    """A dict keyed by names read from lines that keeps at most ``MAX_NAMES`` of them (see ``CappedCounter``);
    ``setdefault`` of a name past that returns the default without keeping it."""

    dropped = 0

    def __setitem__(self, key: str, value: _V) -> None:
        if key not in self and len(self) >= MAX_NAMES:
            self.dropped += 1
            return
        super().__setitem__(key, value)

    def setdefault(self, key: str, default: _V) -> _V:
        if key in self:
            return self[key]
        self[key] = default
        return default


class Category(StrEnum):
    """What kind of message a ``Group`` holds: a fatal error's category, a warning, or a watchdog timeout."""

    IB_COMPLETION = "ib-completion"
    VERBS = "verbs"
    NO_INTERFACE = "no-interface"
    CONNECT = "connect"
    CUDA = "cuda"
    VERSION_MISMATCH = "version-mismatch"
    NCCL_ERROR = "nccl-error"
    WARN = "warn"  # a non-fatal NCCL WARN
    WATCHDOG = "watchdog"


class Fact(StrEnum):
    """Keys of ``ParseResult.facts``: a transport fact outside channel lines; the ``*_`` ones are
    prefixes, completed by what the line named (``f"{Fact.NETWORK_}{name}"``)."""

    IB_DEVICES = "ib-devices"
    SOCKET_IFACES = "socket-ifaces"
    RETCODE = "retcode"
    NVLS = "nvls"
    OFI_PLUGIN = "ofi-plugin"
    NETWORK_ = "network:"
    OFI_ = "ofi:"
    GDR_HCA_ = "gdr-hca:"
    GDR_GPU_ = "gdr-gpu:"
    RING_GDR_ = "ring-gdr:"
    PLUGIN_LINK_ = "plugin-link:"  # "plugin-link:<lower-case net name>/<link layer>": a plugin's own device list
    HINT_ = "hint:"  # a transport family an error line or trace shows (``evidence.transport_hint``)


class Tr(StrEnum):
    """The first element of a ``Comm.tr_first`` key: which counter of a ``Comm`` a channel line went to."""

    INTRA = "intra"
    NET = "net"
    COLLNET = "collnet"


# ("intra", token) / ("net" | "collnet", net name, GDR)
TransportKey = tuple[str, str] | tuple[str, str, bool]
# (host, peer rank, net name, GDR, side: "send", "receive" or "" where the line does not say)
NetKey = tuple[str | None, int | None, str, bool, str]


@dataclass(slots=True)
class Evidence:
    """A line as the user can find it again: file, line number, text (and who printed it, if known)."""

    file: str | None
    line: int | None
    text: str
    host: str | None = None
    rank: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}: " if self.file and self.line else ""
        return f"{where}{self.text[:SHOWN_CHARS]}"


@dataclass(slots=True)
class Group:
    """All occurrences of one kind of warning or error.

    ``kind`` is the grouping key (numbers and addresses masked, never shown to users); ``text`` is
    what the first occurrence really said, which messages quote.
    """

    category: Category
    kind: str
    text: str = ""
    count: int = 0
    first: Evidence | None = None
    examples: list[Evidence] = field(default_factory=list)
    hosts: set[str] = field(default_factory=set)
    ranks: set[int] = field(default_factory=set)
    detail: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
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
    rank_host: dict[int, str | None] = field(default_factory=dict)  # None: rank named, host not known yet
    intra: Counter[str] = field(default_factory=Counter)  # intra-node transport token -> connections
    net: Counter[NetKey] = field(default_factory=Counter)
    collnet: Counter[tuple[str, bool]] = field(default_factory=Counter)  # (net name, GDR) -> connections
    nvls: bool = False
    ring_gdr: set[int] = field(default_factory=set)  # from "Connected all rings, use ring PXN x GDR y"
    intra_src: set[int] = field(default_factory=set)  # ranks that sent over an intra-node transport (capped)
    first: Evidence | None = None
    # the first few channel lines per transport (``TransportKey``) -> [(peer rank, evidence)], so each
    # transport finding can quote a line that shows it
    tr_first: dict[TransportKey, list[tuple[int | None, Evidence]]] = field(default_factory=dict)

    @property
    def rank_per_node(self) -> bool:
        """NCCL counted each rank on a node of its own (``nNodes`` > 1 with ``localRanks 1``, or as many nodes
        as ranks): every connection between two ranks is inter-node, even where the hostnames match. NCCL
        tells nodes apart by its host hash (hostname plus boot id, or ``NCCL_HOSTID``), not by the name the
        log prints: containers or VMs that share a hostname, and ``NCCL_HOSTID`` runs, are separate nodes."""
        if self.nnodes is None or self.nnodes <= 1:
            return False
        return self.local_ranks == 1 or (self.nranks is not None and self.nnodes >= self.nranks)

    def merge(self, other: Comm) -> None:
        self.hosts |= other.hosts
        for r, h in other.rank_host.items():
            if self.rank_host.get(r) is None:
                self.rank_host[r] = h
        self.intra.update(other.intra)
        self.net.update(other.net)
        self.collnet.update(other.collnet)
        self.nvls = self.nvls or other.nvls
        self.ring_gdr |= other.ring_gdr
        self.intra_src |= other.intra_src
        self.first = self.first or other.first
        for key, evs in other.tr_first.items():
            mine = self.tr_first.setdefault(key, [])
            mine.extend(evs[:MAX_TR_EVIDENCE - len(mine)])


@dataclass(eq=False, slots=True)
class Membership:
    """One process in one communicator; ``seen`` holds channel-line tails already counted."""

    comm: Comm
    rank: int | None = None
    ptr: str | None = None
    started: bool = False  # an "Init START" line exists (2.18.3+): channel lines follow it
    loose: bool = False  # channel lines seen before any init line: the comm is not known yet
    seen: set[str] = field(default_factory=set)


@dataclass(eq=False, slots=True)
class Proc:
    """One NCCL process (``host:pid``)."""

    host: str
    pid: int
    version: str | None = None
    memberships: list[Membership] = field(default_factory=list)
    cur: Membership | None = None
    # The first WARN the catalog classes fatal since the process last went on, held until it goes on again (an
    # init completes: NCCL handled it, a warning) or the input ends (an error): a job is judged on its last
    # state. (file, line, rank, message, how many times that kind came): one per process, whatever the log.
    fatal_warn: tuple[str | None, int, int | None, str, int] | None = None


class _SourceEntry(TypedDict):
    name: str
    lines: int


class SourceEntry(_SourceEntry, total=False):
    """One input as the report's ``inputs`` list shows it."""

    bytes: int
    cut_lines: int
    error: str


ErrorKey = tuple[str, ...] | tuple[str, str, str | None]  # (category, kind[, IB completion status])
WatchdogKey = tuple[str, str]  # (op, SeqNum)
_K = TypeVar("_K", bound=Hashable)


@dataclass
class ParseResult:
    """Everything the logs said, aggregated; the diagnosis reads only this."""

    sources: list[SourceEntry] = field(default_factory=list)
    lines: int = 0
    nccl_lines: int = 0
    versions: CappedDict[set[str]] = field(default_factory=CappedDict)  # version -> "host:pid" (capped)
    version_first: CappedDict[Evidence] = field(default_factory=CappedDict)
    hosts: dict[str, set[int]] = field(default_factory=dict)
    host_max_dev: dict[str, int] = field(default_factory=dict)
    procs: dict[tuple[str, int], Proc] = field(default_factory=dict)
    comms: dict[str, Comm] = field(default_factory=dict)
    named_ranks: set[int] = field(default_factory=set)  # ranks named outside communicators
    networks: CappedCounter = field(default_factory=CappedCounter)  # "Using network X" and friends
    net_plugins: CappedCounter = field(default_factory=CappedCounter)
    ib_devices: dict[str, list[str]] = field(default_factory=dict)  # host -> ["mlx5_0:1/IB", ...]
    link_layers: CappedCounter = field(default_factory=CappedCounter)
    ib_no_device: dict[str, Evidence] = field(default_factory=dict)
    ib_sideband: set[str] = field(default_factory=set)
    socket_ifaces: dict[str, list[str]] = field(default_factory=dict)  # host -> ["eth0:10.0.0.1", ...]
    bootstrap_ifaces: dict[str, list[str]] = field(default_factory=dict)
    oob_ifaces: dict[str, str] = field(default_factory=dict)
    bootstrap_net: dict[str, str] = field(default_factory=dict)  # host -> "mlx5_0:1": 2.24+ bootstrap over a NET device
    settings: CappedDict[Counter[str]] = field(default_factory=CappedDict)
    gdr_hca: dict[str, set[str]] = field(default_factory=dict)  # "Enabled"/"Disabled" -> {"host/hca"}
    gdr_gpu: CappedCounter = field(default_factory=CappedCounter)
    ofi_providers: CappedCounter = field(default_factory=CappedCounter)
    nvls_available: bool = False
    warnings: dict[str, Group] = field(default_factory=dict)  # non-fatal NCCL WARN kinds
    errors: dict[ErrorKey, Group] = field(default_factory=dict)  # (category, kind[, what selects the fix])
    retcodes: Counter[int] = field(default_factory=Counter)  # "file.cc:NN -> N" error traces
    watchdog: dict[WatchdogKey, Group] = field(default_factory=dict)  # (op, seq)
    verbs_seen: bool = False  # IB verbs in use (completion/verbs errors)
    # first line of each transport fact outside channel lines (``Fact``) and who printed it
    facts: dict[str, Evidence] = field(default_factory=dict)
    fact_hosts: dict[str, set[str]] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)  # directory entries not read: evidently not logs
    folded: Counter[str] = field(default_factory=Counter)  # ``Folded`` -> how many were past their limit

    @property
    def has_nccl(self) -> bool:
        return self.nccl_lines > 0

    def group(self, table: dict[_K, Group], key: _K, category: Category, kind: str, ev: Evidence, *,
              host: str | None = None, rank: int | None = None, text: str = "") -> Group:
        """Count one occurrence in its group of ``table`` (made on first sight, "other" past MAX_GROUPS)."""
        g = table.get(key)
        if g is None:
            if len(table) >= MAX_GROUPS:
                key = cast(_K, (OTHER, OTHER) if isinstance(key, tuple) else OTHER)
                kind = OTHER
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
