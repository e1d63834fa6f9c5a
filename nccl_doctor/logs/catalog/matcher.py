"""Which catalogued format a logged message came from: ``Matcher``, read by ``--explain-unknown``
(``explain.py``) and by the tests that render every format; the parse path uses its own, cheaper matcher of
WARN formats only (``warnclass.py``)."""

from __future__ import annotations

from collections.abc import Iterable

from nccl_doctor.logs.catalog.formats import Entry, literal

KEY_CHARS = 4  # a message's first characters pick its candidate formats


class Matcher:
    """Finds the catalogued format a logged message came from.

    Candidates come from the message's first ``KEY_CHARS`` characters (formats whose text starts with a
    conversion are tried for every message); opaque formats are left out: they would match anything.
    """

    def __init__(self, entries: Iterable[Entry]) -> None:
        self._keyed: dict[str, list[Entry]] = {}
        self._loose: list[Entry] = []
        for e in entries:
            if e.opaque:
                continue
            head = e.head
            if len(head) >= KEY_CHARS:
                self._keyed.setdefault(head[:KEY_CHARS], []).append(e)
            else:
                self._loose.append(e)
        # the most specific first: "Channel %02d/%02d : %s" (a ring) must not take a "... via NET/IB/0" line
        for bucket in (*self._keyed.values(), self._loose):
            bucket.sort(key=lambda e: -len(literal(e.format)))

    def match(self, msg: str) -> Entry | None:
        msg = msg.rstrip()
        for e in self._keyed.get(msg[:KEY_CHARS], ()):
            if e.regex.match(msg):
                return e
        for e in self._loose:
            if e.regex.match(msg):
                return e
        return None
