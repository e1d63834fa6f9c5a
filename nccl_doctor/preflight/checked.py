"""Typed reads of the JSON another process wrote into the store: every field is checked for its type before
it is used, so a malformed or hostile value is one ``ValueError`` naming the field, never a ``KeyError``,
a ``TypeError`` deep in a renderer, or a traceback. Torch-free."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

from nccl_doctor.enums import StrEnum
from nccl_doctor.report import WHERE_FIELDS, Finding, Severity, Table, Where

WHERE_INTS = ("rank", "line")
SEVERITIES = {s.value for s in Severity}
E = TypeVar("E", bound=StrEnum)
SHOWN_CHARS = 40  # of a rejected value, in the error


def load_object(text: str | bytes) -> dict[str, Any]:
    """A JSON object, or a ``ValueError`` (invalid JSON, too deeply nested, another type)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError("not valid JSON: nested too deeply") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return value


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def text(d: Mapping[str, Any], name: str, default: str | None = None) -> str:
    """A string field; ``default`` (when given) for one that is missing or null."""
    value = d.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, str):
        raise ValueError(f"{name!r} must be a string, not {_kind(value)}")
    return value


def optional_text(d: Mapping[str, Any], name: str) -> str | None:
    value = d.get(name)
    return None if value is None else text(d, name)


def member(d: Mapping[str, Any], name: str, kind: type[E]) -> E:
    """A string field that is one of ``kind``'s values (a verdict word, a finding code)."""
    value = text(d, name)
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{name!r} must be a {kind.__name__} value, not {value[:SHOWN_CHARS]!r}") from None


def optional_member(d: Mapping[str, Any], name: str, kind: type[E]) -> E | None:
    """``member``, or None for a field that is missing, null or empty."""
    return member(d, name, kind) if d.get(name) not in (None, "") else None


def integer(d: Mapping[str, Any], name: str) -> int:
    value = d.get(name)
    if not isinstance(value, int) or isinstance(value, bool):
        raise ValueError(f"{name!r} must be an integer, not {_kind(value)}")
    return value


def optional_integer(d: Mapping[str, Any], name: str) -> int | None:
    return None if d.get(name) is None else integer(d, name)


def boolean(d: Mapping[str, Any], name: str, default: bool | None = None) -> bool:
    value = d.get(name)
    if value is None and default is not None:
        return default
    if not isinstance(value, bool):
        raise ValueError(f"{name!r} must be true or false, not {_kind(value)}")
    return value


def array(d: Mapping[str, Any], name: str, *, optional: bool = False) -> list[Any]:
    value = d.get(name)
    if value is None and optional:
        return []
    if not isinstance(value, list):
        raise ValueError(f"{name!r} must be a list, not {_kind(value)}")
    return value


def obj(d: Mapping[str, Any], name: str, *, optional: bool = False) -> dict[str, Any]:
    value = d.get(name)
    if value is None and optional:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name!r} must be an object, not {_kind(value)}")
    return value


def texts(d: Mapping[str, Any], name: str, *, optional: bool = False) -> list[str]:
    items = array(d, name, optional=optional)
    if not all(isinstance(v, str) for v in items):
        raise ValueError(f"{name!r} must be a list of strings")
    return items


def ints(d: Mapping[str, Any], name: str) -> list[int]:
    items = array(d, name, optional=True)
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in items):
        raise ValueError(f"{name!r} must be a list of integers")
    return items


def text_map(d: Mapping[str, Any], name: str) -> dict[str, str]:
    m = obj(d, name, optional=True)
    if not all(isinstance(v, str) for v in m.values()):
        raise ValueError(f"{name!r} must map names to strings")
    return m


def number_map(d: Mapping[str, Any], name: str) -> dict[str, float]:
    m = obj(d, name, optional=True)
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in m.values()):
        raise ValueError(f"{name!r} must map names to numbers")
    return {k: float(v) for k, v in m.items()}


def finding_dict(d: object) -> dict[str, Any]:
    """A finding as JSON, checked: a code, a known severity, a message, and typed optional fields."""
    if not isinstance(d, dict):
        raise ValueError(f"a finding must be an object, not {_kind(d)}")
    text(d, "code")
    if text(d, "severity") not in SEVERITIES:
        raise ValueError(f"unknown severity {d['severity'][:40]!r}")
    text(d, "message")
    optional_text(d, "fix")
    where = obj(d, "where", optional=True)
    for name in Where.__dataclass_fields__:
        _ = optional_integer(where, name) if name in WHERE_INTS else optional_text(where, name)
    texts(d, "evidence", optional=True)
    optional_text(d, "template")
    params = obj(d, "params", optional=True)
    for key, value in params.items():
        scalar = value is None or (isinstance(value, (str, int, float)) and not isinstance(value, bool))
        if key in WHERE_FIELDS or not scalar:
            raise ValueError(f"finding parameter {key[:40]!r} must be a string, a number or null, and no Where field")
    return d


def findings(d: Mapping[str, Any], name: str, *, optional: bool = False) -> list[Finding]:
    return [Finding.from_dict(finding_dict(f)) for f in array(d, name, optional=optional)]


def tables(d: Mapping[str, Any], name: str) -> list[Table]:
    out = []
    for t in array(d, name):
        if not isinstance(t, dict):
            raise ValueError(f"a table must be an object, not {_kind(t)}")
        rows = array(t, "rows")
        if not all(isinstance(r, list) and all(isinstance(c, str) for c in r) for r in rows):
            raise ValueError("a table's rows must be lists of strings")
        out.append(Table(title=text(t, "title"), columns=tuple(texts(t, "columns")),
                         rows=tuple(tuple(r) for r in rows), caption=optional_text(t, "caption")))
    return out
