"""Text from an input made safe for every output: no terminal control, always valid XML.

Log lines, interface names, host names and settings come from files and peers nobody vetted. A terminal
obeys what they may hold (OSC 52 writes the clipboard, OSC 2 the window title, DCS talks to the
terminal itself) and XML 1.0 forbids most control characters outright (one ``\\x00`` in a log line made
the JUnit file unreadable). ``printable`` removes every escape sequence and every C0/C1 control
character except tab and newline, and replaces the code points XML 1.0 cannot hold (lone surrogates
left by ``errors="surrogateescape"``, U+FFFE, U+FFFF) with U+FFFD. The report model applies it to
every text it is given, and the renderers to the report's own fields, so text, JSON and JUnit agree.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"  # what a code point XML 1.0 forbids becomes (as a failed UTF-8 decode shows it)

# Escape sequences (ECMA-48), whole, so their parameters do not stay behind as text. 7-bit (ESC x) and
# 8-bit (C1) introducers alike; a sequence cut short by the end of the text is removed to its end.
_SEQUENCE_RE = re.compile(
    r"""
      (?:\x1b\[|\x9b) [\x30-\x3f]* [\x20-\x2f]* [\x40-\x7e]?          # CSI: parameters, final byte
    | (?:\x1b\]|\x9d) [^\x07\x1b\x9c]* (?:\x07|\x1b\\|\x9c)?          # OSC: up to BEL or ST
    | (?:\x1b[PX^_]|[\x90\x98\x9e\x9f]) [^\x1b\x9c]* (?:\x1b\\|\x9c)?  # DCS, SOS, PM, APC: up to ST
    | \x1b [\x20-\x2f]* [\x30-\x7e]?                                  # any other ESC sequence, a lone ESC
    """,
    re.VERBOSE,
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # C0 but tab and newline, DEL, C1
_NOT_XML_RE = re.compile(r"[\ud800-\udfff\ufffe\uffff]")  # lone surrogates, the two non-characters
_UNSAFE_RE = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")  # any of the above


def printable(text: str) -> str:
    """``text`` without escape sequences or control characters (tab and newline kept), XML-safe.

    The common case, clean text, costs one regex search and returns ``text`` itself."""
    if _UNSAFE_RE.search(text) is None:
        return text
    text = _SEQUENCE_RE.sub("", text)
    text = _CONTROL_RE.sub("", text)
    return _NOT_XML_RE.sub(REPLACEMENT, text)


def printable_or_none(text: str | None) -> str | None:
    return None if text is None else printable(text)


def printable_data(value: Any) -> Any:
    """A JSON-ready value (dicts, lists, tuples, strings, numbers) with every string ``printable``, keys too.
    Containers whose strings are all clean come back as they are (no copy)."""
    if isinstance(value, str):
        return printable(value)
    if isinstance(value, dict):
        items = [(printable_data(k), printable_data(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        out = [printable_data(v) for v in value]
        if all(v is v0 for v, v0 in zip(out, value, strict=True)):
            return value
        return type(value)(out) if isinstance(value, list) else tuple(out)
    return value
