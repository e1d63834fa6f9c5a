"""``probe --root FILE.tar.gz``: a snapshot read into memory, never extracted, vetted and bounded.

Nothing of the archive touches the disk, so no member can land outside a directory, whatever the Python
(``tarfile.data_filter`` is missing before 3.10.12 / 3.11.4). The probe then reads the members through
``SnapshotReader``, which answers ``FsReader``'s primitives from memory: symlinks are resolved by
``FsReader`` under the snapshot's own root (an absolute or ``..`` target cannot leave it), a member under a
symlinked directory is simply never reached, and a hard link may only repeat a file read before it.
Refused with one line (exit 2): an absolute or ``..`` member name, a hard link to anything else, more than
``MAX_MEMBERS`` members or more than ``MAX_TOTAL_BYTES`` of tar once decompressed. A FIFO or device member
and a file over ``MAX_FILE_BYTES`` are kept only as such: the probe skips them with a finding if it wants
them.
"""

from __future__ import annotations

import bz2
import gzip
import lzma
import posixpath
import tarfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, cast

from nccl_doctor.errors import InputError
from nccl_doctor.node.fsreader import MAX_FILE_BYTES, FsReader, Kind, too_large

GZIP_MAGIC, BZ2_MAGIC, XZ_MAGIC = b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00"
MAX_MEMBERS = 200_000  # a live probe's snapshot holds ~15 per interface: 66 here (4 interfaces), ~120k at 8,000
MAX_TOTAL_BYTES = 256 << 20  # the tar stream, decompressed: 133 KB here; ~1 KiB per member besides the data
_SPECIAL_TYPES = {tarfile.FIFOTYPE: "a FIFO", tarfile.CHRTYPE: "a character device",
                  tarfile.BLKTYPE: "a block device"}


class _OverLimitError(Exception):
    """The decompressed stream went past ``MAX_TOTAL_BYTES``."""


class _Capped:
    """A read-only stream that fails once more than ``limit`` bytes came out of it (read requests are cut
    to what is left, so no single read inflates more)."""

    def __init__(self, raw: BinaryIO, limit: int):
        self._raw, self._left = raw, limit

    def read(self, n: int = -1) -> bytes:
        want = self._left + 1 if n < 0 else min(n, self._left + 1)
        data = self._raw.read(want)
        self._left -= len(data)
        if self._left < 0:
            raise _OverLimitError
        return data


@dataclass
class MemoryTree:
    """A snapshot's members by canonical path (``/sys/class/net``); parents of members are directories."""

    files: dict[str, bytes] = field(default_factory=dict)
    links: dict[str, str] = field(default_factory=dict)
    special: dict[str, str] = field(default_factory=dict)  # path -> why it is skipped (a FIFO, too large)
    dirs: set[str] = field(default_factory=lambda: {"/"})
    children: dict[str, set[str]] = field(default_factory=dict)

    def add(self, path: str) -> None:
        """Forget what ``path`` was (a later member wins, as on extraction) and list it in its parents."""
        for table in (self.files, self.links, self.special):
            table.pop(path, None)
        self.dirs.discard(path)
        child = path
        while child != "/":
            parent = posixpath.dirname(child)
            self.children.setdefault(parent, set()).add(posixpath.basename(child))
            if parent in self.dirs or self.kind(parent) is not None:
                break  # known already; or under a file or link: unreachable, as under a symlinked dir on disk
            self.dirs.add(parent)
            child = parent

    def kind(self, path: str) -> Kind | None:
        if path in self.links:
            return Kind.LINK
        if path in self.files:
            return Kind.FILE
        if path in self.special:
            return Kind.SPECIAL
        return Kind.DIR if path in self.dirs else None


class SnapshotReader(FsReader):
    """``FsReader`` over a ``MemoryTree``: the probe reads a snapshot exactly as it reads a tree."""

    def __init__(self, archive: Path, tree: MemoryTree):
        super().__init__(archive)
        self.tree = tree

    @property
    def live(self) -> bool:
        return False

    def root_problem(self) -> str | None:
        return None

    def _kind(self, canon: str) -> Kind | None:
        return self.tree.kind(canon)

    def _readlink(self, canon: str) -> str | None:
        return self.tree.links.get(canon)

    def _listdir(self, canon: str) -> list[str] | None:
        return sorted(self.tree.children.get(canon, ())) if canon in self.tree.dirs else None

    def _read_bytes(self, canon: str) -> bytes | None:
        return self.tree.files.get(canon)

    def _special_reason(self, canon: str) -> str:
        return self.tree.special.get(canon, "not a regular file")


def member_path(name: str, archive: Path) -> str | None:
    """``sys/class/net`` -> ``/sys/class/net``; None for the root itself. Absolute and ``..`` names are
    refused: ``write_snapshot`` never makes one, so the archive was made to escape."""
    if name.startswith("/") or ".." in name.split("/"):
        raise InputError(f"--root {archive}: unsafe snapshot member {name!r} (absolute or '..'), not read")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    return "/" + "/".join(parts) if parts else None


def _hardlink(tree: MemoryTree, member: tarfile.TarInfo, archive: Path) -> bytes:
    """A hard link repeats a regular file read before it, nothing else (``/etc/shadow`` is not in here)."""
    name = member.linkname
    target = None if name.startswith("/") or ".." in name.split("/") else member_path(name, archive)
    if target is None or target not in tree.files:
        raise InputError(f"--root {archive}: unsafe snapshot member {member.name!r}: a hard link to "
                         f"{member.linkname!r}, not a file earlier in the archive; not read")
    return tree.files[target]


def _add_member(tar: tarfile.TarFile, member: tarfile.TarInfo, tree: MemoryTree, archive: Path,
                max_file_bytes: int) -> None:
    path = member_path(member.name, archive)
    if path is None:
        return
    if member.islnk():
        data = _hardlink(tree, member, archive)
        tree.add(path)
        tree.files[path] = data
        return
    tree.add(path)
    if member.isdir():
        tree.dirs.add(path)
    elif member.issym():
        tree.links[path] = member.linkname
    elif member.type in _SPECIAL_TYPES:
        tree.special[path] = _SPECIAL_TYPES[member.type]
    elif not member.isfile():
        tree.special[path] = "not a regular file"
    elif member.size > max_file_bytes:  # its data is skipped (still counted against the total)
        tree.special[path] = too_large(max_file_bytes)
    else:
        fh = tar.extractfile(member)
        tree.files[path] = fh.read() if fh is not None else b""


def read_snapshot(archive: Path, *, max_members: int = MAX_MEMBERS, max_total_bytes: int = MAX_TOTAL_BYTES,
                  max_file_bytes: int = MAX_FILE_BYTES) -> SnapshotReader:
    """The snapshot at ``archive`` (gzip'd or plain tar) in memory, for the probe to read; one-line
    ``InputError`` naming the file when it is unreadable, not a tar archive, cut short, unsafe or over a
    limit."""
    try:
        fh = open(archive, "rb")  # noqa: SIM115 - closed in the finally below, after the stream is read
    except OSError as exc:
        raise InputError(f"--root {archive}: cannot read: {exc.strerror or exc}") from None
    tree, magic = MemoryTree(), b""
    try:
        magic = fh.read(len(XZ_MAGIC))
        fh.seek(0)
        raw = _decompressed(fh, magic)
        count = 0
        with tarfile.open(fileobj=_Capped(raw, max_total_bytes), mode="r|") as tar:  # type: ignore[call-overload]
            while (member := tar.next()) is not None:
                tar.members.clear()  # tarfile keeps every header it read: not needed here, and unbounded
                count += 1
                if count > max_members:
                    raise InputError(f"--root {archive}: more than {max_members} members: not a probe "
                                     "snapshot (or one of a node no probe could read), not read")
                _add_member(tar, member, tree, archive, max_file_bytes)
    except _OverLimitError:
        raise InputError(f"--root {archive}: more than {max_total_bytes} bytes once decompressed: not a "
                         "probe snapshot, not read") from None
    except (tarfile.TarError, EOFError, zlib.error, lzma.LZMAError, OSError):
        raise InputError(_bad_archive(archive, magic)) from None
    finally:
        fh.close()
    return SnapshotReader(archive, tree)


def _decompressed(fh: BinaryIO, magic: bytes) -> BinaryIO:
    """The tar stream inside ``fh``: gzip (what ``--snapshot`` writes), bzip2, xz, or plain, as
    ``tarfile``'s ``r:*`` took them; read lazily, so a bomb inflates only up to the cap."""
    if magic.startswith(GZIP_MAGIC):
        return cast(BinaryIO, gzip.GzipFile(fileobj=fh, mode="rb"))
    if magic.startswith(BZ2_MAGIC):
        return cast(BinaryIO, bz2.BZ2File(fh))
    if magic.startswith(XZ_MAGIC):
        return cast(BinaryIO, lzma.LZMAFile(fh))
    return fh


def _bad_archive(archive: Path, magic: bytes) -> str:
    if magic.startswith(GZIP_MAGIC):
        return f"--root {archive}: truncated or corrupt .tar.gz (not a complete snapshot)"
    return f"--root {archive}: not a directory or a .tar.gz snapshot"
