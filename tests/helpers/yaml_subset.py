"""A reader for the block-style YAML subset our examples are written in, for when no YAML library is installed
(the venv has none, and the project needs none).

The subset: block mappings and sequences by indentation (a sequence item may open a mapping: ``- name: x``),
``|`` literal blocks, plain, single- and double-quoted scalars, integers, booleans, null, ``#`` comments.
Anything else (flow ``[...]``/``{...}``, anchors, tags, tabs, ``>`` folding, a key twice) is refused with the
line number, so an example that leaves the subset fails its test instead of being read wrong.
"""

from __future__ import annotations

import json
import re
from typing import Any

_INT = re.compile(r"[-+]?\d+")
_KEY = re.compile(r"([A-Za-z0-9_.\-/]+):(?:\s+(.*))?$")
_UNSUPPORTED = ("[", "{", "&", "*", "!", ">", "%", "@", "`")


class SubsetError(ValueError):
    """The text leaves the subset (or is not YAML at all)."""


def load(text: str) -> Any:
    reader = _Reader(text)
    first = reader.peek()
    if first is None:
        return None
    value = reader.block(first[0])
    if (extra := reader.peek()) is not None:
        raise SubsetError(f"line {reader.i + 1}: unexpected indentation {extra[0]}")
    return value


class _Reader:
    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.i = 0

    def peek(self) -> tuple[int, str] | None:
        """The next meaningful line's indentation and content (blank and comment lines skipped)."""
        while self.i < len(self.lines):
            line = self.lines[self.i]
            stripped = line.strip()
            if stripped and not stripped.startswith("#"):
                if "\t" in line[: len(line) - len(line.lstrip())]:
                    raise SubsetError(f"line {self.i + 1}: a tab in the indentation")
                return len(line) - len(line.lstrip(" ")), stripped
            self.i += 1
        return None

    def block(self, indent: int) -> Any:
        nxt = self.peek()
        assert nxt is not None
        return self.sequence(indent) if _is_item(nxt[1]) else self.mapping(indent)

    def mapping(self, indent: int) -> dict[str, Any]:
        out: dict[str, Any] = {}
        while (nxt := self.peek()) is not None and nxt[0] == indent and not _is_item(nxt[1]):
            m = _KEY.match(nxt[1])
            if m is None:
                raise SubsetError(f"line {self.i + 1}: not `key: value`: {nxt[1]!r}")
            key = m.group(1)
            if key in out:
                raise SubsetError(f"line {self.i + 1}: key {key!r} twice")
            self.i += 1
            out[key] = self.value(m.group(2) or "", indent)
        if nxt is not None and nxt[0] > indent:
            raise SubsetError(f"line {self.i + 1}: unexpected indentation {nxt[0]}")
        return out

    def sequence(self, indent: int) -> list[Any]:
        out: list[Any] = []
        while (nxt := self.peek()) is not None and nxt[0] == indent and _is_item(nxt[1]):
            rest = nxt[1][1:].strip()
            if _KEY.match(rest):  # ``- key: value`` opens a mapping whose keys align with ``key``
                self.lines[self.i] = " " * (indent + 2) + rest
                out.append(self.mapping(indent + 2))
            else:
                self.i += 1
                out.append(self.value(rest, indent))
        return out

    def value(self, text: str, indent: int) -> Any:
        if text == "|":
            return self.literal(indent)
        if text == "":
            nxt = self.peek()
            return self.block(nxt[0]) if nxt is not None and nxt[0] > indent else None
        return _scalar(text, self.i)

    def literal(self, indent: int) -> str:
        """A ``|`` block: its lines, less their common indentation, one final newline (YAML's clip)."""
        block: list[str] = []
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip() and len(line) - len(line.lstrip(" ")) <= indent:
                break
            block.append(line)
            self.i += 1
        while block and not block[-1].strip():
            block.pop()
        common = min(len(x) - len(x.lstrip(" ")) for x in block if x.strip()) if block else 0
        return "\n".join(x[common:] for x in block) + "\n" if block else ""


def _is_item(content: str) -> bool:
    return content == "-" or content.startswith("- ")


def _scalar(text: str, line: int) -> Any:
    if text.startswith('"'):
        m = re.match(r'("(?:[^"\\]|\\.)*")\s*(#.*)?$', text)
        if m is None:
            raise SubsetError(f"line {line + 1}: bad double-quoted scalar {text!r}")
        return json.loads(m.group(1))
    if text.startswith("'"):
        m = re.match(r"'((?:[^']|'')*)'\s*(#.*)?$", text)
        if m is None:
            raise SubsetError(f"line {line + 1}: bad single-quoted scalar {text!r}")
        return m.group(1).replace("''", "'")
    if text.startswith(_UNSUPPORTED):
        raise SubsetError(f"line {line + 1}: {text[0]!r} is outside the subset")
    plain = re.split(r"\s+#", text, maxsplit=1)[0].strip()
    if _INT.fullmatch(plain):
        return int(plain)
    return {"true": True, "false": False, "null": None, "~": None}.get(plain, plain)
