"""preflight's ``--plan-params`` line: the recommendation from a report in memory, or why there is none."""

import json
from pathlib import Path

from nccl_doctor.plan import plan_line, run_failed

FIXTURE = Path(__file__).parents[3] / "fixtures" / "plan" / "bench-gloo-1node.json"
HEAD = "plan (350M parameters, 80 GB GPUs, headroom 0.6): "
CPU_HEAD = "plan (350M parameters, Gloo/CPU figures, GPU memory not sized): "


def _doc(device="cuda"):
    """The fixture's figures, as a GPU run's (``device="cpu"``: as it was made, Gloo on CPU)."""
    doc = json.loads(FIXTURE.read_text())
    if device != "cpu":
        doc.update(device=device, backend="nccl")
    return doc


def test_the_recommendation_in_one_line():
    assert plan_line(350e6, _doc(), failed=None, origin="this report") \
        .startswith(HEAD + "use (1, 2) FSDP, 6.86 s of communication per step")


def test_a_cpu_runs_line_claims_no_gpu_memory():
    """A CPU preflight's --plan-params: never "80 GB GPUs" nobody measured, never "nothing fits" either."""
    line = plan_line(350e6, _doc("cpu"), failed=None, origin="this report")
    assert line.startswith(CPU_HEAD + "use (1, 2) FSDP, 6.86 s of communication per step") and "80 GB" not in line
    assert "nothing fits" not in plan_line(70e9, _doc("cpu"), failed=None, origin="r")


def test_a_failed_run_says_fix_the_network_first():
    failed = run_failed("preflight", "fail", "this report")
    assert plan_line(350e6, None, failed=failed, origin="this report") \
        == HEAD + "fix the network first (the preflight in this report failed (verdict fail))"


def test_nothing_fits_and_nothing_measured_are_lines_too():
    assert plan_line(70e9, _doc(), failed=None, origin="r").endswith("nothing fits; it would take 24 GPUs")
    doc = _doc()
    del doc["nnodes"]
    assert plan_line(350e6, doc, failed=None, origin="r").endswith("did not say its nodes and GPUs per node")
    assert "no bench results" in plan_line(350e6, None, failed=None, origin="r")
    assert run_failed("preflight", "pass", "r") is None
