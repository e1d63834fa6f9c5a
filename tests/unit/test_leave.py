"""``leave``: a process that joined a torch.distributed group ends without finalization, everything it
printed still out; any other process ends the usual way (atexit handlers, temp dirs cleaned)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import atexit, sys
    from nccl_doctor import leave
    atexit.register(lambda: print("finalized", flush=True))  # stands for Gloo's teardown at exit
    if sys.argv[1] == "joined":
        leave.joined_process_group()
    print("report", end="")  # unflushed: leave must flush it before it goes
    sys.stderr.write("note")
    leave.leave(3)
""")


def _run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=60,
                          check=False)


def test_a_process_that_joined_a_group_skips_finalization_and_keeps_its_output():
    done = _run("joined")
    assert (done.returncode, done.stdout, done.stderr) == (3, "report", "note")


def test_any_other_process_ends_the_usual_way():
    done = _run("alone")
    assert (done.returncode, done.stdout, done.stderr) == (3, "reportfinalized\n", "note")


def test_the_console_script_and_python_m_end_through_leave():
    """Both entry points go through ``console_main``: a bench rank started either way ends at once."""
    from importlib.metadata import entry_points

    [script] = [e for e in entry_points(group="console_scripts") if e.name == "nccl-doctor"]
    assert script.value == "nccl_doctor.cli:console_main"
    done = subprocess.run([sys.executable, "-m", "nccl_doctor", "--version"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0 and done.stdout.strip()
