"""What the parser recognises NCCL lines by: the compiled regexes, the transport-token tables and the
small pure readers built on them (what sorts a fatal WARN into an error category: ``logs/errorrules.py``).

Every regex is compiled once, at import, and used only after a cheap substring test has picked the
line. Formats follow NCCL 2.0 to 2.30 (see ``reference/nccl-facts.md`` section A).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from nccl_doctor.logs.parse.reader import clean

KIND_CHARS = 160  # characters of a message that its grouping kind (``warn_kind``) is made from

# NCCL return codes (nccl.h) as they appear in "file.cc:NN -> N" traces.
RETCODES = {1: "ncclUnhandledCudaError", 2: "ncclSystemError", 3: "ncclInternalError",
            4: "ncclInvalidArgument", 5: "ncclInvalidUsage", 6: "ncclRemoteError", 8: "ncclTimeout"}
NCCL_IN_PROGRESS = 7  # ncclInProgress: counted, not an error
RETCODE_OK = "0"  # ncclSuccess, as a trace prints it: not counted
RETCODE_IN_PROGRESS = str(NCCL_IN_PROGRESS)  # as a trace prints it

# INFO messages that say nothing the diagnosis uses (Trees, Setting affinity, P2P Chunksize,
# threadThresholds, Init timings, Pattern): skipped in ``parser.feed_all`` once their prefix is known.
IGNORED_HEADS = frozenset({"Tr", "Se", "P2", "th", "In", "Pa"})

# host:pid:tid [dev] with an optional "file:line (func)" for WARN lines; anything before is a prefix.
PREFIX_RE = re.compile(
    r"(?:^|(?<=[\s>\])}`:|]))(?P<host>[^\s:\[\](){}<>`|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]"
    r"(?: (?P<src>\S+:\d+)(?: \([^)]*\))?)?\s*$"
)
PREFIX_FAST_RE = re.compile(r"(?P<host>[^\s:\[\](){}<>`|]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\]\Z")
LAUNCHER_RANK_RE = re.compile(r"^\s*(?:\[\d+,(\d+)\]<\w+>:|\[rank(\d+)\]:|(\d+): )")
MARK_RE = re.compile(
    r"(?:(?P<host>[^\s:\[\](){}<>`|/]+):\d+:\d+ )?\[\d+\] (?:\S+:\d+(?: \([^)]*\))? )?NCCL (?:INFO|WARN|ABORT|TRACE) "
)
MARK_WORDS = ("NCCL INFO ", "NCCL WARN ", "NCCL ABORT ", "NCCL TRACE ")
VERSION_RE = re.compile(r"NCCL version (\d+\.\d+\.\d+)([^\s+]*)(\+cuda[\d.]+)?")
VIA_RE = re.compile(
    r"^(?:Ring|Channel|CollNet|Coll|NVLS) \d+(?:/\d+)? : (\d+)(?:\[[0-9a-fA-Fx]*\])?"
    r"(?: -> (\d+)(?:\[[0-9a-fA-Fx]*\])?)?(?: \[(send|receive)\])? via (.+)$"
)
INDIRECT_RE = re.compile(r"/indirect/\d+(?:\[[0-9a-fA-F]*\])?")
NETTR_RE = re.compile(r"^(COLL)?NET/(.+?)/(\d+)(?:\((\d+)\))?(/GDRDMA)?")
COMM_RE = re.compile(r"\bcomm (0x[0-9a-fA-F]+|\(nil\)|[0-9a-fA-F]+) rank (\d+) nranks (\d+)", re.I)
FIELD_RE = re.compile(r"\b(commId|nNodes|localRanks) (0x[0-9a-fA-F]+|\d+)")
OLD_RANK_RE = re.compile(r"^rank (\d+) nranks (\d+)")
ALL_RANKS_RE = re.compile(r"^nranks (\d+)\s*$")  # 2.3-2.4 ncclCommInitAll: one process drives every GPU
# the two init lines of 2.19+, whole (see commlines.init_line): exactly what COMM_RE + FIELD_RE read from them
INIT_RANK_FAST_RE = re.compile(
    r"ncclCommInitRank comm (0x[0-9a-fA-F]+) rank (\d+) nranks (\d+) cudaDev \d+ nvmlDev \d+ busId [0-9a-fA-F]+"
    r" commId (0x[0-9a-fA-F]+) - Init (START|COMPLETE)\Z"
)
COMM_LINE_FAST_RE = re.compile(
    r"comm (0x[0-9a-fA-F]+) rank (\d+) nRanks (\d+) nNodes (\d+) localRanks (\d+) localRank \d+ MNNVL \d+\Z"
)
IBDEV_RE = re.compile(r"\[\d+\]\s*([\w.+-]+):(\d+)(?::-?\d*)*/(IB|RoCE|UNSPECIFIED)")
OOB_RE = re.compile(r"; OOB ([^:\s]+):")
IFACE_RE = re.compile(r"(?:\[\d+\])?([^\s:\[\]]+):(\S+?)<\d+>")
# 2.24+ bootstrap over the network plugin (NCCL_OOB_NET_ENABLE=1): "Bootstrap: Using mlx5_0:1" (device, port)
BOOT_NET_RE = re.compile(r"^Bootstrap ?: ?Using ([^\s:<>\[\]]+):(\d+)\s*$")
SETTING_RE = re.compile(r"^(\w+) set (?:by environment |from environment |)to (.*?)\s*$")
NETWORK_RE = re.compile(r"^(?:Using network|Using internal Network|Assigned NET plugin) (.+?)(?: to comm.*)?\s*$")
PLUGIN_RE = re.compile(r"Loaded (?:net|coll(?:Net)?) plugin (.+?)(?: \(v\d+\))?\s*$", re.I)
GDR_HCA_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for HCA (\d+|[0-9a-fx]+)(?: '([^']*)')?")
GDR_GPU_RE = re.compile(r"GPU Direct RDMA (Enabled|Disabled) for GPU")
RING_GDR_RE = re.compile(r"Connected all rings.*\bGDR (\d)")
NVLS_CHANNELS_RE = re.compile(r"(\d+) nvls channels")
OFI_PROVIDER_RE = re.compile(r"Selected [Pp]rovider is ([^\s,]+)")
TRACE_RE = re.compile(r"^[\w./-]+\.(?:cc|c|h|cu|cpp):\d+ -> (\d+)")
WATCHDOG_RE = re.compile(r"WorkNCCL\(SeqNum=(\d+), OpType=(\w+)")
TIMEOUT_RE = re.compile(r"Timeout\(ms\)=(\d+)")
RANFOR_RE = re.compile(r"ran for (\d+) milliseconds")
PT_RANK_RE = re.compile(r"\[(?:PG [^\]]*?)?Rank (\d+)\]")
PT_PG_RE = re.compile(r"\[PG (?:ID )?(\S+)")  # "[PG 0 Rank 3]" (2.3+), "[PG ID 0 PG GUID 0(default_pg) Rank 3]"
NCCLTESTS_RANK_RE = re.compile(r"^#\s+Rank\s+(\d+) (?:Group\s+\d+ )?Pid\s+\d+ on\s+(\S+)")
NCCL_ERROR_RE = re.compile(
    r"\b(nccl(?:InternalError|SystemError|RemoteError|InvalidUsage|InvalidArgument|UnhandledCudaError|Timeout)"
    r"|unhandled (?:system|cuda) error|remote process exited or there was a network error"
    r"|internal error - please report|NCCL communicator was aborted|Test NCCL failure"
    r"|NCCL error in:?|NCCL Error \d+|NCCL timeout in:|Heartbeat monitor timed out)",
)
LAST_ERROR_RE = re.compile(r"\b(nccl[A-Z]\w+: .+)$")
KIND_SUBS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\S+<\d+>"), "<addr>"),  # host<port> / ip<port>
    (re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), "<ip>"),
    (re.compile(r"(?:[0-9a-fA-F]{0,4}:){2,7}[0-9a-fA-F]{0,4}"), "<ip6>"),
    (re.compile(r"0x[0-9a-fA-F]+"), "0x#"),
    (re.compile(r"\d+"), "#"),
]

# Complete transport tokens (nccl-facts A.6) that a line cut mid-token can be a proper prefix of: the last
# line of a killed rank's NCCL_DEBUG_FILE ends "via NET/IB/0/GD" or "via P2P/CUMEM/re".
TOKENS = frozenset(
    [f"P2P/{k}{r}{ce}" for k in ("IPC", "CUMEM", "MNNVL") for r in ("", "/read") for ce in ("", "/CE")]
    + ["P2P/direct pointer", "P2P/direct pointer/read", "P2P/indirect", "P2P/indirect/read", "P2P/common device",
       "SHM/direct", "direct shared memory", "NET/", "COLLNET/"]
    + [f"SHM/{a}/{b}" for a in ("direct", "CE") for b in ("direct", "CE")]
)
NET_TAILS = ("/GDRDMA(PCI)/Shared", "/GDRDMA/Shared", "(PCI)/Shared", "/Shared")  # after NET/<name>/<dev>


def _cut_prefixes(complete: Iterable[str]) -> frozenset[str]:
    """Every proper prefix of the complete texts that is not complete itself: what a cut leaves."""
    return frozenset(t[:i] for t in complete for i in range(1, len(t))) - set(complete)


CUT_TOKENS = _cut_prefixes(TOKENS)
CUT_NET_TAILS = _cut_prefixes(NET_TAILS) - {"(PCI)", "/Shared"}


def cut_short(tr: str, nm: re.Match[str] | None) -> bool:
    """True for a transport token cut off mid-word (a proper prefix of a complete token and not one itself).

    Unknown tokens of future NCCL versions are not such prefixes and pass unchanged. Two set lookups: this
    runs for every channel line not seen before.
    """
    if nm is None:  # (a NET token without its device number is cut as well)
        return tr in CUT_TOKENS or tr.startswith(("NET/", "COLLNET/"))
    end = nm.end()
    if end == len(tr):
        return False
    rest = tr[end:]
    return rest in CUT_NET_TAILS or (rest[0] == "(" and ")" not in rest)


def field_number(text: str) -> int:
    """A field value as ``FIELD_RE`` admits it: decimal (leading zeros too) or 0x hex."""
    return int(text, 16) if text[:2].lower() == "0x" else int(text)



def parse_setting(msg: str) -> tuple[str, str] | None:
    """``NAME set by environment to VALUE`` as (NAME, VALUE); None for anything else."""
    m = SETTING_RE.match(clean(msg))
    if not m or not m.group(1).isupper():
        return None
    name, value = m.group(1), m.group(2)
    if value.endswith(".") and value[:-1].lstrip("-").isdigit():
        value = value[:-1]
    return name, value


def warn_kind(msg: str) -> str:
    """A message with addresses and numbers masked, so repeats of one problem group together."""
    text = msg[:KIND_CHARS]
    for rx, repl in KIND_SUBS:
        text = rx.sub(repl, text)
    return text.strip()
