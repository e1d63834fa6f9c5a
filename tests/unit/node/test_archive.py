"""``probe --root FILE.tar.gz`` reads the snapshot in memory, vetted and bounded: each hostile archive is
built here and the attack it carries (a ``..`` or absolute member, a member under a symlinked directory, a
hard link to a root-only file, a FIFO, a huge member, too many members) is shown to fail, on this Python
and on Debian's /usr/bin/python3 (3.11.2: no ``tarfile.data_filter``)."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import os
import subprocess
import sysconfig
import tarfile
import tempfile
import time
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.errors import InputError
from nccl_doctor.node.archive import MAX_TOTAL_BYTES, read_snapshot
from nccl_doctor.node.fsreader import MAX_FILE_BYTES

pytestmark = pytest.mark.usefixtures("no_nccl_env")

ROOT = Path(__file__).resolve().parents[3]
SYSTEM_PYTHON = "/usr/bin/python3"
SECRET = "NCCL_IB_HCA=SECRET-6f1d\nAPI_TOKEN=SECRET-77aa\n"


def members(snap: Path) -> list[tuple[tarfile.TarInfo, bytes | None]]:
    with tarfile.open(snap) as tar:
        return [(m, tar.extractfile(m).read() if m.isfile() else None) for m in tar.getmembers()]  # type: ignore[union-attr]


def hostile(snap: Path, out: Path, extra: list[tuple[tarfile.TarInfo, bytes | None]],
            drop: tuple[str, ...] = ()) -> Path:
    """``snap``'s members (less ``drop``) followed by ``extra``, as a new .tar.gz."""
    with tarfile.open(out, "w:gz") as tar:
        for ti, data in [*(m for m in members(snap) if m[0].name not in drop), *extra]:
            tar.addfile(ti, io.BytesIO(data) if data is not None else None)
    return out


def reg(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    ti = tarfile.TarInfo(name)
    ti.size = len(data)
    return ti, data


def special(name: str, kind: bytes, **kw: str) -> tuple[tarfile.TarInfo, None]:
    ti = tarfile.TarInfo(name)
    ti.type = kind
    for k, v in kw.items():
        setattr(ti, k, v)
    return ti, None


def one_line_error(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == "" and len(err.strip().splitlines()) == 1, err
    return err


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """Where an escaping member would land: must stay empty."""
    d = tmp_path / "outside"
    d.mkdir()
    return d


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    s = tmp_path / "root-only" / "shadow"
    s.parent.mkdir()
    s.write_text(SECRET)
    os.chmod(s, 0o600)
    return s


def test_a_dot_dot_member_is_refused_and_nothing_lands_outside(snap, tmp_path, outside, capsys):
    bad = hostile(snap, tmp_path / "bad.tar.gz", [reg("../" * 12 + str(outside).lstrip("/") + "/escaped", b"x")])
    assert main(["probe", "--root", str(bad)]) == 2
    assert "unsafe snapshot member" in one_line_error(capsys)
    assert list(outside.iterdir()) == []


def test_an_absolute_member_is_refused(snap, tmp_path, outside, capsys):
    bad = hostile(snap, tmp_path / "bad.tar.gz", [reg(str(outside / "abs"), b"x")])
    assert main(["probe", "--root", str(bad)]) == 2
    assert "(absolute or '..')" in one_line_error(capsys)
    assert list(outside.iterdir()) == []


def test_a_member_under_a_symlinked_directory_stays_in_the_snapshot(snap, tmp_path, outside, capsys):
    """``etc -> <outside>`` then ``etc/nccl.conf``: extracted, the file would land outside. Read in memory,
    the link is resolved under the snapshot's own root (where <outside> does not exist)."""
    link = special("etc", tarfile.SYMTYPE, linkname=str(outside))
    bad = hostile(snap, tmp_path / "bad.tar.gz", [link, reg("etc/nccl.conf", b"NCCL_IB_HCA=planted\n")],
                  drop=("etc", "etc/hosts"))
    assert main(["probe", "--root", str(bad), "--format", "json"]) in (0, 1)
    assert list(outside.iterdir()) == []
    assert "planted" not in capsys.readouterr().out


def test_a_hard_link_to_a_root_only_file_is_refused_and_nothing_of_it_printed(snap, tmp_path, secret, capsys):
    bad = hostile(snap, tmp_path / "bad.tar.gz", [special("etc/nccl.conf", tarfile.LNKTYPE, linkname=str(secret))])
    assert main(["probe", "--root", str(bad)]) == 2
    err = one_line_error(capsys)
    assert "a hard link to" in err and "SECRET" not in err


def test_a_hard_link_to_an_earlier_member_is_read(snap, tmp_path, capsys):
    ok = hostile(snap, tmp_path / "ok.tar.gz", [reg("etc/site.conf", b"NCCL_IB_HCA=mlx5_0\n"),
                                               special("etc/nccl.conf", tarfile.LNKTYPE, linkname="etc/site.conf")])
    assert main(["probe", "--root", str(ok), "--format", "json"]) in (0, 1)
    assert json.loads(capsys.readouterr().out)["settings"]["NCCL_IB_HCA"]["value"] == "mlx5_0"


@pytest.mark.parametrize(("kind", "what"), [(tarfile.FIFOTYPE, "a FIFO"), (tarfile.CHRTYPE, "a character device")])
def test_a_special_member_is_skipped_with_a_finding(snap, tmp_path, kind, what, capsys):
    bad = hostile(snap, tmp_path / "bad.tar.gz", [special("etc/hosts", kind)], drop=("etc/hosts",))
    assert main(["probe", "--root", str(bad), "--format", "json"]) in (0, 1)
    found = [f for f in json.loads(capsys.readouterr().out)["findings"] if f["code"] == "ND227"]
    assert [(f["severity"], f["where"]["file"]) for f in found] == [("warn", "/etc/hosts")]
    assert what in found[0]["message"]


def test_a_member_over_the_file_limit_is_not_kept(snap, tmp_path, capsys):
    big = hostile(snap, tmp_path / "big.tar.gz", [reg("etc/hosts", b"#" * (MAX_FILE_BYTES + 1))], drop=("etc/hosts",))
    fs = read_snapshot(big)
    assert "/etc/hosts" not in fs.tree.files and fs.read("/etc/hosts") is None
    assert fs.skipped == {"/etc/hosts": f"larger than {MAX_FILE_BYTES} bytes"}
    assert main(["probe", "--root", str(big), "--format", "json"]) in (0, 1)
    assert "ND227" in {f["code"] for f in json.loads(capsys.readouterr().out)["findings"]}


def _huge_member_archive(path: Path, claimed: int, zeros: int) -> Path:
    """A tar header claiming ``claimed`` bytes, then ``zeros`` zero bytes, gzip'd: megabytes on disk for
    hundreds of megabytes inflated, without ever holding them."""
    ti = tarfile.TarInfo("etc/blob")
    ti.size = claimed
    chunk = bytes(1 << 20)
    with gzip.open(path, "wb", compresslevel=1) as gz:
        gz.write(ti.tobuf(format=tarfile.GNU_FORMAT))
        for _ in range(zeros >> 20):
            gz.write(chunk)
    return path


@pytest.mark.slow  # a member past the total limit
def test_a_huge_member_stops_at_the_total_limit_and_writes_nothing(tmp_path, capsys, monkeypatch):
    """A header claiming 2 GiB, then more zeros than the limit: one line, exit 2, within seconds, nothing in
    TMPDIR (the old extraction wrote the member out)."""
    scratch = tmp_path / "tmpdir"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setattr(tempfile, "tempdir", None)
    bomb = _huge_member_archive(tmp_path / "bomb.tar.gz", 2 << 30, MAX_TOTAL_BYTES + (16 << 20))
    assert bomb.stat().st_size < 4 << 20
    start = time.monotonic()
    assert main(["probe", "--root", str(bomb)]) == 2
    elapsed = time.monotonic() - start
    assert f"more than {MAX_TOTAL_BYTES} bytes once decompressed" in one_line_error(capsys)
    assert list(scratch.iterdir()) == [] and elapsed < 30


def test_the_limits_are_parameters(snap, tmp_path):
    """Member count and total bytes, each just below and just above what the snapshot holds."""
    n = len(members(snap))
    total = len(gzip.decompress(snap.read_bytes()))
    read_snapshot(snap, max_members=n, max_total_bytes=total)
    with pytest.raises(InputError, match=f"more than {n - 1} members"):
        read_snapshot(snap, max_members=n - 1)
    with pytest.raises(InputError, match="bytes once decompressed"):
        read_snapshot(snap, max_total_bytes=total - 1)


@pytest.mark.slow  # 50,000 members
def test_many_members_are_read_in_memory_without_inodes(tmp_path):
    """50k tiny members: read in seconds, no file made (the old extraction made one inode each)."""
    many = tmp_path / "many.tar.gz"
    with tarfile.open(many, "w:gz", compresslevel=1) as tar:
        for i in range(50_000):
            ti, data = reg(f"sys/x/{i}", b"1")
            tar.addfile(ti, io.BytesIO(data))
    start = time.monotonic()
    fs = read_snapshot(many)
    assert len(fs.tree.files) == 50_000 and time.monotonic() - start < 30
    assert sorted(p.name for p in tmp_path.iterdir()) == ["many.tar.gz"]


def _system_python_reason() -> str | None:
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is absent: no Python without tarfile.data_filter to try"
    has = subprocess.run([SYSTEM_PYTHON, "-c", "import tarfile; print(hasattr(tarfile, 'data_filter'))"],
                         capture_output=True, text=True, timeout=60, check=False).stdout.strip()
    return None if has == "False" else f"{SYSTEM_PYTHON} has tarfile.data_filter: nothing to show on it"


@pytest.mark.skipif(_system_python_reason() is not None, reason=str(_system_python_reason()))
def test_on_a_python_without_data_filter_hostile_snapshots_fail_and_good_ones_replay(snap, tmp_path, outside, secret):
    """Debian's python3 with this checkout and the venv's packages on its path: the attacks that worked
    through the bare ``extractall`` fallback fail, and a real snapshot still replays."""
    site = os.pathsep.join(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))  # this env's
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}{os.pathsep}{site}", "LANG": "C.UTF-8", "HOME": "/nonexistent",
           "TMPDIR": str(outside)}

    def probe(archive: Path) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SYSTEM_PYTHON, "-m", "nccl_doctor", "probe", "--root", str(archive)], env=env,
                              capture_output=True, text=True, timeout=120, check=False)

    escape = hostile(snap, tmp_path / "escape.tar.gz", [reg("../" * 12 + str(outside).lstrip("/") + "/x", b"x")])
    under_link = hostile(snap, tmp_path / "link.tar.gz", [special("etc", tarfile.SYMTYPE, linkname=str(outside)),
                                                         reg("etc/nccl.conf", b"NCCL_IB_HCA=planted\n")],
                         drop=("etc", "etc/hosts"))
    hardlink = hostile(snap, tmp_path / "hard.tar.gz",
                       [special("etc/nccl.conf", tarfile.LNKTYPE, linkname=str(secret))])
    for bad in (escape, hardlink):
        res = probe(bad)
        assert res.returncode == 2 and "unsafe snapshot member" in res.stderr and res.stdout == "", res.stderr
        assert "SECRET" not in res.stderr
    res = probe(under_link)
    assert res.returncode in (0, 1) and "planted" not in res.stdout, res.stderr
    assert list(outside.iterdir()) == []
    good = probe(snap)
    assert good.returncode == 0 and "ND200" in good.stdout, good.stderr


@pytest.mark.parametrize("compress", ["xz", "bz2", "plain"])
def test_other_compressions_replay_like_the_gzip_snapshot(snap, tmp_path, compress, capsys):
    """``tarfile``'s ``r:*`` took them before; they are read lazily and capped the same way."""
    tar = gzip.decompress(snap.read_bytes())
    other = tmp_path / f"node.tar.{compress}"
    other.write_bytes({"xz": lzma.compress, "bz2": bz2.compress, "plain": bytes}[compress](tar))
    assert main(["probe", "--root", str(snap), "--format", "json"]) == 0
    first = json.loads(capsys.readouterr().out)
    assert main(["probe", "--root", str(other), "--format", "json"]) == 0
    second = json.loads(capsys.readouterr().out)
    first.pop("root"), second.pop("root")
    assert first == second
    with pytest.raises(InputError, match="bytes once decompressed"):
        read_snapshot(other, max_total_bytes=len(tar) - 1)
