"""A finished report as Prometheus metrics, in the node_exporter textfile collector's format (``--prom-out``).

Everything is read from the report's findings and its payload's facets (``payload.py``: the node a probe is
about, a bench document), never from the command packages' models, so the metrics say what the JSON says
and this module stays in the core layer.
``prometheus_client`` renders them (its own escaping of label values; a private registry, so nothing of
this process leaks in); the CLI writes the text through ``files.write_file``: atomically, since the
collector reads the directory at any moment, and never through a symlink planted at the path.

Every series carries ``command`` and ``host``: the collector merges every ``*.prom`` file of a node, and two
files (``probe.prom``, ``bench.prom``) must never hold the same series.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from nccl_doctor.payload import BenchFigures, NodeSubject
from nccl_doctor.report import Report, Severity, host_names
from nccl_doctor.text import printable, printable_data

if TYPE_CHECKING:
    from prometheus_client import CollectorRegistry

PREFIX = "nccl_doctor"
VERDICT_VALUE = {Severity.PASS: 0, Severity.WARN: 1, Severity.FAIL: 2}
BYTES_PER_GB = 1e9  # bench's GB/s are nccl-tests' (10^9 bytes per second)
BYTES_PER_GBIT = 1e9 / 8  # an RDMA port's rate is in Gb/s (bits)
BYTES_PER_MBIT = 1e6 / 8  # an interface's speed is in Mb/s (bits)
MAX_NODE_SERIES = 8192  # nodes of one finding given a series each; past it the hostlist is one label


def prom_text(report: Report, *, host: str) -> str:
    """The metrics of ``report`` as the textfile collector reads them; ``host`` labels them unless the
    report names its own (``probe --root`` of another node's snapshot)."""
    # imported here: only a run with --prom-out pays for it (parse and probe start fast)
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry()
    node = report.payload if isinstance(report.payload, NodeSubject) else None
    base = {"command": report.command, "host": printable(node.host) if node and node.host else host}
    _verdict(registry, report, base)
    _findings(registry, report, base)
    _bench(registry, printable_data(_bench_figures(report)), base)
    if node is not None:
        _interfaces(registry, printable_data(node.interfaces), base)
        _rdma_ports(registry, printable_data(node.rdma_devices), base)
    return generate_latest(registry).decode("utf-8")


def _bench_figures(report: Report) -> Mapping[str, Any]:
    """The bench document of a report that measured bandwidth (bench, preflight's bench step); else empty."""
    figures = report.payload.bench_figures if isinstance(report.payload, BenchFigures) else None
    return figures or {}


def _gauge(registry: CollectorRegistry, name: str, doc: str, labels: Iterable[str]) -> Any:
    from prometheus_client import Gauge

    return Gauge(f"{PREFIX}_{name}", doc, labelnames=("command", "host", *labels), registry=registry)


def _verdict(registry: CollectorRegistry, report: Report, base: dict[str, str]) -> None:
    _gauge(registry, "verdict", "The run's verdict: 0 pass, 1 warn, 2 fail.", ()).labels(**base).set(
        VERDICT_VALUE[report.verdict])
    _gauge(registry, "could_not_run", "1 when the check could not run (exit 2): the verdict proves nothing.",
           ()).labels(**base).set(1 if report.could_not_run else 0)
    _gauge(registry, "last_run_timestamp_seconds", "When this report was written (Unix time): alert on stale files.",
           ()).labels(**base).set(time.time())


def _findings(registry: CollectorRegistry, report: Report, base: dict[str, str]) -> None:
    """One series per (code, severity, host the finding is about); hosts a finding does not name are the
    report's own, and a finding that names several (a hostlist) counts for each of them."""
    counts = Counter((str(f.code), f.severity.value, node) for f in report.findings
                     for node in _nodes(f.where.host or base["host"]))
    g = _gauge(registry, "findings", "Findings of the run by code and severity; host: the node it is about.",
               ("code", "severity"))
    for (code, severity, about), n in sorted(counts.items()):
        g.labels(command=base["command"], host=about, code=code, severity=severity).set(n)


def _nodes(host: str) -> list[str]:
    """The nodes a finding names: preflight gives a problem that several nodes share one finding naming them
    as a hostlist (``gpu[001-064]``); a dashboard keyed on the host wants a series per node. A list of more
    than ``MAX_NODE_SERIES`` names (or one that is not a hostlist) stays one label, as it is."""
    names = host_names(host)
    return names if 0 < len(names) <= MAX_NODE_SERIES else [host]


def _bench(registry: CollectorRegistry, bench: Any, base: dict[str, str]) -> None:
    """bench's (and preflight's bench step's) busbw per group, op and size, and each node's inter-node
    figure, in bytes per second."""
    rows = [r for r in _dicts(bench.get("results")) if isinstance(r.get("busbw_gbps"), (int, float))]
    if rows:
        g = _gauge(registry, "bench_busbw_bytes_per_second", "Bus bandwidth (nccl-tests' busbw) per group, "
                   "collective and message size.", ("group", "op", "size_bytes"))
        for r in rows:
            g.labels(**base, group=str(r.get("group")), op=str(r.get("op")), size_bytes=str(r.get("size_bytes"))
                     ).set(r["busbw_gbps"] * BYTES_PER_GB)
    nodes = [n for n in _dicts(bench.get("nodes")) if isinstance(n.get("inter_node_busbw_gbps"), (int, float))]
    if nodes:
        g = _gauge(registry, "bench_node_busbw_bytes_per_second", "Each node's inter-node figure: the best of "
                   "its node pairs, one way.", ("node",))
        for n in nodes:
            g.labels(**base, node=str(n.get("host"))).set(n["inter_node_busbw_gbps"] * BYTES_PER_GB)


def _interfaces(registry: CollectorRegistry, interfaces: Any, base: dict[str, str]) -> None:
    rows = _dicts(interfaces)
    if not rows:
        return
    up = _gauge(registry, "interface_up", "1 when the interface is running (up, with carrier).", ("iface",))
    info = _gauge(registry, "interface_info", "An interface's kind, role, operstate and NCCL use (always 1).",
                  ("iface", "kind", "role", "operstate", "nccl"))
    speed = _gauge(registry, "interface_speed_bytes_per_second", "The link speed the interface reports.", ("iface",))
    for i in rows:
        name = str(i.get("name"))
        up.labels(**base, iface=name).set(1 if i.get("running") else 0)
        info.labels(**base, iface=name, kind=str(i.get("kind") or ""), role=str(i.get("role") or ""),
                    operstate=str(i.get("operstate") or ""), nccl=str(i.get("nccl") or "")).set(1)
        if isinstance(i.get("speed_mbps"), (int, float)) and i["speed_mbps"] > 0:
            speed.labels(**base, iface=name).set(i["speed_mbps"] * BYTES_PER_MBIT)


def _rdma_ports(registry: CollectorRegistry, devices: Any, base: dict[str, str]) -> None:
    ports = [p for d in _dicts(devices) for p in _dicts(d.get("ports"))]
    if not ports:
        return
    active = _gauge(registry, "rdma_port_active", "1 when the RDMA port is ACTIVE.", ("device", "port"))
    info = _gauge(registry, "rdma_port_info", "An RDMA port's state, physical state and link layer (always 1).",
                  ("device", "port", "state", "phys_state", "link_layer"))
    rate = _gauge(registry, "rdma_port_rate_bytes_per_second", "The rate the RDMA port trained at.",
                  ("device", "port"))
    for p in ports:
        where = {"device": str(p.get("device")), "port": str(p.get("port"))}
        state = str(p.get("state") or "")
        active.labels(**base, **where).set(1 if state in ("ACTIVE", "ACTIVE_DEFER") else 0)
        info.labels(**base, **where, state=state, phys_state=str(p.get("phys_state") or ""),
                    link_layer=str(p.get("link_layer") or "")).set(1)
        if isinstance(p.get("rate_gbps"), (int, float)):
            rate.labels(**base, **where).set(p["rate_gbps"] * BYTES_PER_GBIT)


def _dicts(value: Any) -> list[Mapping[str, Any]]:
    """The mappings in a JSON list (anything else: none): a report's data is read, never trusted in shape."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []
