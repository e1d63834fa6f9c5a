"""probe on bad or dangerous input: snapshots never overwrite what is read, damaged archives give one
line, quoted values get a fix that names their origin, and a node without a NCCL interface never reads as fine."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from tests.helpers import sysfs_builder as b

from nccl_doctor.cli import main
from nccl_doctor.errors import InputError
from nccl_doctor.node.probe import check, probe_node, probe_report
from nccl_doctor.node.snapshot import check_snapshot_target

ROOT = Path(__file__).resolve().parent.parent


pytestmark = pytest.mark.usefixtures("no_nccl_env")


@pytest.fixture
def snap(dgx, tmp_path, capsys):
    path = tmp_path / "node.tar.gz"
    assert main(["probe", "--root", str(dgx), "--snapshot", str(path)]) == 0
    capsys.readouterr()
    return path


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    return err


# -- 1. --snapshot never overwrites the input ---------------------------------------------------------


def test_snapshot_refuses_its_own_root_archive(snap, tmp_path, capsys):
    before = snap.read_bytes()
    assert main(["probe", "--root", str(snap), "--snapshot", str(snap)]) == 2
    assert "refusing to overwrite the --root archive" in one_line_error(capsys)
    (tmp_path / "alias.tar.gz").symlink_to(snap.name)
    assert main(["probe", "--root", str(snap), "--snapshot", str(tmp_path / "alias.tar.gz")]) == 2
    assert "refusing" in one_line_error(capsys)
    assert snap.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["alias.tar.gz", "node.tar.gz"]  # no temp left


def test_snapshot_refuses_inside_root_tree(dgx, capsys):
    target = dgx / "etc" / "snap.tar.gz"
    assert main(["probe", "--root", str(dgx), "--snapshot", str(target)]) == 2
    assert "inside the --root tree" in one_line_error(capsys)
    assert not target.exists()


def test_snapshot_refuses_a_file_the_live_probe_reads(tmp_path):
    with pytest.raises(InputError, match="a file the probe reads"):
        check_snapshot_target(Path("/etc/hosts"), read=["/etc/hosts", "/proc/net/route"])
    check_snapshot_target(tmp_path / "ok.tar.gz", read=["/etc/hosts"])  # anything else is fine


def test_failed_snapshot_write_keeps_the_old_file(dgx, snap):
    """A write that dies part-way (file size limit: EFBIG) leaves the old snapshot intact and no temp file."""
    before = snap.read_bytes()
    code = ("import resource, signal, sys; from nccl_doctor.cli import main; "
            "signal.signal(signal.SIGXFSZ, signal.SIG_IGN); resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512)); "
            f"sys.exit(main(['probe', '--root', {str(dgx)!r}, '--snapshot', {str(snap)!r}]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT,
                       env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert p.returncode == 2, p.stderr
    assert "cannot write snapshot" in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert len(before) > 512 and snap.read_bytes() == before
    assert [x.name for x in snap.parent.iterdir()] == [snap.name]


# -- 2. damaged or wrong --root gives one line, exit 2 ------------------------------------------------


@pytest.mark.parametrize("keep", [10, 300, 2000, -100])
def test_truncated_snapshot_is_one_line(snap, tmp_path, capsys, keep):
    data = snap.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[:keep])
    assert main(["probe", "--root", str(cut)]) == 2
    err = one_line_error(capsys)
    assert str(cut) in err and "truncated or corrupt" in err


def test_root_not_a_snapshot_or_missing(tmp_path, capsys):
    text = tmp_path / "somefile.txt"
    text.write_text("hello\n")
    empty = tmp_path / "empty.tar.gz"
    empty.write_bytes(b"")
    for path in (text, empty):
        assert main(["probe", "--root", str(path)]) == 2
        assert f"--root {path}: not a directory or a .tar.gz snapshot" in one_line_error(capsys)
    assert main(["probe", "--root", str(tmp_path / "nope")]) == 2
    assert "does not exist" in one_line_error(capsys)


# -- 3. the quotes fix names where the value came from ------------------------------------------------


def test_quoted_ifname_fix_names_its_origin(dgx, tmp_path):
    env_fix = next(f for f in check(probe_node(dgx, {"NCCL_SOCKET_IFNAME": '"ib0"'})) if f.code == "ND204")
    assert env_fix.fix == "export NCCL_SOCKET_IFNAME=ib0" and "environment" in env_fix.message
    assert "conf" not in env_fix.fix
    spec = b.dgx_h100()
    spec["files"] = {"/etc/nccl.conf": "NCCL_SOCKET_IFNAME='=ib0'\n"}
    conf = next(f for f in check(probe_node(b.build(spec, tmp_path), {})) if f.code == "ND204")
    assert conf.fix == "remove the quotes in /etc/nccl.conf: NCCL_SOCKET_IFNAME==ib0"
    assert conf.where.file == "/etc/nccl.conf" and "/etc/nccl.conf" in conf.message


# -- 4. no NCCL interface: ND200 and the summary say NCCL cannot bootstrap --------------------------


@pytest.mark.parametrize("env, why", [
    ({"NCCL_SOCKET_IFNAME": "eth9"}, "ND202"),
    ({"NCCL_SOCKET_IFNAME": "docker"}, "ND203"),  # docker0 has no carrier
])
def test_no_interface_summary_says_cannot_bootstrap(dgx, env, why):
    node = probe_node(dgx, env)
    report = probe_report(node)
    # one problem, one failing finding: no "PASS ... TCP sockets over nothing" line, no second FAIL
    assert "ND200" not in {f.code for f in report.findings}
    assert [f.code for f in report.findings if f.severity.value == "fail"].count(why) == 1
    assert report.summary.endswith(f"NCCL cannot bootstrap: no interface selected (see {why})")


def test_healthy_summary_unchanged(dgx):
    report = probe_report(probe_node(dgx, {}))
    nd200 = next(f for f in report.findings if f.code == "ND200")
    assert nd200.severity.value == "pass" and nd200.message.startswith("NCCL bootstrap: ib0 (")
    assert report.summary.endswith("NCCL bootstrap ib0, transport IB")
