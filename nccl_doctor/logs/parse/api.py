"""The parse half's entry points: ``parse_lines`` and ``parse_paths`` (files, directories, ``.gz``, ``-``) feed a
fresh ``ParserState`` line by line (``parser.py``) and return its ``ParseResult``; ``read_source`` and
``check_dirs`` are what ``parallel.py`` shares with them; ``no_nccl_message`` is the input error of a log with
no NCCL line."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from nccl_doctor.errors import InputError
from nccl_doctor.logs.parse.model import ParseResult, SourceEntry
from nccl_doctor.logs.parse.parser import end_source, feed_all, finish
from nccl_doctor.logs.parse.reader import STDIN, ReadStats, Source, binary_reason, read_blocks, resolve_inputs
from nccl_doctor.logs.parse.state import ParserState


def parse_lines(lines: Iterable[str], *, name: str = "<lines>") -> ParseResult:
    """Parse an iterable of text lines (line ends optional). Never raises on content."""
    st = ParserState()
    st.file = name
    n = 0

    def counted() -> Iterator[str]:
        nonlocal n
        for line in lines:
            n += 1
            yield line.rstrip("\r\n") if line.endswith(("\n", "\r")) else line

    feed_all(st, counted())
    end_source(st)
    st.result.lines = n
    st.result.sources.append({"name": name, "lines": n})
    return finish(st)


def parse_paths(paths: Sequence[str | os.PathLike[str]]) -> ParseResult:
    """Parse files, ``-`` (stdin), ``.gz`` files and directories (every log file inside, recursively;
    files that are evidently not logs, such as ``.json`` or ``.md``, are skipped and listed in ``skipped``).

    Raises ``InputError`` for a missing path, an empty directory or a named file that cannot be opened;
    unreadable files of a directory walk and damaged content are recorded in ``result.sources`` and
    become a finding instead.
    """
    st = ParserState()
    check_dirs(paths)
    inputs = resolve_inputs(list(paths))
    st.result.skipped = inputs.skipped
    named = {os.fspath(x) for x in paths}
    with gc_paused():
        for source in inputs.sources:
            read_source(st, source, named)
        return finish(st)


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while parsing: the parser's state is millions of small objects that live
    to the end (collections walk them again and again: a third of the time of a large log) and makes no
    garbage cycles; what it drops is freed by reference counting, and its state is capped. At the end every
    object goes to the oldest generation at once (``gc.freeze`` + ``gc.unfreeze``: no walk, as if a full
    collection had just run; nothing stays frozen), or the first collection after the pause would walk them
    all (~0.3 s on a 350 MB log)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.unfreeze()
        if enabled:
            gc.enable()


def read_source(st: ParserState, source: Source, named: set[str]) -> None:
    """Feed one whole source to ``st`` and list it in ``st.result.sources``."""
    stats = ReadStats()
    st.file, st.lineno = source.name, 0
    try:
        for block in read_blocks(source, stats):
            feed_all(st, block)
    except InputError as exc:
        if source.name in named:  # a file the user named: a one-line input error
            raise
        # one unreadable per-rank file of a directory must not hide the others: noted, read on
        stats.error = str(exc).removeprefix(f"{source.name}: ")
    except OSError as exc:
        stats.error = f"read error ({exc.strerror or exc})"
    end_source(st)
    st.result.lines += stats.lines
    st.result.sources.append(source_entry(source, stats))


def source_entry(source: Source, stats: ReadStats) -> SourceEntry:
    """One input as the report lists it."""
    entry: SourceEntry = {"name": source.name, "lines": stats.lines, "bytes": stats.bytes}
    if stats.cut_lines:
        entry["cut_lines"] = stats.cut_lines
    if stats.error:
        entry["error"] = stats.error
    return entry


def check_dirs(paths: Sequence[str | os.PathLike[str]]) -> None:
    """A directory this user cannot list: say so (the walk would report it as holding no log files)."""
    for raw in (os.fspath(p) for p in paths):
        if raw != STDIN and os.path.isdir(raw) and not os.access(raw, os.R_OK | os.X_OK):
            raise InputError(f"{raw}: cannot read directory: Permission denied")


def no_nccl_message(result: ParseResult) -> str:
    """The one-line input error for logs without a single NCCL line."""
    names = [s["name"] for s in result.sources]
    what = names[0] if len(names) == 1 else f"{len(names)} inputs"
    errors = [f"{s['name']}: {s['error']}" for s in result.sources if s.get("error")]
    if errors and result.lines == 0:
        return f"cannot read {errors[0]}"
    if result.lines == 0:
        return f"{what}: empty, no NCCL log lines (run the job with NCCL_DEBUG=INFO)"
    binary = [(s["name"], why) for s in result.sources if s["name"] != STDIN
              for why in [binary_reason(Path(s["name"]))] if why]
    if len(binary) == len(names):
        return f"{names[0]}: a binary file, not a log ({binary[0][1]})" if len(names) == 1 else \
            f"{what}: binary files, not logs"
    among = f"; binary, not logs: {', '.join(n for n, _ in binary[:3])}" if binary else ""
    return (f"{what}: no NCCL log lines in {result.lines} lines{among} (run the job with NCCL_DEBUG=INFO, "
            "and NCCL_DEBUG_FILE=/path/%h.%p.log to keep one file per process)")
