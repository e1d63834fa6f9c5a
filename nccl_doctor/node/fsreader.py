"""Reading files under a root as if it were ``/``, recording what was read (for ``--snapshot``), bounded:
no FIFO, device or socket is ever opened and no file over ``MAX_FILE_BYTES`` is kept."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from nccl_doctor.enums import StrEnum

_MAX_LINKS = 40
MAX_FILE_BYTES = 1 << 20  # a file the probe reads (sysfs values, /proc/net, /etc/hosts, nccl.conf) is far smaller
_READ_CHUNK = 1 << 16


class Kind(StrEnum):
    """What a path under the root is, without following it."""

    FILE = "file"
    DIR = "dir"
    LINK = "link"
    SPECIAL = "special"  # a FIFO, device or socket: never opened


def special_kind(mode: int) -> str:
    """``a FIFO``, ``a character device``... for a skipped file's finding."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "a socket" if stat.S_ISSOCK(mode) else "not a regular file"


def too_large(limit: int = MAX_FILE_BYTES) -> str:
    """Why a file over ``limit`` is skipped, for its finding."""
    return f"larger than {limit} bytes"


class FsReader:
    """Read files as if ``root`` were ``/``: absolute link targets are re-rooted, nothing escapes root.

    ``files`` (canonical path -> text), ``links`` (canonical path -> target) and ``dirs`` (canonical
    paths) record what was touched; paths are absolute strings relative to the root ("/sys/...").
    ``skipped`` (canonical path -> why) holds the files the probe wanted but did not read: a FIFO, a device
    or a socket (opening one could hang or have effects), or a file over ``MAX_FILE_BYTES``.
    The primitives (``_kind``, ``_readlink``, ``_listdir``, ``_read_bytes``, ``_special_reason``) read a
    directory tree; ``archive.SnapshotReader`` answers them from a snapshot held in memory instead.
    """

    def __init__(self, root: Path | str = "/"):
        self.root = Path(root)
        self.files: dict[str, str] = {}
        self.links: dict[str, str] = {}
        self.dirs: set[str] = set()
        self.skipped: dict[str, str] = {}
        self.absent: set[str] = set()  # paths known to be missing on the node itself (a snapshot records them)
        self._dir_cache: dict[str, str | None] = {"/": "/"}

    @property
    def live(self) -> bool:
        """True when reading this machine's own ``/`` (only then do passwd and the real env apply)."""
        return self.root.resolve() == Path("/")

    def root_problem(self) -> str | None:
        """Why the root cannot be probed at all (``does not exist``...), None when it can."""
        if not self.root.exists():
            return "does not exist"
        return None if self.root.is_dir() else "not a directory or a .tar.gz snapshot"

    # -- primitives: a directory tree --------------------------------------------------------------
    def _host(self, canon: str) -> str:
        return os.path.join(str(self.root), canon.lstrip("/"))

    def _kind(self, canon: str) -> Kind | None:
        try:
            mode = os.lstat(self._host(canon)).st_mode
        except OSError:
            return None
        if stat.S_ISLNK(mode):
            return Kind.LINK
        if stat.S_ISDIR(mode):
            return Kind.DIR
        return Kind.FILE if stat.S_ISREG(mode) else Kind.SPECIAL

    def _readlink(self, canon: str) -> str | None:
        try:
            return os.readlink(self._host(canon))
        except OSError:
            return None

    def _listdir(self, canon: str) -> list[str] | None:
        try:
            return os.listdir(self._host(canon))
        except OSError:
            return None

    def _read_bytes(self, canon: str) -> bytes | None:
        """A regular file's bytes, at most ``MAX_FILE_BYTES``; a FIFO or device is never opened (a FIFO
        would block forever), and one swapped in after the check is refused by ``fstat``."""
        try:
            fd = os.open(self._host(canon), os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                self.skipped[canon] = special_kind(mode)
                return None
            chunks, size = [], 0
            while size <= MAX_FILE_BYTES:
                chunk = os.read(fd, _READ_CHUNK)
                if not chunk:
                    break
                chunks.append(chunk)
                size += len(chunk)
        except OSError:  # sysfs answers EINVAL/EIO for values a device cannot give
            return None
        finally:
            os.close(fd)
        if size > MAX_FILE_BYTES:
            self.skipped[canon] = too_large()
            return None
        return b"".join(chunks)

    # -- path resolution --------------------------------------------------------------------------
    def _resolve_dir(self, canon_dir: str, parts: list[str], depth: int = 0) -> str | None:
        cur = canon_dir
        for part in parts:
            if part in ("", "."):
                continue
            if part == "..":
                cur = os.path.dirname(cur) or "/"
                continue
            nxt = os.path.join(cur, part)
            kind = self._kind(nxt)
            if kind is None:
                return None
            if kind == Kind.LINK:
                target = self._readlink(nxt)
                if target is None or depth >= _MAX_LINKS:
                    return None
                self.links[nxt] = target
                base = "/" if target.startswith("/") else cur
                res = self._resolve_dir(base, target.split("/"), depth + 1)
                if res is None:
                    return None
                cur = res
            else:
                cur = nxt
        return cur

    def canonical(self, path: str) -> str | None:
        """The link-free path of ``path`` under the root, or None when it does not exist."""
        path = "/" + path.strip("/")
        parent, name = os.path.split(path)
        if parent not in self._dir_cache:
            self._dir_cache[parent] = self._resolve_dir("/", parent.split("/"))
        pdir = self._dir_cache[parent]
        if pdir is None:
            return None
        if not name:
            return pdir
        return self._resolve_dir(pdir, [name])

    # -- reads ------------------------------------------------------------------------------------
    def read(self, path: str) -> str | None:
        """File text with the trailing newline stripped; None if missing, unreadable (EINVAL...) or
        skipped (``skipped`` says why). Line ends are kept as they are (no CRLF translation): NCCL reads
        nccl.conf byte for byte."""
        canon = self.canonical(path)
        if canon is None:
            return None
        if canon in self.files:
            return self.files[canon].rstrip("\n")
        if self._kind(canon) == Kind.SPECIAL:
            self.skipped[canon] = self._special_reason(canon)
            return None
        data = self._read_bytes(canon)
        if data is None:
            return None
        text = data.decode("utf-8", errors="replace")
        self.files[canon] = text
        return text.rstrip("\n")

    def _special_reason(self, canon: str) -> str:
        """What the special file at ``canon`` is (primitive)."""
        try:
            return special_kind(os.lstat(self._host(canon)).st_mode)
        except OSError:
            return "not a regular file"

    def redact(self, path: str, text: str) -> None:
        """Record ``text`` instead of what was read at ``path``: what a snapshot keeps of a file whose
        other lines are none of the probe's business (``ncclenv.conf_record``)."""
        canon = self.canonical(path)
        if canon is not None and canon in self.files:
            self.files[canon] = text

    def read_int(self, path: str, base: int = 10) -> int | None:
        text = self.read(path)
        try:
            return int(text.strip(), base) if text is not None else None
        except ValueError:
            return None

    def readlink(self, path: str) -> str | None:
        """Target of the link at ``path`` (its parents resolved); None when it is not a link."""
        path = "/" + path.strip("/")
        parent, name = os.path.split(path)
        pdir = self.canonical(parent)
        if pdir is None:
            return None
        at = os.path.join(pdir, name)
        target = self._readlink(at)
        if target is None:
            return None
        self.links[at] = target
        return target

    def link_name(self, path: str) -> str | None:
        """Basename of what a link points to (``device/driver`` -> ``mlx5_core``)."""
        target = self.readlink(path)
        return os.path.basename(target.rstrip("/")) if target else None

    def listdir(self, path: str) -> list[str]:
        """Sorted entries; links and directories among them are recorded (not followed)."""
        canon = self.canonical(path)
        if canon is None:
            return []
        found = self._listdir(canon)
        if found is None:
            return []
        names = sorted(found)
        self.dirs.add(canon)
        for name in names:
            at = os.path.join(canon, name)
            kind = self._kind(at)
            if kind == Kind.LINK:
                target = self._readlink(at)
                if target is not None:
                    self.links[at] = target
            elif kind == Kind.DIR:
                self.dirs.add(at)
        return names

    def is_dir(self, path: str) -> bool:
        canon = self.canonical(path)
        if canon is None or self._kind(canon) != Kind.DIR:
            return False
        self.dirs.add(canon)
        return True
