"""``nccl-doctor parse``: read NCCL_DEBUG=INFO logs into a ``ParseResult`` (what NCCL said, per
host, process and communicator); ``diagnose`` turns it into findings. Pure: lines in, result out.

The parser is one streaming pass. State grows with hosts, processes, ranks and communicators, never
with the number of lines: repeated channel lines are recognised by a per-process set of line tails
before any regex runs, and warnings/errors are grouped by kind with a count and a first occurrence.
Formats follow NCCL 2.0 to 2.30 (see ``reference/nccl-facts.md`` section A).

This module holds the line flow (physical lines, hard wraps, prefixes, which handler a message goes
to), as functions over a ``ParserState``; the handlers are in ``infolines.py`` (INFO messages),
``commlines.py`` (init and channel lines) and ``state.py`` (warnings and errors); the entry points
(``parse_lines``, ``parse_paths``) in ``api.py``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

from nccl_doctor.logs.parse.commlines import UNIDENTIFIED, channel, init_line, loose_membership
from nccl_doctor.logs.parse.infolines import INFO_DISPATCH, numeric_info, setting, trace, version_line
from nccl_doctor.logs.parse.model import (
    MAX_HOSTS,
    MAX_NAME_CHARS,
    MAX_PROCS,
    Category,
    Comm,
    Folded,
    ParseResult,
    Proc,
)
from nccl_doctor.logs.parse.patterns import (
    IGNORED_HEADS,
    LAST_ERROR_RE,
    LAUNCHER_RANK_RE,
    MARK_RE,
    MARK_WORDS,
    NCCL_ERROR_RE,
    NCCLTESTS_RANK_RE,
    NVLS_CHANNELS_RE,
    PREFIX_FAST_RE,
    PREFIX_RE,
    PT_RANK_RE,
    warn_kind,
)
from nccl_doctor.logs.parse.reader import (
    MAX_LINE,
    WRAP_MIN,
    clean,
    is_continuation,
)
from nccl_doctor.logs.parse.state import (
    MAX_MEMO,
    ParserState,
    cuda_failure,
    error,
    judge_unrecovered,
    torch_exception,
    warn,
    watchdog,
)
from nccl_doctor.logs.parse.warnsigns import BARE_CUDA_WORDS

# An NCCL INFO line shorter than this is read as complete; from this length on it may have been
# hard-wrapped by a terminal and is held until the next physical line shows whether it goes on. Other
# NCCL lines are held from WRAP_MIN (reader.py) on. ``feed_all`` and ``physical`` both decide by it.
INFO_WRAP_MIN = 160
assert INFO_WRAP_MIN >= WRAP_MIN  # an INFO line held by physical() is held by feed_all too
NOOP_MAX_CHARS = 120  # INFO messages up to this length may be memoised as no-ops (``noop_message``)
MAX_SEEN_TAILS = 4096  # channel-line tails remembered per membership
MAX_PREFIXES = 200_000  # distinct line prefixes cached before the cache starts over
MAX_PREFIX_CHARS = 256  # longer line prefixes are not cached (200,000 of 16 KiB would be 3 GB)
MAX_HOSTS_SPLICE_CHECK = 10_000  # known hosts up to which a new host name is checked for a splice
DISPATCH_CHARS = 5  # an INFO message's handler is chosen by this many first characters
INFO_MARK = " NCCL INFO "  # between a line's prefix and its message
INFO_MARK_LEN = len(INFO_MARK)
WARN_MARK = "NCCL WARN "


# physical lines: hard wraps, CRs and the cheap "is this about NCCL at all" filter
def feed(st: ParserState, line: str) -> None:
    st.lineno += 1
    if "\r" in line:
        for part in line.split("\r"):
            if part:
                physical(st, part)
        return
    physical(st, line)


def feed_all(st: ParserState, lines: Iterable[str]) -> None:  # noqa: C901, PLR0912 - the hot loop: no call per line
    """``feed`` every line, skipping lines that cannot change the result without a call or a regex.

    This loop is the hot path of a 32,768-rank log, where ~75% of the lines are channel lines
    that repeat a connection already counted (only the channel number differs) and ~10% are
    INFO lines the diagnosis never reads (``IGNORED_HEADS``). A line is skipped, and only
    counted, when its prefix is a known process whose current membership already holds the
    line's tail (`` : ...``), or when it is an ignored head of a known prefix. The common case, the
    same prefix as the line before, costs one ``startswith``; any other line takes the careful
    path (``logical`` / ``feed``), after which the cached prefix state is refreshed, because
    only the careful path changes a process's membership.
    """
    cache, careful_feed, careful_logical = st.prefix_cache, feed, logical
    ignored, noop = IGNORED_HEADS, st.noop
    mark, mlen, info_wrap_min = INFO_MARK, INFO_MARK_LEN, INFO_WRAP_MIN  # locals: this loop runs per line
    first = st.lineno + 1
    lineno = first - 1
    careful = 0  # lines not skipped; the others are counted as NCCL lines at the end
    head, hlen, seen = None, 0, None  # "<prefix> NCCL INFO " of the last line, its proc's seen tails
    for lineno, line in enumerate(lines, first):  # (the careful path leaves st.lineno at lineno)
        if head is not None and line.startswith(head):
            c = line[hlen:hlen + 2]
            if c == "Ch" or c == "Ri":  # noqa: PLR1714 - two compares, no set built or hashed
                if seen is not None and (k := line.find(" : ", hlen)) > 0 and line[k:] in seen:
                    continue
            elif c in ignored and line.find(" NCCL ", hlen) < 0:
                continue
            elif (c == "Co" or c[:1].isdigit()) and st.held is None and len(line) < info_wrap_min:
                msg = line[hlen:]
                q = noop.get(msg)
                if q is None:
                    q = noop_message(st, msg)
                if q:
                    continue
            i = hlen - mlen
        else:
            i = line.find(mark)
            if i > 0:
                j = i + mlen
                c = line[j:j + 2]
                if c == "Ch" or c == "Ri":  # noqa: PLR1714 - as above
                    proc = cache.get(line[:i])
                    cur = proc.cur if proc is not None else None
                    if cur is not None and (k := line.find(" : ", i)) > 0 and line[k:] in cur.seen:
                        continue
                elif c in ignored and line.find(" NCCL ", j) < 0 and line[:i] in cache:
                    continue
        careful += 1
        if i > 0 and "\r" not in line:  # an INFO line: what physical() does with it, without the calls
            st.lineno = lineno
            if st.held is not None:
                flush_held(st)
            if len(line) < info_wrap_min:  # what physical() decides for an INFO line
                careful_logical(st, line)  # an ordinary INFO line: straight to its handler
            else:  # a long line may go on on the next physical line (hard wrap): held until then
                st.held, st.held_lineno = line, lineno
        else:
            st.lineno = lineno - 1
            careful_feed(st, line)
        head = None
        if i > 0:
            prefix = line[:i]
            if prefix in cache:
                proc = cache[prefix]
                hlen = i + mlen
                head = line[:hlen]
                seen = proc.cur.seen if proc is not None and proc.cur is not None else None
    st.lineno = lineno
    st.result.nccl_lines += lineno - first + 1 - careful  # the lines skipped


def would_skip(st: ParserState, line: str) -> bool:
    """Whether ``feed_all`` would skip this NCCL INFO line (count it only) in the present state while a
    line is held (its no-op memo then skips nothing): what ``parallel.py`` asks before it reads a range's
    first lines onto a held line."""
    i = line.find(INFO_MARK)
    if i <= 0:
        return False
    j = i + INFO_MARK_LEN
    c = line[j:j + 2]
    if c == "Ch" or c == "Ri":  # noqa: PLR1714 - as in feed_all
        proc = st.prefix_cache.get(line[:i])
        cur = proc.cur if proc is not None else None
        return cur is not None and (k := line.find(" : ", i)) > 0 and line[k:] in cur.seen
    return c in IGNORED_HEADS and line.find(" NCCL ", j) < 0 and line[:i] in st.prefix_cache


def take_continuations(st: ParserState, lines: Iterable[str]) -> bool:
    """Glue the first ``lines`` of what follows onto the held line, and flush it, as ``feed_all`` would;
    False (nothing changed) where that cannot be known here: a line ``feed_all`` may skip or split
    at a CR, or ``lines`` ending first. The lines glued on do nothing when fed again."""
    held = st.held
    assert held is not None
    for line in lines:
        if "\r" in line:
            return False
        if "NCCL" in line or "nccl" in line:
            if would_skip(st, line):
                return False
            break
        if len(held) < MAX_LINE and is_continuation(line):
            held += line
        else:
            break
    else:
        return False
    st.held = held
    flush_held(st)
    return True


def noop_message(st: ParserState, msg: str) -> bool:
    """True for a frequent INFO message that ``info`` ignores whatever process printed it.

    ``Connected all rings`` without ``GDR`` and ``N coll channels, ... 0 nvls channels``: one
    each per rank and communicator (~10% of a large log). Memoised per distinct text, which
    repeats across ranks, so ``feed_all`` skips them with one dict lookup.
    """
    noop = "NCCL" not in msg and "\r" not in msg and len(msg) < NOOP_MAX_CHARS and (
        (msg.startswith("Connected all ") and "GDR" not in msg)
        or (msg[:1].isdigit() and " -> " not in msg and "nvls channels" in msg
            and not any(int(n) for n in NVLS_CHANNELS_RE.findall(msg)))
    )
    if len(st.noop) >= MAX_MEMO:
        st.noop.clear()
    st.noop[msg] = noop
    return noop


def physical(st: ParserState, line: str) -> None:
    if "NCCL" in line or "nccl" in line:
        if st.held is not None:
            flush_held(st)
        if len(line) >= WRAP_MIN and (len(line) >= INFO_WRAP_MIN or INFO_MARK not in line):
            st.held, st.held_lineno = line, st.lineno
        else:
            logical(st, line)
    elif st.held is not None and len(st.held) < MAX_LINE and is_continuation(line):
        st.held += line
    else:
        if st.held is not None:
            flush_held(st)
        if "Rank" in line and line.startswith("#"):
            nccl_tests_header(st, line)
        elif any(w in line for w in BARE_CUDA_WORDS) and cuda_failure(st, clean(line)):
            st.result.nccl_lines += 1  # the job's own CUDA error, without NCCL's prefix: what killed it


def flush_held(st: ParserState) -> None:
    held, st.held = cast(str, st.held), None  # (called only while a line is held)
    lineno, st.lineno = st.lineno, st.held_lineno
    logical(st, held)
    st.lineno = lineno


def end_source(st: ParserState) -> None:
    if st.held is not None:
        flush_held(st)

# logical lines
def logical(st: ParserState, line: str) -> None:
    i = line.find(INFO_MARK)
    if i >= 0:
        msg = line[i + INFO_MARK_LEN:]
        if "NCCL " in msg and split_spliced(st, line):
            return
        st.result.nccl_lines += 1
        try:
            proc = st.prefix_cache[line[:i]]
        except KeyError:
            proc = proc_for_prefix(st, line[:i])
        info(st, proc, msg)
        return
    other_line(st, line)


def split_spliced(st: ParserState, line: str) -> bool:
    """Two NCCL records glued on one physical line: feed each on its own."""
    if sum(map(line.count, MARK_WORDS)) < 2:  # each MARK_RE match holds one of them
        return False
    starts = []
    for m in MARK_RE.finditer(line):
        start, host = m.start(), m.group("host")
        if host and host not in st.result.hosts and len(host) <= MAX_NAME_CHARS:  # "...IPCzeta:1:2 [0] NCCL"
            known = known_suffix(st, host)
            if known:
                start += len(host) - len(known)
        starts.append(start)
    if len(starts) < 2:
        return False
    starts[0] = 0
    for a, b in zip(starts, [*starts[1:], len(line)], strict=True):
        logical(st, line[a:b].rstrip())
    return True


def known_suffix(st: ParserState, host: str) -> str | None:
    """The first known host (in order of appearance) that ends ``host``, itself excluded.

    Looks up each suffix of the name instead of scanning every known host: a new host per node
    would otherwise make a 4,096-node log quadratic (8 million ``endswith`` calls).
    """
    hosts = st.result.hosts
    found = [host[j:] for j in range(1, len(host)) if host[j:] in hosts]
    if st.track:  # a range's worker: a name cut out of one known before the range would make it depend on that
        st.splice_checked.add(host)
        st.splice_found = st.splice_found or bool(found)
    if len(found) <= 1:
        return found[0] if found else None
    order = {h: n for n, h in enumerate(hosts)}  # rare: several known names end this one
    return min(found, key=order.__getitem__)


def proc_for_prefix(st: ParserState, prefix: str) -> Proc | None:
    """The process a line prefix names (None: none, or one past the limits), cached per prefix."""
    r = st.result
    if st.track and len(st.prefix_cache) > MAX_PREFIXES:
        st.cache_cleared = True
    text = clean(prefix) if ("[" in prefix or "\x1b" in prefix) else prefix
    # the bare "host:pid:tid [dev]" is what PREFIX_RE finds at position 0, with the same groups
    m = PREFIX_FAST_RE.match(text) or PREFIX_RE.search(text)
    proc = None
    if m:
        host = m.group("host")
        if host not in r.hosts and len(r.hosts) < MAX_HOSTS_SPLICE_CHECK and len(host) <= MAX_NAME_CHARS:
            # a spliced line glues the tail of one record to the next host name
            known = known_suffix(st, host)
            host = known or host
        pid, dev = int(m.group("pid")), int(m.group("dev"))
        proc = r.procs.get((host, pid))
        if proc is None and not past_limits(st, host):
            proc = r.procs[(host, pid)] = Proc(host, pid)
            r.hosts.setdefault(host, set()).add(pid)
        if proc is not None and dev > r.host_max_dev.get(host, -1):
            r.host_max_dev[host] = dev
        lead = text[: m.start()]
    else:
        lead = text
    lm = LAUNCHER_RANK_RE.match(lead) if lead else None
    if lm:
        r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))
    if len(prefix) <= MAX_PREFIX_CHARS:
        if len(st.prefix_cache) > MAX_PREFIXES:
            st.prefix_cache.clear()
        st.prefix_cache[prefix] = proc
    return proc


def past_limits(st: ParserState, host: str) -> bool:
    """A new process of a host past ``MAX_HOSTS`` (or with no name's length), or past ``MAX_PROCS``: its
    lines are read as lines without a prefix (no host, no process) and the prefix is counted in ``folded``."""
    r = st.result
    if host not in r.hosts and (len(r.hosts) >= MAX_HOSTS or len(host) > MAX_NAME_CHARS):
        r.folded[Folded.HOSTS] += 1
        return True
    if len(r.procs) >= MAX_PROCS:
        r.folded[Folded.PROCS] += 1
        return True
    return False

# INFO messages ---------------------------------------------------------------------------
def info(st: ParserState, proc: Proc | None, msg: str) -> None:
    c = msg[:2]
    if c == "Ch" or c == "Ri" or (c == "Co" and msg.startswith("Coll")):  # noqa: PLR1714
        k = msg.find(" : ")
        if k > 0:
            mem = proc.cur if proc is not None and proc.cur is not None else loose_membership(st, proc)
            if mem.comm is st.sink:  # a communicator past MAX_COMMS: its lines are not kept
                return
            tail = msg[k:]
            if tail in mem.seen:
                return
            if len(mem.seen) < MAX_SEEN_TAILS:
                mem.seen.add(tail)
            if " via " in tail:
                channel(st, proc, mem, msg)
            return
    if (c == "co" or c == "nc" or c == "[R" or c == "ra" or c == "nr") and init_line(st, proc, msg):  # noqa: PLR1714
        return
    handler = INFO_DISPATCH.get(msg[:DISPATCH_CHARS])
    if handler is not None:
        handler(st, proc, msg)
        return
    if msg[:1].isdigit():
        numeric_info(st, proc, msg)
    elif " -> " in msg:
        trace(st, proc, msg)
    elif " set " in msg:
        setting(st, msg)
    elif "Call to connect returned" in msg or "NCCL WARN" in msg:
        warn(st, proc, msg, info=True)

# WARN and everything without an INFO prefix -----------------------------------------------
def other_line(st: ParserState, line: str) -> None:
    i = line.find(" " + WARN_MARK)
    if i >= 0 or line.startswith(WARN_MARK):
        st.result.nccl_lines += 1
        prefix = line[:i] if i > 0 else ""
        proc = None
        if prefix:
            try:
                proc = st.prefix_cache[prefix]
            except KeyError:
                proc = proc_for_prefix(st, prefix)
        warn(st, proc, line[i + 1 + len(WARN_MARK):] if i >= 0 else line[len(WARN_MARK):], src=prefix)
    else:
        unprefixed(st, clean(line))


def unprefixed(st: ParserState, text: str) -> None:
    """A line about NCCL without an INFO or WARN prefix: a torch watchdog, an error text, a bare record."""
    r = st.result
    if "Watchdog caught collective operation timeout" in text:
        r.nccl_lines += 1
        watchdog(st, text)
        return
    for level in (" NCCL TRACE ", " NCCL ABORT ", "NCCL INFO "):
        j = text.find(level)
        if j >= 0:
            r.nccl_lines += 1
            if level == "NCCL INFO ":  # a record with no prefix at all
                info(st, None, text[j + len(level):])
            return
    m = NCCL_ERROR_RE.search(text)
    if m:
        r.nccl_lines += 1
        error(st, Category.NCCL_ERROR, text, None, kind=m.group(1), shown=m.group(1))
        return
    if "NCCL version" in text:
        r.nccl_lines += 1
        lm = LAUNCHER_RANK_RE.match(text)
        version_line(st, None, text)
        if lm:
            r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))
        return
    m = LAST_ERROR_RE.search(text)
    if m and "nccl" in m.group(1)[:5]:
        r.nccl_lines += 1
        error(st, Category.NCCL_ERROR, text, None, kind=warn_kind(m.group(1)), shown=m.group(1))
        return
    if "ProcessGroupNCCL" in text:
        r.nccl_lines += 1
        torch_exception(st, text)  # a CUDA error NCCL's own lines may never show: fatal
        lm = LAUNCHER_RANK_RE.match(text) or PT_RANK_RE.search(text)
        if lm:
            r.named_ranks.add(int(next(g for g in lm.groups() if g is not None)))
    elif any(w in text for w in BARE_CUDA_WORDS) and cuda_failure(st, text):
        r.nccl_lines += 1  # e.g. a traceback line that names NCCL as well as CUDA's error


def nccl_tests_header(st: ParserState, line: str) -> None:
    m = NCCLTESTS_RANK_RE.match(line)
    if m:
        st.result.named_ranks.add(int(m.group(1)))


def finish(st: ParserState) -> ParseResult:
    """Hand channel lines that never met their communicator to one 'unidentified' comm."""
    if st.held is not None:
        flush_held(st)
    judge_unrecovered(st)
    r = st.result
    loose = [p.cur.comm for p in r.procs.values() if p.cur is not None and p.cur.loose] + st.orphans
    if st.unidentified is not None:
        loose.append(st.unidentified)
    loose = [c for c in loose if c.intra or c.net or c.collnet or c.nvls or c.rank_host]
    if loose:
        target = r.comms.setdefault(UNIDENTIFIED, Comm(UNIDENTIFIED))
        for c in loose:
            if c is not target:
                target.merge(c)
    return r
