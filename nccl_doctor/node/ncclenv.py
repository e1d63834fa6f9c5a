"""NCCL and Gloo environment semantics, exactly as the libraries read them (nccl-facts.md, section B).

Pure functions of strings, env mappings and probed interfaces: which interfaces NCCL's bootstrap and
socket transport will use, which HCA ports ``NCCL_IB_HCA`` selects, what Gloo binds, and how NCCL parses
integers (``strtoll``: ``true`` is 0), lists (``^`` exclude, ``=`` exact, prefixes) and ``nccl.conf`` files.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import pwd
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from nccl_doctor.enums import StrEnum
from nccl_doctor.node.fsreader import FsReader
from nccl_doctor.node.model import (
    ENVIRONMENT,
    VERBS_LINK_LAYERS,
    Family,
    GlooChoice,
    IbChoice,
    Interface,
    RdmaDevice,
    Setting,
    Settings,
    SocketChoice,
    loopback_name,
)

# Variables NCCL (2.4 .. 2.30) reads; used to spot typos. Not exhaustive: unknown names are only
# flagged when close to one of these.
KNOWN_NCCL_VARS = frozenset((
    "NCCL_ALGO", "NCCL_BUFFSIZE", "NCCL_CHECK_POINTERS", "NCCL_COLLNET_ENABLE", "NCCL_COLLNET_NODE_THRESHOLD",
    "NCCL_COMM_BLOCKING", "NCCL_COMM_ID", "NCCL_COMM_SPLIT_SHARE_RESOURCES", "NCCL_CONF_FILE", "NCCL_CROSS_NIC",
    "NCCL_CUMEM_ENABLE", "NCCL_CUMEM_HOST_ENABLE", "NCCL_DEBUG", "NCCL_DEBUG_FILE", "NCCL_DEBUG_SUBSYS",
    "NCCL_DEBUG_TIMESTAMP_FORMAT", "NCCL_DMABUF_ENABLE", "NCCL_GRAPH_DUMP_FILE", "NCCL_GRAPH_FILE",
    "NCCL_GRAPH_MIXING_SUPPORT", "NCCL_GRAPH_REGISTER", "NCCL_HOSTID", "NCCL_IB_ADAPTIVE_ROUTING",
    "NCCL_IB_ADDR_FAMILY", "NCCL_IB_ADDR_RANGE", "NCCL_IB_AR_THRESHOLD", "NCCL_IB_DISABLE", "NCCL_IB_ECE_ENABLE",
    "NCCL_IB_FIFO_TC", "NCCL_IB_GID_INDEX", "NCCL_IB_HCA", "NCCL_IB_MERGE_NICS", "NCCL_IB_MERGE_VFS",
    "NCCL_IB_MQP_RETRY_ALL", "NCCL_IB_OOO_RQ", "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_PKEY",
    "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_RETRY_CNT", "NCCL_IB_ROCE_VERSION_NUM", "NCCL_IB_ROUTABLE_FLID_GID_INDEX",
    "NCCL_IB_SL", "NCCL_IB_SPLIT_DATA_ON_QPS", "NCCL_IB_TC", "NCCL_IB_TIMEOUT", "NCCL_IB_USE_INLINE",
    "NCCL_IGNORE_CPU_AFFINITY", "NCCL_IGNORE_DISABLED_P2P", "NCCL_LAUNCH_MODE", "NCCL_LL128_BUFFSIZE",
    "NCCL_LL128_NTHREADS", "NCCL_LL_BUFFSIZE", "NCCL_LOCAL_REGISTER", "NCCL_MAX_CTAS", "NCCL_MAX_NCHANNELS",
    "NCCL_MAX_NRINGS", "NCCL_MAX_P2P_NCHANNELS", "NCCL_MIN_CTAS", "NCCL_MIN_NCHANNELS", "NCCL_MIN_NRINGS",
    "NCCL_MNNVL_ENABLE", "NCCL_NCHANNELS_PER_NET_PEER", "NCCL_NET", "NCCL_NET_DISABLE_INTRA", "NCCL_NET_FORCE_FLUSH",
    "NCCL_NET_GDR_C2C", "NCCL_NET_GDR_LEVEL", "NCCL_NET_GDR_READ", "NCCL_NET_MERGE_LEVEL", "NCCL_NET_OVERHEAD",
    "NCCL_NET_PLUGIN", "NCCL_NET_SHARED_BUFFERS", "NCCL_NET_SHARED_COMMS", "NCCL_NSOCKS_PERTHREAD", "NCCL_NTHREADS",
    "NCCL_NVB_DISABLE", "NCCL_NVLS_ENABLE", "NCCL_NVLS_NCHANNELS", "NCCL_OOB_NET_ENABLE", "NCCL_OOB_NET_IFNAME",
    "NCCL_P2P_DIRECT_DISABLE", "NCCL_P2P_DISABLE", "NCCL_P2P_LEVEL", "NCCL_P2P_LL_THRESHOLD", "NCCL_P2P_NET_CHUNKSIZE",
    "NCCL_P2P_NVL_CHUNKSIZE", "NCCL_P2P_PCI_CHUNKSIZE", "NCCL_P2P_READ_ENABLE", "NCCL_P2P_USE_CUDA_MEMCPY",
    "NCCL_PROFILER_PLUGIN", "NCCL_PROTO", "NCCL_PXN_DISABLE", "NCCL_RAS_ENABLE", "NCCL_RUNTIME_CONNECT",
    "NCCL_SET_STACK_SIZE", "NCCL_SET_THREAD_NAME", "NCCL_SHARP_DISABLE", "NCCL_SHM_DISABLE", "NCCL_SHM_LOCALITY",
    "NCCL_SHM_MEMCPY_MODE", "NCCL_SHM_USE_CUDA_MEMCPY", "NCCL_SOCKET_FAMILY", "NCCL_SOCKET_IFNAME",
    "NCCL_SOCKET_NTHREADS", "NCCL_SOCKET_POLL_TIMEOUT_MSEC", "NCCL_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_SLEEP_MSEC",
    "NCCL_TOPO_DUMP_FILE", "NCCL_TOPO_FILE", "NCCL_TUNER_PLUGIN", "NCCL_WORK_FIFO_DEPTH", "NCCL_WORK_FIFO_BYTES",
    "NCCL_WIN_ENABLE", "NCCL_CTA_POLICY", "NCCL_NVLS_CHUNKSIZE",
))

# What torch's Gloo backend reads from the environment.
KNOWN_GLOO_VARS = frozenset(("GLOO_SOCKET_IFNAME", "GLOO_DEVICE_TRANSPORT"))

# Integer parameters (NCCL_PARAM / strtoll): a non-integer silently parses as its numeric prefix or 0.
INT_VARS = frozenset((
    "NCCL_IB_DISABLE", "NCCL_P2P_DISABLE", "NCCL_SHM_DISABLE", "NCCL_IB_GID_INDEX", "NCCL_CROSS_NIC", "NCCL_IB_TIMEOUT",
    "NCCL_IB_RETRY_CNT", "NCCL_IB_SL", "NCCL_IB_TC", "NCCL_NET_GDR_READ", "NCCL_BUFFSIZE", "NCCL_LL_BUFFSIZE",
    "NCCL_LL128_BUFFSIZE", "NCCL_NSOCKS_PERTHREAD", "NCCL_SOCKET_NTHREADS", "NCCL_IGNORE_CPU_AFFINITY",
    "NCCL_RUNTIME_CONNECT", "NCCL_IB_MERGE_NICS", "NCCL_NET_GDR_C2C", "NCCL_DMABUF_ENABLE", "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS", "NCCL_NVLS_ENABLE", "NCCL_CUMEM_ENABLE", "NCCL_IB_QPS_PER_CONNECTION",
    "NCCL_IB_PCI_RELAXED_ORDERING", "NCCL_IB_ADAPTIVE_ROUTING", "NCCL_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_SLEEP_MSEC",
    "NCCL_IB_ROCE_VERSION_NUM", "NCCL_COLLNET_ENABLE", "NCCL_PXN_DISABLE", "NCCL_NVB_DISABLE",
    "NCCL_P2P_DIRECT_DISABLE", "NCCL_P2P_READ_ENABLE", "NCCL_OOB_NET_ENABLE", "NCCL_MNNVL_ENABLE",
    "NCCL_NET_SHARED_BUFFERS",
))

# Old PyTorch names (renamed with a TORCH_ prefix in torch 2.2) and names NCCL never reads.
DEPRECATED_TORCH = ("NCCL_ASYNC_ERROR_HANDLING", "NCCL_BLOCKING_WAIT", "NCCL_DESYNC_DEBUG", "NCCL_ENABLE_TIMING")
NOT_READ = {"NCCL_TIMEOUT": "NCCL has no collective timeout; set init_process_group(timeout=...) in PyTorch"}

GDR_LEVEL_NAMES = ("LOC", "NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS")
GDR_LEVEL_INTS = {0: "LOC", 1: "PIX", 2: "PXB", 3: "PHB", 4: "SYS"}
DEBUG_LEVELS = ("VERSION", "WARN", "INFO", "TRACE", "ABORT")
KNOWN_PLUGIN_NETS = ("libfabric", "aws libfabric", "ibext", "ucx", "ucx-rma", "gib", "gpudirecttcpx", "fastrak")
# Plugins that drive IB/RoCE ports through verbs (nccl-rdma-sharp-plugins) and the EFA one (aws-ofi-nccl).
RDMA_PLUGIN_NETS = ("ibext", "ucx", "ucx-rma")
EFA_PLUGIN_NETS = ("libfabric", "aws libfabric")
# Names people write for a network NCCL calls otherwise; NCCL knows none of them, so init fails.
NET_ALIASES = {"tcp": "Socket", "sockets": "Socket", "ethernet": "Socket", "eth": "Socket", "ip": "Socket",
               "roce": "IB", "infiniband": "IB", "rdma": "IB", "verbs": "IB", "efa": "Libfabric"}


# ---------------------------------------------------------------------------------------------------
# Scalars
# ---------------------------------------------------------------------------------------------------

_C_INT = re.compile(r"^\s*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)")


def parse_c_int(text: str) -> tuple[int, bool]:
    """``strtoll(text, NULL, 0)``: (value, whole string was a number). ``"true"`` -> (0, False);
    ``"0x10"`` -> (16, True); ``"010"`` -> (8, True); ``"2 "`` -> (2, False)."""
    m = _C_INT.match(text)
    if not m:
        return 0, False
    sign, digits = m.groups()
    if digits.lower().startswith("0x"):
        value = int(digits, 16)
    elif digits.startswith("0") and len(digits) > 1:
        value = int(digits, 8)
    else:
        value = int(digits)
    return (-value if sign == "-" else value), m.end() == len(text)


class NetKind(StrEnum):
    """What an ``NCCL_NET`` value names."""

    IB = "ib"
    SOCKET = "socket"
    PLUGIN = "plugin"  # a known plugin's name
    TYPO = "typo"  # a built-in network misspelt: init fails
    UNKNOWN = "unknown"  # init fails unless an installed plugin registers it


BUILTIN_NETS = {"ib": "IB", "socket": "Socket"}  # lower case -> NCCL's spelling
NET_TYPO_CUTOFF = 0.75  # difflib ratio from which a name is taken for a misspelt built-in


@dataclass(frozen=True)
class NetName:
    """How NCCL reads ``NCCL_NET`` (``strcasecmp`` against each network's name, 2.13+)."""

    value: str
    kind: NetKind
    meant: str | None = None  # for TYPO: the name NCCL calls the network

    @property
    def plugin(self) -> str | None:
        """The known plugin family (``ibext``, ``ucx``, ``libfabric``...) for kind PLUGIN."""
        low = self.value.lower()
        return next((p for p in sorted(KNOWN_PLUGIN_NETS, key=len, reverse=True)
                     if low == p or (p == "ibext" and low.startswith("ibext_v"))), None)


def classify_net(value: str) -> NetName:
    """Built-in (``IB``, ``Socket``), a known plugin name, a likely mistake, or an unknown name."""
    low = value.lower()
    if low == "ib":
        return NetName(value, NetKind.IB)
    if low == "socket":
        return NetName(value, NetKind.SOCKET)
    if NetName(value, NetKind.PLUGIN).plugin:
        return NetName(value, NetKind.PLUGIN)
    if low.strip() in NET_ALIASES:
        return NetName(value, NetKind.TYPO, NET_ALIASES[low.strip()])
    close = difflib.get_close_matches(low.strip(), list(BUILTIN_NETS), n=1, cutoff=NET_TYPO_CUTOFF)
    if close:
        return NetName(value, NetKind.TYPO, BUILTIN_NETS[close[0]])
    return NetName(value, NetKind.UNKNOWN)


# ---------------------------------------------------------------------------------------------------
# Interface / HCA lists (parseStringList + matchIfList)
# ---------------------------------------------------------------------------------------------------


ANY_PORT = -1


@dataclass(frozen=True)
class IfList:
    exclude: bool
    exact: bool
    entries: tuple[tuple[str, int], ...]  # (prefix, port); port ANY_PORT = any


def parse_if_list(value: str) -> IfList:
    """``[^][=]a[:port],b...``; ``^`` must come before ``=`` (``=^x`` is the literal prefix ``^x``)."""
    s, exclude, exact = value, False, False
    if s.startswith("^"):
        exclude, s = True, s[1:]
    if s.startswith("="):
        exact, s = True, s[1:]
    entries: list[tuple[str, int]] = []
    for item in s.split(","):
        if not item:
            continue
        name, _, rest = item.partition(":")
        port = ANY_PORT
        if rest:
            p, _ok = parse_c_int(rest.split(":")[0])
            port = p
        entries.append((name, port))
    return IfList(exclude, exact, tuple(entries))


def _match_one(name: str, prefix: str, exact: bool) -> bool:
    return name == prefix if exact else name.startswith(prefix)


def match_if_list(name: str, port: int, lst: IfList) -> bool:
    """True when NCCL keeps ``name`` (and ``port``; ANY_PORT = any) under ``lst`` (exclusion applied)."""
    if not lst.entries:
        hit = True  # NCCL: an empty user list matches everything
    else:
        hit = any(_match_one(name, p, lst.exact) and (ANY_PORT in (pp, port) or pp == port)
                  for p, pp in lst.entries)
    return hit != lst.exclude


def overmatching_prefixes(lst: IfList, names: Iterable[str]) -> dict[str, list[str]]:
    """Prefix entries that also match longer names (``eth1`` -> ``eth10``) when the exact name exists."""
    names = list(names)
    out: dict[str, list[str]] = {}
    if lst.exact:
        return out
    for prefix, _port in lst.entries:
        hits = [n for n in names if n.startswith(prefix)]
        if prefix in names and len(hits) > 1:
            out[prefix] = hits
    return out


# ---------------------------------------------------------------------------------------------------
# Effective settings: environment, then NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf
# ---------------------------------------------------------------------------------------------------


def parse_conf(text: str) -> list[tuple[str, str]]:
    """``NAME=VALUE`` pairs taken verbatim, like NCCL's ``setEnvFile`` (see ``parse_conf_lines``)."""
    return [(name, value) for name, value, _n in parse_conf_lines(text)]


def parse_conf_lines(text: str) -> list[tuple[str, str, int]]:
    """(name, value, line number) as NCCL's ``setEnvFile`` reads them: ``getline`` then only the trailing
    ``\\n`` is cut (a CRLF file leaves ``\\r`` in every value), ``#`` is a comment only in column 0, the name
    is everything before the first ``=`` (spaces kept) and the value everything after (quotes kept).
    An indented ``#`` line sets a variable named ``  #NAME`` that nothing reads: skipped as a no-op."""
    out = []
    for n, line in enumerate(text.split("\n"), 1):
        if not line or line[0] == "#" or "=" not in line:
            continue
        name, _, value = line.partition("=")
        if name and not name.lstrip().startswith("#"):
            out.append((name, value, n))
    return out


CONF_PREFIX = "NCCL_"  # the only conf lines the probe reads, reports and snapshots


def nccl_lines(text: str) -> str:
    """``text`` with every line but ``NCCL_*=...`` ones blanked (line numbers kept). NCCL's setEnvFile would
    ``setenv`` any ``NAME=VALUE`` (param.cc, no filter), but only NCCL_ variables are its business and
    ours: ``NCCL_CONF_FILE`` may name any readable file (a token file, a key), and none of its other lines
    may reach a report or a snapshot."""
    return "\n".join(line if _sets_nccl_variable(line) else "" for line in text.split("\n"))


def _sets_nccl_variable(line: str) -> bool:
    name, eq, _ = line.partition("=")
    return bool(eq) and not line.startswith("#") and name.strip().startswith(CONF_PREFIX)


def user_conf_path(env: Mapping[str, str], fs: FsReader) -> str | None:
    """``~/.nccl.conf`` as NCCL finds it: the home directory of ``getpwuid(getuid())``, not ``$HOME``.
    Only the live root has that passwd entry; under a snapshot root ``$HOME`` is the best guess."""
    home = None
    if fs.live:
        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:  # no passwd entry: NCCL reads no user file
            return None
    home = home or env.get("HOME")
    return home.rstrip("/") + "/.nccl.conf" if home else None


SETTING_PREFIXES = ("NCCL_", "GLOO_", "TORCH_NCCL_", "TP_SOCKET")  # what the probe records from the environment
OWN_PREFIX = "NCCL_DOCTOR_"  # this tool's own variables (its store secret among them): not NCCL's, never shown
SYSTEM_CONF = "/etc/nccl.conf"


def effective_settings(env: Mapping[str, str], fs: FsReader | None) -> Settings:
    """What NCCL sees after ``initEnv``: the real environment wins (``setenv(..., 0)``)."""
    settings = Settings()
    for k, v in env.items():
        if k.startswith(SETTING_PREFIXES) and not k.startswith(OWN_PREFIX):
            settings.values[k] = Setting(k, v, ENVIRONMENT)
    if fs is None:
        return settings
    files = []
    user_conf = None if env.get("NCCL_CONF_FILE") else user_conf_path(env, fs)
    if env.get("NCCL_CONF_FILE"):
        files.append(env["NCCL_CONF_FILE"])
    elif user_conf:
        files.append(user_conf)
    files.append(SYSTEM_CONF)
    for path in files:
        text = fs.read(path)
        if text is None:
            if path == env.get("NCCL_CONF_FILE"):
                settings.missing_conf_file = path
            continue
        settings.conf_files.append(path)
        text = nccl_lines(text)
        fs.redact(path, text)  # a snapshot keeps only these lines too
        for name, value, line in parse_conf_lines(text):
            if name not in settings.values:  # setenv(..., 0): the first definition wins
                settings.values[name] = Setting(name, value, path, line)
            else:  # back as soon as the winner is unset: fixes must say so
                settings.shadowed.setdefault(name, []).append(Setting(name, value, path, line))
    return settings


NAME_TYPO_CUTOFF = 0.85  # difflib ratio from which an unknown name is taken for a typo of a known one


def did_you_mean(name: str) -> str | None:
    """The known NCCL (or Gloo) variable ``name`` is probably a typo of, if any."""
    known = KNOWN_GLOO_VARS if name.startswith("GLOO_") else KNOWN_NCCL_VARS
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=1, cutoff=NAME_TYPO_CUTOFF)
    return close[0] if close else None


def gdr_level(value: str) -> str | None:
    """The level NCCL applies, or None when it ignores the value (names are case-sensitive)."""
    if value in GDR_LEVEL_NAMES:
        return value
    n, ok = parse_c_int(value)
    if ok and n >= 0:
        return GDR_LEVEL_INTS.get(n, "SYS")
    return None


# ---------------------------------------------------------------------------------------------------
# What NCCL and Gloo will pick
# ---------------------------------------------------------------------------------------------------

MAX_SOCKET_IFS = 16
SOCKET_FAMILIES = {"AF_INET": Family.INET, "AF_INET6": Family.INET6}  # NCCL_SOCKET_FAMILY
IB_RULE = ("default: names starting with ib", "ib")
# After IB names and NCCL_COMM_ID's subnet: (rule, the list NCCL matches), in NCCL's order.
DEFAULT_RULES = (("default: any except docker*, lo*, virbr*", "^docker,lo,virbr"), ("default: docker*", "docker"),
                 ("default: lo*", "lo"), ("default: virbr*", "virbr"))
Candidates = list[tuple[Interface, str]]  # (interface, its first address) in getifaddrs() order


def _candidates(ifaces: list[Interface], family: Family | None) -> Candidates:
    """getifaddrs() order: interfaces by their first IPv4 address, then IPv6-only ones."""
    out: Candidates = []
    seen: set[int] = set()  # ids of the interfaces in ``out``: one look-up each, not a scan
    for fam in (Family.INET, Family.INET6):
        if family and fam != family:
            continue
        for i in ifaces:
            addrs = [a for a in i.addresses if a.family == fam and a.address != "::1"]
            if addrs and id(i) not in seen:
                seen.add(id(i))
                out.append((i, addrs[0].address))
    return out


def _find(cands: Candidates, lst: IfList, *, running_only: bool) -> tuple[list[str], list[str]]:
    hit = [i for i, _ in cands if match_if_list(i.name, ANY_PORT, lst)]
    ok = [i.name for i in hit if i.running or not running_only]
    return ok[:MAX_SOCKET_IFS], [i.name for i in hit if not i.running]


def _in_subnet(cands: Candidates, comm_id: str) -> list[str]:
    host = comm_id.rsplit(":", 1)[0].strip("[]")
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return []
    for i, _ in cands:
        for a in i.addresses:
            if a.prefixlen is not None and ip in ipaddress.ip_network(f"{a.address}/{a.prefixlen}", strict=False):
                return [i.name]
    return []


def nccl_socket_ifaces(ifaces: list[Interface], settings: Settings) -> SocketChoice:
    """NCCL's interface choice (``ncclFindInterfaces``, 2.28+ semantics: interfaces must be running)."""
    fam = SOCKET_FAMILIES.get(settings.get("NCCL_SOCKET_FAMILY") or "")
    cands = _candidates(ifaces, fam)
    value = settings.get("NCCL_SOCKET_IFNAME")
    if value is not None and len(value) > 1:
        got, down = _find(cands, parse_if_list(value), running_only=True)
        return SocketChoice(got, "NCCL_SOCKET_IFNAME", value, matched_not_running=down)
    ignored = value  # one character: NCCL ignores it
    rule, spec = IB_RULE
    got, _ = _find(cands, parse_if_list(spec), running_only=True)
    if got:
        return SocketChoice(got, rule, None, ignored)
    comm_id = settings.get("NCCL_COMM_ID")
    got = _in_subnet(cands, comm_id) if comm_id else []
    if got:
        return SocketChoice(got, "default: same subnet as NCCL_COMM_ID", None, ignored)
    for rule, spec in DEFAULT_RULES:
        got, _ = _find(cands, parse_if_list(spec), running_only=True)
        if got:
            return SocketChoice(got, rule, None, ignored)
    return SocketChoice([], "default: no interface", None, ignored)


def _natural(name: str) -> list[int | str]:
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def nccl_ib_ports(devices: list[RdmaDevice], settings: Settings) -> IbChoice:
    """Ports NCCL's internal IB transport opens: ACTIVE, link layer IB or Ethernet, kept by NCCL_IB_HCA.
    ``NCCL_NET=Socket`` (or a misspelt built-in name) turns IB off; a plugin name hands the data to that
    plugin instead: the RDMA plugins (IBext, UCX) open the same ports, the others none of them."""
    usable = [f"{d.name}:{p.port}" for d in sorted(devices, key=lambda d: _natural(d.name)) for p in d.ports
              if p.active and p.link_layer in VERBS_LINK_LAYERS]
    off: list[tuple[str, str]] = []
    dis = settings.get("NCCL_IB_DISABLE")
    if dis is not None and parse_c_int(dis)[0] != 0:
        off.append(("NCCL_IB_DISABLE", dis))
    net = settings.get("NCCL_NET")
    name = classify_net(net) if net is not None else None
    if net is not None and name is not None and name.kind in (NetKind.SOCKET, NetKind.TYPO):
        off.append(("NCCL_NET", net))
    plugin = name if name is not None and name.kind in (NetKind.PLUGIN, NetKind.UNKNOWN) else None
    hca = settings.get("NCCL_IB_HCA")
    selected = usable
    if hca:
        lst = parse_if_list(hca)
        selected = [p for p in usable if match_if_list(p.split(":")[0], int(p.split(":")[1]), lst)]
    rdma_plugin = plugin is None or plugin.plugin in RDMA_PLUGIN_NETS
    ports = selected if not off and rdma_plugin else []
    disabled = " and ".join(f"{n}={show(v)}" for n, v in off) or None
    return IbChoice(ports=ports, usable=usable, disabled_by=disabled, hca_value=hca,
                    disablers=tuple(n for n, _ in off), selected=selected, plugin=plugin.value if plugin else None)


_FIRST_PRINTABLE, _DEL = 0x20, "\x7f"


def show(value: str) -> str:
    """A value as the user should see it: quoted (``'ib0 '``, ``'bond0\\r'``) when it holds whitespace at
    either end or control characters, which NCCL keeps and which make names match nothing."""
    if value == "" or value != value.strip() or any(ord(c) < _FIRST_PRINTABLE or c == _DEL for c in value):
        return repr(value)
    return value


def hosts_lookup(etc_hosts: str | None, hostname: str) -> str | None:
    """The first /etc/hosts address naming ``hostname`` (as getaddrinfo with files first would)."""
    for line in (etc_hosts or "").splitlines():
        fields = line.split("#", 1)[0].split()
        if len(fields) >= 2 and hostname in fields[1:]:
            return fields[0]
    return None


def gloo_ifaces(ifaces: list[Interface], settings: Settings, hostname: str, etc_hosts: str | None, *,
                addresses_known: bool = True) -> GlooChoice:
    """torch's Gloo device: GLOO_SOCKET_IFNAME exact names, else the address the hostname resolves to,
    falling back to loopback when that address is not local. With the addresses unknown (a snapshot
    without its address files) only a name that is not here is missing, and no address is called foreign."""
    by_name = {i.name: i for i in ifaces}
    value = settings.get("GLOO_SOCKET_IFNAME")
    if value:
        names = [n for n in value.split(",") if n]
        missing = [n for n in names if n not in by_name or (addresses_known and not by_name[n].addresses)]
        down = [n for n in names if n in by_name and not by_name[n].running]
        first = next((by_name[n].addresses[0].address for n in names if n not in missing and by_name[n].addresses),
                     None)
        return GlooChoice(names, first, "GLOO_SOCKET_IFNAME", missing, down)
    addr = hosts_lookup(etc_hosts, hostname)
    if addr is None:
        return GlooChoice([], None, f"hostname {hostname!r} is not in /etc/hosts (resolved by DNS; not checked)")
    owner = _owner(ifaces, addr)
    if owner is None and not addresses_known:
        return GlooChoice([], addr, f"hostname {hostname!r} -> {addr} (/etc/hosts); the interface holding it is "
                          "unknown (address files missing)")
    if owner is None:
        return GlooChoice([loopback_name(ifaces) or "lo"], "127.0.0.1",
                          f"hostname {hostname!r} -> {addr}, not a local address: loopback fallback")
    return GlooChoice([owner], addr, f"hostname {hostname!r} -> {addr} (/etc/hosts)")


def _owner(ifaces: list[Interface], addr: str) -> str | None:
    try:
        ip = ipaddress.ip_address(addr)
    except ValueError:
        return None
    if ip.is_loopback:
        return loopback_name(ifaces) or "lo"
    for i in ifaces:
        if any(ipaddress.ip_address(a.address) == ip for a in i.addresses):
            return i.name
    return None
