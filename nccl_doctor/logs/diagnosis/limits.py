"""The finding that says a log went past what ``parse`` keeps (``model.MAX_HOSTS``, ``MAX_PROCS``,
``MAX_COMMS``, ``MAX_NAMES``): what was counted instead of kept, so a report never looks complete when it
is not."""

from __future__ import annotations

from dataclasses import fields

from nccl_doctor.codes import Code
from nccl_doctor.logs.parse.model import (
    MAX_COMMS,
    MAX_HOSTS,
    MAX_NAME_CHARS,
    MAX_NAMES,
    MAX_PROCS,
    CappedCounter,
    CappedDict,
    Folded,
    ParseResult,
)
from nccl_doctor.report import Finding, Severity, finding

_WHAT = {
    Folded.HOSTS: f"{MAX_HOSTS:,} hosts (or host names over {MAX_NAME_CHARS} characters): {{n:,}} more process "
                  "prefixes read without their host",
    Folded.PROCS: f"{MAX_PROCS:,} processes: {{n:,}} more process prefixes read without their process",
    Folded.COMMS: f"{MAX_COMMS:,} communicators (or ids over {MAX_NAME_CHARS} characters): {{n:,}} init lines of "
                  "more communicators counted, not analysed",
}


def names_dropped(r: ParseResult) -> dict[str, int]:
    """The tables of names (settings, versions, networks, ...) that dropped some, and how many."""
    out = {}
    for f in fields(r):
        table = getattr(r, f.name)
        if isinstance(table, (CappedCounter, CappedDict)) and table.dropped:
            out[f.name] = table.dropped
    return out


def limits_finding(r: ParseResult) -> Finding | None:
    """One WARN naming each limit reached and how much was folded; None when the log stayed within them."""
    parts = [_WHAT[Folded(k)].format(n=n) for k, n in sorted(r.folded.items()) if n]
    names = names_dropped(r)
    if names:
        parts.append(f"{MAX_NAMES:,} names in one of its tables ({', '.join(names)}): "
                     f"{sum(names.values()):,} more names not kept")
    if not parts:
        return None
    return finding(code=Code.LOG_LIMITS_REACHED, severity=Severity.WARN,
                   message="the input names more than " + "; more than ".join(parts) +
                           ": the report covers the first ones only",
                   fix="check that the input is one job's NCCL log; parse fewer nodes' logs at a time to see the rest",
                   file=r.sources[0]["name"] if len(r.sources) == 1 else None)
