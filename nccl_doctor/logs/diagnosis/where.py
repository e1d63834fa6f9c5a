"""Where a finding is (host, rank, communicator, file:line) and the log lines it quotes."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TypedDict

from nccl_doctor.logs.diagnosis.transports import Located, by_position
from nccl_doctor.logs.parse.commlines import UNIDENTIFIED
from nccl_doctor.logs.parse.model import UNKNOWN_HOST, Comm, Evidence, Group, ParseResult
from nccl_doctor.report import hosts_text

QUOTED_LINES = 3  # evidence lines a finding quotes unless it says otherwise


class WhereArgs(TypedDict, total=False):
    """The location keywords of ``report.finding``, as a finding about a log line has them."""

    host: str | None
    rank: int | None
    comm: str | None
    file: str | None
    line: int | None


def ranges(numbers: Iterable[int]) -> str:
    """[0,1,2,5,7,8] -> "0-2,5,7-8" (the JSON form)."""
    return ",".join(_runs(numbers))


def _runs(numbers: Iterable[int]) -> list[str]:
    """[0,1,2,5,7,8] -> ["0-2", "5", "7-8"]."""
    out: list[str] = []
    run: list[int] = []
    for n in sorted(set(numbers)):
        if run and n == run[-1] + 1:
            run.append(n)
            continue
        if run:
            out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
        run = [n]
    if run:
        out.append(f"{run[0]}-{run[-1]}" if len(run) > 1 else str(run[0]))
    return out


def ranks_text(ranks: Iterable[int]) -> str:
    """``rank 3``, ``ranks 0-2``, ``ranks 1-2 and 5-6``, ``ranks 1-2, 5-6 and 9``: words, for sentences."""
    runs = _runs(ranks)
    text = f"{', '.join(runs[:-1])} and {runs[-1]}" if len(runs) > 1 else "".join(runs)
    return f"rank {text}" if text.isdigit() else f"ranks {text}"


def first_host(g: Group) -> str | None:
    """The group's first host by name (a finding names one)."""
    return sorted(g.hosts)[0] if g.hosts else None


def on_hosts(hosts: Iterable[str]) -> str:
    """`` on n[1-3,7]`` for the hosts lines came from (``?``, an unknown host, is left out); ``""`` for none."""
    text = hosts_text(h for h in hosts if h != UNKNOWN_HOST)
    return f" on {text}" if text else ""


def group_evidence(groups: list[Group], limit: int = QUOTED_LINES) -> tuple[str, ...]:
    """The first example lines of the groups, in order."""
    out: list[str] = []
    for g in groups:
        for ev in g.examples:
            if len(out) < limit:
                out.append(str(ev))
    return tuple(out)


def all_ranks(r: ParseResult) -> set[int]:
    """Every rank the logs name, in a communicator or outside one."""
    ranks = set(r.named_ranks)
    for c in r.comms.values():
        ranks.update(c.rank_host)
    return ranks


def setting(r: ParseResult, name: str) -> str | None:
    """The value NCCL echoed most for a setting (``NAME set by environment to VALUE``)."""
    c = r.settings.get(name)
    return c.most_common(1)[0][0] if c else None


def comm_name(comm: Comm | None) -> str | None:
    """A communicator as a finding names it; None for the one of unidentified channel lines."""
    return comm.key if comm is not None and comm.key != UNIDENTIFIED else None


def where_of(ev: Evidence | None, comm: Comm | None = None, host: str | None = None) -> WhereArgs:
    """The host/rank/comm and file:line of the line a finding quotes first."""
    if ev is None:
        return {"host": host, "comm": comm_name(comm)}
    return {"host": ev.host or host, "rank": ev.rank, "comm": comm_name(comm), "file": ev.file, "line": ev.line}


def group_where(g: Group, *, host: str | None = None, rank: int | None = None) -> WhereArgs:
    """Where a group of messages is: a host and rank, and the file:line of its first occurrence."""
    return {"host": host, "rank": rank, "file": g.first.file if g.first else None,
            "line": g.first.line if g.first else None}


def quoted(lines: list[Evidence], limit: int = QUOTED_LINES) -> tuple[str, ...]:
    """The lines as a finding quotes them (``file:line: text``), each once."""
    out: list[str] = []
    for ev in lines:
        text = str(ev)
        if text not in out and len(out) < limit:
            out.append(text)
    return tuple(out)


def any_line(r: ParseResult) -> Evidence | None:
    """The first NCCL line kept (version, communicator, fact, error) for findings about what is missing."""
    candidates = [*r.version_first.values(), *(c.first for c in r.comms.values() if c.first), *r.facts.values()]
    groups = [*r.errors.values(), *r.watchdog.values(), *r.warnings.values()]
    candidates += [g.first for g in groups if g.first]
    located: list[Located] = [(None, ev) for ev in candidates]
    return by_position(located)[0][1] if candidates else None


def input_where(r: ParseResult, host: str | None) -> WhereArgs:
    """Where a finding about the whole input is: the host, else the file read."""
    return {"host": host, "file": r.sources[0]["name"] if len(r.sources) == 1 else None}
