"""``nccl-doctor plan`` end to end, in process (``nccl_doctor.cli.main``), and that it never imports torch."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from nccl_doctor.cli import main

FIXTURE = Path(__file__).parents[3] / "fixtures" / "plan" / "bench-gloo-1node.json"
FIGURES = ["--intra-gbps", "100", "--inter-gbps", "10"]


def _json(capsys, argv, code=0):
    assert main(["plan", *argv, "--format", "json"]) == code
    return json.loads(capsys.readouterr().out)


def test_json_keys_and_the_recommended_mesh(capsys):
    doc = _json(capsys, ["--params", "1B", "--nodes", "2", "--gpus-per-node", "4", "--gpu-mem-gb", "10",
                         "--headroom", "0.5", *FIGURES])
    assert [c["mesh"] for c in doc["candidates"]] == [[2, 4], [1, 8]]
    assert set(doc["candidates"][0]) == {"shard_size", "replicas", "mesh", "state_gb_per_gpu", "fits", "comm_s"}
    assert doc["recommended"] == {"shard_size": 4, "mesh": [2, 4], "comm_s": pytest.approx(0.16)}
    assert doc["inputs"]["params"] == {"value": 1e9, "source": "--params"}
    assert doc["inputs"]["inter_all_reduce_gbps"] == {"value": 10.0, "source": "--inter-gbps"}
    assert doc["inputs"]["headroom"]["source"] == "--headroom"
    assert [f["code"] for f in doc["findings"]] == ["ND500"] and doc["verdict"] == "pass"


def test_text_shows_the_table_the_reason_and_the_code(capsys):
    assert main(["plan", "--params", "1B", "--nodes", "2", "--gpus-per-node", "4", "--gpu-mem-gb", "10",
                 "--headroom", "0.5", "--step-compute-s", "0.32", *FIGURES]) == 0
    out = capsys.readouterr().out
    assert "(2, 4) HSDP *" in out and "(1, 8) FSDP" in out and "50%" in out
    assert "ND500 use (2, 4) HSDP: 160.0 ms of communication per step, because" in out
    assert 'init_device_mesh("cuda", (2, 4), mesh_dim_names=("dp", "fsdp"))' in out
    assert "MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)" in out


def test_communication_longer_than_compute_warns(capsys):
    doc = _json(capsys, ["--params", "1B", "--nodes", "2", "--gpus-per-node", "4", "--gpu-mem-gb", "10",
                         "--headroom", "0.5", "--step-compute-s", "0.1", *FIGURES])
    assert doc["verdict"] == "warn" and "ND503" in [f["code"] for f in doc["findings"]]
    assert doc["candidates"][0]["compute_share"] == pytest.approx(1.6)


def test_nothing_fits_fails_and_names_the_gpus_it_would_take(capsys):
    doc = _json(capsys, ["--params", "1T", "--nodes", "2", "--gpus-per-node", "8", *FIGURES], code=1)
    assert doc["recommended"] is None and doc["gpus_needed"] == 336
    assert doc["findings"][0]["code"] == "ND502" and "336 GPUs (42 nodes of 8)" in doc["findings"][0]["message"]


def test_a_broken_fabric_says_fix_the_network_first(capsys):
    doc = _json(capsys, ["--params", "7B", "--nodes", "2", "--gpus-per-node", "8", "--intra-gbps", "300",
                         "--inter-gbps", "1.2"], code=1)
    assert doc["candidates"] == [] and doc["recommended"] is None
    assert doc["findings"][0]["code"] == "ND501" and "fix the network first" in doc["findings"][0]["message"]


def test_a_failed_preflight_says_fix_the_network_first(capsys, tmp_path):
    failed = tmp_path / "preflight.json"
    failed.write_text(json.dumps({"command": "preflight", "verdict": "fail", "stage": "rendezvous"}))
    doc = _json(capsys, ["--params", "7B", "--from", str(failed)], code=1)
    assert doc["findings"][0]["code"] == "ND501" and "failed" in doc["findings"][0]["message"]


def test_from_a_real_bench_json(capsys):
    """The fixture: Gloo, one node of 2 ranks; 350M params -> 2.8 GB a GPU, the one mesh (1, 2)."""
    doc = _json(capsys, ["--params", "350M", "--from", str(FIXTURE)])
    assert doc["recommended"]["mesh"] == [1, 2]
    p = 350e6  # S = 2: AG 2 P 2 (1/2) / 0.142 GB/s + RS P 4 (1/2) / 0.3629 GB/s
    assert doc["recommended"]["comm_s"] == pytest.approx(2 * p * 2 / 2 / 0.142e9 + p * 4 / 2 / 0.3629e9, rel=1e-5)
    assert doc["inputs"]["nodes"]["source"].endswith(": nnodes")
    assert "1048576 bytes" in doc["inputs"]["intra_all_gather_gbps"]["source"]


def test_a_cpu_runs_figures_size_no_gpu_memory(capsys):
    """The fixture is Gloo on CPU: the plan keeps its mesh and times, says they are CPU figures (ND504, WARN),
    and never says a mesh fits GPUs nobody measured -- not even for 70B (issue 22 point 14)."""
    doc = _json(capsys, ["--params", "350M", "--from", str(FIXTURE)])
    assert doc["verdict"] == "warn" and [f["code"] for f in doc["findings"]] == ["ND504", "ND500"]
    assert "gloo figures measured on CPU, not on GPUs" in doc["findings"][0]["message"]
    assert "GPU memory is not sized" in doc["findings"][0]["message"]
    assert [c["fits"] for c in doc["candidates"]] == [None]
    assert doc["inputs"]["gpu_mem_gb"]["value"] is None and "not sized" in doc["inputs"]["gpu_mem_gb"]["source"]
    assert doc["recommended"]["mesh"] == [1, 2] and doc["summary"].endswith("(Gloo/CPU figures)")
    big = _json(capsys, ["--params", "70B", "--from", str(FIXTURE)])
    assert "ND502" not in [f["code"] for f in big["findings"]] and "gpus_needed" not in big
    assert main(["plan", "--params", "350M", "--from", str(FIXTURE)]) == 0
    out = capsys.readouterr().out
    assert "not sized" in out and "fits: not sized (give --gpu-mem-gb)" in out and "because it is the only mesh (" in out


def test_a_cpu_run_with_gpu_memory_given_sizes_from_the_flag_alone(capsys):
    doc = _json(capsys, ["--params", "350M", "--from", str(FIXTURE), "--gpu-mem-gb", "80"])
    assert [c["fits"] for c in doc["candidates"]] == [True]
    assert "GPU memory is sized from --gpu-mem-gb alone" in doc["findings"][0]["message"]


def test_a_gpu_runs_figures_are_sized_with_the_default(capsys, tmp_path):
    gpu = tmp_path / "bench.json"
    gpu.write_text(json.dumps({**json.loads(FIXTURE.read_text()), "device": "cuda", "backend": "nccl"}))
    doc = _json(capsys, ["--params", "350M", "--from", str(gpu)])
    assert [f["code"] for f in doc["findings"]] == ["ND500"] and [c["fits"] for c in doc["candidates"]] == [True]
    assert doc["inputs"]["gpu_mem_gb"] == {"value": 80.0, "source": "default"}


def test_a_flag_overrides_the_file(capsys):
    doc = _json(capsys, ["--params", "350M", "--from", str(FIXTURE), "--intra-gbps", "100"])
    assert doc["inputs"]["intra_all_gather_gbps"] == {"value": 100.0, "source": "--intra-gbps"}


@pytest.mark.parametrize(("argv", "message"), [
    (["--params", "7B", "--nodes", "2", "--intra-gbps", "1"], "--gpus-per-node and --inter-gbps: give them"),
    (["--params", "seven", "--nodes", "1", "--gpus-per-node", "8"], "--params"),
    (["--params", "7B", "--from", str(FIXTURE), "--nodes", "4"], "--inter-gbps"),  # a 1-node bench has no fabric
    (["--params", "7B", "--nodes", "1", "--gpus-per-node", "8"], "--intra-gbps"),
])
def test_missing_or_bad_input_is_one_line_exit_2(capsys, argv, message):
    assert main(["plan", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("nccl-doctor plan: error:") and message in err and err.count("\n") == 1


def test_the_readmes_plan_params_70b_names_every_missing_figure_at_once(capsys):
    """Not four runs of one error each (--nodes, then --gpus-per-node, then ...): there is no default a plan
    could honestly fall back on, so it says everything it needs and where it can come from."""
    assert main(["plan", "--params", "70B"]) == 2
    assert capsys.readouterr().err == (
        "nccl-doctor plan: error: --nodes, --gpus-per-node, --intra-gbps and --inter-gbps: give them, or --from a "
        "bench or preflight JSON report (this cluster's own figures)\n")


def test_one_node_needs_no_inter_node_figure(capsys):
    assert main(["plan", "--params", "7B", "--nodes", "1"]) == 2
    assert "error: --gpus-per-node and --intra-gbps: give them," in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--headroom", "1.5"], ["--nodes", "0"], ["--inter-gbps", "nan"],
                                  ["--param-dtype", "int8"]])
def test_out_of_range_flags_are_usage_errors(argv):
    with pytest.raises(SystemExit) as exc:
        main(["plan", "--params", "7B", *argv])
    assert exc.value.code == 2


def test_json_out_over_the_input_is_refused(capsys, tmp_path):
    bench = tmp_path / "bench.json"
    bench.write_bytes(FIXTURE.read_bytes())
    assert main(["plan", "--params", "350M", "--from", str(bench), "--json-out", str(bench)]) == 2
    assert bench.read_bytes() == FIXTURE.read_bytes()  # nothing the user gave is lost


def test_plan_never_imports_torch():
    code = ("import sys, io, contextlib; from nccl_doctor.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    rc = main(['plan', '--params', '70B', '--from', {str(FIXTURE)!r}, '--nodes', '16',"
            " '--gpus-per-node', '8', '--inter-gbps', '45'])\n"
            "assert rc in (0, 1), rc\n"
            "assert 'torch' not in sys.modules, 'plan imported torch'\n")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
