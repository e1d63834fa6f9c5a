"""The per-message handlers of NCCL INFO lines other than init and channel lines: versions, settings,
networks and NICs, GPUDirect RDMA, NVLS, error traces. ``INFO_DISPATCH`` picks the handler by the
message's first five characters."""

from __future__ import annotations

import string
from collections import Counter
from collections.abc import Callable

from nccl_doctor.logs.parse.commlines import CommLines
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
from nccl_doctor.logs.parse.warnsigns import retry_line, transport_hint

MAX_SETTING_VALUES = 64  # distinct values counted per NCCL setting


class InfoLines(CommLines):
    """Handlers of INFO messages by kind; each takes the printing process (or None) and the message."""

    def _numeric_info(self, proc: Proc | None, msg: str) -> None:
        if "nvls channels" in msg:
            m = NVLS_CHANNELS_RE.search(msg)
            if m and int(m.group(1)) > 0:
                self._fact(Fact.NVLS, proc, msg)
            if m and int(m.group(1)) > 0 and proc is not None and proc.cur is not None:
                proc.cur.comm.nvls = True
            elif m and int(m.group(1)) > 0:
                self._loose(proc).comm.nvls = True
        elif " -> " in msg:
            self._trace(proc, msg)

    def _trace(self, proc: Proc | None, msg: str) -> None:
        m = TRACE_RE.match(msg)
        if m and m.group(1) != RETCODE_OK:
            self.result.retcodes[int(m.group(1))] += 1
            if m.group(1) != RETCODE_IN_PROGRESS:  # not an error
                self._fact(Fact.RETCODE, proc, msg)
                self._pending_trace(proc, int(m.group(1)))
                hint = transport_hint(msg)
                if hint is not None:
                    self._fact(f"{Fact.HINT_}{hint}", proc, msg)

    def _setting(self, msg: str) -> None:
        try:
            nv = self._settings[msg]
        except KeyError:
            nv = self._remember(self._settings, msg, parse_setting(msg))
        if nv is None:
            return
        name, value = nv
        c = self.result.settings.get(name)
        if c is None:  # (not setdefault: that builds a Counter per line)
            c = self.result.settings[name] = Counter()
        if value in c or len(c) < MAX_SETTING_VALUES:
            c[value] += 1

    def _version(self, proc: Proc | None, msg: str) -> None:
        m = VERSION_RE.search(msg)
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
        host = proc.host if proc is not None else UNKNOWN_HOST
        msg = clean(msg)
        if "Using" in msg and "/" in msg[6:] and IBDEV_RE.search(msg):
            if host not in r.ib_devices:  # the device list of a host already known is not read
                devs = [f"{d}:{p}/{ll}" for d, p, ll in IBDEV_RE.findall(msg)]
                r.ib_devices[host] = devs
                for d in devs:
                    r.link_layers[d.rsplit("/", 1)[1]] += 1
                self._fact(Fact.IB_DEVICES, proc, msg)
            if host not in r.oob_ifaces:
                om = OOB_RE.search(msg)
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
        m = GDR_HCA_RE.search(msg)
        if m:
            host = proc.host if proc is not None else UNKNOWN_HOST
            self.result.gdr_hca.setdefault(m.group(1), set()).add(f"{host}/{m.group(3) or m.group(2)}")
            self._fact(f"{Fact.GDR_HCA_}{m.group(1)}", proc, msg)
            return
        m = GDR_GPU_RE.search(msg)
        if m:
            self.result.gdr_gpu[m.group(1)] += 1
            self._fact(f"{Fact.GDR_GPU_}{m.group(1)}", proc, msg)

    def _net_socket(self, proc: Proc | None, msg: str) -> None:
        host = proc.host if proc is not None else UNKNOWN_HOST
        msg = clean(msg)
        if ": Using [" in msg or ":Using [" in msg or msg.startswith("NET : Using interface"):
            ifaces = [f"{i}:{a}" for i, a in IFACE_RE.findall(msg.split("Using", 1)[1])]
            if ifaces and host not in self.result.socket_ifaces:
                self.result.socket_ifaces[host] = ifaces
                self._fact(Fact.SOCKET_IFACES, proc, msg)
        elif "no interface found" in msg.lower():
            self._warn(proc, msg, info=True)

    def _net_other(self, proc: Proc | None, msg: str) -> None:
        if msg.startswith("NET/IB"):
            self._net_ib(proc, msg)
        elif msg.startswith(("NET/Socket", "NET : Using")):
            self._net_socket(proc, msg)
        elif msg.startswith("NET/Plugin"):
            try:
                name = self._names[msg]
            except KeyError:
                m = PLUGIN_RE.search(clean(msg))
                name = self._remember(self._names, msg, m.group(1) if m else (
                    "internal" if "internal" in msg or "No plugin found" in msg else None))
            if name is not None:
                self.result.net_plugins[name] += 1
        elif msg.startswith("NET/OFI"):
            self.result.net_plugins[OFI_PLUGIN] += 1
            self._fact(Fact.OFI_PLUGIN, proc, msg)  # quoted when the plugin did not start (no provider line)
            m = OFI_PROVIDER_RE.search(msg)
            if m:
                self.result.ofi_providers[m.group(1)] += 1
                self._fact(f"{Fact.OFI_}{m.group(1)}", proc, msg)
        elif "GPU Direct RDMA" in msg:
            self._gdr(proc, msg)

    def _bootstrap(self, proc: Proc | None, msg: str) -> None:
        host = proc.host if proc is not None else UNKNOWN_HOST
        msg = clean(msg)
        if "Using" in msg:
            m = BOOT_NET_RE.match(msg)
            if m:  # 2.24+: the bootstrap runs over a network device (props.name:props.port), not a socket
                self.result.bootstrap_net.setdefault(host, f"{m.group(1)}:{m.group(2)}")  # the first per host
                return
            if host in self.result.bootstrap_ifaces:  # only the first list per host is kept
                return
            ifaces = [f"{i}:{a}" for i, a in IFACE_RE.findall(msg.split("Using", 1)[1])]
            if ifaces:
                self.result.bootstrap_ifaces[host] = ifaces
        elif "no socket interface" in msg.lower():
            self._warn(proc, msg, info=True)

    def _using(self, proc: Proc | None, msg: str) -> None:
        try:
            name = self._names[msg]
        except KeyError:
            m = NETWORK_RE.match(clean(msg))
            name = self._remember(self._names, msg, m.group(1) if m else None)
        if name is not None:
            self.result.networks[name] += 1
            self._fact(f"{Fact.NETWORK_}{name}", proc, msg)

    def _connected(self, proc: Proc | None, msg: str) -> None:
        m = RING_GDR_RE.search(msg)
        if m and proc is not None and proc.cur is not None:
            proc.cur.comm.ring_gdr.add(int(m.group(1)))
            self._fact(f"{Fact.RING_GDR_}{m.group(1)}", proc, msg)

    def _nvls(self, proc: Proc | None, msg: str) -> None:
        if msg.startswith("NVLS comm"):
            self._fact(Fact.NVLS, proc, msg)
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

    def _socket_info(self, proc: Proc | None, msg: str) -> None:
        """``socketPollConnect: connect to X returned E, retrying (N/M) ...`` (misc/socket.cc 2.27+)."""
        if retry_line(msg):
            self._warn(proc, msg, info=True)

    def _net_plugin_devices(self, proc: Proc | None, msg: str) -> None:
        """``NET/<plugin> : Using [0]mlx5_bond_0:1/RoCE ...``: a net plugin built on IB verbs names its devices
        the way NET/IB does, with their link layer (plugins of NVIDIA's net_ib lineage print this line)."""
        r = self.result
        host = proc.host if proc is not None else UNKNOWN_HOST
        msg = clean(msg)
        if "Using" not in msg:
            return
        devs = [f"{d}:{p}/{ll}" for d, p, ll in IBDEV_RE.findall(msg)]
        if not devs:
            return
        name = msg[4:].split(":", 1)[0].strip().lower()
        for layer in {d.rsplit("/", 1)[1] for d in devs}:
            self._fact(f"{Fact.PLUGIN_LINK_}{name}/{layer}", proc, msg)
        if host not in r.ib_devices:
            r.ib_devices[host] = devs
            for d in devs:
                r.link_layers[d.rsplit("/", 1)[1]] += 1
            self._fact(Fact.IB_DEVICES, proc, msg)


Handler = Callable[[InfoLines, "Proc | None", str], None]

INFO_DISPATCH: dict[str, Handler] = {
    "NCCL ": InfoLines._nccl_word,
    "NET/I": InfoLines._net_ib,
    "NET/S": InfoLines._net_socket,
    "NET/P": InfoLines._net_other,
    "NET/O": InfoLines._net_other,
    "NET :": InfoLines._net_socket,
    "NET/G": InfoLines._net_other,
    "Boots": InfoLines._bootstrap,
    "Using": InfoLines._using,
    "Assig": InfoLines._using,
    "Conne": InfoLines._connected,
    "NVLS ": InfoLines._nvls,
    "GPU D": InfoLines._gpu,
    "[Serv": InfoLines._service,
    "socke": InfoLines._socket_info,
}
# every other "NET/<plugin name>" line: a plugin's own device list
INFO_DISPATCH.update({f"NET/{c}": InfoLines._net_plugin_devices for c in string.ascii_letters
                      if f"NET/{c}" not in INFO_DISPATCH})
