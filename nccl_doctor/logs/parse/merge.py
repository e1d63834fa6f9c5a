"""Exact merge of a parser state with the partial state of the input that follows it (``parse --jobs N``).

A worker parses a byte range of a log from a fresh ``ParserState`` (``track=True``: it records what
its range depended on). Its state equals what the sequential
parser would add to the state of everything before the range when the range does not depend on what
came before: its processes (``host:pid``) and line prefixes are new, no line is held across the start of
the range, no host name is cut out of a known one (``parser.known_suffix``) and no cap is reached on either
side. ``merge_into`` checks exactly these conditions first (``check``); when one fails it changes nothing
and returns False, and the caller parses the range itself, sequentially, from the exact state before it.
So the merged report is the sequential one, byte for byte, whatever the input.

Every field of ``model.py``'s dataclasses and of ``ParserState`` has a rule below (``RESULT_RULES``,
``COMM_RULES``, ``GROUP_RULES``, ``PARSER_RULES``; ``Proc``, ``Membership`` and ``Evidence`` are moved,
not merged). A field without a rule makes ``check`` fail (and the test ``test_parallel_rules.py`` fail
loudly), so a new field is never merged wrongly.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable
from dataclasses import fields
from typing import Any

from nccl_doctor.logs.parse.commlines import MAX_RANKS_PER_COMM
from nccl_doctor.logs.parse.infolines import MAX_SETTING_VALUES
from nccl_doctor.logs.parse.model import (
    MAX_COMMS,
    MAX_EXAMPLES,
    MAX_GROUPS,
    MAX_HOSTS,
    MAX_NAMES,
    MAX_PROCS,
    MAX_SET,
    MAX_TR_EVIDENCE,
    MIXED_PG,
    OTHER,
    Comm,
    Evidence,
    Group,
    Membership,
    Proc,
)
from nccl_doctor.logs.parse.parser import MAX_PREFIXES
from nccl_doctor.logs.parse.state import MAX_MEMO, ParserState

# --- rules: (check(a, b) -> bool, merge(a, b) -> merged value) per field ---------------------------

Rule = tuple[Callable[[Any, Any], bool], Callable[[Any, Any], Any]]


def _ok(_a: object, _b: object) -> bool:
    return True


def _sum(a: Any, b: Any) -> Any:
    return a + b


def _either(a: bool, b: bool) -> bool:
    return a or b


def _first(a: Any, b: Any) -> Any:
    return a if a is not None else b


def _last(a: Any, b: Any) -> Any:
    return b if b is not None else a


def _first_truthy(a: Any, b: Any) -> Any:
    return a or b


def _union(a: set[Any], b: set[Any]) -> set[Any]:
    a |= b
    return a


def _capped_ok(a: set[Any], b: set[Any], cap: int = MAX_SET) -> bool:
    """A set the parser stops adding to at ``cap``: exact when ``a`` is full (nothing more is added) or empty
    (the range kept its own first members), or when neither side dropped a member."""
    return len(a) >= cap or not a or (len(b) < cap and len(a | b) <= cap)


def _capped_union(a: set[Any], b: set[Any], cap: int = MAX_SET) -> set[Any]:
    if len(a) >= cap:
        return a
    if not a:
        return b
    a |= b
    return a


def _counter(a: Counter[Any], b: Counter[Any]) -> Counter[Any]:
    for k, n in b.items():  # (not Counter.update: it also drops nothing, but this keeps zero counts too)
        a[k] = a.get(k, 0) + n
    return a


def _setdefault(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
    for k, v in b.items():
        a.setdefault(k, v)
    return a


def _concat(a: list[Any], b: list[Any]) -> list[Any]:
    a.extend(b)
    return a


def _keep(a: Any, _b: Any) -> Any:
    return a


def _dict_of_sets(a: dict[Any, set[Any]], b: dict[Any, set[Any]]) -> dict[Any, set[Any]]:
    for k, v in b.items():
        mine = a.get(k)
        if mine is None:
            a[k] = v
        else:
            mine |= v
    return a


def _dict_of_capped_sets_ok(a: dict[Any, set[Any]], b: dict[Any, set[Any]]) -> bool:
    return all(_capped_ok(a.get(k, set()), v) for k, v in b.items())


def _dict_of_capped_sets(a: dict[Any, set[Any]], b: dict[Any, set[Any]]) -> dict[Any, set[Any]]:
    for k, v in b.items():
        a[k] = _capped_union(a[k], v) if k in a else v
    return a


def _max_dev(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    for k, v in b.items():
        if v > a.get(k, -1):
            a[k] = v
    return a


def _disjoint(a: dict[Any, Any], b: dict[Any, Any]) -> bool:
    return not (a.keys() & b.keys())


def _settings_ok(a: dict[str, Counter[str]], b: dict[str, Counter[str]]) -> bool:
    return all(len(c) < MAX_SETTING_VALUES or name not in a for name, c in b.items())


def _settings(a: dict[str, Counter[str]], b: dict[str, Counter[str]]) -> dict[str, Counter[str]]:
    for name, counts in b.items():
        mine = a.get(name)
        if mine is None:
            mine = a[name] = Counter()
        for value, n in counts.items():  # the values the sequential parser would have kept
            if value in mine or len(mine) < MAX_SETTING_VALUES:
                mine[value] += n
    return a


def _tables_ok(a: dict[Hashable, Group], b: dict[Hashable, Group]) -> bool:
    """Group tables: no kind past MAX_GROUPS on either side, and none in both together."""
    if not a:  # the range's own table is the sequential one
        return True
    keys = a.keys() | b.keys()
    return len(keys) <= MAX_GROUPS and OTHER not in keys and (OTHER, OTHER) not in keys and all(
        check_fields(GROUP_RULES, a[k], g) for k, g in b.items() if k in a)


def _tables(a: dict[Hashable, Group], b: dict[Hashable, Group]) -> dict[Hashable, Group]:
    for k, g in b.items():
        mine = a.get(k)
        if mine is None:
            a[k] = g
        else:
            merge_fields(GROUP_RULES, mine, g)
    return a


def _facts_ok(a: dict[str, Evidence], b: dict[str, Evidence]) -> bool:
    return not a or len(a.keys() | b.keys()) <= MAX_GROUPS


def _link_layers(a: Counter[str], b: Counter[str]) -> Counter[str]:
    raise AssertionError("merged in merge_into, from the hosts' device lists")  # pragma: no cover


def _comms_ok(a: dict[str, Comm], b: dict[str, Comm]) -> bool:
    return _within(a, b, MAX_COMMS) and all(check_fields(COMM_RULES, a[k], c) for k, c in b.items() if k in a)


def _within(a: dict[Any, Any], b: dict[Any, Any], cap: int) -> bool:
    """The keys of both together stay within ``cap``: the sequential parser, which stops adding new ones at
    ``cap``, added each of the range's (a range that itself went past a limit fails ``_none_folded``)."""
    return len(a) + len(b) <= cap or len(a) + sum(1 for k in b if k not in a) <= cap


def _names_ok(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """A table of names (``CappedDict``, ``CappedCounter``): the range dropped none, both keep all of theirs."""
    return not getattr(b, "dropped", 0) and _within(a, b, MAX_NAMES)


def _none_folded(_a: Counter[str], b: Counter[str]) -> bool:
    """The range kept every host, process and communicator it met: past a limit, which ones the sequential
    parser keeps depends on what came before the range."""
    return not b


def _comms(a: dict[str, Comm], b: dict[str, Comm]) -> dict[str, Comm]:
    raise AssertionError("merged in merge_into, which re-points the memberships")  # pragma: no cover


RESULT_RULES: dict[str, Rule] = {
    "sources": (_ok, _concat),
    "lines": (_ok, _sum),
    "nccl_lines": (_ok, _sum),
    "versions": (lambda a, b: _names_ok(a, b) and _dict_of_capped_sets_ok(a, b), _dict_of_capped_sets),
    "version_first": (_names_ok, _setdefault),
    "hosts": (lambda a, b: _within(a, b, MAX_HOSTS), _dict_of_sets),
    "host_max_dev": (_ok, _max_dev),
    "procs": (lambda a, b: _disjoint(a, b) and len(a) + len(b) <= MAX_PROCS, lambda a, b: a | b),
    "comms": (_comms_ok, _comms),
    "named_ranks": (_ok, _union),
    "networks": (_names_ok, _counter),
    "net_plugins": (_names_ok, _counter),
    "ib_devices": (_ok, _setdefault),  # the first device list of a host is kept
    "link_layers": (_names_ok, _link_layers),
    "ib_no_device": (_ok, _setdefault),
    "ib_sideband": (_ok, _union),
    "socket_ifaces": (_ok, _setdefault),
    "bootstrap_ifaces": (_ok, _setdefault),
    "oob_ifaces": (_ok, _setdefault),
    "bootstrap_net": (_ok, _setdefault),  # the first device per host
    "settings": (lambda a, b: _names_ok(a, b) and _settings_ok(a, b), _settings),
    "gdr_hca": (_ok, _dict_of_sets),
    "gdr_gpu": (_names_ok, _counter),
    "ofi_providers": (_names_ok, _counter),
    "nvls_available": (_ok, _either),
    "warnings": (_tables_ok, _tables),
    "errors": (_tables_ok, _tables),
    "retcodes": (_ok, _counter),  # a range only subtracts its own processes' pending traces
    "watchdog": (_tables_ok, _tables),
    "verbs_seen": (_ok, _either),
    "facts": (_facts_ok, _setdefault),
    "fact_hosts": (_dict_of_capped_sets_ok, _dict_of_capped_sets),
    "skipped": (_ok, _keep),
    "folded": (_none_folded, _counter),
}


def _rank_host_ok(a: dict[int, str | None], b: dict[int, str | None]) -> bool:
    """Two ranges name the host of a rank differently: which one wins depends on the line (init or channel)."""
    if len(a) + len(b) >= MAX_RANKS_PER_COMM:
        return False
    return all(h is None or a.get(r) is None or a[r] == h for r, h in b.items())


def _rank_host(a: dict[int, str | None], b: dict[int, str | None]) -> dict[int, str | None]:
    for r, h in b.items():
        if a.get(r) is None:
            a[r] = h
    return a


def _tr_first(a: dict[Any, list[Any]], b: dict[Any, list[Any]]) -> dict[Any, list[Any]]:
    for key, evs in b.items():
        mine = a.setdefault(key, [])
        mine.extend(evs[:MAX_TR_EVIDENCE - len(mine)])
    return a


def _nranks_ok(a: int | None, b: int | None) -> bool:
    return not a or not b or a == b


COMM_RULES: dict[str, Rule] = {
    "key": (lambda a, b: a == b, _keep),
    "comm_id": (_ok, _keep),
    "nranks": (_nranks_ok, _first_truthy),
    "nnodes": (_ok, _last),  # written by each line that shows it
    "local_ranks": (_ok, _last),
    "members": (_ok, _sum),
    "complete": (_ok, _sum),
    "hosts": (_ok, _union),
    "rank_host": (_rank_host_ok, _rank_host),
    "intra": (_ok, _counter),
    "net": (_ok, _counter),
    "collnet": (_ok, _counter),
    "nvls": (_ok, _either),
    "ring_gdr": (_ok, _union),
    "intra_src": (lambda a, b: _capped_ok(a, b, MAX_RANKS_PER_COMM),
                  lambda a, b: _capped_union(a, b, MAX_RANKS_PER_COMM)),
    "first": (_ok, _first_truthy),
    "tr_first": (_ok, _tr_first),
}


def _detail_ok(a: dict[str, str], b: dict[str, str]) -> bool:
    return set(b) <= set(_DETAIL_RULES)


def _detail(a: dict[str, str], b: dict[str, str]) -> dict[str, str]:
    for k, v in b.items():
        a[k] = _DETAIL_RULES[k](a.get(k), v)
    return a


_DETAIL_RULES: dict[str, Callable[[str | None, str], str]] = {
    "status": lambda a, b: a if a is not None else b,  # the first status an IB completion showed
    "vendor_err": lambda a, b: a if a is not None else b,
    "timeout_ms": lambda a, b: b,  # the last one read
    "pg": lambda a, b: b if a is None else (a if a == b else MIXED_PG),
    "ran_for_ms": lambda a, b: b if a is None or int(b) > int(a) else a,
}

GROUP_RULES: dict[str, Rule] = {
    "category": (lambda a, b: a == b, _keep),
    "kind": (lambda a, b: a == b, _keep),
    "text": (_ok, _keep),
    "count": (_ok, _sum),
    "first": (_ok, _first),
    "examples": (_ok, lambda a, b: a + b[:MAX_EXAMPLES - len(a)]),
    "hosts": (_capped_ok, _capped_union),
    "ranks": (_capped_ok, _capped_union),
    "detail": (_detail_ok, _detail),
}

# Not merged: a range's processes are its own (``procs`` must be disjoint), and so are their memberships;
# evidence is kept or dropped whole.
MOVED = {Proc: "a range's processes are new (checked)", Membership: "belongs to a process",
         Evidence: "kept or dropped whole"}


def check_fields(rules: dict[str, Rule], a: object, b: object) -> bool:
    try:
        return all(rules[f.name][0](getattr(a, f.name), getattr(b, f.name)) for f in fields(a))  # type: ignore[arg-type]
    except KeyError:  # a field without a rule: never merged
        return False


def merge_fields(rules: dict[str, Rule], a: object, b: object) -> None:
    for f in fields(a):  # type: ignore[arg-type]
        setattr(a, f.name, rules[f.name][1](getattr(a, f.name), getattr(b, f.name)))


# --- the parser's own state --------------------------------------------------------------------------


def _parser_ok(s: ParserState, w: ParserState) -> bool:
    """The range parsed from a fresh state did what the sequential parser would do after ``s``."""
    if not w.track:  # a worker's state records what its range depended on; another does not
        return False
    if s.held is not None:  # a long line at the end of ``s`` may go on in the range: read it in sequence
        return False
    if w.rekeyed or w.splice_found or w.cache_cleared:
        return False
    if s.prefix_cache.keys() & w.prefix_cache.keys():
        return False
    if len(s.prefix_cache) + len(w.prefix_cache) > MAX_PREFIXES:
        return False
    hosts = s.result.hosts
    for name in w.splice_checked:  # a new host name that ends with a known one would have been cut
        if any(name[j:] in hosts for j in range(1, len(name))):
            return False
    return len(s.pending) + w.pending_new <= MAX_MEMO


def _take(_a: Any, b: Any) -> Any:
    return b


def _update(a: dict[Any, Any], b: dict[Any, Any]) -> dict[Any, Any]:
    a.update(b)
    return a


def _unidentified_ok(a: Comm | None, b: Comm | None) -> bool:
    return a is None or b is None or check_fields(COMM_RULES, a, b)


def _unmerged(_a: Any, _b: Any) -> Any:
    raise AssertionError("merged in merge_into, which re-points the memberships")  # pragma: no cover


# A rule per field of ``ParserState``: ``result`` by RESULT_RULES, the rest here; ``_parser_ok`` checks what
# the fields of a worker's range (``track``, ``splice_*``, ``rekeyed``, ``cache_cleared``, ``pending_new``) say.
PARSER_RULES: dict[str, Rule] = {
    "result": (lambda a, b: check_fields(RESULT_RULES, a, b), _unmerged),
    "file": (_ok, _keep),  # the caller's (the range's file, set before the merge)
    "lineno": (_ok, _take),  # where the range ended
    "prefix_cache": (_ok, _update),  # disjoint (checked)
    "held": (_ok, _take),  # the line the range held at its end (none held before it: checked)
    "held_lineno": (_ok, _take),
    "unidentified": (_unidentified_ok, _unmerged),
    "orphans": (_ok, _concat),
    "misfits": (_ok, _update),  # per process: a range's processes are its own
    "noop": (_ok, _keep),  # memos: pure; the worker's are cleared before it sends its state
    "names": (_ok, _keep),
    "settings": (_ok, _keep),
    "pending": (_ok, _update),  # per process (their number is bounded: checked)
    "sink": (_ok, _keep),  # nothing of it is kept
    "track": (_ok, _keep),
    "splice_checked": (_ok, _keep),
    "splice_found": (_ok, _keep),
    "rekeyed": (_ok, _keep),
    "cache_cleared": (_ok, _keep),
    "pending_new": (_ok, _keep),
}
_UNMERGED = ("result", "unidentified")


def check(s: ParserState, w: ParserState) -> bool:
    """Whether ``merge_into(s, w)`` is exact (and knows every field)."""
    return _parser_ok(s, w) and check_fields(PARSER_RULES, s, w)


def merge_into(s: ParserState, w: ParserState) -> bool:
    """Add the state of the range ``w`` parsed (a worker's: ``track``) to ``s``, the exact state of everything
    before it.

    False (``s`` unchanged) when the range cannot be merged exactly: the caller parses it in sequence.
    """
    if not check(s, w):
        return False
    r, q = s.result, w.result
    _merge_comms(s, w)
    for host, devs in q.ib_devices.items():  # link layers count the first device list of each host
        if host not in r.ib_devices:
            for d in devs:
                r.link_layers[d.rsplit("/", 1)[1]] += 1
    for f in fields(r):
        if f.name not in ("comms", "link_layers"):
            setattr(r, f.name, RESULT_RULES[f.name][1](getattr(r, f.name), getattr(q, f.name)))
    for f in fields(s):
        if f.name not in _UNMERGED:
            setattr(s, f.name, PARSER_RULES[f.name][1](getattr(s, f.name), getattr(w, f.name)))
    return True


def _merge_comms(s: ParserState, w: ParserState) -> None:
    """The comms of the range that the state before it already has: merged into those, memberships re-pointed."""
    r, q = s.result, w.result
    moved: dict[int, Comm] = {}
    for key, c in q.comms.items():
        mine = r.comms.get(key)
        if mine is None:
            r.comms[key] = c
        else:
            merge_fields(COMM_RULES, mine, c)
            moved[id(c)] = mine
    if w.unidentified is not None:
        if s.unidentified is None:
            s.unidentified = w.unidentified
        else:
            merge_fields(COMM_RULES, s.unidentified, w.unidentified)
            moved[id(w.unidentified)] = s.unidentified
    if moved:
        for proc in q.procs.values():
            for mem in _memberships(proc):
                mem.comm = moved.get(id(mem.comm), mem.comm)


def _memberships(proc: Proc) -> Iterable[Membership]:
    yield from proc.memberships
    if proc.cur is not None:
        yield proc.cur
