"""The network side of a launch: the route to the rendezvous host, its port, and the endpoint's syntax.

Across hosts torchrun trips on a hostname that resolves to 127.0.0.1 (no node hosts the rendezvous
store, workers get ``MASTER_ADDR=localhost``, Gloo binds loopback; platform.md section 3): the route
says which address and interface this node reaches the rendezvous host from, and whether it is this node.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import psutil

from nccl_doctor.cluster.slurm import port_from_env, slurm_launch_config
from nccl_doctor.cluster.validate import check_port
from nccl_doctor.enums import StrEnum
from nccl_doctor.errors import InputError

RESOLVE_TIMEOUT_S = 10.0  # a DNS server that never answers costs this, not minutes


class PortOrigin(StrEnum):
    """Where the rendezvous port came from (the busy-port error's fix names what to change)."""

    ENDPOINT = "--rdzv-endpoint"
    MASTER_PORT = "MASTER_PORT"
    SLURM_JOB = "29500 + job id % 1000"
    FREE = "a free port"


def parse_endpoint(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6addr]:PORT`` too) -> (host, port); one clear line for anything else, before
    torchrun turns it into a traceback or a rendezvous that waits until the deadline."""
    host, sep, port_text = text.strip().rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port_text.isdigit():
        raise InputError(f"--rdzv-endpoint {text!r} is not HOST:PORT (e.g. n1:29500)")
    return host, check_port(int(port_text), f"--rdzv-endpoint {text!r}: port")


def resolve(host: str, what: str, *, timeout_s: float = RESOLVE_TIMEOUT_S) -> None:
    """Fail at once on a host name that does not resolve (c10d would retry it until the deadline).
    Resolution runs in a thread so a DNS server that never answers costs ``timeout_s``, not minutes."""
    box: list[Exception | None] = []

    def lookup() -> None:
        try:
            socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
            box.append(None)
        except (socket.gaierror, UnicodeError) as exc:
            box.append(exc)

    t = threading.Thread(target=lookup, daemon=True)
    t.start()
    t.join(timeout_s)
    if not box:
        raise InputError(f"{what}: resolving {host!r} took more than {timeout_s:.0f} s")
    if box[0] is not None:
        why = getattr(box[0], "strerror", None) or str(box[0])
        raise InputError(f"{what}: cannot resolve host {host!r} ({why})")


# --- the route to the rendezvous host -------------------------------------------------------------
@dataclass(frozen=True)
class Route:
    """How this node reaches the rendezvous host: our source address and the interface that owns it."""

    peer_ip: str
    local_ip: str | None
    iface: str | None
    is_local: bool  # the rendezvous host is this machine
    loopback: bool


RouteFn = Callable[[str, int], Route]  # ``route_to``, or a test's stand-in


def route_to(host: str, port: int) -> Route:
    """Resolve ``host`` and ask the kernel which source address it would use (a UDP ``connect``
    sends no packet). The interface is the one holding that address."""
    resolve(host, "rendezvous host")  # time-bounded: a DNS server that never answers costs seconds
    try:
        infos = socket.getaddrinfo(host, port, socket.AF_INET, socket.SOCK_DGRAM)
    except socket.gaierror as exc:
        raise InputError(f"cannot resolve rendezvous host {host!r}: {exc.strerror}") from None
    peer = str(infos[0][4][0])
    local_ip: str | None = None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect((peer, port))
            local_ip = str(s.getsockname()[0])
        except OSError:
            pass
    addrs = local_addresses()
    iface = next((name for name, ips in addrs.items() if local_ip in ips), None)
    loop = ipaddress.ip_address(peer).is_loopback
    is_local = loop or any(peer in ips for ips in addrs.values())
    return Route(peer_ip=peer, local_ip=local_ip, iface=iface, is_local=is_local, loopback=loop)


def gloo_iface(r: Route) -> str | None:
    """The interface Gloo should bind to reach the rendezvous host (GLOO_SOCKET_IFNAME when unset):
    None on loopback, where Gloo's own default (the hostname's interface) is right."""
    return r.iface if r.iface and r.iface != "lo" and not r.loopback else None


def gloo_iface_to(host: str, port: int, *, route: RouteFn = route_to) -> str | None:
    """``gloo_iface`` of the route to ``host``; None when it cannot be found (Gloo then binds what the
    hostname resolves to). Costs a DNS lookup and a psutil scan: call it once per node, not per rank."""
    try:
        return gloo_iface(route(host, port))
    except (InputError, OSError):
        return None


def local_addresses() -> dict[str, set[str]]:
    """Each interface's IPv4 addresses."""
    return {name: {a.address for a in addrs if a.family == socket.AF_INET}
            for name, addrs in psutil.net_if_addrs().items()}


# --- the rendezvous port ----------------------------------------------------------------------------
class Rendezvous(Protocol):
    """What the port check reads of a launch plan (``LaunchConfig``)."""

    @property
    def nnodes(self) -> int: ...
    @property
    def rdzv_endpoint(self) -> str: ...
    @property
    def is_host(self) -> bool | None: ...


def free_port() -> int:
    """A port nobody listens on now (the kernel's pick), for a one-node rendezvous."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def port_busy(port: int) -> str | None:
    """Why this node cannot listen on ``port`` (the rendezvous store's port) on every address, as torch's
    TCPStore will; None when it can. SO_REUSEADDR as TCPStore sets it: a TIME_WAIT leftover of an earlier
    run is no conflict, a listening socket is."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as exc:
            return "already in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc)).lower()
    return None


def hosts_store(cfg: Rendezvous) -> bool:
    """This node will host the rendezvous store: we told torchrun so (``is_host``), or the run is one node
    on one of this node's addresses. A loopback endpoint across "nodes" lets torchrun decide (two launchers
    on one machine: the second joins the first's store), so it is never ours to check."""
    if cfg.is_host is not None:
        return cfg.is_host
    if cfg.nnodes != 1:
        return False
    host, _ = parse_endpoint(cfg.rdzv_endpoint)
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return False
    return ip.is_loopback or any(host in ips for ips in local_addresses().values())


def check_rdzv_port(cfg: Rendezvous, origin: str) -> None:
    """On the node that hosts the rendezvous store, a port another program holds is one error line before
    torchrun starts (torchrun would print a traceback here while every other node waits its deadline).
    ``origin``: where the port came from (``rdzv_port_origin``), so the fix names what to change."""
    if not hosts_store(cfg):
        return
    host, port = parse_endpoint(cfg.rdzv_endpoint)
    why = port_busy(port)
    if why is None:
        return
    where = f"{socket.gethostname()}, the rendezvous host" if cfg.nnodes > 1 else socket.gethostname()
    every = " (the same on every node)" if cfg.nnodes > 1 else ""
    fixes: dict[str, str] = {PortOrigin.ENDPOINT: f"pick a free port, --rdzv-endpoint {host}:OTHERPORT{every}",
                             PortOrigin.MASTER_PORT: f"set MASTER_PORT to a free port{every}"}
    fix = fixes.get(origin, f"set MASTER_PORT to a free port{every}, or pass --rdzv-endpoint {host}:OTHERPORT")
    raise InputError(f"rendezvous port {port} (from {origin}) is {why} on {where}: {fix}")


def rdzv_port_origin(rdzv_endpoint: str | None, env: Mapping[str, str], nnodes: int) -> PortOrigin:
    """Where ``plan_launch`` took the rendezvous port from (for the busy-port error's fix)."""
    if rdzv_endpoint is not None:
        return PortOrigin.ENDPOINT
    if port_from_env(env) is not None:
        return PortOrigin.MASTER_PORT
    return PortOrigin.SLURM_JOB if nnodes > 1 and slurm_launch_config(env) else PortOrigin.FREE
