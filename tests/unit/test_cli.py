"""The CLI shell: usage errors exit 2 with one line, outputs never overwrite inputs, the verdict decides the
exit code even when the reader of stdout left."""

import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.cli import main, write_output
from nccl_doctor.errors import DoctorError

ROOT = Path(__file__).resolve().parents[2]
LOG = ROOT / "fixtures" / "nccl-logs" / "041-h20-ib-gdrdma-cumem-2node.log"


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
    with pytest.raises(DoctorError, match=r"is .inside. the input"):
        write_output(log, "{}", inputs=(log,))
    assert log.read_text() == "keep me"


def test_write_output_refuses_a_file_inside_an_input_directory(tmp_path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs/x.log").write_text("keep me")
    with pytest.raises(DoctorError, match="input"):
        write_output(tmp_path / "logs/x.log", "{}", inputs=(tmp_path / "logs",))
    with pytest.raises(DoctorError, match="input"):
        write_output(tmp_path / "logs/new.json", "{}", inputs=(tmp_path / "logs",))
    assert (tmp_path / "logs/x.log").read_text() == "keep me"


def test_write_output_into_directory_is_an_error(tmp_path):
    with pytest.raises(DoctorError, match="is a directory"):
        write_output(tmp_path, "{}")


def test_write_output_is_atomic_and_readable_by_others(tmp_path):
    out = tmp_path / "report.json"
    out.write_text("old")
    write_output(out, "{}\n")
    assert out.read_text() == "{}\n"
    assert [p.name for p in out.parent.iterdir()] == ["report.json"]  # no temp file left
    assert out.stat().st_mode & 0o044  # not mkstemp's 0600


def test_write_output_never_creates_directories(tmp_path):
    with pytest.raises(DoctorError, match="does not exist"):
        write_output(tmp_path / "a" / "b" / "report.json", "{}")
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize(("argv", "msg"), [
    (["--json-out", "{d}"], "is a directory"),
    (["--json-out", "{d}/missing/x.json"], "does not exist"),
    (["--json-out", "{d}/r.x", "--junit-out", "{d}/r.x"], "same file"),
    (["--json-out", "-"], "use --format json"),
    (["--json-out", "{log}"], "the input"),
])
def test_bad_output_paths_fail_before_any_work(tmp_path, capsys, argv, msg):
    log = tmp_path / "job.log"
    log.write_text("h:1:1 [0] NCCL INFO NCCL version 2.21.5+cuda12.4\n")
    argv = [a.format(d=tmp_path, log=log) for a in argv]
    assert main(["parse", str(log), *argv]) == 2
    err = capsys.readouterr().err
    assert msg in err and len(err.strip().splitlines()) == 1
    assert log.read_text().startswith("h:1:1")


def test_verdict_exit_code_survives_a_closed_pipe():
    """`nccl-doctor parse log | head -1` under pipefail: the exit code is the verdict's, not rich's 1."""
    p = subprocess.run(f"{sys.executable} -m nccl_doctor parse {LOG} | true; "
                       "echo ${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                       text=True, timeout=60, check=False)
    assert p.stdout.strip() == "0", p.stderr


def test_help_lists_every_command():
    out = subprocess.run([sys.executable, "-m", "nccl_doctor", "--help"], capture_output=True, text=True,
                         timeout=60, check=True).stdout
    for cmd in ("probe", "parse", "bench", "preflight"):
        assert cmd in out


def test_parse_refuses_its_own_input_as_output_before_any_work(tmp_path, capsys):
    log = tmp_path / "job.log"
    log.write_bytes(LOG.read_bytes())
    before = log.read_bytes()
    assert main(["parse", str(log), "--json-out", str(log)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "is (inside) the input" in err and log.read_bytes() == before
