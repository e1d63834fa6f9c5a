"""One line per distinct problem, however many nodes have it: node 0 merges the findings and table rows that
differ only by the node they came from, naming the nodes as one compact hostlist (``gpu[001-064,070]``),
and writes rank lists as ranges. On 1,024 nodes the same WARN on 300 of them is one finding, not 300.

Findings are the same problem when their code, severity, template and parameters agree, and where they are
but for the node (its host, and its rank, log file and line unless the template names them), and a fix that is
no template of theirs is the same text: the merged finding renders its template again with the nodes'
hostlist as its host. That holds for the NCCL log findings too: each node parses its own log, and those that
name the node read it from their template's ``{host}`` (``logs/diagnosis/hosted.py``). A finding of free text
(no template) merges only with the same message and fix, word for word; the English is never edited, so a
host name inside another word (``gpu1`` in ``gpu10``) can never be rewritten.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import TypeVar

from nccl_doctor.codes import CODES
from nccl_doctor.report import Finding, Where, hosts_text

T = TypeVar("T")
PER_NODE = ("rank", "file", "line")  # where a finding is on its node: no part of the problem, unless its text says it


def _key(f: Finding) -> Hashable:
    """What makes two nodes' findings the same problem."""
    w = f.where
    place = (str(f.code), f.severity.value, w.comm, w.iface, w.device)
    if f.template is not None:
        names = f.template_names()
        fix = None if _fix_templated(f) else f.fix  # a fix given as text (no template) is part of the problem
        return (*place, f.template, f.params, tuple(getattr(w, n) if n in names else None for n in PER_NODE), fix)
    return (*place, None, f.message, f.fix)


def _fix_templated(f: Finding) -> bool:
    """Whether ``f``'s fix is rendered from its template (so its parameters already say it)."""
    known = CODES.get(f.code)
    return known is not None and f.template is not None and f.template in known.text.fixes


def group_findings(items: Iterable[tuple[str, Finding]]) -> list[Finding]:
    """``(node, finding)`` pairs, merged into one finding per distinct problem, in first-seen order. A
    problem on one node is its finding as it was (``where.host`` the node's when it named none); on
    several, one finding whose ``where.host`` is their hostlist, its text rendered with it, and the first
    node's evidence as the example."""
    groups: dict[Hashable, list[tuple[str, Finding]]] = {}
    for node, f in items:
        groups.setdefault(_key(f), []).append((node, f))
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
    return first.rerendered(where=where)


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
