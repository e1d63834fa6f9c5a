"""Communicator lines: init lines (``comm 0x.. rank R nranks N`` in all its versions) and channel lines
(``Channel 00/0 : 0[0] -> 1[1] via P2P/IPC``), which say who is in which communicator and over what
transport each connection runs."""

from __future__ import annotations

from nccl_doctor.logs.parse.model import (
    MAX_COMMS,
    MAX_NAME_CHARS,
    MAX_TR_EVIDENCE,
    Comm,
    Membership,
    Proc,
    Tr,
    TransportKey,
)
from nccl_doctor.logs.parse.patterns import (
    ALL_RANKS_RE,
    COMM_LINE_FAST_RE,
    COMM_RE,
    FIELD_RE,
    INDIRECT_RE,
    INIT_RANK_FAST_RE,
    NETTR_RE,
    OLD_RANK_RE,
    VIA_RE,
    cut_short,
    field_number,
)
from nccl_doctor.logs.parse.reader import clean
from nccl_doctor.logs.parse.state import ParserState, ev_at, fold_comm, recover

UNIDENTIFIED = "unidentified"  # the comm of channel lines whose init line never came
MAX_RANKS_PER_COMM = 1 << 20  # ranks named by channel lines kept per communicator
MAX_MEMBERSHIPS = 64  # communicators remembered per process (the oldest is dropped)
_INTRA, _NET, _COLLNET = Tr.INTRA, Tr.NET, Tr.COLLNET  # module globals: an enum attribute costs ~100 ns a look-up


def loose_membership(st: ParserState, proc: Proc | None) -> Membership:
    """Channel lines before any init line of their process: keep them aside until one comes."""
    if proc is None:
        if st.unidentified is None:
            st.unidentified = Comm(UNIDENTIFIED)
        return Membership(st.unidentified, loose=True)
    mem = Membership(Comm(UNIDENTIFIED), loose=True)
    proc.cur = mem
    return mem


def channel(st: ParserState, proc: Proc | None, mem: Membership, msg: str) -> None:
    m = VIA_RE.match(msg)
    if not m:
        return
    src_text, dst_text, direction, tr = m.groups()
    src = int(src_text)
    dst = int(dst_text) if dst_text is not None else None
    if direction is None and dst == mem.rank and src != dst and tr.startswith("NET/"):
        direction = "receive"  # NCCL <= 2.3 prints NET ring lines on the receive side only, unmarked
    local, peer = (dst, src) if direction == "receive" else (src, dst)
    top = src if dst is None or dst < src else dst
    nranks = mem.comm.nranks
    if proc is not None and not mem.loose and (
            (mem.rank is not None and local != mem.rank) or (nranks and top >= nranks)):
        # NCCL >= 2.22 connects lazily: a comm's channel lines may follow another comm's init lines; the
        # line is the process's in the comm where it has rank ``local`` and which has both ranks named
        other = next((x for x in reversed(proc.memberships) if x.rank == local and _holds(x, top)), None)
        mem = other or (mem if _holds(mem, top) else misfit(st, proc))
    comm = mem.comm
    host = proc.host if proc is not None else None
    if local is not None:
        place_rank(st, comm, mem, local, host)
    if peer is not None and host is None:
        st.result.named_ranks.add(peer)
    if peer is not None and peer not in comm.rank_host and len(comm.rank_host) < MAX_RANKS_PER_COMM:
        comm.rank_host.setdefault(peer, None)  # named, host unknown yet
    tr = clean(tr) if "[" in tr else tr.strip()  # what clean() does to text without "["
    nm = NETTR_RE.match(tr)
    if cut_short(tr, nm):
        return  # the ranks above count; a transport read from half a token would not be true
    tkey: TransportKey
    if nm:
        coll, name, _dev, _proxy, gdr = nm.groups()
        if coll:
            comm.collnet[(name, bool(gdr))] += 1
            tkey = (_COLLNET, name, bool(gdr))
        else:
            net, nkey = comm.net, (host, peer, name, bool(gdr), direction or "")
            net[nkey] = net.get(nkey, 0) + 1  # a new key each time: no Counter.__missing__ call
            tkey = (_NET, name, bool(gdr))
    else:
        token = INDIRECT_RE.sub("/indirect", tr) if "/indirect/" in tr else tr
        comm.intra[token] += 1
        if len(comm.intra_src) < MAX_RANKS_PER_COMM:
            comm.intra_src.add(src)
        tkey = (_INTRA, token)
    evs = comm.tr_first.get(tkey)
    if evs is None:
        evs = comm.tr_first[tkey] = []
    if len(evs) < MAX_TR_EVIDENCE or comm.first is None:
        ev = ev_at(st, f"{host}: {msg}" if host else msg, host, local)
        comm.first = comm.first or ev
        if len(evs) < MAX_TR_EVIDENCE:
            evs.append((peer, ev))


def misfit(st: ParserState, proc: Proc) -> Membership:
    """Where a process's channel lines go that none of its known comms can hold (their init lines are
    not in the input): kept aside, reported with the 'unidentified' comm."""
    comm = st.misfits.get(proc)
    if comm is None:
        comm = st.misfits[proc] = Comm(UNIDENTIFIED)
        st.orphans.append(comm)
    return Membership(comm, loose=True)


def place_rank(st: ParserState, comm: Comm, mem: Membership, local: int, host: str | None) -> None:
    """The rank a channel line is about (its sender, or its receiver for ``[receive]``) and its host."""
    if host is not None:
        if comm.rank_host.get(local) is None:
            comm.rank_host[local] = host
        comm.hosts.add(host)
    elif mem.comm is st.unidentified:
        st.result.named_ranks.add(local)
    if mem.rank is None and not mem.loose:
        mem.rank = local


def init_line(st: ParserState, proc: Proc | None, msg: str) -> bool:
    """``comm 0x.. rank R nranks N ...`` in all its versions; True if handled.

    The two forms of 2.19+ (``ncclCommInitRank ... - Init START|COMPLETE`` and ``comm ... nRanks
    ... nNodes ... localRanks ...``) are read by one anchored regex each, which yields exactly what
    the general ``COMM_RE`` + ``FIELD_RE`` reading would; any other form takes that reading.
    """
    nnodes = local_ranks = comm_id = None
    start = complete = False
    m = INIT_RANK_FAST_RE.match(msg)
    if m is not None:
        ptr, rank, nranks, comm_id, state = m.groups()
        start = state == "START"
        complete = not start
    else:
        m = COMM_LINE_FAST_RE.match(msg)
        if m is not None:
            ptr, rank, nranks, nnodes, local_ranks = m.groups()
        else:
            m = COMM_RE.search(msg)
            if not m:
                om = OLD_RANK_RE.match(msg)
                if om and proc is not None:  # NCCL 2.3: "rank 0 nranks 8"
                    membership(st, proc, None, None, int(om.group(1)), int(om.group(2)), msg=msg)
                    return True
                am = ALL_RANKS_RE.match(msg)
                if am and proc is not None:
                    init_all(st, proc, int(am.group(1)), msg)
                    return True
                return False
            ptr, rank, nranks = m.group(1), m.group(2), m.group(3)
            fields = dict(FIELD_RE.findall(msg, m.end()))
            comm_id, nnodes, local_ranks = fields.get("commId"), fields.get("nNodes"), fields.get("localRanks")
            start = msg.endswith("Init START")
            complete = not start and "Init COMPLETE" in msg
    if proc is None:
        st.result.named_ranks.add(int(rank))
        return True
    cur = proc.cur
    if start and cur is not None and cur.loose:
        st.orphans.append(cur.comm)  # 2.18.3+: those lines belong to an earlier comm
        proc.cur = None
    mem = membership(st, proc, ptr, comm_id, int(rank), int(nranks), msg=msg)
    comm = mem.comm
    if nnodes is not None:
        comm.nnodes = field_number(nnodes)
    if local_ranks is not None:
        comm.local_ranks = field_number(local_ranks)
    if start:
        mem.started = True
    elif complete:
        comm.complete += 1
        recover(st, proc)  # error traces before this were handled by NCCL
        if not mem.started:
            proc.cur = None  # <= 2.17: the next comm's channel lines come before its init line
    elif msg.endswith("Destroy COMPLETE"):  # ncclCommDestroy: the run finished (an abort is not recovery)
        recover(st, proc)
    return True


def init_all(st: ParserState, proc: Proc, nranks: int, msg: str) -> None:
    """``nranks N`` (ncclCommInitAll, 2.3-2.4): one process creates every rank of the communicator on its
    own GPUs, so the communicator is complete on this host: one node, N local ranks. Its ring lines (each
    rank's, from this process) follow."""
    comm = membership(st, proc, None, None, 0, nranks, msg=msg).comm
    comm.nnodes = 1
    comm.local_ranks = nranks


def membership(st: ParserState, proc: Proc, ptr: str | None, comm_id: str | None, rank: int,  # noqa: PLR0917
               nranks: int, *, msg: str) -> Membership:  # (an init line's fields, in NCCL's order)
    """The process's membership in the comm this init line is about: found, re-keyed or new."""
    mem = known_membership(proc, ptr, rank, nranks)
    if mem is not None and comm_id and mem.comm.comm_id is None and len(comm_id) <= MAX_NAME_CHARS:
        rekey(st, mem, comm_id)
    if mem is None:
        mem = new_membership(st, proc, ptr, comm_id, rank, nranks, msg=msg)
        if mem.comm is st.sink:  # past MAX_COMMS: nothing of it is kept
            return mem
    mem.rank = rank
    comm = mem.comm
    comm.nranks = comm.nranks or nranks
    if proc.host is not None:
        comm.hosts.add(proc.host)
        comm.rank_host[rank] = proc.host
    return mem


def known_membership(proc: Proc, ptr: str | None, rank: int, nranks: int) -> Membership | None:
    """The process's membership with this comm pointer, if it has one."""
    if ptr is None:
        return None
    for x in reversed(proc.memberships):
        if x.ptr == ptr:
            return x
    for x in reversed(proc.memberships):  # NCCL 2.3 prints "rank R nranks N" before the line with the pointer
        if x.ptr is None and x.rank == rank and x.comm.nranks == nranks:
            x.ptr = ptr
            return x
    return None


def rekey(st: ParserState, mem: Membership, comm_id: str) -> None:
    """Learned the commId late (2.16-2.20 print it only on some lines): file the comm under it."""
    st.rekeyed = True  # (that reads the comm's members over all of the input: a range's worker cannot know them)
    r = st.result
    old = mem.comm
    if r.comms.get(old.key) is not old or old.members > 1:
        return
    del r.comms[old.key]
    comm = r.comms.get(comm_id)
    if comm is None:
        old.key, old.comm_id = comm_id, comm_id
        r.comms[comm_id] = old
    else:
        comm.merge(old)
        comm.members += 1
        mem.comm = comm


def new_membership(st: ParserState, proc: Proc, ptr: str | None, comm_id: str | None, rank: int,  # noqa: PLR0917
                   nranks: int, *, msg: str) -> Membership:
    r = st.result
    if comm_id:
        key = comm_id
    else:
        nth = sum(1 for x in proc.memberships if x.comm.comm_id is None and x.comm.nranks == nranks)
        key = f"nranks={nranks}#{nth}"
    comm = r.comms.get(key)
    if comm is None:
        if len(r.comms) >= MAX_COMMS or len(key) > MAX_NAME_CHARS or len(ptr or "") > MAX_NAME_CHARS:
            return fold_comm(st, proc)
        comm = r.comms[key] = Comm(key, comm_id=comm_id, nranks=nranks,
                                   first=ev_at(st, f"{proc.host}: {msg}", proc.host, rank))
    comm.members += 1
    mem = Membership(comm, rank=rank, ptr=ptr)
    cur = proc.cur
    if cur is not None and cur.loose:
        comm.merge(cur.comm)  # adopt channel lines printed before this init line
    proc.memberships.append(mem)
    if len(proc.memberships) > MAX_MEMBERSHIPS:
        del proc.memberships[0]
    proc.cur = mem
    return mem


def _holds(mem: Membership, rank: int) -> bool:
    """Whether ``rank`` can be a rank of the membership's comm (its size not known yet: it can)."""
    nranks = mem.comm.nranks
    return not nranks or rank < nranks
