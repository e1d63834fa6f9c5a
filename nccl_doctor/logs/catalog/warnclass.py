"""The catalog's WARN formats on the parse path: the error class (fatal, recoverable, informational) of a WARN
message that the parser's own rules do not decide, read from ``data/nccl-catalog.json.gz`` once, on the first such
WARN, and matched so that no log, however hostile, can make it slow."""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from nccl_doctor.logs.catalog.formats import MAX_EXAMPLE, Cls, Entry, entry_from, literal, pieces, read_document


class WarnMatcher:
    """The catalogued WARN format a message came from, on the parse path: a hostile log must not make it slow.

    A message longer than NCCL's own line limit is no NCCL WARN. Candidates are the formats whose whole literal
    head the message starts with (most specific first); a candidate's regex runs only when the message holds
    all of its literal pieces in order (one ``str.find`` each), which keeps the lazy ``%s`` groups from
    backtracking over text that cannot match.
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._by_head: dict[str, list[tuple[Entry, tuple[str, ...]]]] = {}
        for e in entries:
            if e.opaque:
                continue
            self._by_head.setdefault(e.head.split("\n", 1)[0], []).append((e, pieces(e.format)))
        for bucket in self._by_head.values():
            bucket.sort(key=lambda ep: -len(literal(ep[0].format)))
        self._lengths = sorted({len(h) for h in self._by_head}, reverse=True)

    def match(self, msg: str) -> Entry | None:
        msg = msg.rstrip()
        if len(msg) > MAX_EXAMPLE:
            return None
        for n in self._lengths:
            for e, parts in self._by_head.get(msg[:n], ()) if n <= len(msg) else ():
                if _in_order(msg, parts) and e.linear_regex.match(msg):
                    return e
        return None


def _in_order(msg: str, pieces: tuple[str, ...]) -> bool:
    at = 0
    for p in pieces:
        at = msg.find(p, at)
        if at < 0:
            return False
        at += len(p)
    return True


@cache
def _warn_matcher() -> WarnMatcher:
    """The catalog's WARN formats with their stored error class, loaded on the first WARN that the parser's
    own rules do not decide (the catalog is not read at all for logs without such a WARN)."""
    doc = read_document(None)
    return WarnMatcher(entry_from(e, frozenset()) for e in doc["entries"]
                       if e["level"] == "WARN" and e.get("error_class"))


MAX_WARN_MEMO = 4096  # distinct WARN messages whose class is remembered (each at most MAX_EXAMPLE characters)
_WARN_MEMO: dict[str, Cls | None] = {}


def warn_class(msg: str) -> Cls | None:
    """The catalogued error class of a WARN message (fatal, recoverable, informational); None when no catalogued
    WARN format prints it. Memoised per message (bounded): the same few messages repeat over ranks."""
    if msg in _WARN_MEMO:
        return _WARN_MEMO[msg]
    e = _warn_matcher().match(msg)
    cls = e.error_class if e is not None else None
    if len(msg) <= MAX_EXAMPLE:
        if len(_WARN_MEMO) >= MAX_WARN_MEMO:
            _WARN_MEMO.clear()
        _WARN_MEMO[msg] = cls
    return cls
