"""bench's launcher around a fake torchrun (a shell script as the Python it starts): a deadline that fires
during start-up says so, and c10d's shutdown-race dump reaches the terminal only when the run failed."""

import os
import time
from pathlib import Path

import pytest

from nccl_doctor.bench.view import stage_fix
from nccl_doctor.cluster.stderr import StderrFilter
from nccl_doctor.cluster.torchrun import LaunchConfig, self_launch


def feed_all(filt, data):
    return (b"".join(x for line in data.splitlines(keepends=True) for x in filt.feed(line))
            + b"".join(filt.flush())).decode()


@pytest.mark.serial  # times itself
def test_deadline_before_torchrun_started_says_so(tmp_path, monkeypatch):
    """A launcher still starting when the deadline fires: "start-up", not a network cause."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nexec sleep 30\n")
    slow.chmod(0o755)
    cfg = LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x", deadline_s=1)
    t0 = time.monotonic()
    out = self_launch(["bench"], cfg, python=str(slow), grace_s=2)
    assert time.monotonic() - t0 < 10 and out.timed_out and out.phase == "starting"
    assert out.stuck_stage() == "start-up"
    text = out.describe()
    assert text.startswith("deadline of 1 s expired during start-up on ") and "still importing torch" in text
    assert "shorter than the start-up took" in text and "cannot open or reach" not in text
    assert "--timeout" in stage_fix("start-up")
    os.unlink(out.log_path)



HOSTNAME_WARN = b"[W1130 12:41:53.153939801 socket.cpp:207] [c10d] The hostname of the client socket cannot be retrieved. err=-3\n"
STORE_RACE = b"""[W1130 12:50:01.123456789 TCPStore.cpp:138] [c10d] recvVector failed on SocketImpl(fd=5, addr=[n2]:40000, remote=[n1]:29622): Failed to recv, got 0 bytes. Connection was likely closed. Did the remote server shutdown or crash?
Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:682 (most recent call first):
frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 (0x7f in /v/torch/lib/libc10.so)
frame #1: <unknown function> + 0x5ba8bfe (0x7f in /v/torch/lib/libtorch_cpu.so)
frame #2: c10d::TCPStore::compareSet(std::string const&, std::vector<unsigned char> const&) + 0x2a9 (0x7f in /v/torch/lib/libtorch_cpu.so)

"""


def test_c10d_noise_and_shutdown_race_dumps_are_kept_off_the_terminal():
    f = StderrFilter()
    shown = feed_all(f, HOSTNAME_WARN + b"nccl-doctor bench: [1/2] all_gather world 1 MiB: busbw 0.4 GB/s\n"
                     + STORE_RACE + HOSTNAME_WARN + b"a later line\n")
    assert shown == "nccl-doctor bench: [1/2] all_gather world 1 MiB: busbw 0.4 GB/s\na later line\n"
    assert b"".join(f.deferred) == STORE_RACE  # shown only if the run failed
    # a rank's prefix, and other c10d warnings (not known harmless) still show
    other = b"[rank1]:[W1130 12:50:01.1 ProcessGroupGloo.cpp:1] [c10d] something new\n"
    assert feed_all(StderrFilter(), other) == other.decode()



@pytest.mark.parametrize("code", [0, 1])
def test_store_race_dump_shows_only_when_the_run_failed(code, tmp_path, monkeypatch, capfd):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    fake = tmp_path / "fake-python"
    dump = (HOSTNAME_WARN + STORE_RACE).decode().replace("'", "")
    fake.write_text(f"#!/bin/sh\nprintf '%s' '{dump}' >&2\nexit {code}\n")
    fake.chmod(0o755)
    cfg = LaunchConfig(nproc_per_node=1, rdzv_endpoint="127.0.0.1:1", rdzv_id="x", deadline_s=30)
    out = self_launch(["bench"], cfg, python=str(fake))
    err = capfd.readouterr().err
    assert "hostname of the client socket" not in err
    assert ("recvVector failed" in err) == (code != 0), err
    if code == 0:
        assert out.log_path is None  # a run that passed keeps no log
    else:
        assert "recvVector failed" in Path(out.log_path).read_text()  # the log keeps everything
        os.unlink(out.log_path)
