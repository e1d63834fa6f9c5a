"""The per-message handlers of NCCL INFO lines other than init and channel lines: versions, settings,
networks and NICs, GPUDirect RDMA, NVLS, error traces. ``INFO_DISPATCH`` picks the handler by the
message's first five characters."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable

from nccl_doctor.logs.parse.commlines import loose_membership
from nccl_doctor.logs.parse.model import MAX_SET, OFI_PLUGIN, UNKNOWN_HOST, Fact, Proc
from nccl_doctor.logs.parse.patterns import (
    BOOT_NET_RE,
    GDR_GPU_RE,
    GDR_HCA_RE,
    IBDEV_RE,
    IFACE_RE,
    NETWORK_RE,
    NVLS_CHANNELS_RE,
    OFI_PROVIDER_RE,
    OOB_RE,
    PLUGIN_RE,
    RETCODE_IN_PROGRESS,
    RETCODE_OK,
    RING_GDR_RE,
    TRACE_RE,
    VERSION_RE,
    parse_setting,
)
from nccl_doctor.logs.parse.reader import clean
from nccl_doctor.logs.parse.state import ParserState, ev_at, fact, pending_trace, remember, warn
from nccl_doctor.logs.parse.warnsigns import retry_line, transport_hint

MAX_SETTING_VALUES = 64  # distinct values counted per NCCL setting


def numeric_info(st: ParserState, proc: Proc | None, msg: str) -> None:
    if "nvls channels" in msg:
        m = NVLS_CHANNELS_RE.search(msg)
        if m and int(m.group(1)) > 0:
            fact(st, Fact.NVLS, proc, msg)
        if m and int(m.group(1)) > 0 and proc is not None and proc.cur is not None:
            proc.cur.comm.nvls = True
        elif m and int(m.group(1)) > 0:
            loose_membership(st, proc).comm.nvls = True
    elif " -> " in msg:
        trace(st, proc, msg)


def trace(st: ParserState, proc: Proc | None, msg: str) -> None:
    m = TRACE_RE.match(msg)
    if m and m.group(1) != RETCODE_OK:
        st.result.retcodes[int(m.group(1))] += 1
        if m.group(1) != RETCODE_IN_PROGRESS:  # not an error
            fact(st, Fact.RETCODE, proc, msg)
            pending_trace(st, proc, int(m.group(1)))
            hint = transport_hint(msg)
            if hint is not None:
                fact(st, f"{Fact.HINT_}{hint}", proc, msg)


def setting(st: ParserState, msg: str) -> None:
    try:
        nv = st.settings[msg]
    except KeyError:
        nv = remember(st.settings, msg, parse_setting(msg))
    if nv is None:
        return
    name, value = nv
    c = st.result.settings.get(name)
    if c is None:  # (not setdefault: that builds a Counter per line)
        c = st.result.settings[name] = Counter()
    if value in c or len(c) < MAX_SETTING_VALUES:
        c[value] += 1


def version_line(st: ParserState, proc: Proc | None, msg: str) -> None:
    m = VERSION_RE.search(msg)
    if not m:
        return
    version = m.group(1) + m.group(2)
    r = st.result
    who = r.versions.setdefault(version, set())
    if version not in r.version_first:
        host = proc.host if proc is not None else None
        r.version_first[version] = ev_at(st, f"{host}: {msg}" if host else msg, host)
    if proc is not None:
        proc.version = version
        if len(who) < MAX_SET:
            who.add(f"{proc.host}:{proc.pid}")


def nccl_word(st: ParserState, proc: Proc | None, msg: str) -> None:
    if msg.startswith("NCCL version"):
        version_line(st, proc, msg)
    elif " set " in msg:
        setting(st, msg)


def net_ib(st: ParserState, proc: Proc | None, msg: str) -> None:
    r = st.result
    host = proc.host if proc is not None else UNKNOWN_HOST
    msg = clean(msg)
    if "Using" in msg and "/" in msg[6:] and IBDEV_RE.search(msg):
        if host not in r.ib_devices:  # the device list of a host already known is not read
            devs = [f"{d}:{p}/{ll}" for d, p, ll in IBDEV_RE.findall(msg)]
            r.ib_devices[host] = devs
            for d in devs:
                r.link_layers[d.rsplit("/", 1)[1]] += 1
            fact(st, Fact.IB_DEVICES, proc, msg)
        if host not in r.oob_ifaces:
            om = OOB_RE.search(msg)
            if om:
                r.oob_ifaces[host] = om.group(1)
    elif "No device found" in msg:
        if host not in r.ib_no_device:
            r.ib_no_device[host] = ev_at(st, f"{proc.host}: {msg}" if proc is not None else msg,
                                            proc.host if proc is not None else None)
    elif "sideband" in msg:
        r.ib_sideband.add(host)
    elif "GPU Direct RDMA" in msg:
        gdr(st, proc, msg)
    elif "Got completion" in msg or "failed" in msg:
        warn(st, proc, msg, info=True)


def gdr(st: ParserState, proc: Proc | None, msg: str) -> None:
    m = GDR_HCA_RE.search(msg)
    if m:
        host = proc.host if proc is not None else UNKNOWN_HOST
        st.result.gdr_hca.setdefault(m.group(1), set()).add(f"{host}/{m.group(3) or m.group(2)}")
        fact(st, f"{Fact.GDR_HCA_}{m.group(1)}", proc, msg)
        return
    m = GDR_GPU_RE.search(msg)
    if m:
        st.result.gdr_gpu[m.group(1)] += 1
        fact(st, f"{Fact.GDR_GPU_}{m.group(1)}", proc, msg)


def net_socket(st: ParserState, proc: Proc | None, msg: str) -> None:
    host = proc.host if proc is not None else UNKNOWN_HOST
    msg = clean(msg)
    if ": Using [" in msg or ":Using [" in msg or msg.startswith("NET : Using interface"):
        ifaces = [f"{i}:{a}" for i, a in IFACE_RE.findall(msg.split("Using", 1)[1])]
        if ifaces and host not in st.result.socket_ifaces:
            st.result.socket_ifaces[host] = ifaces
            fact(st, Fact.SOCKET_IFACES, proc, msg)
    elif "no interface found" in msg.lower():
        warn(st, proc, msg, info=True)


def net_other(st: ParserState, proc: Proc | None, msg: str) -> None:
    if msg.startswith("NET/IB"):
        net_ib(st, proc, msg)
    elif msg.startswith(("NET/Socket", "NET : Using")):
        net_socket(st, proc, msg)
    elif msg.startswith("NET/Plugin"):
        try:
            name = st.names[msg]
        except KeyError:
            m = PLUGIN_RE.search(clean(msg))
            name = remember(st.names, msg, m.group(1) if m else (
                "internal" if "internal" in msg or "No plugin found" in msg else None))
        if name is not None:
            st.result.net_plugins[name] += 1
    elif msg.startswith("NET/OFI"):
        st.result.net_plugins[OFI_PLUGIN] += 1
        fact(st, Fact.OFI_PLUGIN, proc, msg)  # quoted when the plugin did not start (no provider line)
        m = OFI_PROVIDER_RE.search(msg)
        if m:
            st.result.ofi_providers[m.group(1)] += 1
            fact(st, f"{Fact.OFI_}{m.group(1)}", proc, msg)
    elif "GPU Direct RDMA" in msg:
        gdr(st, proc, msg)


def bootstrap(st: ParserState, proc: Proc | None, msg: str) -> None:
    host = proc.host if proc is not None else UNKNOWN_HOST
    msg = clean(msg)
    if "Using" in msg:
        m = BOOT_NET_RE.match(msg)
        if m:  # 2.24+: the bootstrap runs over a network device (props.name:props.port), not a socket
            st.result.bootstrap_net.setdefault(host, f"{m.group(1)}:{m.group(2)}")  # the first per host
            return
        if host in st.result.bootstrap_ifaces:  # only the first list per host is kept
            return
        ifaces = [f"{i}:{a}" for i, a in IFACE_RE.findall(msg.split("Using", 1)[1])]
        if ifaces:
            st.result.bootstrap_ifaces[host] = ifaces
    elif "no socket interface" in msg.lower():
        warn(st, proc, msg, info=True)


def using(st: ParserState, proc: Proc | None, msg: str) -> None:
    try:
        name = st.names[msg]
    except KeyError:
        m = NETWORK_RE.match(clean(msg))
        name = remember(st.names, msg, m.group(1) if m else None)
    if name is not None:
        st.result.networks[name] += 1
        fact(st, f"{Fact.NETWORK_}{name}", proc, msg)


def connected(st: ParserState, proc: Proc | None, msg: str) -> None:
    m = RING_GDR_RE.search(msg)
    if m and proc is not None and proc.cur is not None:
        proc.cur.comm.ring_gdr.add(int(m.group(1)))
        fact(st, f"{Fact.RING_GDR_}{m.group(1)}", proc, msg)


def nvls(st: ParserState, proc: Proc | None, msg: str) -> None:
    if msg.startswith("NVLS comm"):
        fact(st, Fact.NVLS, proc, msg)
        if proc is not None and proc.cur is not None:
            proc.cur.comm.nvls = True
        else:
            loose_membership(st, proc).comm.nvls = True
    elif "multicast support is available" in msg:
        st.result.nvls_available = True


def gpu(st: ParserState, proc: Proc | None, msg: str) -> None:
    if "GPU Direct RDMA" in msg:
        gdr(st, proc, msg)


def service(st: ParserState, proc: Proc | None, msg: str) -> None:
    pass  # "[Service thread] Connection closed by localRank N": a consequence, never the cause


def socket_info(st: ParserState, proc: Proc | None, msg: str) -> None:
    """``socketPollConnect: connect to X returned E, retrying (N/M) ...`` (misc/socket.cc 2.27+)."""
    if retry_line(msg):
        warn(st, proc, msg, info=True)


def net_plugin_devices(st: ParserState, proc: Proc | None, msg: str) -> None:
    """``NET/<plugin> : Using [0]mlx5_bond_0:1/RoCE ...``: a net plugin built on IB verbs names its devices
    the way NET/IB does, with their link layer (plugins of NVIDIA's net_ib lineage print this line)."""
    r = st.result
    host = proc.host if proc is not None else UNKNOWN_HOST
    msg = clean(msg)
    if "Using" not in msg:
        return
    devs = [f"{d}:{p}/{ll}" for d, p, ll in IBDEV_RE.findall(msg)]
    if not devs:
        return
    name = msg[4:].split(":", 1)[0].strip().lower()
    for layer in {d.rsplit("/", 1)[1] for d in devs}:
        fact(st, f"{Fact.PLUGIN_LINK_}{name}/{layer}", proc, msg)
    if host not in r.ib_devices:
        r.ib_devices[host] = devs
        for d in devs:
            r.link_layers[d.rsplit("/", 1)[1]] += 1
        fact(st, Fact.IB_DEVICES, proc, msg)


Handler = Callable[[ParserState, "Proc | None", str], None]

INFO_DISPATCH: dict[str, Handler] = {
    "NCCL ": nccl_word,
    "NET/I": net_ib,
    "NET/S": net_socket,
    "NET/P": net_other,
    "NET/O": net_other,
    "NET :": net_socket,
    "NET/G": net_other,
    "Boots": bootstrap,
    "Using": using,
    "Assig": using,
    "Conne": connected,
    "NVLS ": nvls,
    "GPU D": gpu,
    "[Serv": service,
    "socke": socket_info,
}
# every other "NET/<plugin name>" line: a plugin's own device list
INFO_DISPATCH.update({f"NET/{c}": net_plugin_devices for c in string.ascii_letters
                      if f"NET/{c}" not in INFO_DISPATCH})
