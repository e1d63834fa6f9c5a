"""The CLI shell: usage errors exit 2 with one line, outputs never overwrite inputs."""

import subprocess
import sys

import pytest

from nccl_doctor.cli import main, write_output
from nccl_doctor.errors import DoctorError


def test_no_command_is_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        main([])
    assert exc.value.code == 2


def test_version(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.startswith("nccl-doctor ")


def test_write_output_refuses_an_input(tmp_path):
    log = tmp_path / "job.log"
    log.write_text("keep me")
    with pytest.raises(DoctorError, match="one of the inputs"):
        write_output(log, "{}", inputs=(log,))
    assert log.read_text() == "keep me"


def test_write_output_into_directory_is_an_error(tmp_path):
    with pytest.raises(DoctorError, match="is a directory"):
        write_output(tmp_path, "{}")


def test_write_output_is_atomic_and_creates_parents(tmp_path):
    out = tmp_path / "a" / "b" / "report.json"
    write_output(out, "{}\n")
    assert out.read_text() == "{}\n"
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "nccl_doctor", "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for cmd in ("probe", "parse", "bench", "preflight"):
        assert cmd in out
