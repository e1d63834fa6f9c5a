"""The parser's fast paths (whole-line regexes for the 2.19+ init lines, a bare ``host:pid:tid [dev]``
prefix, long lines held inline for wrap detection) read exactly what the general paths read."""

from __future__ import annotations

from nccl_doctor.logs.parse.api import parse_lines


def _rank_lines(host: str, pid: int, rank: int, nranks: int, *, general: bool) -> list[str]:
    """One rank's init and channel lines; ``general`` words them so no fast regex matches."""
    p = f"{host}:{pid}:{pid + 7} [{rank % 8}] NCCL INFO "
    if general:  # a leading tag defeats the bare-prefix regex, "Config" the init regex, a tail the comm regex
        p = f"[1,{rank}]<stdout>:" + p
    init = "ncclCommInitRankConfig" if general else "ncclCommInitRank"
    tail = " nvlsSupport 0" if general else ""
    ptr = f"0x{0x55d0c0000000 + rank * 0x10000:x}"
    head = f"{p}{init} comm {ptr} rank {rank} nranks {nranks} cudaDev {rank % 8} nvmlDev {rank % 8} busId 1b000 commId 0x5f3c2a1b9d8e7f60"
    return [
        head + " - Init START",  # >= 160 characters: held for wrap detection
        f"{p}comm {ptr} rank {rank} nRanks {nranks} nNodes 2 localRanks 8 localRank {rank % 8} MNNVL 0{tail}",
        f"{p}Channel 00/0 : {rank}[{rank % 8}] -> {(rank + 1) % nranks}[0] [send] via NET/IB/0/GDRDMA",
        f"{p}Channel 01/0 : {rank}[{rank % 8}] -> {(rank + 1) % nranks}[0] [send] via NET/IB/0/GDRDMA",
        head + " - Init COMPLETE",
    ]


def _comms(general: bool) -> dict:
    lines = []
    for rank in range(16):
        lines += _rank_lines(f"gpu-node{rank // 8:05d}", 100000 + rank, rank, 16, general=general)
    result = parse_lines(lines)
    assert len(lines[0]) >= 160 and result.nccl_lines == len(lines)
    return {key: (c.comm_id, c.nranks, c.nnodes, c.local_ranks, c.members, c.complete, dict(c.rank_host),
                  sorted(c.hosts), dict(c.net))
            for key, c in result.comms.items()}


def test_fast_and_general_init_readings_agree():
    fast, general = _comms(False), _comms(True)
    assert fast == general
    (comm,) = fast.values()
    assert comm[:6] == ("0x5f3c2a1b9d8e7f60", 16, 2, 8, 16, 16)
    assert comm[6] == {r: f"gpu-node{r // 8:05d}" for r in range(16)}
    assert sum(comm[8].values()) == 16  # one connection per rank: the repeat on channel 01 is not counted again
