"""``--from``: the figures a real bench JSON holds (fixtures/plan, a Gloo run), and files that are no such JSON."""

import json
from pathlib import Path

import pytest

from nccl_doctor.cli import main
from nccl_doctor.errors import InputError
from nccl_doctor.plan.inputs import MAX_FILE_BYTES, measured

FIXTURE = Path(__file__).parents[3] / "fixtures" / "plan" / "bench-gloo-1node.json"


def test_one_node_bench_gives_the_intra_node_figures_at_the_largest_size():
    found = measured(FIXTURE)
    assert (found.nodes.value, found.gpus_per_node.value) == (1, 2)
    bw = found.bandwidths
    assert bw.intra_all_gather.value == 0.142 and bw.intra_reduce_scatter.value == 0.3629  # 1 MiB, not 64 KiB
    assert "all_gather world busbw at 1048576 bytes" in bw.intra_all_gather.source
    assert bw.intra_all_gather.source.endswith("(latency-bound: every size measured is)")  # its latency_bound key
    assert str(FIXTURE) in bw.intra_all_gather.source
    assert bw.world_all_gather is None and bw.inter_all_reduce is None  # one node: no fabric measured
    assert found.failed is None


def _multi_node(tmp_path, *, per_node=2, verdict="pass"):
    doc = json.loads(FIXTURE.read_text())
    doc.update(nnodes=2, local_world_size=per_node, verdict=verdict, world_size=2 * per_node)
    extra = [{"op": op, "group": group, "size_bytes": 4 << 20, "busbw_gbps": bw, "wrong": 0}
             for op, group, bw in (("all_gather", "intra", 200.0), ("reduce_scatter", "intra", 190.0),
                                   ("all_reduce", "inter", 40.0), ("all_reduce", "world", 30.0))]
    bad = [{"op": "all_reduce", "group": "inter", "size_bytes": 1 << 30, "busbw_gbps": 99.0, "wrong": 3},
           {"op": "all_reduce", "group": "inter", "size_bytes": 1 << 31, "busbw_gbps": None}, "junk", 7]
    doc["results"] = doc["results"] + extra + bad
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({"command": "preflight", "verdict": verdict, "bench": doc}))  # nested: preflight
    return path


def test_multi_node_figures_by_group_and_wrong_or_missing_results_skipped(tmp_path):
    bw = measured(_multi_node(tmp_path)).bandwidths
    assert (bw.intra_all_gather.value, bw.intra_reduce_scatter.value) == (200.0, 190.0)
    assert (bw.world_all_gather.value, bw.world_reduce_scatter.value) == (0.142, 0.3629)
    assert bw.inter_all_reduce.value == 40.0  # the inter group; the wrong and null larger sizes are not figures


def test_one_rank_per_node_takes_the_world_all_reduce_as_inter_node(tmp_path):
    assert measured(_multi_node(tmp_path, per_node=1)).bandwidths.inter_all_reduce.value == 30.0


def test_a_failed_preflight_is_a_broken_fabric(tmp_path):
    assert "failed" in measured(_multi_node(tmp_path, verdict="fail")).failed


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "no object at the top"),
    ('{"command": "parse", "findings": []}', "no bench results"),
    ("[" * 100000 + "]" * 100000, "not JSON"),  # nesting past the parser's recursion limit
    ("\x00\xff", "not JSON"),
])
def test_malformed_files_are_one_line(tmp_path, content, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content.encode("utf-8", "surrogateescape") if isinstance(content, str) else content)
    with pytest.raises(InputError, match=message) as exc:
        measured(path)
    assert "\n" not in str(exc.value)


def test_a_file_past_the_limit_is_refused_unread(tmp_path):
    path = tmp_path / "huge.json"
    with path.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse: no disk spent
    with pytest.raises(InputError, match="larger than"):
        measured(path)


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(InputError, match="--from"):
        measured(tmp_path / "nope.json")


def test_a_cpu_run_says_so_and_a_gpu_run_does_not(tmp_path):
    assert "gloo figures measured on CPU, not on GPUs" in measured(FIXTURE).cpu_run
    gpu = tmp_path / "gpu.json"
    gpu.write_text(json.dumps({**json.loads(FIXTURE.read_text()), "device": "cuda", "backend": "nccl"}))
    assert measured(gpu).cpu_run is None


def test_a_cpu_runs_slow_inter_node_figure_is_gloo_not_a_broken_fabric(tmp_path, capsys):
    """Gloo between CPU nodes reads below the 5 GB/s a GPU fabric must reach: that is no ND501; the same figure
    given as --inter-gbps (the user's word for their GPU fabric) still is."""
    path = _multi_node(tmp_path)  # inter all-reduce 40 GB/s: make it Gloo-like
    doc = json.loads(path.read_text())
    for r in doc["bench"]["results"]:
        if isinstance(r, dict) and r.get("group") == "inter":
            r["busbw_gbps"] = 1.0
    path.write_text(json.dumps(doc))
    assert main(["plan", "--params", "350M", "--from", str(path), "--format", "json"]) == 0
    assert "ND501" not in capsys.readouterr().out
    assert main(["plan", "--params", "350M", "--from", str(path), "--inter-gbps", "1", "--format", "json"]) == 1
    assert "ND501" in capsys.readouterr().out
