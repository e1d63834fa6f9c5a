"""``parse --explain-unknown``: the NCCL lines of a log that no catalogued format explains, grouped by kind
(numbers and addresses masked) and counted, as a listing to send us."""

from __future__ import annotations

from collections.abc import Iterable

from nccl_doctor.logs.catalog.formats import MAX_EXAMPLE, Catalog, load
from nccl_doctor.logs.catalog.matcher import Matcher
from nccl_doctor.logs.parse.patterns import warn_kind
from nccl_doctor.logs.parse.reader import ReadStats, clean, read_blocks, resolve_inputs
from nccl_doctor.outcome import Listing

MAX_UNKNOWN_KINDS = 1000  # distinct unknown messages (numbers and addresses masked) kept by explain_unknown
MAX_MEMO = 65536  # distinct messages whose match result is remembered
LEVEL_MARKS = ("NCCL INFO ", "NCCL WARN ")


class UnknownKind:
    """Unknown NCCL lines of one kind (numbers and addresses masked): how many, and the first as read."""

    __slots__ = ("count", "example", "kind", "level")

    def __init__(self, level: str, kind: str, example: str) -> None:
        self.level, self.kind, self.example, self.count = level, kind, example, 0


class Unknowns:
    """What ``explain_unknown`` found: NCCL lines read, how many a catalogued format explains, the rest;
    ``dropped`` counts the unknown lines of kinds past MAX_UNKNOWN_KINDS (counted, not listed)."""

    __slots__ = ("dropped", "kinds", "known", "nccl_lines", "unknown")

    def __init__(self) -> None:
        self.nccl_lines = self.known = self.unknown = self.dropped = 0
        self.kinds: dict[str, UnknownKind] = {}

    def listing(self) -> list[UnknownKind]:
        return sorted(self.kinds.values(), key=lambda k: (-k.count, k.kind))


def nccl_message(line: str) -> tuple[str, str] | None:
    """(level, message) of an ``NCCL INFO`` / ``NCCL WARN`` line, else None."""
    for mark in LEVEL_MARKS:
        j = line.find(mark)
        if j >= 0:
            return mark[5:9], clean(line[j + len(mark):]).rstrip()
    return None


def explain_unknown(paths: Iterable[str], catalog: Catalog | None = None) -> Unknowns:
    """Every NCCL INFO/WARN line of the inputs (files, directories, .gz, ``-``, as ``parse`` reads them)
    that no catalogued format explains, grouped by kind and counted; memory is bounded by the caps."""
    matcher = Matcher((catalog or load()).entries)
    memo: dict[str, bool] = {}
    out = Unknowns()
    for source in resolve_inputs(list(paths)).sources:
        for block in read_blocks(source, ReadStats()):
            for line in block:
                if "NCCL " in line:
                    _count(line, matcher, memo, out)
    return out


def _count(line: str, matcher: Matcher, memo: dict[str, bool], out: Unknowns) -> None:
    got = nccl_message(line)
    if got is None:
        return
    level, msg = got
    out.nccl_lines += 1
    known = memo.get(msg)
    if known is None:
        known = matcher.match(msg) is not None
        if len(memo) < MAX_MEMO:
            memo[msg] = known
    if known:
        out.known += 1
        return
    out.unknown += 1
    kind = f"{level} {warn_kind(msg)}"
    k = out.kinds.get(kind)
    if k is None:
        if len(out.kinds) >= MAX_UNKNOWN_KINDS:
            out.dropped += 1
            return
        k = out.kinds[kind] = UnknownKind(level, kind[5:], msg[:MAX_EXAMPLE])
    k.count += 1


def unknowns_listing(u: Unknowns, catalog: Catalog) -> Listing:
    """The ``--explain-unknown`` listing: text for people, a JSON document for tools (and for an issue report)."""
    built = {src: f"{b['first']}..{b['last']}" if b["first"] != b["last"] else b["first"]
             for src, b in catalog.built_from.items()}
    document = {"catalog_version": catalog.version, "catalog_built_from": built,
                "nccl_lines": u.nccl_lines, "known": u.known, "unknown": u.unknown,
                "unknown_kinds_not_listed": u.dropped,
                "kinds": [{"count": k.count, "level": k.level, "kind": k.kind, "example": k.example}
                          for k in u.listing()]}
    what = ", ".join(f"{src} {tags}" for src, tags in built.items())
    lines = [f"{u.nccl_lines} NCCL lines read; {u.known} match a format of NCCL's own source "
             f"(catalog v{catalog.version}: {what}); {u.unknown} match none."]
    if u.kinds:
        lines.append(f"{len(u.kinds)} kinds of unknown lines (numbers and addresses masked), most frequent first:")
        lines += [f"{k.count:8d}  {k.level}  {k.example}" for k in u.listing()]
    if u.dropped:
        lines.append(f"... and {u.dropped} more unknown lines of kinds past the first {MAX_UNKNOWN_KINDS}")
    if u.unknown:
        lines.append("Please send these lines (an issue at the nccl-doctor repository): they are what parse "
                     "does not know yet.")
    return Listing(text="\n".join(lines) + "\n", document=document)
