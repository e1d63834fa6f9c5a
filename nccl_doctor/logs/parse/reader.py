"""Reading NCCL logs: inputs (files, ``-``, ``.gz``, directories) into capped, decoded lines, and
the small text helpers that undo what launchers and terminals do to those lines.

Everything here streams: a line longer than ``MAX_LINE`` bytes is cut (the rest skipped in
chunks), so memory never grows with the size of a file or of one line.
"""

from __future__ import annotations

import gzip
import io
import os
import re
import stat
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

from nccl_doctor.errors import InputError

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

STDIN = "-"  # the path that names standard input
MAX_LINE = 16 * 1024  # bytes kept of one physical line; NCCL itself caps a line at 1 KiB
_GZIP_MAGIC = b"\x1f\x8b"


@dataclass(frozen=True)
class Source:
    """One input: a file path, or ``-`` for stdin."""

    name: str
    path: Path | None  # None for stdin


@dataclass
class ReadStats:
    """What reading one source ran into; the diagnosis reports it instead of failing."""

    lines: int = 0
    bytes: int = 0
    cut_lines: int = 0
    error: str | None = None


# Extensions of files that sit next to logs but are evidently not logs (per-rank logs are extension-less
# or .log/.txt/.out/.err, maybe .gz). Only a directory walk skips them; a file named explicitly is read.
NOT_LOG_SUFFIXES = frozenset({
    ".json", ".jsonl", ".md", ".rst", ".html", ".htm", ".py", ".ipynb", ".sh", ".yaml", ".yml", ".toml",
    ".ini", ".cfg", ".csv", ".tsv", ".xml", ".png", ".jpg", ".jpeg", ".gif", ".svg", ".pdf",
    ".pt", ".pth", ".ckpt", ".safetensors", ".bin", ".npy", ".npz", ".pkl", ".parquet", ".so",
    ".zip", ".tar", ".whl",
})


@dataclass
class Inputs:
    """What to read, and the directory entries left out (``name: reason``) for the report's notes."""

    sources: list[Source]
    skipped: list[str]


def not_a_log(path: Path) -> str | None:
    """Why a file found in a directory walk is evidently not a log (by extension), else None."""
    name = path.name.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    suffix = Path(name).suffix
    return f"{suffix} file" if suffix in NOT_LOG_SUFFIXES else None


def resolve_inputs(paths: Sequence[str | os.PathLike[str]]) -> Inputs:
    """Expand directories (recursively, sorted, hidden and evidently-not-log files skipped); refuse
    missing paths. Files named explicitly are always read."""
    sources: list[Source] = []
    skipped: list[str] = []
    for raw in (os.fspath(p) for p in paths):  # str or Path: names in the report are always str
        if raw == STDIN:
            sources.append(Source(STDIN, None))
            continue
        path = Path(raw)
        if path.is_dir():
            files = sorted(
                p for p in path.rglob("*")
                if p.is_file() and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
            logs = []
            for p in files:
                why = not_a_log(p)
                if why:
                    skipped.append(f"{p}: {why}")
                else:
                    logs.append(p)
            if not logs:
                left = f" (skipped {len(files)} that are evidently not logs, e.g. {files[0].name})" if files else ""
                raise InputError(f"{raw}: directory holds no log files{left}")
            sources += [Source(str(p), p) for p in logs]
        elif path.exists():
            why = None if path.is_file() else special_file_problem(path)
            if why:
                raise InputError(f"{raw}: {why}")
            sources.append(Source(raw, path))
        else:
            raise InputError(f"{raw}: no such file or directory")
    if not sources:
        raise InputError("no input given")
    return Inputs(sources, skipped)


def special_file_problem(path: Path) -> str | None:
    """Why an existing path that is neither a regular file nor a directory cannot be read as a log;
    None for streams: a FIFO (``<(zcat job.log.gz)``, ``mkfifo``) or a character device (``/dev/stdin``
    on a terminal, ``/dev/null``, which reads as empty input). Endless memory devices (``/dev/zero``,
    ``/dev/urandom``) and block devices (disks) are refused: reading them would never end."""
    mode = path.stat()
    if stat.S_ISFIFO(mode.st_mode):
        return None
    if stat.S_ISCHR(mode.st_mode):
        if os.major(mode.st_rdev) == 1 and os.minor(mode.st_rdev) != 3:  # Linux mem devices; 1:3 is /dev/null
            return "an endless device, not a log"
        return None
    return "not a regular file, FIFO or character device"


class _Replay(io.RawIOBase):
    """A byte stream with the bytes already read from it put back in front (a pipe cannot be rewound)."""

    def __init__(self, head: bytes, rest: io.BufferedReader) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: WriteableBuffer) -> int:
        buf = memoryview(buffer).cast("B")
        if self._head:
            n = min(len(buf), len(self._head))
            buf[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._rest.read1(len(buf))
        buf[:len(data)] = data
        return len(data)

    def close(self) -> None:
        self._rest.close()
        super().close()


def _sniff(fh: io.BufferedReader) -> tuple[bytes, BinaryIO]:
    """The first two bytes of a stream and a stream that still starts with them. ``peek`` may return a
    single byte on a pipe whose writer has written only one so far; then they are read and replayed."""
    head = fh.peek(2)[:2]
    if len(head) == 2 or not head:
        return head, fh
    head = fh.read(2)  # blocks until two bytes or end of input
    return head, io.BufferedReader(_Replay(head, fh))


def _open_binary(source: Source) -> BinaryIO:
    """The source's bytes, gunzipped when they start with the gzip magic (by content, not by name:
    streams such as stdin and FIFOs have no name to go by)."""
    fh: io.BufferedReader
    if source.path is None:
        if not hasattr(sys.stdin.buffer, "peek"):
            return sys.stdin.buffer
        fh = cast(io.BufferedReader, sys.stdin.buffer)
    else:
        try:
            fh = open(source.path, "rb")  # noqa: SIM115 - returned open: read_blocks closes it
        except OSError as exc:
            raise InputError(f"{source.name}: cannot read: {exc.strerror or exc}") from None
    head, stream = _sniff(fh)
    if head == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    return stream


BINARY_HEAD = 64 * 1024  # bytes looked at to tell a binary file from a text log
BINARY_NUL_SHARE = 0.01  # NUL bytes: a text log holds none, a stray one or two at most
BINARY_ODD_SHARE = 0.30  # control bytes (not whitespace or ESC) and undecodable UTF-8
_TEXT_CONTROLS = frozenset(b"\t\n\r\f\v\b\x1b")


def binary_reason(path: Path) -> str | None:
    """Why a file that yielded no NCCL line is a binary file, not a log (judged on its first
    ``BINARY_HEAD`` bytes, gunzipped), else None. A log with a few stray bytes is text. Regular files only:
    a FIFO was read to its end already, and opening it again would wait for another writer."""
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            return None
        fh = _open_binary(Source(str(path), path))
        with fh:
            head = fh.read(BINARY_HEAD)
    except (InputError, *_READ_ERRORS):
        return None
    if not head:
        return None
    nul = head.count(0)
    if nul >= BINARY_NUL_SHARE * len(head):
        return f"{nul} NUL bytes in its first {len(head)} bytes"
    controls = sum(1 for b in head if (b < 0x20 and b not in _TEXT_CONTROLS) or b == 0x7F)
    undecodable = head.decode("utf-8", "replace").count("\ufffd")
    if controls + undecodable >= BINARY_ODD_SHARE * len(head):
        return f"{100 * (controls + undecodable) // len(head)}% control or undecodable bytes at its start"
    return None


CHUNK = 256 * 1024  # bytes read at once; small enough that one block's lines stay in CPU cache
_READ_ERRORS = (EOFError, OSError, zlib.error, gzip.BadGzipFile)


def read_blocks(source: Source, stats: ReadStats) -> Iterator[list[str]]:
    """Yield the decoded physical lines of one source (without line ends), a list per block read.

    Why blocks: one ``read`` + ``decode`` + ``split`` per ``CHUNK`` bytes runs in C, where a
    ``readline`` per line costs a Python-level call each (the floor of a 3-million-line log).
    Memory stays bounded: a line longer than ``MAX_LINE`` bytes is cut to its first ``MAX_LINE``
    bytes, the rest is skipped block by block. A damaged gzip stream or an I/O error ends the source
    early (the incomplete last line is dropped) and is noted in ``stats.error``; never raises on content.
    """
    fh = _open_binary(source)
    read = getattr(fh, "read1", fh.read)  # read1: a truncated .gz still yields all data before the damage
    try:
        yield from _blocks(read, stats)
    finally:
        if source.path is not None:
            fh.close()


def read_range_blocks(path: Path, start: int, end: int, stats: ReadStats) -> Iterator[list[str]]:
    """``read_blocks`` of the bytes ``[start, end)`` of a regular, uncompressed file; ``start`` and
    ``end`` lie at line starts (``parallel.py`` splits a file there), so the lines are the file's own."""
    with open(path, "rb") as fh:
        fh.seek(start)
        left = end - start

        def read(n: int) -> bytes:
            nonlocal left
            data = fh.read(min(n, left)) if left > 0 else b""
            left -= len(data)
            return data

        yield from _blocks(read, stats)


def _blocks(read: Callable[[int], bytes], stats: ReadStats) -> Iterator[list[str]]:
    """The lines of a byte stream, a list per block read (see ``read_blocks``)."""
    pending = b""  # the start of a line whose end was not read yet (< MAX_LINE bytes)
    skipping = False  # inside an over-long line whose first MAX_LINE bytes were already yielded
    while True:
        try:
            data = read(CHUNK)
        except _READ_ERRORS as exc:
            stats.error = _describe_read_error(exc)
            return
        if not data:
            break
        stats.bytes += len(data)
        if skipping:
            k = data.find(b"\n")
            if k < 0:
                continue
            data, skipping = data[k + 1:], False
        data = pending + data if pending else data
        k = data.rfind(b"\n")
        if k < 0:  # no line end in this block: keep (at most MAX_LINE bytes of) the partial line
            if len(data) >= MAX_LINE:
                stats.lines += 1
                stats.cut_lines += 1
                yield [_decode_line(data[:MAX_LINE])]
                pending, skipping = b"", True
            else:
                pending = data
            continue
        pending = data[k + 1:]
        lines = _split_block(data[:k], stats)
        if len(pending) >= MAX_LINE:
            stats.lines += 1
            stats.cut_lines += 1
            lines.append(_decode_line(pending[:MAX_LINE]))
            pending, skipping = b"", True
        yield lines
    if pending:
        stats.lines += 1
        yield [_decode_line(pending)]


def _split_block(data: bytes, stats: ReadStats) -> list[str]:
    """Complete lines of one block (its last line end removed), decoded once for the whole block.

    Decoding the block or each line gives the same text: a newline byte never sits inside a UTF-8
    sequence. Only a block that may hold an over-long line is split line by line, to cut it in bytes.
    """
    text = data.decode("utf-8", "replace")
    lines = text.split("\n")
    stats.lines += len(lines)
    if _may_hold_long_line(data):
        raws = data.split(b"\n")
        if max(map(len, raws)) >= MAX_LINE:
            stats.cut_lines += sum(1 for raw in raws if len(raw) >= MAX_LINE)
            return [_decode_line(raw[:MAX_LINE]) for raw in raws]
    if "\r" in text:
        lines = [line.rstrip("\r") for line in lines]
    return lines


def _may_hold_long_line(data: bytes) -> bool:
    """False when no line of ``data`` can be ``MAX_LINE`` bytes or longer, at a few ``find`` calls a block.

    A line of ``MAX_LINE`` bytes covers at least one whole aligned window of ``MAX_LINE // 2`` bytes, so
    if every such window holds a line end, no line is that long. (Measuring every line instead costs a
    ``len`` per line: as much as splitting the block.)
    """
    step = MAX_LINE // 2
    return any(data.find(b"\n", a, a + step) < 0 for a in range(0, len(data) - step + 1, step))


def _decode_line(raw: bytes) -> str:
    return raw.decode("utf-8", "replace").rstrip("\r\n")


def read_lines(source: Source, stats: ReadStats) -> Iterator[str]:
    """Yield decoded physical lines (without line ends) of one source: ``read_blocks`` one line at a
    time, the simple API for callers that want lines, not blocks."""
    for block in read_blocks(source, stats):
        yield from block


def _describe_read_error(exc: BaseException) -> str:
    if isinstance(exc, EOFError):
        return "compressed stream ended early (truncated .gz)"
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        return f"corrupt compressed data ({exc})"
    return f"read error ({getattr(exc, 'strerror', None) or exc})"


# --- text helpers -----------------------------------------------------------------------------

# Real escapes, escapes pasted as the text "ESC[...m", and "[0m" remnants whose ESC byte was lost.
_ANSI_RE = re.compile(r"(?:\x1b|ESC)\[[0-9;]*[A-Za-z]|\[(?:\d{1,3};)*\d{0,3}m(?= |$)")
# Ray's log deduplication suffix, with its optional explanation in parentheses.
_RAY_REPEAT_RE = re.compile(r"\s*\[repeated \d+x across cluster\](?:\s*\(Ray deduplicates.*)?$")


def clean(text: str) -> str:
    """Drop terminal colour codes and Ray's ``[repeated Nx across cluster]`` suffix."""
    if "[" in text:
        # _ANSI_RE needs an escape ("\x1b[", "ESC[") or an "m" before a space or the end
        if "\x1b[" in text or "ESC[" in text or "m " in text or text[-1:] == "m" or text.endswith("m\n"):
            text = _ANSI_RE.sub("", text)
        if "[repeated" in text:
            text = _RAY_REPEAT_RE.sub("", text)
    return text.strip()


# Where a wrapped line's continuation cannot be: anything that starts a record of its own.
_RECORD_START_RE = re.compile(
    r"""^(?:\s|$|[\[(<>#`|]|\x1b|ESC\[|Traceback|File\ "|During\ handling
        |[\w.-]+:\d+:\d+\ |[\w.-]+:\ |\d+:\ |[IWEF]\d{4}\ |\d{4}-\d\d-\d\d
        |[A-Z][a-z]+\ \d|[A-Za-z_.]*(?:Error|Exception|Warning)\b|NCCL\ )""",
    re.VERBOSE,
)
WRAP_MIN = 100  # a line shorter than this was not hard-wrapped by a terminal


def is_continuation(line: str) -> bool:
    """A physical line that only makes sense glued to the one before (terminal hard wrap)."""
    return bool(line) and not _RECORD_START_RE.match(line)
