"""Peak memory, time and JSON size of ``nccl-doctor parse`` on hostile variety, next to a benign log.

A log is input anyone can write. Its size is bounded by the disk; the parser's state must be bounded by
its design, not by how varied the log is. Generates, to temporary files (streamed, never held in memory):

- ``benign``: a real job's log (``bench_parse.generate``: 8 GPUs a node, three communicators per rank),
  as many nodes as make it the size of the others,
- ``hosts``: ``--lines`` lines, each from another host (and NIC lists, bootstrap and socket interfaces),
- ``comms``: ``--lines`` init lines, each of another communicator, from a few thousand processes,
- ``warns``: ``--lines`` NCCL WARN lines, each with another text,

then runs ``nccl-doctor parse --format json --jobs 1`` on each (and ``--jobs 2``, whose report must be
the same byte for byte) and prints, side by side: peak RSS of the process tree, wall time, JSON size, and
the RSS of each hostile log over the benign one (target <= 2x; JSON target <= 8 MB a log).

    python benchmarks/bench_parse_memory.py                 # 1M lines each (~90 MB logs, a few minutes)
    python benchmarks/bench_parse_memory.py --lines 100000  # quick
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_parse

RSS_TARGET = 2.0  # peak RSS of a hostile log over the benign log of the same size
JSON_TARGET = 8_000_000  # bytes of a report, however varied the log (16,384 communicators listed: ~6 MB)
PIDS = 4096  # processes that print the communicator and WARN lines
BATCH = 10_000  # lines written at once


def _word(i: int) -> str:
    """``i`` in letters (a-z): a WARN text that differs in words, not in the numbers grouping masks."""
    out = []
    while True:
        i, d = divmod(i, 26)
        out.append(chr(97 + d))
        if i == 0:
            return "".join(out)


def _host_lines(n: int) -> Iterator[str]:
    """One host per line; each line also fills a per-host table (interfaces, NICs)."""
    for i in range(n):
        host, pid = f"node{i:07d}", 1000 + i % 50_000
        p = f"{host}:{pid}:{pid} [0] NCCL INFO "
        ip = f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"
        k = i % 3
        if k == 0:
            yield f"{p}Bootstrap : Using eth0:{ip}<0>"
        elif k == 1:
            yield f"{p}NET/Socket : Using [0]eth0:{ip}<0>"
        else:
            yield f"{p}NET/IB : Using [0]mlx5_0:1/IB ; OOB eth0:{ip}<0>"


def _comm_lines(n: int) -> Iterator[str]:
    """One communicator per line: ``PIDS`` processes each in ``n / PIDS`` communicators."""
    for i in range(n):
        q = i % PIDS
        host, pid = f"node{q // 8:05d}", 1000 + q
        yield (f"{host}:{pid}:{pid} [{q % 8}] NCCL INFO comm 0x{0x7f0000000000 + i:x} rank 0 nranks 8 "
               f"cudaDev {q % 8} busId 1000 commId 0x{i:016x} - Init COMPLETE")


def _warn_lines(n: int) -> Iterator[str]:
    """One WARN text per line (distinct words, so no two group together), each line with its own timestamp
    before the NCCL prefix (as ``srun -l`` or a log shipper writes): no two line prefixes alike either."""
    for i in range(n):
        q = i % PIDS
        host, pid = f"node{q // 8:05d}", 1000 + q
        ts = f"2026-12-01T{i // 3_600_000 % 24:02d}:{i // 60_000 % 60:02d}:{i // 1000 % 60:02d}.{i % 1000:03d}"
        yield f"{ts} {host}:{pid}:{pid} [{q % 8}] NCCL WARN unexpected condition {_word(i)} in transport setup"


HOSTILE: dict[str, Callable[[int], Iterator[str]]] = {"hosts": _host_lines, "comms": _comm_lines,
                                                      "warns": _warn_lines}


def write_lines(path: Path, lines: Iterator[str]) -> None:
    with open(path, "w", buffering=1 << 20) as fh:
        batch: list[str] = []
        for line in lines:
            batch.append(line)
            if len(batch) >= BATCH:
                fh.write("\n".join(batch) + "\n")
                batch.clear()
        if batch:
            fh.write("\n".join(batch) + "\n")


def write_benign(path: Path, size: int) -> None:
    """A real job's log of about ``size`` bytes: nodes estimated from a small one, then generated."""
    probe = path.with_suffix(".probe")
    bench_parse.generate(probe, 8)
    per_node = probe.stat().st_size / 8
    probe.unlink()
    bench_parse.generate(path, max(1, round(size / per_node)))


@dataclass(frozen=True)
class Run:
    wall: float
    rss: int
    json_bytes: int
    digest: str  # of the JSON report: --jobs 2 must print the same
    summary: str


def run(path: Path, jobs: int) -> Run:
    """One ``parse`` of ``path``. Only a digest of its report is kept: a large report held here would count in
    the next child's peak RSS (a child starts as a copy of this process)."""
    cmd = [sys.executable, "-m", "nccl_doctor", "parse", "--format", "json", "--jobs", str(jobs), str(path)]
    wall, rss, out, rc = bench_parse.tree_run(cmd)
    if rc not in (0, 1):
        raise SystemExit(f"{path.name} --jobs {jobs}: exit {rc}")
    m = re.search(rb'"summary": ("(?:[^"\\]|\\.)*")', out)
    summary = json.loads(m.group(1)) if m else "?"
    result = Run(wall, rss, len(out), hashlib.sha256(out).hexdigest(), summary)
    del out
    gc.collect()
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=1_000_000, help="lines of each hostile log (default 1M)")
    ap.add_argument("--no-jobs2", action="store_true", help="skip the --jobs 2 runs (identity check)")
    ap.add_argument("--only", default=",".join(HOSTILE), help="hostile logs to run (default: all: hosts,comms,warns)")
    args = ap.parse_args(argv)
    chosen = [n for n in args.only.split(",") if n]
    if not chosen or set(chosen) - set(HOSTILE):
        ap.error(f"--only: choose from {','.join(HOSTILE)}")
    ok = True
    with tempfile.TemporaryDirectory(prefix="nccl-doctor-bench-") as tmp:
        logs: dict[str, Path] = {}
        for name, gen in HOSTILE.items():
            if name not in chosen:
                continue
            logs[name] = Path(tmp, f"{name}.log")
            write_lines(logs[name], gen(args.lines))
        size = max(p.stat().st_size for p in logs.values())
        logs = {"benign": Path(tmp, "benign.log"), **logs}
        write_benign(logs["benign"], size)
        print(f"{args.lines:,} lines a hostile log; {os.cpu_count()} CPUs, load average "
              f"{', '.join(f'{x:.2f}' for x in os.getloadavg())} (other work on the box slows the times)", flush=True)
        print(f"{'log':8} {'MB':>6} {'peak RSS MB':>12} {'x benign':>9} {'time s':>7} {'JSON MB':>8} {'--jobs 2':>9}")
        base = 0
        for name, path in logs.items():
            one = run(path, 1)
            base = base or one.rss
            same = "-"
            if not args.no_jobs2:
                same = "same" if run(path, 2).digest == one.digest else "DIFFERENT"
                ok = ok and same == "same"
            ratio = one.rss / base
            ok = ok and one.json_bytes <= JSON_TARGET and (name == "benign" or ratio <= RSS_TARGET)
            print(f"{name:8} {path.stat().st_size / 1e6:6.1f} {one.rss / 1e6:12.0f} {ratio:9.2f} {one.wall:7.2f} "
                  f"{one.json_bytes / 1e6:8.2f} {same:>9}   {one.summary[:70]}", flush=True)
    print(f"targets: peak RSS <= {RSS_TARGET}x benign, JSON <= {JSON_TARGET / 1e6:.0f} MB, --jobs 2 identical: "
          f"{'met' if ok else 'NOT MET'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
