"""Build fixture roots (sysfs + procfs + /etc) from compact node specs, in the kernel's own layout.

Devices live under ``sys/devices/<pci path>/<bdf>``; ``sys/class/net/<if>``, ``sys/class/infiniband/<hca>``
and ``sys/bus/pci/devices/<bdf>`` are relative symlinks into it, as the kernel makes them; files hold
what the kernel writes (``4: ACTIVE``, ``400 Gb/sec (4X NDR)``, flags ``0x1003``). procfs files
(route, fib_trie, if_inet6, ipv6_route) are generated from the addresses in the spec.

A spec is a dict::

    {"hostname": "n1", "etc_hosts": "...", "kernel": "6.8.0",
     "pci": {bdf: {"at": "pci0000:00/0000:00:01.0", "vendor": "0x15b3", "device": "0x1021",
                   "class": "0x020700", "numa": 0, "driver": "mlx5_core"}},
     "net": [{"name": "ib0", "pci": bdf, "type": 32, "speed": 400000, "mtu": 2044,
              "addrs": ["10.1.0.1/24"], "state": "up"|"down"|"admin-down",
              "kind": "bond"|"bridge"|"veth"|"tun" (virtual kinds), "mode": ..., "slaves": [...],
              "master": "bond0", "dev_port": 0}],
     "rdma": [{"name": "mlx5_0", "pci": bdf, "ports": {1: {"state": "4: ACTIVE", "phys": "5: LinkUp",
               "rate": "400 Gb/sec (4X NDR)", "ll": "InfiniBand", "gids": [(i, gid, type, ndev)]}}}],
     "default": ("bond0", "10.0.0.1"), "modules": ["nvidia"], "nvidia_version": "...",
     "nvidia_gpus": {bdf: {"uuid": "GPU-...", "minor": 0, "mig": [(gi, ci)]}} (the driver's /proc files),
     "files": {"/etc/nccl.conf": "..."}}
"""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path


def _w(root: Path, rel: str, text: str) -> None:
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(text if text.endswith("\n") or text == "" else text + "\n")


def _link(root: Path, rel: str, target_rel: str) -> None:
    """A relative symlink at ``rel`` pointing to ``target_rel`` (both root-relative)."""
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    target = os.path.relpath("/" + target_rel.lstrip("/"), os.path.dirname("/" + rel.lstrip("/")))
    p.symlink_to(target)


def _device_link(root: Path, rel: str, bdf: str) -> None:
    """``<pci>/{net,infiniband}/<x>/device``: the kernel writes ``../../../<bdf>``, not ``../..``."""
    p = root / rel.lstrip("/")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.symlink_to(f"../../../{bdf}")


def _hex_le(ip: str) -> str:
    return ipaddress.IPv4Address(ip).packed[::-1].hex().upper()


def build(spec: dict, root: Path) -> Path:
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    pci_dirs: dict[str, str] = {}
    for bdf, p in spec.get("pci", {}).items():
        d = f"/sys/devices/{p['at']}/{bdf}"
        pci_dirs[bdf] = d
        _w(root, f"{d}/vendor", p["vendor"])
        _w(root, f"{d}/device", p.get("device", "0x0000"))
        _w(root, f"{d}/class", p["class"])
        _w(root, f"{d}/numa_node", str(p.get("numa", -1)))
        if p.get("driver"):
            (root / f"sys/bus/pci/drivers/{p['driver']}").mkdir(parents=True, exist_ok=True)
            _link(root, f"{d}/driver", f"/sys/bus/pci/drivers/{p['driver']}")
        _link(root, f"/sys/bus/pci/devices/{bdf}", d)

    nets = [{"name": "lo", "type": 772, "mtu": 65536, "addrs": ["127.0.0.1/8", "::1/128"], "state": "unknown"}]
    nets += spec.get("net", [])
    index = {n["name"]: k + 1 for k, n in enumerate(nets)}
    net_dirs: dict[str, str] = {}
    for n in nets:
        name, kind = n["name"], n.get("kind")
        d = f"{pci_dirs[n['pci']]}/net/{name}" if n.get("pci") else f"/sys/devices/virtual/net/{name}"
        net_dirs[name] = d
        state = n.get("state", "up")
        admin_up = state != "admin-down"
        flags = 0x9 if name == "lo" else (0x1003 if admin_up else 0x1002)
        operstate = {"admin-down": "down"}.get(state, state)
        files = {"type": str(n.get("type", 1)), "mtu": str(n.get("mtu", 1500)), "operstate": operstate,
                 "flags": f"0x{flags:x}", "ifindex": str(index[name]),
                 "iflink": str(n.get("iflink", index[name] + 1000 if kind == "veth" else index[name])),
                 "address": n.get("mac", f"02:00:00:00:{index[name] // 256:02x}:{index[name] % 256:02x}"),
                 "dev_port": str(n.get("dev_port", 0)), "dev_id": f"0x{n.get('dev_port', 0):x}"}
        if admin_up:  # the kernel refuses (EINVAL) speed/carrier on a down interface
            files["carrier"] = "1" if operstate in ("up", "unknown") else "0"
            if n.get("speed") is not None:
                files["speed"] = str(n["speed"])
        for f, v in files.items():
            _w(root, f"{d}/{f}", v)
        if n.get("pci"):
            _device_link(root, f"{d}/device", n["pci"])
        if kind == "bond":
            _w(root, f"{d}/bonding/mode", n.get("mode", "802.3ad 4"))
            _w(root, f"{d}/bonding/slaves", " ".join(n["slaves"]))
        elif kind == "bridge":
            (root / f"{d.lstrip('/')}/bridge").mkdir(parents=True, exist_ok=True)
        elif kind == "tun":
            _w(root, f"{d}/tun_flags", "0x1002")
        _link(root, f"/sys/class/net/{name}", d)
    for n in nets:  # links to masters need every netdev directory in place
        if n.get("master"):
            _link(root, f"{net_dirs[n['name']]}/master", net_dirs[n["master"]])
            master = next(m for m in nets if m["name"] == n["master"])
            if master.get("kind") == "bond":
                mii = "up" if n.get("state", "up") == "up" else "down"
                _w(root, f"{net_dirs[n['name']]}/bonding_slave/mii_status", mii)
            else:
                (root / f"{net_dirs[n['name']].lstrip('/')}/brport").mkdir(parents=True, exist_ok=True)
    bonds = [n["name"] for n in nets if n.get("kind") == "bond"]
    if bonds:
        _w(root, "/sys/class/net/bonding_masters", " ".join(bonds))

    for r in spec.get("rdma", []):
        d = f"{pci_dirs[r['pci']]}/infiniband/{r['name']}"
        _device_link(root, f"{d}/device", r["pci"])
        _w(root, f"{d}/node_type", "1: CA")
        for port, p in r["ports"].items():
            pb = f"{d}/ports/{port}"
            _w(root, f"{pb}/state", p["state"])
            _w(root, f"{pb}/phys_state", p.get("phys", "5: LinkUp"))
            _w(root, f"{pb}/rate", p["rate"])
            _w(root, f"{pb}/link_layer", p["ll"])
            (root / f"{pb.lstrip('/')}/gids").mkdir(parents=True, exist_ok=True)
            for i, gid, gtype, ndev in p.get("gids", []):
                _w(root, f"{pb}/gids/{i}", gid)
                _w(root, f"{pb}/gid_attrs/types/{i}", gtype)
                _w(root, f"{pb}/gid_attrs/ndevs/{i}", ndev)
            if p.get("gids"):  # unused table slots read as the zero GID
                _w(root, f"{pb}/gids/{len(p['gids'])}", "0000:0000:0000:0000:0000:0000:0000:0000")
        _link(root, f"/sys/class/infiniband/{r['name']}", d)
    (root / "sys/class/infiniband").mkdir(parents=True, exist_ok=True) if spec.get("rdma") else None
    for m in spec.get("modules", []):
        (root / f"sys/module/{m}").mkdir(parents=True, exist_ok=True)
    if spec.get("nvidia_version"):
        _w(root, "/proc/driver/nvidia/version", spec["nvidia_version"])
    for bdf, g in spec.get("nvidia_gpus", {}).items():
        _w(root, f"/proc/driver/nvidia/gpus/{bdf}/information", gpu_information(bdf, g["uuid"], g["minor"]))
        for gi, ci in g.get("mig", ()):  # the MIG user guide's layout; only the directories are read
            (root / f"proc/driver/nvidia/capabilities/gpu{g['minor']}/mig/gi{gi}/ci{ci}").mkdir(parents=True)

    _write_proc(root, nets, index, spec)
    _w(root, "/proc/sys/kernel/hostname", spec.get("hostname", "node"))
    _w(root, "/proc/sys/kernel/osrelease", spec.get("kernel", "6.8.0-45-generic"))
    _w(root, "/etc/hosts", spec.get("etc_hosts", "127.0.0.1 localhost\n"))
    for path, text in spec.get("files", {}).items():
        _w(root, path, text)
    return root


def gpu_information(bdf: str, uuid: str, minor: int, model: str = "NVIDIA H100 80GB HBM3") -> str:
    """``/proc/driver/nvidia/gpus/<bdf>/information`` with the open kernel module's format strings
    (kernel-open/nvidia/nv-procfs.c, ``nv_procfs_read_gpu_info``), field by field."""
    domain, bus, rest = bdf.split(":")
    slot, func = rest.split(".")
    lines = [("Model: \t\t %s\n", model), ("IRQ:   \t\t %d\n", 0), ("GPU UUID: \t %s\n", uuid),
             ("Video BIOS: \t %s\n", "96.00.99.00.01"), ("Bus Type: \t %s\n", "PCIe"),
             ("DMA Size: \t %d bits\n", 52), ("DMA Mask: \t 0x%x\n", 0xfffffffffffff),
             ("Bus Location: \t %04x:%02x:%02x.%x\n", (int(domain, 16), int(bus, 16), int(slot, 16), int(func))),
             ("Device Minor: \t %u\n", minor), ("GPU Firmware: \t %s\n", "535.104.05"),
             ("GPU Excluded:\t %s\n", "No")]
    return "".join(fmt % args for fmt, args in lines)


def _write_proc(root: Path, nets: list[dict], index: dict[str, int], spec: dict) -> None:
    """route / fib_trie / if_inet6 / ipv6_route as the kernel prints them for these addresses."""
    route = ["Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT"]
    if spec.get("default"):
        dev, gw = spec["default"]
        route.append(f"{dev}\t00000000\t{_hex_le(gw)}\t0003\t0\t0\t0\t00000000\t0\t0\t0")
    leaves: list[tuple[str, str]] = []
    inet6 = []
    for n in nets:
        if n.get("state", "up") == "admin-down":
            continue  # the kernel drops the routes and local entries of a down interface
        for a in n.get("addrs", []):
            iface = ipaddress.ip_interface(a)
            if iface.version == 6:
                scope = 0x10 if iface.ip.is_loopback else 0x20 if iface.ip.is_link_local else 0x00
                inet6.append(f"{iface.ip.packed.hex()} {index[n['name']]:02x} {iface.network.prefixlen:02x} "
                             f"{scope:02x} 80 {n['name']:>8}")
                continue
            leaves.append((str(iface.ip), "/32 host LOCAL"))
            if n["name"] != "lo":
                net = iface.network
                leaves.append((str(net.network_address), f"/{net.prefixlen} link UNICAST"))
                route.append(f"{n['name']}\t{_hex_le(str(net.network_address))}\t00000000\t0001\t0\t0\t0\t"
                             f"{_hex_le(str(net.netmask))}\t0\t0\t0")
    trie = ["  +-- 0.0.0.0/0 3 0 5"]
    for ip, what in sorted(leaves, key=lambda x: ipaddress.IPv4Address(x[0])):
        trie += [f"     |-- {ip}", f"        {what}"]
    body = "\n".join(trie)
    _w(root, "/proc/net/route", "\n".join(route))
    _w(root, "/proc/net/fib_trie", f"Main:\n{body}\nLocal:\n{body}")
    _w(root, "/proc/net/if_inet6", "\n".join(inet6))
    v6 = ["00000000000000000000000000000001 80 00000000000000000000000000000000 00 "
          "00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo"]
    _w(root, "/proc/net/ipv6_route", "\n".join(v6))


# ---------------------------------------------------------------------------------------------------
# The node specs
# ---------------------------------------------------------------------------------------------------

NVIDIA_OPEN_550 = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  550.54.15  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Mar  5 22:15:33 UTC 2024"
NVIDIA_PROP_535 = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023"
H100 = {"vendor": "0x10de", "device": "0x2330", "class": "0x030200", "driver": "nvidia"}
CX7_IB = {"vendor": "0x15b3", "device": "0x1021", "class": "0x020700", "driver": "mlx5_core"}
CX7_ETH = {"vendor": "0x15b3", "device": "0x1021", "class": "0x020000", "driver": "mlx5_core"}
NDR = {"state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "400 Gb/sec (4X NDR)", "ll": "InfiniBand"}
HDR = {"state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "200 Gb/sec (4X HDR)", "ll": "InfiniBand"}


def _switch(k: int) -> tuple[str, str, str]:
    """PCIe switch k: (parent path, GPU bdf, NIC bdf), each pair behind one switch."""
    rb = 0x10 + 0x20 * k
    at = f"pci0000:{rb:02x}/0000:{rb:02x}:01.0/0000:{rb + 1:02x}:00.0"
    return at, f"0000:{rb + 3:02x}:00.0", f"0000:{rb + 4:02x}:00.0"


def dgx_h100() -> dict:
    """8 H100 + 8 CX-7 NDR IB (IPoIB ib0-7) pairwise behind PCIe switches, bond0 over 2x25GbE mgmt, docker0."""
    pci, net, rdma = {}, [], []
    for k in range(8):
        at, gpu, nic = _switch(k)
        numa = 0 if k < 4 else 1
        pci[gpu] = {**H100, "at": f"{at}/0000:{0x12 + 0x20 * k:02x}:00.0", "numa": numa}
        pci[nic] = {**CX7_IB, "at": f"{at}/0000:{0x12 + 0x20 * k:02x}:01.0", "numa": numa}
        net.append({"name": f"ib{k}", "pci": nic, "type": 32, "speed": 400000, "mtu": 2044,
                    "addrs": [f"10.1.{k}.11/24"]})
        rdma.append({"name": f"mlx5_{k}", "pci": nic, "ports": {1: NDR}})
    pci["0000:01:00.0"] = {"vendor": "0x8086", "device": "0x1593", "class": "0x020000", "driver": "ice",
                           "at": "pci0000:00/0000:00:1c.0", "numa": 0}
    pci["0000:01:00.1"] = {**pci["0000:01:00.0"]}
    net += [{"name": "eno1", "pci": "0000:01:00.0", "speed": 25000, "master": "bond0"},
            {"name": "eno2", "pci": "0000:01:00.1", "speed": 25000, "master": "bond0"},
            {"name": "bond0", "kind": "bond", "slaves": ["eno1", "eno2"], "speed": 50000,
             "addrs": ["10.0.0.11/24", "fe80::1:11/64"]},
            {"name": "docker0", "kind": "bridge", "state": "down", "addrs": ["172.17.0.1/16"]}]
    return {"hostname": "dgx01", "etc_hosts": "127.0.0.1 localhost\n10.0.0.11 dgx01.cluster dgx01\n",
            "pci": pci, "net": net, "rdma": rdma, "default": ("bond0", "10.0.0.1"),
            "modules": ["nvidia", "nvidia_peermem", "mlx5_core", "ib_ipoib"], "nvidia_version": NVIDIA_PROP_535}


def roce_node() -> dict:
    """bond0 over two 200GbE RoCE ports (mlx5 LAG: mlx5_bond_0), one slave down; 1GbE mgmt; GPUs on both sockets."""
    ports = {"at": "pci0000:40/0000:40:01.1", "numa": 1}
    gids = [(0, "fe80:0000:0000:0000:0000:00ff:fe00:0021", "IB/RoCE v1", "bond0"),
            (1, "fe80:0000:0000:0000:0000:00ff:fe00:0021", "RoCE v2", "bond0"),
            (2, "0000:0000:0000:0000:0000:ffff:0a02:0015", "IB/RoCE v1", "bond0"),
            (3, "0000:0000:0000:0000:0000:ffff:0a02:0015", "RoCE v2", "bond0")]
    return {
        "hostname": "roce01", "etc_hosts": "127.0.0.1 localhost\n192.168.1.21 roce01\n",
        "pci": {"0000:41:00.0": {**CX7_ETH, **ports}, "0000:41:00.1": {**CX7_ETH, **ports},
                "0000:02:00.0": {"vendor": "0x14e4", "device": "0x165f", "class": "0x020000", "driver": "tg3",
                                 "at": "pci0000:00/0000:00:01.0", "numa": 0},
                "0000:18:00.0": {**H100, "at": "pci0000:17/0000:17:01.0", "numa": 0},
                "0000:42:00.0": {**H100, "at": "pci0000:40/0000:40:01.1", "numa": 1}},
        "net": [{"name": "eno1", "pci": "0000:02:00.0", "speed": 1000, "addrs": ["192.168.1.21/24"]},
                {"name": "ens1f0np0", "pci": "0000:41:00.0", "speed": 200000, "mtu": 9000, "master": "bond0"},
                {"name": "ens1f1np1", "pci": "0000:41:00.1", "speed": 200000, "mtu": 9000, "master": "bond0",
                 "state": "down"},
                {"name": "bond0", "kind": "bond", "slaves": ["ens1f0np0", "ens1f1np1"], "speed": 200000,
                 "mtu": 9000, "addrs": ["10.2.0.21/24"]}],
        "rdma": [{"name": "mlx5_bond_0", "pci": "0000:41:00.0", "ports": {1: {
            "state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "200 Gb/sec (4X HDR)", "ll": "Ethernet", "gids": gids}}}],
        "default": ("eno1", "192.168.1.1"), "kernel": "6.5.0-41-generic",
        "modules": ["nvidia", "mlx5_core", "mlx5_ib", "bonding"], "nvidia_version": NVIDIA_OPEN_550,
    }


def p5_node() -> dict:
    """AWS p5-like: ENA primary (ens32) plus 8 EFA devices (link layer Unknown), 8 H100, nvidia_peermem."""
    pci, rdma = {}, []
    pci["0000:10:1b.0"] = {"vendor": "0x1d0f", "device": "0xec20", "class": "0x020000", "driver": "ena",
                           "at": "pci0000:10/0000:10:00.0", "numa": 0}
    for k in range(8):
        bus = 0x10 + 0x20 * k
        efa = f"0000:{bus:02x}:1c.0"
        pci[efa] = {"vendor": "0x1d0f", "device": "0xefa2", "class": "0x020000", "driver": "efa",
                    "at": f"pci0000:{bus:02x}/0000:{bus:02x}:00.0", "numa": 0 if k < 4 else 1}
        pci[f"0000:{bus:02x}:1d.0"] = {**H100, "at": f"pci0000:{bus:02x}/0000:{bus:02x}:00.0", "numa": 0 if k < 4 else 1}
        rdma.append({"name": f"rdmap{bus}s28", "pci": efa, "ports": {1: {
            "state": "4: ACTIVE", "phys": "5: LinkUp", "rate": "100 Gb/sec (4X EDR)", "ll": "Unknown"}}})
    return {"hostname": "ip-172-31-1-10", "etc_hosts": "127.0.0.1 localhost\n",
            "pci": pci, "rdma": rdma,
            "net": [{"name": "ens32", "pci": "0000:10:1b.0", "mtu": 9001, "addrs": ["172.31.1.10/20"]}],
            "default": ("ens32", "172.31.0.1"), "modules": ["nvidia", "nvidia_peermem", "efa", "ena"],
            "nvidia_version": NVIDIA_PROP_535}


def cloud_vm() -> dict:
    """One ens5 (virtio) with the default route, docker0 with two veths; hostname on 127.0.1.1 (Debian)."""
    return {"hostname": "vm-1", "etc_hosts": "127.0.0.1 localhost\n127.0.1.1 vm-1.internal vm-1\n",
            "pci": {"0000:00:05.0": {"vendor": "0x1af4", "device": "0x1000", "class": "0x020000",
                                     "driver": "virtio-pci", "at": "pci0000:00"}},
            "net": [{"name": "ens5", "pci": "0000:00:05.0", "addrs": ["10.128.0.5/20", "fe80::4001:aff:fe80:5/64"]},
                    {"name": "docker0", "kind": "bridge", "addrs": ["172.17.0.1/16"]},
                    {"name": "veth1a2b3c", "kind": "veth", "speed": 10000, "master": "docker0"},
                    {"name": "veth4d5e6f", "kind": "veth", "speed": 10000, "master": "docker0"}],
            "default": ("ens5", "10.128.0.1"), "modules": ["virtio_net", "bridge", "veth"]}


def degraded_ib() -> dict:
    """4 HDR IB ports: mlx5_1 DOWN/Disabled, mlx5_2 trained at half rate (2X); 10GbE mgmt eth0 with default route."""
    pci, net, rdma = {}, [], []
    for k in range(4):
        at, gpu, nic = _switch(k)
        pci[gpu] = {**H100, "at": at, "numa": 0}
        pci[nic] = {**CX7_IB, "at": at, "numa": 0}
        port = dict(HDR)
        if k == 1:
            port = {"state": "1: DOWN", "phys": "3: Disabled", "rate": "10 Gb/sec (4X SDR)", "ll": "InfiniBand"}
        if k == 2:
            port = {**HDR, "rate": "100 Gb/sec (2X HDR)"}
        net.append({"name": f"ib{k}", "pci": nic, "type": 32, "speed": 200000 if k != 2 else 100000, "mtu": 2044,
                    "addrs": [f"10.3.{k}.5/24"], "state": "down" if k == 1 else "up"})
        rdma.append({"name": f"mlx5_{k}", "pci": nic, "ports": {1: port}})
    pci["0000:03:00.0"] = {"vendor": "0x8086", "device": "0x1563", "class": "0x020000", "driver": "ixgbe",
                           "at": "pci0000:00/0000:00:02.0", "numa": 0}
    net.insert(0, {"name": "eth0", "pci": "0000:03:00.0", "speed": 10000, "addrs": ["192.168.7.5/24"]})
    return {"hostname": "gpu05", "etc_hosts": "127.0.0.1 localhost\n192.168.7.5 gpu05\n", "pci": pci, "net": net,
            "rdma": rdma, "default": ("eth0", "192.168.7.1"), "modules": ["nvidia", "mlx5_core", "ib_ipoib"],
            "nvidia_version": NVIDIA_PROP_535}


SPECS = {"dgx_h100": dgx_h100, "roce": roce_node, "p5": p5_node, "cloud_vm": cloud_vm, "degraded_ib": degraded_ib}


# ---------------------------------------------------------------------------------------------------
# Variants for single tests (not in SPECS: the snapshot round trip runs over SPECS only)
# ---------------------------------------------------------------------------------------------------


def mgmt_only() -> dict:
    """A GPU node whose only NIC is a 1GbE eno1 (default route): no RDMA, no data interface."""
    return {"hostname": "cpu1", "etc_hosts": "127.0.0.1 localhost\n10.9.0.5 cpu1\n",
            "pci": {"0000:02:00.0": {"vendor": "0x8086", "device": "0x1533", "class": "0x020000", "driver": "igb",
                                     "at": "pci0000:00/0000:00:01.0", "numa": 0},
                    "0000:42:00.0": {**H100, "at": "pci0000:40/0000:40:01.1", "numa": 0}},
            "net": [{"name": "eno1", "pci": "0000:02:00.0", "speed": 1000, "addrs": ["10.9.0.5/24"]}],
            "default": ("eno1", "10.9.0.1"), "modules": ["nvidia"], "nvidia_version": NVIDIA_PROP_535}


def dgx_all_ports_down() -> dict:
    """dgx_h100 with every IB port DOWN/Disabled and every ib* netdev down."""
    spec = dgx_h100()
    for r in spec["rdma"]:
        r["ports"] = {1: {"state": "1: DOWN", "phys": "3: Disabled", "rate": "10 Gb/sec (4X SDR)", "ll": "InfiniBand"}}
    for n in spec["net"]:
        if n["name"].startswith("ib"):
            n["state"] = "down"
    return spec


def dgx_without_rdma() -> dict:
    """dgx_h100 with its IB NICs removed: GPUs and the bond0 management/data bond stay."""
    spec = dgx_h100()
    nics = {bdf for bdf, p in spec["pci"].items() if p is not None and p.get("class") == CX7_IB["class"]}
    spec["pci"] = {k: v for k, v in spec["pci"].items() if k not in nics}
    spec["net"] = [n for n in spec["net"] if n.get("pci") not in nics]
    spec["rdma"] = []
    return spec


def ethernet_pair(speed_mbps: int) -> dict:
    """eth0 at 100 GbE with the default route, eth1 at ``speed_mbps`` without one: eth1 is management when
    it runs at or below the management boundary (25 Gb/s), a data interface above it."""
    nic = {"vendor": "0x8086", "device": "0x1592", "class": "0x020000", "driver": "ice", "numa": 0}
    return {"hostname": "eth01", "etc_hosts": "127.0.0.1 localhost\n10.4.0.5 eth01\n",
            "pci": {"0000:17:00.0": {**nic, "at": "pci0000:16/0000:16:02.0"},
                    "0000:31:00.0": {**nic, "at": "pci0000:30/0000:30:02.0"}},
            "net": [{"name": "eth0", "pci": "0000:17:00.0", "speed": 100000, "addrs": ["10.4.0.5/24"]},
                    {"name": "eth1", "pci": "0000:31:00.0", "speed": speed_mbps, "addrs": ["10.5.0.5/24"]}],
            "default": ("eth0", "10.4.0.1"), "modules": ["ice"]}
