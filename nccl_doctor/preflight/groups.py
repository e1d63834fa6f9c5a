"""One line per distinct problem, however many nodes have it: node 0 merges the findings and table rows that
differ only by the node they came from, naming the nodes as one compact hostlist (``gpu[001-064,070]``),
and writes rank lists as ranges. On 1,024 nodes the same WARN on 300 of them is one finding, not 300."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from nccl_doctor.report import Finding, Where, hosts_text

T = TypeVar("T")
HOST_MARK = "\x00"  # stands for the node's own name in a grouping key (printable text never holds it)
_EDGE_BEFORE = r"(?<![A-Za-z0-9_.-])"  # a host name stands alone: gpu1 is not inside gpu10 or x.gpu1
_EDGE_AFTER = r"(?![A-Za-z0-9_-])"  # but gpu1.cluster (its FQDN) and gpu1/mlx5_0 still name gpu1


def without_host(text: str | None, names: Sequence[str]) -> str | None:
    """``text`` with every mention of the node's own ``names`` replaced by ``HOST_MARK``."""
    if not text or not names:
        return text
    pattern = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.sub(f"{_EDGE_BEFORE}(?:{pattern}){_EDGE_AFTER}", HOST_MARK, text)


@dataclass(frozen=True)
class _Key:
    """What makes two nodes' findings the same problem: all but the node's name and its per-node details
    (its rank numbers, its log file and line, its evidence)."""

    code: str
    severity: str
    message: str
    fix: str | None
    comm: str | None
    iface: str | None
    device: str | None


def group_findings(items: Iterable[tuple[str, Finding]]) -> list[Finding]:
    """``(node, finding)`` pairs, merged into one finding per distinct problem, in first-seen order. A
    problem on one node is its finding as it was (``where.host`` the node's when it named none); on
    several, one finding whose ``where.host`` is their hostlist, the node's own name in the message and
    fix replaced by that hostlist, and the first node's evidence as the example."""
    groups: dict[_Key, list[tuple[str, Finding]]] = {}
    for node, f in items:
        host = f.where.host or node
        names = [n for n in {host, node} if n]
        w = f.where
        key = _Key(str(f.code), f.severity.value, without_host(f.message, names) or "",
                   without_host(f.fix, names), w.comm, w.iface, w.device)
        groups.setdefault(key, []).append((host, f))
    return [_merged(key, members) for key, members in groups.items()]


def _merged(key: _Key, members: list[tuple[str, Finding]]) -> Finding:
    host, first = members[0]
    if len(members) == 1:
        return first if first.where.host else _with_where(first, _replace_host(first.where, host))
    names = hosts_text(h for h, _ in members)
    file = _common(f.where.file for _, f in members)
    where = Where(host=names, rank=_common(f.where.rank for _, f in members), comm=key.comm, iface=key.iface,
                  device=key.device, file=file, line=_common(f.where.line for _, f in members) if file else None)
    return Finding(code=first.code, severity=first.severity, message=key.message.replace(HOST_MARK, names),
                   fix=key.fix.replace(HOST_MARK, names) if key.fix else first.fix, where=where,
                   evidence=first.evidence)


def _common(values: Iterable[T | None]) -> T | None:
    """The one value every member has, else None (a rank or a log line differs from node to node)."""
    seen = set(values)
    return seen.pop() if len(seen) == 1 else None


def _replace_host(where: Where, host: str) -> Where:
    return Where(host=host, rank=where.rank, comm=where.comm, iface=where.iface, device=where.device,
                 file=where.file, line=where.line)


def _with_where(f: Finding, where: Where) -> Finding:
    return Finding(code=f.code, severity=f.severity, message=f.message, fix=f.fix, where=where, evidence=f.evidence)


def group_rows(rows: Iterable[tuple[str, tuple[str, ...]]]) -> list[tuple[str, ...]]:
    """Table rows given as ``(host, the other cells)``: one row per distinct content, its hosts in the first
    cell as a hostlist, in first-seen order."""
    hosts: dict[tuple[str, ...], list[str]] = {}
    for host, cells in rows:
        hosts.setdefault(cells, []).append(host)
    return [(hosts_text(names), *cells) for cells, names in hosts.items()]


def rank_ranges(ranks: Iterable[int]) -> str:
    """``ranks 0-7, 16`` (``rank 3`` for one): 8,192 ranks of one stage stay a few words."""
    spans: list[list[int]] = []
    for r in sorted(set(ranks)):
        if spans and r == spans[-1][1] + 1:
            spans[-1][1] = r
        else:
            spans.append([r, r])
    text = ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
    return f"rank {text}" if len(spans) == 1 and spans[0][0] == spans[0][1] else f"ranks {text}"
