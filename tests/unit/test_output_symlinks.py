"""Output files never follow a symlink planted where they will be written: the attack (a link in a sticky,
world-writable directory to a root-only file, to nowhere, to a directory) is performed, and the victim is
shown untouched while the report lands at the path itself as a regular file. Streams named by our own
descriptors (``/dev/stdout``) and links we own to a FIFO still work; reports that hold a NIC inventory
are 0600."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from nccl_doctor.cli import main

ROOT = Path(__file__).resolve().parents[2]
LOG = str(ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log")
SECRET = "root-only secret\n"
NOBODY = 65534
ATTACKER = 65533  # the planted links' owner: any user but the one writing
SYSTEM_PYTHON = "/usr/bin/python3"
ROOT_ONLY = "planting a link owned by another user needs root (CI runs as root)"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason=ROOT_ONLY)


@pytest.fixture
def sticky(tmp_path: Path) -> Path:
    """A /tmp-like directory: world-writable with the sticky bit."""
    d = tmp_path / "shared"
    d.mkdir()
    os.chmod(d, 0o1777)
    return d


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    """A 0600 file outside the shared directory that the attacker wants overwritten."""
    v = tmp_path / "private" / "shadow"
    v.parent.mkdir()
    v.write_text(SECRET)
    os.chmod(v, 0o600)
    return v


def plant(link: Path, target: Path | str, uid: int = ATTACKER) -> Path:
    link.symlink_to(target)
    if os.geteuid() == 0:
        os.lchown(link, uid, uid)
    return link


def assert_untouched(victim: Path) -> None:
    st = os.stat(victim)
    assert victim.read_text() == SECRET and stat.S_IMODE(st.st_mode) == 0o600 and st.st_uid == os.geteuid()


def assert_report_at(path: Path) -> dict:
    st = os.lstat(path)
    assert stat.S_ISREG(st.st_mode), f"{path} is not a regular file"
    doc = json.loads(path.read_text())
    assert doc["verdict"] == "pass"
    return doc


@needs_root
@pytest.mark.parametrize("option", ["--json-out", "--junit-out"])
def test_a_planted_link_to_a_root_only_file_is_replaced_not_followed(sticky, victim, option, capsys):
    link = plant(sticky / "report.out", victim)
    assert main(["parse", LOG, option, str(link)]) == 0
    assert capsys.readouterr().err == ""
    assert_untouched(victim)
    assert stat.S_ISREG(os.lstat(link).st_mode) and "ND101" in link.read_text()
    assert sorted(p.name for p in sticky.iterdir()) == ["report.out"]  # no temp file left


@needs_root
def test_a_dangling_link_creates_nothing_at_its_target(sticky, tmp_path, capsys):
    target = tmp_path / "private-new"
    link = plant(sticky / "report.json", target)
    assert main(["parse", LOG, "--json-out", str(link)]) == 0
    assert not target.exists() and not os.path.lexists(target)
    assert_report_at(link)


@needs_root
def test_a_link_to_a_directory_is_replaced_and_the_directory_left_alone(sticky, tmp_path, capsys):
    d = tmp_path / "etc-like"
    d.mkdir()
    (d / "keep").write_text("x")
    link = plant(sticky / "report.json", d)
    assert main(["parse", LOG, "--json-out", str(link)]) == 0
    assert sorted(p.name for p in d.iterdir()) == ["keep"] and (d / "keep").read_text() == "x"
    assert_report_at(link)


@needs_root
def test_a_snapshot_to_a_planted_link_replaces_the_link(sticky, victim, dgx, no_nccl_env, capsys):
    link = plant(sticky / "node.tar.gz", victim)
    assert main(["probe", "--root", str(dgx), "--snapshot", str(link)]) == 0
    assert_untouched(victim)
    st = os.lstat(link)
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600


def _as_nobody(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """``nccl-doctor ARGS`` as user nobody, with the system Python (the venv's interpreter lives under
    /root, out of nobody's reach) and this checkout plus the venv's packages on the path."""
    site = next((ROOT / ".venv" / "lib").glob("python3*/site-packages"))
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{ROOT}:{site}", "LANG": "C.UTF-8"}
    return subprocess.run([SYSTEM_PYTHON, "-m", "nccl_doctor", *args], cwd=cwd, env=env, user=NOBODY,
                          group=NOBODY, extra_groups=[], capture_output=True, text=True, timeout=120, check=False)


def _nobody_can_run() -> str | None:
    if os.geteuid() != 0:
        return ROOT_ONLY
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return f"{SYSTEM_PYTHON} is absent: no interpreter user nobody can run"
    for p in [ROOT, *ROOT.parents]:
        if not os.stat(p).st_mode & stat.S_IXOTH:
            return f"{p} is not searchable by other users: nobody cannot read this checkout"
    return None


@pytest.fixture
def world() -> Iterator[Path]:
    """A directory nobody can reach (pytest's own tmp dirs are 0700): unique under /tmp, removed after."""
    base = Path(tempfile.mkdtemp(prefix="nccl-doctor-links.", dir="/tmp"))
    try:
        os.chmod(base, 0o755)
        (base / "shared").mkdir()
        os.chmod(base / "shared", 0o1777)
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(_nobody_can_run() is not None, reason=str(_nobody_can_run()))
@pytest.mark.parametrize("dangling", [False, True], ids=["to-a-0600-file", "dangling"])
def test_as_a_user_a_link_planted_by_another_is_refused_before_any_work(world, dangling):
    """nobody cannot replace another user's link in a sticky directory, so it must not follow it either:
    one line, exit 2, the victim (nobody's own 0600 file) untouched and nothing created anywhere."""
    sticky = world / "shared"
    victim = world / "nobody-home" / "secret"
    victim.parent.mkdir()
    os.chown(victim.parent, NOBODY, NOBODY)
    target = victim.parent / "new" if dangling else victim
    if not dangling:
        victim.write_text(SECRET)
        os.chmod(victim, 0o600)
        os.chown(victim, NOBODY, NOBODY)
    link = plant(sticky / "report.json", target)
    res = _as_nobody(["parse", LOG, "--json-out", str(link)], cwd=sticky)
    assert res.returncode == 2, res.stderr
    assert res.stdout == "" and res.stderr.count("\n") == 1 and "refusing to write" in res.stderr
    assert "symlink of uid 65533 in a sticky directory" in res.stderr
    assert os.path.islink(link)
    assert (not os.path.lexists(target)) if dangling else victim.read_text() == SECRET


@pytest.mark.parametrize("stdout_kind", ["pipe", "file"])
def test_json_out_dev_stdout_writes_to_our_own_stdout(tmp_path, stdout_kind):
    """/dev/stdout is itself a link (to /proc/self/fd/1): it is written through our descriptor, after the
    text report, and never replaced."""
    cmd = [sys.executable, "-m", "nccl_doctor", "parse", LOG, "--json-out", "/dev/stdout"]
    before = os.readlink("/dev/stdout")
    if stdout_kind == "file":
        out_file = tmp_path / "out.txt"
        with open(out_file, "w") as fh:
            res = subprocess.run(cmd, stdout=fh, stderr=subprocess.PIPE, text=True, timeout=120, check=False)
        out = out_file.read_text()
    else:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
        out = res.stdout
    assert res.returncode == 0, res.stderr
    text, _, doc = out.partition("\n{\n")
    assert "ND101" in text and json.loads("{\n" + doc)["verdict"] == "pass"
    assert os.readlink("/dev/stdout") == before


def test_a_fifo_behind_our_own_link_is_written_in_place(tmp_path, capsys):
    fifo = tmp_path / "report.fifo"
    os.mkfifo(fifo)
    link = tmp_path / "report.json"
    link.symlink_to(fifo.name)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["parse", LOG, "--json-out", str(link)]) == 0
    reader.join(10)
    assert json.loads(got[0])["verdict"] == "pass" and os.path.islink(link)


@needs_root
def test_a_fifo_behind_someone_elses_link_is_not_opened(sticky, tmp_path):
    """Opening it would hand the report to whoever reads that FIFO (and block without a reader): the link
    is replaced by the report instead. Run in a subprocess so a wrong open cannot hang the test run."""
    fifo = tmp_path / "attacker.fifo"
    os.mkfifo(fifo)
    link = plant(sticky / "report.json", fifo)
    res = subprocess.run([sys.executable, "-m", "nccl_doctor", "parse", LOG, "--json-out", str(link)],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode == 0, res.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert_report_at(link)


def test_probe_reports_and_snapshots_are_0600_parse_follows_the_umask(tmp_path, dgx, no_nccl_env, capsys):
    old = os.umask(0o022)
    try:
        assert main(["probe", "--root", str(dgx), "--json-out", str(tmp_path / "p.json"),
                     "--junit-out", str(tmp_path / "p.xml"), "--snapshot", str(tmp_path / "p.tar.gz")]) == 0
        assert main(["parse", LOG, "--json-out", str(tmp_path / "l.json")]) == 0
    finally:
        os.umask(old)
    modes = {p.name: stat.S_IMODE(os.stat(p).st_mode) for p in tmp_path.iterdir() if p.is_file()}
    assert modes == {"p.json": 0o600, "p.xml": 0o600, "p.tar.gz": 0o600, "l.json": 0o644}


def test_a_system_link_to_a_regular_file_is_never_replaced(tmp_path):
    """``--json-out /dev/stdin`` with stdin from a file: /dev/stdin is a link (via /proc/self/fd/0) to a
    regular file, and replacing it would break /dev/stdin machine-wide: refused, the file untouched."""
    given = tmp_path / "in.txt"
    given.write_text("input\n")
    with open(given) as stdin:
        res = subprocess.run([sys.executable, "-m", "nccl_doctor", "parse", LOG, "--json-out", "/dev/stdin"],
                             stdin=stdin, capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 2 and "a symlink in /dev is the system's" in res.stderr, res.stderr
    assert os.path.islink("/dev/stdin") and given.read_text() == "input\n"
