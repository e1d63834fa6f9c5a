"""torchrun's stderr: all of it to the launch log, and to the terminal without torchrun's own noise.

torchrun's noise: its glog-style log lines, and the ChildFailedError traceback and box it prints when a
worker exits non-zero (or its SignalException traceback when we stop it on Ctrl-C or the deadline).
Our workers already said what failed; the launcher says where the log is.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import IO, cast

_ELASTIC_LINE = re.compile(rb"^\[?[IWEF]\d{4} [\d:. ]+\d+ .*torch/distributed/(elastic|run)")
_ELASTIC_ERRORS = b"torch.distributed.elastic.multiprocessing.errors"
_SIGNAL_EXCEPTION = b"torch.distributed.elastic.multiprocessing.api.SignalException"
_CHILD_FAILED = b"ChildFailedError"
_TRACEBACK = b"Traceback (most recent call last):"
# c10d's C++ warnings: "[W1130 12:41:53.153939801 socket.cpp:207] [c10d] ..." (a rank's may start "[rank3]:")
_C10D_LINE = re.compile(rb"^(\[rank\d+\]:)?\[[IWEF]\d{4} [\d:.]+ \w+\.cpp:\d+\] ")
# always harmless: the reverse lookup of a peer's address failed (no PTR record); the connection works
_C10D_HARMLESS = (b"The hostname of the client socket cannot be retrieved",)
# a store connection that broke (with a C++ stack dump after it): at shutdown the store's host may exit
# while another node still talks to it, a race that is harmless in a run that passed; shown if it failed
_C10D_BROKEN = re.compile(rb"(recv\w* failed|send\w* failed|should dump\" flag|Connection was likely closed|"
                          rb"Connection reset by peer|Broken pipe)")
_DUMP_LINE = re.compile(rb"^(Exception raised from |frame #\d+: )")
# torchrun's own frames (its main, launcher, agent, rendezvous, and ours it runs: ``rendezvous.py``): a
# traceback with no other frame is torchrun's (a busy rendezvous port, a store it cannot reach); a worker's
# always has other nccl_doctor frames
_TORCHRUN_FRAME = re.compile(rb'^\s+File "[^"]*/(torch/distributed/(run\.py|elastic/|launcher/)|'
                             rb'nccl_doctor/cluster/rendezvous\.py)')
_FROZEN_FRAME = re.compile(rb'^\s+File "<frozen ')
_CHAIN = (b"The above exception was the direct cause of the following exception:",
          b"During handling of the above exception, another exception occurred:")
BOX_RULES = 2  # the "=====" lines that close ChildFailedError's box
BOX_RULE = b"=" * 20  # a line starting with this is one of them
READ_CHUNK = 65536


class StderrFilter:
    """Line by line: True for lines to show. Holds a Python traceback back until its last line says
    whose it is (torchrun's ChildFailedError is dropped with the box after it, its SignalException when
    we stop it, any traceback of torchrun's own code too, its last line kept in ``errors`` for the report;
    a worker's is shown). c10d's harmless warnings are dropped; broken store connections (the shutdown
    race) go to ``deferred``, for the launcher to show only when the run failed. The log keeps it all."""

    def __init__(self) -> None:
        self.held: list[bytes] = []
        self.box = 0  # "=====" lines still to swallow after a ChildFailedError
        self.deferred: list[bytes] = []
        self.errors: list[str] = []  # the last line of each torchrun traceback dropped
        self._dump = False  # inside a deferred c10d stack dump
        self._after_drop = False  # blank and "The above exception..." lines between dropped tracebacks

    def feed(self, line: bytes) -> list[bytes]:
        """The lines to show now for this one (none while a traceback is held, all of it once it is a worker's)."""
        text = line.rstrip(b"\r\n")
        if self.box:
            if text.startswith(BOX_RULE):
                self.box -= 1
            return []
        if self.held:
            return self._feed_held(line, text)
        if self._dump and self._in_dump(line, text):
            return []
        if self._after_drop:
            if not text or text in _CHAIN:
                return []
            self._after_drop = False
        if text.startswith(_TRACEBACK):
            self.held = [line]
            return []
        return [] if self._noise(line, text) else [line]

    def _feed_held(self, line: bytes, text: bytes) -> list[bytes]:
        """A traceback is held: its last line (not indented) says whose it is."""
        self.held.append(line)
        if text[:1] in (b" ", b"\t") or not text:
            return []
        held, self.held = self.held, []
        if _CHILD_FAILED in text:
            self.box = BOX_RULES
            return []
        if text.startswith(_SIGNAL_EXCEPTION):
            return []
        if _torchrun_traceback(held):
            self.errors.append(text.decode(errors="replace"))
            self._after_drop = True
            return []
        return held

    def _in_dump(self, line: bytes, text: bytes) -> bool:
        """Inside a deferred c10d stack dump: its lines are deferred too, up to the blank line after it."""
        if _DUMP_LINE.match(text) or not text:
            self.deferred.append(line)
            self._dump = bool(text)
            return True
        self._dump = False
        return False

    def _noise(self, line: bytes, text: bytes) -> bool:
        """torchrun's log lines and c10d's warnings: dropped, or deferred when a store connection broke."""
        if _ELASTIC_LINE.match(text) or text.startswith(_ELASTIC_ERRORS):
            return True
        if not _C10D_LINE.match(text):
            return False
        if any(h in text for h in _C10D_HARMLESS):
            return True
        if _C10D_BROKEN.search(text):
            self.deferred.append(line)
            self._dump = True
            return True
        return False

    @property
    def busy(self) -> bool:
        """A traceback, box or dump is being held back: a partial line must wait for it."""
        return bool(self.held or self.box or self._dump)

    def flush(self) -> list[bytes]:
        held, self.held = self.held, []
        if held and _torchrun_traceback(held):  # cut short (torchrun killed mid-traceback)
            return []
        return held


def _torchrun_traceback(lines: list[bytes]) -> bool:
    """Every frame is torchrun's own (or runpy's), at least one being torch.distributed's launcher."""
    frames = [x for x in lines if x.lstrip().startswith(b'File "')]
    own = [x for x in frames if _TORCHRUN_FRAME.match(x)]
    return bool(own) and all(_TORCHRUN_FRAME.match(x) or _FROZEN_FRAME.match(x) for x in frames)


def binary_out(stream: IO[str] | IO[bytes]) -> IO[bytes]:
    """A text stream's byte buffer (``sys.stderr.buffer``), or the stream itself when it takes bytes."""
    buffer: IO[bytes] | None = getattr(stream, "buffer", None)
    return buffer if buffer is not None else cast("IO[bytes]", stream)


def relay_stderr(src: IO[bytes], dst: IO[str] | IO[bytes], log: Path, filt: StderrFilter | None = None) -> None:
    """Copy torchrun's stderr to ``log`` whole, and to ``dst`` without torchrun's own noise. Partial
    lines (a progress bar redrawing with \\r) pass at once."""
    filt = filt or StderrFilter()
    out = binary_out(dst)
    pending = b""
    with open(log, "ab") as fh:
        while True:
            chunk = os.read(src.fileno(), READ_CHUNK)
            if not chunk:
                break
            fh.write(chunk)
            fh.flush()
            pending += chunk
            *lines, pending = pending.split(b"\n")
            shown = [x for line in lines for x in filt.feed(line + b"\n")]
            if pending and (b"\r" in pending or b"\x1b" in pending) and not filt.busy:
                shown.append(pending)
                pending = b""
            show(out, shown)
        show(out, [x for line in ([pending] if pending else []) for x in filt.feed(line)] + filt.flush())


def show(out: IO[bytes], chunks: list[bytes]) -> None:
    """Write and flush; a closed or broken terminal must not stop the relay (the log still gets it all)."""
    if not chunks:
        return
    try:
        out.write(b"".join(chunks))
        out.flush()
    except (OSError, ValueError):
        pass
