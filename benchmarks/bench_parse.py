"""Speed and memory of ``nccl-doctor parse`` on a generated NCCL_DEBUG=INFO log of a large job.

Generates the log of an N-node x 8-GPU job (default 4,096 nodes = 32,768 ranks; NCCL 2.21 format,
IB with GPUDirect RDMA) where every rank sits in three communicators: world, its node (intra-node)
and its local-rank column across nodes (inter-node). Then reports, side by side in one run:

- ``parse --jobs 1`` (one process) against a bare Python loop reading every line (target <= 25x),
- ``parse --jobs 2`` against ``--jobs 1`` (target >= 1.5x faster on 2 cores),
- that both runs printed the same reports (JSON and JUnit, byte for byte),
- the peak RSS of each run's whole process tree (main process, fork server and workers; target <= 500 MB),

each run the best of ``--repeat`` (the box may be shared: say so with the figures). ``--details`` adds
grep, the small real log, the floors of any Python parser and the phases of one in-process parse.

    python benchmarks/bench_parse.py            # full size (hundreds of MB, a minute or two)
    python benchmarks/bench_parse.py --small    # 64 nodes, seconds
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"
SMALL_LOG = ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"
GPUS = 8
CHANNELS = 16


def generate(path: Path, nodes: int) -> None:
    """Write the log rank by rank (as NCCL_DEBUG_FILE files concatenated would read).

    Like real shared stdout, some of it is messy: every 61st rank went through ``mpirun
    --tag-output`` (``[1,R]<stdout>:`` before every line), and application lines (timestamps,
    ANSI colours, a ``[rankR]:`` torchrun prefix) sit between the NCCL lines.
    """
    nranks = nodes * GPUS
    world_id = "0x5f3c2a1b9d8e7f60"
    with open(path, "w", buffering=1 << 20) as fh:
        fh.write("NCCL version 2.21.5+cuda12.4\n")
        for r in range(nranks):
            n, lr = divmod(r, GPUS)
            host, pid = f"gpu-node{n:05d}", 100000 + r
            tag = f"[1,{r}]<stdout>:" if r % 61 == 7 else ""
            p = f"{tag}{host}:{pid}:{pid} [{lr}] NCCL INFO "
            t = f"{tag}{host}:{pid}:{pid + 7} [{lr}] NCCL INFO "
            ip = f"10.{n // 250 % 250}.{n % 250}.{lr + 1}"
            out = [
                f"{p}Bootstrap : Using ib0:{ip}<0>",
                f"{p}NET/Plugin: No plugin found (libnccl-net.so)",
                f"{p}NET/Plugin: Using internal network plugin.",
                f"{p}NCCL_IB_HCA set by environment to mlx5",
                f"{p}NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB [4]mlx5_4:1/IB "
                f"[5]mlx5_5:1/IB [6]mlx5_6:1/IB [7]mlx5_7:1/IB [RO]; OOB ib0:{ip}<0>",
                f"{p}Using non-device net plugin version 0",
                f"{p}Using network IB",
                f"{p}NCCL version 2.21.5+cuda12.4",
            ]
            comms = [  # (commId, rank in comm, nranks, nNodes, localRanks, next rank, prev rank, same node next?)
                (world_id, r, nranks, nodes, GPUS),
                (f"0x1{n:015x}", lr, GPUS, 1, GPUS),
                (f"0x2{lr:015x}", n, nodes, nodes, 1),
            ]
            for ci, (cid, cr, cn, cnodes, cloc) in enumerate(comms):
                ptr = f"0x{0x55d0c0000000 + r * 0x10000 + ci * 0x1000:x}"
                out.append(f"{t}ncclCommInitRank comm {ptr} rank {cr} nranks {cn} cudaDev {lr} nvmlDev {lr} "
                           f"busId {lr + 1}b000 commId {cid} - Init START")
                out.append(f"{t}Setting affinity for GPU {lr} to ffffffff,ffff0000,00000000")
                out.append(f"{t}comm {ptr} rank {cr} nRanks {cn} nNodes {cnodes} localRanks {cloc} "
                           f"localRank {lr if cloc > 1 else 0} MNNVL 0")
                nxt, prv = (cr + 1) % cn, (cr - 1) % cn
                out.append(f"{t}Trees [0] {nxt}/-1/-1->{cr}->{prv} [1] {nxt}/-1/-1->{cr}->{prv}")
                out.append(f"{t}P2P Chunksize set to 524288")
                for ch in range(CHANNELS):
                    if ci == 1 or (ci == 0 and lr < GPUS - 1):
                        out.append(f"{t}Channel {ch:02d}/0 : {cr}[{lr}] -> {nxt}[{(lr + 1) % GPUS}] via P2P/CUMEM/read")
                    else:
                        out.append(f"{t}Channel {ch:02d}/0 : {cr}[{lr}] -> {nxt}[0] [send] via NET/IB/{lr}/GDRDMA")
                    if ci == 2 or (ci == 0 and lr == 0):
                        out.append(f"{t}Channel {ch:02d}/0 : {prv}[{(lr - 1) % GPUS}] -> {cr}[{lr}] [receive] "
                                   f"via NET/IB/{lr}/GDRDMA")
                out.append(f"{t}Connected all rings")
                out.append(f"{t}Connected all trees")
                out.append(f"{t}32 coll channels, 32 collnet channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer")
                out.append(f"{t}ncclCommInitRank comm {ptr} rank {cr} nranks {cn} cudaDev {lr} nvmlDev {lr} "
                           f"busId {lr + 1}b000 commId {cid} - Init COMPLETE")
                out.append(f"{t}Init timings: rank {cr} nranks {cn} total 1.23 (kernels 0.10, bootstrap 0.80, "
                           f"allgathers 0.01, topo 0.20, graphs 0.02, connections 0.05, rest 0.05)")
            if r % 8 == 3:  # application output between the NCCL lines
                out.append(f"2026-05-04 10:21:{r % 60:02d},118 - train.py:88 - INFO - [rank{r}] step 0 loss 11.02")
                out.append(f"\x1b[32m[rank{r}]:\x1b[0m torch.distributed: process group ready on {host}")
            fh.write("\n".join(out))
            fh.write("\n")


def bare_loop(path: Path) -> float:
    t = time.perf_counter()
    with open(path, encoding="utf-8", errors="replace") as fh:
        for _line in fh:
            pass
    return time.perf_counter() - t


def floors(path: Path) -> dict[str, float]:
    """Seconds of the least any Python parser of this log must do, to compare the 3x target with.

    ``read_blocks``: reading, decoding and splitting into lines, as ``parse`` does. ``+ look``: that,
    plus finding the ``NCCL INFO`` marker of each line and taking the message's first two characters
    (what a line-by-line parser needs before it can skip a line). ``regex``: one C-level ``findall``
    that picks the channel lines out of each decoded block (the first step of a block-level design
    that never loops over lines in Python), reading included.
    """
    import re

    from nccl_doctor.logs.parse import reader as loglines

    src = loglines.Source(str(path), path)
    t0 = time.perf_counter()
    for _block in loglines.read_blocks(src, loglines.ReadStats()):
        pass
    t_read = time.perf_counter() - t0
    t0 = time.perf_counter()
    for block in loglines.read_blocks(src, loglines.ReadStats()):
        for line in block:
            i = line.find(" NCCL INFO ")
            _c = line[i + 11:i + 13]
    t_look = time.perf_counter() - t0
    channel = re.compile(r" NCCL INFO Channel [^\n]*")
    t0 = time.perf_counter()
    with open(path, "rb") as fh:
        while data := fh.read(loglines.CHUNK):
            channel.findall(data.decode("utf-8", "replace"))
    t_regex = time.perf_counter() - t0
    return {"read_blocks": t_read, "read_blocks + look at each line": t_look,
            "one regex findall per block": t_regex}


def phases(path: Path) -> dict[str, float]:
    """Seconds per phase of one in-process parse, so the ratio to the bare loop is explainable.

    ``filter`` is ``parser.feed_all`` itself (the per-line loop that skips repeats); ``parse``
    is the careful path it hands lines to (``logical``/``feed``), timed around each call.
    """
    from nccl_doctor import render
    from nccl_doctor.logs import diagnose
    from nccl_doctor.logs.parse import parser as logparse
    from nccl_doctor.logs.parse import reader as loglines
    from nccl_doctor.logs.parse import state

    src = loglines.Source(str(path), path)
    t0 = time.perf_counter()
    for _block in loglines.read_blocks(src, loglines.ReadStats()):
        pass
    t_read = time.perf_counter() - t0

    careful = [0.0, 0, False]  # seconds, calls, inside a timed call

    def timed(function):
        def wrapper(st, line):
            if careful[2]:  # feed -> logical: time the outer call only
                return function(st, line)
            careful[2] = True
            t = time.perf_counter()
            function(st, line)
            careful[0] += time.perf_counter() - t
            careful[1] += 1
            careful[2] = False
            return None
        return wrapper

    real = logparse.logical, logparse.feed
    logparse.logical, logparse.feed = timed(real[0]), timed(real[1])  # what feed_all hands lines to
    try:
        st = state.ParserState(file=str(path))
        t0 = time.perf_counter()
        for block in loglines.read_blocks(src, loglines.ReadStats()):
            logparse.feed_all(st, block)
        result = logparse.finish(st)
    finally:
        logparse.logical, logparse.feed = real
    t_all = time.perf_counter() - t0
    t0 = time.perf_counter()
    report = diagnose(result)
    t_diag = time.perf_counter() - t0
    t0 = time.perf_counter()
    render.render_json(report)
    t_render = time.perf_counter() - t0
    return {"read+decode": t_read, "filter": t_all - t_read - careful[0], "parse": careful[0],
            "careful lines": careful[1], "diagnose": t_diag, "render": t_render}


def timed_child(cmd: list[str]) -> tuple[float, int, bytes, int]:
    """(wall seconds, peak RSS in bytes, stdout, exit code) of one child, measured with wait4."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    return wall, usage.ru_maxrss * 1024, out, proc.returncode


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants (the fork server and its workers), from /proc."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as fh:
                    todo += [int(c) for c in fh.read().split()]
        except OSError:
            continue
    return out


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, IndexError, ValueError):
        return 0


def tree_run(cmd: list[str]) -> tuple[float, int, bytes, int]:
    """(wall seconds, peak RSS of the whole process tree in bytes, stdout, exit code): the RSS of the child
    and all its descendants, summed, sampled every 10 ms while it runs."""
    import threading

    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], sum(_rss(p) for p in _tree(proc.pid)))

    th = threading.Thread(target=sample, daemon=True)
    th.start()
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    done.set()
    th.join()
    return wall, max(peak[0], usage.ru_maxrss * 1024), out, os.waitstatus_to_exitcode(status)


_SPIN = "d = {}\nfor i in range(4_000_000):\n    d[i & 0xffff] = i"


def core_scaling() -> float:
    """How much more two CPU-bound Python processes get done at once than one: the ceiling of ``--jobs 2``
    on this box right now (2.0 on two idle cores; less where other work or hyperthreads share them)."""
    cmd = [sys.executable, "-c", _SPIN]
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    one = time.perf_counter() - t
    t = time.perf_counter()
    procs = [subprocess.Popen(cmd) for _ in range(2)]
    for p in procs:
        p.wait()
    return 2 * one / (time.perf_counter() - t)


def jobs_side_by_side(path: Path, bare: float, repeat: int) -> tuple[bool, dict]:
    """``--jobs 1`` and ``--jobs 2``, alternating, best of ``repeat`` each: times, ratios, identity, tree RSS."""
    runs: dict[int, list[tuple[float, int]]] = {1: [], 2: []}
    outs: dict[int, bytes] = {}
    for _ in range(repeat):
        for jobs in (1, 2):
            junit = OUT / f"junit-jobs{jobs}.xml"
            cmd = [sys.executable, "-m", "nccl_doctor", "parse", "--format", "json", "--junit-out", str(junit),
                   "--jobs", str(jobs), str(path)]
            wall, rss, out, rc = tree_run(cmd)
            if rc not in (0, 1):
                print(f"--jobs {jobs}: exit {rc}")
                return False, {}
            runs[jobs].append((wall, rss))
            outs[jobs] = out + junit.read_bytes()
    w1, w2 = min(runs[1])[0], min(runs[2])[0]
    same = outs[1] == outs[2]
    size = path.stat().st_size / 1e6
    print(f"--jobs 1: {w1:.2f} s ({size / w1:.0f} MB/s) = {w1 / bare:.1f}x the bare loop (target <= 25x); "
          f"peak tree RSS {max(r for _, r in runs[1]) / 1e6:.0f} MB")
    print(f"--jobs 2: {w2:.2f} s ({size / w2:.0f} MB/s) = {w1 / w2:.2f}x faster than --jobs 1 (target >= 1.5x); "
          f"peak tree RSS {max(r for _, r in runs[2]) / 1e6:.0f} MB (target <= 500 MB)")
    print(f"reports of --jobs 1 and --jobs 2 (JSON + JUnit): {'identical' if same else 'DIFFERENT'}; "
          f"all runs (s): --jobs 1 {[round(w, 2) for w, _ in runs[1]]}, --jobs 2 {[round(w, 2) for w, _ in runs[2]]}")
    return same, json.loads(outs[2][:len(outs[2]) - len(junit.read_bytes())])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--small", action="store_true", help="64 nodes instead of 4,096 (quick run)")
    ap.add_argument("--nodes", type=int, help="number of nodes (8 GPUs each)")
    ap.add_argument("--keep", action="store_true", help="reuse an existing generated log")
    ap.add_argument("--repeat", type=int, default=2, help="runs of each --jobs setting (the best is shown)")
    ap.add_argument("--details", action="store_true", help="also grep, the small log, floors and phases")
    args = ap.parse_args(argv)
    nodes = args.nodes or (64 if args.small else 4096)
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"nccl-{nodes}x{GPUS}.log"
    if not (args.keep and path.exists()):
        t = time.perf_counter()
        generate(path, nodes)
        print(f"generated {path} in {time.perf_counter() - t:.1f} s")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        nlines = sum(1 for _ in fh)
    print(f"log: {nodes} nodes x {GPUS} GPUs = {nodes * GPUS} ranks, 3 communicators per rank, "
          f"{size / 1e6:.1f} MB, {nlines} lines; {os.cpu_count()} CPUs, load average "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the box slows every figure)")
    bare = min(bare_loop(path) for _ in range(3))
    print(f"bare Python line loop: {bare:.2f} s")
    print(f"this box now: two CPU-bound processes at once do {core_scaling():.2f}x the work of one "
          "(2.00 on two idle cores): the ceiling of --jobs 2")
    same, doc = jobs_side_by_side(path, bare, args.repeat)
    ok = bool(doc) and (doc.get("inter_node") == {"transport": "IB", "gdr": True, "evidence": "channel lines"}
          and doc["ranks"]["count"] == nodes * GPUS and len(doc["communicators"]) == 1 + nodes + GPUS)
    print(f"result {'correct' if ok else 'WRONG'}")
    if args.details:
        details(path, bare, nlines)
    return 0 if ok and same else 1


def details(path: Path, bare: float, nlines: int) -> None:
    t = time.perf_counter()
    # capture stdout: GNU grep stops at the first match when its output is /dev/null
    subprocess.run(["grep", "-c", "NCCL INFO", str(path)], stdout=subprocess.PIPE, check=False)
    grep = time.perf_counter() - t
    print(f"grep -c 'NCCL INFO': {grep:.2f} s")
    small = min(timed_child([sys.executable, "-m", "nccl_doctor", "parse", str(SMALL_LOG)])[0] for _ in range(3))
    print(f"small log ({SMALL_LOG.name}): {small:.3f} s wall (target < 0.3 s)")
    fl = floors(path)
    print("floors (s, in process; x the bare loop): "
          + ", ".join(f"{k} {v:.2f} ({v / bare:.1f}x)" for k, v in fl.items()))
    ph = phases(path)
    n_careful = ph.pop("careful lines")
    print("phases (s, in process): " + ", ".join(f"{k} {v:.2f}" for k, v in ph.items())
          + f"; careful path took {n_careful} of {nlines} lines ({100 * n_careful / nlines:.1f}%)")


if __name__ == "__main__":
    sys.exit(main())
