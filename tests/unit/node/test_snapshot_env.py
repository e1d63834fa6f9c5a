"""``probe --snapshot`` keeps the NCCL/Gloo variables the probe read, and ``probe --root SNAPSHOT`` replays
them (``--env live``: this shell's instead), so a support bundle reproduces the node's report. This tool's
own ``NCCL_DOCTOR_*`` variables (the store secret) never enter a snapshot, and a forged environment member
is refused in one line."""

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.node.snapenv import ENV_MEMBER
from tests.helpers import sysfs_builder as b

pytestmark = pytest.mark.usefixtures("no_nccl_env")

TYPO = {"NCCL_SOCKET_IFNAME": "eht0", "NCCL_IB_HCA": "mlx5_0,mlx5_9", "GLOO_SOCKET_IFNAME": "nosuch",
        "TORCH_NCCL_BLOCKING_WAIT": "1"}


def _findings(capsys) -> list[tuple[str, str, str]]:
    doc = json.loads(capsys.readouterr().out)
    return [(f["code"], f["severity"], f["message"]) for f in doc["findings"]]


def _snapshot(root: Path, snap: Path, capsys, monkeypatch, env: dict[str, str]) -> list[tuple[str, str, str]]:
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    main(["probe", "--root", str(root), "--format", "json", "--snapshot", str(snap)])
    got = _findings(capsys)
    for k in env:
        monkeypatch.delenv(k)
    return got


@pytest.mark.parametrize("name", ["roce", "cloud_vm"])
def test_round_trip_replays_the_recorded_environment(roots, name, tmp_path, capsys, monkeypatch):
    snap = tmp_path / "n.tar.gz"
    first = _snapshot(roots[name], snap, capsys, monkeypatch, TYPO)
    assert ("ND202", "fail") in {(c, s) for c, s, _ in first}
    main(["probe", "--root", str(snap), "--format", "json"])  # this shell has none of them now
    assert _findings(capsys) == first
    again = tmp_path / "again.tar.gz"  # a snapshot of the snapshot keeps the same environment
    main(["probe", "--root", str(snap), "--format", "json", "--snapshot", str(again)])
    capsys.readouterr()
    main(["probe", "--root", str(again), "--format", "json"])
    assert _findings(capsys) == first


def test_env_live_applies_this_shells_variables(roots, tmp_path, capsys, monkeypatch):
    snap = tmp_path / "n.tar.gz"
    _snapshot(roots["cloud_vm"], snap, capsys, monkeypatch, TYPO)
    main(["probe", "--root", str(snap), "--format", "json", "--env", "live"])
    codes = {c for c, _, _ in _findings(capsys)}
    assert "ND202" not in codes and "ND216" not in codes
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eth9")  # the text report says whose variables applied
    main(["probe", "--root", str(snap)])
    out = capsys.readouterr().out
    assert "NCCL_SOCKET_IFNAME=eht0" in out and "recorded in" in out and "--env live" in out


def _members(snap: Path) -> dict[str, bytes]:
    with tarfile.open(snap) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]


def test_own_variables_never_enter_the_snapshot(roots, tmp_path, capsys, monkeypatch):
    """The attack: a secret in NCCL_DOCTOR_SECRET (or any NCCL_DOCTOR_*) must not leak into a bundle."""
    secret = "s3cr3t-" + tmp_path.name
    snap = tmp_path / "n.tar.gz"
    _snapshot(roots["cloud_vm"], snap, capsys, monkeypatch,
              {"NCCL_DOCTOR_SECRET": secret, "NCCL_DOCTOR_OTHER": secret, "NCCL_DEBUG": "INFO", "PATHX": secret})
    assert secret.encode() not in gzip.decompress(snap.read_bytes())
    doc = json.loads(_members(snap)[ENV_MEMBER.lstrip("/")])
    assert doc["variables"] == {"NCCL_DEBUG": "INFO"}


def _forge(src: Path, dst: Path, member: bytes) -> None:
    """``src`` with its environment member replaced by ``member``."""
    with tarfile.open(src) as tin, tarfile.open(dst, "w:gz") as tout:
        for m in tin.getmembers():
            if m.name != ENV_MEMBER.lstrip("/"):
                tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
        ti = tarfile.TarInfo(ENV_MEMBER.lstrip("/"))
        ti.size = len(member)
        tout.addfile(ti, io.BytesIO(member))


@pytest.mark.parametrize("member", [
    b"not json{",
    b"[1, 2]",
    json.dumps({"variables": {"NCCL_DOCTOR_SECRET": "x"}}).encode(),  # would set this tool's own variable
    json.dumps({"variables": {"LD_PRELOAD": "/tmp/x.so"}}).encode(),  # not a variable the probe records
    json.dumps({"variables": {"NCCL_DEBUG": 1}}).encode(),
    json.dumps({"variables": {}, "home": 5}).encode(),
])
def test_forged_environment_member_is_one_line(snap, tmp_path, capsys, member):
    forged = tmp_path / "forged.tar.gz"
    _forge(snap, forged, member)
    assert main(["probe", "--root", str(forged)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "not a recorded environment" in err and "--env live" in err
    assert main(["probe", "--root", str(forged), "--env", "live", "--format", "json"]) in (0, 1)  # the way out


def test_snapshot_without_environment_uses_this_shells(snap, tmp_path, capsys, monkeypatch):
    """An older snapshot (no member): the shell's variables apply, as before."""
    old = tmp_path / "old.tar.gz"
    with tarfile.open(snap) as tin, tarfile.open(old, "w:gz") as tout:
        for m in tin.getmembers():
            if m.name != ENV_MEMBER.lstrip("/"):
                tout.addfile(m, tin.extractfile(m) if m.isfile() else None)
    monkeypatch.setenv("NCCL_SOCKET_IFNAME", "eht0")
    main(["probe", "--root", str(old), "--format", "json"])
    assert "ND202" in {c for c, _, _ in _findings(capsys)}


def test_files_the_node_lacks_are_replayed_as_absent_not_unknown(tmp_path, capsys):
    """A node without IPv6 has no /proc/net/if_inet6: its snapshot says so, and the replay judges the
    addresses (no ND001); a snapshot that does not say so calls them unknown (ND001)."""
    root = b.build(b.cloud_vm(), tmp_path / "tree")
    (root / "proc/net/if_inet6").unlink()
    snap = tmp_path / "n.tar.gz"
    main(["probe", "--root", str(root), "--snapshot", str(snap), "--format", "json"])
    assert "ND001" in {c for c, _, _ in _findings(capsys)}  # a tree: missing means unknown
    said = tmp_path / "said.tar.gz"
    _forge(snap, said, json.dumps({"variables": {}, "absent": ["/proc/net/if_inet6"]}).encode())
    main(["probe", "--root", str(said), "--format", "json"])
    assert "ND001" not in {c for c, _, _ in _findings(capsys)}
    bad = tmp_path / "bad.tar.gz"
    _forge(snap, bad, json.dumps({"variables": {}, "absent": ["/etc/shadow"]}).encode())
    assert main(["probe", "--root", str(bad)]) == 2
    assert "'absent' lists files" in capsys.readouterr().err


def test_live_snapshot_round_trip_reproduces_the_fail(tmp_path, capsys, monkeypatch):
    """The issue's case, on this machine's own root: the FAIL of the live probe is the FAIL of the replay."""
    snap = tmp_path / "n.tar.gz"
    first = _snapshot(Path("/"), snap, capsys, monkeypatch, {"NCCL_SOCKET_IFNAME": "eht0"})
    assert ("ND202", "fail") in {(c, s) for c, s, _ in first}
    main(["probe", "--root", str(snap), "--format", "json"])
    assert _findings(capsys) == first
