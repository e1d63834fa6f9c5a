"""``parse --jobs N``: regular files split into byte ranges at line starts, parsed in worker processes,
merged exactly (``merge.py``): the same report, byte for byte, as one process.

The main process parses the first range itself while ``N - 1`` workers parse the others, each from a fresh
state; the main process then merges their states in order. A long line held at the end of a range (it may
be hard-wrapped) gets its continuation lines from the next range before that range is merged. Where a
range cannot be merged exactly (one of its processes printed in an earlier range too, a cap reached, ...),
the main process parses that range itself, in sequence, from the exact state before it: exactness never
depends on the log, only the speed-up does. Splits are moved to where the process printing the lines
changes, so a log written rank by rank (per-rank NCCL_DEBUG_FILE files, concatenated) merges everywhere;
a log whose ranks' lines are interleaved line by line (one shared stdout) is read in sequence, at about
the speed of ``--jobs 1``. A directory of per-rank files is parsed a file (or a range) per worker. stdin,
FIFOs and ``.gz`` files are read in the main process, in order, as ``--jobs 1`` does.

Workers start with ``forkserver`` (nothing of the parent is inherited, torch never imported) and return
only their own pickled states over the pool's pipes; at most two ranges per worker are in flight (bounded
memory); a worker that dies ends the run with one error line.
"""

from __future__ import annotations

import os
import pickle
import re
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.logs.parse.api import check_dirs, gc_paused, parse_paths, read_source, source_entry
from nccl_doctor.logs.parse.merge import merge_into
from nccl_doctor.logs.parse.model import ParseResult
from nccl_doctor.logs.parse.parser import end_source, feed_all, finish, take_continuations
from nccl_doctor.logs.parse.reader import CHUNK, ReadStats, Source, read_range_blocks, resolve_inputs
from nccl_doctor.logs.parse.state import ParserState

# Below this many bytes of regular files, parse stays in one process: starting a worker, pickling its state
# and merging it (~0.2 s) cost about what a second core saves on a 22 MB log (measured on 2 cores: docs/benchmarks.md).
MIN_PARALLEL_BYTES = 32 << 20
# The main process's range, parsed while the workers start, is this much larger than theirs: a worker also
# starts (~0.2 s), counts the lines before its range and pickles its state (measured, see docs/benchmarks.md)
MAIN_SHARE = 1.1
MIN_RANGE = 1 << 20  # bytes: the smallest range a file is split into (tests force smaller: ``range_bytes``)
SPLIT_SCAN = 4 << 20  # bytes scanned past a split point for a line where the printing process changes
_GZIP_MAGIC = b"\x1f\x8b"
_PROC_RE = re.compile(rb"([^\s:\[\](){}<>`|]+):(\d+):\d+ \[\d+\] NCCL ")


def default_jobs() -> int:
    """The cores this process may run on (all of them where the OS does not say)."""
    affinity = getattr(os, "sched_getaffinity", None)
    return len(affinity(0)) if affinity is not None else os.cpu_count() or 1


@dataclass(frozen=True)
class Task:
    """One byte range of one file (``end`` None: to the end of the file)."""

    index: int  # of the source in the input list
    name: str
    path: Path
    start: int
    end: int
    last: bool  # the range ends the file


@dataclass
class Partial:
    """What a worker sends back: its parser's state after the range, and what reading it ran into."""

    state: ParserState
    stats: ReadStats


def parse_range(task: Task) -> bytes:
    """A worker's job: parse one range from a fresh state; the pickled ``Partial``."""
    with gc_paused():
        return _parse_range(task)


def _parse_range(task: Task) -> bytes:
    st = ParserState(file=task.name, lineno=_lines_before(task.path, task.start), track=True)
    stats = ReadStats()
    for block in read_range_blocks(task.path, task.start, task.end, stats):
        feed_all(st, block)
    if task.last:
        end_source(st)
    st.noop.clear()  # memos: pure, the merge keeps the main process's own
    st.names.clear()
    st.settings.clear()
    return pickle.dumps(Partial(st, stats), protocol=pickle.HIGHEST_PROTOCOL)


def _lines_before(path: Path, offset: int) -> int:
    """Line ends before ``offset``: the global number of the range's first line, minus one."""
    n = 0
    with open(path, "rb") as fh:
        while offset > 0:
            data = fh.read(min(CHUNK * 16, offset))
            if not data:
                break
            n += data.count(b"\n")
            offset -= len(data)
    return n


def _is_plain_file(source: Source) -> int | None:
    """The size of a regular, uncompressed file, else None (streams and .gz are read in sequence)."""
    if source.path is None or not source.path.is_file():
        return None
    try:
        with open(source.path, "rb") as fh:
            if fh.read(2) == _GZIP_MAGIC:
                return None
        return source.path.stat().st_size
    except OSError:
        return None  # read in sequence, which reports it as --jobs 1 does


def split_points(path: Path, size: int, n: int, *, align: bool = True, first: float = 1.0) -> list[int]:
    """``n`` ranges' starts (the first is 0): line starts near ``size * i / n``, moved on (``align``) to the
    first line of a process other than the one printing before it, so a range's processes are new. The
    first range is ``first`` times as large as the others."""
    starts = [0]
    with open(path, "rb") as fh:
        for i in range(1, n):
            at = max(int(size * (first + i - 1) / (first + n - 1)), starts[-1] + 1)
            if at >= size:
                break
            fh.seek(at - 1)
            data = fh.read(SPLIT_SCAN if align else CHUNK)
            k = data.find(b"\n")
            if k < 0:
                continue
            pos = at + k  # the first line start at or after ``at``
            if align:
                pos = _process_change(data, k + 1, at - 1) or pos
            if pos < size and pos > starts[-1]:
                starts.append(pos)
    return starts


def _process_change(data: bytes, k: int, base: int) -> int | None:
    """The file offset of the first line in ``data[k:]`` printed by another process than the NCCL line
    before it; None where the window ends first."""
    last = None
    while True:
        e = data.find(b"\n", k)
        if e < 0:
            return None
        m = _PROC_RE.search(data, k, e)
        if m is not None:
            key = m.group(1, 2)
            if last is not None and key != last:
                return base + k
            last = key
        k = e + 1


def plan(sources: Sequence[Source], *, jobs: int, range_bytes: int | None, align: bool) -> list[Task]:
    """The ranges of the plain files among ``sources``, in order (the others are read in the main process)."""
    sizes = [_is_plain_file(s) for s in sources]
    per = range_bytes or max(MIN_RANGE, -(-sum(s or 0 for s in sizes) // jobs))
    tasks: list[Task] = []
    for i, (source, size) in enumerate(zip(sources, sizes, strict=True)):
        if size is None or source.path is None:
            continue
        n = max(1, -(-size // per))
        share = MAIN_SHARE if not tasks and range_bytes is None else 1.0  # the main process's own range
        starts = split_points(source.path, size, n, align=align, first=share) if n > 1 else [0]
        ends = [*starts[1:], size]
        for j, (a, b) in enumerate(zip(starts, ends, strict=True)):
            tasks.append(Task(i, source.name, source.path, a, b, last=j == len(starts) - 1))
    return tasks


Runner = Callable[[list[Task]], Iterator[bytes | None]]


def parse_paths_parallel(paths: Sequence[str | os.PathLike[str]], *, jobs: int,
                         min_bytes: int = MIN_PARALLEL_BYTES, range_bytes: int | None = None,
                         align: bool = True, runner: Runner | None = None) -> tuple[ParseResult, int]:
    """``parse_paths`` over ``jobs`` processes; also how many ranges were merged (the rest read in sequence).

    ``range_bytes`` and ``align=False`` force small ranges split anywhere (tests: boundaries everywhere);
    ``runner`` runs the tasks (tests: in this process, with the pickling of the real pipes).
    """
    check_dirs(paths)
    inputs = resolve_inputs(list(paths))
    sources = inputs.sources
    if jobs <= 1 or sum(s or 0 for s in map(_is_plain_file, sources)) < min_bytes:
        return parse_paths(paths), 0
    tasks = plan(sources, jobs=jobs, range_bytes=range_bytes, align=align)
    by_source: dict[int, list[Task]] = {}
    for t in tasks:
        by_source.setdefault(t.index, []).append(t)
    p = ParserState()
    p.result.skipped = inputs.skipped
    named = {os.fspath(x) for x in paths}
    own = tasks[0]  # the main process parses the first range itself, while the workers parse the others
    results = (runner or _pool_runner(jobs - 1))(tasks[1:])
    try:
        with gc_paused():
            merged = _merge_all(p, sources, by_source=by_source, own=own, results=results, named=named)
            return finish(p), merged
    finally:
        close = getattr(results, "close", None)
        if close is not None:
            close()


def _merge_all(p: ParserState, sources: Sequence[Source], *, by_source: dict[int, list[Task]], own: Task,
               results: Iterator[bytes | None], named: set[str]) -> int:
    """Every source into ``p``, in order: its ranges merged, or read in sequence where they cannot be."""
    merged = 0
    for i, source in enumerate(sources):
        mine = by_source.get(i)
        if mine is None:  # stdin, a FIFO, a .gz file: in the main process, in its place
            read_source(p, source, named)
            continue
        stats = ReadStats()
        broken = False  # a read error: the rest of the file is not read (as in one process)
        for task in mine:
            got = next(results) if task is not own else None
            if broken:
                continue
            p.file = task.name  # (a held line flushed here is quoted with its file)
            # pickled by our own worker, over the pool's own pipe
            part: Partial | None = pickle.loads(got) if got is not None else None
            if (part is not None and part.stats.error is None and (p.held is None or _take_held(p, task))
                    and merge_into(p, part.state)):
                merged += 1
                _add_stats(stats, part.stats)
            else:  # in sequence, from the exact state before the range (the main process's own range too)
                p.lineno = _lines_before(task.path, task.start)
                _read_in_sequence(p, task, stats)
                broken = stats.error is not None
        end_source(p)
        p.result.lines += stats.lines
        p.result.sources.append(source_entry(source, stats))
    return merged


def _take_held(p: ParserState, task: Task) -> bool:
    """A long line held at the end of what came before: glue the range's first lines onto it and flush it."""
    lines = (line for block in read_range_blocks(task.path, task.start, task.end, ReadStats()) for line in block)
    try:
        return take_continuations(p, lines)
    except OSError:
        return False
    finally:
        lines.close()


def _add_stats(total: ReadStats, part: ReadStats) -> None:
    total.lines += part.lines
    total.bytes += part.bytes
    total.cut_lines += part.cut_lines
    total.error = total.error or part.error


def _read_in_sequence(p: ParserState, task: Task, stats: ReadStats) -> None:
    part = ReadStats()
    try:
        for block in read_range_blocks(task.path, task.start, task.end, part):
            feed_all(p, block)
    except OSError as exc:
        part.error = f"read error ({exc.strerror or exc})"
    _add_stats(stats, part)


class _Pool:
    """The workers' results in task order; at most two ranges per worker in flight (bounded memory).
    Started at once, so the workers run while the main process parses its own range."""

    def __init__(self, jobs: int, tasks: list[Task], work: Callable[[Task], bytes]) -> None:
        self._pool = ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("forkserver"))
        self._todo, self._work = iter(tasks), work
        self._ahead: list[Future[bytes]] = []
        for t in self._todo:
            self._ahead.append(self._pool.submit(work, t))
            if len(self._ahead) >= 2 * jobs:
                break

    def __iter__(self) -> Iterator[bytes | None]:
        return self

    def __next__(self) -> bytes | None:
        if not self._ahead:
            raise StopIteration
        fut = self._ahead.pop(0)
        data: bytes | None
        try:
            data = fut.result()
        except BrokenProcessPool:
            self.close()
            raise InputError("parse --jobs: a worker process died (out of memory or killed?); "
                             "rerun with --jobs 1") from None
        except Exception:  # any other failure of a worker: the range is read in sequence
            data = None
        nxt = next(self._todo, None)
        if nxt is not None:
            self._ahead.append(self._pool.submit(self._work, nxt))
        return data

    def close(self) -> None:
        # the workers exit while the report is made (the interpreter waits for them at its exit)
        self._pool.shutdown(wait=False, cancel_futures=True)


def _pool_runner(jobs: int, work: Callable[[Task], bytes] = parse_range) -> Runner:
    def run(tasks: list[Task]) -> Iterator[bytes | None]:
        return _Pool(jobs, tasks, work)
    return run
