"""One line per distinct problem, however many nodes have it: node 0 merges the findings and table rows that
differ only by the node they came from, naming the nodes as one compact hostlist (``gpu[001-064,070]``),
and writes rank lists as ranges. On 1,024 nodes the same WARN on 300 of them is one finding, not 300.

Findings are the same problem when their code, severity, template and parameters agree, and where they are
but for the node (its host, and its rank, log file and line unless the template names them): the merged
finding renders its template again with the nodes' hostlist as its host. A finding of free text (no template)
merges only with the same message and fix, word for word; the English is never edited (but for the NCCL log
findings, until they are templates too: ``hostnames.py``).
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

from nccl_doctor.preflight.hostnames import HOST_MARK, LOG_CODES, without_host
from nccl_doctor.report import Finding, Where, hosts_text

T = TypeVar("T")
PER_NODE = ("rank", "file", "line")  # where a finding is on its node: no part of the problem, unless its text says it


def _key(node: str, f: Finding) -> Hashable:
    """What makes two nodes' findings the same problem (``node``: the node that sent ``f``)."""
    w = f.where
    place = (str(f.code), f.severity.value, w.comm, w.iface, w.device)
    if f.template is not None:
        names = f.template_names()
        return (*place, f.template, f.params, tuple(getattr(w, n) if n in names else None for n in PER_NODE))
    if _log_text(f):
        own = _own_names(node, f)
        return (*place, None, without_host(f.message, own), without_host(f.fix, own))
    return (*place, None, f.message, f.fix)


def _log_text(f: Finding) -> bool:
    return f.template is None and str(f.code).startswith(LOG_CODES)


def _own_names(node: str, f: Finding) -> list[str]:
    """The names a node's finding may call it by: its own host, and the node's."""
    return [n for n in {f.where.host or node, node} if n]


def group_findings(items: Iterable[tuple[str, Finding]]) -> list[Finding]:
    """``(node, finding)`` pairs, merged into one finding per distinct problem, in first-seen order. A
    problem on one node is its finding as it was (``where.host`` the node's when it named none); on
    several, one finding whose ``where.host`` is their hostlist, its text rendered with it, and the first
    node's evidence as the example."""
    groups: dict[Hashable, list[tuple[str, Finding]]] = {}
    for node, f in items:
        groups.setdefault(_key(node, f), []).append((node, f))
    return [_merged(members) for members in groups.values()]


def _merged(members: list[tuple[str, Finding]]) -> Finding:
    node, first = members[0]
    w = first.where
    if len(members) == 1:
        return first if w.host else first.rerendered(where=_at(w, host=node, rank=w.rank, file=w.file, line=w.line))
    names = hosts_text(f.where.host or n for n, f in members)
    file = _common(f.where.file for _, f in members)
    where = _at(w, host=names, rank=_common(f.where.rank for _, f in members), file=file,
                line=_common(f.where.line for _, f in members) if file else None)
    return _log_text_merged(node, first, where) if _log_text(first) else first.rerendered(where=where)


def _log_text_merged(node: str, first: Finding, where: Where) -> Finding:
    """A free-text log finding on several nodes: the first node's own name in its text replaced by the
    hostlist (``hostnames.py``, transitional)."""
    own, names = _own_names(node, first), where.host or ""
    message = (without_host(first.message, own) or "").replace(HOST_MARK, names)
    fix = without_host(first.fix, own)
    return Finding(code=first.code, severity=first.severity, message=message,
                   fix=fix.replace(HOST_MARK, names) if fix else first.fix, where=where, evidence=first.evidence)


def _at(where: Where, *, host: str, rank: int | None, file: str | None, line: int | None) -> Where:
    """``where`` on ``host`` with the per-node details given; its comm, iface and device kept."""
    return Where(host=host, rank=rank, comm=where.comm, iface=where.iface, device=where.device, file=file,
                 line=line)


def _common(values: Iterable[T | None]) -> T | None:
    """The one value every member has, else None (a rank or a log line differs from node to node)."""
    seen = set(values)
    return seen.pop() if len(seen) == 1 else None


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
