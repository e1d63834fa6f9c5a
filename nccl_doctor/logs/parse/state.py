"""What every line handler of the parser shares: the parser's state (``ParserState``), evidence and facts,
the memo of messages already read, and the grouping of warnings and errors.

The handlers are functions over the state: ``parser.py`` (the line flow) calls ``infolines.py`` (INFO
messages), which calls ``commlines.py`` (init and channel lines), which calls this module; each module only
calls down, never up.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass, field
from typing import TypeVar

from nccl_doctor.logs.catalog.formats import says_recovery
from nccl_doctor.logs.errorrules import WARN_PATTERNS
from nccl_doctor.logs.parse.model import (
    MAX_GROUPS,
    MAX_SET,
    MIXED_PG,
    Category,
    Comm,
    ErrorKey,
    Evidence,
    Fact,
    Folded,
    Group,
    Membership,
    ParseResult,
    Proc,
)
from nccl_doctor.logs.parse.patterns import (
    LAUNCHER_RANK_RE,
    PT_PG_RE,
    PT_RANK_RE,
    RANFOR_RE,
    TIMEOUT_RE,
    WATCHDOG_RE,
    warn_kind,
)
from nccl_doctor.logs.parse.reader import clean
from nccl_doctor.logs.parse.warnsigns import (
    BARE_CUDA_FAILURE_RE,
    TORCH_CUDA_ERROR_RE,
    async_fatal,
    catalog_fatal,
    collnet_fallback,
    collnet_setup,
    fatal_beyond_rules,
    teardown,
    transport_hint,
)

MAX_MEMO = 4096  # distinct messages memoised per memo (``_names``, ``_settings``, ``_noop``) before it starts over
EVIDENCE_CHARS = 500  # characters of a line kept as evidence
GROUP_TEXT_CHARS = 240  # characters of a message kept as its group's text
FOLDED_COMM = "folded"  # the key of the sink communicator (never in the result)
_STATUS_RE = re.compile(r"(?:with status=|with error |status=)(?:\w+\()?(\d+)")
_VENDOR_ERR_RE = re.compile(r"vendor[ _]err(?:or)?[ =](\d+)")

_V = TypeVar("_V")


@dataclass(slots=True)
class ParserState:
    """Everything the parser knows between two lines: the result being filled, where in the input the current
    line is, the memos of messages already read, and what is held until the next line. The line handlers are
    functions over it (here, ``commlines.py``, ``infolines.py``, ``parser.py``); ``merge.py`` merges two states
    field by field (``PARSER_RULES``)."""

    result: ParseResult = field(default_factory=ParseResult)
    file: str | None = None
    lineno: int = 0
    prefix_cache: dict[str, Proc | None] = field(default_factory=dict)  # a line's prefix -> its process
    held: str | None = None  # a long NCCL line that may continue on the next line
    held_lineno: int = 0
    unidentified: Comm | None = None  # the comm of channel lines of no process
    orphans: list[Comm] = field(default_factory=list)
    misfits: dict[Proc, Comm] = field(default_factory=dict)  # per process: channel lines none of its comms can hold
    noop: dict[str, bool] = field(default_factory=dict)  # INFO message -> "info does nothing with it" (noop_message)
    # INFO message -> what it says, whoever printed it (see remember): a network or plugin name, a setting
    names: dict[str, str | None] = field(default_factory=dict)
    settings: dict[str, tuple[str, str] | None] = field(default_factory=dict)
    pending: dict[Proc, Counter[int]] = field(default_factory=dict)  # per process: error traces not yet fatal
    # the communicator of every membership past MAX_COMMS: not in ``result``, its lines not kept
    sink: Comm = field(default_factory=lambda: Comm(FOLDED_COMM))
    # what ``merge.check`` needs to know of a range parsed from a fresh state (``track``: a worker's state)
    track: bool = False
    splice_checked: set[str] = field(default_factory=set)  # host names looked up by known_suffix
    splice_found: bool = False  # one of them was cut out of a known host name
    rekeyed: bool = False  # a comm was re-keyed (that reads the comm's members over all ranges)
    cache_cleared: bool = False  # the prefix cache overflowed
    pending_new: int = 0  # processes that got error traces pending (``pending``)


def fold_comm(st: ParserState, proc: Proc) -> Membership:
    """An init line of a communicator past ``MAX_COMMS``: counted; the process's lines until its next
    communicator go to the sink (``info`` drops them)."""
    st.result.folded[Folded.COMMS] += 1
    proc.cur = Membership(st.sink)
    return proc.cur


def ev_at(st: ParserState, text: str, host: str | None = None, rank: int | None = None) -> Evidence:
    return Evidence(st.file, st.lineno, clean(text)[:EVIDENCE_CHARS], host, rank)


def fact(st: ParserState, key: str, proc: Proc | None, msg: str) -> None:
    """Keep the first line of a transport fact and the hosts that printed it (bounded)."""
    r = st.result
    host = proc.host if proc is not None else None
    if key not in r.facts:
        if len(r.facts) >= MAX_GROUPS:
            return
        rank = proc.cur.rank if proc is not None and proc.cur is not None else None
        r.facts[key] = ev_at(st, f"{host}: {msg}" if host else msg, host, rank)
    hosts = r.fact_hosts.setdefault(key, set())
    if host and len(hosts) < MAX_SET:
        hosts.add(host)


def remember(memo: dict[str, _V], msg: str, value: _V) -> _V:
    """Memoise what a message says whoever printed it (exact text -> value), bounded: the same few
    texts come once per process, so each is matched once."""
    if len(memo) >= MAX_MEMO:
        memo.clear()
    memo[msg] = value
    return value

# warnings and errors ------------------------------------------------------------------------
def warn(st: ParserState, proc: Proc | None, msg: str, *, src: str = "", info: bool = False) -> None:
    """Classify an NCCL WARN (or an INFO line that says the same) into an error or a warning."""
    msg = clean(msg)
    host = proc.host if proc is not None else None
    rank = proc.cur.rank if proc is not None and proc.cur is not None else None
    text = f"{host}: {msg}" if host else msg
    hint = transport_hint(f"{src} {msg}" if src else msg)
    if hint is not None:
        fact(st, f"{Fact.HINT_}{hint}", proc, msg)
    if teardown(msg):
        return
    if fatal_beyond_rules(msg):  # the last connect retry, socketFinalizeAccept: wrong type
        error(st, Category.CONNECT, text, host, rank=rank, kind=warn_kind(msg), shown=msg)
        return
    if async_fatal(msg):
        st.result.verbs_seen = True
        error(st, Category.VERBS, text, host, rank=rank, kind=warn_kind(msg), shown=msg)
        return
    if collnet_fallback(msg) and proc is not None:
        recover(st, proc)
    # "Call to connect returned ..., retrying": not fatal itself; nor the CollNet set-up NCCL gives up
    retrying = (info and "retrying" in msg) or collnet_setup(msg) or says_recovery(msg)
    for category, rx in WARN_PATTERNS if not retrying else ():
        if rx.search(msg):
            if category in (Category.IB_COMPLETION, Category.VERBS):
                st.result.verbs_seen = True
            error(st, category, text, host, rank=rank, kind=warn_kind(msg), shown=msg)
            return
    kind = warn_kind(msg)
    if not retrying and catalog_fatal(msg):  # NCCL's source returns an error after it (data/nccl-catalog)
        held = proc.fatal_warn if proc is not None else None
        if proc is None:
            error(st, Category.NCCL_ERROR, text, host, rank=rank, kind=kind, shown=msg)
        elif held is None:
            proc.fatal_warn = (st.file, st.lineno, rank, msg[:EVIDENCE_CHARS], 1)
        elif warn_kind(held[3]) == kind:
            proc.fatal_warn = (*held[:4], held[4] + 1)
        return  # (a later fatal WARN of another kind: the first one is the cause)
    st.result.group(st.result.warnings, kind, Category.WARN, kind, ev_at(st, text, host, rank), host=host,
                      rank=rank, text=msg[:GROUP_TEXT_CHARS])


def judge_fatal_warn(st: ParserState, proc: Proc, *, recovered: bool) -> None:
    """The fatal WARN a process held: a warning if it went on after it (NCCL handled the error), an error if
    the input ends first."""
    held, proc.fatal_warn = proc.fatal_warn, None
    if held is None:
        return
    file, line, rank, msg, count = held
    host, r = proc.host, st.result
    ev = Evidence(file, line, clean(f"{host}: {msg}")[:EVIDENCE_CHARS], host, rank)
    kind = warn_kind(msg)
    if recovered:
        g = r.group(r.warnings, kind, Category.WARN, kind, ev, host=host, rank=rank, text=msg[:GROUP_TEXT_CHARS])
    else:
        g = error(st, Category.NCCL_ERROR, ev.text, host, kind=kind, shown=msg, rank=rank, ev=ev)
    g.count += count - 1  # (one evidence line: the first)


def judge_unrecovered(st: ParserState) -> None:
    """At the end of the input: the fatal WARNs no process went on from are errors."""
    for proc in st.result.procs.values():
        if proc.fatal_warn is not None:
            judge_fatal_warn(st, proc, recovered=False)


def pending_trace(st: ParserState, proc: Proc | None, code: int) -> None:
    """An error trace of a process: recovered from if the process later completes an init (see ``recover``)."""
    if proc is None:
        return
    pending = st.pending.get(proc)
    if pending is None:
        st.pending_new += 1  # (a range's worker: merge.check bounds the merged memo by it)
        if len(st.pending) >= MAX_MEMO:
            st.pending.clear()
        pending = st.pending[proc] = Counter()
    pending[code] += 1


def recover(st: ParserState, proc: Proc) -> None:
    """The process went on (an init completed, CollNet was given up for the point-to-point network): the
    error traces it printed since its last such point were returns NCCL handled, not the job's failure."""
    if proc.fatal_warn is not None:
        judge_fatal_warn(st, proc, recovered=True)
    pending = st.pending.pop(proc, None)
    if pending:
        st.result.retcodes.subtract(pending)
        for code in [c for c, n in st.result.retcodes.items() if n <= 0]:
            del st.result.retcodes[code]


def error(st: ParserState, category: Category, text: str, host: str | None, *, kind: str, shown: str,
           rank: int | None = None, ev: Evidence | None = None) -> Group:
    """Group one fatal message; the key holds what selects its fix (an IB completion's status)."""
    hint = transport_hint(text)  # PyTorch's one-line exceptions embed NCCL's last error ("Last error: NET/IB ...")
    if hint is not None and f"{Fact.HINT_}{hint}" not in st.result.facts:
        fact(st, f"{Fact.HINT_}{hint}", None, text)
    key: ErrorKey = (category, kind)
    status = vendor = None
    if category == Category.IB_COMPLETION:
        m = _STATUS_RE.search(text)
        v = _VENDOR_ERR_RE.search(text)
        status, vendor = (m.group(1) if m else None), (v.group(1) if v else None)
        key = (category, kind, status)
    g = st.result.group(st.result.errors, key, category, kind, ev or ev_at(st, text, host, rank), host=host,
                          rank=rank, text=shown[:GROUP_TEXT_CHARS])
    if status and "status" not in g.detail:
        g.detail["status"] = status
    if vendor and "vendor_err" not in g.detail:
        g.detail["vendor_err"] = vendor
    return g


def torch_exception(st: ParserState, text: str) -> bool:
    """A PyTorch line that carries a CUDA error NCCL's own lines may never show (c10's ``CUDA error: %s``
    in ``Process group watchdog thread terminated with exception: ...``, ProcessGroupNCCL.cpp): fatal.
    Called for lines without an NCCL prefix that name ProcessGroupNCCL, and by ``cuda_failure`` for a
    traceback's line; True if it was one."""
    m = TORCH_CUDA_ERROR_RE.search(text)
    if m is None:
        return False
    rm = PT_RANK_RE.search(text)
    lm = LAUNCHER_RANK_RE.match(text)
    rank = int(rm.group(1)) if rm else (int(next(g for g in lm.groups() if g)) if lm else None)
    error(st, Category.CUDA, text, None, kind=warn_kind(m.group(0)), shown=m.group(0), rank=rank)
    return True


def cuda_failure(st: ParserState, text: str) -> bool:
    """A CUDA error on a line of its own, without NCCL's prefix or PyTorch's ProcessGroupNCCL around it:
    nccl-tests' ``Cuda failure common.cu:892 'out of memory'``, or a traceback's ``RuntimeError: CUDA error:
    an illegal memory access was encountered``. The job died of it, whatever else the log holds (often
    nothing: no INFO line was ever printed): fatal. True if it was one."""
    if torch_exception(st, text):
        return True
    m = BARE_CUDA_FAILURE_RE.search(text)
    if m is None:
        return False
    error(st, Category.CUDA, text, None, kind=warn_kind(m.group(0)), shown=m.group(0))
    return True


def watchdog(st: ParserState, text: str) -> None:
    m = WATCHDOG_RE.search(text)
    seq, op = (m.group(1), m.group(2)) if m else ("?", "?")
    key = (op, seq)
    rm = PT_RANK_RE.search(text)
    lm = LAUNCHER_RANK_RE.match(text)
    rank = int(rm.group(1)) if rm else (int(next(g for g in lm.groups() if g)) if lm else None)
    if rank is not None:
        st.result.named_ranks.add(rank)
    g = st.result.group(st.result.watchdog, key, Category.WATCHDOG, f"{op} SeqNum={seq}", ev_at(st, text),
                          rank=rank)
    t = TIMEOUT_RE.search(text)
    if t:
        g.detail["timeout_ms"] = t.group(1)
    pm = PT_PG_RE.search(text)  # SeqNums count per process group: only one group's compare
    pg = pm.group(1) if pm else ""
    if g.detail.setdefault("pg", pg) != pg:
        g.detail["pg"] = MIXED_PG
    ran = RANFOR_RE.search(text)
    if ran and int(ran.group(1)) > int(g.detail.get("ran_for_ms", 0)):
        g.detail["ran_for_ms"] = ran.group(1)


